"""VecchiaGPRegressor on UCI sets, Wang et al.'s protocol, against the published exact GP.

Protocol of Wang et al. (NeurIPS 2019, Table 1), as ``bench_uci_sgpr.py``: a random
64/16/20 train/validation/test split (seeded; the validation part is not used), inputs and
targets standardised with the training part's mean and std, Matern-3/2; test RMSE and the
mean Gaussian negative log predictive density (NLL, of a new observation) in standardised
target units. Two kernels per set: one shared length scale (the comparison with their
table) and ARD (one per input). The Vecchia model learns with L-BFGS-B (or ``--optimizer
fisher``), rebuilding its ordering and neighbour sets as the learned length scales change
shape (scaled Vecchia, docs/vecchia.md); it starts at l = sqrt(d) (as bench_uci_sgpr.py).

    OPENBLAS_NUM_THREADS=1 timeout 1500 python benchmarks/bench_vecchia_uci.py pol elevators \\
        --n-jobs 2 --out benchmarks/results/vecchia-uci.md

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

from bench_uci_sgpr import DATA_DIR, PUBLISHED, load_split, scores  # noqa: E402

import scalegp as sg  # noqa: E402


def run_vecchia(X, y, X_test, y_test, *, ard: bool, m: int, m_predict: int | None,
                optimizer: str, seed: int, n_jobs: int | None) -> dict:
    d = X.shape[1]
    start_scale = float(np.sqrt(d))
    kernel = sg.kernels.get("matern32", length_scale=np.full(d, start_scale) if ard
                            else start_scale)
    model = sg.VecchiaGPRegressor(kernel=kernel, noise_variance=0.1, n_neighbors=m,
                                  n_neighbors_predict=m_predict, optimizer=optimizer,
                                  random_state=seed, n_jobs=n_jobs)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    predict_seconds = time.perf_counter() - start
    rmse, nll = scores(mean, std**2, y_test)
    scales = np.atleast_1d(model.kernel_.length_scale)
    shown = (f"l {scales[0]:.3g}" if scales.size == 1 else
             f"l in [{scales.min():.3g}, {scales.max():.3g}]")
    return {"method": f"scalegp Vecchia, {'ARD' if ard else 'shared l'}, {optimizer}",
            "m": m if m_predict is None else f"{m} / {m_predict}",
            "seconds": fit_seconds, "predict_seconds": predict_seconds,
            "rmse": rmse, "nll": nll, "evaluations": model.optimization_result_.n_evaluations,
            "note": (f"{shown}, s {model.kernel_.variance:.3g}, s2 "
                     f"{model.noise_variance_:.3g}; {model.n_structures_} structure(s); "
                     f"{len(caught)} warning(s)"
                     + "".join(f" [{str(w.message)[:90]}]" for w in caught[:2]))}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", choices=sorted(PUBLISHED))
    parser.add_argument("--n-neighbors", type=int, nargs="+", default=[30])
    parser.add_argument("--n-neighbors-predict", type=int, default=None)
    parser.add_argument("--kernels", nargs="+", default=["shared", "ard"],
                        choices=["shared", "ard"])
    parser.add_argument("--optimizer", default="lbfgs", choices=["lbfgs", "fisher"])
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0, help="the split's seed")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, help="append the markdown rows to this file")
    args = parser.parse_args(argv)
    header = ("| data | train n x d | method | m | fit s | predict s | evaluations | test RMSE "
              "| test NLL | published exact RMSE / NLL | load | notes |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    if args.out is not None and not args.out.exists():
        args.out.write_text(header + "\n", encoding="utf-8")
    for name in args.datasets:
        X, y, X_test, y_test = load_split(name, args.data_dir, args.seed)
        exact_rmse, exact_nll = PUBLISHED[name][0]
        for kind in args.kernels:
            for m in args.n_neighbors:
                load_before = os.getloadavg()[0]
                run = run_vecchia(X, y, X_test, y_test, ard=kind == "ard", m=m,
                                  m_predict=args.n_neighbors_predict,
                                  optimizer=args.optimizer, seed=args.seed, n_jobs=args.n_jobs)
                line = (f"| {name} | {len(y)} x {X.shape[1]} | {run['method']} | {run['m']} | "
                        f"{run['seconds']:.0f} | {run['predict_seconds']:.1f} | "
                        f"{run['evaluations']} | {run['rmse']:.3f} | {run['nll']:.3f} | "
                        f"{exact_rmse} / {exact_nll} | {load_before:.1f} | {run['note']} |")
                print(line, flush=True)
                if args.out is not None:    # row by row: a time cap keeps what finished
                    with open(args.out, "a", encoding="utf-8") as out:
                        out.write(line + "\n")


if __name__ == "__main__":
    main()
