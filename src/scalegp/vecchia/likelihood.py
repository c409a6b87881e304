"""The Vecchia log likelihood of y ~ N(0, K + s2 I) and its analytic gradient.

With the points in the Vecchia ordering and h(i) the points point i conditions on
(:mod:`scalegp.vecchia.neighbors`: c(i), or the larger h(i) of its block when grouped),

    log p(y) ~ sum_i log p(y_i | y_{h(i)})                               (Vecchia 1988)
             = sum_i [-1/2 r_i^2 / v_i - 1/2 log v_i - 1/2 log 2 pi],

r_i = y_i - k_i^T K_h^{-1} y_h, v_i = K_ii - k_i^T K_h^{-1} k_i, K = k(X, X) + s2 I
(noise included: the response model; the targets are taken as centred by the caller).

**One factorization per block.** Let T be a block's union set in order, L L^T = K_TT and
z = L^{-1} y_T. For the member at row t of T, h(i) is rows 0..t-1 of T, so r_i / sqrt(v_i)
= z_t and sqrt(v_i) = L_tt:

    block term = sum_{t member} [-1/2 z_t^2 - log L_tt] - |B| / 2 log 2 pi.

**Gradient.** Each term is the difference of two Gaussian log densities,
log N(y_{<=t}; K_{<=t}) - log N(y_{<t}; K_{<t}), so (R&W eq. 5.9)

    d term / d theta_p = 1/2 <W_t, dK_TT / d theta_p>,
    W_t = A_t A_t^T - A_{t-1} A_{t-1}^T - w_t w_t^T,

with R = L^{-1}, w_t its row t, and A_t = K_{<=t}^{-1} y_{<=t} (padded with zeros) =
sum_{r<=t} z_r w_r (because K_{<=t}^{-1} = sum_{r<=t} w_r w_r^T). For a block,
W = sum_t W_t = A_M^T A_M - A_{M-1}^T A_{M-1} - R_M^T R_M, with M the member rows: three
matrix products. dK/d log s2 = s2 I adds 1/2 s2 tr(W). The kernel derivatives are
:meth:`scalegp.kernels.Kernel.gradient` on the block's inputs (whose last slice, the
derivative in the log variance, is the kernel matrix itself, so it is not formed twice).

Cost per evaluation: sum over blocks of |T|^3 (Cholesky, inverse, products) plus P |T|^2
for the gradient contraction, O(N m^3) ungrouped; memory O(P max |T|^2) per thread, and no
factor is kept between blocks or evaluations (docs/vecchia.md, "The likelihood and its
gradient").
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import linalg
from .._validation import check_matrix, check_positive_int, check_positive_scalar, check_vector
from ..engine.hyperparameters import Hyperparameters
from ..errors import NotPositiveDefiniteError
from ..kernels import Kernel
from .structure import VecchiaStructure

LOG_2PI = math.log(2.0 * math.pi)
#: Blocks handed to one thread at a time.
BLOCKS_PER_TASK = 256


def _block_terms(kernel: Kernel, noise_variance: float, X_ordered, y_ordered, blocks, block_ids,
                 eval_gradient: bool):
    """(value, gradient or None) summed over the blocks ``block_ids``."""
    value = 0.0
    gradient = np.zeros(kernel.n_params + 1) if eval_gradient else None
    for b in block_ids:
        rows, member = blocks.block(b)
        X_T = X_ordered[rows]
        if eval_gradient:           # its last slice, d k / d log s, is k itself
            dK = kernel.gradient(X_T)
            K = dK[-1].copy()
        else:
            K = kernel(X_T)
        K[np.diag_indices_from(K)] += noise_variance
        # LAPACK without the wrappers' checks: at m = 30 they cost as much as the arithmetic
        L = linalg.small_cholesky(K)
        if L is None:
            raise NotPositiveDefiniteError(
                f"a Vecchia block's covariance ({rows.size} points) is not positive definite "
                f"at {kernel!r} with noise_variance {noise_variance:.3g} (duplicated inputs "
                "with a tiny noise variance?)")
        if eval_gradient:
            R = linalg.small_triangular_inverse(L)     # L^{-1}
            z = R @ y_ordered[rows]
        else:
            z = linalg.small_solve_lower(L, y_ordered[rows])
        diagonal = np.diag(L)
        value += -0.5 * float(z[member] @ z[member]) - float(np.sum(np.log(diagonal[member])))
        if not eval_gradient:
            continue
        A = np.cumsum(z[:, None] * R, axis=0)          # A[t] = K_{<=t}^{-1} y_{<=t}, padded
        where = np.flatnonzero(member)
        A_now = A[where]
        A_before = np.where((where > 0)[:, None], A[np.maximum(where - 1, 0)], 0.0)
        R_m = R[where]
        W = A_now.T @ A_now - A_before.T @ A_before - R_m.T @ R_m
        gradient[:-1] += 0.5 * np.einsum("ij,pij->p", W, dK)
        gradient[-1] += 0.5 * noise_variance * np.trace(W)
    return value, gradient


def vecchia_log_likelihood(kernel: Kernel, noise_variance, X, y, structure: VecchiaStructure, *,
                           eval_gradient: bool = False, n_jobs: int = 1):
    """The (grouped, if ``structure`` is) Vecchia log likelihood of y ~ N(0, k(X, X) + s2 I),
    and optionally its gradient in [kernel.theta..., log noise_variance].

    ``n_jobs`` threads share the blocks (BLAS and LAPACK release the GIL)."""
    noise_variance = check_positive_scalar(noise_variance, "noise_variance")
    X = check_matrix(X, "X")
    y = check_vector(y, "y", n_samples=X.shape[0])
    kernel.check_n_dims(X.shape[1])
    n_jobs = check_positive_int(n_jobs, "n_jobs")
    if structure.n_samples != X.shape[0]:
        raise ValueError(f"structure was built for {structure.n_samples} points, X has "
                         f"{X.shape[0]} rows")
    X_ordered, y_ordered = X[structure.order], y[structure.order]
    blocks = structure.blocks
    tasks = [range(start, min(start + BLOCKS_PER_TASK, blocks.n_blocks))
             for start in range(0, blocks.n_blocks, BLOCKS_PER_TASK)]

    def run(ids):
        return _block_terms(kernel, noise_variance, X_ordered, y_ordered, blocks, ids,
                            eval_gradient)

    if n_jobs == 1 or len(tasks) == 1:
        parts = [run(ids) for ids in tasks]
    else:
        with ThreadPoolExecutor(max_workers=n_jobs) as pool:
            parts = list(pool.map(run, tasks))
    value = sum(part[0] for part in parts) - 0.5 * X.shape[0] * LOG_2PI
    if not eval_gradient:
        return float(value)
    return float(value), np.sum([part[1] for part in parts], axis=0)


class VecchiaLikelihood:
    """The Vecchia objective theta = [kernel.theta..., log noise_variance] -> (log p(y),
    gradient) for :func:`scalegp.inference.optimize.maximize_likelihood`, at a fixed
    structure; theta is owned by ``hyperparameters`` (as
    :class:`scalegp.engine.exact.ExactMarginalLikelihood`)."""

    def __init__(self, hyperparameters, X, y, structure: VecchiaStructure, *, n_jobs: int = 1):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.X = check_matrix(X, "X")
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.hyperparameters.kernel.check_n_dims(self.X.shape[1])
        self.structure = structure
        self.n_jobs = check_positive_int(n_jobs, "n_jobs")
        self.n_evaluations = 0

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def value(self, theta) -> float:
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return vecchia_log_likelihood(kernel, noise_variance, self.X, self.y, self.structure,
                                      n_jobs=self.n_jobs)

    def __call__(self, theta):
        self.n_evaluations += 1
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return vecchia_log_likelihood(kernel, noise_variance, self.X, self.y, self.structure,
                                      eval_gradient=True, n_jobs=self.n_jobs)
