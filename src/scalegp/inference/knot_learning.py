"""Nystrom knots learned with the hyperparameters by the gradient of the VFE bound.

Titsias' bound (docs/nystrom.md, Eq. V.1) is a function of the knots Z as much as of theta;
SGPR (GPflow, GPyTorch) maximizes it over both. :class:`LearnedKnotsObjective` is that bound
as a function of p = [theta..., vec(Z)] (theta = [kernel log-parameters..., log s2], Z row by
row), with its gradient: the theta part is the engine's (:class:`scalegp.engine.MarginalLikelihood`
with ``variational=True``: value, noise gradient and the kernel gradient <W, dPsi_j>, here
summed in the knots' loop, :func:`scalegp.engine.gradients.own_pass_gradient`), the Z part
is Eq. N.4 of docs/nystrom.md,

    dF/dz_a = sum_i (W L^{-1})_ia dk(x_i, z_a)/dz_a + 2 sum_b D_ab dk(z_b, z_a)/dz_a,
    W = dF/dPsi = r beta^T / s2 - Psi M^{-1} + Psi / s2,   D = -L^{-T} sym(Phi(W^T Psi)) L^{-1},

with r = y - Psi beta, M = s2 I + Psi^T Psi, K_ZZ = L L^T and Phi of Eq. N.2: the Nystrom
map's own gradient pass (:meth:`scalegp.features.nystrom.NystromAtTheta.own_gradient`)
with the knots' cross term, one more O(n m d) contraction per chunk from the same
B = W L^{-1}, and O(m^3 + m^2 d) once; W^T Psi summed over the rows comes from the
statistics. :func:`learn_knots` runs L-BFGS-B on p from a map and hyperparameters (the estimator's
``learn_knots``: after theta is learned at the knots of the rule).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..engine.gradients import own_pass_gradient
from ..engine.likelihood import MarginalLikelihood, Posterior
from ..engine.statistics import KeptFeatures
from ..features.nystrom import LEARNED, NystromFeatures
from .optimize import maximize_likelihood


class LearnedKnotsObjective:
    """The VFE bound F(theta, Z) and its gradient in p = [theta..., vec(Z)] (module docstring).

    ``feature_map`` is a :class:`~scalegp.features.nystrom.NystromFeatures` (its knots are the
    start); the other arguments are those of :class:`scalegp.engine.MarginalLikelihood`
    (known noise variances ``sample_noise_variance`` included: Eq. V.4, the rows of W
    weighted, the noise part from a second pass over the features).
    """

    def __init__(self, feature_map: NystromFeatures, hyperparameters, X, y, **options):
        if not isinstance(feature_map, NystromFeatures):
            raise ValueError(f"learned knots need approximation='nystrom', got "
                             f"{feature_map.name!r}")
        self.engine = MarginalLikelihood(feature_map, hyperparameters, X, y,
                                            variational=True, **options)
        self.knot_shape = feature_map.knots.shape
        self.n_theta = self.engine.hyperparameters.n_params
        self.n_evaluations = 0

    @property
    def hyperparameters(self):
        return self.engine.hyperparameters

    def start(self) -> np.ndarray:
        """p at the hyperparameters' values and the map's knots."""
        return np.concatenate([self.hyperparameters.theta, self.engine.feature_map.knots.ravel()])

    def feature_map(self, p) -> NystromFeatures:
        """The map at the knots of p (selection "learned")."""
        knots = np.asarray(p[self.n_theta:], dtype=float).reshape(self.knot_shape)
        return dataclasses.replace(self.engine.feature_map, knots=knots, selection=LEARNED)

    def _at(self, p) -> np.ndarray:
        self.engine.feature_map = self.feature_map(p)
        return np.asarray(p[:self.n_theta], dtype=float)

    def value(self, p) -> float:
        return self.engine.value(self._at(p))

    def __call__(self, p) -> tuple[float, np.ndarray]:
        self.n_evaluations += 1
        theta = self._at(p)
        engine = self.engine
        kept = KeptFeatures(engine.feature_budget) if engine.feature_budget else None
        at_map, statistics, value, system, conditioned = engine.conditioned(theta,
                                                                           keep_features=kept)
        noise_variance = engine.hyperparameters.values(theta)[1]
        theta_gradient, knots_gradient = own_pass_gradient(
            engine, at_map, statistics, system, conditioned, noise_variance, kept,
            variational=True, homoscedastic=engine.homoscedastic, knots=True)
        return value, np.concatenate([theta_gradient, knots_gradient.ravel()])

    def posterior(self, p) -> Posterior:
        """The posterior at p's hyperparameters and knots."""
        return self.engine.posterior(self._at(p))


def learn_knots(feature_map: NystromFeatures, hyperparameters, X, y, *, max_iter: int,
                **options):
    """Maximize the VFE bound over theta and the knots by L-BFGS-B (at most ``max_iter``
    iterations) from ``hyperparameters`` and the knots of ``feature_map``; theta stays in the
    hyperparameters' box, the knots are free.

    Returns (the map at the learned knots, the learned hyperparameters, the
    :class:`~scalegp.inference.optimize.OptimizationResult` over p, the objective).
    """
    objective = LearnedKnotsObjective(feature_map, hyperparameters, X, y, **options)
    hp = objective.hyperparameters
    n_knot_params = feature_map.knots.size
    bounds = np.vstack([hp.bounds, np.tile([-np.inf, np.inf], (n_knot_params, 1))])
    names = hp.names + [f"knot[{a}, {j}]" for a in range(feature_map.knots.shape[0])
                        for j in range(feature_map.knots.shape[1])]
    result = maximize_likelihood(objective, objective.start(), bounds, names=names,
                                 max_iter=max_iter)
    return (objective.feature_map(result.theta), hp.at(result.theta[:objective.n_theta]),
            result, objective)
