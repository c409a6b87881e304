"""The QR variant of the fixed-basis engine (GLF paper, Appendix A.2; docs/gauss-legendre.md).

The engine's default path forms Phi^T Phi, whose condition number is that of Phi squared. For
a :class:`~scalegp.features.base.FixedBasisFeatureMap` (Psi = Phi diag(sqrt(w(theta)))) this
module keeps only the R-factor of [Phi | y], accumulated by a streaming TSQR, and computes the
log marginal likelihood, its gradient and the posterior from QR factorizations of a (2s x s)
matrix per theta. It is the engine's ``solver="qr"``
(:func:`scalegp.engine.objectives.low_rank_objective`; ``LowRankGPRegressor(solver="qr")``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import linalg
from .._memory import default_chunk_size
from .._validation import check_dtype
from ..data.base import as_source
from ..features.base import FixedBasisFeatureMap
from ..kernels import Kernel
from . import likelihood
from .hyperparameters import Hyperparameters
from .noise import HOMOSCEDASTIC, NoiseModel
from .systems import CholeskySystem

__all__ = ["QRBasisStatistics", "QRMarginalLikelihood"]


@dataclass(frozen=True)
class QRBasisStatistics:
    """The R-factor of [Phi | y] by a streaming TSQR (Appendix A.2; docs/gauss-legendre.md).

    With [Phi | y] = Q [[R_V, t_y], [0, rho]], R_V^T R_V = Phi^T Phi and R_V^T t_y = Phi^T y
    without forming Phi^T Phi. The R-factor of two row blocks is the R-factor of their stacked
    R-factors, so statistics add (``a + b``, :meth:`__add__`): chunk by chunk, or as a tree in
    any order. The rows of R are signed so that diag(R) >= 0, which makes R unique where
    [Phi | y] has full column rank.

    Attributes
    ----------
    factor : (s + 1, s + 1)
        The R-factor of [Phi | y] (zero rows where n < s + 1); R_V = factor[:s, :s],
        t_y = factor[:s, s].
    y_norm2 : float
    n_samples : int
    """

    factor: np.ndarray
    y_norm2: float
    n_samples: int

    @property
    def basis_factor(self) -> np.ndarray:
        """R_V, (s, s) upper triangular."""
        s = self.factor.shape[0] - 1
        return np.triu(self.factor[:s, :s])

    @property
    def projection(self) -> np.ndarray:
        """t_y = Q_V^T y, (s,)."""
        s = self.factor.shape[0] - 1
        return self.factor[:s, s].copy()

    def __add__(self, other: "QRBasisStatistics") -> "QRBasisStatistics":
        if self.factor.shape != other.factor.shape:
            raise ValueError(f"cannot add QR statistics of {self.factor.shape[0] - 1} and "
                             f"{other.factor.shape[0] - 1} components")
        return QRBasisStatistics(_padded_factor(np.vstack([self.factor, other.factor])),
                                 self.y_norm2 + other.y_norm2, self.n_samples + other.n_samples)

    @classmethod
    def of_chunk(cls, feature_map: FixedBasisFeatureMap, chunk) -> "QRBasisStatistics":
        """The statistics of one chunk: a pure function of it."""
        block = np.hstack([feature_map.basis(chunk.X), chunk.y[:, None]])
        return cls(_padded_factor(block), float(chunk.y @ chunk.y), chunk.X.shape[0])

    @classmethod
    def accumulate(cls, feature_map: FixedBasisFeatureMap, X, y=None, *,
                   chunk_size: int | None = None, progress=None) -> "QRBasisStatistics":
        """One streaming pass; ``progress(rows_done)`` is called after each chunk."""
        source = as_source(X, y)
        if source.n_dims != feature_map.n_dims:
            raise ValueError(f"X must have {feature_map.n_dims} columns (the map's inputs), "
                             f"got {source.n_dims}")
        # The raw block is stacked under the running R-factor: R([A; B]) = R([R(A); B]), the
        # same sum as ``+ of_chunk`` without factoring each chunk twice.
        k = feature_map.n_components + 1
        factor, y_norm2, n_samples = np.zeros((0, k)), 0.0, 0
        for chunk in source.chunks(chunk_size or default_chunk_size(k)):
            block = np.hstack([feature_map.basis(chunk.X), chunk.y[:, None]])
            factor = linalg.triangular_factor(np.vstack([factor, block]))
            y_norm2 += float(chunk.y @ chunk.y)
            n_samples += chunk.X.shape[0]
            if progress is not None:
                progress(chunk.start + chunk.X.shape[0])
        return cls(_pad_rows(factor, k), y_norm2, n_samples)


def _padded_factor(A: np.ndarray) -> np.ndarray:
    """The R-factor of A (k columns) as a k x k matrix: zero rows below min(n, k)."""
    return _pad_rows(linalg.triangular_factor(A), A.shape[1])


def _pad_rows(R: np.ndarray, k: int) -> np.ndarray:
    return np.vstack([R, np.zeros((k - R.shape[0], k))]) if R.shape[0] < k else R


@dataclass(frozen=True)
class _QRFactorization:
    """Per theta: B = R_V diag(h), [B; sqrt(s2) I] = Q R with L = R^T, b = B^T t_y = M beta."""

    value: float
    B: np.ndarray
    L: np.ndarray
    u: np.ndarray
    beta: np.ndarray


class QRMarginalLikelihood:
    """log p(y | theta) and its gradient through the QR variant (Appendix A.2).

    Per theta, with h = sqrt(w(theta)) and B = R_V diag(h), the R-factor of the (2s x s) matrix
    [B; sqrt(s2) I] = Q R gives R^T R = M = s2 I + diag(h) Phi^T Phi diag(h) without forming
    Phi^T Phi, so L = R^T is M's Cholesky factor. With b = B^T t_y (= diag(h) Phi^T y) and
    u = L^{-1} b (= Q_1^T t_y)::

        beta = M^{-1} b = R^{-1} u,   y^T K^{-1} y = (|y|^2 - |u|^2) / s2,
        log det K = (n - s) log s2 + 2 sum_i log R_ii,   diag(M^{-1}) = row norms^2 of R^{-1},

    so that (docs/engine.md, "Gradient"; derivation in docs/gauss-legendre.md, section 8)::

        d log p / d theta_i = 1/2 sum_l g_il [beta_l^2 - (1 - s2 (M^{-1})_ll)],
        d log p / d log s2 = s2 / 2 [(|y|^2 - 2|u|^2 + |B beta|^2) / s2^2
                                     - (n - s + s2 tr M^{-1}) / s2],

    g_il = d log w_l / d theta_i. Same interface as
    :class:`scalegp.engine.likelihood.MarginalLikelihood`: theta = [kernel.theta..., log
    noise_variance]. Each call costs O(s^3). Computes in float64 (the variant exists for accuracy).
    """

    def __init__(self, feature_map: FixedBasisFeatureMap, hyperparameters, X, y=None, *,
                 chunk_size: int | None = None, dtype=None, progress=None,
                 noise: NoiseModel = HOMOSCEDASTIC, sample_noise_variance=None):
        if not isinstance(feature_map, FixedBasisFeatureMap):
            raise TypeError("the QR variant needs a fixed-basis feature map (Psi = Phi "
                            f"diag(sqrt(w))), got {type(feature_map).__name__}")
        if check_dtype(dtype) != np.float64:
            raise ValueError("solver='qr' computes in float64 (it exists for accuracy); "
                             "use dtype='float64' or the default solver 'cholesky'")
        source = as_source(X, y, sample_noise_variance=sample_noise_variance)
        if not noise.is_homoscedastic(source):
            raise NotImplementedError(
                "solver='qr' supports homoscedastic noise only (its R-factor of [Phi | y] is "
                "accumulated once for every theta); per-row noise variances and the FITC "
                "diagonal need solver='cholesky'")
        self.feature_map = feature_map
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.statistics = QRBasisStatistics.accumulate(feature_map, source,
                                                       chunk_size=chunk_size,
                                                       progress=progress)
        self.n_evaluations = 0

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def _factor(self, kernel: Kernel, noise_variance: float) -> _QRFactorization:
        stats = self.statistics
        t_y = stats.projection
        s = t_y.size
        B = stats.basis_factor * np.sqrt(self.feature_map.weights(kernel))
        L = linalg.triangular_factor(np.vstack([B, math.sqrt(noise_variance) * np.eye(s)])).T
        b = B.T @ t_y
        u = linalg.solve_lower(L, b)
        value = -0.5 * ((stats.y_norm2 - u @ u) / noise_variance
                        + (stats.n_samples - s) * math.log(noise_variance)
                        + linalg.logdet_from_cholesky(L)
                        + stats.n_samples * math.log(2 * math.pi))
        beta = linalg.solve_lower(L, u, transpose=True)
        return _QRFactorization(float(value), B, L, u, beta)

    def value(self, theta) -> float:
        return self._factor(*self.hyperparameters.decode(theta)).value

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(log p(y), gradient with respect to theta)."""
        self.n_evaluations += 1
        kernel, s2 = self.hyperparameters.decode(theta)
        qr = self._factor(kernel, s2)
        stats = self.statistics
        inverse_diagonal = linalg.inverse_diagonal_from_cholesky(qr.L)
        kernel_grad = 0.5 * self.feature_map.log_weights_grad(kernel) @ (
            qr.beta**2 - (1.0 - s2 * inverse_diagonal))
        B_beta = qr.B @ qr.beta
        alpha_norm2 = (stats.y_norm2 - 2 * qr.u @ qr.u + B_beta @ B_beta) / s2**2
        trace_inverse = (stats.n_samples - qr.beta.size + s2 * inverse_diagonal.sum()) / s2
        return qr.value, np.append(kernel_grad, 0.5 * s2 * (alpha_norm2 - trace_inverse))

    def posterior(self, theta) -> likelihood.Posterior:
        """The posterior at theta (or at a :class:`Hyperparameters`' values) from the R-factor (no pass over the data, and Phi^T Phi is
        never formed: L = R^T is M's Cholesky factor)."""
        kernel, noise_variance = self.hyperparameters.values(theta)
        qr = self._factor(kernel, noise_variance)
        system = CholeskySystem(noise_variance, qr.beta, 0.0, qr.L)
        return likelihood.Posterior(self.feature_map, kernel, system, qr.value,
                            self.statistics.n_samples)
