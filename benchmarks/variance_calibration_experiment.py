"""Experiment (not a library feature yet): an input-dependent calibration of the predictive
variance, learned from cross-validated residuals, on the small UCI sets' five test folds.

For each training part: the exact Matern-3/2 GP (one length scale per input, the library's
start) is learned; its 5-fold cross-validated residuals e_i and predictive variances v_i
(noise included, at the hyperparameters learned on all rows) give t_i = log(e_i^2 / v_i) -
E[log chi2_1] (E[log chi2_1] = -1.2704), an unbiased estimate of the log variance ratio
h(x_i) with error variance Var[log chi2_1] = pi^2 / 2 if e_i ~ N(0, v_i exp(h(x_i))). An exact
GP h with that noise variance fixed is learned on (X, t). The calibrated predictive
distribution of a test target is the scale mixture

    p(y | x) = int N(y; mu(x), v(x) e^h) N(h; m(x), s(x)^2) dh

(24-point Gauss-Hermite), whose variance is v(x) exp(m + s^2 / 2); the mean is unchanged, so
the RMSE is. Printed per fold: the test NLPD of the homoscedastic GP, of the Gaussian with
the mixture's variance, and of the mixture; and the same by nested cross-validation on the
training part (h conditioned on four folds' t, scored on the fifth). ::

    OPENBLAS_NUM_THREADS=1 python benchmarks/variance_calibration_experiment.py yacht,servo 0,1,2,3,4

Results: benchmarks/results/auto-panel.md, session 14.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone

import bench_auto
import scalegp as sg

LOG_CHI2_MEAN, LOG_CHI2_VARIANCE = -1.2703628454614782, np.pi ** 2 / 2
#: log(e^2 / v) below this is clipped (e = 0 exactly: repeated rows)
LOWEST_LOG_RATIO = -12.0
NODES, NODE_WEIGHTS = np.polynomial.hermite_e.hermegauss(24)
NODE_WEIGHTS = NODE_WEIGHTS / NODE_WEIGHTS.sum()


def gaussian_nlpd(e, var):
    return 0.5 * np.log(2 * np.pi * var) + 0.5 * e ** 2 / var


def mixture_nlpd(e, var, m, s):
    """-log int N(e; 0, var e^h) N(h; m, s^2) dh, by Gauss-Hermite quadrature."""
    h = m[:, None] + s[:, None] * NODES[None, :]
    logs = (-0.5 * np.log(2 * np.pi * var[:, None]) - 0.5 * h
            - 0.5 * e[:, None] ** 2 / (var[:, None] * np.exp(h)))
    top = logs.max(axis=1)
    return -(top + np.log(np.sum(NODE_WEIGHTS * np.exp(logs - top[:, None]), axis=1)))


def exact(kernel, noise_variance, optimize=True, bounds=(1e-6, 1e5)):
    return sg.ExactGPRegressor(kernel=kernel, noise_variance=noise_variance,
                               noise_variance_bounds=bounds, optimize=optimize,
                               normalize_X=False, normalize_y=False)


def cross_validated_residuals(fixed, X, y, folds):
    e, v = np.empty(len(y)), np.empty(len(y))
    for held in folds:
        train = np.ones(len(y), dtype=bool)
        train[held] = False
        model = clone(fixed).fit(X[train], y[train])
        mean, std = model.predict(X[held], return_std=True, include_noise=True)
        e[held], v[held] = y[held] - mean, std ** 2
    return e, v


def run(name: str, fold: int) -> str:
    X, y, X_test, y_test = bench_auto.load_split(name, Path(bench_auto.DATA_DIR),
                                                 test_fold=fold)
    start = time.perf_counter()
    d = X.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = exact(sg.Matern(nu=1.5, length_scale=np.ones(d)), 0.01).fit(X, y)
        fixed = exact(model.kernel_, model.noise_variance_, optimize=False)
        folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
        e, v = cross_validated_residuals(fixed, X, y, folds)
        t = np.maximum(np.log(e ** 2 / v), LOWEST_LOG_RATIO) - LOG_CHI2_MEAN
        pinned = (LOG_CHI2_VARIANCE * (1 - 1e-6), LOG_CHI2_VARIANCE * (1 + 1e-6))
        h = exact(sg.Matern(nu=1.5, length_scale=np.ones(d)), LOG_CHI2_VARIANCE,
                  bounds=pinned).fit(X, t)
        h_fixed = exact(h.kernel_, LOG_CHI2_VARIANCE, optimize=False)
        cv_gaussian = cv_mixture = 0.0
        for held in folds:
            train = np.ones(len(y), dtype=bool)
            train[held] = False
            m, s = clone(h_fixed).fit(X[train], t[train]).predict(X[held], return_std=True)
            cv_gaussian += np.sum(gaussian_nlpd(e[held], v[held] * np.exp(m + s ** 2 / 2)))
            cv_mixture += np.sum(mixture_nlpd(e[held], v[held], m, s))
        mean, std = model.predict(X_test, return_std=True, include_noise=True)
        m, s = h.predict(X_test, return_std=True)
    error, var = y_test - mean, std ** 2
    return (f"{name}@{fold}: test NLPD {np.mean(gaussian_nlpd(error, var)):.3f} -> "
            f"Gaussian of the mixture's variance "
            f"{np.mean(gaussian_nlpd(error, var * np.exp(m + s ** 2 / 2))):.3f}, mixture "
            f"{np.mean(mixture_nlpd(error, var, m, s)):.3f}; nested CV "
            f"{np.mean(gaussian_nlpd(e, v)):.3f} -> {cv_gaussian / len(y):.3f} / "
            f"{cv_mixture / len(y):.3f}; test RMSE {np.sqrt(np.mean(error ** 2)):.4f} "
            f"(unchanged); {time.perf_counter() - start:.0f} s")


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    names = argv[0].split(",") if argv else ["yacht"]
    folds = [int(f) for f in argv[1].split(",")] if len(argv) > 1 else [0]
    for name in names:
        for fold in folds:
            print(run(name, fold), flush=True)


if __name__ == "__main__":
    main()
