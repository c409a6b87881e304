"""Known per-row noise variances (measurement errors): what using them is worth, and what
``approximation="auto"`` chooses with them.

A smooth field observed with heteroscedastic noise: f(x) = sin(x0) cos(x1) (plus 0.3 x2 from
three inputs on), x uniform on [-3, 3]^d, y = f(x) + e with e ~ N(0, 0.01 + v), and v known
per row, log-uniform on [1e-3, 1] (noise std from 0.1 to 1). For each size, on 2,000 test
rows with their own v:

- RMSE against f (the noise-free field), and the NLPD of the test targets under the model's
  predictive distribution with the test row's known v added (the variance of a new
  observation of that row: latent + s2 + v);
- the fit's seconds.

Models: the exact GP (up to 3,000 rows), Vecchia (m = 30, prediction neighbours "auto") and
Nystrom-VFE (256 random knots, learned in 150 iterations; the bound with known variances is
Eq. V.4 of docs/nystrom.md) each fitted with the known v and ignoring them (one learned noise
variance for all rows), and ``GPRegressor()`` (auto, its default budget) with them;
Matern-5/2, one length scale per input. ::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_known_noise.py --sizes 2000,20000

``--field relief``: a rough field instead, the embedded East Africa relief map (82,800 grid
points, elevation in metres, std 2,318 m): n training and 2,000 test points drawn without
replacement, y = elevation + e with e ~ N(0, 20^2 + v), v known per row with sqrt(v)
log-uniform on [10, 300] m, and the RMSE taken against the map's elevation. Models: the
exact GP (up to 3,000 rows), Vecchia (m = 30), the neighbourhood-local exact GPs (300
neighbours, 32 learning centres; they take known variances since 2026-12-05,
docs/local-models.md) each with and without v, and auto with v; Matern-3/2, inputs and
targets standardized (the variances with the targets). ::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_known_noise.py --field relief --sizes 20000
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

import scalegp as sg

TEST_ROWS = 2000
EXACT_ROWS = 3000


def data(n: int, d: int, seed: int):
    """(X, y, v, f): inputs, noisy targets, known variances and the noise-free field."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, d))
    f = np.sin(X[:, 0]) * np.cos(X[:, 1]) + (0.3 * X[:, 2] if d > 2 else 0.0)
    v = np.exp(rng.uniform(math.log(1e-3), 0.0, n))
    y = f + np.sqrt(0.01 + v) * rng.standard_normal(n)
    return X, y, v, f


#: The relief benchmark's noise: an unknown part of 20 m and known standard deviations
#: log-uniform on [10, 300] m.
RELIEF_UNKNOWN_STD, RELIEF_KNOWN_STD = 20.0, (10.0, 300.0)


def relief_data(n: int, seed: int = 0):
    """(X, y, v, f) for n training rows, and the same for TEST_ROWS test rows, of the East
    Africa relief map (module docstring)."""
    relief = sg.datasets.load_east_africa_relief()
    rng = np.random.default_rng(seed)
    rows = rng.choice(relief.y.size, n + TEST_ROWS, replace=False)
    low, high = (math.log(s) for s in RELIEF_KNOWN_STD)
    v = np.exp(2 * rng.uniform(low, high, rows.size))
    f = relief.y[rows]
    y = f + np.sqrt(RELIEF_UNKNOWN_STD ** 2 + v) * rng.standard_normal(rows.size)
    X = relief.X[rows]
    return (X[:n], y[:n], v[:n], f[:n]), (X[n:], y[n:], v[n:], f[n:])


def run_relief(n: int) -> list:
    (X, y, v, _), (Xt, yt, vt, ft) = relief_data(n)

    def kernel():
        return sg.Matern(nu=1.5, length_scale=np.ones(2))

    models = {}
    if n <= EXACT_ROWS:
        models["exact"] = lambda: sg.ExactGPRegressor(kernel=kernel())
    models["vecchia m=30"] = lambda: sg.VecchiaGPRegressor(
        kernel=kernel(), n_neighbors=30, n_neighbors_predict="auto",
        learning_schedule=(2000, None) if n > 4000 else None, random_state=0)
    models["neighbors k=300"] = lambda: sg.LowRankGPRegressor(
        approximation="exact", local=sg.Neighbors(n_neighbors=300, learning_centers=32),
        kernel=kernel(), random_state=0)
    return _score_all(models, (X, y, v), (Xt, yt, vt, ft))


def run(n: int, d: int) -> list:
    X, y, v, _ = data(n, d, seed=0)
    Xt, yt, vt, ft = data(TEST_ROWS, d, seed=1)
    models = {}
    if n <= EXACT_ROWS:
        models["exact"] = lambda: sg.ExactGPRegressor(kernel=sg.Matern(nu=2.5,
                                                                       length_scale=np.ones(d)))
    models["vecchia m=30"] = lambda: sg.VecchiaGPRegressor(
        kernel=sg.Matern(nu=2.5, length_scale=np.ones(d)), n_neighbors=30,
        n_neighbors_predict="auto", learning_schedule=(2000, None) if n > 4000 else None,
        random_state=0)
    models["nystrom-vfe m=256 learned"] = lambda: sg.LowRankGPRegressor(
        kernel=sg.Matern(nu=2.5, length_scale=np.ones(d)),
        approximation=sg.Nystrom(n_components=256, knots="random", objective="vfe",
                                 learn_knots=150), random_state=0)
    return _score_all(models, (X, y, v), (Xt, yt, vt, ft))


def _score_all(models: dict, train, test) -> list:
    """Each model fitted with the known variances and ignoring them, then auto with them."""
    X, y, v = train
    rows = []
    for name, make in models.items():
        for known in (True, False):
            rows.append(_score(f"{name}, {'known v' if known else 'v ignored'}", make(),
                               X, y, v if known else None, *test))
    rows.append(_score("auto, known v", sg.GPRegressor(random_state=0), X, y, v, *test))
    return rows


def _score(label, model, X, y, v, Xt, yt, vt, ft):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y, **({} if v is None else {"sample_noise_variance": v}))
    seconds = time.perf_counter() - start
    mean, std = model.predict(Xt, return_std=True, include_noise=True)  # latent + s2
    var = std ** 2 + vt
    rmse = float(np.sqrt(np.mean((mean - ft) ** 2)))
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (yt - mean) ** 2 / var))
    chosen = getattr(getattr(model, "selection_", None), "chosen", None)
    if chosen is not None:
        label += f" -> {chosen.name}"
    row = (label, rmse, nlpd, seconds, float(getattr(model, "noise_variance_", math.nan)))
    print(row, flush=True)
    return row


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2000,20000",
                        help="training rows, comma-separated (default 2000,20000)")
    parser.add_argument("--dims", type=int, default=5, help="inputs (default 5)")
    parser.add_argument("--field", choices=("smooth", "relief"), default="smooth",
                        help="the smooth synthetic field (default) or the relief map")
    args = parser.parse_args(argv)
    lines = ["| rows | model | RMSE against f | test NLPD | fit s | learned s2 (standardized) |",
             "|---:|---|---:|---:|---:|---:|"]
    for n in (int(size) for size in args.sizes.split(",")):
        rows = run_relief(n) if args.field == "relief" else run(n, args.dims)
        for label, rmse, nlpd, seconds, s2 in rows:
            lines.append(f"| {n:,} | {label} | {rmse:.4f} | {nlpd:.3f} | {seconds:.1f} | "
                         f"{s2:.3g} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
