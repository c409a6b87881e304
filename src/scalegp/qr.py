"""The QR variant of the fixed-basis engine (GLF paper, Appendix A.2; docs/gauss-legendre.md).

The engine's default path forms Phi^T Phi, whose condition number is that of Phi squared. For
a :class:`~scalegp.features.base.FixedBasisFeatureMap` (Psi = Phi diag(sqrt(w(theta)))) this
module keeps only the R-factor of [Phi | y], accumulated by a streaming TSQR, and computes the
log marginal likelihood, its gradient and the posterior from QR factorizations of a (2s x s)
matrix per theta. It is selected by a map whose ``solver`` field is ``"qr"`` (Gauss-Legendre
features): :func:`marginal_likelihood` returns the objective for the map's solver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import gp, linalg
from ._validation import check_dtype, check_matrix, check_vector
from .features.base import FeatureMap, FixedBasisFeatureMap
from .kernels import Kernel

__all__ = ["QRBasisStatistics", "QRMarginalLikelihood", "marginal_likelihood"]


@dataclass(frozen=True)
class QRBasisStatistics:
    """The R-factor of [Phi | y] by a streaming TSQR (Appendix A.2; docs/gauss-legendre.md).

    With [Phi | y] = Q [[R_V, t_y], [0, rho]], R_V^T R_V = Phi^T Phi and R_V^T t_y = Phi^T y
    without forming Phi^T Phi. Chunk by chunk, the R-factor of [R_previous; chunk] is the
    R-factor of all rows so far.

    Attributes
    ----------
    factor : (s, s)
        R_V, upper triangular (zero rows where n < s).
    projection : (s,)
        t_y = Q_V^T y.
    y_norm2 : float
    n_samples : int
    """

    factor: np.ndarray
    projection: np.ndarray
    y_norm2: float
    n_samples: int

    @classmethod
    def accumulate(cls, feature_map: FixedBasisFeatureMap, X, y, *,
                   chunk_size: int | None = None, progress=None) -> "QRBasisStatistics":
        """One streaming pass; ``progress(rows_done)`` is called after each chunk."""
        X = check_matrix(X, "X", n_dims=feature_map.n_dims)
        y = check_vector(y, "y", n_samples=X.shape[0])
        s = feature_map.n_components
        chunk_size = chunk_size or gp.default_chunk_size(s + 1)
        R = np.zeros((0, s + 1))
        for start in range(0, X.shape[0], chunk_size):
            stop = min(start + chunk_size, X.shape[0])
            block = np.hstack([feature_map.basis(X[start:stop]), y[start:stop, None]])
            R = linalg.triangular_factor(np.vstack([R, block]))
            if progress is not None:
                progress(stop)
        R = np.vstack([R, np.zeros((s + 1 - R.shape[0], s + 1))])
        return cls(np.triu(R[:s, :s]), R[:s, s].copy(), float(y @ y), X.shape[0])


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
    u = L^{-1} b (= Q_1^T t_y):

        beta = M^{-1} b = R^{-1} u,   y^T K^{-1} y = (|y|^2 - |u|^2) / s2,
        log det K = (n - s) log s2 + 2 sum_i log R_ii,   diag(M^{-1}) = row norms^2 of R^{-1},

    so that (docs/engine.md, "Gradient"; derivation in docs/gauss-legendre.md, section 8)

        d log p / d theta_i = 1/2 sum_l g_il [beta_l^2 - (1 - s2 (M^{-1})_ll)],
        d log p / d log s2 = s2 / 2 [(|y|^2 - 2|u|^2 + |B beta|^2) / s2^2
                                     - (n - s + s2 tr M^{-1}) / s2],

    g_il = d log w_l / d theta_i. Same interface as :class:`scalegp.gp.MarginalLikelihood`:
    theta = [kernel.theta..., log noise_variance]. Each call costs O(s^3). Computes in
    float64 (the variant exists for accuracy).
    """

    def __init__(self, feature_map: FixedBasisFeatureMap, kernel: Kernel, X, y, *,
                 chunk_size: int | None = None, dtype=None, progress=None):
        if not isinstance(feature_map, FixedBasisFeatureMap):
            raise TypeError("the QR variant needs a fixed-basis feature map (Psi = Phi "
                            f"diag(sqrt(w))), got {type(feature_map).__name__}")
        if check_dtype(dtype) != np.float64:
            raise ValueError("solver='qr' computes in float64 (it exists for accuracy); "
                             "use dtype='float64' or the default solver 'cholesky'")
        self.feature_map = feature_map
        self.kernel = kernel
        self.statistics = QRBasisStatistics.accumulate(feature_map, X, y,
                                                       chunk_size=chunk_size,
                                                       progress=progress)
        self.n_evaluations = 0

    def kernel_at(self, theta) -> tuple[Kernel, float]:
        theta = np.asarray(theta, dtype=float)
        return self.kernel.with_theta(theta[:-1]), float(np.exp(theta[-1]))

    def _factor(self, kernel: Kernel, noise_variance: float) -> _QRFactorization:
        stats = self.statistics
        s = stats.projection.size
        B = stats.factor * np.sqrt(self.feature_map.weights(kernel))
        L = linalg.triangular_factor(np.vstack([B, math.sqrt(noise_variance) * np.eye(s)])).T
        b = B.T @ stats.projection
        u = linalg.solve_lower(L, b)
        value = -0.5 * ((stats.y_norm2 - u @ u) / noise_variance
                        + (stats.n_samples - s) * math.log(noise_variance)
                        + linalg.logdet_from_cholesky(L)
                        + stats.n_samples * math.log(2 * math.pi))
        beta = linalg.solve_lower(L, u, transpose=True)
        return _QRFactorization(float(value), B, L, u, beta)

    def value(self, theta) -> float:
        kernel, noise_variance = self.kernel_at(theta)
        return self._factor(kernel, noise_variance).value

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(log p(y), gradient with respect to theta)."""
        self.n_evaluations += 1
        kernel, s2 = self.kernel_at(theta)
        qr = self._factor(kernel, s2)
        stats = self.statistics
        inverse_diagonal = linalg.inverse_diagonal_from_cholesky(qr.L)
        kernel_grad = 0.5 * self.feature_map.log_weights_grad(kernel) @ (
            qr.beta**2 - (1.0 - s2 * inverse_diagonal))
        B_beta = qr.B @ qr.beta
        alpha_norm2 = (stats.y_norm2 - 2 * qr.u @ qr.u + B_beta @ B_beta) / s2**2
        trace_inverse = (stats.n_samples - qr.beta.size + s2 * inverse_diagonal.sum()) / s2
        return qr.value, np.append(kernel_grad, 0.5 * s2 * (alpha_norm2 - trace_inverse))

    def posterior(self, kernel: Kernel, noise_variance: float) -> gp.Posterior:
        """The posterior at (kernel, noise_variance) from the R-factor (no pass over the data,
        and Phi^T Phi is never formed: L = R^T is M's Cholesky factor)."""
        qr = self._factor(kernel, noise_variance)
        system = gp.FactorizedSystem(noise_variance, None, qr.L, None, qr.beta, 0.0)
        return gp.Posterior(self.feature_map, kernel, system, qr.value,
                            self.statistics.n_samples)


def marginal_likelihood(feature_map: FeatureMap, kernel: Kernel, X, y, **options):
    """The learning objective for the map's ``solver``: :class:`QRMarginalLikelihood` for
    ``"qr"``, otherwise the engine's :class:`scalegp.gp.MarginalLikelihood` (normal
    equations). ``options``: ``chunk_size``, ``dtype``, ``progress``, ``signed_rule`` (the QR
    variant's maps have no negative weights, so it needs no signed rule)."""
    if getattr(feature_map, "solver", "cholesky") == "qr":
        options.pop("signed_rule", None)
        return QRMarginalLikelihood(feature_map, kernel, X, y, **options)
    return gp.MarginalLikelihood(feature_map, kernel, X, y, **options)
