"""linalg.pivoted_cholesky, the landmark selector of the Nystrom issue: exact recovery of a
low-rank PSD matrix with one pivot per unit of rank, the trace of the residual it stops on,
tolerance and rank stopping, greedy distinct pivots, the Nystrom identity
F F^T = K[:, p] K[p, p]^{-1} K[p, :], no pivot at roundoff level, and input validation."""

import numpy as np
import pytest

from scalegp.linalg import pivoted_cholesky


def factorize(K, **options):
    """pivoted_cholesky of a dense K, counting the columns it asks for."""
    requested = []

    def column(i):
        requested.append(i)
        return K[:, i].copy()
    F, pivots = pivoted_cholesky(np.diag(K).copy(), column, **options)
    return F, pivots, requested


def low_rank(n, rank, seed):
    G = np.random.default_rng(seed).standard_normal((n, rank))
    return G @ G.T


def gaussian_kernel(n, seed, length_scale=0.3):
    X = np.random.default_rng(seed).uniform(-1, 1, size=(n, 2))
    return np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=-1) / length_scale**2)


def residual_trace(K, F):
    return float(np.trace(K - F @ F.T))


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("n, rank", [(40, 1), (40, 7), (25, 25)])
@pytest.mark.parametrize("options", [{"tol": 1e-12}, {"max_rank": 40}, {"tol": 0.0}],
                         ids=["tol", "max_rank", "tol=0"])
def test_low_rank_matrix_is_recovered_with_rank_pivots(n, rank, options):
    """rank r -> exactly r pivots and K - F F^T at roundoff (1e-12 of max|K|; the factor's
    rounding error is about r eps max|K|), whichever stopping rule is given: after r steps
    the residual diagonal is roundoff, and a pivot there carries no information."""
    K = low_rank(n, rank, seed=rank)
    F, pivots, requested = factorize(K, **options)
    assert F.shape == (n, rank) and pivots.shape == (rank,)
    assert requested == list(pivots)                  # one column per pivot, no more
    assert np.abs(K - F @ F.T).max() <= 1e-12 * np.abs(K).max()
    assert abs(residual_trace(K, F)) <= 1e-12 * np.trace(K)


def test_duplicated_points_are_never_both_landmarks():
    """A kernel matrix of 8 points each listed twice has rank 8: with max_rank alone the 9th
    pivot would be a duplicate chosen on roundoff, and K[p, p] would be singular."""
    K = gaussian_kernel(8, seed=1, length_scale=0.7)
    K = np.block([[K, K], [K, K]])
    F, pivots, _ = factorize(K, max_rank=16)
    assert len(np.unique(pivots % 8)) == len(pivots) == 8
    assert np.abs(K - F @ F.T).max() <= 1e-12
    assert np.linalg.cond(K[np.ix_(pivots, pivots)]) < 1e8


def test_factor_is_the_nystrom_approximation_of_its_pivots():
    """F F^T = K[:, p] K[p, p]^{-1} K[p, :] (the Nystrom form with landmarks p), F[p] is
    lower triangular (to roundoff: its upper entries are K[p_j, p_k] - F[p_j] . F[p_k]
    computed in floating point, and |F| <= 1 here) with a positive diagonal, and
    K - F F^T vanishes on the pivot rows."""
    K = gaussian_kernel(60, seed=2)
    F, p, _ = factorize(K, max_rank=12)
    nystrom = K[:, p] @ np.linalg.solve(K[np.ix_(p, p)], K[p, :])
    np.testing.assert_allclose(F @ F.T, nystrom, atol=1e-10)
    np.testing.assert_allclose(np.triu(F[p], 1), 0.0, atol=1e-14)
    assert np.all(np.diag(F[p]) > 0)
    np.testing.assert_allclose((K - F @ F.T)[p], 0.0, atol=1e-12)


# ----------------------------------------------------------------------------- pivots


def test_pivots_are_distinct_and_greedy():
    """Pivot k is the row with the largest diagonal of K - F_k F_k^T (F_k: the first k
    columns), computed densely here; ties are absent from this matrix."""
    K = gaussian_kernel(50, seed=3) + np.diag(np.linspace(0.0, 0.5, 50))
    F, pivots, _ = factorize(K, max_rank=20)
    assert len(set(pivots.tolist())) == 20
    for k, pivot in enumerate(pivots):
        remaining = np.diag(K - F[:, :k] @ F[:, :k].T)
        assert pivot == np.argmax(remaining), k
        assert F[pivot, k] == pytest.approx(np.sqrt(remaining[pivot]), rel=1e-12)
    assert pivots[0] == np.argmax(np.diag(K)) == 49      # largest diagonal first


# ----------------------------------------------------------------------------- stopping


@pytest.mark.parametrize("tol", [1e-1, 1e-3, 1e-6])
def test_tolerance_stops_at_the_first_rank_whose_residual_trace_is_within_it(tol):
    """trace(K - F F^T) <= tol trace(K) at the returned rank r, and > at rank r - 1 (the
    factor of rank r - 1 is the first r - 1 columns): it neither stops early nor late."""
    K = gaussian_kernel(80, seed=4)
    F, _, _ = factorize(K, tol=tol)
    rank = F.shape[1]
    assert 1 <= rank < 80
    assert residual_trace(K, F) <= tol * np.trace(K)
    assert residual_trace(K, F[:, :rank - 1]) > tol * np.trace(K)


def test_max_rank_stops_at_max_rank_and_the_smaller_of_both_limits_wins():
    K = gaussian_kernel(80, seed=5)
    F, _, _ = factorize(K, max_rank=5)
    assert F.shape == (80, 5) and residual_trace(K, F) > 1e-3 * np.trace(K)
    by_tol = factorize(K, tol=1e-3)[0].shape[1]
    assert factorize(K, tol=1e-3, max_rank=5)[0].shape[1] == 5 < by_tol
    assert factorize(K, tol=1e-3, max_rank=by_tol + 10)[0].shape[1] == by_tol
    assert factorize(K, max_rank=500)[0].shape[1] <= 80       # capped at n


def test_residual_trace_falls_monotonically_and_zero_matrix_gives_rank_zero():
    K = gaussian_kernel(40, seed=6)
    F, _, _ = factorize(K, max_rank=40)
    traces = [residual_trace(K, F[:, :k]) for k in range(F.shape[1] + 1)]
    assert np.all(np.diff(traces) < 0)
    F, pivots, requested = factorize(np.zeros((5, 5)), max_rank=3)
    assert F.shape == (5, 0) and pivots.size == 0 and requested == []


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("diagonal, options, error, message", [
    (np.ones((2, 2)), {"max_rank": 1}, ValueError,
     r"diagonal must be a non-empty finite non-negative 1-D array, got shape \(2, 2\)"),
    (np.zeros(0), {"max_rank": 1}, ValueError,
     r"diagonal must be a non-empty finite non-negative 1-D array, got shape \(0,\)"),
    ([1.0, np.nan], {"max_rank": 1}, ValueError,
     r"diagonal must be .* finite .* got .*nan"),
    ([1.0, -0.5], {"max_rank": 1}, ValueError, r"diagonal must be .*non-negative.* got .*-0\.5"),
    (np.ones(3), {}, ValueError, r"pivoted_cholesky needs max_rank, tol or both"),
    (np.ones(3), {"max_rank": 0}, ValueError, r"max_rank must be an integer >= 1, got 0"),
    (np.ones(3), {"max_rank": 2.5}, TypeError, r"max_rank must be an integer >= 1, got 2\.5"),
    (np.ones(3), {"max_rank": True}, TypeError, r"max_rank must be an integer >= 1, got True"),
    (np.ones(3), {"tol": -1e-3}, ValueError, r"tol must be a number in \[0, 1\).* got -0\.001"),
    (np.ones(3), {"tol": np.nan}, ValueError, r"tol must be a number in \[0, 1\).* got nan"),
    (np.ones(3), {"tol": 1.0}, ValueError, r"tol must be a number in \[0, 1\).* got 1\.0"),
    (np.ones(3), {"tol": "small"}, ValueError, r"tol must be a number in \[0, 1\).* got 'small'"),
])
def test_bad_inputs_name_parameter_expectation_and_value(diagonal, options, error, message):
    with pytest.raises(error, match=message):
        pivoted_cholesky(diagonal, lambda i: np.eye(3)[:, i], **options)


def test_column_of_the_wrong_shape_is_named():
    with pytest.raises(ValueError, match=r"column\(0\) must return K\[:, 0\] of shape \(3,\), "
                                         r"got shape \(2,\)"):
        pivoted_cholesky(np.ones(3), lambda i: np.ones(2), max_rank=2)
