"""Which test rows carry a panel verdict: each configuration's test RMSE with and without
the rows where auto's squared error is largest.

A single test fold of a UCI set is small, and the squared error has a heavy tail: on some
sets one row holds most of it (benchmarks/results/auto-panel.md, session 21). For one data
set and test fold (standardized as :func:`bench_auto.load_split` does), this fits auto
(``GPRegressor(random_state=seed)``), the explicit configurations named in ``--only``
(labels of :func:`bench_auto.explicit_configurations`) and scikit-learn's Nystroem +
BayesianRidge peer, then prints for each: the test RMSE; the RMSE without the ``--top``
rows of largest squared error under auto (the same rows for every configuration); and the
share of its summed squared error those rows hold. It lists those rows: their target, each
configuration's prediction there, and the largest |x_j| of their standardized inputs (an
input far outside the training rows' spread is an extrapolation).

    OPENBLAS_NUM_THREADS=1 python benchmarks/error_rows.py gas --only "exact matern32 one length scale"
    OPENBLAS_NUM_THREADS=1 python benchmarks/error_rows.py yacht --only "vecchia m=30,exact matern52"
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_auto  # noqa: E402
import scalegp as sg  # noqa: E402

AUTO = "auto"
PEER = "peer: Nystroem + BayesianRidge"


def predictions(X, y, X_test, only: list[str], seed: int) -> dict:
    """Label -> test predictions of auto, the named explicit configurations and the peer."""
    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found[AUTO] = sg.GPRegressor(random_state=seed).fit(X, y).predict(X_test)
        configs = bench_auto.explicit_configurations(*X.shape)
        for label in only:
            if label not in configs:
                raise SystemExit(f"no explicit configuration {label!r}; the labels: "
                                 f"{', '.join(configs)}")
            found[label] = bench_auto.fit_predict(configs[label], X, y, X_test, seed)[0]
        found[PEER] = bench_auto.nystroem_ridge(X, y, X_test)[0]
    return found


def report(found: dict, X_test, y_test, top: int) -> str:
    squared = {label: (mean - y_test) ** 2 for label, mean in found.items()}
    worst = np.argsort(-squared[AUTO])[:top]
    keep = np.ones(y_test.size, dtype=bool)
    keep[worst] = False
    lines = [f"| configuration | test RMSE | without the {top} row(s) | their share of the "
             "squared error |", "|---|---|---|---|"]
    for label, error in squared.items():
        lines.append(f"| {label} | {np.sqrt(error.mean()):.4f} | "
                     f"{np.sqrt(error[keep].mean()):.4f} | {error[worst].sum() / error.sum():.0%} |")
    lines += ["", "| test row | target | largest abs(x_j) | "
              + " | ".join(found) + " |", "|---" * (3 + len(found)) + "|"]
    for row in worst:
        lines.append(f"| {row} | {y_test[row]:.3f} | {np.abs(X_test[row]).max():.1f} | "
                     + " | ".join(f"{mean[row]:.3f}" for mean in found.values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--test-fold", type=int, default=0)
    parser.add_argument("--only", default="", help="explicit configurations, comma-separated")
    parser.add_argument("--top", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, default=bench_auto.DATA_DIR)
    args = parser.parse_args(argv)
    X, y, X_test, y_test = bench_auto.load_split(args.dataset, args.data_dir,
                                                 test_fold=args.test_fold)
    only = [label.strip() for label in args.only.split(",") if label.strip()]
    found = predictions(X, y, X_test, only, args.seed)
    print(f"{args.dataset}, test fold {args.test_fold}: {X.shape[0]} training rows, "
          f"{y_test.size} test rows; training inputs' largest abs(x_j) "
          f"{np.abs(X).max():.1f}\n")
    print(report(found, X_test, y_test, args.top))


if __name__ == "__main__":
    main()
