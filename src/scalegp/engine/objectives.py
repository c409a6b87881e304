"""The objective protocol, and the choice of the low-rank objective by the engine's solver.

An objective is what learning, conditioning and sampling need of a model at the log-parameters
theta = [kernel.theta..., log noise_variance] (docs/engine.md, "Hyperparameters"):

    objective.hyperparameters    the owner of theta (Hyperparameters: names, box, decoding)
    objective.value(theta)       log p(y | theta)
    objective(theta)             (log p(y | theta), its gradient)
    objective.posterior(theta)   the posterior at theta (or at a Hyperparameters' values)

Three implement it: the low-rank engine on the normal equations
(:class:`scalegp.engine.likelihood.MarginalLikelihood`), its QR variant for a fixed basis
(:class:`scalegp.engine.qr.QRMarginalLikelihood`) and the dense exact GP
(:class:`scalegp.engine.exact.ExactMarginalLikelihood`). The optimizer
(:func:`scalegp.inference.optimize.learn_hyperparameters`) and the estimators use nothing else; a
posterior gives ``predict`` and ``sample``.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..features.base import FeatureMap
from . import likelihood, qr
from .hyperparameters import Hyperparameters
from .noise import FITC

__all__ = ["Objective", "OBJECTIVES", "SOLVERS", "low_rank_objective"]

#: How the low-rank engine solves its m x m system: "cholesky" (normal equations,
#: M = s2 S + Psi^T Psi; every map) or "qr" (the R-factor of [Phi | y], never forming
#: Phi^T Phi; fixed-basis maps, homoscedastic noise, float64; GLF paper, Appendix A.2).
SOLVERS = ("cholesky", "qr")
#: What the low-rank engine maximizes (docs/nystrom.md, section 3): "dtc" the likelihood of
#: K = Psi S Psi^T + s2 I (subset of regressors / DTC); "fitc" that of the FITC-style
#: K = Q + diag(max(k(x, x) - psi^T S psi, 0)) + s2 I (any map; the noise model
#: :data:`scalegp.engine.noise.FITC`); "vfe" Titsias' bound, the DTC likelihood minus
#: tr(K - Q) / (2 s2) (maps with ``bounded_by_kernel`` only; with known noise variances
#: sum_i (k_ii - q_ii) / (2 (s2 + v_i)), docs/nystrom.md, Eq. V.4).
OBJECTIVES = ("dtc", "fitc", "vfe")


class Objective(Protocol):
    """log p(y | theta), its gradient and the posterior at theta (module docstring)."""

    hyperparameters: Hyperparameters
    n_evaluations: int

    def value(self, theta) -> float: ...

    def __call__(self, theta) -> tuple[float, np.ndarray]: ...

    def posterior(self, theta): ...


def low_rank_objective(feature_map: FeatureMap, hyperparameters, X, y=None, *,
                       solver: str = "cholesky", objective: str = "dtc",
                       **options) -> Objective:
    """The low-rank objective ``objective`` (:data:`OBJECTIVES`) on ``solver`` (:data:`SOLVERS`).

    ``options``: ``chunk_size``, ``dtype``, ``progress``, ``noise``, ``sample_noise_variance``
    and, for "cholesky", ``signed_rule`` (the QR variant's fixed-basis maps have no negative
    weights, so it takes none). "fitc" sets ``noise`` to :data:`scalegp.engine.noise.FITC` (the QR
    variant refuses it: it is homoscedastic only); "vfe" needs the "cholesky" solver.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if objective == "fitc":
        options["noise"] = FITC
    if objective == "vfe":
        if solver != "cholesky":
            raise NotImplementedError("objective='vfe' uses solver='cholesky'")
        options["variational"] = True
    if solver == "qr":
        options.pop("signed_rule", None)
        return qr.QRMarginalLikelihood(feature_map, hyperparameters, X, y, **options)
    return likelihood.MarginalLikelihood(feature_map, hyperparameters, X, y, **options)
