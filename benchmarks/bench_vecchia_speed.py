"""One Vecchia likelihood-and-gradient evaluation on the relief map (the demo's split: 77,800
training points), in CPU seconds per point, and the structure and prediction steps.

Run it on two versions of the code in one session, alternating, to compare them under the
same machine load (other jobs share the 2 cores: CPU seconds, best of ``--repeat``):

    for src in /path/to/old/src src; do
        OPENBLAS_NUM_THREADS=1 PYTHONPATH=$src .venv/bin/python benchmarks/bench_vecchia_speed.py
    done

Prints one JSON line: the version's path, the structure's size, and the CPU seconds of the
structure (ordering, neighbours, grouping), one evaluation (value and gradient; with the
Fisher information where the version has it) and the prediction of the 82,800 grid points
with variance.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import scalegp
from scalegp.datasets import load_east_africa_relief
from scalegp.kernels import Matern
from scalegp.vecchia import build_structure, predict, vecchia_log_likelihood

#: The hyperparameters learned on all 77,800 points at m = 30 (standardised units).
LENGTH_SCALE = [0.0729, 0.0724]
VARIANCE = 0.2545
NOISE = 2.97e-4


def relief_split(seed: int = 0):
    """bench_vecchia.py's split (not imported from there: that script puts this checkout's
    src first on the path, and this one must run on the version PYTHONPATH names)."""
    relief = load_east_africa_relief()
    rows = np.random.default_rng(seed).permutation(len(relief.y))
    test, train = rows[:5000], rows[5000:]
    y_km = relief.y / 1000.0
    x_mean, x_scale = relief.X[train].mean(axis=0), relief.X[train].std(axis=0)
    y_mean, y_scale = y_km[train].mean(), y_km[train].std()
    return ((relief.X[train] - x_mean) / x_scale, (y_km[train] - y_mean) / y_scale,
            (relief.X[test] - x_mean) / x_scale)


def best_cpu(function, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        start = time.process_time()
        out = function()
        best = min(best, time.process_time() - start)
    return best, out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--m", type=int, default=30)
    parser.add_argument("--ordering", default="maximin")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--predict", action="store_true", help="also time the grid prediction")
    args = parser.parse_args()
    X, y, X_test = relief_split()
    kernel = Matern(nu=2.5, length_scale=LENGTH_SCALE, variance=VARIANCE)
    structure_s, structure = best_cpu(
        lambda: build_structure(X, kernel.length_scale, args.m, ordering=args.ordering), 1)
    blocks = structure.blocks
    row = {"scalegp": str(Path(scalegp.__file__).parent), "m": args.m,
           "ordering": args.ordering, "n": len(y), "blocks": blocks.n_blocks,
           "cholesky_flops": blocks.flops(), "structure_cpu_s": round(structure_s, 3)}
    seconds, (value, gradient) = best_cpu(
        lambda: vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True),
        args.repeat)
    row.update(gradient_cpu_s=round(seconds, 3), us_per_point=round(1e6 * seconds / len(y), 2),
               log_likelihood=value)
    try:
        seconds, _ = best_cpu(lambda: vecchia_log_likelihood(
            kernel, NOISE, X, y, structure, eval_fisher=True), args.repeat)
        row.update(fisher_cpu_s=round(seconds, 3))
    except TypeError:                      # a version without the Fisher information
        row.update(fisher_cpu_s=None)
    if args.predict:
        grid = np.vstack([X, X_test])
        seconds, _ = best_cpu(lambda: predict(kernel, NOISE, X, y, grid, args.m,
                                              return_var=True), 1)
        row.update(grid_predict_cpu_s=round(seconds, 3), n_grid=len(grid))
    print(json.dumps(row))


if __name__ == "__main__":
    main()
