"""The local kind ``"test-points"``: every test point is its own centre, the exact
reformulation k(x - x*, y - x*) of Wacker & Filippone 2022, Eq. 6-7, O(N* (N m^2 + m^3))
(docs/local-models.md).
"""

from __future__ import annotations

import math

import numpy as np

from .. import linalg
from .._validation import check_dtype
from ..data.base import ArraySource
from ..stored import Array, Value
from . import resolution
from .centered import LocalModel, _training_arrays, centred_statistics, local_memory_bytes


#: Bytes of the m x m systems of one block of test points (test-point centring).
TEST_POINT_BLOCK_BYTES = 64 * 2**20


class TestPointLocalModel(LocalModel, kind="test-points"):
    """Test-point centring (Section 3.2, Eq. 6-7; docs/local-models.md, "Test-point
    centring"): every test point x* is its own centre, so its posterior is that of the GP
    with kernel k(x - x*, y - x*), whose test features are psi(0):

        M_* = Psi_*^T Psi_* + s2 I = L_* L_*^T,   Psi_* = psi(X - x*),
        mean(x*) = v_*^T w_*,   latent variance s2 |v_*|^2 (+ k(0, 0) - |psi(0)|^2, the DTC
        correction, for a map bounded by the kernel: Nystrom, random projection),
        v_* = L_*^{-1} psi(0),  w_* = L_*^{-1} Psi_*^T y.

    Blocks of test points are done together: one pass over the training rows gives the
    statistics of the whole block (each point's features of a chunk in a call of their own,
    so that a point's prediction is bitwise the one it has alone), and the block's m x m
    systems are factorized in one batched call (:func:`scalegp.linalg.batched_cholesky`).
    Cost O(N* (N m^2 + m^3)).

    The model needs the training rows at prediction, so it keeps them, and its model file
    stores them. It has no marginal likelihood of its own (``log_marginal_likelihood`` is NaN);
    its hyperparameters are learned on the cluster-centred objective at ``threshold``
    (:class:`LocalMarginalLikelihood`).
    """

    STORED = {"threshold": Value("number", "positive"), "X_train": Array(("rows", "d")),
              "y_train": Array(("rows",))}

    def __init__(self, feature_map, kernel, noise_variance, log_marginal_likelihood,
                 n_samples, *, source: ArraySource, threshold: float,
                 chunk_size: int | None = None, dtype=None, progress=None):
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self.source = source
        self.threshold = float(threshold)
        self.chunk_size = chunk_size
        self.dtype = check_dtype(dtype)
        self.progress = progress

    @classmethod
    def fit(cls, context, kernel, noise_variance):
        if context.reoptimize:
            raise NotImplementedError(
                "reoptimize applies to cluster-centred models (a map per test point would "
                "be rebuilt at every prediction)")
        return cls(context.feature_map, kernel, noise_variance, math.nan,
                   context.source.n_samples, source=context.source,
                   threshold=context.threshold, chunk_size=context.chunk_size,
                   dtype=context.dtype)

    @property
    def coefficients(self):
        return np.zeros(0)

    @property
    def block_size(self) -> int:
        """Test points per block: their systems take ``TEST_POINT_BLOCK_BYTES``."""
        m = self.feature_map.n_components
        return max(1, TEST_POINT_BLOCK_BYTES // (3 * 8 * m * m))

    @property
    def memory_bytes(self):
        return local_memory_bytes(self.block_size, self.feature_map.n_components)

    def predict(self, X, *, return_var=False, return_cov=False, include_noise=False,
                progress=None):
        """``progress(test_points_done)``, if given (or set on the model), is called after
        each block."""
        self._check_no_cov(return_cov)
        X = self.feature_map.check_input(X, self.kernel)
        resolution.warn_unresolved_local(self.feature_map, self.kernel, self.noise_variance,
                                         self.source.X, X)
        progress = progress or self.progress
        at_map = self.feature_map.at(self.kernel)
        psi0 = np.asarray(at_map.features(np.zeros((1, X.shape[1]), dtype=X.dtype))[0],
                          dtype=np.float64)
        s2 = self.noise_variance
        m = psi0.size
        mean, var = np.empty(X.shape[0]), np.empty(X.shape[0])
        for start in range(0, X.shape[0], self.block_size):
            block = X[start:start + self.block_size].astype(np.float64)
            statistics = centred_statistics((at_map,) * block.shape[0], self.source, block,
                                            chunk_size=self.chunk_size, dtype=self.dtype)
            A = np.stack([s.gram for s in statistics])
            A[:, np.arange(m), np.arange(m)] += s2
            # a point whose features overflow (too far for the map) predicts NaN, which the
            # estimator reports with its row; the other points are factorized as they are
            finite = np.isfinite(A).all(axis=(1, 2))
            A[~finite] = np.eye(m)
            L, _ = linalg.batched_cholesky(A, name="Psi^T Psi + noise_variance I")
            for k, s in enumerate(statistics):
                V = linalg.solve_lower(L[k], np.column_stack([psi0, s.projection]))
                mean[start + k] = V[:, 0] @ V[:, 1] if finite[k] else np.nan
                var[start + k] = s2 * (V[:, 0] @ V[:, 0]) if finite[k] else np.nan
            if progress is not None:
                progress(start + block.shape[0])
        if not return_var:
            return mean
        np.maximum(var, 0.0, out=var)
        if self.feature_map.bounded_by_kernel:        # the DTC variance (class docstring)
            var += max(float(self.kernel.diag(np.zeros((1, X.shape[1])))[0]) - psi0 @ psi0,
                       0.0)
        if include_noise:
            var += s2
        return mean, var

    # ----------------------------------------------------------------- model files
    def to_state(self):
        return {"threshold": self.threshold, **_training_arrays(self.source)}

    @classmethod
    def stored_arrays(cls, metadata):
        return {"X_train", "y_train"}

    @classmethod
    def has_likelihood(cls, metadata) -> bool:
        """No marginal likelihood of its own (NaN; class docstring)."""
        return False

    @classmethod
    def from_state(cls, state, *, feature_map, kernel, noise_variance,
                   log_marginal_likelihood, n_samples, dtype, map_builder=None):
        return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                   source=ArraySource(state["X_train"], state["y_train"], dtype=dtype),
                   threshold=state["threshold"], dtype=dtype)
