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
from dataclasses import dataclass, field

import numpy as np

from .. import parallel, rowwise
from .._memory import default_chunk_size
from .._validation import check_dtype
from ..data.base import DistributedSource, as_source
from ..errors import ApproximationWarning
from ..features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta
from ..kernels import Kernel
from ..stored import Array, Value, declarations, selected
from .hyperparameters import Hyperparameters
from .gradients import GradientPath, choose_gradient_path
from .noise import HOMOSCEDASTIC, NoiseModel, missing_prior_variance
from .statistics import (BasisStatistics, KeptFeatures, RowSums, Statistics,
                         accumulate_statistics)
from .systems import SYSTEMS, EigenSystem, FactorizedSystem


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


class MarginalLikelihood:
    """The low-rank objective: log p(y | theta), its gradient, and the posterior at theta.

    theta = [kernel.theta..., log noise_variance], owned by
    :class:`~scalegp.engine.hyperparameters.Hyperparameters` (a kernel alone is taken as its hyperparameters). For a
    :class:`FixedBasisFeatureMap` and homoscedastic noise the basis statistics are accumulated
    once in the constructor and each call costs O(m^3), independent of n; otherwise each call
    makes two streaming passes over the data (statistics, then the gradient's shares). How
    the gradient is computed is chosen once, here, from what is fixed per objective (the map,
    the signed rule, the noise on the source, the VFE bound): ``gradient_path``, one of the
    paths of :mod:`scalegp.engine.gradients`, to which each call delegates.
    ``signed_rule`` ("keep" or "repair", :data:`SIGNED_RULES`) says how a signed map's
    approximation is treated; it has no effect on maps without signs. ``noise`` is the noise
    model (:mod:`scalegp.engine.noise`); per-row known variances come with the data
    (``sample_noise_variance``, or a source's per-row noise variances).

    ``n_jobs`` threads share each pass's chunks (:mod:`scalegp.parallel`; None: one).

    ``variational=True`` gives the VFE bound of Titsias (2009) instead (docs/nystrom.md,
    Eq. V.1): log p(y) - tr(K - Psi Psi^T) / (2 s2), for maps whose Psi Psi^T never exceeds K
    (``feature_map.bounded_by_kernel``, e.g. Nystrom); with known noise variances the trace
    term is sum_i (k_ii - q_ii) / (2 (s2 + v_i)) (Eq. V.4); ``value``, the gradient and the
    posterior's ``log_marginal_likelihood`` are then the bound's.

    ``basis_statistics`` (with X None): rows known only through their basis statistics
    (:class:`~scalegp.engine.statistics.BasisStatistics` of a fixed-basis map, homoscedastic
    noise, not VFE, no signs), as ``LowRankGPRegressor.partial_fit`` keeps them: every call
    is O(m^3), with no rows at all.
    """

    def __init__(self, feature_map: FeatureMap, hyperparameters, X=None, y=None, *,
                 chunk_size: int | None = None, dtype=None, progress=None,
                 signed_rule: str = "keep", noise: NoiseModel = HOMOSCEDASTIC,
                 sample_noise_variance=None, variational: bool = False,
                 n_jobs: int | None = None, basis_statistics: BasisStatistics | None = None):
        if signed_rule not in SIGNED_RULES:
            raise ValueError(f"signed_rule must be one of {SIGNED_RULES}, got {signed_rule!r}")
        self.feature_map = feature_map
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.dtype = check_dtype(dtype)
        self.chunk_size = chunk_size
        self.n_jobs = parallel.resolve_n_jobs(n_jobs)
        self.progress = progress
        self.signed_rule = signed_rule
        self.noise = noise
        if basis_statistics is not None:
            self._init_from_basis(basis_statistics, X, noise, variational,
                                  sample_noise_variance)
            return
        self.source = as_source(X, y, sample_noise_variance=sample_noise_variance,
                                dtype=self.dtype)
        self.homoscedastic = noise.is_homoscedastic(self.source)
        if (not self.homoscedastic and feature_map.signs is not None
                and signed_rule == "repair"):
            raise NotImplementedError(
                "the positive-part repair of a signed rule is defined for homoscedastic noise "
                "only; use signed_rule='keep' (--signed-rule keep) or a map without negative "
                "weights")
        self.variational = bool(variational)
        if self.variational:
            _check_variational(feature_map, noise)
        self.n_evaluations = 0
        self.basis_statistics = None
        if (isinstance(feature_map, FixedBasisFeatureMap) and self.homoscedastic
                and not self.variational):
            self.basis_statistics = BasisStatistics.accumulate(
                feature_map, self.source, chunk_size=chunk_size, dtype=self.dtype,
                progress=progress, n_jobs=self.n_jobs)
        #: How each call computes the gradient (:mod:`scalegp.engine.gradients`), chosen here
        #: from what is fixed per objective.
        self.gradient_path: GradientPath = choose_gradient_path(
            feature_map, self.source, signed_rule=signed_rule,
            homoscedastic=self.homoscedastic, variational=self.variational,
            fitc=noise.fitc, basis_statistics=self.basis_statistics, dtype=self.dtype)

    def _init_from_basis(self, basis_statistics, X, noise, variational, sample_noise_variance):
        """The objective of rows known by their basis statistics only (class docstring)."""
        problems = [what for what, bad in (
            ("X None", X is not None),
            ("a fixed-basis map", not isinstance(self.feature_map, FixedBasisFeatureMap)),
            ("an unsigned map", self.feature_map.signs is not None),
            ("homoscedastic noise", noise is not HOMOSCEDASTIC
             or sample_noise_variance is not None),
            ("the likelihood, not the VFE bound", variational)) if bad]
        if problems:
            raise ValueError("an objective of basis statistics alone needs "
                             + ", ".join(problems))
        self.source = None
        self.homoscedastic, self.variational, self.n_evaluations = True, False, 0
        self.basis_statistics = basis_statistics
        self.gradient_path = choose_gradient_path(
            self.feature_map, None, signed_rule=self.signed_rule, homoscedastic=True,
            variational=False, fitc=False, basis_statistics=basis_statistics,
            dtype=self.dtype)

    @property
    def feature_budget(self) -> int:
        """Bytes of features a statistics pass may keep for the gradient path's second pass
        (0: the path has none, or the source is out of core, or the features are float32)."""
        return self.gradient_path.feature_budget

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
            value -= self.missing_trace(at_map, statistics, noise_variance) / (2.0 * noise_variance)
        return at_map, statistics, value, system, conditioned

    def missing_trace(self, at_map: MapAtTheta, statistics: Statistics,
                      noise_variance: float) -> float:
        """sum_i w^_i (k(x_i, x_i) - psi_i^T psi_i) = :meth:`kernel_trace` - tr(G), G = Psi^T W^
        Psi (w^_i = s2 / d_i: tr(K - Psi Psi^T) for homoscedastic noise; s2 times the VFE
        term's sum_i (k_ii - q_ii) / d_i with known noise variances, docs/nystrom.md, Eq. V.4)."""
        return (self.kernel_trace(at_map, statistics.n_samples, noise_variance)
                - float(np.trace(statistics.gram)))

    def kernel_trace(self, at_map: MapAtTheta, n_samples: int, noise_variance: float) -> float:
        """sum_i w^_i k(x_i, x_i), w^_i = s2 / (s2 + v_i) (1 for homoscedastic noise): n s for a
        shift-invariant kernel and homoscedastic noise, otherwise one pass over X and the known
        variances (kernel diagonals only, no features)."""
        kernel = at_map.kernel
        if kernel.shift_invariant and self.homoscedastic:
            return n_samples * kernel.variance
        share = functools.partial(_weighted_kernel_diagonal, kernel, self.noise,
                                  noise_variance)
        if isinstance(self.source, DistributedSource):     # summed where the rows live
            return float(self.source.map_reduce(share))
        chunk_size = self.chunk_size or default_chunk_size(at_map.n_components)
        return sum(share(chunk) for chunk in self.source.chunks(chunk_size))

    def row_sums(self, theta) -> RowSums:
        """The sums of this objective's rows at theta (or at a :class:`Hyperparameters`'
        values; one statistics pass, none for a fixed basis), which add to a posterior's
        (:func:`posterior_of_sums`)."""
        kernel, noise_variance = self.hyperparameters.values(theta)
        at_map = self.feature_map.at(kernel)
        return self._row_sums(at_map, self.statistics(at_map, noise_variance, self.progress),
                              noise_variance)

    def _row_sums(self, at_map: MapAtTheta, statistics: Statistics,
                  noise_variance: float) -> RowSums:
        trace = (self.kernel_trace(at_map, statistics.n_samples, noise_variance)
                 if self.variational else 0.0)
        return RowSums(statistics, trace, self.basis_statistics)

    def value(self, theta) -> float:
        return self.conditioned(theta)[2]

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(log p(y), gradient with respect to theta): the value at theta, then the gradient
        from ``gradient_path`` (:mod:`scalegp.engine.gradients`)."""
        self.n_evaluations += 1
        kept = KeptFeatures(self.feature_budget) if self.feature_budget else None
        at_map, statistics, value, system, conditioned = self.conditioned(theta,
                                                                         keep_features=kept)
        noise_variance = self.hyperparameters.values(theta)[1]
        gradient = self.gradient_path.gradient(self, at_map, statistics, system, conditioned,
                                               noise_variance, kept)
        return value, gradient

    def posterior(self, theta) -> "Posterior":
        """The posterior at theta (or at a :class:`Hyperparameters`' values): from the cached basis statistics for a fixed-basis map (no
        pass over the data), otherwise from one streaming pass."""
        at_map, statistics, value, system, _ = self.conditioned(theta, self.progress)
        return Posterior(self.feature_map, at_map.kernel, system, value, statistics.n_samples,
                         row_sums=self._row_sums(at_map, statistics, system.noise_variance))


def _weighted_kernel_diagonal(kernel: Kernel, noise: NoiseModel, noise_variance: float,
                              chunk) -> float:
    """sum over a chunk's rows of w^_i k(x_i, x_i), w^_i = s2 / (s2 + v_i) (1 without known
    variances; ``noise`` without the FITC term, which the VFE bound refuses, so that the
    weights need no features); top level, so that a distributed source's workers can run
    it."""
    diagonal = kernel.diag(chunk.X)
    if chunk.sample_noise_variance is not None:
        diagonal = diagonal * noise.relative_weights(None, chunk, None, noise_variance)
    return float(diagonal.sum())


def posterior_of_sums(feature_map: FeatureMap, kernel: Kernel, noise_variance: float,
                      sums: RowSums, *, signed_rule: str = "keep",
                      variational: bool = False) -> "Posterior":
    """The posterior conditioned on rows known by their sums (:class:`RowSums`): the
    statistics at (kernel, s2) (those kept, or the basis statistics rescaled), conditioned as
    :meth:`MarginalLikelihood.posterior` conditions them, so the posterior of the sums of two
    sets of rows is that of a fit on all of them up to the order of the floating-point sums.
    ``variational``: the value is the VFE bound, log p(y) - (sum_i w^_i k(x_i, x_i) - tr G) /
    (2 s2) (w^_i = 1 for homoscedastic noise).
    """
    statistics = (sums.statistics if sums.basis is None
                  else sums.basis.at(feature_map, kernel))
    value, system, _ = condition(statistics, noise_variance, feature_map.signs, signed_rule)
    if variational:
        value -= (sums.kernel_trace - float(np.trace(statistics.gram))) / (2.0 * noise_variance)
    return Posterior(feature_map, kernel, system, value, statistics.n_samples,
                     row_sums=RowSums(statistics, sums.kernel_trace, sums.basis))


def _check_variational(feature_map: FeatureMap, noise: NoiseModel) -> None:
    """The VFE bound needs K - Psi Psi^T >= 0 (a Nystrom-type map) and d_i = s2 + v_i (known
    variances v_i allowed; not the FITC diagonal, which is another objective)."""
    if not feature_map.bounded_by_kernel:
        raise ValueError(
            f"the VFE objective needs a map whose approximation Psi Psi^T never exceeds the "
            f"kernel (a Nystrom-type projection, bounded_by_kernel); {feature_map.name!r} is "
            "not one: tr(K - Q) can be negative and the bound fails. Use objective='dtc' or "
            "'fitc', or approximation='nystrom'")
    if noise.fitc:
        raise ValueError("the VFE bound and the FITC diagonal are two objectives; choose one "
                         "(objective='vfe' or 'fitc')")


@dataclass(frozen=True)
class Posterior:
    """The frozen predictive distribution of a feature-space GP.

    mean(x*) = psi*^T beta; latent variance s2 psi*^T M^{-1} psi* (= s2 |L^{-1} psi*|^2 for
    S = I). ``include_noise`` adds s2; ``diag_correction`` adds the FITC-style term
    k(x*, x*) - psi*^T S psi*, the prior variance the low-rank model misses.

    ``row_sums``: the sums of its rows (:class:`~scalegp.engine.statistics.RowSums`, one or
    two more m x m matrices) for additive updates; None for a posterior read from a model
    file (which stores the factorization, not the sums) or one of a local model's centres.
    """

    feature_map: FeatureMap
    kernel: Kernel
    system: FactorizedSystem
    log_marginal_likelihood: float
    n_samples: int
    row_sums: RowSums | None = field(default=None, repr=False, compare=False)

    #: The value of the posterior's section that names its system's kind.
    SYSTEM_KIND = "factorization"
    #: The posterior's section of a model file (:mod:`scalegp.stored`): the metadata
    #: ``system`` and the arrays of its system's kind (``factorization``), plus the signs of a
    #: signed map. The feature map, the kernel, s2 and the likelihood are sections of their own.
    STORED = {"jitter": Value("number", "nonnegative"),
              "n_samples": Value("int", "at_least_one"),
              "factorization": Value("str", choices=tuple(SYSTEMS)),
              "signed": Value("bool"),
              "signs": Array(("m",), ("sign",), when=("signed", True)),
              **selected(SYSTEM_KIND, SYSTEMS)}

    @property
    def noise_variance(self) -> float:
        return self.system.noise_variance

    def to_state(self) -> dict:
        """The section: the system's jitter, kind and arrays, n, and the map's signs."""
        signs = self.feature_map.signs
        state = {"jitter": float(self.system.jitter), "n_samples": int(self.n_samples),
                 "factorization": self.system.name, "signed": signs is not None,
                 **self.system.to_state()}
        if signs is not None:
            state["signs"] = np.asarray(signs, dtype=np.float64)
        return state

    @classmethod
    def from_state(cls, state: dict, *, feature_map: FeatureMap, kernel: Kernel,
                   noise_variance: float, log_marginal_likelihood: float) -> "Posterior":
        """The posterior from its validated section; ValueError when the signs disagree
        with the map's, or the system's arrays with each other."""
        kind = SYSTEMS[state["factorization"]]
        if state["signed"] != (feature_map.signs is not None):
            raise ValueError(f"it says signed = {state['signed']}, but its feature map "
                             f"{'has no' if not state['signed'] else 'has'} signs")
        if kind.signed != state["signed"]:
            raise ValueError(f"its factorization {kind.name!r} is not that of a "
                             f"{'signed' if state['signed'] else 'unsigned'} system")
        signs = state.get("signs")
        if signs is not None and not np.array_equal(signs, feature_map.signs):
            raise ValueError("array 'signs' differs from its feature map's signs")
        system = kind.from_state({name: state[name] for name in declarations(kind)},
                                 noise_variance=noise_variance, jitter=state["jitter"],
                                 signs=feature_map.signs)
        return cls(feature_map=feature_map, kernel=kernel, system=system,
                   log_marginal_likelihood=log_marginal_likelihood,
                   n_samples=state["n_samples"])

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
