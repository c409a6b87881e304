"""Hyperparameter learning: L-BFGS-B on log-parameters inside their box.

The objective is any callable ``theta -> (log p(y), gradient)`` (the engine's
:class:`~scalegp.gp.MarginalLikelihood` or the exact reference), theta and its box given by
:class:`~scalegp.hyperparameters.Hyperparameters`; parameters whose lower and upper bounds
coincide are held fixed. Restarts are drawn uniformly in the box from an
explicit generator. An optimum on a bound triggers a :class:`BoundaryWarning`. An evaluation
whose matrices do not factorize even with jitter (:class:`NotPositiveDefiniteError`) is an
infeasible point the line search backs off from, reported in one :class:`NumericalWarning`;
only when no start can be evaluated is the error raised.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.optimize

from ._limits import MAX_RESTARTS, check_count
from ._validation import as_generator, check_positive_int
from .errors import BoundaryWarning, NotPositiveDefiniteError, NumericalWarning
from .hyperparameters import Hyperparameters

#: An optimum closer than this (in log units) to a bound counts as "on the bound".
BOUNDARY_TOLERANCE = 1e-5


@dataclass(frozen=True)
class OptimizationResult:
    """Best log-parameters found, their log marginal likelihood and bookkeeping."""

    theta: np.ndarray
    log_marginal_likelihood: float
    n_evaluations: int
    n_starts: int
    converged: bool
    message: str


def maximize_likelihood(objective, theta0, bounds, *, n_restarts: int = 0, rng=None,
                        names=None, max_iter: int = 500) -> OptimizationResult:
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
        :data:`scalegp._limits.MAX_RESTARTS` (1,000).
    names : list of str, optional
        Parameter names for the boundary warning.
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

    def negative(free_theta):
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

    starts = [np.clip(theta0, bounds[:, 0], bounds[:, 1])[free]]
    generator = as_generator(rng)
    for _ in range(n_restarts):
        starts.append(generator.uniform(bounds[free, 0], bounds[free, 1]))

    best = None
    n_evaluations = 0
    for start in starts:
        result = scipy.optimize.minimize(negative, start, jac=True, method="L-BFGS-B",
                                         bounds=bounds[free], options={"maxiter": max_iter})
        n_evaluations += result.nfev
        if best is None or result.fun < best.fun:
            best = result
    if failures and not evaluated:                  # no start could be evaluated
        raise failures[0]
    if failures:
        # the best point evaluated: the run's last iterate may be a rejected trial point
        fun, x = min(evaluated, key=lambda pair: pair[0])
        best = scipy.optimize.OptimizeResult(x=x, fun=fun, success=False,
                                             message=f"{best.message} (backed off from "
                                                     f"{len(failures)} infeasible point(s))")
        warnings.warn(
            f"{len(failures)} of {n_evaluations} likelihood evaluations failed ({failures[0]}) "
            "and were treated as infeasible: the optimizer backed off from those "
            "hyperparameters, so the optimum is the best where the statistics factorize (a "
            "float32 fit cannot resolve a noise variance much below 1e-3 of the target's "
            "variance, docs/float32.md: use dtype='float64' or raise the noise variance's "
            "lower bound)", NumericalWarning, stacklevel=3)
    theta = theta0.copy()
    theta[free] = best.x
    _warn_on_bounds(theta, bounds, free, names)
    return OptimizationResult(theta, float(-best.fun), n_evaluations, len(starts),
                              bool(best.success), str(best.message))


def _warn_on_bounds(theta, bounds, free, names) -> None:
    for i in np.flatnonzero(free):
        for side, limit in (("lower", bounds[i, 0]), ("upper", bounds[i, 1])):
            if abs(theta[i] - limit) <= BOUNDARY_TOLERANCE:
                warnings.warn(
                    f"the optimum of {names[i]} = {np.exp(theta[i]):.4g} sits on its {side} "
                    f"bound {np.exp(limit):.4g}; consider widening the bounds",
                    BoundaryWarning, stacklevel=3,
                )


def learn_hyperparameters(objective, hyperparameters: Hyperparameters, *, n_restarts: int = 0,
                          rng=None) -> tuple[Hyperparameters, OptimizationResult]:
    """Maximize the objective over theta inside the box of ``hyperparameters``.

    ``objective`` takes theta = [kernel.theta..., log noise_variance] (any objective of the
    engine: :class:`scalegp.gp.MarginalLikelihood`, :class:`scalegp.qr.QRMarginalLikelihood`,
    :class:`scalegp.exact.ExactMarginalLikelihood`); ``hyperparameters`` gives the start and
    the box (:class:`~scalegp.hyperparameters.Hyperparameters`, which may have been narrowed
    to where a feature map is valid). Returns the hyperparameters at the optimum and the
    :class:`OptimizationResult`.
    """
    result = maximize_likelihood(objective, hyperparameters.theta, hyperparameters.bounds,
                                 n_restarts=n_restarts, rng=rng, names=hyperparameters.names)
    return hyperparameters.at(result.theta), result
