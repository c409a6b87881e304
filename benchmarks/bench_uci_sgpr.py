"""Nystrom features with pivoted-Cholesky knots and VFE learning on UCI sets, against the
published SGPR / SVGP figures and GPyTorch's SGPR run on the same split (docs/nystrom.md).

Protocol of Wang et al. (NeurIPS 2019, Table 1): a random 64/16/20 train/validation/test split
(seeded; the validation part is not used), inputs and targets standardised with the training
part's mean and std, one shared-length-scale Matern-3/2 kernel; RMSE and the mean Gaussian
negative log predictive density (NLL, of a new observation) on the test part, in standardised
target units. scalegp learns with L-BFGS-B on the VFE bound (``objective="vfe"``), with
``--learn-knots N`` also over the knots (``learn_knots=N``, docs/nystrom.md, "Learned knots");
GPyTorch SGPR (``InducingPointKernel``, Titsias' collapsed bound, inducing inputs learned,
initialised at random training rows) takes ``--adam-steps`` Adam steps at rate 0.1.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_uci_sgpr.py pol elevators --gpytorch \\
        --learn-knots 100 --out benchmarks/results/uci-sgpr.md

``--no-scalegp`` runs GPyTorch alone (to run the peer while scalegp is being changed).

Data: ``../shared/data/uci/<name>.csv`` (inputs x1..xd, target y last), or ``--data-dir``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers  # noqa: E402

import scalegp as sg  # noqa: E402
from scalegp.estimators.configuration import make_approximation  # noqa: E402

DATA_DIR = ROOT.parent / "shared" / "data" / "uci"
#: Wang et al. (2019), Table 1: exact GP RMSE / NLL, and the best of SGPR (512) and SVGP (1024).
PUBLISHED = {
    "pol": ((0.151, -0.180), ("SVGP", 0.215, -0.001)),
    "elevators": ((0.394, 0.619), ("SVGP", 0.399, 0.519)),
    "bike": ((0.220, 0.119), ("SVGP", 0.303, 0.272)),
    "kin40k": ((0.099, -0.258), ("SVGP", 0.268, 0.236)),
    "protein": ((0.536, 1.018), ("SGPR", 0.656, 0.970)),
    "keggdirected": ((0.086, -0.199), ("SVGP", 0.096, -0.940)),
    "keggundirected": ((0.118, -0.419), ("SVGP", 0.124, -0.666)),
}


def load_split(name: str, data_dir: Path, seed: int):
    """(X_train, y_train, X_test, y_test), standardised on the training part (64/16/20)."""
    table = np.loadtxt(data_dir / f"{name}.csv", delimiter=",", skiprows=1)
    X, y = table[:, :-1], table[:, -1]
    order = np.random.default_rng(seed).permutation(len(y))
    n_train, n_val = int(0.64 * len(y)), int(0.16 * len(y))
    train, test = order[:n_train], order[n_train + n_val:]
    mean, std = X[train].mean(axis=0), X[train].std(axis=0)
    std[std == 0] = 1.0
    y_mean, y_std = y[train].mean(), y[train].std()
    return ((X[train] - mean) / std, (y[train] - y_mean) / y_std,
            (X[test] - mean) / std, (y[test] - y_mean) / y_std)


def scores(mean, var, y):
    rmse = float(np.sqrt(np.mean((mean - y) ** 2)))
    nll = float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))
    return rmse, nll


def run_scalegp(X, y, X_test, y_test, m: int, objective: str, seed: int,
                learn_knots: int = 0, knots: str = "pivoted_cholesky",
                n_jobs: int | None = None) -> dict:
    start = time.perf_counter()
    # start at l = sqrt(d), about the median distance of standardized inputs / sqrt(2): at
    # l = 1 in d = 26 the kernel matrix is nearly diagonal, tr(K - Q) / (2 s2) dominates the
    # bound and L-BFGS-B runs to the noise-only corner (s -> lower bound, measured on pol)
    kernel = sg.kernels.get("matern32", length_scale=float(np.sqrt(X.shape[1])))
    model = sg.LowRankGPRegressor(kernel=kernel,
                                  noise_variance=0.1,
                                  random_state=seed, n_jobs=n_jobs, approximation=make_approximation("nystrom", n_components=m, options={"knots": knots}, objective=objective, learn_knots=learn_knots))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    seconds = time.perf_counter() - start
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    rmse, nll = scores(mean, std**2, y_test)
    report = model.approximation_diagnostics_
    method = (f"scalegp nystrom ({knots} knots) + {objective}"
              + (f", learn_knots={learn_knots}" if learn_knots else "")
              + (f", n_jobs={n_jobs}" if n_jobs else ""))
    return {"method": method, "m": report["n_knots"],
            "seconds": seconds, "rmse": rmse, "nll": nll,
            "evaluations": model.optimization_result_.n_evaluations,
            "note": (f"cond(K_ZZ) {report['knot_condition_number']:.2g}; l "
                     f"{float(model.kernel_.length_scale[0]):.3g}, s "
                     f"{model.kernel_.variance:.3g}, s2 {model.noise_variance_:.3g}; "
                     f"{len(caught)} warning(s)")}


def run_gpytorch_sgpr(X, y, X_test, y_test, m: int, steps: int, seed: int) -> dict:
    mean, var, seconds = peers.gpytorch_sgpr_split(X, y, X_test, n_columns=m, steps=steps,
                                                   kernel="matern32", seed=seed)
    rmse, nll = scores(mean, var, y_test)
    return {"method": "GPyTorch SGPR", "m": m, "seconds": seconds, "rmse": rmse, "nll": nll,
            "evaluations": steps, "note": f"{steps} Adam steps, rate 0.1"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", choices=sorted(PUBLISHED))
    parser.add_argument("--n-components", type=int, default=512)
    parser.add_argument("--objective", default="vfe", choices=["dtc", "fitc", "vfe"])
    parser.add_argument("--learn-knots", type=int, default=0,
                        help="L-BFGS-B iterations over theta and the knots together, after "
                             "theta is learned at the starting knots (0: fixed knots)")
    parser.add_argument("--knots", default="pivoted_cholesky",
                        choices=["pivoted_cholesky", "random", "kmeans"],
                        help="the knot rule (the starting knots with --learn-knots)")
    parser.add_argument("--n-jobs", type=int, default=None,
                        help="scalegp's threads over chunks (docs/engine.md)")
    parser.add_argument("--gpytorch", action="store_true", help="also run GPyTorch SGPR")
    parser.add_argument("--no-scalegp", action="store_true",
                        help="run GPyTorch SGPR only (with --gpytorch)")
    parser.add_argument("--gpytorch-m", type=int, default=512)
    parser.add_argument("--adam-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="the split's seed")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, help="append the markdown rows to this file")
    args = parser.parse_args(argv)
    lines = []
    for name in args.datasets:
        X, y, X_test, y_test = load_split(name, args.data_dir, args.seed)
        load_before = os.getloadavg()[0]
        runs = [] if args.no_scalegp else [run_scalegp(X, y, X_test, y_test,
                                                       args.n_components, args.objective,
                                                       args.seed, args.learn_knots,
                                                       args.knots, args.n_jobs)]
        if args.gpytorch:
            runs.append(run_gpytorch_sgpr(X, y, X_test, y_test, args.gpytorch_m,
                                          args.adam_steps, args.seed))
        (exact_rmse, exact_nll), (kind, pub_rmse, pub_nll) = PUBLISHED[name]
        for run in runs:
            line = (f"| {name} | {len(y)} x {X.shape[1]} | {run['method']} | {run['m']} | "
                    f"{run['seconds']:.0f} | {run['evaluations']} | {run['rmse']:.3f} | "
                    f"{run['nll']:.3f} | {exact_rmse} / {exact_nll} | {kind} {pub_rmse} / "
                    f"{pub_nll} | {load_before:.1f} | {run['note']} |")
            print(line, flush=True)
            lines.append(line)
    if args.out is not None:
        header = ("| data | train n x d | method | m | s | evaluations / steps | test RMSE | "
                  "test NLL | published exact RMSE / NLL | published best sparse | load | "
                  "notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        new = not args.out.exists()
        with open(args.out, "a", encoding="utf-8") as out:
            out.write((header if new else "") + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
