"""The fitted Vecchia model as a posterior: what :class:`scalegp.VecchiaGPRegressor` predicts
from and what its model file stores.

A Vecchia model keeps no factor: each prediction conditions on the m nearest training
points of the test point in the scaled inputs u = x / l (:mod:`scalegp.vecchia.prediction`),

    mean(x) = k_N^T (K_N + s2 I)^{-1} y_N,    var(x) = k(x, x) - k_N^T (K_N + s2 I)^{-1} k_N,

so the posterior is the training rows, the (centred) targets, the hyperparameters and m:
memory O(N d), and its model-file section is X_train (N x d), y_train (N) and m. Known
per-row noise variances v of the training rows (``sample_noise_variance``, in the units of
the centred targets) join s2 on K_N's diagonal and are stored with them.

The covariance (``return_cov``) and the draws (``sample``) are those of the joint Vecchia
predictive (:func:`scalegp.vecchia.prediction.predict_joint`): the test points in their
given order, each conditioned on its m nearest among the training points and the earlier
test points, covariance F F^T with F lower triangular. Its mean is the joint predictive's,
which equals the independent mean above when m covers every training point and earlier
test point (it is then the exact GP's), and differs from it by the Vecchia error otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._validation import check_matrix
from ..kernels import Kernel
from ..stored import Array, Value
from . import prediction


@dataclass(frozen=True)
class VecchiaPosterior:
    """The fitted Vecchia model: training rows, centred targets, kernel, s2, m and the
    training rows' known noise variances (None: none)."""

    kernel: Kernel
    noise_variance: float
    X_train: np.ndarray
    y_train: np.ndarray
    n_neighbors: int
    log_marginal_likelihood: float
    n_jobs: int = 1
    sample_noise_variance: np.ndarray | None = None

    #: The posterior's section of a model file (:mod:`scalegp.stored`): metadata ``system``
    #: with m (training neighbours per test point), and the arrays X_train
    #: (N x d), y_train (N, the standardized targets) and, for a fit with known noise
    #: variances, sample_noise_variance (N, standardized as y); the kernel, s2 and the
    #: Vecchia log likelihood are sections of their own.
    STORED = {"n_neighbors": Value("int", "at_least_one"),
              "X_train": Array(("N", "d")),
              "y_train": Array(("N",)),
              "sample_noise_variance": Array(("N",), ("finite", "nonnegative"),
                                             optional=True)}

    def to_state(self) -> dict:
        """The section, as ``STORED`` declares it."""
        state = {"n_neighbors": int(self.n_neighbors), "X_train": self.X_train,
                 "y_train": self.y_train}
        if self.sample_noise_variance is not None:
            state["sample_noise_variance"] = self.sample_noise_variance
        return state

    @classmethod
    def from_state(cls, state: dict, *, kernel: Kernel, noise_variance: float,
                   log_marginal_likelihood: float) -> "VecchiaPosterior":
        """The posterior from its validated section (shapes agree: the schema's symbols), on
        one thread (the estimator sets its own ``n_jobs``: :meth:`with_threads`)."""
        return cls(kernel=kernel, noise_variance=noise_variance, X_train=state["X_train"],
                   y_train=state["y_train"], n_neighbors=state["n_neighbors"],
                   log_marginal_likelihood=log_marginal_likelihood,
                   sample_noise_variance=state.get("sample_noise_variance"))

    def with_threads(self, n_jobs: int) -> "VecchiaPosterior":
        """The same posterior predicting on ``n_jobs`` threads (the same numbers)."""
        return self if n_jobs == self.n_jobs else replace(self, n_jobs=int(n_jobs))

    @property
    def n_samples(self) -> int:
        return self.X_train.shape[0]

    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False):
        """The independent predictive mean (and latent variance, or with ``include_noise``
        that of a new response) at X; with ``return_cov`` the joint predictive's mean and
        covariance (module docstring)."""
        if return_var and return_cov:
            raise ValueError("return_var and return_cov cannot both be True")
        X = check_matrix(X, "X", n_dims=self.X_train.shape[1])
        if return_cov:
            mean, F = prediction.predict_joint(
                self.kernel, self.noise_variance, self.X_train, self.y_train, X,
                self.n_neighbors, sample_noise_variance=self.sample_noise_variance)
            cov = F @ F.T
            if include_noise:
                cov[np.diag_indices_from(cov)] += self.noise_variance
            return mean, cov
        return prediction.predict(self.kernel, self.noise_variance, self.X_train, self.y_train,
                                  X, self.n_neighbors, return_var=return_var,
                                  include_noise=include_noise, n_jobs=self.n_jobs,
                                  sample_noise_variance=self.sample_noise_variance)

    def sample(self, X, n_samples: int, rng: np.random.Generator) -> np.ndarray:
        """Joint draws of the latent function at X, shape (n_test, n_samples), from the
        joint Vecchia predictive (mean + F e, e standard normal)."""
        return prediction.sample(self.kernel, self.noise_variance, self.X_train, self.y_train,
                                 X, self.n_neighbors, n_samples, rng,
                                 sample_noise_variance=self.sample_noise_variance)
