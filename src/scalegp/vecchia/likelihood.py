"""The Vecchia log likelihood of y ~ N(0, K + s2 I + V) and its analytic gradient.

With the points in the Vecchia ordering and h(i) the points point i conditions on
(:mod:`scalegp.vecchia.neighbors`: c(i), or the larger h(i) of its block when grouped),

    log p(y) ~ sum_i log p(y_i | y_{h(i)})                               (Vecchia 1988)
             = sum_i [-1/2 r_i^2 / v_i - 1/2 log v_i - 1/2 log 2 pi],

r_i = y_i - k_i^T K_h^{-1} y_h, v_i = K_ii - k_i^T K_h^{-1} k_i, K = k(X, X) + s2 I + V
(noise included: the response model; the targets are taken as centred by the caller).
V = diag(v_1, ..., v_N) holds known per-row noise variances (measurement errors; zero when
none are given), added to the learned s2 as the exact GP adds them
(:mod:`scalegp.engine.exact`): s2 is learned, V is data, so the gradient below is the same.

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

**Fisher information** (for Fisher scoring, as GpGp): the expected negative Hessian of
term t, log N(y_{<=t}; K_{<=t}) - log N(y_{<t}; K_{<t}), is I_{<=t} - I_{<t} with
I_S = 1/2 tr(K_S^{-1} dK_p K_S^{-1} dK_q). With K_{<=t}^{-1} = sum_{r<=t} w_r w_r^T and
G_p = R dK_p R^T, tr(K_{<=t}^{-1} dK_p K_{<=t}^{-1} dK_q) = sum_{r, r' <= t} G_p[r, r']
G_q[r, r'], so the term's information is

    sum_{r<t} G_p[t, r] G_q[t, r] + 1/2 G_p[t, t] G_q[t, t]:

only the member rows of G_p, w_M dK_p R^T, two matrix products per parameter
(:meth:`scalegp.kernels.Kernel.stacked_gradient` gives the stacks dK_p).

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
from .._validation import (check_matrix, check_noise_variances, check_positive_int,
                           check_positive_scalar, check_vector)
from ..engine.hyperparameters import Hyperparameters
from ..errors import NotPositiveDefiniteError
from ..kernels import Kernel
from ..rowwise import one_blas_thread
from .structure import VecchiaStructure

LOG_2PI = math.log(2.0 * math.pi)
#: Entries (blocks x s^2) of one batch of equal-size blocks: 1 MB per (B, s, s) array, a
#: few MB per thread with the kernel gradient, in cache. Measured on the relief map (m = 30,
#: CPU s per evaluation): 2^15: 2.21, 2^16: 1.86, 2^17: 1.72, 2^18: 1.97, 2^20: 2.85.
ELEMENTS_PER_BATCH = 1 << 17
_SIGNS = (1.0, -1.0, -1.0)


def _batches(blocks):
    """The blocks as batches of equal union-set size (:attr:`Blocks.by_size` cut into pieces
    of at most ELEMENTS_PER_BATCH entries), in a fixed order."""
    out = []
    for positions, rows, weight in blocks.by_size:
        step = max(1, ELEMENTS_PER_BATCH // positions.shape[1] ** 2)
        for start in range(0, len(positions), step):
            piece = slice(start, start + step)
            out.append((positions[piece], rows[piece], weight[piece]))
    return out


def _batch_terms(kernel: Kernel, noise_variance: float, X, y, batch,
                 eval_gradient: bool, eval_fisher: bool = False, sample_noise_variance=None):
    """(value, gradient or None, Fisher information or None) summed over one batch of B
    blocks of equal size s, with stacked arrays: K (B, s, s), L, R = L^{-1}, and the
    members' rows gathered (module docstring). ``batch`` = (indices (B, s) of the union
    sets' rows in X and y, member rows (B, M), member weights (B, M));
    ``sample_noise_variance``: V's diagonal over X's rows, or None."""
    indices, rows, weight = batch
    X_T, y_T = X[indices], y[indices]
    if eval_fisher:                 # the derivative stacks themselves
        K, dK = kernel.stacked_gradient(X_T)
        K = K.copy()

        def inner(W):
            return dK.reshape(dK.shape[0], -1) @ W.reshape(-1)
    elif eval_gradient:             # inner(W): the contractions <W, dK / d theta_p>
        K, inner = kernel.stacked(X_T, eval_gradient=True)
        K = K.copy()
    else:
        K = kernel.stacked(X_T)
    diagonal = np.arange(K.shape[1])
    K[:, diagonal, diagonal] += noise_variance
    if sample_noise_variance is not None:
        K[:, diagonal, diagonal] += sample_noise_variance[indices]
    try:
        L = linalg.batched_cholesky(K, name="Vecchia block", allow_jitter=False)[0]
    except NotPositiveDefiniteError:
        raise NotPositiveDefiniteError(
            f"a Vecchia block's covariance ({K.shape[1]} points) is not positive definite "
            f"at {kernel!r} with noise_variance {noise_variance:.3g} (duplicated inputs "
            "with a tiny noise variance?)") from None
    R = linalg.batched_triangular_inverse(L)               # L^{-1}
    z = np.matmul(R, y_T[:, :, None])[:, :, 0]
    z_m = np.take_along_axis(z, rows, axis=1)                        # (B, M)
    log_diagonal = np.log(np.take_along_axis(L[:, diagonal, diagonal], rows, axis=1))
    value = -0.5 * float(np.sum(weight * z_m * z_m)) - float(np.sum(weight * log_diagonal))
    if not eval_gradient:
        return value, None, None
    # member t: w_t = R^T e_t (row t of R) and A_{t-1} = R^T (z o 1_{<t}), so that
    # W = sum_t z_t (A_{t-1} w_t^T + w_t A_{t-1}^T) + (z_t^2 - 1) w_t w_t^T = P^T Q with
    # P = [A_{t-1}; w_t] and Q = [z_t w_t; z_t A_{t-1} + (z_t^2 - 1) w_t] (rows over t)
    earlier = (diagonal[None, None, :] < rows[:, :, None]) * z[:, None, :]   # (B, M, s)
    A_before = np.matmul(earlier, R)
    w = np.take_along_axis(R, rows[:, :, None], axis=1)
    z_w = (weight * z_m)[:, :, None]
    P = np.concatenate([A_before, w], axis=1)
    Q = np.concatenate([z_w * w, z_w * A_before + ((z_m * z_m - 1.0) * weight)[:, :, None] * w],
                       axis=1)
    W = np.matmul(P.transpose(0, 2, 1), Q)
    trace = float(np.einsum("bii->", W))
    fisher = _fisher(dK, noise_variance, R, w, rows, weight) if eval_fisher else None
    return value, 0.5 * np.append(inner(W), noise_variance * trace), fisher


def _fisher(dK, noise_variance, R, w, rows, weight):
    """The batch's Fisher information (module docstring): with G_p = R dK_p R^T (rows t of
    the members only: w dK_p R^T),

        I_pq = sum_t [sum_{r<t} G_p[t, r] G_q[t, r] + 1/2 G_p[t, t] G_q[t, t]],

    dK of the noise being s2 I (G = s2 w R^T)."""
    R_T = R.transpose(0, 2, 1)
    G = [np.matmul(np.matmul(w, dK_p), R_T) for dK_p in dK]
    G.append(noise_variance * np.matmul(w, R_T))
    column = np.arange(R.shape[1])[None, None, :]
    mask = ((column < rows[:, :, None]) + 0.5 * (column == rows[:, :, None])) * \
        weight[:, :, None]
    G = np.stack([g.reshape(-1) for g in G])                       # (P, B M s)
    return (G * mask.reshape(-1)) @ G.T


def vecchia_log_likelihood(kernel: Kernel, noise_variance, X, y, structure: VecchiaStructure, *,
                           eval_gradient: bool = False, eval_fisher: bool = False,
                           n_jobs: int = 1, sample_noise_variance=None):
    """The (grouped, if ``structure`` is) Vecchia log likelihood of
    y ~ N(0, k(X, X) + s2 I + diag(sample_noise_variance)), and optionally its gradient in
    [kernel.theta..., log noise_variance] and (with ``eval_fisher``: value, gradient,
    information) its Fisher information in them, the expected negative Hessian under the
    Vecchia density (Guinness 2021, as GpGp).

    ``n_jobs`` threads share the blocks (BLAS and LAPACK release the GIL);
    ``sample_noise_variance`` (one per row of X, >= 0; None: zeros) are known noise
    variances added to s2."""
    noise_variance = check_positive_scalar(noise_variance, "noise_variance")
    X = check_matrix(X, "X")
    y = check_vector(y, "y", n_samples=X.shape[0])
    if sample_noise_variance is not None:
        sample_noise_variance = check_noise_variances(sample_noise_variance, X.shape[0])
    kernel.check_n_dims(X.shape[1])
    n_jobs = check_positive_int(n_jobs, "n_jobs")
    if structure.n_samples != X.shape[0]:
        raise ValueError(f"structure was built for {structure.n_samples} points, X has "
                         f"{X.shape[0]} rows")
    batches = _batches(structure.blocks)
    order = structure.order

    def run(batch):      # the rows of the batch's positions: no copy of X in the ordering
        positions, rows, weight = batch     # (a sample of the blocks reads only its rows)
        return _batch_terms(kernel, noise_variance, X, y, (order[positions], rows, weight),
                            eval_gradient or eval_fisher, eval_fisher, sample_noise_variance)

    # BLAS on one thread: the batches' products are small, and BLAS threads that wait
    # spinning beside ours (or beside other jobs) burn the cores the batches need
    with one_blas_thread():
        if n_jobs == 1 or len(batches) == 1:
            parts = [run(batch) for batch in batches]
        else:          # the same batches summed in the same order: equal to the serial sum
            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                parts = list(pool.map(run, batches))
    value = math.fsum(part[0] for part in parts) - 0.5 * structure.blocks.n_members * LOG_2PI
    if not (eval_gradient or eval_fisher):
        return float(value)
    gradient = np.sum([part[1] for part in parts], axis=0)
    if not eval_fisher:
        return float(value), gradient
    return float(value), gradient, np.sum([part[2] for part in parts], axis=0)


class VecchiaLikelihood:
    """The Vecchia objective theta = [kernel.theta..., log noise_variance] -> (log p(y),
    gradient) for :func:`scalegp.inference.optimize.maximize_likelihood`, at a fixed
    structure; theta is owned by ``hyperparameters`` (as
    :class:`scalegp.engine.exact.ExactMarginalLikelihood`); ``sample_noise_variance``: known
    per-row noise variances added to s2 (None: none)."""

    def __init__(self, hyperparameters, X, y, structure: VecchiaStructure, *, n_jobs: int = 1,
                 sample_noise_variance=None):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.X = check_matrix(X, "X")
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.sample_noise_variance = None if sample_noise_variance is None else \
            check_noise_variances(sample_noise_variance, self.X.shape[0])
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
                                      n_jobs=self.n_jobs,
                                      sample_noise_variance=self.sample_noise_variance)

    def __call__(self, theta):
        self.n_evaluations += 1
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return vecchia_log_likelihood(kernel, noise_variance, self.X, self.y, self.structure,
                                      eval_gradient=True, n_jobs=self.n_jobs,
                                      sample_noise_variance=self.sample_noise_variance)

    def with_fisher(self, theta):
        """(log p(y), gradient, Fisher information) at theta, for Fisher scoring."""
        self.n_evaluations += 1
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return vecchia_log_likelihood(kernel, noise_variance, self.X, self.y, self.structure,
                                      eval_fisher=True, n_jobs=self.n_jobs,
                                      sample_noise_variance=self.sample_noise_variance)
