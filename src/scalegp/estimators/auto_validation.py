"""``approximation="auto"`` where the data are small enough to fit every cheap model: learn
each, score each by cross-validation, keep the best (issue 26).

The pilot of :mod:`scalegp.estimators.auto` predicts a candidate's accuracy from an exact GP
on a few hundred rows at the pilot's hyperparameters; what it cannot see is that a model
learned by its own objective on all rows can generalize differently. The auto panel
(benchmarks/results/auto-panel.md) showed it: below 1,000 rows the exact GP with the Gaussian
kernel at its likelihood optimum was beaten on the test set by Vecchia (m = 30) on five of
ten data sets (yacht 0.110 against 0.219 in standardized RMSE) and Matern-5/2 beat the
Gaussian kernel on most. So where the budget allows, nothing is predicted:

1. **Candidates**: the exact GP and Vecchia with ``VALIDATED_NEIGHBORS`` neighbours (in the
   scaled inputs; from ``VECCHIA_MIN_ROWS`` rows; from ``VALIDATED_SCHEDULE_ROWS`` rows
   learned on a schedule of sampled conditionals), each with every kernel family asked for
   (default :data:`KERNEL_FAMILIES`: Gaussian, Matern-5/2 and Matern-3/2, one length scale
   per input), and from ``LOW_RANK_ROWS`` rows Nystrom with the VFE bound and one length
   scale (the first family) and the exact GP with one length scale (the first family; on
   the held-out UCI gas data, 2,309 rows in 128 inputs, the exact GP with a length scale
   per input was stopped at the budget after 52 s, where one scale for all inputs learns
   in 7 s and reached the best test RMSE of the explicit configurations, 0.122 against
   auto's Nystrom at 0.140; auto-panel.md, session 20), in order of predicted cost
   (:mod:`scalegp.estimators.auto_costs`), the cheapest of each kind (exact, Vecchia,
   low-rank) before the second of any: where the budget binds, every kind is learned
   before another kernel family of one. On skillcraft (3,004 rows), once Vecchia was
   priced at its measured slowdown, two Vecchia candidates took the budget before Nystrom,
   which cross-validation then chooses (test RMSE 0.607 against Vecchia's 0.622). Nystrom
   is left out where the rows carry known noise variances (its VFE bound takes one noise
   variance for all rows; the exact GP and Vecchia add them to the learned one). Below
   ``MIN_VALIDATED_ROWS`` rows nothing can be cross-validated: the exact GP with the first
   family is learned, and the selection says so.
2. **Learning** on all rows, in that order, each by its own objective (the exact or the
   Vecchia likelihood), as long as the time spent plus the candidate's predicted seconds
   stays within the budget. The prediction is its cost model's at the slowdown of its kind
   measured on this machine (:func:`measured_slowdowns`: one evaluation of the exact, the
   Vecchia and the Nystrom-VFE likelihood timed on up to ``CALIBRATION_ROWS`` rows):
   uncalibrated, wine's exact candidates (1,440 rows) were priced at 37.7 s each and none
   was learned, where one takes 8 s, and skillcraft's Nystrom candidate, charged the
   largest ratio seen, 47 s where it takes 15. After each fit the prediction is corrected by
   the measured ratio of its kind (the exact GP with one length scale its own: few
   hyperparameters take fewer evaluations), and a kind neither measured nor calibrated (its timing
   failed) by the largest ratio seen (at least 1); the measured seconds are those of the
   learning and the scoring (step 3), the table's "fit s". A fit still learning when the
   budget, less the seconds it needs to finish (:func:`finishing_seconds`), runs out is stopped
   (:func:`scalegp.inference.optimize.deadline`), and so is a scoring whose next fold would
   end past the budget: that candidate is not used (it is in the table, marked so, and
   never reported as learned). On skillcraft (3,004 rows) the scoring of a Vecchia
   candidate (five fold structures and prediction-neighbour searches) took 8-13 s that no
   prediction counted, and the choice took 66.3 s of a 60 s budget (auto-panel.md,
   session 9).
3. **Scoring**: ``VALIDATION_FOLDS``-fold cross-validation at the learned hyperparameters
   (each fold fitted without learning, on standardized inputs and targets, so the score
   costs a few likelihood evaluations, not a relearning; Vecchia predicting with the
   neighbours it chose on all rows): the mean negative log predictive
   density of a new observation

       NLPD = mean_i [log(2 pi v_i) / 2 + (y_i - mu_i)^2 / (2 v_i)]

   (mu_i, v_i the fold model's predictive mean and variance, noise included; Rasmussen &
   Williams 2006, eq. 5.10 is its leave-one-out form) and the RMSE, in standardized target
   units (the units the kernel was learned in). The hyperparameters saw the held-out fold
   while learning, so the score is optimistic, and not alike for every candidate: on yacht
   (278 rows) the exact Matern-3/2 GP with one length scale per input scored -1.514 at
   fixed hyperparameters and -0.630 with each fold's hyperparameters learned again, with
   one scale for all inputs -1.538 and -1.286. Learning again on each fold, and the exact
   GP with one scale as a candidate, were tried on five test folds of eight data sets
   (auto-panel.md, session 9): they spent the budget the restarts (step 4) need, and the
   mean test RMSE was worse on yacht (0.0925 against 0.0795), energy (0.0446 against
   0.0355) and concrete (0.2473 against 0.2399), and within 1.3 % on the other five.
4. **Restarts** with the time left: the learning of the ``RESTARTED_CANDIDATES`` best
   cross-validated candidates runs again from random starts (:func:`restart_leaders`), one
   start at a time, until ``RESTART_BUDGET_SHARE`` of the budget less the variance
   calibration's price (:func:`calibration_price`) where it follows and fits in the budget
   left, less the integration's price too
   (:func:`scalegp.estimators.hyperparameter_average.reserve`, where it fits after the
   calibration's) but for the first ``FIRST_RESTART_ROUNDS`` rounds. Short of that end
   all ``RESTARTS_PER_CANDIDATE`` run, whatever the machine's speed, so that a fit the
   budget does not cut depends on the rows and ``random_state`` alone
   (:mod:`scalegp.estimators.auto_budget`). Where that end has passed, the calibration
   runs and no restart (on the panel's wine the restarts
   ran to 54 s of 60 and left 6.3 s for a calibration priced at 8.8 s; auto-panel.md,
   session 15). A likelihood has local optima: on the panel's concrete data the exact GP
   with the Matern-5/2 kernel gained 3.8 nats from four random starts in its box
   (``n_restarts=4``) and its cross-validated NLPD fell from 0.133 to 0.113; on yacht
   these restarts gained 7.2 nats, and the test RMSE fell from 0.190 to 0.123
   (auto-panel.md, session 7). Each restart is scored as in step 3, and replaces
   the fit only where its cross-validated NLPD is lower by more than ``RESTART_CV_GAIN``:
   the criterion that chooses among candidates in step 5 also chooses among the optima of
   one likelihood. The highest optimum is not always the one that predicts best: on energy
   (692 rows, the Gaussian kernel) the first fit's optimum has log likelihood 1012.6 and
   cross-validated NLPD -1.640, one random start of ten reached 976.9 and -1.756, and on
   the test rows the lower optimum reached RMSE 0.0389 against 0.0436 (auto-panel.md,
   session 9).
5. **Choice**: the lowest cross-validated NLPD (a proper score: it rewards the mean and the
   variance together). The chosen estimator is the one learned on all rows: nothing is
   refitted. Its score here is optimistic; :mod:`scalegp.estimators.auto_nested` scores it
   again with each fold's hyperparameters learned again, where the time left allows, and
   where that shows it no better than the mean, tries one length scale for all inputs.

Where even the cheapest candidate is predicted over the budget, or from
``MAX_VALIDATED_ROWS`` rows, :func:`scalegp.estimators.auto.select` runs its pilot instead.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.base import clone

from .. import kernels
from ..errors import TimeBudgetExceeded
from ..inference import optimize
from ..metrics import gaussian_log_density
from . import auto_budget, auto_costs, auto_progress
from .configuration import Nystrom
from .exact import ExactGPRegressor
from .lowrank import LowRankGPRegressor
from .vecchia import VecchiaGPRegressor

__all__ = ["KERNEL_FAMILIES", "VALIDATION_FOLDS", "VALIDATED_NEIGHBORS", "Scored",
           "validated_candidates", "measured_slowdowns", "learn_and_score",
           "learn_then_score", "restart_leaders", "fixed_copy", "held_out_residuals",
           "conditioned_residuals", "standardized"]

#: Kernel families compared when the user names none. Matern-3/2 since session 7: the
#: best configurations found for pol and protein use it (vecchia-uci.md), and auto's pilot
#: on both prefers it (held-back NLPD: protein 1.372 against 1.418 Gaussian and 1.419
#: Matern-5/2; pol -0.197 against -0.101 and -0.154); auto on protein then reached 0.523 /
#: 0.640 where it had reached 0.538 / 0.734.
KERNEL_FAMILIES = ("gaussian", "matern52", "matern32")
#: Folds of the cross-validation at the learned hyperparameters.
VALIDATION_FOLDS = 5
#: Neighbours of the Vecchia candidates (the panel's m = 30: within 1 % of the exact GP's
#: RMSE at m = N - 1 on the relief map, benchmarks/results/vecchia.md).
VALIDATED_NEIGHBORS = 30
#: Training neighbours of a Vecchia candidate's predictions: measured after learning
#: (``VecchiaGPRegressor(n_neighbors_predict="auto")``). On smooth data a prediction needs more
#: neighbours than the likelihood's conditionals (kin40k, m = 30 learned on a schedule: test
#: RMSE 0.173 predicting with 30, 0.108 with 120, 0.093 with 250); on pol and protein the
#: count changed the RMSE by under 2 %.
PREDICT_NEIGHBORS = "auto"
#: Vecchia is a candidate from this many rows: below, its m = 30 neighbours are a tenth of
#: the rows or more, and it is a costlier copy of the exact GP.
VECCHIA_MIN_ROWS = 10 * VALIDATED_NEIGHBORS
#: From this many rows a Vecchia candidate learns on a schedule: first on
#: ``VALIDATED_SCHEDULE[0]`` sampled conditionals, then on all, each stage stopped at the
#: relative tolerance ``VALIDATED_SCHEDULE_TOLERANCE`` (``VecchiaGPRegressor``'s
#: ``learning_schedule`` and ``learning_tolerance``). On sml (3,723 rows, 22 inputs) that took
#: 8.7 s against 32.0 s for the whole likelihood from the start (Matern-3/2; test RMSE 0.0220
#: against 0.0225; Gaussian 9.4 s against 30.1 s, 0.0231 against 0.0232), so that all three
#: kernel families fit a minute's budget where one did.
VALIDATED_SCHEDULE_ROWS = 2000
VALIDATED_SCHEDULE = (1000, None)
VALIDATED_SCHEDULE_TOLERANCE = 0.01
#: From this many rows a global low-rank model joins the candidates: Nystrom with the VFE
#: bound at ``LOW_RANK_KNOTS`` random knots and one length scale (started at sqrt(d) in the
#: standardized inputs), the first kernel family: the model GPyTorch's SGPR fits by default.
#: Where the inputs are many, ARD length scales cost the exact GP and Vecchia most of the
#: budget and one shared scale can generalize as well: on skillcraft (3,004 rows, 18 inputs)
#: it reached test RMSE 0.6067 in 3.0 s, where Vecchia (ARD) reached 0.6219 and GPyTorch
#: SGPR 0.6090 (auto-panel.md, session 7); on sml it is far behind Vecchia (0.092 against
#: 0.022) and cross-validation says so.
LOW_RANK_ROWS = 2000
LOW_RANK_KNOTS = 512
#: Fewer rows than this are too few to cross-validate: the exact GP with the first family.
MIN_VALIDATED_ROWS = 4 * VALIDATION_FOLDS
#: From this many rows the validated choice is not tried: its exact GP is over a minute's
#: budget (5,000 rows: 50 evaluations of 1.7e11 flops each), and Vecchia learns on a schedule
#: of sampled conditionals instead of the whole likelihood (:mod:`scalegp.estimators.auto`'s
#: pilot prices it), where cross-validating it would rebuild five structures.
MAX_VALIDATED_ROWS = 4000
#: Likelihood evaluations' worth of seconds kept back from a candidate's learning deadline
#: (:func:`finishing_seconds`): the one in flight and one per fold of the scoring.
FINISH_EVALUATIONS = 1 + VALIDATION_FOLDS
#: The best cross-validated candidates whose learning restarts with the time left (step 4).
RESTARTED_CANDIDATES = 2
#: Random starts per restarted candidate, at most.
RESTARTS_PER_CANDIDATE = 8
#: Rounds of restarts (one start per restarted candidate each) that the seconds kept for the
#: integration of the hyperparameters do not cut short: on the panel's energy (692 rows) the
#: integration's 21 s, kept back from all restarts, left none, and the second restart's
#: optimum (test RMSE 0.0389 against 0.0436) was lost, where the average was not kept
#: (cross-validated NLPD -1.612 against the optimum's -1.622; auto-panel.md, session 18).
FIRST_RESTART_ROUNDS = 2
#: The restarts end by this share of the time budget: a restart the deadline stops finishes
#: its likelihood evaluation first, and the fit still returns and predicts (the panel's wine
#: took 60.02 s of a 60 s budget with restarts running to its end).
RESTART_BUDGET_SHARE = 0.9
#: A restart replaces the fit where its cross-validated NLPD is lower by more than this
#: (nats per row): the optima of energy's Gaussian-kernel likelihood that are equivalent
#: differ by up to 0.004 among themselves, the one that predicts better by 0.12. (A paired
#: test, lower by two standard errors of the rows' differences, kept out yacht's Matern-5/2
#: restart that lowered the CV NLPD by 0.2: one held-out row's NLPD there is far out, and
#: its test RMSE went from 0.123 to 0.219; auto-panel.md, session 9.)
RESTART_CV_GAIN = 0.01
#: The random starts' box, in the standardized units the kernels are learned in: length
#: scales and the signal variance log-uniform in [1/10, 10], the noise variance in
#: [1e-4, 1] (the engine's box then widens where an optimum is outside).
START_SCALE_RANGE = (0.1, 10.0)
START_NOISE_RANGE = (1e-4, 1.0)
#: Likelihood evaluations assumed for a candidate's learning before it is measured (the panel
#: measured 15 to 135).
ASSUMED_EVALUATIONS = 50
#: Likelihood evaluations assumed for the exact GP with one length scale (3 hyperparameters):
#: from the default start on fold 0 of eighteen UCI sets (the panel's eight small ones and
#: the ten held-out ones, the Gaussian kernel; 2026-12-06, session 20) it took 12 to 31
#: (median 17; energy 84), where one length scale per input took 16 to 273 (median 60).
ONE_SCALE_EVALUATIONS = 20
#: Likelihood evaluations assumed for a Vecchia candidate learned on the whole likelihood:
#: its structure is rebuilt where the learned length scales' shape moves (two or three
#: structures, each learned again), and the fold-0 training rows of the panel's yacht,
#: autompg, housing, energy, concrete, airfoil and wine took 41 to 264 evaluations (mean
#: 119) with the Gaussian and Matern-3/2 kernels (2026-12-05, session 10).
VECCHIA_EVALUATIONS = 120
#: Rows (at most) on which one evaluation of each kind is timed (:func:`measured_slowdowns`),
#: and the noise variance there: about 0.1 s for the exact GP's 1,000 rows.
CALIBRATION_ROWS = 1000
CALIBRATION_NOISE = 0.1


class Scored:
    """One candidate of the validated choice: the estimator (unfitted, then learned on all
    rows), its predicted and measured seconds and its cross-validated scores."""

    def __init__(self, name: str, kind: str, estimator, cost: auto_costs.CostModel):
        self.name, self.kind, self.estimator, self.cost = name, kind, estimator, cost
        self.predicted_seconds = 0.0
        self.seconds: float | None = None
        self.cv_rmse: float | None = None
        self.cv_nlpd: float | None = None
        #: Each row's cross-validated error y - mu and predictive variance (standardized
        #: units) and the folds' held-out rows, from which the variance calibration learns
        #: (:mod:`scalegp.estimators.variance_calibration`).
        self.cv_errors: np.ndarray | None = None
        self.cv_variances: np.ndarray | None = None
        self.cv_folds: list | None = None
        self.first_seconds: float | None = None     # its first learning and scoring
        self.note = ""
        self.warnings: list = []     # what its learning warned (re-issued if it is chosen)
        self.calibrated = False      # priced at its kind's measured slowdown
        #: The candidates whose measured over predicted seconds correct each other's
        #: predictions (step 2): its kind, but for the exact GP with one length scale,
        #: whose evaluation count says little about one per input's (median 17 against
        #: 60: ``ONE_SCALE_EVALUATIONS``).
        self.ratio_key = kind

    @property
    def scored(self) -> bool:
        return self.cv_nlpd is not None


def _family_kernel(family, n_dims: int):
    """A family name with one length scale per input, or the Kernel given."""
    if isinstance(family, str):
        return kernels.get(family).with_params(length_scale=np.ones(n_dims))
    return family


def validated_candidates(n: int, n_dims: int, families, *, estimator_params: dict,
                         slowdowns: dict | None = None, known_noise: bool = False) -> list:
    """The exact GP and Vecchia for each kernel family (and Nystrom and the exact GP with one
    length scale from ``LOW_RANK_ROWS`` rows), each priced at its kind's measured slowdown
    (``slowdowns``, :func:`measured_slowdowns`; 1 where none is given), the cheapest of each
    kind first, then the next of each (module docstring, step 1). Each adds the rows' known noise
    variances, where they have them, to the learned one (Nystrom-VFE: docs/nystrom.md, Eq.
    V.4; ``known_noise``: priced with the noise part's extra pass over the features,
    :func:`scalegp.estimators.auto_costs.nystrom_cost`). ``estimator_params``:
    noise_variance, normalize_X, normalize_y, random_state."""
    common = dict(estimator_params)
    found = []
    for family in families:
        label = family if isinstance(family, str) else type(family).__name__
        kernel = _family_kernel(family, n_dims)
        if n >= VECCHIA_MIN_ROWS:
            found.append(_vecchia_candidate(n, n_dims, label, kernel, common))
        found.append(Scored(f"exact {label}", "exact",
                            ExactGPRegressor(kernel=kernel, **common),
                            auto_costs.exact_cost(n, n_dims, ASSUMED_EVALUATIONS)))
    if n >= LOW_RANK_ROWS:
        if isinstance(families[0], str):     # a Kernel given: its own exact candidate
            found.insert(0, _one_scale_exact_candidate(n, n_dims, families[0], common))
        found.append(_low_rank_candidate(n, n_dims, families[0], common, known_noise))
    rate, slowdowns = auto_costs.machine_rate(), slowdowns or {}
    for candidate in found:
        candidate.calibrated = candidate.kind in slowdowns
        candidate.predicted_seconds = candidate.cost.seconds(
            rate, slowdown=slowdowns.get(candidate.kind, 1.0))
    found.sort(key=lambda c: c.predicted_seconds)
    rank, seen = {}, {}
    for candidate in found:          # the cheapest of each kind first (module docstring)
        rank[id(candidate)] = seen[candidate.kind] = seen.get(candidate.kind, -1) + 1
    return sorted(found, key=lambda c: (rank[id(c)], c.predicted_seconds))


def measured_slowdowns(X, y, family) -> dict:
    """Kind -> measured over predicted seconds of one likelihood-and-gradient evaluation on
    the first ``CALIBRATION_ROWS`` rows (standardized), for the exact GP and Vecchia
    (:func:`scalegp.estimators.auto_costs.calibrate_exact`, ``calibrate_vecchia``), at
    ``family``'s kernel with unit length scales, and from ``LOW_RANK_ROWS`` rows for
    Nystrom-VFE (``calibrate_nystrom``, the low-rank candidate's one-scale kernel and
    knots): the cost models' constants were fitted on one machine, and this one can be
    several times faster or slower."""
    rows = slice(0, CALIBRATION_ROWS)
    Xs, ys, _ = standardized(X[rows], y[rows], True, True)
    kernel, rate = _family_kernel(family, X.shape[1]), auto_costs.machine_rate()
    timers = {"exact": lambda: auto_costs.calibrate_exact(Xs, ys, kernel, CALIBRATION_NOISE,
                                                          rate)}
    if y.size >= VECCHIA_MIN_ROWS:
        timers["vecchia"] = lambda: auto_costs.calibrate_vecchia(
            Xs, ys, kernel, CALIBRATION_NOISE, VALIDATED_NEIGHBORS, rate)
    if y.size >= LOW_RANK_ROWS:
        timers["low-rank"] = lambda: auto_costs.calibrate_nystrom(
            Xs, ys, _one_scale_kernel(family, X.shape[1]), CALIBRATION_NOISE, LOW_RANK_KNOTS,
            rate)
    found = {}
    for kind, timer in timers.items():
        try:
            found[kind] = timer()
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            pass                  # priced by the cost model alone; its learning will tell
    return found


def _one_scale_kernel(family, n_dims: int):
    """A family name with one length scale sqrt(d) for all inputs, or the Kernel given."""
    if isinstance(family, str):
        return kernels.get(family).with_params(length_scale=math.sqrt(n_dims))
    return family


def _one_scale_exact_candidate(n: int, n_dims: int, family, common: dict) -> Scored:
    """The exact GP with one length scale (``LOW_RANK_ROWS``; the first family, started at
    sqrt(d)), priced at ``ONE_SCALE_EVALUATIONS``: before the exact candidates with a
    length scale per input."""
    kernel = _one_scale_kernel(family, n_dims)
    scored = Scored(f"exact {family} one length scale", "exact",
                    ExactGPRegressor(kernel=kernel, **common),
                    auto_costs.exact_cost(n, n_dims, ONE_SCALE_EVALUATIONS,
                                          n_params=kernel.n_params + 1))
    scored.ratio_key = "exact one length scale"
    return scored


def _low_rank_candidate(n: int, n_dims: int, family, common: dict,
                        known_noise: bool = False) -> Scored:
    """Nystrom-VFE at ``LOW_RANK_KNOTS`` random knots with one length scale
    (``LOW_RANK_ROWS``); a Kernel given is used as given."""
    label = family if isinstance(family, str) else type(family).__name__
    kernel = _one_scale_kernel(family, n_dims)
    m = min(LOW_RANK_KNOTS, n)
    estimator = LowRankGPRegressor(
        kernel=kernel, approximation=Nystrom(n_components=m, knots="random", objective="vfe"),
        **common)
    return Scored(f"nystrom-vfe m={m} one length scale {label}", "low-rank", estimator,
                  auto_costs.nystrom_cost(n, n_dims, m, ASSUMED_EVALUATIONS,
                                          n_params=kernel.n_params + 1,
                                          known_noise=known_noise))


def _vecchia_candidate(n: int, n_dims: int, label: str, kernel, common: dict) -> Scored:
    """Vecchia with ``VALIDATED_NEIGHBORS`` neighbours, on a schedule from
    ``VALIDATED_SCHEDULE_ROWS`` rows."""
    options, cost = {}, auto_costs.vecchia_cost(n, n_dims, VALIDATED_NEIGHBORS,
                                                VECCHIA_EVALUATIONS)
    name = f"vecchia m={VALIDATED_NEIGHBORS} {label}"
    if n >= VALIDATED_SCHEDULE_ROWS:
        options = {"learning_schedule": VALIDATED_SCHEDULE,
                   "learning_tolerance": VALIDATED_SCHEDULE_TOLERANCE}
        cost = auto_costs.vecchia_schedule_cost(n, n_dims, VALIDATED_NEIGHBORS,
                                                ASSUMED_EVALUATIONS, VALIDATED_SCHEDULE)
        name = f"vecchia m={VALIDATED_NEIGHBORS} scheduled {label}"
    estimator = VecchiaGPRegressor(kernel=kernel, n_neighbors=VALIDATED_NEIGHBORS,
                                   n_neighbors_predict=PREDICT_NEIGHBORS, **options, **common)
    return Scored(name, "vecchia", estimator, cost)


def standardized(X, y, normalize_X: bool, normalize_y: bool):
    """(X, y) standardized as the estimators' normalize_X / normalize_y do (mean, population
    std, 1 where constant; the stationary kernels here are shift-invariant), and y's std."""
    if normalize_X:
        scale = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    y_std = (float(y.std()) or 1.0) if normalize_y else 1.0
    return X, ((y - y.mean()) / y_std if normalize_y else y), y_std


def rows_noise(sample_noise_variance, rows) -> dict:
    """``fit``'s keyword for the known noise variances of ``rows`` (none: {})."""
    return {} if sample_noise_variance is None else {
        "sample_noise_variance": sample_noise_variance[rows]}


def fixed_copy(fitted):
    """An unfitted copy of ``fitted`` at its learned hyperparameters (no learning) for
    inputs and targets standardized as ``fitted`` standardized them (:func:`standardized`);
    Vecchia's prediction neighbours as chosen on all rows, not chosen again on each part:
    the score is the fitted model's (and five choices cost seconds on 3,000 rows); a global
    Nystrom model's learned knots as they are (in those standardized inputs)."""
    fixed = clone(fitted).set_params(kernel=fitted.kernel_,
                                     noise_variance=fitted.noise_variance_, optimize=False,
                                     normalize_X=False, normalize_y=False)
    if getattr(fitted, "prediction_rmse_", None) is not None:
        fixed.set_params(n_neighbors_predict=fitted.prediction_neighbors_)
    if isinstance(fitted, LowRankGPRegressor) and isinstance(fitted.approximation, Nystrom) \
            and fitted.local is None and fitted.approximation.learn_knots:
        fixed.set_params(approximation=clone(fitted.approximation).set_params(
            knots=fitted.feature_map_.knots, learn_knots=0))
    return fixed


def held_out_residuals(fitted, X, y, held, sample_noise_variance=None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The errors and predictive variances (noise included, the rows' known noise variances
    too) at the rows ``held`` of :func:`fixed_copy` conditioned on the other rows, in the
    units ``fitted`` learned its kernel in."""
    Xs, ys, y_std = standardized(X, y, fitted.normalize_X, fitted.normalize_y)
    if sample_noise_variance is not None:
        sample_noise_variance = np.asarray(sample_noise_variance, dtype=float) / y_std ** 2
    return conditioned_residuals(fixed_copy(fitted), Xs, ys, held, sample_noise_variance)


def conditioned_residuals(fixed, Xs, ys, held, sample_noise_variance=None):
    """The errors and predictive variances of a new observation (the known noise variance
    added) at the rows ``held`` of the unfitted ``fixed`` conditioned on the other rows."""
    train = np.ones(ys.size, dtype=bool)
    train[held] = False
    model = clone(fixed).fit(Xs[train], ys[train], **rows_noise(sample_noise_variance, train))
    mean, std = model.predict(Xs[held], return_std=True, include_noise=True)
    variances = std ** 2
    if sample_noise_variance is not None:
        variances = variances + sample_noise_variance[held]
    return ys[held] - mean, variances


def cross_validate(candidate: Scored, X, y, folds, sample_noise_variance=None, *,
                   end: float = math.inf) -> None:
    """The candidate's cross-validated RMSE and NLPD at its learned hyperparameters (module
    docstring, step 3), in the units its kernel was learned in (standardized as it was).
    A fold that would end after ``end`` (a ``time.perf_counter()`` time, each fold taken to
    last as long as the longest before it) is not started: TimeBudgetExceeded."""
    fitted = candidate.estimator
    Xs, ys, y_std = standardized(X, y, fitted.normalize_X, fitted.normalize_y)
    if sample_noise_variance is not None:
        sample_noise_variance = np.asarray(sample_noise_variance, dtype=float) / y_std ** 2
    fixed = fixed_copy(fitted)
    longest = 0.0
    errors, variances = np.empty(ys.size), np.empty(ys.size)
    for held in folds:
        began = time.perf_counter()
        if began + longest > end:
            raise TimeBudgetExceeded("the next fold of the scoring would end past the budget")
        errors[held], variances[held] = conditioned_residuals(fixed, Xs, ys, held,
                                                              sample_noise_variance)
        longest = max(longest, time.perf_counter() - began)
    candidate.cv_rmse = float(np.sqrt(np.mean(errors ** 2)))
    candidate.cv_nlpd = -float(np.mean(gaussian_log_density(errors, variances)))
    candidate.cv_errors, candidate.cv_variances, candidate.cv_folds = errors, variances, folds


def learn_then_score(candidate: Scored, X, y, folds, sample_noise_variance=None, *,
                     deadline: float, end: float) -> None:
    """Learn ``candidate``'s estimator on all rows, stopped at ``deadline``
    (:func:`scalegp.inference.optimize.deadline`; what it warned kept in
    ``candidate.warnings``), then score it on ``folds`` (:func:`cross_validate`, its folds
    refitted at fixed hyperparameters, their warnings silenced; None: not scored) unless a
    fold would end after ``end``. Raises what those raise (TimeBudgetExceeded, a failed
    fit)."""
    extra = {} if sample_noise_variance is None else {
        "sample_noise_variance": sample_noise_variance}
    with warnings.catch_warnings(record=True) as caught, optimize.deadline(deadline):
        warnings.simplefilter("always")
        candidate.estimator.fit(X, y, **extra)
    candidate.warnings = [(w.message, w.category) for w in caught]
    if folds is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cross_validate(candidate, X, y, folds, sample_noise_variance, end=end)


def learn_and_score(X, y, candidates: list, *, time_budget: float, rng,
                    sample_noise_variance=None, started: float | None = None,
                    calibrating: bool = False, integration_price=None) -> list:
    """Learn each candidate on all rows within the budget and score it (module docstring,
    steps 2 and 3); returns the candidates, each scored or with a note saying why not.
    ``calibrating``: the restarts (step 4) end :func:`calibration_price` seconds earlier,
    kept for the variance calibration that follows, where those seconds fit in the budget
    left (else nothing is kept: the calibration could not run); ``integration_price``
    ((candidates, X, y, seconds left) -> seconds), likewise for the integration of the
    hyperparameters (:mod:`scalegp.estimators.hyperparameter_average`), after the
    calibration's."""
    started = time.perf_counter() if started is None else started
    folds = np.array_split(rng.permutation(y.size), VALIDATION_FOLDS)
    if y.size < MIN_VALIDATED_ROWS:       # module docstring: the first exact GP, unscored
        candidates = [next(c for c in candidates if c.kind == "exact")]
    ratios: dict = {}
    for number, candidate in enumerate(candidates, 1):
        ratio = ratios.get(candidate.ratio_key, 1.0 if candidate.calibrated
                           else max([1.0, *ratios.values()]))
        expected = candidate.predicted_seconds * ratio
        reserve = finishing_seconds(candidate, expected)
        left = time_budget - (time.perf_counter() - started)
        if expected + reserve > left:
            candidate.note = (f"over the time budget (predicted {expected:.3g} s and "
                              f"{reserve:.2g} s to finish, {max(left, 0):.3g} s left)")
            auto_budget.cut(f"{candidate.name}: not learned")
            continue
        auto_progress.stage(f"learning and scoring {candidate.name} ({number} of "
                            f"{len(candidates)})")
        start = time.perf_counter()
        try:
            learn_then_score(candidate, X, y,
                             folds if y.size >= MIN_VALIDATED_ROWS else None,
                             sample_noise_variance, deadline=started + time_budget - reserve,
                             end=started + time_budget)
            candidate.seconds = candidate.first_seconds = time.perf_counter() - start
        except TimeBudgetExceeded:
            candidate.note = (f"stopped at the time budget after "
                              f"{time.perf_counter() - start:.3g} s of learning and "
                              "scoring: not used")
            auto_budget.cut(f"{candidate.name}: stopped and not used")
            candidate.cv_rmse = candidate.cv_nlpd = None
            continue
        except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
            candidate.note = f"failed: {error}"
            continue
        ratios[candidate.ratio_key] = max(
            candidate.seconds / max(candidate.predicted_seconds, 1e-9), 1e-3)
        if candidate.cv_nlpd is not None and not np.isfinite(candidate.cv_nlpd):
            candidate.note = "non-finite cross-validated NLPD"
            candidate.cv_nlpd = None
    if y.size >= MIN_VALIDATED_ROWS:
        end = started + RESTART_BUDGET_SHARE * time_budget
        # the seconds kept for the steps that follow, where they fit in the budget left
        # (past now: no restart, or none after the first rounds; the kept steps run)
        left = started + time_budget - time.perf_counter()
        calibration = calibration_price(candidates) if calibrating else math.inf
        kept = calibration if calibration <= left else 0.0
        integration = math.inf if integration_price is None else integration_price(
            candidates, X, y, left - kept)
        restart_leaders(X, y, candidates, folds, rng=rng, end=end - kept,
                        integration_start=end - kept - integration
                        if integration <= left - kept else None,
                        sample_noise_variance=sample_noise_variance)
    return candidates


def calibration_price(candidates: list) -> float:
    """The predicted seconds of the variance calibration (an exact GP learned on the same
    rows, with a length scale per input, and conditioned on each fold): the slowest exact
    candidate's first learning and scoring, else the first exact candidate's predicted
    seconds (inf without one)."""
    measured = [c.first_seconds for c in candidates
                if c.kind == "exact" and c.first_seconds is not None]
    if measured:
        return max(measured)
    return next((c.predicted_seconds for c in candidates if c.kind == "exact"), math.inf)


def finishing_seconds(candidate: Scored, expected: float) -> float:
    """The seconds a candidate predicted to learn in ``expected`` seconds needs after its
    learning deadline: the likelihood evaluation in flight when the deadline passes (the
    deadline stops the next one) and the ``VALIDATION_FOLDS`` fold fits of its scoring, each
    at most one evaluation's cost: ``FINISH_EVALUATIONS`` evaluations of expected /
    (its cost model's evaluations). Without this reserve the panel's sml, beside a test run
    (load about 3), took 61.3 s of a 60 s budget (auto-panel.md, session 8, run 17)."""
    return FINISH_EVALUATIONS * expected / max(candidate.cost.evaluations, 1.0)


def random_start(estimator, rng):
    """``estimator`` (unfitted) started at random hyperparameters (``START_SCALE_RANGE``,
    ``START_NOISE_RANGE``), or None where its kernel has no length scale and variance."""
    kernel = estimator.kernel
    if isinstance(kernel, str) or not hasattr(kernel, "length_scale"):
        return None
    low, high = np.log(START_SCALE_RANGE)
    n_scales = np.size(kernel.length_scale)
    scale = np.exp(rng.uniform(low, high, n_scales))
    try:
        start = kernel.with_params(length_scale=scale if n_scales > 1 else float(scale[0]),
                                   variance=float(np.exp(rng.uniform(low, high))))
    except ValueError:                   # not a constructor argument of this kernel
        return None
    noise = float(np.exp(rng.uniform(*np.log(START_NOISE_RANGE))))
    return clone(estimator).set_params(kernel=start, noise_variance=noise)


def restart_leaders(X, y, candidates: list, folds, *, rng, end: float,
                    integration_start: float | None = None,
                    sample_noise_variance=None) -> None:
    """Module docstring, step 4: learn the best cross-validated candidates again from random
    starts until ``end`` (a ``time.perf_counter()`` time; after the first
    ``FIRST_RESTART_ROUNDS`` rounds, one start per candidate each, until
    ``integration_start`` where that is earlier and not yet past: the integration of the
    hyperparameters then starts in time, and where the first rounds took its seconds the
    restarts go on); a candidate whose restart reaches a
    cross-validated NLPD lower by more than ``RESTART_CV_GAIN`` takes that fit and its
    scores, and its note says so (with the change in log likelihood, which may be negative)."""
    leaders = sorted((c for c in candidates if c.scored), key=lambda c: c.cv_nlpd)
    leaders = leaders[:RESTARTED_CANDIDATES]
    if leaders:
        auto_progress.stage(f"restarting the {len(leaders)} best from random starts")
    tried = {id(c): 0 for c in leaders}
    short = {id(c): False for c in leaders}      # a restart not run for want of time
    first_seconds = {id(c): c.seconds for c in leaders}
    first = {id(c): (c.cv_nlpd, c.estimator.log_marginal_likelihood_value_) for c in leaders}
    stopped = None
    for number in range(RESTARTS_PER_CANDIDATE):
        limit = end
        if integration_start is not None and number >= FIRST_RESTART_ROUNDS \
                and time.perf_counter() <= integration_start:
            limit = min(end, integration_start)
        for candidate in leaders:
            restarted = random_start(candidate.estimator, rng)
            if restarted is None:
                continue
            if stopped is not None or time.perf_counter() + first_seconds[id(candidate)] > limit:
                short[id(candidate)] = True
                continue
            start = time.perf_counter()
            trial = Scored(candidate.name, candidate.kind, restarted, candidate.cost)
            try:
                learn_then_score(trial, X, y, folds, sample_noise_variance, deadline=limit,
                                 end=limit)
            except TimeBudgetExceeded:
                stopped = candidate          # the restarts' time is spent: not used
                continue
            except (ValueError, ArithmeticError, np.linalg.LinAlgError):
                continue                     # a failed start: the first fit stands
            finally:
                candidate.seconds += time.perf_counter() - start
                tried[id(candidate)] += 1
            if not (np.isfinite(trial.cv_nlpd)
                    and trial.cv_nlpd < candidate.cv_nlpd - RESTART_CV_GAIN):
                continue
            candidate.estimator, candidate.cv_rmse, candidate.cv_nlpd = (
                restarted, trial.cv_rmse, trial.cv_nlpd)
            candidate.cv_errors, candidate.cv_variances = trial.cv_errors, trial.cv_variances
            candidate.warnings = trial.warnings
    for candidate in leaders:
        if tried[id(candidate)]:
            cv_nlpd, log_likelihood = first[id(candidate)]
            if candidate.cv_nlpd < cv_nlpd:
                change = (candidate.estimator.log_marginal_likelihood_value_
                          - log_likelihood)
                found = (f"CV NLPD {cv_nlpd:.4g} -> {candidate.cv_nlpd:.4g}, "
                         f"log likelihood {change:+.3g}")
            else:
                found = "none better"
            if candidate is stopped:
                found += ", the last stopped at the time budget and not used"
            candidate.note = "; ".join(filter(None, [
                candidate.note, f"{tried[id(candidate)]} random restart(s): {found}"]))
        if short[id(candidate)] or candidate is stopped:
            auto_budget.cut(f"restarts of {candidate.name}: {tried[id(candidate)]} of "
                            f"{RESTARTS_PER_CANDIDATE}")
