"""Hyperparameter learning: L-BFGS-B on log-parameters inside their box.

The objective is any callable ``theta -> (log p(y), gradient)`` (the engine's
:class:`~scalegp.engine.likelihood.MarginalLikelihood` or the exact reference), theta and its box
given by :class:`~scalegp.engine.hyperparameters.Hyperparameters`; parameters whose lower and upper
bounds coincide are held fixed. Restarts are drawn uniformly in the box from an
explicit generator. An optimum on a bound triggers a :class:`BoundaryWarning`. An evaluation
whose matrices do not factorize even with jitter (:class:`NotPositiveDefiniteError`) is an
infeasible point the line search backs off from, reported in one :class:`NumericalWarning`;
only when no start can be evaluated is the error raised.

A log-parameter whose box reaches further than ``WIDE_BOX`` (a factor 1e7) from its start is
searched in windows of a factor 100 around the current point, moved while the optimum sits
on a window face: L-BFGS-B's first step is the raw gradient, which only the box stops
(:func:`_windowed_search`). A run that reports convergence without leaving a start where the
projected gradient is not zero is retried in narrower windows and otherwise reported as not
converged ("NO PROGRESS"), never as converged.

The library's default box widens itself (:func:`learn_widening`): after L-BFGS-B, a parameter
on a side of the box that is the library's default, not the user's
(:meth:`~scalegp.engine.hyperparameters.Hyperparameters.default_sides`), has that side moved out
by ``WIDENING_FACTOR`` (1e3) and learning continues from the optimum, at most
``MAX_WIDENINGS`` times, until no parameter sits on a default side or a widening gains less
than ``WIDENING_GAIN`` in log p(y) (the likelihood is flat beyond: an input the function does
not depend on, whose length scale tends to infinity). A user's bounds are never moved.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from .._limits import MAX_RESTARTS, check_count
from .._validation import as_generator, check_positive_int
from ..engine.hyperparameters import WIDENING_FACTOR, Hyperparameters
from ..errors import (BoundaryWarning, NotPositiveDefiniteError, NumericalWarning,
                      TimeBudgetExceeded)

#: (time.perf_counter() value, soft) past which no likelihood evaluation starts (None: no
#: deadline); set by :func:`deadline`.
_DEADLINE: contextvars.ContextVar = contextvars.ContextVar("scalegp_deadline", default=None)


#: The message of a search a soft :func:`deadline` ended.
DEADLINE_MESSAGE = "stopped at its deadline"


class _DeadlineReached(Exception):
    """A soft deadline passed: the search ends at the best point evaluated."""


@contextlib.contextmanager
def deadline(at: float, *, soft: bool = False):
    """Within the block, an evaluation of :func:`maximize_likelihood` that would start after
    ``time.perf_counter() > at`` raises :class:`~scalegp.errors.TimeBudgetExceeded` instead:
    the fit is abandoned, never reported as learned. ``approximation="auto"`` learns its
    candidates under its time budget this way. With ``soft=True`` the search ends instead
    at the best point it evaluated (each call keeps its first evaluation), reported as not
    converged, "stopped at its deadline": ``auto``'s pilot, an estimate by design, stops so
    within its share of the budget."""
    token = _DEADLINE.set((float(at), bool(soft)))
    try:
        yield
    finally:
        _DEADLINE.reset(token)

#: An optimum closer than this (in log units) to a bound counts as "on the bound".
BOUNDARY_TOLERANCE = 1e-5
#: A parameter whose box reaches further than this (log units) from its start, which no
#: default box does from its default start (the widest, the noise variance's 1e-6..1e5 from
#: the estimators' 1e-2, reaches 1e7), is searched in windows (:func:`_windowed_search`) ...
WIDE_BOX = math.log(1e7)
#: ... of this half-width: a factor 100 either side of the current point.
WINDOW = math.log(1e2)
#: A run that ended at its start although the gradient there is not zero is retried with
#: every window (WINDOW at most) this many times narrower ...
WINDOW_SHRINK = 4.0
#: ... at most this many times.
WINDOW_SHRINKS = 3
#: Window moves of one start before the search is reported as not converged.
MAX_WINDOW_MOVES = 50
#: Widenings of the default box at most (each by WIDENING_FACTOR: length scales reach 1e11) ...
MAX_WIDENINGS = 3
#: ... stopping early once a widening gains less than this in log p(y) (nats).
WIDENING_GAIN = 1e-2
#: L-BFGS-B's own projected-gradient tolerance (scipy's ``gtol``): a point with a larger
#: projected gradient is not stationary in its box.
STATIONARITY_TOLERANCE = 1e-5


@dataclass(frozen=True)
class OptimizationResult:
    """Best log-parameters found, their log marginal likelihood and bookkeeping."""

    theta: np.ndarray
    log_marginal_likelihood: float
    n_evaluations: int
    n_starts: int
    converged: bool
    message: str
    #: Sides of the default box that were widened: (parameter name, "lower" / "upper", the
    #: final bound), in the order they moved; empty when the box held the optimum.
    widened: tuple = ()
    #: The learning curve: one array per start, the objective (log marginal likelihood) at
    #: the start and after each L-BFGS-B iteration (in moved or narrowed windows too), with
    #: the runs in a widened box appended to the curve of the start they continue
    #: (:func:`learn_widening`); empty when nothing was learned ("all parameters fixed").
    #: Drawn by :func:`scalegp.plot.plot_learning_curve`.
    history: tuple = ()


def maximize_likelihood(objective, theta0, bounds, *, n_restarts: int = 0, rng=None,
                        names=None, max_iter: int = 500, windows: bool = False,
                        ftol: float | None = None, quiet=None) -> OptimizationResult:
    """Maximize ``objective(theta) -> (value, gradient)`` by L-BFGS-B from theta0 and restarts.

    Parameters
    ----------
    objective : callable
        Returns the log marginal likelihood and its gradient at theta.
    theta0 : array (P,)
        Starting log-parameters (inside ``bounds``).
    bounds : array (P, 2)
        Log-space box; rows with lower == upper are fixed.
    n_restarts : int
        Extra starts drawn uniformly in the box from ``rng``, at most
        :data:`scalegp._limits.MAX_RESTARTS` (1,000) (with ``windows``, a parameter whose box
        is wider than ``WIDE_BOX`` either side of theta0 is drawn within ``WIDE_BOX`` of it).
    names : list of str, optional
        Parameter names for the boundary warning.
    max_iter : int
        L-BFGS-B iterations of each run.
    ftol : float, optional
        L-BFGS-B's relative reduction tolerance (scipy's ``ftol``; None: scipy's 2.2e-9): a
        run stops when an iteration lowers the objective by less than ftol times its size.
    windows : bool
        The parameters are log-parameters: search those with boxes wider than ``WIDE_BOX``
        either side of the start in moving windows (:func:`_windowed_search`). Without, every
        parameter is searched in its whole box (knot coordinates, which have no scale); a
        run that does not move from a non-stationary start is reported either way.
    quiet : array of bool, shape (P, 2), optional
        Sides (lower, upper) of the box on which an optimum does not warn (the caller
        widens them: :func:`learn_widening`).
    """
    theta0 = np.asarray(theta0, dtype=float)
    bounds = np.asarray(bounds, dtype=float)
    if bounds.shape != (theta0.size, 2) or np.any(bounds[:, 0] > bounds[:, 1]):
        raise ValueError(f"bounds must have shape ({theta0.size}, 2) with lower <= upper")
    n_restarts = check_count(check_positive_int(n_restarts, "n_restarts", minimum=0),
                             "n_restarts", MAX_RESTARTS, "each restart is a whole L-BFGS-B run")
    names = names or [f"theta[{i}]" for i in range(theta0.size)]
    free = bounds[:, 0] < bounds[:, 1]
    if not np.any(free):
        value, _ = objective(theta0)
        return OptimizationResult(theta0, float(value), 1, 0, True, "all parameters fixed")

    failures, evaluated = [], []          # evaluated: (-value, free theta) of every success

    def infeasible(free_theta):
        # a finite value above every one seen, from which the line search backtracks (an
        # infinite one ends L-BFGS-B at once, reporting convergence at the start)
        worst = max((value for value, _ in evaluated), default=0.0)
        return worst + abs(worst) + 1.0, np.zeros(free_theta.size)

    stop_at, soft_stop = _DEADLINE.get() or (None, False)

    def negative(free_theta):
        if stop_at is not None and time.perf_counter() > stop_at:
            if not soft_stop:
                raise TimeBudgetExceeded(f"learning passed its deadline after "
                                         f"{len(evaluated)} evaluations")
            if evaluated:
                raise _DeadlineReached
        theta = theta0.copy()
        theta[free] = free_theta
        try:
            value, gradient = objective(theta)
        except NotPositiveDefiniteError as error:
            # e.g. a float32 Gram at a noise variance it cannot resolve: an infeasible point,
            # backed off from (reported below)
            failures.append(error)
            return infeasible(free_theta)
        if not np.isfinite(value):
            return infeasible(free_theta)
        evaluated.append((-float(value), np.array(free_theta)))
        return -value, -np.asarray(gradient)[free]

    def feasible(out) -> bool:
        """Whether ``negative`` returned an evaluation (not an infeasible point's stand-in)."""
        return bool(evaluated) and evaluated[-1][0] == out[0]

    box = bounds[free]
    first = np.clip(theta0, bounds[:, 0], bounds[:, 1])[free]
    radius = np.full(first.size, np.inf)
    if windows:
        wide = (first - box[:, 0] > WIDE_BOX) | (box[:, 1] - first > WIDE_BOX)
        radius[wide] = WINDOW
    draw_box = _window(box, first, np.where(np.isinf(radius), np.inf, WIDE_BOX))
    starts = [first]
    generator = as_generator(rng)
    for _ in range(n_restarts):
        starts.append(generator.uniform(draw_box[:, 0], draw_box[:, 1]))

    best = None
    n_evaluations = 0
    history = []
    for start in starts:
        curve, before = [], len(evaluated)
        try:
            run = _windowed_search(negative, start, box, max_iter, radius, ftol,
                                   curve=curve, feasible=feasible)
        except _DeadlineReached:            # a soft deadline: the best point evaluated
            fun, x = min(evaluated, key=lambda pair: pair[0])
            run = _Run(x, fun, len(evaluated) - before, False, DEADLINE_MESSAGE)
        history.append(np.array(curve))
        n_evaluations += run.n_evaluations
        if best is None or run.fun < best.fun:
            best = run
        if run.message == DEADLINE_MESSAGE:
            break
    if failures and not evaluated:                  # no start could be evaluated
        raise failures[0]
    if failures:
        # the best point evaluated: the run's last iterate may be a rejected trial point
        fun, x = min(evaluated, key=lambda pair: pair[0])
        best = _Run(x, fun, n_evaluations, False,
                    f"{best.message} (backed off from {len(failures)} infeasible point(s))")
        warnings.warn(
            f"{len(failures)} of {n_evaluations} likelihood evaluations failed ({failures[0]}) "
            "and were treated as infeasible: the optimizer backed off from those "
            "hyperparameters, so the optimum is the best where the statistics factorize (a "
            "float32 fit cannot resolve a noise variance much below 1e-3 of the target's "
            "variance, docs/float32.md: use dtype='float64' or raise the noise variance's "
            "lower bound)", NumericalWarning, stacklevel=3)
    theta = theta0.copy()
    theta[free] = best.x
    _warn_on_bounds(theta, bounds, free, names, quiet)
    return OptimizationResult(theta, float(-best.fun), n_evaluations, len(starts),
                              best.converged, best.message, history=tuple(history))


@dataclass(frozen=True)
class _Run:
    """The end of one start's search: x, -objective there, evaluations, and the verdict."""

    x: np.ndarray
    fun: float
    n_evaluations: int
    converged: bool
    message: str


class _RecordFirst:
    """``negative`` that keeps its first evaluation (L-BFGS-B's, at the run's start), and
    whether ``feasible`` said it was one (not an infeasible point's stand-in)."""

    def __init__(self, negative, feasible=None):
        self.negative, self.first, self.feasible = negative, None, feasible
        self.first_feasible = False

    def __call__(self, x):
        out = self.negative(x)
        if self.first is None:
            self.first = out
            self.first_feasible = self.feasible is not None and self.feasible(out)
        return out


def _window(box: np.ndarray, x: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """The box intersected with [x - radius, x + radius] (per parameter), shape (P, 2)."""
    return np.column_stack([np.maximum(box[:, 0], x - radius),
                            np.minimum(box[:, 1], x + radius)])


def _projected_gradient(x: np.ndarray, gradient: np.ndarray, box: np.ndarray) -> float:
    """max_i |P(x - g) - x|_i, P the projection on the box: L-BFGS-B's stationarity measure
    (0 where x is stationary in the box, an outward gradient on a bound included)."""
    return float(np.max(np.abs(np.clip(x - gradient, box[:, 0], box[:, 1]) - x)))


def _windowed_search(negative, start, box, max_iter, radius, ftol=None, *, curve=None,
                     feasible=None) -> _Run:
    """L-BFGS-B from ``start`` in ``box``, each parameter within ``radius`` (log units, inf:
    its whole box) of the current point.

    L-BFGS-B's first trial point is x - g (its first Hessian guess is the identity), so
    only the box limits the first step: with a gradient of hundreds in log units and a box
    1e-20..1e20 wide the trial lands where the kernel is degenerate (length scale 1e-20) and
    the objective and its gradient are rounding noise; the line search then returns to the
    start and the run ends with "CONVERGENCE: REL_REDUCTION_OF_F" without having moved, or
    settles in a spurious optimum of that region. So a wide parameter is searched in the
    window ``_window(box, x, radius)``: an optimum on a face of the window that is not a
    face of the box moves the window there (each move raises the objective), at most
    ``MAX_WINDOW_MOVES`` times ("STILL MOVING" otherwise). A run that reports convergence
    at its start although the projected gradient there exceeds ``STATIONARITY_TOLERANCE`` is
    retried in windows ``WINDOW_SHRINK`` times narrower (every parameter, ``WINDOW`` at most;
    ``WINDOW_SHRINKS`` retries in all) and otherwise reported as not converged
    ("NO PROGRESS"): never as converged.

    ``curve`` (a list), if given, receives the objective (not negated) at the start, when
    ``feasible(first output)`` says it was evaluated, and after each L-BFGS-B iteration.
    """
    curve = [] if curve is None else curve

    def iteration(intermediate_result):
        curve.append(-float(intermediate_result.fun))

    x, radius = np.asarray(start, dtype=float), np.asarray(radius, dtype=float)
    evaluations = moves = shrinks = 0
    options = {"maxiter": max_iter} if ftol is None else {"maxiter": max_iter, "ftol": ftol}
    while True:
        window = _window(box, x, radius)
        recorder = _RecordFirst(negative, feasible)
        at = len(curve)
        result = scipy.optimize.minimize(recorder, x, jac=True, method="L-BFGS-B",
                                         bounds=window, options=options, callback=iteration)
        evaluations += result.nfev
        start_value, start_gradient = recorder.first
        if not curve and recorder.first_feasible:       # the start of the whole search
            curve.insert(at, -float(start_value))
        stationarity = _projected_gradient(x, start_gradient, window)
        if shrinks == 0:
            first_stationarity = _projected_gradient(x, start_gradient, box)
        if (result.success and np.array_equal(result.x, x) and np.isfinite(start_value)
                and stationarity > STATIONARITY_TOLERANCE):
            if shrinks == WINDOW_SHRINKS:
                return _Run(x, float(result.fun), evaluations, False,
                            f"NO PROGRESS: L-BFGS-B stayed at its start although the "
                            f"projected gradient there is {first_stationarity:.3g} (also in "
                            f"windows down to +-{radius.min():.3g} log units around it): the "
                            "objective or its gradient is inaccurate near the start "
                            "(degenerate hyperparameters); narrow the bounds or move the start")
            radius = np.minimum(radius, WINDOW) / WINDOW_SHRINK
            shrinks += 1
            continue
        on_window_face = (((result.x <= window[:, 0] + BOUNDARY_TOLERANCE)
                           & (window[:, 0] > box[:, 0] + BOUNDARY_TOLERANCE))
                          | ((result.x >= window[:, 1] - BOUNDARY_TOLERANCE)
                             & (window[:, 1] < box[:, 1] - BOUNDARY_TOLERANCE)))
        if not (result.success and np.any(on_window_face)):
            return _Run(result.x, float(result.fun), evaluations, bool(result.success),
                        str(result.message))
        moves += 1
        if moves > MAX_WINDOW_MOVES:
            return _Run(result.x, float(result.fun), evaluations, False,
                        f"STILL MOVING: the optimum left {MAX_WINDOW_MOVES} windows of "
                        f"+-{WINDOW:.3g} log units in a row, toward a bound far from the "
                        "start; narrow the bounds or move the start")
        x = result.x


def _on_bounds(theta, bounds) -> np.ndarray:
    """(P, 2) bool: theta[i] within BOUNDARY_TOLERANCE of its lower / upper bound (free
    parameters only)."""
    free = (bounds[:, 0] < bounds[:, 1])[:, None]
    return free & (np.abs(theta[:, None] - bounds) <= BOUNDARY_TOLERANCE)


def _warn_on_bounds(theta, bounds, free, names, quiet=None) -> None:
    quiet = np.zeros(bounds.shape, dtype=bool) if quiet is None else np.asarray(quiet, bool)
    for i in np.flatnonzero(free):
        for column, (side, limit) in enumerate((("lower", bounds[i, 0]),
                                                 ("upper", bounds[i, 1]))):
            if abs(theta[i] - limit) <= BOUNDARY_TOLERANCE and not quiet[i, column]:
                warnings.warn(
                    f"the optimum of {names[i]} = {np.exp(theta[i]):.4g} sits on its {side} "
                    f"bound {np.exp(limit):.4g}; consider widening the bounds",
                    BoundaryWarning, stacklevel=3,
                )


def learn_hyperparameters(objective, hyperparameters: Hyperparameters, *, n_restarts: int = 0,
                          rng=None, ftol: float | None = None
                          ) -> tuple[Hyperparameters, OptimizationResult]:
    """Maximize the objective over theta inside the box of ``hyperparameters``.

    ``objective`` takes theta = [kernel.theta..., log noise_variance] (any objective of the
    engine: :class:`scalegp.engine.likelihood.MarginalLikelihood`,
    :class:`scalegp.engine.qr.QRMarginalLikelihood`,
    :class:`scalegp.engine.exact.ExactMarginalLikelihood`); ``hyperparameters`` gives the start and
    the box (:class:`~scalegp.engine.hyperparameters.Hyperparameters`, which may have been narrowed
    to where a feature map is valid). ``ftol``: L-BFGS-B's relative reduction tolerance
    (:func:`maximize_likelihood`). Returns the hyperparameters at the optimum and the
    :class:`OptimizationResult`.
    """
    result = maximize_likelihood(objective, hyperparameters.theta, hyperparameters.bounds,
                                 n_restarts=n_restarts, rng=rng, names=hyperparameters.names,
                                 windows=True, ftol=ftol)
    return hyperparameters.at(result.theta), result


def learn_widening(make_objective, hyperparameters: Hyperparameters, *, n_restarts: int = 0,
                   rng=None, max_widenings: int = MAX_WIDENINGS,
                   factor: float = WIDENING_FACTOR, ftol: float | None = None
                   ) -> tuple[Hyperparameters, OptimizationResult]:
    """:func:`learn_hyperparameters` in a default box that widens itself where it binds.

    Let B be the box and D its default sides (:meth:`Hyperparameters.default_sides`). After
    learning theta* in B, each side of D that theta* sits on (within BOUNDARY_TOLERANCE) moves
    out by ``factor``: lower / factor, upper * factor (the length scales share one pair, so
    all of them move), and learning continues from theta* in the wider box, with the
    objective rebuilt for it by ``make_objective(hyperparameters)`` (its kernel clips theta
    into its own bounds). This repeats at most ``max_widenings`` times and stops early when no
    default side binds or a widening raised log p(y) by less than ``WIDENING_GAIN``: the
    likelihood is then flat beyond the bound (an input the function does not depend on, whose
    length scale tends to infinity), which is recorded in ``result.widened`` without a
    warning. A side the user set (any pair but the library's default) never moves, and an
    optimum on it warns (:class:`~scalegp.errors.BoundaryWarning`) as in
    :func:`learn_hyperparameters`; so does one still on a widened side whose last widening
    gained more than ``WIDENING_GAIN`` (the optimum may lie further out).

    Parameters
    ----------
    make_objective : callable
        ``make_objective(hyperparameters) -> objective`` (theta -> (log p(y), gradient)).
    hyperparameters : Hyperparameters
        The start and the box.
    n_restarts, rng
        Restarts of the first run (:func:`maximize_likelihood`); the widened runs start from
        the optimum only.
    max_widenings : int
    factor : float > 1
    ftol : float, optional
        L-BFGS-B's relative reduction tolerance of every run (:func:`maximize_likelihood`).

    Returns
    -------
    hyperparameters, result
        The optimum and its box, and the :class:`OptimizationResult` (evaluations summed
        over the runs, ``widened`` listing the sides moved).
    """
    max_widenings = check_positive_int(max_widenings, "max_widenings", minimum=0)
    sides = hyperparameters.default_sides()
    names = hyperparameters.names
    result = maximize_likelihood(make_objective(hyperparameters), hyperparameters.theta,
                                 hyperparameters.bounds, n_restarts=n_restarts, rng=rng,
                                 names=names, windows=True, quiet=sides, ftol=ftol)
    hyperparameters = hyperparameters.at(result.theta)
    evaluations, moved, gain = result.n_evaluations, [], math.inf
    history = result.history
    for _ in range(max_widenings):
        binding = _on_bounds(result.theta, hyperparameters.bounds) & sides
        if not binding.any() or gain < WIDENING_GAIN:
            break
        wider = hyperparameters.widened(binding, factor)
        last = result
        result = maximize_likelihood(make_objective(wider), result.theta, wider.bounds,
                                     names=names, windows=True, quiet=sides, ftol=ftol)
        evaluations += result.n_evaluations
        gain = result.log_marginal_likelihood - last.log_marginal_likelihood
        if gain < 0.0:                      # never worse than the optimum in the smaller box
            result, gain = last, 0.0
        elif result.history:
            history = continued_history(history, result.history[0])
        hyperparameters = wider.at(result.theta)
        bounds = np.exp(wider.bounds)
        moved += [(names[i], ("lower", "upper")[j], float(bounds[i, j]))
                  for i, j in zip(*np.nonzero(binding))]
    still = _on_bounds(result.theta, hyperparameters.bounds) & sides
    if still.any() and gain >= WIDENING_GAIN:
        _warn_on_bounds(result.theta, hyperparameters.bounds, hyperparameters.free, names,
                        quiet=~still)
    return hyperparameters, OptimizationResult(
        result.theta, result.log_marginal_likelihood, evaluations, result.n_starts,
        result.converged, result.message, tuple(moved), history)


def continued_history(history: tuple, curve) -> tuple:
    """``history`` (:attr:`OptimizationResult.history`) with ``curve``, a run that started
    where the best start ended (a widened box, learned knots), appended to that start's
    curve (its first value, the shared point, dropped)."""
    curves = [np.asarray(c, dtype=float) for c in history]
    curve = np.asarray(curve, dtype=float)
    if not curves:
        return (curve,)
    best = max(range(len(curves)), key=lambda i: curves[i][-1] if curves[i].size else -math.inf)
    curves[best] = np.concatenate([curves[best], curve[1:]])
    return tuple(curves)
