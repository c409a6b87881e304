"""Cluster-centred training (``local="clusters"``, Algorithm 1) against the number of centres:
the statistics of every centre in one pass over the data, against one pass per centre.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_clusters.py [--quick]

For N_C centres (training points drawn at random) and a shared RFF map (Gaussian kernel,
d = 2, m = 256, N = 200,000 rows streamed from a ``.npy`` file through a memory map, in the
engine's default chunks), it times

* **one pass**: :func:`scalegp.local.centered.centred_statistics` (each chunk read once, the
  features of its shifted rows formed for every centre, one symmetric rank-k update per centre),
  with ``group=1`` and ``group=8`` (eight centres' features per call);
* **N_C passes**: :func:`scalegp.engine.statistics.accumulate_statistics` once per centre on x - c,
  each pass reading the whole file again;

and reports seconds, rows read from the file, the peak of ``tracemalloc`` during the call
(numpy reports its buffers to it) and the N_C m x m systems a fitted model keeps
(8 (m^2 + m) N_C bytes). Both compute the same statistics (checked to 1e-10 here); the
arithmetic is the same N_C N m^2, so the one pass saves the N_C - 1 re-reads and the per-pass
overheads. Writes ``benchmarks/results/clusters.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import scalegp as sg  # noqa: E402
from scalegp import _memory, features  # noqa: E402
from scalegp import engine  # noqa: E402
from scalegp import local  # noqa: E402
from scalegp.data.base import IterableSource  # noqa: E402


class MemmapSource:
    """Re-iterable (X, y) blocks read from an ``.npy`` file of [X | y] rows, counting rows."""

    def __init__(self, path: Path, n_dims: int, chunk_rows: int, shift=None):
        self.path, self.n_dims, self.chunk_rows = path, n_dims, chunk_rows
        self.shift = None if shift is None else np.asarray(shift)
        self.rows_read = 0

    def __iter__(self):
        table = np.load(self.path, mmap_mode="r")
        for start in range(0, table.shape[0], self.chunk_rows):
            block = np.array(table[start:start + self.chunk_rows])     # the read
            self.rows_read += block.shape[0]
            X = block[:, :self.n_dims]
            yield (X if self.shift is None else X - self.shift), block[:, self.n_dims]


def measure(call):
    tracemalloc.start()
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, peak


def run(n_rows: int, n_components: int, centre_counts, folder: Path) -> list[dict]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n_rows, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n_rows)
    path = folder / "table.npy"
    np.save(path, np.column_stack([X, y]))
    kernel = sg.Gaussian(length_scale=[0.5, 0.5])
    at_map = features.get("rff").build(X, kernel, n_components, np.random.default_rng(1)).at(
        kernel)
    chunk_rows = _memory.default_chunk_size(n_components)
    rows = []
    for n_centres in centre_counts:
        centres = X[rng.choice(n_rows, size=n_centres, replace=False)]
        row = {"n_centres": n_centres, "n_rows": n_rows, "m": n_components,
               "systems_mib": local.local_memory_bytes(n_centres, n_components) / 2**20}
        reference = None
        for group in (1, 8):
            source = MemmapSource(path, 2, chunk_rows)
            stats, seconds, peak = measure(lambda: local.centred_statistics(
                at_map, IterableSource(source), centres, group=group))
            row[f"one_pass_group{group}"] = {"seconds": seconds, "rows_read": source.rows_read,
                                             "peak_mib": peak / 2**20}
            reference = reference or stats
        sources = [MemmapSource(path, 2, chunk_rows, shift=c) for c in centres]
        alone, seconds, peak = measure(lambda: [
            engine.accumulate_statistics(at_map, IterableSource(s)) for s in sources])
        row["passes"] = {"seconds": seconds, "rows_read": sum(s.rows_read for s in sources),
                         "peak_mib": peak / 2**20}
        row["max_gram_difference"] = float(max(
            np.max(np.abs(a.gram - b.gram)) / np.max(np.abs(b.gram))
            for a, b in zip(reference, alone)))
        assert row["max_gram_difference"] < 1e-10, row
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(rows, command) -> str:
    lines = ["# Cluster-centred statistics: one pass against one pass per centre", "",
             f"`{command}` on {time.strftime('%Y-%m-%d')}, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
             f"N = {rows[0]['n_rows']:,}, m = {rows[0]['m']} (RFF, d = 2), rows streamed "
             "from a memory-mapped .npy file.", "",
             "| N_C | one pass (s) | one pass, 8 centres per call (s) | N_C passes (s) | "
             "passes / one pass | rows read: one pass / passes | peak traced MiB: one pass / "
             "passes | systems kept (MiB) |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        one, grouped, passes = row["one_pass_group1"], row["one_pass_group8"], row["passes"]
        best = min(one["seconds"], grouped["seconds"])
        lines.append(
            f"| {row['n_centres']} | {one['seconds']:.2f} | {grouped['seconds']:.2f} | "
            f"{passes['seconds']:.2f} | {passes['seconds'] / best:.2f} | "
            f"{one['rows_read']:,} / {passes['rows_read']:,} | "
            f"{one['peak_mib']:.1f} / {passes['peak_mib']:.1f} | {row['systems_mib']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 20,000, N_C up to 16")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/clusters"))
    args = parser.parse_args(argv)
    n_rows, counts = (20_000, (1, 4, 16)) if args.quick else (200_000, (1, 4, 16, 64))
    with tempfile.TemporaryDirectory() as folder:
        rows = run(n_rows, 256, counts, Path(folder))
    command = "python benchmarks/bench_clusters.py " + " ".join(argv or sys.argv[1:])
    if not args.quick:
        Path(args.out + ".json").write_text(json.dumps(rows, indent=2))
        Path(args.out + ".md").write_text(markdown(rows, command.strip()))
        print(f"wrote {args.out}.json and {args.out}.md")
    else:
        print(markdown(rows, command.strip()))


if __name__ == "__main__":
    main()
