"""Peak memory of fits streamed from files, against the number of rows.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_streaming.py            # 1e5 and 1e7 rows
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_streaming.py --rows 1e4 1e6 --formats npy

Writes ``benchmarks/results/streaming.md`` (``--out``). For every format (.npy, Parquet with
row groups of 65,536 rows, CSV) and row count N, a file of N rows (x0, x1 uniform on [-2, 2],
y = sin(2 x0) + 0.3 x1 + 0.1 noise) is written in blocks, and each fit runs in a fresh
subprocess that imports scalegp, opens the file as a :mod:`scalegp.data.sources` source and fits
from it:

* ``glf-learn``: Gauss-Legendre features (8 x 8 nodes, m = 64) with hyperparameter learning
  (normalize_X, normalize_y): the summary pass, one statistics pass (fixed basis: learning then
  costs O(m^3) per step, no pass) and the pass that reads the probe rows;
* ``rff-fixed``: random Fourier features (m = 64) at fixed hyperparameters (optimize=False).

Reported: the peak resident set of the subprocess (VmHWM of /proc/self/status; it counts the
file pages mapped at once too), the resident set after the imports (the floor: Python, numpy,
scipy, scikit-learn, pyarrow), the fit time, and the ratio of the peaks of the largest to the
smallest N. Flat memory means that ratio is near 1: an O(N) buffer of one float64 per row is
80 MB at N = 1e7.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

FORMATS = ("npy", "parquet", "csv")
MODELS = {
    "glf-learn": dict(approximation="glf", n_components=64, optimize=True),
    "rff-fixed": dict(approximation="rff", n_components=64, optimize=False),
}
BLOCK = 2**20
PARQUET_ROW_GROUP = 65536

CHILD = r"""
import json, sys, time, warnings
import scalegp as sg
from scalegp.data.sources import open_source
import pyarrow.parquet  # noqa: F401 (the floor includes it for every format)

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024

floor = status("VmRSS:")
path, options = sys.argv[1], json.loads(sys.argv[2])
warnings.simplefilter("ignore")
start = time.perf_counter()
model = sg.LowRankGPRegressor(normalize_X=True, normalize_y=True, random_state=0, **options)
model.fit(open_source(path, 2))  # y is the third column (named x2 in .npy)
print(json.dumps({"seconds": time.perf_counter() - start, "peak": status("VmHWM:"),
                  "floor": floor, "lml": model.log_marginal_likelihood_value_}))
"""


def write_file(folder: Path, fmt: str, n: int, seed: int = 0) -> Path:
    """N rows written in blocks (the writer never holds the file)."""
    rng = np.random.default_rng(seed)
    path = folder / f"rows-{n}.{fmt}"

    def blocks():
        for start in range(0, n, BLOCK):
            rows = min(BLOCK, n - start)
            X = rng.uniform(-2, 2, size=(rows, 2))
            y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(rows)
            yield np.column_stack([X, y])

    if fmt == "npy":
        array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, 3))
        start = 0
        for block in blocks():
            array[start:start + len(block)] = block
            start += len(block)
        array.flush()
        del array
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq
        schema = pa.schema([("x0", pa.float64()), ("x1", pa.float64()), ("y", pa.float64())])
        with pq.ParquetWriter(path, schema) as writer:
            for block in blocks():
                writer.write_table(pa.table({"x0": block[:, 0], "x1": block[:, 1],
                                             "y": block[:, 2]}),
                                   row_group_size=PARQUET_ROW_GROUP)
    else:
        with open(path, "w") as handle:
            handle.write("x0,x1,y\n")
            for block in blocks():
                np.savetxt(handle, block, delimiter=",", fmt="%.17g")
    return path


def measure(path: Path, options: dict) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), json.dumps(options)],
                            capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"the fit of {path} failed:\n{result.stderr}")
    return json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e5, 1e7])
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=list(FORMATS))
    parser.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    parser.add_argument("--out", default="benchmarks/results/streaming.md")
    args = parser.parse_args()
    sizes = [int(n) for n in args.rows]
    lines = ["# Streamed fits: peak memory against the number of rows\n",
             f"`OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_streaming.py --rows "
             f"{' '.join(f'{n:.0e}' for n in sizes)} --formats {' '.join(args.formats)}`, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
             "| format | model | rows | file (MB) | fit (s) | floor (MiB) | peak (MiB) | "
             "peak / peak at the fewest rows |", "|---|---|---|---|---|---|---|---|"]
    records = []
    with tempfile.TemporaryDirectory() as folder:
        for fmt in args.formats:
            paths = {n: write_file(Path(folder), fmt, n) for n in sizes}
            for name in args.models:
                first = None
                for n in sizes:
                    result = measure(paths[n], MODELS[name])
                    first = first or result["peak"]
                    record = dict(format=fmt, model=name, rows=n,
                                  file_mb=paths[n].stat().st_size / 1e6, **result,
                                  ratio=result["peak"] / first)
                    records.append(record)
                    line = (f"| {fmt} | {name} | {n:.0e} | {record['file_mb']:.0f} | "
                            f"{result['seconds']:.1f} | {result['floor'] / 2**20:.0f} | "
                            f"{result['peak'] / 2**20:.0f} | {record['ratio']:.3f} |")
                    lines.append(line)
                    print(line, flush=True)
            for path in paths.values():
                path.unlink()
    Path(args.out).write_text("\n".join(lines) + "\n")
    Path(args.out).with_suffix(".json").write_text(json.dumps(records, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
