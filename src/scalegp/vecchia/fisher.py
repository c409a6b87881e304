"""Fisher scoring for the Vecchia likelihood (Guinness 2021; GpGp's ``fit_model``).

With g the gradient and I the Fisher information of the Vecchia log likelihood in the
log-parameters theta (:func:`scalegp.vecchia.likelihood.vecchia_log_likelihood` with
``eval_fisher``), each iteration proposes the scoring step

    d = (mu (I + r I_diag))^{-1} g,   r = RIDGE (a tiny ridge for near-singular I),

capped at MAX_STEP log units in its largest entry and kept in the box, and halves it
until the log likelihood does not decrease. mu (1 at first) corrects the information's
scale where the data are not a draw of the model (the observed curvature then differs from
the expected one, and plain scoring steps overshoot or fall short by a constant factor):
after a step, the slopes g^T d before and g_new^T d after it give the secant's best
multiple a = g^T d / (g^T d - g_new^T d) of the step, and mu is divided by a (clipped to
[1/MU_CHANGE, MU_CHANGE]). It stops when the predicted gain of the step,
1/2 g^T d, falls below ``tolerance`` nats (GpGp: 1e-4). Near the optimum the information
is the Hessian's expectation, so the steps are Newton steps: from a start near the optimum
(a sampled stage's, :mod:`scalegp.vecchia.learning`) two to four evaluations of the
likelihood, its gradient and its information suffice, where L-BFGS-B, which starts from
the identity as its Hessian, takes ten to twenty.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import linalg
from ..engine.hyperparameters import Hyperparameters
from ..errors import BoundaryWarning, NotPositiveDefiniteError
from ..inference.optimize import BOUNDARY_TOLERANCE, OptimizationResult

#: Ridge on the information's diagonal, relative to it.
RIDGE = 1e-8
#: Largest step in any log-parameter per iteration.
MAX_STEP = 1.0
#: Step halvings before an iteration gives up.
MAX_HALVINGS = 20
#: Largest change of the information's scale mu in one iteration.
MU_CHANGE = 4.0
#: Default stopping tolerance: predicted gain in nats (GpGp's convtol).
TOLERANCE = 1e-4


def fisher_scoring(objective, hyperparameters: Hyperparameters, *, tolerance=None,
                   max_iter: int = 50) -> tuple[Hyperparameters, OptimizationResult]:
    """Maximize ``objective.with_fisher(theta) -> (value, gradient, information)`` by
    Fisher scoring inside the box of ``hyperparameters`` (module docstring); parameters with
    equal bounds stay fixed. Returns the hyperparameters at the optimum and an
    :class:`scalegp.inference.optimize.OptimizationResult`."""
    tolerance = TOLERANCE if tolerance is None else float(tolerance)
    box = hyperparameters.bounds
    free = box[:, 0] < box[:, 1]
    theta = np.clip(hyperparameters.theta, box[:, 0], box[:, 1])
    value, gradient, information = objective.with_fisher(theta)
    n_evaluations, converged, message = 1, False, f"{max_iter} iterations reached"
    mu = 1.0
    for _ in range(max_iter):
        g, info = gradient[free], information[np.ix_(free, free)]
        info = info + RIDGE * np.diag(np.diag(info)) + np.eye(g.size) * 1e-300
        step = np.zeros_like(theta)
        step[free] = linalg.solve(info, g) / mu
        gain = 0.5 * float(gradient @ step)
        # a parameter on a bound that the step pushes out of the box stays there
        blocked = ((theta <= box[:, 0] + BOUNDARY_TOLERANCE) & (step < 0)) | \
                  ((theta >= box[:, 1] - BOUNDARY_TOLERANCE) & (step > 0))
        step[blocked] = 0.0
        if gain < tolerance or not np.any(step):
            converged, message = True, f"predicted gain {gain:.3g} nats < {tolerance:g}"
            break
        step *= min(1.0, MAX_STEP / np.max(np.abs(step)))
        for _ in range(MAX_HALVINGS):
            candidate = np.clip(theta + step, box[:, 0], box[:, 1])
            try:
                result = objective.with_fisher(candidate)
                n_evaluations += 1
            except NotPositiveDefiniteError:
                n_evaluations += 1
                step /= 2.0
                continue
            if np.isfinite(result[0]) and result[0] >= value:
                break
            step /= 2.0
        else:
            message = f"no increase along the scoring step after {MAX_HALVINGS} halvings"
            break
        slope_before, slope_after = float(gradient @ step), float(result[1] @ step)
        if slope_before - slope_after > 0:             # the secant's best multiple
            best = slope_before / (slope_before - slope_after)
            mu /= min(max(best, 1.0 / MU_CHANGE), MU_CHANGE)
        theta = candidate
        value, gradient, information = result
    on_bound = free & ((theta <= box[:, 0] + BOUNDARY_TOLERANCE) |
                       (theta >= box[:, 1] - BOUNDARY_TOLERANCE))
    if np.any(on_bound):
        names = [name for name, hit in zip(hyperparameters.names, on_bound) if hit]
        warnings.warn(f"Fisher scoring ended on a bound of {', '.join(names)}: the optimum "
                      "may lie beyond it; widen the bounds", BoundaryWarning, stacklevel=3)
    return hyperparameters.at(theta), OptimizationResult(theta, float(value), n_evaluations, 1,
                                                         converged, message)
