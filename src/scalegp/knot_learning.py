"""Nystrom knots learned with the hyperparameters by the gradient of the VFE bound.

Titsias' bound (docs/nystrom.md, Eq. V.1) is a function of the knots Z as much as of theta;
SGPR (GPflow, GPyTorch) maximizes it over both. :class:`LearnedKnotsObjective` is that bound
as a function of p = [theta..., vec(Z)] (theta = [kernel log-parameters..., log s2], Z row by
row), with its gradient: the theta part is the engine's (:class:`scalegp.gp.MarginalLikelihood`
with ``variational=True``: value, noise gradient and the kernel gradient <W, dPsi_j>, here
summed in the knots' loop), the Z part is Eq. N.4 of docs/nystrom.md,

    dF/dz_a = sum_i (W L^{-1})_ia dk(x_i, z_a)/dz_a + 2 sum_b D_ab dk(z_b, z_a)/dz_a,
    W = dF/dPsi = r beta^T / s2 - Psi M^{-1} + Psi / s2,   D = -L^{-T} sym(Phi(W^T Psi)) L^{-1},

with r = y - Psi beta, M = s2 I + Psi^T Psi, K_ZZ = L L^T and Phi of Eq. N.2: one more
contraction per chunk of the pass the theta gradient makes (O(n m d)), in the same loop and from
the same W L^{-1} as the theta gradient, and O(m^3 + m^2 d)
once. :func:`learn_knots` runs L-BFGS-B on p from a map and hyperparameters (the estimator's
``learn_knots``: after theta is learned at the knots of the rule).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from . import gp, parallel
from .features.nystrom import LEARNED, NystromFeatures
from .optimize import maximize_likelihood


class _GradientShares:
    """One thread's sums over its chunks: the kernel-parameter gradient, the cross term
    sum_i (W L^{-1})_ia dk(x_i, z_a)/dz_a and Phi(W^T Psi)'s C (Eq. N.4)."""

    def __init__(self, n_params: int, knot_shape):
        self.kernel = np.zeros(n_params)
        self.cross = np.zeros(knot_shape)
        self.C = np.zeros((knot_shape[0],) * 2)


class LearnedKnotsObjective:
    """The VFE bound F(theta, Z) and its gradient in p = [theta..., vec(Z)] (module docstring).

    ``feature_map`` is a :class:`~scalegp.features.nystrom.NystromFeatures` (its knots are the
    start); the other arguments are those of :class:`scalegp.gp.MarginalLikelihood`
    (homoscedastic noise only).
    """

    def __init__(self, feature_map: NystromFeatures, hyperparameters, X, y, **options):
        if not isinstance(feature_map, NystromFeatures):
            raise ValueError(f"learned knots need approximation='nystrom', got "
                             f"{feature_map.name!r}")
        self.engine = gp.MarginalLikelihood(feature_map, hyperparameters, X, y,
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
        kept = gp.KeptFeatures(engine._feature_budget) if engine._feature_budget else None
        at_map, statistics, value, system, conditioned = engine._condition(theta,
                                                                           keep_features=kept)
        noise_variance = engine.hyperparameters.values(theta)[1]
        weight = 1.0 / noise_variance                      # the VFE trace term's t = 1 / s2
        # one loop gives the kernel-parameter and the knot gradients from the same W and
        # W L^{-1} (gp.chunk_gradient's kernel part is <W, dPsi_j>, with W's trace term)
        totals = parallel.reduce_chunks(
            gp.features_by_chunk(at_map, engine.source, kept, chunk_size=engine.chunk_size,
                                 dtype=engine.dtype),
            functools.partial(self._add_gradient_shares, at_map, system, weight),
            [_GradientShares(at_map.kernel.n_params, self.knot_shape)
             for _ in range(engine.n_jobs)], rows=lambda item: item[0].X.shape[0])
        kernel_gradient = sum((t.kernel for t in totals[1:]), totals[0].kernel)
        cross = sum((t.cross for t in totals[1:]), totals[0].cross)
        C = sum((t.C for t in totals[1:]), totals[0].C)
        noise_part = (gp.noise_gradient(conditioned, system)
                      + engine._missing_trace(at_map, statistics) / (2.0 * noise_variance))
        knots_gradient = at_map.knot_gradient(cross, C)
        return value, np.concatenate([kernel_gradient, [noise_part], knots_gradient.ravel()])

    @staticmethod
    def _add_gradient_shares(at_map, system, weight, total: _GradientShares, item) -> None:
        chunk, Psi = item
        W = gp.feature_sensitivity(Psi, chunk.y, system, trace_weight=weight)
        theta_share, share, C_share = at_map.gradient_share(chunk.X, Psi, W)
        total.kernel += (theta_share
                         - 0.5 * weight * at_map.kernel.diag_gradient(chunk.X).sum(axis=1))
        total.cross += share
        total.C += C_share

    def posterior(self, p) -> gp.Posterior:
        """The posterior at p's hyperparameters and knots."""
        return self.engine.posterior(self._at(p))


def learn_knots(feature_map: NystromFeatures, hyperparameters, X, y, *, max_iter: int,
                **options):
    """Maximize the VFE bound over theta and the knots by L-BFGS-B (at most ``max_iter``
    iterations) from ``hyperparameters`` and the knots of ``feature_map``; theta stays in the
    hyperparameters' box, the knots are free.

    Returns (the map at the learned knots, the learned hyperparameters, the
    :class:`~scalegp.optimize.OptimizationResult` over p, the objective).
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
