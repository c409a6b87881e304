"""The gradient paths of the low-rank objective, one class each, chosen once per objective.

:class:`~scalegp.engine.likelihood.MarginalLikelihood` computes d log p / d theta (theta =
[kernel.theta..., log s2]) in one of four ways, which depend only on what is fixed when the
objective is built: the map (its signs, whether it is a fixed basis, whether its value at theta
has a gradient pass of its own), the signed rule, the noise model on the source, and the VFE
bound. :func:`choose_gradient_path` picks the path then, and each call of the objective
delegates to it (docs/engine.md, "Gradient paths"):

==========================  ===========================================  ==================
path                        when (decided once, when the objective is    cost per gradient
                            built)                                       after log p
==========================  ===========================================  ==================
:class:`PositivePartPath`   signed map, ``signed_rule="repair"``         O(m^3 + m P) (fixed
                                                                         basis), or a pass:
                                                                         n m^2 + n m P
:class:`FixedBasisPath`     fixed-basis map, homoscedastic, not VFE      O(m^3 + m P)
:class:`MapGradientPath`    the map has its own gradient pass            2 n m^2 + n kernel
                            (Nystrom), not distributed, no FITC term;    gradients (known
                            DTC or VFE                                   variances: + 2 n m^2)
:class:`GeneralPath`        everything else (FITC, any map, a            (3 + 2P) n m^2
                            distributed source), DTC or VFE
==========================  ===========================================  ==================

What is per build and what is per call. The path is per build: every input to the choice
is fixed with the objective. A :class:`~scalegp.data.base.DistributedSource` gets the
:class:`GeneralPath` whatever its map: its statistics pass runs where the rows live
(``source.map_reduce``) and keeps no features here (the old per-call test "kept features
complete" was therefore never true on such a source), so the map's own pass, which runs in this
process over the features, would have to pull every row to the client; the general pass runs
on the workers. Per call, only where the features come from is decided: a streamed path reads
the features the statistics pass kept (:class:`~scalegp.engine.statistics.KeptFeatures`) when
they all fitted in ``feature_budget`` bytes, and recomputes them chunk by chunk otherwise
(:func:`~scalegp.engine.statistics.features_by_chunk`, ``accumulate_gradient``); that is known
only after the pass (the source is not read to count its rows), and it changes no number. The
path a configuration gets can be read off ``MarginalLikelihood.gradient_path``
(tests/test_gradient_paths.py).
"""

from __future__ import annotations

import abc
import functools
from typing import ClassVar

import numpy as np

from .._memory import default_chunk_size
from ..data.base import DistributedSource
from ..features.base import FeatureMap, MapAtTheta
from .positive_part import positive_part_gradient
from .statistics import (BasisStatistics, KeptFeatures, Statistics, accumulate_gradient,
                         accumulate_noise_gradient, feature_cache_budget, features_by_chunk,
                         row_weights)
from .systems import FactorizedSystem


def noise_gradient(statistics: Statistics, system: FactorizedSystem) -> float:
    """d log p / d log s2 = s2 [ alpha^T alpha / 2 - tr(K^{-1}) / 2 ] (dK / d log s2 = s2 I), where

    alpha^T alpha = s2^{-2} (y^T y - 2 b^T beta + beta^T G beta) and
    tr(K^{-1}) = s2^{-1} (n - m + s2 tr(M^{-1} S)) (docs/engine.md, "Gradient").
    """
    s2 = system.noise_variance + system.jitter
    beta = system.beta
    alpha_norm2 = (statistics.y_norm2 - 2 * statistics.projection @ beta
                   + beta @ (statistics.gram @ beta)) / s2**2
    trace_inverse = (statistics.n_samples - system.n_components
                     + s2 * np.sum(system.inverse_diagonal * system.signs_or_ones())) / s2
    return float(system.noise_variance * 0.5 * (alpha_norm2 - trace_inverse))


def homoscedastic_noise_gradient(objective, at_map, statistics, system, conditioned,
                                 noise_variance: float, variational: bool) -> float:
    """d F / d log s2 for d_i = s2: :func:`noise_gradient` from the (conditioned) statistics,
    plus for the VFE bound d/d log s2 of -tr(K - Q) / (2 s2) = tr(K - Q) / (2 s2)
    (docs/nystrom.md, Eq. V.3)."""
    value = noise_gradient(conditioned, system)
    if variational:
        value += (objective.missing_trace(at_map, statistics, noise_variance)
                  / (2.0 * noise_variance))
    return value


def fixed_basis_gradient(statistics: Statistics, system: FactorizedSystem,
                         log_weights_grad: np.ndarray) -> np.ndarray:
    """Kernel-parameter gradient for Psi = Phi diag(sqrt(w)), with g_i = d log w / d theta_i.

    Since dPsi_i = Psi diag(g_i / 2), the general formula
    d log p / d theta_i = s2^{-1} beta^T (db_i - C_i^T beta) - tr(M^{-1} C_i), with
    C_i = Psi^T dPsi_i = G diag(g_i/2) and db_i = (g_i/2) * b, needs only O(m^2 P):
    tr(M^{-1} G diag(g/2)) = sum_l (1 - s2 (M^{-1})_ll S_l) g_l / 2 (docs/engine.md, "Gradient").
    """
    s2 = system.noise_variance + system.jitter
    beta = system.beta
    half = 0.5 * log_weights_grad
    diag_MinvG = 1.0 - s2 * system.inverse_diagonal * system.signs_or_ones()
    G_beta = statistics.gram @ beta
    data_term = half @ (beta * (statistics.projection - G_beta)) / s2
    return data_term - half @ diag_MinvG


class GradientPath(abc.ABC):
    """How one objective computes its gradient; chosen by :func:`choose_gradient_path`.

    ``gradient(objective, at_map, statistics, system, conditioned, noise_variance, kept)``
    receives what the objective's value at theta already computed: the map at theta, the
    statistics of its own features, the factorized system, the statistics the system is
    written in (``conditioned``: those of the repaired features for a positive part), s2, and
    the features the statistics pass kept (``kept``, None when ``feature_budget`` is 0).
    """

    #: A short name, for messages and tests.
    name: ClassVar[str]

    #: True where the path reads the features again (a second pass), so the statistics pass
    #: may keep them for it (:class:`~scalegp.engine.statistics.KeptFeatures`).
    second_pass: ClassVar[bool] = False

    def __init__(self, feature_budget: int = 0):
        #: Bytes of features the statistics pass keeps for the second pass (0: none kept).
        self.feature_budget = feature_budget

    @abc.abstractmethod
    def gradient(self, objective, at_map: MapAtTheta, statistics: Statistics,
                 system: FactorizedSystem, conditioned: Statistics, noise_variance: float,
                 kept: KeptFeatures | None) -> np.ndarray:
        """d log p / d theta, shape (kernel.n_params + 1,)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PositivePartPath(GradientPath):
    """A signed map replaced by its positive part (``signed_rule="repair"``, homoscedastic):
    the kernel part from :func:`~scalegp.engine.positive_part.positive_part_gradient`
    (docs/positive-part.md, "The gradient"), the noise part d log p / d log s2 of the repaired
    system (:func:`noise_gradient` on the repaired statistics G+ = diag(lambda+), b+ = T^T b).

    For a fixed basis (``fixed_basis``) the row sums collapse to G, b and g = d log w / d theta:
    O(m^3 + m P) per step, no pass over the data; otherwise one pass over the chunks, Psi N1 S
    and dPsi's row products, O(n m^2 + n m P).
    """

    name = "positive-part"

    def __init__(self, fixed_basis: bool):
        super().__init__(0)
        self.fixed_basis = bool(fixed_basis)

    def gradient(self, objective, at_map, statistics, system, conditioned, noise_variance,
                 kept):
        s2 = system.noise_variance + system.jitter
        signs = objective.feature_map.signs
        if self.fixed_basis:
            kernel_part = positive_part_gradient(
                system.positive_part, s2, signs, gram=statistics.gram,
                projection=statistics.projection,
                log_weights_grad=objective.feature_map.log_weights_grad(at_map.kernel))
        else:
            kernel_part = positive_part_gradient(
                system.positive_part, s2, signs, at_map=at_map,
                chunks=objective.source.chunks(objective.chunk_size or default_chunk_size(
                    at_map.n_components * (at_map.kernel.n_params + 2))))
        return np.append(kernel_part, noise_gradient(conditioned, system))

    def __repr__(self) -> str:
        return f"PositivePartPath(fixed_basis={self.fixed_basis})"


class FixedBasisPath(GradientPath):
    """A fixed basis Psi = Phi diag(sqrt(w_theta)) with homoscedastic noise: the row sums
    collapse to the basis statistics (:func:`fixed_basis_gradient`),

        d log p / d theta_i = 1/2 sum_l g_il [ S_l beta_l^2 - (1 - s2 (M^{-1})_ll S_l) ],

    and the noise part is :func:`noise_gradient`: O(m^3 + m P) per step, no pass over the
    data (the statistics were accumulated once, when the objective was built)."""

    name = "fixed-basis"

    def gradient(self, objective, at_map, statistics, system, conditioned, noise_variance,
                 kept):
        return np.append(
            fixed_basis_gradient(statistics, system,
                                 objective.feature_map.log_weights_grad(at_map.kernel)),
            noise_gradient(conditioned, system))


class _StreamedPath(GradientPath):
    """A path with a second pass over the features; for the VFE bound (``variational``) the
    pass carries the trace weight t = 1/s2 of d tr(K - Psi Psi^T) / d theta, and with
    homoscedastic noise the noise part adds d/d log s2 of -tr(K - Q) / (2 s2) =
    tr(K - Q) / (2 s2) (:func:`homoscedastic_noise_gradient`, docs/nystrom.md, Eq. V.3;
    with known noise variances a pass sums it row by row, Eq. V.4)."""

    second_pass = True

    def __init__(self, feature_budget: int, variational: bool):
        super().__init__(feature_budget)
        self.variational = bool(variational)

    def trace_weight(self, noise_variance: float) -> float:
        return 1.0 / noise_variance if self.variational else 0.0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(feature_budget={self.feature_budget}, "
                f"variational={self.variational})")


class GeneralPath(_StreamedPath):
    """The general gradient: a second pass summing each chunk's share
    (:func:`~scalegp.engine.statistics.accumulate_gradient`),

        d log p / d theta_j = s2^{-1} sum_i w^_i r_i (dpsi_ij^T beta)
                              - sum_i w^_i psi_i^T M^{-1} dpsi_ij  (+ the diagonal's part),

    (3 + 2P) n m^2 flops, over the kept features where the statistics pass kept them all, on
    the workers of a distributed source otherwise. With homoscedastic noise the noise part
    is replaced by the closed form :func:`homoscedastic_noise_gradient` from the
    statistics; with known noise variances the pass sums it per row
    (:func:`~scalegp.engine.statistics.diagonal_shares`)."""

    name = "general"

    def __init__(self, feature_budget: int, variational: bool, homoscedastic: bool):
        super().__init__(feature_budget, variational)
        self.homoscedastic = bool(homoscedastic)

    def gradient(self, objective, at_map, statistics, system, conditioned, noise_variance,
                 kept):
        gradient = accumulate_gradient(at_map, objective.source, system, noise=objective.noise,
                                       chunk_size=objective.chunk_size, dtype=objective.dtype,
                                       kept_features=kept,
                                       trace_weight=self.trace_weight(noise_variance),
                                       n_jobs=objective.n_jobs)
        if self.homoscedastic:
            gradient[-1] = homoscedastic_noise_gradient(objective, at_map, statistics, system,
                                                        conditioned, noise_variance,
                                                        self.variational)
        return gradient


class MapGradientPath(_StreamedPath):
    """The map's own gradient pass (``FeatureMap.has_own_gradient``; Nystrom:
    :meth:`scalegp.features.nystrom.NystromAtTheta.own_gradient`): the kernel part
    <W, dPsi_j> = sum(B o dK_XZ,j) - <Phi_j, C> with B = W L^{-1} one product per chunk,
    2 n m^2 flops and one kernel evaluation per chunk (docs/engine.md, "Gradient"), over the
    kept features or a pass computing them. The noise part is :func:`noise_gradient` for
    homoscedastic noise; with known noise variances (``homoscedastic`` False: the rows of W
    weighted by w^_i) it is one more pass over the features,
    :func:`~scalegp.engine.statistics.accumulate_noise_gradient` (2 n m^2 flops): 4 n m^2 in
    all where the general pass takes (3 + 2P) n m^2.
    """

    name = "map-gradient"

    def __init__(self, feature_budget: int, variational: bool, homoscedastic: bool = True):
        super().__init__(feature_budget, variational)
        self.homoscedastic = bool(homoscedastic)

    def gradient(self, objective, at_map, statistics, system, conditioned, noise_variance,
                 kept):
        return own_pass_gradient(objective, at_map, statistics, system, conditioned,
                                 noise_variance, kept, variational=self.variational,
                                 homoscedastic=self.homoscedastic)[0]

    def __repr__(self) -> str:
        return (f"MapGradientPath(feature_budget={self.feature_budget}, "
                f"variational={self.variational}, homoscedastic={self.homoscedastic})")


def own_pass_gradient(objective, at_map, statistics, system, conditioned, noise_variance,
                      kept, *, variational: bool, homoscedastic: bool, knots: bool = False):
    """(d F / d theta, d F / d Z or None) from the map's own pass (:class:`MapGradientPath`;
    ``knots``: also the knots' part, :mod:`scalegp.inference.knot_learning`), F the
    objective's likelihood or VFE bound (``variational``)."""
    trace_weight = 1.0 / noise_variance if variational else 0.0
    weights = None if homoscedastic else functools.partial(
        row_weights, at_map, noise=objective.noise, noise_variance=noise_variance)

    def items():
        return features_by_chunk(at_map, objective.source, kept,
                                 chunk_size=objective.chunk_size, dtype=objective.dtype)

    kernel_gradient, knots_gradient = at_map.own_gradient(
        items(), statistics, system, trace_weight=trace_weight, n_jobs=objective.n_jobs,
        knots=knots, row_weights=weights)
    if homoscedastic:
        noise_part = homoscedastic_noise_gradient(objective, at_map, statistics, system,
                                                  conditioned, noise_variance, variational)
    else:                         # a second pass, over the kept features where all fitted
        noise_part = accumulate_noise_gradient(at_map, items(), system, noise=objective.noise,
                                               trace_weight=trace_weight)
    return np.append(kernel_gradient, noise_part), knots_gradient


def choose_gradient_path(feature_map: FeatureMap, source, *, signed_rule: str,
                         homoscedastic: bool, variational: bool, fitc: bool,
                         basis_statistics: BasisStatistics | None, dtype) -> GradientPath:
    """The gradient path of an objective, from what is fixed when it is built (module
    docstring's table, first match wins):

    1. a signed map (``feature_map.signs`` not None) with ``signed_rule="repair"``:
       :class:`PositivePartPath` (``fixed_basis`` where the basis statistics were accumulated);
    2. basis statistics (a :class:`FixedBasisFeatureMap`, homoscedastic, not VFE):
       :class:`FixedBasisPath`;
    3. ``feature_map.has_own_gradient``, noise without the FITC term (homoscedastic or
       known variances) and a source that is not a
       :class:`~scalegp.data.base.DistributedSource`: :class:`MapGradientPath`;
    4. otherwise :class:`GeneralPath`.

    A streamed path's ``feature_budget`` is :func:`~scalegp.engine.statistics.feature_cache_budget`
    of the dtype (0 for float32), or 0 for an out-of-core source (it promises O(chunk m + m^2)
    memory) and for a distributed one (its features stay with its rows).
    """
    if feature_map.signs is not None and signed_rule == "repair":
        return PositivePartPath(fixed_basis=basis_statistics is not None)
    if basis_statistics is not None:
        return FixedBasisPath()
    distributed = isinstance(source, DistributedSource)
    budget = 0 if source.out_of_core or distributed else feature_cache_budget(dtype)
    if feature_map.has_own_gradient and not distributed and not fitc:
        return MapGradientPath(budget, variational, homoscedastic)
    return GeneralPath(budget, variational, homoscedastic)
