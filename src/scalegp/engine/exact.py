"""The dense exact GP (Rasmussen & Williams 2006, Algorithm 2.1): the independent reference.

K = k(X, X) + D = L L^T, alpha = L^{-T} L^{-1} y, with D = s2 I, or diag(s2 + v_i) with known
per-row noise variances v_i (docs/engine.md, "Noise models"),
log p(y) = -1/2 y^T alpha - sum_i log L_ii - n/2 log 2 pi,
d log p / d theta_i = 1/2 tr((alpha alpha^T - K^{-1}) dK/d theta_i)   (R&W eq. 5.9).

It builds n x n matrices, so it refuses n above ``MAX_EXACT_SAMPLES``. The gradient's
traces come from the kernel's contraction
(:meth:`~scalegp.kernels.Kernel.gram_and_gradient_inner`): for the smooth radial kernels one
GEMM over the inputs, from the distances of the Gram matrix itself, without an n x n x P stack
of dK/d theta (other kernels form that stack).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from .. import linalg, rowwise
from .._validation import check_matrix, check_noise_variances, check_positive_scalar, check_vector
from ..kernels import Kernel
from ..stored import Array, Value
from .hyperparameters import Hyperparameters

#: Training sets up to this size are factorized and differentiated on one BLAS thread: on the
#: 2-core machine, with d = 10, an evaluation of the likelihood and its gradient took 0.74 /
#: 0.74, 3.4 / 8.0, 22 / 46, 76 / 112 and 191 / 214 ms on one / two threads at n = 100,
#: 200, 500, 1,000 and 1,500, and 427 / 319 ms at 2,000 (the second thread's waits cost more
#: than it gives below about 1,700 rows; docs/decisions.md, "One BLAS thread for local
#: systems").
ONE_THREAD_ROWS = 1500
#: Largest training set the dense reference accepts: an n x n float64 Gram of 10,000 rows is
#: 0.8 GB, and the likelihood gradient needs a few of them (n_params + 2 for the kernels
#: without a GEMM contraction).
MAX_EXACT_SAMPLES = 10_000


def check_size(n_samples: int) -> None:
    if n_samples > MAX_EXACT_SAMPLES:
        raise ValueError(
            f"the exact GP is limited to n_samples <= {MAX_EXACT_SAMPLES} (it stores n x n "
            f"matrices), got n_samples = {n_samples}; use a low-rank approximation "
            "(LowRankGPRegressor) or evaluate on a subsample"
        )


def _prepare(kernel: Kernel, X, y, sample_noise_variance=None):
    X = check_matrix(X, "X")
    check_size(X.shape[0])
    kernel.check_n_dims(X.shape[1])
    y = check_vector(y, "y", n_samples=X.shape[0])
    if sample_noise_variance is not None:
        sample_noise_variance = check_noise_variances(sample_noise_variance, X.shape[0])
    return X, y, sample_noise_variance


def _blas_threads(n_samples: int):
    """One BLAS thread up to ``ONE_THREAD_ROWS`` rows, else BLAS's own."""
    return rowwise.one_blas_thread() if n_samples <= ONE_THREAD_ROWS else \
        contextlib.nullcontext()


def _covariance(K, noise_variance: float, sample_noise_variance):
    """The Cholesky factor of K + s2 I (+ diag(v)) for K = k(X, X) (noise added in place),
    with the jitter used."""
    K[np.diag_indices(K.shape[0])] += noise_variance
    if sample_noise_variance is not None:
        K[np.diag_indices(K.shape[0])] += sample_noise_variance
    L, jitter = linalg.cholesky(K, name="K + noise_variance I")
    return L, jitter


def log_marginal_likelihood(kernel: Kernel, noise_variance, X, y, *,
                            eval_gradient: bool = False, sample_noise_variance=None):
    """log p(y | X, theta), and optionally its gradient with respect to
    [kernel.theta..., log noise_variance]."""
    noise_variance = check_positive_scalar(noise_variance, "noise_variance")
    X, y, sample_noise_variance = _prepare(kernel, X, y, sample_noise_variance)
    n = X.shape[0]
    with _blas_threads(n):
        if eval_gradient:
            K, kernel_inner = kernel.gram_and_gradient_inner(X)
        else:
            K = kernel(X)
        L, _ = _covariance(K, noise_variance, sample_noise_variance)
        alpha = linalg.cho_solve(L, y)
        value = (-0.5 * y @ alpha - 0.5 * linalg.logdet_from_cholesky(L)
                 - 0.5 * n * math.log(2 * math.pi))
        if not eval_gradient:
            return float(value)
        K_inv = linalg.inverse_from_cholesky(L)
        inner = np.outer(alpha, alpha) - K_inv                   # alpha alpha^T - K^{-1}
        # <inner, dK/d theta_p> without the n x n x n_params stack of dK (inner is symmetric)
        kernel_grad = 0.5 * kernel_inner(inner)
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

    #: The posterior's section of a model file (:mod:`scalegp.stored`): the metadata
    #: ``system`` and the arrays X_train (n x d), L (n x n, lower triangular, positive
    #: diagonal) and alpha = (K + s2 I)^{-1} y; the kernel, s2 and the likelihood are
    #: sections of their own.
    STORED = {"jitter": Value("number", "nonnegative"),
              "X_train": Array(("n", "d")),
              "cholesky_factor": Array(("n", "n"), ("finite", "cholesky")),
              "alpha": Array(("n",))}

    def to_state(self) -> dict:
        """The section, as ``STORED`` declares it."""
        return {"jitter": float(self.jitter), "X_train": self.X_train,
                "cholesky_factor": self.cholesky_factor, "alpha": self.alpha}

    @classmethod
    def from_state(cls, state: dict, *, kernel: Kernel, noise_variance: float,
                   log_marginal_likelihood: float) -> "ExactPosterior":
        """The posterior from its validated section (shapes agree: the schema's symbols)."""
        return cls(kernel=kernel, noise_variance=noise_variance, X_train=state["X_train"],
                   cholesky_factor=state["cholesky_factor"], alpha=state["alpha"],
                   log_marginal_likelihood=log_marginal_likelihood, jitter=state["jitter"])

    @classmethod
    def fit(cls, kernel: Kernel, noise_variance, X, y,
            sample_noise_variance=None) -> "ExactPosterior":
        noise_variance = check_positive_scalar(noise_variance, "noise_variance")
        X, y, sample_noise_variance = _prepare(kernel, X, y, sample_noise_variance)
        n = X.shape[0]
        with _blas_threads(n):
            L, jitter = _covariance(kernel(X), noise_variance, sample_noise_variance)
            alpha = linalg.cho_solve(L, y)
        value = (-0.5 * y @ alpha - 0.5 * linalg.logdet_from_cholesky(L)
                 - 0.5 * n * math.log(2 * math.pi))
        return cls(kernel, noise_variance, X, L, alpha, float(value), jitter)

    @property
    def n_samples(self) -> int:
        return self.X_train.shape[0]

    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False):
        """Predictive mean, and optionally the latent variance or covariance.

        Row by row (:mod:`scalegp.rowwise`): k(x*, X_train) is shifted by the training
        inputs' mean, so a row's prediction is a function of that row alone. The covariance
        is a joint quantity; its test-test block k(X*, X*) comes from the differences
        (:meth:`~scalegp.kernels.Kernel.by_differences`), accurate for any spread of X*."""
        if return_var and return_cov:
            raise ValueError("return_var and return_cov cannot both be True")
        X = check_matrix(X, "X", n_dims=self.X_train.shape[1])
        noise = self.noise_variance if include_noise else 0.0
        if return_cov:
            K_star = self.kernel(X, self.X_train)
            V = linalg.solve_lower(self.cholesky_factor, K_star.T)
            cov = self.kernel.by_differences(X) - V.T @ V
            cov[np.diag_indices_from(cov)] += noise
            return K_star @ self.alpha, cov

        def block(rows):
            K_star = self.kernel(rows, self.X_train)
            mean = K_star @ self.alpha
            if not return_var:
                return mean
            V = linalg.solve_lower(self.cholesky_factor, K_star.T)
            var = np.maximum(self.kernel.diag(rows) - np.einsum("ij,ij->j", V, V), 0.0)
            return mean, var + noise
        return rowwise.in_blocks(block, X)

    def sample(self, X, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        """Draws of the latent function at X, shape (n_test, n_samples), from the
        n_test x n_test predictive covariance (eigh tolerates its rank deficiency)."""
        mean, cov = self.predict(X, return_cov=True)
        return rng.multivariate_normal(mean, cov, size=n_samples, method="eigh").T


class ExactMarginalLikelihood:
    """The exact objective: theta = [kernel.theta..., log noise_variance] -> log p(y) and its
    gradient (dense), and the posterior at theta; theta is owned by ``hyperparameters``
    (:class:`~scalegp.engine.hyperparameters.Hyperparameters`, or a kernel taken as one)."""

    def __init__(self, hyperparameters, X, y, *, sample_noise_variance=None):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.X, self.y, self.sample_noise_variance = _prepare(
            self.hyperparameters.kernel, X, y, sample_noise_variance)
        self.n_evaluations = 0

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def value(self, theta) -> float:
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return log_marginal_likelihood(kernel, noise_variance, self.X, self.y,
                                       sample_noise_variance=self.sample_noise_variance)

    def __call__(self, theta):
        self.n_evaluations += 1
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return log_marginal_likelihood(kernel, noise_variance, self.X, self.y,
                                       eval_gradient=True,
                                       sample_noise_variance=self.sample_noise_variance)

    def posterior(self, theta) -> "ExactPosterior":
        """The exact posterior at theta (or at a :class:`Hyperparameters`' values)."""
        kernel, noise_variance = self.hyperparameters.values(theta)
        return ExactPosterior.fit(kernel, noise_variance, self.X, self.y,
                                  self.sample_noise_variance)
