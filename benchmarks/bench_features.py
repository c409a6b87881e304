"""Feature-map evaluation time, the ORF/SORF phase cost as d grows, and the kernel error
versus feature time of every map that supports the Gaussian kernel.

    .venv/bin/python benchmarks/bench_features.py           # full run (~3-5 min on 2 cores)
    .venv/bin/python benchmarks/bench_features.py --quick   # smoke run (small N, < 1 min)

The full run writes ``benchmarks/results/features.md`` and ``features.png`` (``--out`` to
change the folder; a quick run only prints unless ``--out`` is given). What is measured:

1. Evaluation time of ``features(X, kernel)`` for every registered map that supports the
   Gaussian kernel (``scalegp.features.names()``), N = 10^5 standard-normal inputs, d = 8
   and 16, a budget of m = 1024 real columns (deterministic rules report the columns they
   actually have). For Fourier maps the phases z = U omega^T (``phases``: a GEMM for every
   map but SORF, three fast Walsh-Hadamard transforms per block for SORF) are timed on their
   own, and the rest of ``features`` (cos/sin and scaling) is reported separately, because
   the trigonometric part is the same for every Fourier map and dominates at small d.
2. Phase time of ORF (dense GEMM) against SORF (fast transform) for d = 8 ... 1024, N = 10^4,
   S = max(512, p) frequencies (at least one full SORF block).
3. Relative Frobenius kernel error ||K - K~||_F / ||K||_F on a 1,000-point subsample of UCI
   kin40k (inputs standardized, isotropic Gaussian kernel, length scale by the median
   heuristic) against the time to compute the features of all 40,000 rows, budgets
   m = 64 ... 1024, mean over 5 seeds (one for deterministic rules).

Times are CPU seconds of this process (``time.process_time``), which the other jobs on the
shared machines disturb less than wall time. BLAS runs single-threaded (threadpoolctl, the
``bench`` extra), like numpy's element-wise functions, so CPU time is also the wall time of
an idle machine: on the shared 2-core machines a multi-threaded OpenBLAS call with 16 x 16
or d x S operands was measured 10-30x slower than a single-threaded one. Phase times are
the best of 3 runs; full evaluations (seconds each at N = 10^5) run once. The load average
is recorded.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "src" / "scalegp").is_dir():
    sys.path.insert(0, str(ROOT / "src"))

import scalegp as sg  # noqa: E402
from scalegp import features, metrics  # noqa: E402
from scalegp.experiments.quadrature import find_uci_dir  # noqa: E402
from scalegp.features._fourier import FourierFeatureMap  # noqa: E402

DATA = find_uci_dir() / "kin40k.csv"        # $SCALEGP_UCI_DIR, else ../shared/data/uci
BUDGETS = (64, 128, 256, 512, 1024)
SWEEP_DIMS = (8, 16, 64, 256, 1024)


def best_time(function, repeats: int) -> float:
    """The smallest CPU time of ``repeats`` calls.

    CPU time of this process (all of its threads; BLAS runs on one): unlike wall time it
    does not count the time other jobs on the shared machine hold the cores.
    """
    times = []
    for _ in range(repeats):
        start = time.process_time()
        function()
        times.append(time.process_time() - start)
    return min(times)


def gaussian_kernel(length_scale: float) -> sg.Gaussian:
    """A Gaussian kernel with a narrow box (the Gauss-Legendre rules are built for the box)."""
    return sg.Gaussian(length_scale=length_scale, variance=1.0,
                       length_scale_bounds=(length_scale / 3, length_scale * 3),
                       variance_bounds=(0.1, 10.0))


def gaussian_maps(kernel) -> list[str]:
    return [name for name in features.names() if features.get(name).supports(kernel)]


def try_build(name, X, kernel, n_components, seed):
    """The map, or the one-line reason it cannot be built with this budget."""
    try:
        return features.get(name).build(X, kernel, n_components, np.random.default_rng(seed))
    except (ValueError, TypeError) as error:
        return str(error).splitlines()[0]


# ----------------------------------------------------------------------------- 1. timing

def time_maps(n_samples: int, n_dims: int, repeats: int) -> list[dict]:
    """features() once; for Fourier maps also phases() (best of ``repeats``), and the rest
    (cos/sin and scaling) as the difference."""
    X = np.random.default_rng(0).standard_normal((n_samples, n_dims))
    kernel = gaussian_kernel(np.sqrt(n_dims))
    rows = []
    for name in gaussian_maps(kernel):
        fmap = try_build(name, X, kernel, 1024, 0)
        if isinstance(fmap, str):
            rows.append({"name": name, "d": n_dims, "skipped": fmap})
            continue
        row = {"name": name, "d": n_dims, "m": fmap.n_components,
               "total": best_time(lambda: fmap.features(X, kernel), 1)}
        if isinstance(fmap, FourierFeatureMap):
            U = fmap.at(kernel).scaled_inputs(X)
            row["phases"] = best_time(lambda: fmap.phases(U), repeats)
            row["rest"] = row["total"] - row["phases"]
        rows.append(row)
        print(f"  timing d={n_dims} {name}: {row}", flush=True)
    return rows


# ----------------------------------------------------------------------------- 2. sweep

def phase_sweep(n_samples: int, repeats: int) -> list[dict]:
    rows = []
    for n_dims in SWEEP_DIMS:
        X = np.random.default_rng(1).standard_normal((n_samples, n_dims))
        kernel = gaussian_kernel(np.sqrt(n_dims))
        n_components = 2 * max(512, n_dims)
        row = {"d": n_dims, "S": n_components // 2}
        for name in ("orf", "sorf"):
            fmap = features.get(name).build(X, kernel, n_components, np.random.default_rng(0))
            U = fmap.at(kernel).scaled_inputs(X)
            row[name] = best_time(lambda: fmap.phases(U), repeats)
        rows.append(row)
        print(f"  sweep {row}", flush=True)
    return rows


# ----------------------------------------------------------------------------- 3. frontier

def load_kin40k(n_subsample: int):
    table = np.loadtxt(DATA, delimiter=",", skiprows=1)
    X = table[:, :-1]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    rows = np.random.default_rng(0).choice(len(X), size=n_subsample, replace=False)
    subsample = X[rows]
    distances = np.sqrt(((subsample[:, None, :] - subsample[None, :, :]) ** 2).sum(-1))
    length_scale = float(np.median(distances[np.triu_indices(n_subsample, 1)]))
    return X, subsample, length_scale


def frontier(X_all, X_sub, length_scale, n_seeds: int) -> list[dict]:
    """Mean error over seeds on the subsample; one timed evaluation on all rows."""
    kernel = gaussian_kernel(length_scale)
    K = kernel(X_sub)
    rows = []
    for name in gaussian_maps(kernel):
        for budget in BUDGETS:
            maps = [try_build(name, X_sub, kernel, budget, seed) for seed in range(n_seeds)]
            if isinstance(maps[0], str):
                rows.append({"name": name, "budget": budget, "skipped": maps[0]})
                continue
            errors = []
            for fmap in maps:
                Psi = fmap.features(X_sub, kernel)
                signs = np.ones(Psi.shape[1]) if fmap.signs is None else fmap.signs
                errors.append(metrics.kernel_approximation_error(K, (Psi * signs) @ Psi.T))
            rows.append({"name": name, "budget": budget, "m": maps[0].n_components,
                         "error": float(np.mean(errors)), "error_sd": float(np.std(errors)),
                         "time": best_time(lambda: maps[0].features(X_all, kernel), 1)})
            print(f"  frontier {rows[-1]}", flush=True)
    return rows


# ----------------------------------------------------------------------------- report

def fmt(value, digits=3):
    return "–" if value is None else f"{value:.{digits}f}"


def timing_table(rows) -> list[str]:
    lines = ["| map | d | m | phases (s) | cos/sin and scaling (s) | features total (s) |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['name']} | {row['d']} | – | – | – | skipped: {row['skipped']} |")
        else:
            lines.append(f"| {row['name']} | {row['d']} | {row['m']} | {fmt(row.get('phases'))} "
                         f"| {fmt(row.get('rest'))} | {fmt(row['total'])} |")
    return lines


def sweep_table(rows) -> list[str]:
    lines = ["| d | S | ORF phases, GEMM (s) | SORF phases, fast WHT (s) | ORF / SORF |",
             "|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['d']} | {row['S']} | {row['orf']:.4f} | {row['sorf']:.4f} | "
                     f"{row['orf'] / row['sorf']:.2f} |")
    return lines


def frontier_table(rows) -> list[str]:
    lines = ["| map | budget | m | error (mean ± sd) | feature time, 40,000 rows (s) |",
             "|---|---|---|---|---|"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['name']} | {row['budget']} | – | skipped: {row['skipped']} | – |")
        else:
            lines.append(f"| {row['name']} | {row['budget']} | {row['m']} | "
                         f"{row['error']:.4f} ± {row['error_sd']:.4f} | {row['time']:.4f} |")
    return lines


def summary(timing, sweep, front) -> list[str]:
    """Statements computed from the tables above."""
    lines = []
    fourier = [row for row in timing if "phases" in row and row["m"] >= 1000]
    gemm = [row["phases"] / row["total"] for row in fourier if row["name"] != "sorf"]
    if gemm:
        lines.append(f"* Fourier maps with m ~ 1024 other than SORF spend {min(gemm):.0%} to "
                     f"{max(gemm):.0%} of `features` in the phase GEMM; cos/sin dominates.")
    for row in (row for row in fourier if row["name"] == "sorf"):
        orf = next(r for r in fourier if r["name"] == "orf" and r["d"] == row["d"])
        lines.append(f"* d = {row['d']}: SORF phases take {row['phases'] / orf['phases']:.1f}x "
                     f"the ORF GEMM ({row['phases']:.3f} s against {orf['phases']:.3f} s).")
    ratios = ", ".join(f"d = {row['d']}: {row['orf'] / row['sorf']:.2f}" for row in sweep)
    lines.append(f"* ORF / SORF phase-time ratio (above 1: SORF faster): {ratios}.")
    largest = max(row["budget"] for row in front)
    rows = {row["name"]: row for row in front
            if row["budget"] == largest and "skipped" not in row}
    if "rff" in rows:
        relative = ", ".join(f"{name} (m = {row['m']}) {row['error'] / rows['rff']['error']:.2f}"
                             for name, row in sorted(rows.items(), key=lambda kv: kv[1]["error"]))
        lines.append(f"* kin40k, budget {largest}: error relative to RFF (lower is better): "
                     f"{relative}.")
    return lines


def plot(sweep, front, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name in sorted({row["name"] for row in front if "skipped" not in row}):
        points = sorted(((row["time"], row["error"]) for row in front
                         if row["name"] == name and "skipped" not in row))
        times, errors = zip(*points)
        left.loglog(times, errors, "o-", label=name)
    left.set(xlabel="feature time, 40,000 rows (s)", ylabel="relative Frobenius error",
             title="kin40k, Gaussian kernel (1,000-point subsample)")
    left.legend(fontsize=8)
    dims = [row["d"] for row in sweep]
    right.loglog(dims, [row["orf"] for row in sweep], "o-", label="ORF (GEMM)")
    right.loglog(dims, [row["sorf"] for row in sweep], "s-", label="SORF (fast WHT)")
    right.set(xlabel="input dimension d", ylabel="phase time (s)",
              title="phases U omega^T, N = 10^4, S = max(512, p)")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def machine() -> str:
    load = os.getloadavg()
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"numpy {np.__version__}; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")


def report(args, timing, sweep, front, length_scale, elapsed, has_png) -> str:
    command = " ".join(["python", "benchmarks/bench_features.py",
                        *map(shlex.quote, sys.argv[1:])])
    lines = ["# Feature maps: evaluation time and kernel error versus time", "",
             f"Command: `{command}` ({elapsed:.0f} s). Machine: {machine()} (at the end of "
             f"the run; shared with other jobs). BLAS threads: {args.blas_threads}.", "",
             f"## 1. Evaluation time, N = {args.n_samples}, Gaussian kernel, budget m = 1024",
             "", "total = one call of `features(X, kernel)`; phases = `phases(U)` (best of "
             f"{args.repeats}); cos/sin and scaling = total - phases.", "",
             *timing_table(timing), "",
             "## 2. ORF against SORF phases as d grows", "",
             f"N = {args.sweep_samples}; SORF blocks have p = max(16, next power of two >= d) "
             "rows.", "", *sweep_table(sweep), "",
             "## 3. Kernel error versus feature time (UCI kin40k)", "",
             f"Inputs standardized; isotropic Gaussian kernel, length scale {length_scale:.3f} "
             f"(median pairwise distance of the subsample); error on a 1,000-point subsample, "
             f"mean over {args.seeds} seeds; time for the features of all 40,000 rows.", "",
             *frontier_table(front), "", "## Summary", "", *summary(timing, sweep, front), ""]
    if has_png:
        lines += ["![error versus time, and the phase sweep](features.png)", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, print only")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default benchmarks/results for a full run)")
    args = parser.parse_args(argv)
    args.n_samples, args.sweep_samples = (2000, 500) if args.quick else (100_000, 10_000)
    args.repeats, args.seeds = (1, 2) if args.quick else (3, 5)
    out = args.out or (None if args.quick else ROOT / "benchmarks" / "results")
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        args.blas_threads = "default (threadpoolctl not installed)"
        return run(args, out)
    args.blas_threads = 1
    with threadpool_limits(limits=1, user_api="blas"):
        return run(args, out)


def run(args, out) -> int:
    start = time.perf_counter()

    print("1. evaluation time", flush=True)
    timing = time_maps(args.n_samples, 8, args.repeats) + time_maps(args.n_samples, 16,
                                                                     args.repeats)
    print("2. phase sweep", flush=True)
    sweep = phase_sweep(args.sweep_samples, args.repeats)
    print("3. kin40k frontier", flush=True)
    X_all, X_sub, length_scale = load_kin40k(300 if args.quick else 1000)
    front = frontier(X_all[:2000] if args.quick else X_all, X_sub, length_scale, args.seeds)
    elapsed = time.perf_counter() - start

    has_png = False
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        has_png = plot(sweep, front, out / "features.png")
    text = report(args, timing, sweep, front, length_scale, elapsed, has_png)
    if out is None:
        print(text)
    else:
        (out / "features.md").write_text(text)
        print(f"wrote {out / 'features.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
