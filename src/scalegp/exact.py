"""The dense exact GP (Rasmussen & Williams 2006, Algorithm 2.1): the independent reference.

K = k(X, X) + s2 I = L L^T, alpha = L^{-T} L^{-1} y,
log p(y) = -1/2 y^T alpha - sum_i log L_ii - n/2 log 2 pi,
d log p / d theta_i = 1/2 tr((alpha alpha^T - K^{-1}) dK/d theta_i)   (R&W eq. 5.9).

It builds n x n matrices (and n x n x P for the gradient), so it refuses n above
``MAX_EXACT_SAMPLES``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import linalg
from ._validation import check_matrix, check_positive_scalar, check_vector
from .kernels import Kernel

#: Largest training set the dense reference accepts: an n x n float64 Gram of 10,000 rows is
#: 0.8 GB, and the likelihood gradient needs (n_params + 2) of them.
MAX_EXACT_SAMPLES = 10_000


def check_size(n_samples: int) -> None:
    if n_samples > MAX_EXACT_SAMPLES:
        raise ValueError(
            f"the exact GP is limited to n_samples <= {MAX_EXACT_SAMPLES} (it stores n x n "
            f"matrices), got n_samples = {n_samples}; use a low-rank approximation "
            "(LowRankGPRegressor) or evaluate on a subsample"
        )


def _prepare(kernel: Kernel, X, y):
    X = check_matrix(X, "X")
    check_size(X.shape[0])
    kernel.check_n_dims(X.shape[1])
    y = check_vector(y, "y", n_samples=X.shape[0])
    return X, y


def log_marginal_likelihood(kernel: Kernel, noise_variance, X, y, *,
                            eval_gradient: bool = False):
    """log p(y | X, theta), and optionally its gradient with respect to
    [kernel.theta..., log noise_variance]."""
    noise_variance = check_positive_scalar(noise_variance, "noise_variance")
    X, y = _prepare(kernel, X, y)
    n = X.shape[0]
    K = kernel(X)
    K[np.diag_indices(n)] += noise_variance
    L, _ = linalg.cholesky(K, name="K + noise_variance I")
    alpha = linalg.cho_solve(L, y)
    value = -0.5 * y @ alpha - 0.5 * linalg.logdet_from_cholesky(L) - 0.5 * n * math.log(2 * math.pi)
    if not eval_gradient:
        return float(value)
    K_inv = linalg.inverse_from_cholesky(L)
    inner = np.outer(alpha, alpha) - K_inv                       # alpha alpha^T - K^{-1}
    kernel_grad = 0.5 * np.einsum("ij,pji->p", inner, kernel.gradient(X))
    noise_grad = 0.5 * np.trace(inner) * noise_variance          # dK/d log s2 = s2 I
    return float(value), np.append(kernel_grad, noise_grad)


@dataclass(frozen=True)
class ExactPosterior:
    """Dense posterior: mean k*^T alpha, latent variance k** - |L^{-1} k*|^2."""

    kernel: Kernel
    noise_variance: float
    X_train: np.ndarray
    cholesky_factor: np.ndarray
    alpha: np.ndarray
    log_marginal_likelihood: float
    jitter: float

    @classmethod
    def fit(cls, kernel: Kernel, noise_variance, X, y) -> "ExactPosterior":
        noise_variance = check_positive_scalar(noise_variance, "noise_variance")
        X, y = _prepare(kernel, X, y)
        n = X.shape[0]
        K = kernel(X)
        K[np.diag_indices(n)] += noise_variance
        L, jitter = linalg.cholesky(K, name="K + noise_variance I")
        alpha = linalg.cho_solve(L, y)
        value = (-0.5 * y @ alpha - 0.5 * linalg.logdet_from_cholesky(L)
                 - 0.5 * n * math.log(2 * math.pi))
        return cls(kernel, noise_variance, X, L, alpha, float(value), jitter)

    @property
    def n_samples(self) -> int:
        return self.X_train.shape[0]

    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False):
        """Predictive mean, and optionally the latent variance or covariance."""
        if return_var and return_cov:
            raise ValueError("return_var and return_cov cannot both be True")
        X = check_matrix(X, "X", n_dims=self.X_train.shape[1])
        K_star = self.kernel(self.X_train, X)
        mean = K_star.T @ self.alpha
        if not (return_var or return_cov):
            return mean
        V = linalg.solve_lower(self.cholesky_factor, K_star)
        noise = self.noise_variance if include_noise else 0.0
        if return_cov:
            cov = self.kernel(X) - V.T @ V
            cov[np.diag_indices_from(cov)] += noise
            return mean, cov
        var = np.maximum(self.kernel.diag(X) - np.einsum("ij,ij->j", V, V), 0.0)
        return mean, var + noise


class ExactMarginalLikelihood:
    """theta = [kernel.theta..., log noise_variance] -> (log p(y), gradient), dense."""

    def __init__(self, kernel: Kernel, X, y):
        self.kernel = kernel
        self.X, self.y = _prepare(kernel, X, y)
        self.n_evaluations = 0

    def __call__(self, theta):
        self.n_evaluations += 1
        theta = np.asarray(theta, dtype=float)
        kernel = self.kernel.with_theta(theta[:-1])
        return log_marginal_likelihood(kernel, float(np.exp(theta[-1])), self.X, self.y,
                                       eval_gradient=True)

    def posterior(self, kernel: Kernel, noise_variance: float) -> "ExactPosterior":
        """The exact posterior at (kernel, noise_variance)."""
        return ExactPosterior.fit(kernel, noise_variance, self.X, self.y)
