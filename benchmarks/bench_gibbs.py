"""Gibbs sweeps per second: a fixed basis against the diagonal-corrected sampler (not a test).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gibbs.py          # writes results/gibbs.md
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_gibbs.py --quick  # prints only

What is measured (docs/gibbs.md, "Cost model"; 1-D inputs uniform on [0, 1], y = sin(6 x) +
N(0, 0.1^2), Gaussian kernel, m = 64, a grid of t = 50 atoms): for each map ("glf", a fixed
basis; "rff", redrawn per atom) and each cost model ("statistics" without the diagonal,
"rows-cached" / "rows-recomputed" with the FITC-style diagonal), the precomputation (the
per-atom statistics or factors) and the sweeps per second, uncollapsed and collapsed, in CPU
time of this process. Without the diagonal a sweep costs O(m^2) plus O(t m^2) (O(t m)
collapsed) whatever n; with it O(n m^2) plus O(t n m) (O(t n m^2) collapsed).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import warnings

import numpy as np

from scalegp import kernels
from scalegp.inference.gibbs_model import GammaPrior
from scalegp.inference.gibbs import sample_posterior
from scalegp.estimators.gibbs import build_kernel
from scalegp.estimators.transformers import _build_feature_map

M, T = 64, 50
GRID = np.linspace(2.0, 100.0, T)          # length scales 0.07 .. 0.5 on [0, 1]


def problem(n, approximation, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 1))
    y = np.sin(6 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    kernel = kernels.get("gaussian")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fmap = _build_feature_map(approximation, X, build_kernel(kernel, GRID,
                                                                 GammaPrior(1.0, 1.0)),
                                  M, None, np.random.default_rng(seed + 1),
                                  {"noise_variance_lower": 1e-3})
    return fmap, kernel, X, y


def measure(n, approximation, diag, collapsed, sweeps, cache_bytes):
    fmap, kernel, X, y = problem(n, approximation)
    stages = {}

    def progress(done, total, stage):
        stages.setdefault(stage, time.process_time())

    start = time.process_time()
    samples = sample_posterior(fmap, kernel, X, y, theta1_grid=GRID, tau_prior=(1.0, 0.01),
                               theta2_prior=(1.0, 1.0), n_iter=sweeps + 1, burn_in=1,
                               collapsed=collapsed, diag_correction=diag, rng=0,
                               progress=progress, feature_cache_bytes=cache_bytes)
    end = time.process_time()
    sweep_start = stages["sweep"]
    return samples.cost_model, sweep_start - start, sweeps / (end - sweep_start)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    sizes = (2000,) if args.quick else (2000, 10000, 100000)
    rows = []
    for n in sizes:
        for approximation in ("glf", "rff"):
            for diag, cache in ((False, 0), (True, 2**30), (True, 0)):
                if diag and n > 10000:
                    continue
                for collapsed in (False, True):
                    if not diag:
                        sweeps = 500 if args.quick else 2000
                    else:
                        sweeps = 5 if (collapsed or cache == 0) else 20
                    if args.quick:
                        sweeps = max(2, sweeps // 4)
                    cost, pre, rate = measure(n, approximation, diag, collapsed, sweeps, cache)
                    rows.append((n, approximation, cost, collapsed, pre, rate))
                    print(f"n={n:>6} {approximation} {cost:<16} collapsed={collapsed!s:<5} "
                          f"precompute {pre:7.2f} s  {rate:9.1f} sweeps/s", flush=True)
    if args.quick and args.out is None:
        return
    out = args.out or os.path.join(os.path.dirname(__file__), "results", "gibbs.md")
    with open(out, "w") as f:
        f.write("# Gibbs sweeps per second (benchmarks/bench_gibbs.py)\n\n")
        f.write(f"{time.strftime('%Y-%m-%d')}, {platform.processor() or platform.machine()}, "
                f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; "
                f"CPU time of the process. m = {M}, t = {T} atoms, 1-D Gaussian kernel.\n\n")
        f.write("| n | map | cost model | collapsed | precompute (s) | sweeps / s |\n")
        f.write("|---:|---|---|---|---:|---:|\n")
        for n, approximation, cost, collapsed, pre, rate in rows:
            f.write(f"| {n} | {approximation} | {cost} | {'yes' if collapsed else 'no'} | "
                    f"{pre:.2f} | {rate:.1f} |\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
