"""Wall time, CPU time and peak memory of the whole ``scalegp demo``, for versions of the package
run alternately (issue 27, item 3: under 15 s and 500 MB on the 2-core machine).

    .venv/bin/python benchmarks/bench_demo_speed.py --src /work/main/src src --repeat 3

Each run is ``PYTHONPATH=<src> python -m scalegp demo --out <tmp>.png [--model ...]`` under
``/usr/bin/time -v`` (a fresh process: imports, learning, the exact-GP comparison, the
predictions of the test points, the region and the 82,800-point grid with std, and the
figure); the versions alternate run by run so that both see the same load, and the load
average before each run is printed with it. Prints one markdown row per run and the medians.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

FIELDS = {
    "wall_s": (r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", None),
    "user_s": (r"User time \(seconds\): (\S+)", float),
    "sys_s": (r"System time \(seconds\): (\S+)", float),
    "peak_mb": (r"Maximum resident set size \(kbytes\): (\d+)", lambda v: int(v) / 1024.0),
    "rmse_m": (r"^\w+: test RMSE ([\d.]+) m", float),
    "nlpd": (r"^\w+: test RMSE [\d.]+ m, NLPD (-?[\d.]+)", float),
    "fit_s": (r"^\w+: test RMSE .* fit ([\d.]+) s", float),
    "exact_fit_s": (r"^exact GP on .* fit ([\d.]+) s", float),
    "n_exact": (r"^exact GP on (\d+) of", int),
}


def wall_seconds(text: str) -> float:
    parts = [float(p) for p in text.split(":")]
    seconds = 0.0
    for part in parts:
        seconds = 60.0 * seconds + part
    return seconds


def run(src: str, model: str | None, folder: Path, index: int) -> dict:
    out = folder / f"demo-{index}.png"
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "scalegp", "demo", "--out",
               str(out)] + ([] if model is None else ["--model", model])
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONPATH": src}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    text = done.stdout + done.stderr
    row = {"src": src, "load": load}
    for name, (pattern, convert) in FIELDS.items():
        match = re.search(pattern, text, flags=re.MULTILINE)
        value = None if match is None else match.group(1)
        row[name] = (wall_seconds(value) if name == "wall_s" and value else
                     convert(value) if value is not None and convert else value)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", nargs="+", required=True, help="package folders to compare")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    columns = ["src", "load", "wall_s", "user_s", "sys_s", "peak_mb", "fit_s", "exact_fit_s",
               "n_exact", "rmse_m", "nlpd"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(args.repeat):
            for src in args.src:
                row = run(str(Path(src).resolve()), args.model, Path(folder), len(rows))
                rows.append(row)
                print("| " + " | ".join(
                    f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                    for c in columns) + " |", flush=True)
    print("\nmedians:")
    for src in args.src:
        mine = [row for row in rows if row["src"] == str(Path(src).resolve())]
        summary = {c: statistics.median(row[c] for row in mine)
                   for c in ("wall_s", "user_s", "sys_s", "peak_mb", "fit_s", "exact_fit_s")
                   if all(row[c] is not None for row in mine)}
        print(f"- {src}: " + ", ".join(f"{k} {v:.2f}" for k, v in summary.items()))


if __name__ == "__main__":
    main()
