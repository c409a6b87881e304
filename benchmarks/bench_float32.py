"""float32 against float64 features and Gram accumulation: speed-up and accuracy cost.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_float32.py           # ~5 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_float32.py --quick   # < 1 min

Writes ``benchmarks/results/float32.md`` and ``.json`` (``--out``). For each map and m, the
same fit is run with ``dtype="float64"`` and ``dtype="float32"`` (features and each chunk's
Gram in float32, summed across chunks in float64, the m x m algebra in float64;
docs/float32.md) on 2-D data, y = sin(3 x0) cos(2 x1) + noise (std 0.1), inputs and targets
standardized:

* at fixed hyperparameters (length scale 0.3, noise variance 0.01 of the normalized target,
  ``optimize=False``): the fit time (the statistics pass and the factorization; best of
  ``--repeats``), and the cost in accuracy: the log marginal likelihood difference (absolute,
  and per row), the largest difference of the predictive means over the test points relative
  to std(y), and the test RMSE and NLPD of both;
* ``--noise-sweep``: rff with m = 256 at fixed noise variances s2 = 1e-1 ... 1e-5 (the rest as
  above), the mean and log-likelihood differences against s2 (the rule of ``--dtype auto``);
* with learning, for the fixed-basis map (GLF: one pass, then O(m^3) per step): the learned
  hyperparameters' largest log difference and the test RMSE / NLPD of both.

The float32 error of the Gram is a perturbation of M = G + s2 I of relative size about
eps32 sqrt(chunk rows) per chunk; what reaches the solution is that error over s2, the
smallest eigenvalue of M (docs/float32.md, "When it is safe"), which is why the noise variance
is part of the setting.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np

import scalegp as sg
from scalegp.metrics import nlpd, rmse
from scalegp.estimators.configuration import make_approximation

CASES = [("rff", 256), ("rff", 1024), ("glf", 256), ("glf", 1024)]
QUICK_CASES = [("rff", 256), ("glf", 256)]


def make_data(n: int, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + n_test, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def fit(approximation: str, m: int, dtype: str, X, y, optimize: bool,
        noise_variance: float = 0.01):
    model = sg.LowRankGPRegressor(
        dtype=dtype, optimize=optimize,
        kernel=sg.Gaussian(length_scale=0.3, length_scale_bounds=(0.05, 5.0)),
        noise_variance=noise_variance, normalize_X=True, normalize_y=True, random_state=0, approximation=make_approximation(approximation, n_components=m))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return model, time.perf_counter() - start


def scores(model, X_test, y_test):
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    return mean, rmse(y_test, mean), nlpd(y_test, mean, std**2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=float, default=None)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    parser.add_argument("--noise-sweep", action="store_true")
    args = parser.parse_args()
    if args.noise_sweep:
        return noise_sweep(args)
    n = int(args.rows or (2e4 if args.quick else 2e5))
    cases = QUICK_CASES if args.quick else CASES
    X, y, X_test, y_test = make_data(n, 2000)
    records, lines = [], []
    for approximation, m in cases:
        record = dict(map=approximation, m=m, n=n)
        for dtype in ("float64", "float32"):
            times = []
            for _ in range(args.repeats):
                model, seconds = fit(approximation, m, dtype, X, y, optimize=False)
                times.append(seconds)
            mean, error, loss = scores(model, X_test, y_test)
            record[dtype] = dict(seconds=min(times), lml=model.log_marginal_likelihood_value_,
                                 rmse=error, nlpd=loss, mean=mean)
        double, single = record["float64"], record["float32"]
        record["speedup"] = double["seconds"] / single["seconds"]
        record["lml_difference"] = abs(single["lml"] - double["lml"])
        record["mean_difference"] = float(np.max(np.abs(single.pop("mean") - double.pop("mean")))
                                          / np.std(y))
        if approximation == "glf":
            learned = {dtype: fit(approximation, m, dtype, X, y, optimize=True)[0]
                       for dtype in ("float64", "float32")}
            theta = {dtype: np.append(model.kernel_.theta, np.log(model.noise_variance_))
                     for dtype, model in learned.items()}
            record["learned_log_difference"] = float(np.max(np.abs(theta["float32"]
                                                                   - theta["float64"])))
            record["learned"] = {dtype: dict(zip(("rmse", "nlpd"),
                                                 scores(model, X_test, y_test)[1:]))
                                 for dtype, model in learned.items()}
        records.append(record)
        print(json.dumps(record), flush=True)

    lines = [
        "# float32 features and Gram accumulation against float64\n",
        f"`OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_float32.py"
        f"{' --quick' if args.quick else ''}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
        f" N = {n} training rows (2-D), 2000 test rows, best of {args.repeats}; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a shared machine)\n",
        "At fixed hyperparameters (length scale 0.3, noise variance 0.01):\n",
        "| map | m | fit float64 (s) | fit float32 (s) | speed-up | abs. log-lik. difference "
        "| per row | max mean difference / std(y) | RMSE 64 / 32 | NLPD 64 / 32 |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        d, s = r["float64"], r["float32"]
        lines.append(f"| {r['map']} | {r['m']} | {d['seconds']:.2f} | {s['seconds']:.2f} | "
                     f"{r['speedup']:.2f} | {r['lml_difference']:.3g} | "
                     f"{r['lml_difference'] / n:.2g} | {r['mean_difference']:.2g} | "
                     f"{d['rmse']:.5f} / {s['rmse']:.5f} | {d['nlpd']:.5f} / {s['nlpd']:.5f} |")
    learned = [r for r in records if "learned" in r]
    if learned:
        lines += ["\nWith learning (GLF, fixed basis):\n",
                  "| m | max abs. difference of the learned log-hyperparameters | "
                  "RMSE 64 / 32 | NLPD 64 / 32 |", "|---|---|---|---|"]
        for r in learned:
            d, s = r["learned"]["float64"], r["learned"]["float32"]
            lines.append(f"| {r['m']} | {r['learned_log_difference']:.2g} | "
                         f"{d['rmse']:.5f} / {s['rmse']:.5f} | {d['nlpd']:.5f} / "
                         f"{s['nlpd']:.5f} |")
    out = Path(args.out or ("benchmarks/results/float32-quick.md" if args.quick
                            else "benchmarks/results/float32.md"))
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(records, indent=1) + "\n")
    print("\n".join(lines))


def noise_sweep(args) -> None:
    n = int(args.rows or 2e4)
    X, y, X_test, y_test = make_data(n, 2000)
    lines = ["# float32 against float64 as the noise variance falls (rff, m = 256)\n",
             f"`OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_float32.py --noise-sweep"
             f" --rows {n}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
             "| s2 (normalized) | abs. log-lik. difference | max mean difference / std(y) "
             "| RMSE 64 / 32 |", "|---|---|---|---|"]
    records = []
    for s2 in (1e-1, 1e-2, 1e-3, 1e-4, 1e-5):
        models = {dtype: fit("rff", 256, dtype, X, y, False, s2)[0]
                  for dtype in ("float64", "float32")}
        means = {dtype: scores(model, X_test, y_test) for dtype, model in models.items()}
        record = dict(noise_variance=s2, lml_difference=abs(
            models["float32"].log_marginal_likelihood_value_
            - models["float64"].log_marginal_likelihood_value_),
            mean_difference=float(np.max(np.abs(means["float32"][0] - means["float64"][0]))
                                  / np.std(y)),
            rmse={dtype: means[dtype][1] for dtype in means})
        records.append(record)
        lines.append(f"| {s2:.0e} | {record['lml_difference']:.3g} | "
                     f"{record['mean_difference']:.2g} | {record['rmse']['float64']:.5f} / "
                     f"{record['rmse']['float32']:.5f} |")
        print(lines[-1], flush=True)
    out = Path(args.out or "benchmarks/results/float32-noise.md")
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
