"""The cost model of ``approximation="auto"`` against measured fits: predicted and measured
seconds of each candidate family on one 2-D problem (3,000 rows), without the pilot's
slowdown (the ratio measured / predicted is what that calibration must absorb).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_costs.py

Then one Vecchia likelihood-and-gradient evaluation (the best of three after one warm-up)
on 5,000 standard normal rows in d = 2 to 26 inputs with m = 15 to 60 neighbours, against
``auto_costs.vecchia_cost``'s seconds of one evaluation (``_vecchia_cost`` with one
evaluation and no structure): the table its constants ``VECCHIA_POINT_ENTRIES`` and the
m^2 (4 + d / 6) entries were fitted to.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_costs.py --validated yacht,energy,wine

The validated choice's prices on the auto panel's data sets against its measured fits
(:func:`validated_prices`).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_auto_costs.py --nystrom

One Nystrom (VFE) likelihood-and-gradient evaluation, one length scale per input, on 4,000
standard normal rows in d = 2 to 50 inputs at m = 256 to 2,048 random knots (the best of
two), against ``auto_costs.nystrom_cost``'s seconds of one evaluation
(:func:`nystrom_evaluations`).
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


def vecchia_evaluations() -> None:
    """Module docstring, second part."""
    from scalegp.engine.hyperparameters import Hyperparameters
    from scalegp.vecchia import VecchiaLikelihood, build_structure

    rate = auto_costs.machine_rate()
    rng = np.random.default_rng(0)
    n = 5000
    print("\n| d | m | measured s per evaluation | predicted s | measured / predicted |\n"
          "|---|---|---|---|---|")
    for d in (2, 8, 18, 26):
        X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
        kernel = sg.kernels.get("matern32", length_scale=np.full(d, np.sqrt(d)))
        for m in (15, 30, 60):
            likelihood = VecchiaLikelihood(Hyperparameters(kernel, 0.1), X, y,
                                           build_structure(X, kernel.length_scale, m))
            theta = likelihood.hyperparameters.theta
            likelihood(theta)
            best = np.inf
            for _ in range(3):
                start = time.perf_counter()
                likelihood(theta)
                best = min(best, time.perf_counter() - start)
            predicted = auto_costs._vecchia_cost(n, d, m, float(n), 1, 0).seconds(rate)
            print(f"| {d} | {m} | {best:.3f} | {predicted:.3f} | {best / predicted:.2f} |",
                  flush=True)


def nystrom_evaluations(n: int = 4000) -> None:
    """Module docstring, ``--nystrom``."""
    from scalegp.engine.hyperparameters import Hyperparameters

    rate, entry_rate = auto_costs.machine_rate(), auto_costs.machine_entry_rate()
    print(f"GEMM {rate / 1e9:.3g} GFLOP/s, kernel entries {entry_rate / 1e6:.3g} M/s\n")
    print("| d | m | measured s per evaluation | predicted s | measured / predicted |\n"
          "|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for d in (2, 8, 26, 50):
        X = rng.standard_normal((n, d))
        y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.standard_normal(n)
        for m in (256, 512, 1024, 2048):
            kernel = sg.Gaussian(length_scale=np.full(d, 2.0))
            model = sg.LowRankGPRegressor(
                kernel=kernel, approximation=sg.Nystrom(n_components=m, knots="random",
                                                        objective="vfe"),
                optimize=False, random_state=0).fit(X, y)
            theta = Hyperparameters(model.kernel_, model.noise_variance_).theta
            best = auto_costs.fastest(
                lambda: model.log_marginal_likelihood(theta, eval_gradient=True), 2)
            cost = auto_costs.nystrom_cost(n, d, m, 0)       # one evaluation
            predicted = cost.seconds(rate) - auto_costs.EVALUATION_SECONDS
            print(f"| {d} | {m} | {best:.3f} | {predicted:.3f} | {best / predicted:.2f} |",
                  flush=True)


def validated_prices(names) -> None:
    """``--validated NAMES``: the validated choice's price of each exact and Vecchia
    candidate (Gaussian and Matern-3/2 kernels) on the auto panel's UCI sets (fold 0 as the
    test part), uncalibrated and at the kinds' measured slowdowns
    (``auto_validation.measured_slowdowns``), against its measured seconds of learning and
    5-fold scoring (the selection table's "fit s")."""
    import bench_auto
    from scalegp.estimators import auto_validation
    print("\n| data set | candidate | uncalibrated s | calibrated s | measured s | "
          "measured / calibrated |\n|---|---|---|---|---|---|")
    for name in names:
        X, y, _, _ = bench_auto.load_split(name, bench_auto.DATA_DIR)
        n, d = X.shape
        families = ("gaussian", "matern32")
        plain = auto_validation.validated_candidates(n, d, families, estimator_params={})
        priced = auto_validation.validated_candidates(
            n, d, families, estimator_params={},
            slowdowns=auto_validation.measured_slowdowns(X, y, families[0]))
        uncalibrated = {c.name: c.predicted_seconds for c in plain}
        folds = np.array_split(np.random.default_rng(0).permutation(n),
                               auto_validation.VALIDATION_FOLDS)
        for candidate in priced:
            if candidate.kind not in ("exact", "vecchia"):
                continue
            start = time.perf_counter()
            candidate.estimator.fit(X, y)
            auto_validation.cross_validate(candidate, X, y, folds)
            seconds = time.perf_counter() - start
            print(f"| {name} | {candidate.name} | {uncalibrated[candidate.name]:.2f} | "
                  f"{candidate.predicted_seconds:.2f} | {seconds:.2f} | "
                  f"{seconds / candidate.predicted_seconds:.2f} |", flush=True)


if __name__ == "__main__":
    import sys
    if sys.argv[1:2] == ["--validated"]:
        warnings.simplefilter("ignore")
        validated_prices(sys.argv[2].split(","))
    elif sys.argv[1:2] == ["--nystrom"]:
        warnings.simplefilter("ignore")
        nystrom_evaluations()
    else:
        main()
        vecchia_evaluations()
