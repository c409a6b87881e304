"""The Vecchia approximation (scalegp.vecchia) on the demo's relief map, its cost against N,
and the exact GP on 2,000 points.

1. **Relief map** (the demo's split: a permutation of the 82,800 grid points with seed 0,
   the first 5,000 test, the other 77,800 train; inputs standardised by the training mean
   and standard deviation, elevations in km standardised likewise): for m in ``--m``,
   hyperparameters of an anisotropic Matern-5/2 learned by :func:`scalegp.vecchia.fit_vecchia`
   (grouped, maximin, scaled Vecchia with at most ``--max-structures`` structures) on
   ``--n-learn`` training points drawn at random (0: all; several: one run each), then the 5,000 test points
   predicted from all 77,800 training points with m neighbours each. Test RMSE (m), NLPD
   (elevation in km, with noise), learning and prediction seconds.
2. **Cost against N**: uniform 2-D points, m = 30, N in ``--sizes``: seconds of the
   ordering, the neighbour search, the grouping and one likelihood-and-gradient evaluation.
3. **Exact GP on 2,000 points** (the first 2,000 training points): the exact GP and Vecchia
   (m = 30) each learned on them; learned parameters, log likelihoods, test RMSE and NLPD.

Run from the repository root (writes benchmarks/results/vecchia.{json,md}):

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_vecchia.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from scalegp.datasets import load_east_africa_relief  # noqa: E402
from scalegp.engine.exact import ExactMarginalLikelihood, ExactPosterior  # noqa: E402
from scalegp.engine.hyperparameters import Hyperparameters  # noqa: E402
from scalegp.kernels import Matern  # noqa: E402
from scalegp.metrics import nlpd, rmse  # noqa: E402
from scalegp.inference.optimize import learn_hyperparameters  # noqa: E402
from scalegp.vecchia import (VecchiaGP, build_structure, grouped_blocks,  # noqa: E402
                             maximin_order, ordered_neighbors, vecchia_log_likelihood)

N_TEST = 5000
NOISE_START = 0.05          # the demo's start, in standardised units
NOISE_BOUNDS = (1e-6, 1e5)


def relief_split(seed: int = 0):
    relief = load_east_africa_relief()
    rows = np.random.default_rng(seed).permutation(len(relief.y))
    test, train = rows[:N_TEST], rows[N_TEST:]
    y_km = relief.y / 1000.0
    x_mean, x_scale = relief.X[train].mean(axis=0), relief.X[train].std(axis=0)
    y_mean, y_scale = y_km[train].mean(), y_km[train].std()

    def standardise(X):
        return (X - x_mean) / x_scale

    return (standardise(relief.X[train]), (y_km[train] - y_mean) / y_scale,
            standardise(relief.X[test]), y_km[test], y_mean, y_scale)


def scores(y_km, mean, var, y_mean, y_scale) -> dict:
    mean_km, var_km = y_mean + y_scale * mean, y_scale**2 * var
    return {"rmse_m": 1000.0 * rmse(y_km, mean_km), "nlpd_km": nlpd(y_km, mean_km, var_km)}


def start_kernel():
    return Matern(nu=2.5, length_scale=np.ones(2))


def relief(ms, n_learn, max_structures, seed):
    X, y, X_test, y_test_km, y_mean, y_scale = relief_split()
    learn_rows = (np.arange(len(y)) if not n_learn else
                  np.random.default_rng(seed).choice(len(y), n_learn, replace=False))
    rows = []
    for m in ms:
        start = time.perf_counter()
        model = VecchiaGP(start_kernel(), NOISE_START, m, noise_variance_bounds=NOISE_BOUNDS,
                          max_structures=max_structures, random_state=seed)
        model.fit(X[learn_rows], y[learn_rows])
        learn_seconds = time.perf_counter() - start
        predictor = model
        if len(learn_rows) < len(y):          # predict from all training points
            predictor = VecchiaGP(model.kernel_, model.noise_variance_, m).fit(X, y, learn=False)
        start = time.perf_counter()
        mean, var = predictor.predict(X_test, return_var=True, include_noise=True)
        predict_seconds = time.perf_counter() - start
        row = {"m": m, "n_learn": len(learn_rows), "learn_seconds": learn_seconds,
               "predict_seconds": predict_seconds,
               "n_evaluations": sum(h["n_evaluations"] for h in model.history),
               "n_structures": len(model.history),
               "length_scale": model.kernel_.length_scale.tolist(),
               "variance": model.kernel_.variance, "noise_variance": model.noise_variance_,
               **scores(y_test_km, mean, var, y_mean, y_scale)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def cost(sizes, m, seed):
    rows = []
    kernel = Matern(nu=2.5, length_scale=[0.05, 0.08])
    for n in sizes:
        rng = np.random.default_rng(seed)
        X = rng.uniform(size=(n, 2))
        y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(n)
        U = X / kernel.length_scale
        start = time.perf_counter()
        order = maximin_order(U)
        t_order = time.perf_counter() - start
        start = time.perf_counter()
        neighbors = ordered_neighbors(U[order], m)
        t_neighbors = time.perf_counter() - start
        start = time.perf_counter()
        blocks = grouped_blocks(neighbors)
        t_group = time.perf_counter() - start
        structure = build_structure(X, kernel.length_scale, m)
        start, cpu = time.perf_counter(), time.process_time()
        vecchia_log_likelihood(kernel, 0.01, X, y, structure, eval_gradient=True)
        t_likelihood, cpu_likelihood = time.perf_counter() - start, time.process_time() - cpu
        row = {"n": n, "m": m, "order_seconds": t_order, "neighbors_seconds": t_neighbors,
               "group_seconds": t_group, "likelihood_gradient_seconds": t_likelihood,
               "likelihood_gradient_cpu_seconds": cpu_likelihood,
               "n_blocks": blocks.n_blocks, "mean_block_set": float(blocks.sizes.mean())}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def exact_comparison(n, m, seed):
    X, y, X_test, y_test_km, y_mean, y_scale = relief_split()
    X, y = X[:n], y[:n]
    hyperparameters = Hyperparameters(start_kernel(), NOISE_START, NOISE_BOUNDS)
    start = time.perf_counter()
    exact_objective = ExactMarginalLikelihood(hyperparameters, X, y)
    exact, result = learn_hyperparameters(exact_objective, hyperparameters)
    exact_seconds = time.perf_counter() - start
    posterior = ExactPosterior.fit(exact.kernel, exact.noise_variance, X, y)
    mean, var = posterior.predict(X_test, return_var=True, include_noise=True)
    start = time.perf_counter()
    model = VecchiaGP(start_kernel(), NOISE_START, m, noise_variance_bounds=NOISE_BOUNDS,
                      random_state=seed).fit(X, y)
    vecchia_seconds = time.perf_counter() - start
    v_mean, v_var = model.predict(X_test, return_var=True, include_noise=True)
    at_exact = vecchia_log_likelihood(exact.kernel, exact.noise_variance, X, y,
                                      build_structure(X, exact.kernel.length_scale, m))
    out = {"n": n, "m": m,
           "exact": {"seconds": exact_seconds, "log_likelihood": result.log_marginal_likelihood,
                     "length_scale": exact.kernel.length_scale.tolist(),
                     "variance": exact.kernel.variance, "noise_variance": exact.noise_variance,
                     **scores(y_test_km, mean, var, y_mean, y_scale)},
           "vecchia": {"seconds": vecchia_seconds,
                       "log_likelihood": model.history[-1]["log_likelihood"],
                       "log_likelihood_at_exact_optimum": at_exact,
                       "length_scale": model.kernel_.length_scale.tolist(),
                       "variance": model.kernel_.variance,
                       "noise_variance": model.noise_variance_,
                       **scores(y_test_km, v_mean, v_var, y_mean, y_scale)}}
    print(json.dumps(out), flush=True)
    return out


def markdown(results) -> str:
    commands = results["commands"]
    lines = ["# Vecchia approximation (scalegp.vecchia)", "",
             f"Written on {results['date']} by (OPENBLAS_NUM_THREADS=1, 2 cores shared with "
             "other jobs: wall times are noisy, CPU times less so):", "",
             *[f"- {part}: `{commands[part]}`" for part in ("cost", "exact", "relief")
               if part in commands], "",
             "## East Africa relief (the demo's split: 77,800 training, 5,000 test points)", "",
             "Anisotropic Matern-5/2, grouped maximin Vecchia; hyperparameters learned on "
             "n_learn random training points (learn s: all structures), predictions from all "
             "77,800 with m neighbours each. NLPD of the elevation in km, with noise.", "",
             "| m | n_learn | test RMSE (m) | NLPD (km) | learn s | evaluations (structures) | predict s "
             "(5,000 points) | length scales (std. units) | noise variance (std. units) |",
             "|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in results["relief"]:
        lines.append(f"| {r['m']} | {r['n_learn']:,} | {r['rmse_m']:.1f} | {r['nlpd_km']:.3f} | "
                     f"{r['learn_seconds']:.1f} | {r['n_evaluations']} ({r['n_structures']}) | "
                     f"{r['predict_seconds']:.1f} | "
                     f"{', '.join(f'{v:.4f}' for v in r['length_scale'])} | "
                     f"{r['noise_variance']:.3g} |")
    lines += ["", "## Cost against N (uniform 2-D points, m = 30, grouped)", "",
              "| N | maximin s | neighbours s | grouping s | likelihood + gradient s (CPU s) | "
              "CPU us per point | blocks | mean union set |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results["cost"]:
        lines.append(f"| {r['n']:,} | {r['order_seconds']:.2f} | {r['neighbors_seconds']:.2f} | "
                     f"{r['group_seconds']:.2f} | {r['likelihood_gradient_seconds']:.2f} "
                     f"({r['likelihood_gradient_cpu_seconds']:.2f}) | "
                     f"{1e6 * r['likelihood_gradient_cpu_seconds'] / r['n']:.0f} | "
                     f"{r['n_blocks']:,} | {r['mean_block_set']:.1f} |")
    e = results["exact"]
    lines += ["", f"## Exact GP against Vecchia (m = {e['m']}) on {e['n']:,} training points", "",
              "| model | learn s | log likelihood at its optimum (own structure) | test RMSE (m) | NLPD (km) | "
              "length scales | noise variance |", "|---|---:|---:|---:|---:|---|---:|"]
    for name in ("exact", "vecchia"):
        r = e[name]
        lines.append(f"| {name} | {r['seconds']:.1f} | {r['log_likelihood']:.2f} | "
                     f"{r['rmse_m']:.1f} | {r['nlpd_km']:.3f} | "
                     f"{', '.join(f'{v:.4f}' for v in r['length_scale'])} | "
                     f"{r['noise_variance']:.3g} |")
    lines += ["", f"Vecchia log likelihood at the exact GP's optimum: "
              f"{e['vecchia']['log_likelihood_at_exact_optimum']:.2f} (exact: "
              f"{e['exact']['log_likelihood']:.2f}).", ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", default="10,30,60")
    parser.add_argument("--n-learn", default="0",
                        help="training points to learn on, comma-separated runs (0: all)")
    parser.add_argument("--max-structures", type=int, default=2)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--n-exact", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parts", default="cost,exact,relief",
                        help="which parts to run; the others are kept from --out's JSON")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "vecchia"))
    args = parser.parse_args(argv)
    command = ("python benchmarks/bench_vecchia.py " + " ".join(argv or sys.argv[1:])).strip()
    parts = args.parts.split(",")
    if not set(parts) <= {"cost", "exact", "relief"}:
        raise SystemExit(f"--parts must name cost, exact or relief, got {args.parts!r}")
    saved = Path(args.out + ".json")
    # a run of some parts keeps the others' results from the file (and their commands)
    results = json.loads(saved.read_text()) if saved.exists() and len(parts) < 3 else {}
    results.setdefault("commands", {})
    results["date"] = time.strftime("%Y-%m-%d")
    for part in parts:
        results["commands"][part] = command
    if "cost" in parts:
        results["cost"] = cost([int(v) for v in args.sizes.split(",")], 30, args.seed)
    if "exact" in parts:
        results["exact"] = exact_comparison(args.n_exact, 30, args.seed)
    if "relief" in parts:
        results["relief"] = []
        for n_learn in args.n_learn.split(","):
            results["relief"] += relief([int(v) for v in args.m.split(",")], int(n_learn),
                                        args.max_structures, args.seed)
    saved.write_text(json.dumps(results, indent=1))
    Path(args.out + ".md").write_text(markdown(results))


if __name__ == "__main__":
    main()
