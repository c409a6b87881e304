"""The chosen model's accuracy on rows its hyperparameters never saw: nested
cross-validation after the validated choice of ``approximation="auto"`` (issue 26).

The validated choice (:mod:`scalegp.estimators.auto_validation`, step 3) scores each
candidate at hyperparameters learned on all rows, the held-out fold included: cheap, and
fair enough to rank candidates, but optimistic, and more so with more hyperparameters per
row. On the held-out UCI fertility data (90 training rows, 9 inputs, one length scale per
input) the chosen exact GP scored a cross-validated RMSE of 0.79 (in units of the targets'
standard deviation) and reached 1.55 on its test fold, where predicting the training mean
reaches about 1 (benchmarks/results/auto-panel.md, session 19). The selection's table must
not be read as the accuracy to expect.

So, with the time left in the budget, the chosen model is scored once more on the same
folds, each fold's hyperparameters learned again on the other rows (started from the
optimum on all rows, the conditioning sets, prediction neighbours and knots kept as in
:func:`scalegp.estimators.auto_validation.fixed_copy`):

    RMSE_nested = sqrt(mean_i (y_i - mu_i^(-f(i)))^2),
    NLPD_nested = mean_i [log(2 pi v_i) / 2 + (y_i - mu_i)^2 / (2 v_i)],

mu_i^(-f(i)), v_i the prediction of the model learned without row i's fold f(i) (noise
included; Rasmussen & Williams 2006, Section 5.4.2 for cross-validation as model
assessment; the nesting is Varma & Simon 2006's remedy for the bias of a score the
hyperparameters were tuned on). The selection's notes report both, and against the mean of
each fold's other rows, the prediction that learns nothing:

    RMSE_mean = sqrt(mean_i (y_i - ybar^(-f(i)))^2).

Where RMSE_nested >= RMSE_mean the fit warns (:class:`~scalegp.errors.FitQualityWarning`): the
model predicts rows it did not learn from no better than their mean. The choice itself is
not changed here: the nested score is the chosen learned model's (at its optimum, without
an average over its hyperparameters or a calibration of its variance, which would have to
be learned again on each fold too). It starts where one fold, priced at the model's first
learning and scoring on all rows (a bound: a fold learns from the optimum on fewer rows and
predicts one fold), fits in the time left, and goes on while the folds left, each at the
longest fold's measured seconds, still fit.

**Where it shows no skill** (RMSE_nested >= RMSE_mean), one thing is tried before the fit
warns: the same model with one length scale for all inputs (3 hyperparameters where the
chosen one has d + 2), started at sqrt(d) in the standardized inputs, learned on all rows,
scored on the same folds at its learned hyperparameters (the table's score) and nested; it
replaces the choice where its NLPD_nested is lower (:func:`one_scale_fallback`). With few
rows per input or targets the inputs barely explain, a length scale per input fits the
noise: on the held-out UCI sets of auto-panel.md (session 19), the exact Matern-3/2 GP with
one length scale reached mean test RMSE 0.870 over fertility's five test folds where one
per input reached 1.064, and 0.942 against 0.968 on forest's. The one-scale model is not
taken in general: ranked by NLPD_nested on every fold of twelve UCI sets it was as often
worse as better (session 19); only where the chosen model does not beat the mean is the
trade one-sided. The one-scale model is taken as learned, without an average over its
hyperparameters or a calibration of its variance (the time left is what pays for it).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.base import clone

from ..errors import FitQualityWarning, TimeBudgetExceeded
from ..metrics import gaussian_log_density
from . import auto_budget
from .auto_validation import (Scored, conditioned_residuals, fixed_copy, learn_then_score,
                              standardized)

__all__ = ["Nested", "nested_cross_validation", "nested_score", "no_skill_warnings",
           "one_scale_fallback"]


class Nested:
    """A model's nested scores (module docstring) and the seconds they took."""

    def __init__(self, rmse: float, nlpd: float, baseline: float, seconds: float):
        self.rmse, self.nlpd, self.baseline, self.seconds = rmse, nlpd, baseline, seconds

    @property
    def skilled(self) -> bool:
        """Whether it predicts held-out rows better than each fold's mean of the others."""
        return self.rmse < self.baseline


def _learning_copy(fitted):
    """:func:`fixed_copy` of ``fitted`` that learns its kernel and noise again, from the
    optimum on all rows, without restarts."""
    learner = fixed_copy(fitted).set_params(optimize=True)
    if "n_restarts" in learner.get_params():
        learner.set_params(n_restarts=0)
    return learner


def nested_cross_validation(scored, X, y, *, end: float = math.inf,
                            sample_noise_variance=None) -> tuple[float, float, float]:
    """(RMSE_nested, NLPD_nested, RMSE_mean) of the module docstring for the validated
    candidate ``scored`` (learned on all rows) on its cross-validation folds, in the units
    its kernel was learned in. Where the folds left, each taken to last as long as the
    longest before them, would end after ``end``, the next is not started:
    TimeBudgetExceeded."""
    fitted, folds = scored.estimator, scored.cv_folds
    Xs, ys, y_std = standardized(X, y, fitted.normalize_X, fitted.normalize_y)
    if sample_noise_variance is not None:
        sample_noise_variance = np.asarray(sample_noise_variance, dtype=float) / y_std ** 2
    learner = _learning_copy(fitted)
    errors, variances, mean_errors = np.empty(ys.size), np.empty(ys.size), np.empty(ys.size)
    longest = 0.0
    for done, held in enumerate(folds):
        began = time.perf_counter()
        if began + longest * (len(folds) - done) > end:
            raise TimeBudgetExceeded(
                f"{done} of {len(folds)} folds done; the {len(folds) - done} left, at the "
                f"longest fold's {longest:.2g} s, would end past the budget")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # a fold's boundary or convergence warnings
            errors[held], variances[held] = conditioned_residuals(
                learner, Xs, ys, held, sample_noise_variance)
        others = np.ones(ys.size, dtype=bool)
        others[held] = False
        mean_errors[held] = ys[held] - ys[others].mean()
        longest = max(longest, time.perf_counter() - began)
    return (float(np.sqrt(np.mean(errors ** 2))),
            -float(np.mean(gaussian_log_density(errors, variances))),
            float(np.sqrt(np.mean(mean_errors ** 2))))


def nested_score(scored, X, y, *, end: float, sample_noise_variance=None):
    """(note, warnings, :class:`Nested` or None) for the validated candidate ``scored``: the
    scores of :func:`nested_cross_validation` against its scores at hyperparameters learned
    on all rows, or why they were not measured (over the time left before ``end``, a
    ``time.perf_counter()`` time; failed: None); the warning of the module docstring."""
    if scored.cv_folds is None or scored.first_seconds is None:
        return "", [], None
    what = f"{scored.name} learned again without each of its {len(scored.cv_folds)} folds"
    price = scored.first_seconds
    left = end - time.perf_counter()
    if price > left:
        auto_budget.cut("the nested cross-validation: not run")
        return (f"nested cross-validation not measured: {what}, a fold priced at "
                f"{price:.3g} s, {max(left, 0.0):.3g} s left; the cross-validated scores "
                "above are at hyperparameters learned on all rows (optimistic)"), [], None
    started = time.perf_counter()
    try:
        rmse, nlpd, baseline = nested_cross_validation(
            scored, X, y, end=end, sample_noise_variance=sample_noise_variance)
    except TimeBudgetExceeded as error:
        auto_budget.cut("the nested cross-validation: stopped")
        return (f"nested cross-validation stopped ({what}): {error}; the cross-validated "
                "scores above are at hyperparameters learned on all rows (optimistic)"), [], None
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
        return f"nested cross-validation failed ({what}): {error}", [], None
    if not (math.isfinite(rmse) and math.isfinite(nlpd)):
        return f"nested cross-validation failed ({what}): a non-finite score", [], None
    nested = Nested(rmse, nlpd, baseline, time.perf_counter() - started)
    note = (f"nested cross-validation ({what}, {nested.seconds:.2g} s): "
            f"RMSE {rmse:.4g}, NLPD {nlpd:.4g}, against {scored.cv_rmse:.4g}, "
            f"{scored.cv_nlpd:.4g} at hyperparameters learned on all rows; each fold's mean "
            f"of the other rows: RMSE {baseline:.4g} (in the units the kernel was learned in)")
    return note, no_skill_warnings(nested, scored), nested


def no_skill_warnings(nested: Nested, scored) -> list:
    """The warning of the module docstring where ``nested`` shows no skill, else []."""
    if nested.skilled:
        return []
    message = (f"the chosen model, learned again without each fold, predicts the held-out "
               f"rows no better than the mean of the other rows (nested cross-validated "
               f"RMSE {nested.rmse:.4g} against {nested.baseline:.4g}; {scored.cv_rmse:.4g} "
               "at hyperparameters learned on all rows): its predictions are not to be "
               "trusted (too few rows for its hyperparameters, or targets the inputs do not "
               "explain)")
    return [(message, FitQualityWarning)]


def one_scale_fallback(scored, nested: Nested, X, y, *, end: float,
                       sample_noise_variance=None):
    """(the one-scale model, its :class:`Nested`, note) of the module docstring for the
    chosen validated candidate ``scored`` whose nested scores ``nested`` show no skill;
    (None, None, note saying why not) where its kernel has no length scale per input, where
    the learning and both scorings, priced at ``scored``'s measured seconds, would end after
    ``end``, or where they fail or are stopped there."""
    kernel, n_dims = scored.estimator.kernel, X.shape[1]
    if isinstance(kernel, str) or np.size(getattr(kernel, "length_scale", 1.0)) < 2:
        return None, None, ""
    name = f"{scored.name} one length scale"
    price = scored.first_seconds + nested.seconds
    left = end - time.perf_counter()
    if price > left:
        auto_budget.cut(f"{name}, where the chosen model showed no skill: not tried")
        return None, None, (f"{name} not tried where the chosen model showed no skill: "
                            f"priced at {price:.3g} s, {max(left, 0.0):.3g} s left")
    estimator = clone(scored.estimator).set_params(
        kernel=kernel.with_params(length_scale=math.sqrt(n_dims)))
    twin = Scored(name, scored.kind, estimator, scored.cost)
    twin.predicted_seconds = scored.first_seconds
    started = time.perf_counter()
    try:
        learn_then_score(twin, X, y, scored.cv_folds, sample_noise_variance, deadline=end,
                         end=end)
        twin.seconds = twin.first_seconds = time.perf_counter() - started
        rmse, nlpd, baseline = nested_cross_validation(
            twin, X, y, end=end, sample_noise_variance=sample_noise_variance)
    except TimeBudgetExceeded:
        auto_budget.cut(f"{name}, where the chosen model showed no skill: stopped and not "
                        "used")
        return None, None, (f"{name}, tried where the chosen model showed no skill, "
                            "stopped at the time budget: not used")
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
        return None, None, (f"{name}, tried where the chosen model showed no skill, "
                            f"failed: {error}")
    if not (math.isfinite(rmse) and math.isfinite(nlpd)):
        return None, None, (f"{name}, tried where the chosen model showed no skill, reached "
                            "a non-finite nested score: not used")
    found = Nested(rmse, nlpd, baseline, time.perf_counter() - started - twin.seconds)
    verdict = "taken" if nlpd < nested.nlpd else "not taken"
    return twin, found, (
        f"the chosen model showed no skill; {name} ({time.perf_counter() - started:.2g} s): "
        f"nested RMSE {rmse:.4g}, NLPD {nlpd:.4g} against the chosen model's "
        f"{nested.rmse:.4g}, {nested.nlpd:.4g}: {verdict} (the lower nested NLPD)")
