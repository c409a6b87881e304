"""The streaming GP engine: statistics, log marginal likelihood and gradient, posterior.

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
(``signed_rule="repair"``: :mod:`scalegp.positive_part`, docs/positive-part.md), whose repaired
features Psi T go through the S = I path.

Rows may carry weights w^_i = s2 / d_i for a heteroscedastic diagonal d_i (known per-row
variances, the FITC-style correction: :mod:`scalegp.noise`); the statistics are then weighted
sums and log p gains -sum_i log w^_i (docs/engine.md, "Noise models").

Statistics are sums over rows of pure functions of a chunk (:func:`chunk_statistics`,
:func:`chunk_gradient`), so they stream, add (``a + b``) and reduce in any order.

No function here builds an n x n matrix or imports a concrete feature map.
"""

from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass

import numpy as np

import warnings

from . import linalg, parallel, rowwise
from ._validation import check_dtype
from .data import DistributedSource, as_source
from .errors import ApproximationWarning
from .features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta
from .hyperparameters import Hyperparameters
from .kernels import Kernel
from .noise import HOMOSCEDASTIC, NoiseModel, missing_prior_variance
from .positive_part import positive_part_gradient
from .systems import EigenSystem, FactorizedSystem

#: How the engine treats a signed approximation Psi S Psi^T (quadrature rules with negative
#: weights): "keep" conditions on it as it is and refuses it where Psi S Psi^T + s2 I is not
#: positive definite; "repair" replaces it by its positive part (:mod:`scalegp.positive_part`).
SIGNED_RULES = ("keep", "repair")

#: Largest feature matrix Psi (n x m float64) that a likelihood-and-gradient evaluation keeps
#: from its statistics pass for its gradient pass, which then evaluates no features (and at
#: most a quarter of the available memory: :func:`feature_cache_budget`); beyond it the
#: gradient pass recomputes them chunk by chunk, in O(chunk m) memory.
FEATURE_CACHE_BYTES = 2**30

#: Bytes of one chunk of features (rows are chosen so a chunk of Psi is about this size).
#: 16 MiB keeps a chunk's Psi and the feature map's temporaries below glibc's largest dynamic
#: mmap threshold (32 MiB), so their memory is reused from the heap instead of being mapped and
#: page-faulted anew for every chunk (at 32 MiB that cost ~15 % of the RFF feature time), while
#: a chunk stays long enough (>= 2048 rows up to m = 1024) for the per-chunk O(m^2) work to be
#: small next to the syrk (benchmarks/bench_accumulate.py).
CHUNK_BYTES = 16 * 2**20


def default_chunk_size(n_components: int, itemsize: int = 8) -> int:
    """Rows per chunk so that one chunk of Psi takes about ``CHUNK_BYTES``."""
    return max(256, CHUNK_BYTES // (itemsize * max(n_components, 1)))


@dataclass(frozen=True)
class Statistics:
    """Sufficient statistics of a feature-space GP: sums over rows, so they stream and add.

    With row weights w^_i = s2 / d_i (all 1 for homoscedastic noise; :mod:`scalegp.noise`):

    Attributes
    ----------
    gram : (m, m) float64
        G = Psi^T W^ Psi.
    projection : (m,) float64
        b = Psi^T W^ y.
    y_norm2 : float
        y^T W^ y.
    n_samples : int
    log_weight_sum : float
        sum_i log w^_i (0 for homoscedastic noise).
    """

    gram: np.ndarray
    projection: np.ndarray
    y_norm2: float
    n_samples: int
    log_weight_sum: float = 0.0

    def __add__(self, other: "Statistics") -> "Statistics":
        if self.gram.shape != other.gram.shape:
            raise ValueError(
                f"cannot add statistics of {self.gram.shape[0]} and {other.gram.shape[0]} "
                "components"
            )
        return Statistics(self.gram + other.gram, self.projection + other.projection,
                          self.y_norm2 + other.y_norm2, self.n_samples + other.n_samples,
                          self.log_weight_sum + other.log_weight_sum)


    @classmethod
    def accumulate(cls, feature_map: FeatureMap, kernel: Kernel, X, y=None, *,
                   chunk_size: int | None = None, dtype=None, progress=None,
                   noise: NoiseModel = HOMOSCEDASTIC, noise_variance: float | None = None,
                   sample_noise_variance=None, n_jobs: int | None = None) -> "Statistics":
        """Psi^T W^ Psi, Psi^T W^ y, y^T W^ y, n (and sum log w^) in one streaming pass.

        ``X`` is an array (with ``y``) or a data source (:mod:`scalegp.data`). Memory is
        O(m^2 + chunk_size * m). Each chunk's Gram update is a symmetric rank-k update in
        ``dtype`` (float64 default, float32 allowed); chunk results are summed in float64.
        ``progress``, if given, is called as ``progress(rows_done)`` after each chunk.
        A heteroscedastic diagonal (``noise``, ``sample_noise_variance``) needs the
        ``noise_variance`` s2 its weights are relative to. ``n_jobs``: threads over chunks
        (:mod:`scalegp.parallel`).
        """
        dtype = check_dtype(dtype)
        source = as_source(X, y, noise_variance=sample_noise_variance, dtype=dtype)
        return accumulate_statistics(feature_map.at(kernel), source, noise=noise,
                                     noise_variance=noise_variance, chunk_size=chunk_size,
                                     dtype=dtype, progress=progress, n_jobs=n_jobs)


def _row_weights(at_map, chunk, Psi, noise, noise_variance):
    """w^ of a chunk, or None when every row has weight 1 (homoscedastic)."""
    if not noise.fitc and chunk.noise_variance is None:
        return None
    if noise_variance is None:
        raise ValueError("a heteroscedastic noise model needs the noise_variance its row "
                         "weights are relative to")
    return noise.relative_weights(at_map, chunk, np.asarray(Psi, dtype=np.float64),
                                  noise_variance)


class _StatisticsSum:
    """One accumulator of a statistics pass: Psi^T W^ Psi in float64 (its upper triangle at
    least), Psi^T W^ y, y^T W^ y, sum log w^ and n.

    Alone (``threaded`` False) it updates the upper triangle in place by BLAS syrk through
    scipy (:func:`scalegp.linalg.symmetric_rank_k_update`; a float32 pass adds each chunk's
    float32 Gram). scipy's BLAS wrappers hold the GIL, so an accumulator of a threaded pass
    forms each chunk's Gram with numpy's matmul instead, which releases it (and calls syrk for
    Psi^T Psi), into a buffer of its own, then adds it: one more m x m matrix per thread.
    """

    def __init__(self, m: int, dtype, threaded: bool = False):
        self.threaded = threaded
        order = "C" if threaded else "F"
        self.G_upper = np.zeros((m, m), dtype=np.float64, order=order)
        self.chunk_gram = (np.zeros((m, m), dtype=dtype, order=order)
                           if threaded or dtype != np.float64 else None)
        self.b = np.zeros(m)
        self.y_norm2, self.log_weight_sum, self.n_samples = 0.0, 0.0, 0

    def add(self, Psi: np.ndarray, y_chunk: np.ndarray) -> None:
        if self.threaded:
            np.matmul(Psi.T, Psi, out=self.chunk_gram)
            self.G_upper += self.chunk_gram
        elif self.chunk_gram is None:
            self.G_upper = linalg.symmetric_rank_k_update(self.G_upper, Psi)
        else:
            # beta = 0 overwrites the upper triangle (the lower one stays zero): no reset
            self.chunk_gram = linalg.symmetric_rank_k_update(self.chunk_gram, Psi, beta=0.0)
            self.G_upper += self.chunk_gram
        self.b += Psi.T @ y_chunk.astype(Psi.dtype, copy=False)
        self.y_norm2 += float(y_chunk @ y_chunk)
        self.n_samples += Psi.shape[0]


def accumulate_statistics(at_map: MapAtTheta, source, *, noise: NoiseModel = HOMOSCEDASTIC,
                          noise_variance: float | None = None, chunk_size: int | None = None,
                          dtype=None, progress=None, chunks=None,
                          keep_features: "KeptFeatures | None" = None,
                          n_jobs: int | None = None) -> Statistics:
    """The statistics of the rows of ``source`` (or of the given ``chunks``): the sum of
    :func:`chunk_statistics` over its chunks, accumulated in place (one m x m buffer, two
    per thread of a threaded pass; ``n_jobs`` threads over chunks, :mod:`scalegp.parallel`). ``keep_features``
    (:class:`KeptFeatures`) receives (chunk, Psi) of every chunk for a second pass, within its
    budget."""
    dtype = check_dtype(dtype)
    if chunks is None and isinstance(source, DistributedSource):
        if keep_features is not None:           # the features stay where their rows are
            keep_features.complete = False
        return source.map_reduce(functools.partial(chunk_statistics, at_map, noise=noise,
                                         noise_variance=noise_variance, dtype=dtype))
    m = at_map.n_components
    chunk_size = chunk_size or default_chunk_size(m, dtype.itemsize)

    def add(total: _StatisticsSum, chunk) -> None:
        Psi = np.asarray(at_map.features(chunk.X.astype(dtype, copy=False)), dtype=dtype)
        weights = _row_weights(at_map, chunk, Psi, noise, noise_variance)
        y_chunk = chunk.y
        if keep_features is not None:
            keep_features.add(chunk, Psi if weights is None else Psi.copy())
        if weights is not None:
            Psi *= np.sqrt(weights).astype(dtype)[:, None]
            y_chunk = np.sqrt(weights) * y_chunk
            total.log_weight_sum += float(np.sum(np.log(weights)))
        total.add(Psi, y_chunk)

    n_threads = parallel.resolve_n_jobs(n_jobs)
    totals = parallel.reduce_chunks(
        source.chunks(chunk_size) if chunks is None else chunks, add,
        [_StatisticsSum(m, dtype, threaded=n_threads > 1) for _ in range(n_threads)], progress)
    first, rest = totals[0], totals[1:]
    G_upper = sum((t.G_upper for t in rest), first.G_upper)
    return Statistics(linalg.symmetrize_upper(G_upper), sum((t.b for t in rest), first.b),
                      sum((t.y_norm2 for t in rest), first.y_norm2),
                      sum((t.n_samples for t in rest), first.n_samples),
                      sum((t.log_weight_sum for t in rest), first.log_weight_sum))


def chunk_statistics(at_map: MapAtTheta, chunk, *, noise: NoiseModel = HOMOSCEDASTIC,
                     noise_variance: float | None = None, dtype=None) -> Statistics:
    """The statistics of one chunk: a pure function, so a sum over chunks in any order (or a
    Dask tree reduction) gives the statistics of all rows."""
    return accumulate_statistics(at_map, None, noise=noise, noise_variance=noise_variance,
                                 dtype=dtype, chunks=[chunk])


@dataclass(frozen=True)
class BasisStatistics:
    """Phi^T Phi, Phi^T y, y^T y, n of a fixed basis: computed once, reused for every theta;
    from the grid without a pass for a source on a full tensor grid and a map with
    ``has_grid_statistics`` (:mod:`scalegp.grid`).

    For Psi = Phi diag(h), h = sqrt(w(theta)): G = diag(h) Phi^T Phi diag(h) and b = h * Phi^T y,
    an O(m^2) rescaling with no pass over the data (GLF paper, Proposition 6).
    """

    statistics: Statistics

    @classmethod
    def accumulate(cls, feature_map: FixedBasisFeatureMap, X, y=None, *, chunk_size=None,
                   dtype=None, progress=None, n_jobs=None) -> "BasisStatistics":
        dtype = check_dtype(dtype)
        source = as_source(X, y, dtype=dtype)
        grid = source.grid
        if grid is not None and feature_map.has_grid_statistics:
            # every cell of a tensor grid: per-axis sums, no pass (scalegp.grid)
            gram, projection = feature_map.grid_basis_statistics(grid)
            return cls(Statistics(gram, projection, float(np.sum(grid.values**2)),
                                  grid.n_samples))
        return cls(accumulate_statistics(_BasisOnly(feature_map), source,
                                         chunk_size=chunk_size, dtype=dtype, progress=progress,
                                         n_jobs=n_jobs))

    def at(self, feature_map: FixedBasisFeatureMap, kernel: Kernel) -> Statistics:
        h = np.sqrt(feature_map.weights(kernel))
        s = self.statistics
        return Statistics(s.gram * np.outer(h, h), s.projection * h, s.y_norm2, s.n_samples)


class _BasisOnly(MapAtTheta):
    """Phi of a fixed-basis map, as a map at theta (its statistics hold for every theta)."""

    def __init__(self, feature_map: FixedBasisFeatureMap):
        super().__init__(feature_map, None)

    def features(self, X) -> np.ndarray:
        return self.feature_map.basis(X)


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


def chunk_gradient(at_map: MapAtTheta, chunk, system: FactorizedSystem, *,
                   noise: NoiseModel = HOMOSCEDASTIC, features=None,
                   trace_weight: float = 0.0) -> np.ndarray:
    """One chunk's share of d log p / d theta, theta = [kernel log-parameters..., log s2]: a pure
    function of the chunk given the factorized system, so shares add in any order.

    With r = y - Psi beta, W^ the relative row weights (1 when homoscedastic) and
    Q = Psi M^{-1} (docs/engine.md, "Gradient"):

        kernel part:  sum_i w^_i r_i (dpsi_ij^T beta) / s2 - sum_i w^_i q_i^T dpsi_ij,
        diagonal:     1/2 sum_i (d d_i / d theta_j) [w^_i^2 r_i^2 / s2^2 - w^_i / s2
                                                    + w^_i^2 psi_i^T M^{-1} psi_i / s2],

    the general form of 1/2 alpha^T dK alpha - 1/2 tr(K^{-1} dK) for K = Psi S Psi^T + D
    (R&W eq. 5.9), using Psi^T alpha = S beta. For homoscedastic noise the diagonal term is
    left to :func:`noise_gradient`, which needs only the statistics (last entry 0 here).
    ``features``: the chunk's Psi at theta if already computed (the first pass kept it).

    ``trace_weight`` t adds the kernel-parameter share of the VFE term -t/2 tr(K - Psi Psi^T)
    (t = 1/s2, homoscedastic, S = I; docs/nystrom.md, Eq. V.3):
    -t/2 sum_i d k(x_i, x_i) / d theta_j + t sum_i psi_i^T dpsi_ij, i.e. Q -> Q - t Psi in the
    row inner products, at no extra cost.
    """
    s2 = system.noise_variance + system.jitter
    beta = system.beta
    Psi, dPsi = at_map.features_and_grad_operator(chunk.X, features)
    weights = _row_weights(at_map, chunk, Psi, noise, system.noise_variance)
    Q = Psi @ system.inverse                                   # Psi M^{-1}
    fitted = Psi @ beta
    dPsi_beta = dPsi.matvec(beta)                              # (P, rows)
    if weights is None:
        if trace_weight:
            trace_part = -0.5 * trace_weight * at_map.kernel.diag_gradient(chunk.X).sum(axis=1)
            Q = Q - trace_weight * Psi
        else:
            trace_part = 0.0
        kernel = (dPsi_beta @ chunk.y - dPsi_beta @ fitted) / s2 - dPsi.row_inner(Q).sum(axis=1)
        return np.append(kernel + trace_part, 0.0)
    if trace_weight:
        raise NotImplementedError("the VFE trace term is implemented for homoscedastic noise")
    residual = chunk.y - fitted
    kernel = dPsi_beta @ (weights * residual) / s2 - dPsi.row_inner(Q) @ weights
    quadratic = np.einsum("ij,ij->i", Q, Psi)
    per_row = 0.5 * ((weights * residual / s2) ** 2 - weights / s2 + weights**2 * quadratic / s2)
    variance_grad = noise.row_variances_grad(at_map, chunk, Psi, dPsi, system.noise_variance)
    return np.append(kernel, 0.0) + variance_grad @ per_row


def accumulate_gradient(at_map: MapAtTheta, source, system: FactorizedSystem, *,
                        noise: NoiseModel = HOMOSCEDASTIC, chunk_size: int | None = None,
                        dtype=None, kept_features: "KeptFeatures | None" = None,
                        trace_weight: float = 0.0, n_jobs: int | None = None) -> np.ndarray:
    """The sum of :func:`chunk_gradient` over the source's chunks (a second pass), or over the
    (chunk, Psi) pairs the first pass kept (``kept_features`` complete: no feature evaluation);
    ``n_jobs`` threads over chunks (:mod:`scalegp.parallel`)."""
    dtype = check_dtype(dtype)
    n_params = at_map.kernel.n_params
    if isinstance(source, DistributedSource) and not (kept_features is not None
                                                      and kept_features.complete):
        return source.map_reduce(functools.partial(chunk_gradient, at_map, system=system,
                                                   noise=noise, trace_weight=trace_weight))
    chunk_size = chunk_size or default_chunk_size(at_map.n_components * (n_params + 2),
                                                  dtype.itemsize)
    if kept_features is not None and kept_features.complete:
        items = kept_features.items                 # (chunk, Psi) pairs
    else:
        items = ((chunk, None) for chunk in source.chunks(chunk_size))

    def add(total: np.ndarray, item) -> None:
        chunk, Psi = item
        total += chunk_gradient(at_map, chunk, system, noise=noise, features=Psi,
                                trace_weight=trace_weight)

    totals = parallel.reduce_chunks(
        items, add, [np.zeros(n_params + 1) for _ in range(parallel.resolve_n_jobs(n_jobs))],
        rows=lambda item: item[0].X.shape[0])
    return sum(totals[1:], totals[0])


def features_by_chunk(at_map: MapAtTheta, source, kept_features: "KeptFeatures | None" = None,
                      *, chunk_size: int | None = None, dtype=None):
    """(chunk, Psi) pairs: those the statistics pass kept (``kept_features`` complete), or a
    pass over the source computing them."""
    if kept_features is not None and kept_features.complete:
        yield from kept_features.items
        return
    chunk_size = chunk_size or default_chunk_size(at_map.n_components, check_dtype(dtype).itemsize)
    for chunk in source.chunks(chunk_size):
        yield chunk, np.asarray(at_map.features(chunk.X), dtype=np.float64)


def feature_cache_budget(dtype) -> int:
    """Bytes of features one evaluation may keep from its statistics pass for its gradient
    pass: ``FEATURE_CACHE_BYTES`` and at most a quarter of the available memory, for float64
    features (0 for float32, whose gradient pass forms dPsi anyway)."""
    from ._memory import available_bytes     # _memory sizes chunks with default_chunk_size
    if check_dtype(dtype) != np.float64:
        return 0
    available = available_bytes()
    return FEATURE_CACHE_BYTES if available is None else min(FEATURE_CACHE_BYTES,
                                                              available // 4)


class KeptFeatures:
    """The (chunk, Psi) pairs of one statistics pass, while they fit in ``budget`` bytes; once
    they do not, all are dropped (``complete`` False) and the gradient pass recomputes the
    features. Needs no row count up front, so a source is not read to size it. Threads over
    chunks may add concurrently; ``items`` are in row order."""

    def __init__(self, budget: int):
        self.budget = budget
        self._items: list = []
        self.n_bytes = 0
        self.complete = True
        self._lock = threading.Lock()

    def add(self, chunk, Psi: np.ndarray) -> None:
        with self._lock:
            if not self.complete:
                return
            self.n_bytes += Psi.nbytes
            if self.n_bytes > self.budget:
                self._items, self.complete = [], False
                return
            self._items.append((chunk, Psi))

    @property
    def items(self) -> list:
        return sorted(self._items, key=lambda item: item[0].start)


class MarginalLikelihood:
    """The low-rank objective: log p(y | theta), its gradient, and the posterior at theta.

    theta = [kernel.theta..., log noise_variance], owned by :class:`~scalegp.hyperparameters.
    Hyperparameters` (a kernel alone is taken as its hyperparameters). For a
    :class:`FixedBasisFeatureMap` and homoscedastic noise the basis statistics are accumulated
    once in the constructor and each call costs O(m^3), independent of n; otherwise each call
    makes two streaming passes over the data (statistics, then the gradient's shares).
    ``signed_rule`` ("keep" or "repair", :data:`SIGNED_RULES`) says how a signed map's
    approximation is treated; it has no effect on maps without signs. ``noise`` is the noise
    model (:mod:`scalegp.noise`); per-row known variances come with the data
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
        self._feature_budget = feature_cache_budget(self.dtype) if keeps else 0

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

    def _condition(self, theta, progress=None, keep_features=None):
        kernel, noise_variance = self.hyperparameters.values(theta)
        at_map = self.feature_map.at(kernel)
        statistics = self.statistics(at_map, noise_variance, progress, keep_features)
        value, system, conditioned = condition(statistics, noise_variance,
                                               self.feature_map.signs, self.signed_rule)
        if self.variational:
            value -= self._missing_trace(at_map, statistics) / (2.0 * noise_variance)
        return at_map, statistics, value, system, conditioned

    def _missing_trace(self, at_map: MapAtTheta, statistics: Statistics) -> float:
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
        return self._condition(theta)[2]

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(log p(y), gradient with respect to theta)."""
        self.n_evaluations += 1
        kept = KeptFeatures(self._feature_budget) if self._feature_budget else None
        at_map, statistics, value, system, conditioned = self._condition(theta,
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
                gradient[-1] += self._missing_trace(at_map, statistics) / (2.0 * noise_variance)
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
                gradient[-1] += self._missing_trace(at_map, statistics) / (2.0 * noise_variance)
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
        at_map, statistics, value, system, _ = self._condition(theta, self.progress)
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

    @classmethod
    def from_statistics(cls, feature_map: FeatureMap, kernel: Kernel, noise_variance: float,
                        statistics: Statistics, *, signed_rule: str = "keep") -> "Posterior":
        value, system = log_marginal_likelihood(statistics, noise_variance, feature_map.signs,
                                                signed_rule)
        return cls(feature_map, kernel, system, value, statistics.n_samples)

    @functools.cached_property
    def at_map(self) -> MapAtTheta:
        """The feature map at the posterior's hyperparameters."""
        return self.feature_map.at(self.kernel)

    def _features(self, X) -> np.ndarray:
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
            Psi = self._features(X)
            cov = self.system.noise_variance * Psi @ self.system.solve(Psi.T)
            cov = 0.5 * (cov + cov.T)
            if diag_correction:
                cov[np.diag_indices_from(cov)] += self._missing_prior_variance(X, Psi)
            if include_noise:
                cov[np.diag_indices_from(cov)] += self.system.noise_variance
            return Psi @ self.system.beta, cov

        def block(rows):
            Psi = self._features(rows)
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
        Psi = self._features(X)
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
