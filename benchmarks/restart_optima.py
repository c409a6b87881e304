"""The optima auto's restarts reach on one data set: log likelihood, cross-validated NLPD
and test scores of each (issue 26; auto-panel.md, session 9).

For the candidate named (a name of ``auto_validation.validated_candidates``), the first fit
from the candidate's own start and ``--starts`` - 1 fits from ``auto_validation.random_start``
(seed 0), each scored by ``auto_validation.cross_validate`` on five fixed folds (seed 1) and
on the panel's fixed split (``bench_auto.load_split``). It shows whether the highest optimum
is the one that predicts best, which decides how the restarts choose:

    OPENBLAS_NUM_THREADS=1 python benchmarks/restart_optima.py energy "exact gaussian" --starts 10
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_auto  # noqa: E402

from scalegp.estimators import auto_validation  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=bench_auto.PANEL[:11])
    parser.add_argument("candidate", help='e.g. "exact gaussian"')
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=bench_auto.DATA_DIR)
    args = parser.parse_args(argv)
    X, y, X_test, y_test = bench_auto.load_split(args.dataset, args.data_dir)
    found = auto_validation.validated_candidates(
        y.size, X.shape[1], auto_validation.KERNEL_FAMILIES, estimator_params={})
    names = {c.name: c for c in found}
    if args.candidate not in names:
        parser.error(f"no candidate {args.candidate!r}; there are {', '.join(names)}")
    candidate = names[args.candidate]
    rng = np.random.default_rng(0)
    folds = np.array_split(np.random.default_rng(1).permutation(y.size),
                           auto_validation.VALIDATION_FOLDS)
    print("| start | fit s | log likelihood | CV RMSE | CV NLPD | test RMSE | test NLPD |")
    print("|---|---|---|---|---|---|---|")
    for start in range(args.starts):
        estimator = (candidate.estimator if start == 0 else
                     auto_validation.random_start(candidate.estimator, rng))
        began = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.fit(X, y)
            seconds = time.perf_counter() - began
            scored = auto_validation.Scored(candidate.name, candidate.kind, estimator,
                                            candidate.cost)
            auto_validation.cross_validate(scored, X, y, folds)
        mean, std = estimator.predict(X_test, return_std=True, include_noise=True)
        rmse, nlpd = bench_auto.scores(mean, std ** 2, y_test)
        print(f"| {'first' if start == 0 else start} | {seconds:.1f} | "
              f"{estimator.log_marginal_likelihood_value_:.2f} | {scored.cv_rmse:.4f} | "
              f"{scored.cv_nlpd:.4f} | {rmse:.4f} | {nlpd:.4f} |", flush=True)


if __name__ == "__main__":
    main()
