"""The cost model of ``approximation="auto"`` against measured fits: predicted and measured
seconds of each candidate family on one 2-D problem (3,000 rows), without the pilot's
slowdown (the ratio measured / predicted is what that calibration must absorb).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_costs.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np

import scalegp as sg
from scalegp.estimators import auto, auto_costs


def main() -> None:
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (3000, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(3000)
    X, y = auto._standardize(X, y)
    rate, entry_rate = auto_costs.machine_rate(), auto_costs.machine_entry_rate()
    print(f"GEMM {rate / 1e9:.3g} GFLOP/s, kernel entries {entry_rate / 1e6:.3g} M/s\n")
    print("| fit | measured s | predicted s | measured / predicted |\n|---|---|---|---|")
    kernel = sg.Gaussian(length_scale=np.ones(2))
    runs = [
        ("exact n=800", lambda: sg.ExactGPRegressor(kernel=kernel).fit(X[:800], y[:800]),
         lambda E: auto_costs.exact_cost(800, 2, E)),
        ("exact n=2000", lambda: sg.ExactGPRegressor(kernel=kernel).fit(X[:2000], y[:2000]),
         lambda E: auto_costs.exact_cost(2000, 2, E)),
        ("vecchia m=30", lambda: sg.VecchiaGPRegressor(kernel=kernel, n_neighbors=30).fit(X, y),
         lambda E: auto_costs.vecchia_cost(3000, 2, 30, E)),
        ("glf s=1024", lambda: sg.LowRankGPRegressor(
            kernel=kernel, approximation=sg.Features("glf", n_components=1024)).fit(X, y),
         lambda E: auto_costs.glf_cost(3000, 2, 1024, E)),
        ("nystrom-vfe m=256, 20 knot steps", lambda: sg.LowRankGPRegressor(
            kernel=kernel, approximation=sg.Nystrom(n_components=256, knots="random",
                                                    objective="vfe", learn_knots=20)).fit(X, y),
         lambda E: auto_costs.nystrom_cost(3000, 2, 256, E, 20)),
    ]
    for label, fit, cost in runs:
        start = time.perf_counter()
        model = fit()
        seconds = time.perf_counter() - start
        predicted = cost(model.optimization_result_.n_evaluations).seconds(rate)
        print(f"| {label} | {seconds:.2f} | {predicted:.2f} | {seconds / predicted:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
