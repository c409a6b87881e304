"""Where ``auto`` learns the variance calibration of its chosen model, and at what price.

The calibration itself (a GP h of the log ratio of squared errors to predictive variances,
the scale mixture it gives, the decision by nested cross-validation) is
:mod:`scalegp.estimators.variance_calibration`; it needs errors and variances the model did
not see. Two sources, one per path of :func:`scalegp.estimators.auto.select`:

- **The validated choice** (small n) has them already: the chosen candidate's 5-fold
  cross-validated errors and variances at its learned hyperparameters
  (:func:`calibrate_validated`; the restarts kept its price,
  :func:`scalegp.estimators.auto_validation.calibration_price`).
- **The pilot path** (large n) fits the chosen model on all rows; there
  :func:`calibrate_held_out` holds back ``HELD_OUT_SHARE`` of the rows, at most
  ``HELD_OUT_ROWS``, conditions a copy of the fitted model at its learned hyperparameters
  (Vecchia's prediction neighbours and a Nystrom model's learned knots as they are:
  :func:`scalegp.estimators.auto_validation.fixed_copy`) on the others, and learns h from
  the held-back rows' errors and variances, its nested cross-validation on five folds of
  them. The
  fitted model is not changed; the copy conditions on 90 % of the rows, as each fold of
  the validated choice's 5-fold cross-validation on 80 %. Its price: the copy's
  conditioning (``COPY_STEPS`` of the chosen configuration's steps), its prediction of
  the held-back rows (timed on ``PROBE_ROWS`` of them), and an exact GP learned on the
  held-back rows (``H_EVALUATIONS`` evaluations at the measured cost of one:
  :func:`_learning_price`). Where it is over the seconds left the note says so and the
  variance is not calibrated. On the panel's large sets it was kept on pol
  (test NLPD -1.236 to -2.659), elevators, kin40k and three relief maps (East Africa
  -1.590 to -2.688, Alps -1.130 to -2.202, Andes -1.542 to -3.025), with every RMSE as
  before (benchmarks/results/auto-panel.md, session 15).

Neither runs with known noise variances (the variances h would learn are of the rows' own
noise; a new row's is the user's to add), except the measurement-error variances of the
group means of repeated inputs (:mod:`scalegp.estimators.replicates`), whose value for a
new row is known, or with a tolerance relative to the exact GP
(the calibration would move the predictive distribution away from the exact GP's, which
the tolerance measures).
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import kernels
from ..errors import TimeBudgetExceeded
from ..inference import optimize
from . import auto_budget, auto_costs, auto_progress, auto_validation, variance_calibration

__all__ = ["calibrate_validated", "calibrate_held_out", "HELD_OUT_ROWS", "HELD_OUT_SHARE"]

#: The share of the calibration's price kept for its fold conditionings after its
#: learning's deadline (five conditionings of a learning that takes tens of evaluations).
CALIBRATION_FINISH = 0.15
#: The pilot path's held-back rows: this share of n, at most ``HELD_OUT_ROWS`` (an exact GP
#: of h on 1,000 rows learns in about 2 s).
HELD_OUT_SHARE = 0.1
HELD_OUT_ROWS = 1000
#: Likelihood evaluations assumed for the learning of h (the validated path's measured 15
#: to 135 for the models themselves).
H_EVALUATIONS = 100
#: Steps of the chosen configuration priced for the copy's conditioning (its neighbour
#: structure and one pass): twice the ``gp_regressor.FINISH_STEPS`` the fit keeps for its
#: own, as the copies of Vecchia models on the panel's large sets took 1.0 to 3.1 times
#: 12 steps' price, and kin40k's 1.6 times 12 steps and its timed prediction (session 15).
COPY_STEPS = 24
#: Held-back rows whose prediction is timed to price the prediction of all of them.
PROBE_ROWS = 50
NOT_CALIBRATED = "predictive variance not calibrated: "
#: What :func:`scalegp.estimators.auto_budget.cut` records where its price does not fit.
CUT_NOT_RUN = "the variance calibration: not run"
#: What a calibration's failure raises; the chosen model is kept without one, and the
#: note says why.
FAILURES = (ValueError, ArithmeticError, np.linalg.LinAlgError)


def calibrate_validated(X, best, found: list, sample_noise_variance, left: float):
    """The validated choice's calibration from its cross-validated errors and variances
    (module docstring): (calibration or None, note). Priced by
    :func:`scalegp.estimators.auto_validation.calibration_price` (the slowest exact
    candidate's first learning and scoring); over the seconds ``left`` it is not learned."""
    if best.cv_errors is None:
        return None, ""
    if sample_noise_variance is not None:
        return None, NOT_CALIBRATED + "the rows carry known noise variances"
    price = auto_validation.calibration_price(found)
    return _learn(X, best.cv_errors, best.cv_variances, best.cv_folds, price, left)


def calibrate_held_out(estimator, X, y, *, step_seconds: float, left: float, rng,
                       measurement_variances=None):
    """The pilot path's calibration of the fitted ``estimator`` from held-back rows (module
    docstring): (calibration or None, note). ``step_seconds``: the chosen configuration's
    seconds per step (``Candidate.conditioning_seconds``); ``left``: the budget's seconds
    left; ``measurement_variances``: the rows' measurement-error variances where they are
    group means of repeated inputs (:mod:`scalegp.estimators.replicates`), else None."""
    n = y.size
    rows = min(HELD_OUT_ROWS, int(HELD_OUT_SHARE * n))
    if rows < auto_validation.MIN_VALIDATED_ROWS:
        return None, NOT_CALIBRATED + f"{rows} held-back rows are too few to learn from"
    end = time.perf_counter() + left
    held = np.sort(rng.choice(n, size=rows, replace=False))
    learn_price = _learning_price(X[held])
    copy_price = COPY_STEPS * step_seconds + _prediction_price(estimator, X[held])
    price = copy_price + learn_price
    if price > left:
        auto_budget.cut(CUT_NOT_RUN)
        return None, (NOT_CALIBRATED + f"its held-out conditioning and GP of the log ratios "
                      f"were priced at {price:.3g} s with {max(left, 0):.3g} s left")
    auto_progress.stage("calibrating the predictive variance on held-back rows")
    start = time.perf_counter()
    try:
        errors, variances = auto_validation.held_out_residuals(estimator, X, y, held,
                                                               measurement_variances)
    except FAILURES as error:        # the fitted model stands; only its calibration fails
        return None, NOT_CALIBRATED + f"its held-out copy failed: {error}"
    conditioned = time.perf_counter() - start
    folds = np.array_split(rng.permutation(rows), auto_validation.VALIDATION_FOLDS)
    calibration, note = _learn(X[held], errors, variances, folds, learn_price,
                               end - time.perf_counter())
    return calibration, (f"{note}; from {rows} held-back rows, the copy conditioned on the "
                         f"others and predicted them in {conditioned:.2g} s (priced at "
                         f"{copy_price:.2g} s)")


def _prediction_price(estimator, X) -> float:
    """The predicted seconds of predicting the rows of X (mean and std): the fitted
    ``estimator``'s seconds on ``PROBE_ROWS`` of them, in proportion. Vecchia's prediction
    neighbours make this the larger part of the copy's seconds in more dimensions (kin40k:
    8 s, where the conditioning was priced at 2.6 s)."""
    probe = X[:PROBE_ROWS]
    start = time.perf_counter()
    estimator.predict(probe, return_std=True, include_noise=True)
    return (time.perf_counter() - start) * X.shape[0] / max(probe.shape[0], 1)


def _learning_price(X) -> float:
    """The predicted seconds of learning h on the rows of X: ``H_EVALUATIONS`` evaluations
    of the exact GP's likelihood, at the slowdown of one evaluation timed on these rows
    (:func:`scalegp.estimators.auto_costs.calibrate_exact`: its uncalibrated cost model
    priced 1,000 rows in 2-D at 19 s where the learning and scoring took 0.97 s, on the Alps
    relief map)."""
    n, d = X.shape
    scale = X.std(axis=0)
    Xs = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    kernel = kernels.get("matern32").with_params(length_scale=np.ones(d))
    rate = auto_costs.machine_rate()
    slowdown = auto_costs.calibrate_exact(Xs, np.zeros(n), kernel, 1.0, rate)
    return auto_costs.exact_cost(n, d, H_EVALUATIONS).seconds(rate, slowdown)


def _learn(X, errors, variances, folds, price: float, left: float):
    """variance_calibration.learn within the seconds ``left`` (its learning ends in time
    for the five fold conditionings, ``CALIBRATION_FINISH`` of ``price``): (calibration if
    accepted else None, note)."""
    if not math.isfinite(price) or price > left:
        if math.isfinite(price):
            auto_budget.cut(CUT_NOT_RUN)
        return None, (NOT_CALIBRATED + f"its exact GP of the log ratios was priced at "
                      f"{price:.3g} s with {max(left, 0):.3g} s left")
    auto_progress.stage("calibrating the predictive variance by the inputs")
    start = time.perf_counter()
    end = start + left - CALIBRATION_FINISH * price
    try:
        with optimize.deadline(end):
            calibration = variance_calibration.learn(X, errors, variances, folds)
    except TimeBudgetExceeded:
        auto_budget.cut("the variance calibration: stopped and not used")
        return None, (NOT_CALIBRATED + f"its exact GP of the log ratios (priced at "
                      f"{price:.3g} s) was stopped at the time budget")
    except FAILURES as error:        # the fitted model stands; only its calibration fails
        return None, NOT_CALIBRATED + f"its exact GP of the log ratios failed: {error}"
    return (calibration if calibration.accepted else None), (
        f"{calibration.describe()}; learned and scored in "
        f"{time.perf_counter() - start:.2g} s (priced at {price:.2g} s)")
