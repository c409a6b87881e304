"""Vecchia predictions: each test point conditioned on its m nearest training points.

**Independent predictive** (Katzfuss et al. 2020's "independent" response-latent variant):
with N(x) the m nearest training points to x in the scaled inputs u = x / l (one cKDTree
query), K_N = k(X_N, X_N) + s2 I = L L^T, k = k(X_N, x), v = L^{-1} k,

    mean(x) = k^T K_N^{-1} y_N = v^T (L^{-1} y_N),    var(x) = k(x, x) - |v|^2  (+ s2),

the exact GP's predictive given y_N only; at m = N it is the exact GP's. Known per-row
noise variances v of the training rows (``sample_noise_variance``) join s2 on K_N's
diagonal, diag(s2 + v_N), as in the likelihood; a new response's noise is s2.

**Joint predictive** of the latent f at test points x*_1..x*_n in the given order: the
Vecchia approximation of (y, f*) with the test points after the training points, each
x*_j conditioned on its m nearest among the training points and x*_1..x*_{j-1}:

    f_j = b_j^T [y_N(j); f_P(j)] + sqrt(d_j) e_j,   e ~ N(0, I),

b_j and d_j the regression coefficients and conditional variance of f_j on that set (the
covariance of training responses includes s2, of latent test values does not). Collecting
f = c + B f + D^{1/2} e (B strictly lower triangular),

    f = (I - B)^{-1} c + (I - B)^{-1} D^{1/2} e:

mean (I - B)^{-1} c and covariance F F^T with the lower triangular F = (I - B)^{-1} D^{1/2}.
Draws are mean + F e. At m >= N + n - 1 it is the exact joint posterior.

Costs: O(m^3) per test point (one bordered Cholesky factor each, in batches: :func:`predict`) (O(m (m + n)) memory for the joint one, which keeps the
n x n factor F: meant for small test sets, ``MAX_JOINT`` points).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._validation import (
    as_generator,
    check_matrix,
    check_noise_variances,
    check_positive_int,
    check_positive_scalar,
    check_vector,
)
from .. import linalg
from ..errors import NotPositiveDefiniteError
from ..kernels import Kernel
from ..nearest import ScaledTree
from ..rowwise import one_blas_thread
from .ordering import scaled_inputs

#: Largest test set :func:`predict_joint` accepts (its factor F is n x n).
MAX_JOINT = 5000
#: Test points per batch (one thread's work at a time). Predicting the relief grid (82,800
#: points, m = 45, one thread) took 3.2-3.4 CPU s in batches of 32 or 64, 3.6 in 128, 3.8 in
#: 256 and 4.3-4.5 in 512 (benchmarks/results/demo-speed.md): a batch's arrays stay in cache.
POINTS_PER_TASK = 64


def _check(kernel: Kernel, noise_variance, X_train, y_train, X_test, m,
           sample_noise_variance=None):
    noise_variance = check_positive_scalar(noise_variance, "noise_variance")
    X_train = check_matrix(X_train, "X_train")
    y_train = check_vector(y_train, "y_train", n_samples=X_train.shape[0])
    X_test = check_matrix(X_test, "X_test", n_dims=X_train.shape[1])
    kernel.check_n_dims(X_train.shape[1])
    extra = np.zeros(X_train.shape[0]) if sample_noise_variance is None else \
        check_noise_variances(sample_noise_variance, X_train.shape[0])
    return noise_variance, X_train, y_train, X_test, check_positive_int(m, "m"), extra


def _factor(K, what):
    try:
        return linalg.cholesky(K, name=what, allow_jitter=False)[0]
    except NotPositiveDefiniteError:
        raise NotPositiveDefiniteError(
            f"the covariance of {what} is not positive definite (duplicated test points?)"
        ) from None


def training_neighbors(kernel: Kernel, X_train, X_test, m: int, *,
                       n_jobs: int = 1) -> np.ndarray:
    """Rows of the m nearest training points to each test point in the scaling x / l,
    shape (n_test, m), nearest first (``n_jobs`` threads in the tree's query)."""
    tree = ScaledTree(X_train, kernel.length_scale)      # shared with scalegp.local
    return tree.nearest(X_test, m, workers=n_jobs)


def _bordered(K, y_N, noise_variance, v_N):
    """The (B, m + 2, m + 2) stack [[K_N + s2 I + diag(v_N), k, y_N], [k^T, k(x, x) + s2, 0],
    [y_N^T, 0, c]] of the module docstring, from K = k([X_N; x]) (B, m + 1, m + 1)."""
    B, size = K.shape[0], K.shape[1]
    A = np.zeros((B, size + 1, size + 1))
    A[:, :size, :size] = K
    diagonal = np.arange(size)
    A[:, diagonal, diagonal] += noise_variance
    A[:, diagonal[:-1], diagonal[:-1]] += v_N
    A[:, :size - 1, -1] = y_N
    A[:, -1, :size - 1] = y_N
    # c >= 2 (|z|^2 + (v^T z)^2 / l^2) + 1: |z|^2 <= |y_N|^2 / s2 (K_N >= s2 I, v_N >= 0),
    # |v|^2 <= k(x, x) and l^2 >= s2, so the last pivot is >= c / 2 + 1 (rounding: eps c)
    bound = np.einsum("ij,ij->i", y_N, y_N) / noise_variance * (1.0 + K[:, -1, -1] /
                                                                noise_variance)
    A[:, -1, -1] = 2.0 * bound + 1.0
    return A


def predict(kernel: Kernel, noise_variance, X_train, y_train, X_test, m: int, *,
            return_var: bool = False, include_noise: bool = False, n_jobs: int = 1,
            sample_noise_variance=None):
    """The independent Vecchia predictive mean (and variance: latent, or of a new response
    with ``include_noise``) at X_test (module docstring; ``sample_noise_variance``: the
    training rows' known noise variances, None: none).

    **One Cholesky factor per test point, batched.** The lower factor of the bordered matrix

        [[K_N, k, y_N], [k^T, k(x, x) + s2, 0], [y_N^T, 0, c]]  (K_N with s2 on its diagonal)

    has the rows [v^T, l, 0] and [z^T, -v^T z / l, (any)] below L, with v = L^{-1} k,
    z = L^{-1} y_N and l^2 = k(x, x) + s2 - |v|^2: so mean = v^T z (the dot product of the
    two rows' leading parts), the variance with noise is l^2 and the latent one l^2 - s2.
    c only has to keep the matrix positive definite (:func:`_bordered`); no entry used
    depends on it. Test points go in batches of ``POINTS_PER_TASK`` through
    :meth:`Kernel.stacked` and :func:`scalegp.linalg.batched_cholesky` (no Python step per
    point). Each batch asks the k-d tree for its own neighbours (the same sets as one query
    for all): memory O(``POINTS_PER_TASK`` m) for any number of test points."""
    noise_variance, X_train, y_train, X_test, m, extra = _check(
        kernel, noise_variance, X_train, y_train, X_test, m, sample_noise_variance)
    n_jobs = check_positive_int(n_jobs, "n_jobs")
    tree = ScaledTree(X_train, kernel.length_scale)     # each batch asks for its own
    size = min(m, len(X_train))                          # neighbours: memory O(batch m)
    mean, var = np.empty(len(X_test)), np.empty(len(X_test))

    def run(start):
        rows = slice(start, min(start + POINTS_PER_TASK, len(X_test)))
        near = tree.nearest(X_test[rows], size)
        Z = np.concatenate([X_train[near], X_test[rows, None, :]], axis=1)
        A = _bordered(kernel.stacked(Z), y_train[near], noise_variance, extra[near])
        try:
            L = linalg.batched_cholesky(A, name="test points' neighbours",
                                        allow_jitter=False)[0]
        except NotPositiveDefiniteError:
            raise NotPositiveDefiniteError(
                "the covariance of a test point's training neighbours is not positive "
                "definite (duplicated training inputs with a tiny noise variance?)") from None
        mean[rows] = np.einsum("ij,ij->i", L[:, size, :size], L[:, size + 1, :size])
        var[rows] = np.square(L[:, size, size])

    starts = range(0, len(X_test), POINTS_PER_TASK)
    with one_blas_thread():     # small products (likelihood.py)
        if n_jobs == 1 or len(starts) <= 1:
            for start in starts:
                run(start)
        else:
            with ThreadPoolExecutor(max_workers=n_jobs) as pool:
                list(pool.map(run, starts))
    if not return_var:
        return mean
    if include_noise:
        return mean, var
    return mean, np.maximum(var - noise_variance, 0.0)


def predict_joint(kernel: Kernel, noise_variance, X_train, y_train, X_test, m: int, *,
                  sample_noise_variance=None):
    """(mean, F) of the joint Vecchia predictive of the latent f at X_test, in the given
    order: covariance F F^T, F lower triangular (module docstring)."""
    noise_variance, X_train, y_train, X_test, m, extra = _check(
        kernel, noise_variance, X_train, y_train, X_test, m, sample_noise_variance)
    n = len(X_test)
    if n > MAX_JOINT:
        raise ValueError(f"X_test must have at most {MAX_JOINT} rows for the joint predictive "
                         f"(it keeps an n x n factor), got {n}; use predict for marginals")
    m_train = min(m, len(X_train))
    neighbors = training_neighbors(kernel, X_train, X_test, m_train)
    U_train = scaled_inputs(X_train, kernel.length_scale)
    U_test = scaled_inputs(X_test, kernel.length_scale)
    I_minus_B = np.eye(n)
    c, d = np.empty(n), np.empty(n)
    for j in range(n):
        train = neighbors[j]
        d_train = np.sum((U_train[train] - U_test[j]) ** 2, axis=1)
        d_test = np.sum((U_test[:j] - U_test[j]) ** 2, axis=1)
        # the m nearest among the training neighbours and the earlier test points
        keep = np.argsort(np.concatenate([d_train, d_test]), kind="stable")[:m]
        train, test = train[keep[keep < m_train]], keep[keep >= m_train] - m_train
        Z = np.vstack([X_train[train], X_test[test]])
        K = kernel(Z)
        K[np.arange(train.size), np.arange(train.size)] += noise_variance + extra[train]
        L = _factor(K, f"test point {j}'s conditioning set")
        k = kernel(X_test[j:j + 1], Z)[0]
        b = linalg.cho_solve(L, k)
        c[j] = b[:train.size] @ y_train[train]
        I_minus_B[j, test] = -b[train.size:]
        d[j] = max(kernel.diag(X_test[j:j + 1])[0] - k @ b, 0.0)
    mean = linalg.solve_lower(I_minus_B, c)           # unit lower triangular
    F = linalg.solve_lower(I_minus_B, np.diag(np.sqrt(d)))
    return mean, F


def sample(kernel: Kernel, noise_variance, X_train, y_train, X_test, m: int, n_samples: int,
           rng=None, *, include_noise: bool = False, sample_noise_variance=None) -> np.ndarray:
    """Joint draws at X_test, shape (n_test, n_samples): of the latent f, or of new
    responses (f plus independent N(0, s2) noise) with ``include_noise``."""
    n_samples = check_positive_int(n_samples, "n_samples")
    generator = as_generator(rng)
    mean, F = predict_joint(kernel, noise_variance, X_train, y_train, X_test, m,
                            sample_noise_variance=sample_noise_variance)
    draws = mean[:, None] + F @ generator.standard_normal((mean.size, n_samples))
    if include_noise:
        draws += np.sqrt(noise_variance) * generator.standard_normal(draws.shape)
    return draws


#: Prediction neighbours tried by :func:`choose_prediction_neighbors`, in multiples of m.
PREDICTION_FACTORS = (1, 2, 4, 8)
#: Beyond 8 m, the count keeps doubling up to this many neighbours while a doubling lowers
#: either measure of :func:`choose_prediction_neighbors` by more than
#: ``PREDICTION_RMSE_SLACK``: with m = 15 on kin40k the held-out RMSE fell 0.216, 0.185,
#: 0.149, 0.117 from 15 to 120 neighbours, and the test RMSE was 0.111 with 120 and 0.095
#: with 240 (about 2 ms a test point at 240, 8 ms at 480).
MAX_PREDICTION_NEIGHBORS = 256
#: Training rows held out to choose them (at most; a tenth of the rows below 5,000).
HELD_OUT_ROWS = 500
#: The smallest count within this factor of the best on both measures is chosen.
PREDICTION_RMSE_SLACK = 1.01


def choose_prediction_neighbors(kernel: Kernel, noise_variance, X_train, y_train, m: int,
                                rng, *, n_jobs: int = 1,
                                sample_noise_variance=None) -> tuple[int, dict, dict]:
    """The training neighbours each prediction should condition on, measured: hold out
    ``HELD_OUT_ROWS`` random training rows (a tenth below 5,000 rows), predict them from the
    others with m k neighbours for each k of ``PREDICTION_FACTORS`` (at most the rows left),
    then twice as many as the last while that stays within ``MAX_PREDICTION_NEIGHBORS`` and
    the last doubling lowered either measure below by more than ``PREDICTION_RMSE_SLACK``.
    Two measures for each count, on the held-out rows:

    - the RMSE of the predictive mean against the held-out targets (measured);
    - the latent RMSE sqrt(mean var(x)), var the latent predictive variance: under the model,
      E[(mean(x) - f(x))^2] = var(x), the error against the noise-free function, which more
      neighbours lower towards the exact GP's.

    The count is the smallest within ``PREDICTION_RMSE_SLACK`` of the best on both (where
    none is, the smallest within it on the measured RMSE); returns it, {count: RMSE} and
    {count: latent RMSE}. On smooth data a prediction needs more neighbours than the
    likelihood's conditionals (kin40k, m = 30: test RMSE 0.173 with 30, 0.108 with 120,
    0.093 with 250); on rough data m suffices (the relief map). The latent measure sees what
    the targets' noise hides: on a smooth 5-D field with noise variances up to 1 (2,000
    rows, ``benchmarks/bench_known_noise.py``'s), the held-out RMSE moved by 0.7 % from 30 to
    240 neighbours (0.544 to 0.540: noise), the latent one from 0.074 to 0.059, and the test
    RMSE against the field was 0.069 with 30 and 0.040 with 240. Holding out a few per cent
    of the rows barely thins the neighbourhoods the predictions see. With known noise
    variances (``sample_noise_variance``) the kept rows carry theirs."""
    X_train = check_matrix(X_train, "X_train")
    y_train = check_vector(y_train, "y_train", n_samples=X_train.shape[0])
    if sample_noise_variance is not None:
        sample_noise_variance = check_noise_variances(sample_noise_variance, X_train.shape[0])
    n = X_train.shape[0]
    held = as_generator(rng).permutation(n)[:min(HELD_OUT_ROWS, max(1, n // 10))]
    kept = np.ones(n, dtype=bool)
    kept[held] = False
    rmse, latent = {}, {}

    def measure(count: int) -> bool:
        """Add count's measures; False where count adds nothing (all rows reached)."""
        count = min(count, int(kept.sum()))
        if count in rmse:
            return False
        mean, var = predict(kernel, noise_variance, X_train[kept], y_train[kept],
                            X_train[held], count, return_var=True, n_jobs=n_jobs,
                            sample_noise_variance=None if sample_noise_variance is None
                            else sample_noise_variance[kept])
        rmse[count] = float(np.sqrt(np.mean((mean - y_train[held]) ** 2)))
        latent[count] = float(np.sqrt(np.mean(var)))
        return True

    def gained(before: int, last: int) -> bool:
        return any(values[before] > PREDICTION_RMSE_SLACK * values[last]
                   for values in (rmse, latent))

    for factor in PREDICTION_FACTORS:
        if not measure(factor * m):
            break
    counts = sorted(rmse)
    while (len(counts) > 1 and 2 * counts[-1] <= MAX_PREDICTION_NEIGHBORS
           and gained(counts[-2], counts[-1]) and measure(2 * counts[-1])):
        counts = sorted(rmse)

    def near_best(values) -> set:
        best = min(values.values())
        return {count for count, value in values.items()
                if value <= PREDICTION_RMSE_SLACK * best}

    both = near_best(rmse) & near_best(latent)
    return min(both or near_best(rmse)), rmse, latent
