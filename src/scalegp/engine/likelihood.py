"""The low-rank GP at theta: log marginal likelihood and gradient, and the posterior.

With features Psi (n x m), signs S (all +1 unless a quadrature rule has negative weights) and
noise variance s2, the approximate covariance is K = Psi S Psi^T + s2 I. Everything below is
expressed through the m x m matrix

    M = s2 S + G,   G = Psi^T Psi,   b = Psi^T y,   beta = M^{-1} b,

using the Woodbury identity K^{-1} = s2^{-1} (I - Psi M^{-1} Psi^T) and the determinant lemma
det K = s2^{n-m} det(S) det(M) (docs/engine.md; GLF paper, Section 4.2). For S = I,
M = L L^T and c = L^{-1} b, so the log marginal likelihood is

    log p(y) = -1/2 [ (y^T y - |c|^2) / s2 + (n - m) log s2 + 2 sum_i log L_ii + n log 2 pi ].

A signed approximation is either kept (``signed_rule="keep"``: the eigen-factorized M above,
refused where K is not positive definite) or replaced by its positive part
(``signed_rule="repair"``: :mod:`scalegp.engine.positive_part`, docs/positive-part.md), whose
repaired features Psi T go through the S = I path.

The statistics G, b, y^T y come from the streaming passes of :mod:`scalegp.engine.statistics`;
:class:`MarginalLikelihood` (the objective) and :class:`Posterior` (the frozen predictive
distribution it conditions to) are one job: ``Posterior.fit`` conditions through the objective
and the objective's ``posterior(theta)`` returns a Posterior.

No function here builds an n x n matrix or imports a concrete feature map.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from .. import parallel, rowwise
from .._memory import default_chunk_size
from .._validation import check_dtype
from ..data.base import DistributedSource, as_source
from ..errors import ApproximationWarning
from ..features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta
from ..kernels import Kernel
from .hyperparameters import Hyperparameters
from .noise import HOMOSCEDASTIC, NoiseModel, missing_prior_variance
from .positive_part import positive_part_gradient
from .statistics import (BasisStatistics, KeptFeatures, Statistics, accumulate_gradient,
                         accumulate_statistics, feature_cache_budget, features_by_chunk)
from .systems import EigenSystem, FactorizedSystem


#: How the engine treats a signed approximation Psi S Psi^T (quadrature rules with negative
#: weights): "keep" conditions on it as it is and refuses it where Psi S Psi^T + s2 I is not
#: positive definite; "repair" replaces it by its positive part
#: (:mod:`scalegp.engine.positive_part`).
SIGNED_RULES = ("keep", "repair")


def condition(statistics: Statistics, noise_variance: float, signs: np.ndarray | None = None,
              signed_rule: str = "keep") -> tuple[float, FactorizedSystem, Statistics]:
    """log p(y), the factorized system and the statistics it is written in.

    The statistics are the given ones, or those of the repaired features when a signed
    approximation is replaced by its positive part (``signed_rule="repair"``).
    """
    if signed_rule not in SIGNED_RULES:
        raise ValueError(f"signed_rule must be one of {SIGNED_RULES}, got {signed_rule!r}")
    if signs is not None and signed_rule == "repair":
        system, statistics = FactorizedSystem.factor_positive_part(statistics, noise_variance,
                                                                   signs)
        return _log_marginal_likelihood(statistics, system), system, statistics
    system = FactorizedSystem.factor(statistics, noise_variance, signs)
    return _log_marginal_likelihood(statistics, system), system, statistics


def log_marginal_likelihood(statistics: Statistics, noise_variance: float,
                            signs: np.ndarray | None = None,
                            signed_rule: str = "keep") -> tuple[float, FactorizedSystem]:
    """log p(y) = -1/2 [ (y^T y - b^T beta)/s2 + (n - m) log s2 + log|det M| + n log 2 pi ].

    Returns the value and the factorized system (reused by the gradient and the posterior).
    ``signed_rule="repair"`` conditions on the positive part of a signed approximation.
    """
    value, system, _ = condition(statistics, noise_variance, signs, signed_rule)
    return value, system


def _log_marginal_likelihood(statistics: Statistics, system: FactorizedSystem) -> float:
    s2 = system.noise_variance + system.jitter
    n, m = statistics.n_samples, system.n_components
    quadratic = (statistics.y_norm2 - statistics.projection @ system.beta) / s2
    value = -0.5 * (quadratic + (n - m) * math.log(s2) + system.logabsdet()
                    - statistics.log_weight_sum + n * math.log(2 * math.pi))
    return float(value)


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


class MarginalLikelihood:
    """The low-rank objective: log p(y | theta), its gradient, and the posterior at theta.

    theta = [kernel.theta..., log noise_variance], owned by
    :class:`~scalegp.engine.hyperparameters.Hyperparameters` (a kernel alone is taken as its hyperparameters). For a
    :class:`FixedBasisFeatureMap` and homoscedastic noise the basis statistics are accumulated
    once in the constructor and each call costs O(m^3), independent of n; otherwise each call
    makes two streaming passes over the data (statistics, then the gradient's shares).
    ``signed_rule`` ("keep" or "repair", :data:`SIGNED_RULES`) says how a signed map's
    approximation is treated; it has no effect on maps without signs. ``noise`` is the noise
    model (:mod:`scalegp.engine.noise`); per-row known variances come with the data
    (``sample_noise_variance``, or a source's per-row noise variances).

    ``n_jobs`` threads share each pass's chunks (:mod:`scalegp.parallel`; None: one).

    ``variational=True`` gives the VFE bound of Titsias (2009) instead (docs/nystrom.md,
    Eq. V.1): log p(y) - tr(K - Psi Psi^T) / (2 s2), for maps whose Psi Psi^T never exceeds K
    (``feature_map.bounded_by_kernel``, e.g. Nystrom) and homoscedastic noise; ``value``,
    the gradient and the posterior's ``log_marginal_likelihood`` are then the bound's.
    """

    def __init__(self, feature_map: FeatureMap, hyperparameters, X, y=None, *,
                 chunk_size: int | None = None, dtype=None, progress=None,
                 signed_rule: str = "keep", noise: NoiseModel = HOMOSCEDASTIC,
                 sample_noise_variance=None, variational: bool = False,
                 n_jobs: int | None = None):
        if signed_rule not in SIGNED_RULES:
            raise ValueError(f"signed_rule must be one of {SIGNED_RULES}, got {signed_rule!r}")
        self.feature_map = feature_map
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.dtype = check_dtype(dtype)
        self.source = as_source(X, y, noise_variance=sample_noise_variance, dtype=self.dtype)
        self.chunk_size = chunk_size
        self.n_jobs = parallel.resolve_n_jobs(n_jobs)
        self.progress = progress
        self.signed_rule = signed_rule
        self.noise = noise
        self.homoscedastic = noise.is_homoscedastic(self.source)
        if (not self.homoscedastic and feature_map.signs is not None
                and signed_rule == "repair"):
            raise NotImplementedError(
                "the positive-part repair of a signed rule is defined for homoscedastic noise "
                "only; use signed_rule='keep' (--signed-rule keep) or a map without negative "
                "weights")
        self.variational = bool(variational)
        if self.variational:
            _check_variational(feature_map, self.homoscedastic)
        self.n_evaluations = 0
        self.basis_statistics = None
        if (isinstance(feature_map, FixedBasisFeatureMap) and self.homoscedastic
                and not self.variational):
            self.basis_statistics = BasisStatistics.accumulate(
                feature_map, self.source, chunk_size=chunk_size, dtype=self.dtype,
                progress=progress, n_jobs=self.n_jobs)
        # the gradient pass of accumulate_gradient (not the fixed basis, not the repair)
        streams_gradient = (self.basis_statistics is None
                            and not (feature_map.signs is not None and signed_rule == "repair"))
        # an out-of-core source promises O(chunk m + m^2) memory: no O(n m) features kept
        keeps = streams_gradient and not self.source.out_of_core
        self.feature_budget = feature_cache_budget(self.dtype) if keeps else 0

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def statistics(self, at_map: MapAtTheta, noise_variance: float, progress=None,
                   keep_features: KeptFeatures | None = None) -> Statistics:
        if self.basis_statistics is not None:
            return self.basis_statistics.at(self.feature_map, at_map.kernel)
        return accumulate_statistics(at_map, self.source, noise=self.noise,
                                     noise_variance=noise_variance, chunk_size=self.chunk_size,
                                     dtype=self.dtype, progress=progress,
                                     keep_features=keep_features, n_jobs=self.n_jobs)

    def conditioned(self, theta, progress=None, keep_features=None):
        """(map at theta, statistics, log p, factorized system, conditioned statistics): one
        statistics pass and the m x m algebra at theta, for objectives built on this one
        (:class:`scalegp.inference.knot_learning.LearnedKnotsObjective`). ``feature_budget``
        says how many bytes of features a pass may keep for a gradient pass
        (``keep_features``: :class:`~scalegp.engine.statistics.KeptFeatures`)."""
        kernel, noise_variance = self.hyperparameters.values(theta)
        at_map = self.feature_map.at(kernel)
        statistics = self.statistics(at_map, noise_variance, progress, keep_features)
        value, system, conditioned = condition(statistics, noise_variance,
                                               self.feature_map.signs, self.signed_rule)
        if self.variational:
            value -= self.missing_trace(at_map, statistics) / (2.0 * noise_variance)
        return at_map, statistics, value, system, conditioned

    def missing_trace(self, at_map: MapAtTheta, statistics: Statistics) -> float:
        """tr(K - Psi Psi^T) = sum_i k(x_i, x_i) - tr(G): n s for a shift-invariant kernel,
        otherwise one pass over X (kernel diagonals only, no features)."""
        kernel = at_map.kernel
        if kernel.shift_invariant:
            kernel_trace = statistics.n_samples * kernel.variance
        else:
            chunk_size = self.chunk_size or default_chunk_size(at_map.n_components)
            kernel_trace = sum(float(kernel.diag(chunk.X).sum())
                               for chunk in self.source.chunks(chunk_size))
        return kernel_trace - float(np.trace(statistics.gram))

    def value(self, theta) -> float:
        return self.conditioned(theta)[2]

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(log p(y), gradient with respect to theta)."""
        self.n_evaluations += 1
        kept = KeptFeatures(self.feature_budget) if self.feature_budget else None
        at_map, statistics, value, system, conditioned = self.conditioned(theta,
                                                                         keep_features=kept)
        if system.positive_part is not None:
            gradient = np.append(self._positive_part_gradient(at_map, system, statistics),
                                 noise_gradient(conditioned, system))
        elif self.basis_statistics is not None:
            gradient = np.append(
                fixed_basis_gradient(statistics, system,
                                     self.feature_map.log_weights_grad(at_map.kernel)),
                noise_gradient(conditioned, system))
        elif self.homoscedastic and at_map.has_homoscedastic_gradient and not (
                isinstance(self.source, DistributedSource)
                and not (kept is not None and kept.complete)):
            noise_variance = self.hyperparameters.values(theta)[1]
            trace_weight = 1.0 / noise_variance if self.variational else 0.0
            kernel_gradient, _ = at_map.homoscedastic_gradient(
                features_by_chunk(at_map, self.source, kept, chunk_size=self.chunk_size,
                                  dtype=self.dtype),
                statistics, system, trace_weight=trace_weight, n_jobs=self.n_jobs)
            gradient = np.append(kernel_gradient, noise_gradient(conditioned, system))
            if self.variational:       # d/d log s2 of -tr(K - Q) / (2 s2), Eq. V.3
                gradient[-1] += self.missing_trace(at_map, statistics) / (2.0 * noise_variance)
        else:
            noise_variance = self.hyperparameters.values(theta)[1]
            trace_weight = 1.0 / noise_variance if self.variational else 0.0
            gradient = accumulate_gradient(at_map, self.source, system, noise=self.noise,
                                           chunk_size=self.chunk_size, dtype=self.dtype,
                                           kept_features=kept, trace_weight=trace_weight,
                                           n_jobs=self.n_jobs)
            if self.homoscedastic:
                gradient[-1] = noise_gradient(conditioned, system)
            if self.variational:       # d/d log s2 of -tr(K - Q) / (2 s2), Eq. V.3
                gradient[-1] += self.missing_trace(at_map, statistics) / (2.0 * noise_variance)
        return value, gradient

    def _positive_part_gradient(self, at_map: MapAtTheta, system: FactorizedSystem,
                                statistics: Statistics) -> np.ndarray:
        """The kernel-parameter part; ``statistics`` are those of the map's own features."""
        s2 = system.noise_variance + system.jitter
        if self.basis_statistics is not None:
            return positive_part_gradient(
                system.positive_part, s2, self.feature_map.signs, gram=statistics.gram,
                projection=statistics.projection,
                log_weights_grad=self.feature_map.log_weights_grad(at_map.kernel))
        return positive_part_gradient(
            system.positive_part, s2, self.feature_map.signs, at_map=at_map,
            chunks=self.source.chunks(self.chunk_size or default_chunk_size(
                at_map.n_components * (at_map.kernel.n_params + 2))))

    def posterior(self, theta) -> "Posterior":
        """The posterior at theta (or at a :class:`Hyperparameters`' values): from the cached basis statistics for a fixed-basis map (no
        pass over the data), otherwise from one streaming pass."""
        at_map, statistics, value, system, _ = self.conditioned(theta, self.progress)
        return Posterior(self.feature_map, at_map.kernel, system, value, statistics.n_samples)


def _check_variational(feature_map: FeatureMap, homoscedastic: bool) -> None:
    """The VFE bound needs K - Psi Psi^T >= 0 (a Nystrom-type map) and d_i = s2."""
    if not feature_map.bounded_by_kernel:
        raise ValueError(
            f"the VFE objective needs a map whose approximation Psi Psi^T never exceeds the "
            f"kernel (a Nystrom-type projection, bounded_by_kernel); {feature_map.name!r} is "
            "not one: tr(K - Q) can be negative and the bound fails. Use objective='dtc' or "
            "'fitc', or approximation='nystrom'")
    if not homoscedastic:
        raise NotImplementedError("the VFE objective is implemented for homoscedastic noise "
                                  "only (no sample_noise_variance)")


@dataclass(frozen=True)
class Posterior:
    """The frozen predictive distribution of a feature-space GP.

    mean(x*) = psi*^T beta; latent variance s2 psi*^T M^{-1} psi* (= s2 |L^{-1} psi*|^2 for
    S = I). ``include_noise`` adds s2; ``diag_correction`` adds the FITC-style term
    k(x*, x*) - psi*^T S psi*, the prior variance the low-rank model misses.
    """

    feature_map: FeatureMap
    kernel: Kernel
    system: FactorizedSystem
    log_marginal_likelihood: float
    n_samples: int

    @property
    def noise_variance(self) -> float:
        return self.system.noise_variance

    @classmethod
    def fit(cls, feature_map: FeatureMap, kernel: Kernel, noise_variance, X, y=None, *,
            chunk_size: int | None = None, dtype=None, progress=None,
            signed_rule: str = "keep", noise: NoiseModel = HOMOSCEDASTIC,
            sample_noise_variance=None, n_jobs: int | None = None) -> "Posterior":
        """Accumulate the statistics at fixed hyperparameters (``n_jobs`` threads over
        chunks) and condition on (X, y)."""
        hyperparameters = Hyperparameters(kernel, noise_variance)
        objective = MarginalLikelihood(feature_map, hyperparameters, X, y,
                                       chunk_size=chunk_size, dtype=dtype, progress=progress,
                                       signed_rule=signed_rule, noise=noise,
                                       sample_noise_variance=sample_noise_variance,
                                       n_jobs=n_jobs)
        return objective.posterior(hyperparameters)

    @functools.cached_property
    def at_map(self) -> MapAtTheta:
        """The feature map at the posterior's hyperparameters."""
        return self.feature_map.at(self.kernel)

    def features(self, X) -> np.ndarray:
        """The features the system is written in (repaired for a positive-part system)."""
        return self.system.project(self.at_map.features(X).astype(np.float64))

    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False, diag_correction: bool = False):
        """Predictive mean, and optionally the variance (n,) or covariance (n, n).

        Mean and variance are computed row by row, in the fixed blocks of
        :func:`scalegp.rowwise.in_blocks`: each row's value is bitwise that of the row alone.
        ``return_cov`` builds an n_test x n_test matrix: for small test sets only.
        """
        if return_var and return_cov:
            raise ValueError("return_var and return_cov cannot both be True")
        X = self.at_map.check_input(X)
        if return_cov:
            Psi = self.features(X)
            cov = self.system.noise_variance * Psi @ self.system.solve(Psi.T)
            cov = 0.5 * (cov + cov.T)
            if diag_correction:
                cov[np.diag_indices_from(cov)] += self._missing_prior_variance(X, Psi)
            if include_noise:
                cov[np.diag_indices_from(cov)] += self.system.noise_variance
            return Psi @ self.system.beta, cov

        def block(rows):
            Psi = self.features(rows)
            mean = Psi @ self.system.beta
            if not return_var:
                return mean
            var = self.system.noise_variance * self.system.quadratic_diagonal(Psi)
            if diag_correction:
                var += self._missing_prior_variance(rows, Psi)
            return mean, var
        if not return_var:
            return rowwise.in_blocks(block, X)
        mean, var = rowwise.in_blocks(block, X)
        _warn_negative_variance(var, self.kernel.diag(X))
        np.maximum(var, 0.0, out=var)
        if include_noise:
            var += self.system.noise_variance
        return mean, var

    def sample(self, X, n_samples: int, rng: np.random.Generator, *,
               diag_correction: bool = False) -> np.ndarray:
        """Draws of the latent function at X, shape (n_test, n_samples).

        In weight space where the system allows it (S = I or repaired): f = Psi* w with
        w ~ N(beta, s2 M^{-1}), O(n_test m n_samples + m^2 n_samples) after the features, no
        n_test x n_test matrix. A signed (eigen) system's M^{-1} is indefinite, so its draws
        come from the n_test x n_test predictive covariance (eigh, small n_test only). With
        ``diag_correction`` each point adds an independent N(0, max(k(x, x) - psi^T S psi,
        0)) (the FITC / SGPR predictive of docs/nystrom.md, section 4: its covariance is
        that of ``predict(return_cov=True, diag_correction=True)``).
        """
        X = self.at_map.check_input(X)
        if isinstance(self.system, EigenSystem):
            mean, cov = self.predict(X, return_cov=True, diag_correction=diag_correction)
            return rng.multivariate_normal(mean, cov, size=n_samples, method="eigh").T
        Psi = self.features(X)
        draws = Psi @ self.system.sample_weights(n_samples, rng)
        if diag_correction:
            missing = self._missing_prior_variance(X, Psi)
            draws += np.sqrt(missing)[:, None] * rng.standard_normal(draws.shape)
        return draws

    def _missing_prior_variance(self, X, Psi) -> np.ndarray:
        """k(x, x) - psi(x)^T S psi(x), floored at 0 (in the system's own features)."""
        return missing_prior_variance(self.kernel, X, Psi, self.system.signs)


#: A latent variance below -NEGATIVE_VARIANCE_SHARE k(x, x) is not rounding (a positive
#: definite system's s2 psi^T M^{-1} psi >= 0 up to about eps cond(M) |psi|^2).
NEGATIVE_VARIANCE_SHARE = 1e-6


def _warn_negative_variance(var: np.ndarray, prior: np.ndarray) -> None:
    """Warn (:class:`~scalegp.errors.ApproximationWarning`) where a signed system (a
    quadrature rule with negative weights kept, ``signed_rule="keep"``) gives a latent variance
    below -``NEGATIVE_VARIANCE_SHARE`` k(x, x): it is floored at 0, a std that means nothing."""
    negative = var < -NEGATIVE_VARIANCE_SHARE * prior
    if np.any(negative):
        first = int(np.flatnonzero(negative)[0])
        warnings.warn(ApproximationWarning(
            f"the model's signed (indefinite) system gives a negative latent variance at "
            f"{int(negative.sum())} of {var.size} test row(s) (first: test row {first}, "
            f"{var[first]:.4g} where the prior variance k(x, x) is {prior[first]:.4g}); its "
            "std there is reported as 0, which means nothing: the kept signed rule cannot "
            "give variances there (fit with signed_rule='repair', its positive part, or "
            "another approximation)"), stacklevel=3)
