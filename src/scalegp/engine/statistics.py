"""The streaming passes of the engine: sufficient statistics and the gradient's shares.

Statistics are sums over rows of pure functions of a chunk (:func:`chunk_statistics`,
:func:`chunk_gradient`), so they stream, add (``a + b``) and reduce in any order, on threads
over chunks (:mod:`scalegp.parallel`) or where the rows are (:mod:`scalegp.data.distributed`).

Rows may carry weights w^_i = s2 / d_i for a heteroscedastic diagonal d_i (known per-row
variances, the FITC-style correction: :mod:`scalegp.engine.noise`); the statistics are then
weighted sums and log p gains -sum_i log w^_i (docs/engine.md, "Noise models").

No function here builds an n x n matrix or imports a concrete feature map.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

from .. import linalg, parallel
from .._memory import available_bytes, default_chunk_size
from .._validation import check_dtype
from ..data.base import DistributedSource, as_source
from ..features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta
from ..kernels import Kernel
from .noise import HOMOSCEDASTIC, NoiseModel
from .systems import FactorizedSystem


#: Largest feature matrix Psi (n x m float64) that a likelihood-and-gradient evaluation keeps
#: from its statistics pass for its gradient pass, which then evaluates no features (and at
#: most a quarter of the available memory: :func:`feature_cache_budget`); beyond it the
#: gradient pass recomputes them chunk by chunk, in O(chunk m) memory.
FEATURE_CACHE_BYTES = 2**30


@dataclass(frozen=True)
class Statistics:
    """Sufficient statistics of a feature-space GP: sums over rows, so they stream and add.

    With row weights w^_i = s2 / d_i (all 1 for homoscedastic noise; :mod:`scalegp.engine.noise`):

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

        ``X`` is an array (with ``y``) or a data source (:mod:`scalegp.data.base`). Memory is
        O(m^2 + chunk_size * m). Each chunk's Gram update is a symmetric rank-k update in
        ``dtype`` (float64 default, float32 allowed); chunk results are summed in float64.
        ``progress``, if given, is called as ``progress(rows_done)`` after each chunk.
        A heteroscedastic diagonal (``noise``, ``sample_noise_variance``) needs the
        ``noise_variance`` s2 its weights are relative to. ``n_jobs``: threads over chunks
        (:mod:`scalegp.parallel`).
        """
        dtype = check_dtype(dtype)
        source = as_source(X, y, sample_noise_variance=sample_noise_variance, dtype=dtype)
        return accumulate_statistics(feature_map.at(kernel), source, noise=noise,
                                     noise_variance=noise_variance, chunk_size=chunk_size,
                                     dtype=dtype, progress=progress, n_jobs=n_jobs)


def row_weights(at_map, chunk, Psi, noise, noise_variance):
    """w^ of a chunk, or None when every row has weight 1 (homoscedastic)."""
    if not noise.fitc and chunk.sample_noise_variance is None:
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
    per thread of a threaded pass; ``n_jobs`` threads over chunks, :mod:`scalegp.parallel`).
    ``keep_features`` (:class:`KeptFeatures`) receives (chunk, Psi) of every chunk for a second
    pass, within its budget."""
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
        weights = row_weights(at_map, chunk, Psi, noise, noise_variance)
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
    ``has_grid_statistics`` (:mod:`scalegp.data.grid`).

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
            # every cell of a tensor grid: per-axis sums, no pass (scalegp.data.grid)
            gram, projection = feature_map.grid_basis_statistics(grid)
            return cls(Statistics(gram, projection, float(np.sum(grid.values**2)),
                                  grid.n_samples))
        return cls(accumulate_statistics(BasisOnly(feature_map), source,
                                         chunk_size=chunk_size, dtype=dtype, progress=progress,
                                         n_jobs=n_jobs))

    def at(self, feature_map: FixedBasisFeatureMap, kernel: Kernel) -> Statistics:
        h = np.sqrt(feature_map.weights(kernel))
        s = self.statistics
        return Statistics(s.gram * np.outer(h, h), s.projection * h, s.y_norm2, s.n_samples)


@dataclass(frozen=True)
class RowSums:
    """What a fitted low-rank posterior keeps of its rows so that more rows can be added
    without revisiting them (``LowRankGPRegressor.partial_fit``): sums over rows, so they add.

    Attributes
    ----------
    statistics : Statistics
        G, b, y^T W^ y, n (and sum log w^) at the posterior's hyperparameters, of the features
        as the objective forms them (before a positive-part repair, which is a function of
        the summed G and b: :mod:`scalegp.engine.positive_part`).
    kernel_trace : float
        sum_i k(x_i, x_i) at the same hyperparameters, for the VFE term
        tr(K - Q) = sum_i k(x_i, x_i) - tr(G) (0 when the objective is not the VFE bound).
    basis : BasisStatistics or None
        Phi^T Phi, Phi^T y, y^T y, n of a fixed basis (homoscedastic, not VFE): the
        statistics at any theta (:meth:`BasisStatistics.at`), so the hyperparameters can be
        learned again from the sums alone at O(m^3) per step. None otherwise, and once rows
        without them (with known noise variances) were added.
    """

    statistics: Statistics
    kernel_trace: float = 0.0
    basis: "BasisStatistics | None" = None

    def __add__(self, other: "RowSums") -> "RowSums":
        basis = (None if self.basis is None or other.basis is None
                 else BasisStatistics(self.basis.statistics + other.basis.statistics))
        return RowSums(self.statistics + other.statistics,
                       self.kernel_trace + other.kernel_trace, basis)


class BasisOnly(MapAtTheta):
    """Phi of a fixed-basis map, as a map at theta (its statistics hold for every theta)."""

    def __init__(self, feature_map: FixedBasisFeatureMap):
        super().__init__(feature_map, None)

    def features(self, X) -> np.ndarray:
        return self.feature_map.basis(X)


def chunk_gradient(at_map: MapAtTheta, chunk, system: FactorizedSystem, *,
                   noise: NoiseModel = HOMOSCEDASTIC, features=None,
                   trace_weight: float = 0.0) -> np.ndarray:
    """One chunk's share of d log p / d theta, theta = [kernel log-parameters..., log s2]: a pure
    function of the chunk given the factorized system, so shares add in any order.

    With r = y - Psi beta, W^ the relative row weights (1 when homoscedastic) and
    Q = Psi M^{-1} (docs/engine.md, "Gradient")::

        kernel part:  sum_i w^_i r_i (dpsi_ij^T beta) / s2 - sum_i w^_i q_i^T dpsi_ij,
        diagonal:     1/2 sum_i (d d_i / d theta_j) [w^_i^2 r_i^2 / s2^2 - w^_i / s2
                                                    + w^_i^2 psi_i^T M^{-1} psi_i / s2],

    the general form of 1/2 alpha^T dK alpha - 1/2 tr(K^{-1} dK) for K = Psi S Psi^T + D
    (R&W eq. 5.9), using Psi^T alpha = S beta. For homoscedastic noise the diagonal term is
    left to :func:`scalegp.engine.gradients.noise_gradient`, which needs only the statistics (last
    entry 0 here). ``features``: the chunk's Psi at theta if already computed (the first pass kept
    it).

    ``trace_weight`` t = 1/s2 adds the share of the VFE term -1/2 sum_i (k_ii - q_ii) / d_i
    (S = I, q_ii = psi_i^T psi_i, 1 / d_i = t w^_i; docs/nystrom.md, Eqs. V.3 and V.4):
    -1/2 sum_i t w^_i d k(x_i, x_i) / d theta_j + sum_i t w^_i psi_i^T dpsi_ij, i.e.
    Q -> Q - t Psi in the row inner products, at no extra cost; with known noise variances
    also the diagonal's share 1/2 (k_ii - q_ii) / d_i^2 per row.
    """
    s2 = system.noise_variance + system.jitter
    beta = system.beta
    Psi, dPsi = at_map.features_and_grad_operator(chunk.X, features)
    weights = row_weights(at_map, chunk, Psi, noise, system.noise_variance)
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
    per_row = diagonal_shares(at_map, chunk, Psi, system, weights, trace_weight, Q)
    kernel = dPsi_beta @ (weights * (chunk.y - fitted)) / s2
    if trace_weight:
        row_trace_weights = trace_weight * weights                 # 1 / d_i
        kernel -= 0.5 * at_map.kernel.diag_gradient(chunk.X) @ row_trace_weights
        Q = Q - trace_weight * Psi
    kernel -= dPsi.row_inner(Q) @ weights
    variance_grad = noise.row_variances_grad(at_map, chunk, Psi, dPsi, system.noise_variance)
    return np.append(kernel, 0.0) + variance_grad @ per_row


def diagonal_shares(at_map: MapAtTheta, chunk, Psi, system: FactorizedSystem, weights,
                    trace_weight: float = 0.0, Q=None) -> np.ndarray:
    """d log p / d d_i for each row of a chunk with row weights w^ (d_i = s2 / w^_i), the
    general form of 1/2 [alpha_i^2 - (K^{-1})_ii] (R&W eq. 5.9; :func:`chunk_gradient`)::

        1/2 [w^_i^2 r_i^2 / s2^2 - w^_i / s2 + w^_i^2 psi_i^T M^{-1} psi_i / s2],

    plus, for the VFE bound (``trace_weight`` t = 1/s2, a map with S = I), the share of
    -1/2 (k_ii - q_ii) / d_i, which is 1/2 (k_ii - q_ii) (t w^_i)^2 (docs/nystrom.md, Eq.
    V.4). ``Q``: Psi M^{-1} if already formed."""
    s2 = system.noise_variance + system.jitter
    Q = Psi @ system.inverse if Q is None else Q
    residual = chunk.y - Psi @ system.beta
    quadratic = np.einsum("ij,ij->i", Q, Psi)
    per_row = 0.5 * ((weights * residual / s2) ** 2 - weights / s2 + weights**2 * quadratic / s2)
    if trace_weight:
        missing = at_map.kernel.diag(chunk.X) - np.einsum("ij,ij->i", Psi, Psi)
        per_row += 0.5 * missing * (trace_weight * weights) ** 2
    return per_row


def accumulate_noise_gradient(at_map: MapAtTheta, items, system: FactorizedSystem, *,
                              noise: NoiseModel, trace_weight: float = 0.0) -> float:
    """d log p / d log s2 of a heteroscedastic diagonal d_i = s2 + v_i (no FITC term), from
    (chunk, Psi) ``items``: s2 sum_i :func:`diagonal_shares` (d d_i / d log s2 = s2). The
    noise part the Nystrom map's own pass leaves out (:func:`scalegp.inference.knot_learning`
    with known noise variances); O(n m^2)."""
    if noise.fitc:
        raise ValueError("accumulate_noise_gradient takes a diagonal without the FITC term")
    total = 0.0
    for chunk, Psi in items:
        Psi = np.asarray(Psi, dtype=np.float64)
        weights = row_weights(at_map, chunk, Psi, noise, system.noise_variance)
        if weights is None:
            weights = np.ones(chunk.X.shape[0])
        total += float(diagonal_shares(at_map, chunk, Psi, system, weights,
                                       trace_weight).sum())
    return system.noise_variance * total


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
