"""Tests of scalegp.metrics against independent computations."""

import numpy as np
import pytest
import scipy.stats

from scalegp.errors import NotPositiveDefiniteError
from scalegp.metrics import (
    coverage,
    kernel_approximation_error,
    kl_divergence,
    kl_divergence_factorized,
    msll,
    nlpd,
    rmse,
    sample_kernel_approximation_error,
)


# ----------------------------------------------------------------------------- fixtures


def _predictive(seed, n=50):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n)
    mean = y + 0.3 * rng.normal(size=n)
    var = rng.uniform(0.05, 2.0, size=n)
    return y, mean, var


def _random_spd(rng, n):
    A = rng.normal(size=(n, n))
    return A @ A.T + 0.5 * np.eye(n)


def _rbf(A, B, lengthscale=0.7):
    sq = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2.0 * A @ B.T
    return np.exp(-0.5 * np.maximum(sq, 0.0) / lengthscale**2)


def _exact_factor(kernel_fn):
    """features_fn whose P P^T reproduces kernel_fn(A, A) (PSD kernel)."""
    def features(A):
        w, V = np.linalg.eigh(kernel_fn(A, A))
        return V * np.sqrt(np.clip(w, 0.0, None))
    return features


def _indefinite_kernel(A, B):
    return _rbf(A, B, 0.5) - 0.6 * _rbf(A, B, 2.0)


def _signed_exact_factor(A):
    w, V = np.linalg.eigh(_indefinite_kernel(A, A))
    signs = np.where(w >= 0, 1.0, -1.0)
    return V * np.sqrt(np.abs(w)), signs


def _dense_kl(mp, Sp, mq, Sq):
    """Textbook formula with an explicit inverse (tests only)."""
    Sq_inv = np.linalg.inv(Sq)
    d = mq - mp
    return 0.5 * (np.trace(Sq_inv @ Sp) + d @ Sq_inv @ d - len(mp)
                  + np.linalg.slogdet(Sq)[1] - np.linalg.slogdet(Sp)[1])


# ----------------------------------------------------------------------------- rmse


def test_rmse_matches_direct_formula():
    y, mean, _ = _predictive(0)
    result = rmse(y, mean)
    assert isinstance(result, float)
    assert result == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-14)
    assert rmse([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert rmse([0.0, 0.0], [3.0, -4.0]) == pytest.approx(np.sqrt(12.5))


def test_rmse_accepts_column_vectors():
    y, mean, _ = _predictive(1)
    assert rmse(y[:, None], mean[:, None]) == pytest.approx(rmse(y, mean))


# ----------------------------------------------------------------------------- nlpd / msll


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nlpd_matches_scipy_logpdf(seed):
    y, mean, var = _predictive(seed)
    expected = -np.mean(scipy.stats.norm.logpdf(y, loc=mean, scale=np.sqrt(var)))
    result = nlpd(y, mean, var)
    assert isinstance(result, float)
    assert result == pytest.approx(expected, rel=1e-12)


def test_nlpd_standard_normal_at_mean():
    assert nlpd([0.0], [0.0], [1.0]) == pytest.approx(0.5 * np.log(2 * np.pi))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_msll_matches_independent_computation(seed):
    y, mean, var = _predictive(seed)
    y_train = np.random.default_rng(seed + 100).normal(1.0, 2.0, size=80)
    model = -scipy.stats.norm.logpdf(y, mean, np.sqrt(var))
    trivial = -scipy.stats.norm.logpdf(y, y_train.mean(), y_train.std())
    assert msll(y, mean, var, y_train) == pytest.approx(np.mean(model - trivial), rel=1e-12)


def test_msll_of_trivial_model_is_zero():
    rng = np.random.default_rng(3)
    y_train = rng.normal(2.0, 3.0, size=40)
    y = rng.normal(size=25)
    mean = np.full(25, y_train.mean())
    var = np.full(25, y_train.var())
    result = msll(y, mean, var, y_train)
    assert isinstance(result, float)
    assert abs(result) < 1e-12


def test_msll_good_model_is_negative():
    rng = np.random.default_rng(4)
    y_train = rng.normal(size=100)
    y = rng.normal(size=30)
    assert msll(y, y + 0.01 * rng.normal(size=30), np.full(30, 1e-3), y_train) < 0


# ----------------------------------------------------------------------------- coverage


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95])
def test_coverage_of_exact_samples_is_close_to_level(level):
    rng = np.random.default_rng(12345)
    n = 20_000
    mean = rng.normal(size=n)
    var = rng.uniform(0.1, 3.0, size=n)
    y = mean + np.sqrt(var) * rng.standard_normal(n)
    result = coverage(y, mean, var, level=level)
    assert isinstance(result, float)
    assert abs(result - level) <= 4.0 * np.sqrt(level * (1.0 - level) / n)


def test_coverage_known_points():
    z = scipy.stats.norm.ppf(0.975)
    y = np.array([0.0, 0.99 * z, 1.01 * z, -0.99 * 2 * z, -1.01 * 2 * z])
    mean = np.zeros(5)
    var = np.array([1.0, 1.0, 1.0, 4.0, 4.0])
    assert coverage(y, mean, var) == pytest.approx(3 / 5)


# ----------------------------------------------------------------------------- kernel errors


def test_kernel_approximation_error_frobenius_matches_direct():
    rng = np.random.default_rng(5)
    K = _random_spd(rng, 8)
    K_approx = K + 0.1 * rng.normal(size=(8, 8))
    expected = np.sqrt(np.sum((K - K_approx) ** 2)) / np.sqrt(np.sum(K**2))
    result = kernel_approximation_error(K, K_approx)
    assert isinstance(result, float)
    assert result == pytest.approx(expected, rel=1e-12)
    assert kernel_approximation_error(K, K) == 0.0


def test_kernel_approximation_error_rank_one_closed_form():
    d = np.array([4.0, 3.0, 2.0, 1.0, 0.5])
    K = np.diag(d)
    u = np.array([1.0, -2.0, 0.5, 1.0, 3.0])
    u /= np.linalg.norm(u)
    eps = 0.3
    K_approx = K - eps * np.outer(u, u)
    # ||eps u u^T||_2 = ||eps u u^T||_F = eps for a unit u; ||K||_2 = max(d), ||K||_F = ||d||.
    assert kernel_approximation_error(K, K_approx, norm="spectral") == pytest.approx(
        eps / d.max(), rel=1e-12)
    assert kernel_approximation_error(K, K_approx, norm="fro") == pytest.approx(
        eps / np.linalg.norm(d), rel=1e-12)


def test_sampled_error_with_exact_features_is_zero():
    X = np.random.default_rng(6).uniform(-2, 2, size=(300, 2))
    for norm in ("fro", "spectral"):
        err = sample_kernel_approximation_error(_rbf, _exact_factor(_rbf), X, n_sample=60,
                                                rng=0, norm=norm)
        assert isinstance(err, float)
        assert err < 1e-10


def test_sampled_error_with_signed_exact_features_is_zero():
    X = np.random.default_rng(7).uniform(-2, 2, size=(200, 2))
    err = sample_kernel_approximation_error(_indefinite_kernel, _signed_exact_factor, X,
                                            n_sample=50, rng=np.random.default_rng(1))
    assert err < 1e-10
    # Sanity: the kernel is indefinite, so dropping the signs gives a real error.
    unsigned = sample_kernel_approximation_error(
        _indefinite_kernel, lambda A: _signed_exact_factor(A)[0], X, n_sample=50,
        rng=np.random.default_rng(1))
    assert unsigned > 1e-3


def _low_rank_features(A):
    # Fixed random Fourier features of the RBF kernel (lengthscale 0.7): inexact.
    r = np.random.default_rng(99)
    W = r.normal(size=(A.shape[1], 20)) / 0.7
    b = r.uniform(0, 2 * np.pi, size=20)
    return np.sqrt(2.0 / 20) * np.cos(A @ W + b)


def test_sampled_error_matches_full_error_when_sample_covers_data():
    X = np.random.default_rng(8).uniform(-2, 2, size=(40, 2))
    full = kernel_approximation_error(_rbf(X, X), _low_rank_features(X) @ _low_rank_features(X).T)
    sampled = sample_kernel_approximation_error(_rbf, _low_rank_features, X, n_sample=1000, rng=3)
    assert sampled == pytest.approx(full, rel=1e-12)
    assert sampled > 1e-3


def test_sampled_error_draws_distinct_rows_reproducibly():
    X = np.random.default_rng(9).uniform(-2, 2, size=(100, 2))
    seen = []

    def recording_kernel(A, B):
        seen.append(A.copy())
        return _rbf(A, B)

    e1 = sample_kernel_approximation_error(recording_kernel, _low_rank_features, X, n_sample=30,
                                           rng=np.random.default_rng(42))
    e2 = sample_kernel_approximation_error(recording_kernel, _low_rank_features, X, n_sample=30,
                                           rng=np.random.default_rng(42))
    assert e1 == e2
    assert seen[0].shape == (30, 2)
    assert len(np.unique(seen[0], axis=0)) == 30
    # every sampled row is a row of X
    assert all(np.any(np.all(X == row, axis=1)) for row in seen[0])
    e3 = sample_kernel_approximation_error(recording_kernel, _low_rank_features, X, n_sample=30,
                                           rng=np.random.default_rng(43))
    assert not np.array_equal(seen[0], seen[2]) and e3 != e1


# ----------------------------------------------------------------------------- KL


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kl_divergence_matches_dense_formula(seed):
    rng = np.random.default_rng(seed)
    n = 6
    mp, mq = rng.normal(size=n), rng.normal(size=n)
    Sp, Sq = _random_spd(rng, n), _random_spd(rng, n)
    result = kl_divergence(mp, Sp, mq, Sq)
    assert isinstance(result, float)
    assert result == pytest.approx(_dense_kl(mp, Sp, mq, Sq), rel=1e-10)


def test_kl_divergence_matches_monte_carlo_with_scipy():
    rng = np.random.default_rng(10)
    n = 3
    mp, mq = rng.normal(size=n), rng.normal(size=n)
    Sp, Sq = _random_spd(rng, n), _random_spd(rng, n)
    p = scipy.stats.multivariate_normal(mp, Sp)
    q = scipy.stats.multivariate_normal(mq, Sq)
    samples = p.rvs(size=100_000, random_state=rng)
    log_ratio = p.logpdf(samples) - q.logpdf(samples)
    tol = 5.0 * log_ratio.std() / np.sqrt(len(log_ratio))
    assert abs(kl_divergence(mp, Sp, mq, Sq) - log_ratio.mean()) < tol


def test_kl_divergence_of_identical_distributions_is_zero():
    rng = np.random.default_rng(11)
    m, S = rng.normal(size=7), _random_spd(rng, 7)
    assert abs(kl_divergence(m, S, m, S)) < 1e-10
    v = rng.uniform(0.1, 2.0, size=7)
    assert kl_divergence_factorized(m, v, m, v) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_kl_divergences_are_nonnegative(seed):
    rng = np.random.default_rng(seed)
    n = 5
    mp, mq = rng.normal(size=n), rng.normal(size=n)
    assert kl_divergence(mp, _random_spd(rng, n), mq, _random_spd(rng, n)) >= 0.0
    assert kl_divergence_factorized(mp, rng.uniform(0.01, 3, n), mq,
                                    rng.uniform(0.01, 3, n)) >= 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_factorized_kl_equals_full_kl_with_diagonal_covariances(seed):
    rng = np.random.default_rng(seed)
    n = 9
    mp, mq = rng.normal(size=n), rng.normal(size=n)
    vp, vq = rng.uniform(0.05, 3, n), rng.uniform(0.05, 3, n)
    result = kl_divergence_factorized(mp, vp, mq, vq)
    assert isinstance(result, float)
    assert result == pytest.approx(kl_divergence(mp, np.diag(vp), mq, np.diag(vq)), rel=1e-12)
    # univariate closed form via scipy entropy + cross-entropy, per point
    cross = 0.5 * np.log(2 * np.pi * vq) + (vp + (mp - mq) ** 2) / (2 * vq)
    entropy = scipy.stats.norm(mp, np.sqrt(vp)).entropy()
    assert result == pytest.approx(np.sum(cross - entropy), rel=1e-12)


def test_kl_is_not_symmetric():
    mp, vp, mq, vq = [0.0], [1.0], [0.0], [4.0]
    assert kl_divergence_factorized(mp, vp, mq, vq) != pytest.approx(
        kl_divergence_factorized(mq, vq, mp, vp))


# ----------------------------------------------------------------------------- errors


def test_mismatched_lengths_are_rejected():
    with pytest.raises(ValueError, match=r"y_pred must have 3 entries .*y_true.*got 2"):
        rmse([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"var must have 3 entries .*got 4"):
        nlpd([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"mean must have 2 entries"):
        coverage([1.0, 2.0], [1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"var_q must have 2 entries .*mean_p.*got 3"):
        kl_divergence_factorized([0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"mean_q must have 2 entries"):
        kl_divergence([0.0, 0.0], np.eye(2), [0.0], np.eye(1))
    with pytest.raises(ValueError, match=r"cov_q must have shape \(2, 2\).*got \(3, 3\)"):
        kl_divergence([0.0, 0.0], np.eye(2), [0.0, 0.0], np.eye(3))


def test_non_finite_values_are_rejected():
    with pytest.raises(ValueError, match=r"y_true must be finite .*row 1"):
        rmse([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"mean must be finite"):
        nlpd([1.0], [np.inf], [1.0])
    with pytest.raises(ValueError, match=r"K_approx must be finite"):
        kernel_approximation_error(np.eye(2), [[1.0, np.nan], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"cov_p must be finite"):
        kl_divergence([0.0, 0.0], [[1.0, np.nan], [np.nan, 1.0]], [0.0, 0.0], np.eye(2))


def test_non_vector_inputs_are_rejected():
    with pytest.raises(ValueError, match=r"mean must be a 1-D array .*got shape \(2, 2\)"):
        nlpd([1.0, 2.0], np.ones((2, 2)), [1.0, 1.0])


def test_non_positive_variance_is_rejected():
    with pytest.raises(ValueError, match=r"var must be strictly positive .*noise.*var\[1\] = 0\.0"):
        nlpd([1.0, 2.0], [1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"var must be strictly positive .*var\[0\] = -1\.0"):
        msll([1.0], [1.0], [-1.0], [0.0, 1.0])
    with pytest.raises(ValueError, match=r"var must be strictly positive"):
        coverage([1.0], [1.0], [0.0])
    with pytest.raises(ValueError, match=r"var_p must be strictly positive"):
        kl_divergence_factorized([0.0], [0.0], [0.0], [1.0])
    with pytest.raises(ValueError, match=r"var_q must be strictly positive"):
        kl_divergence_factorized([0.0], [1.0], [0.0], [-2.0])


def test_constant_training_targets_are_rejected_by_msll():
    with pytest.raises(ValueError, match=r"y_train must have a non-zero variance"):
        msll([1.0], [1.0], [1.0], [3.0, 3.0, 3.0])


def test_bad_level_is_rejected():
    for level in (0.0, 1.0, 1.5, -0.1, "0.9", True):
        with pytest.raises(ValueError, match=r"level must be a number strictly between 0 and 1"):
            coverage([1.0], [1.0], [1.0], level=level)


def test_bad_norm_name_is_rejected():
    with pytest.raises(ValueError, match=r"norm must be one of \('fro', 'spectral'\), got 'l2'"):
        kernel_approximation_error(np.eye(2), np.eye(2), norm="l2")
    with pytest.raises(ValueError, match=r"norm must be one of .*got 2"):
        sample_kernel_approximation_error(_rbf, _exact_factor(_rbf), np.ones((3, 1)), norm=2)


def test_bad_kernel_matrices_are_rejected():
    with pytest.raises(ValueError, match=r"K_exact must be a square matrix, got shape \(2, 3\)"):
        kernel_approximation_error(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"K_approx must have the shape of K_exact \(2, 2\)"):
        kernel_approximation_error(np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match=r"K_exact must have a non-zero fro norm"):
        kernel_approximation_error(np.zeros((2, 2)), np.eye(2))


def test_bad_sampling_arguments_are_rejected():
    X = np.random.default_rng(0).normal(size=(10, 2))
    features = _exact_factor(_rbf)
    with pytest.raises(ValueError, match=r"n_sample must be an integer >= 1, got 0"):
        sample_kernel_approximation_error(_rbf, features, X, n_sample=0)
    with pytest.raises(TypeError, match=r"^rng must be None"):
        sample_kernel_approximation_error(_rbf, features, X, rng="seed")
    with pytest.raises(TypeError, match=r"features_fn must be a callable"):
        sample_kernel_approximation_error(_rbf, None, X)
    with pytest.raises(ValueError, match=r"X must be a 2-D array"):
        sample_kernel_approximation_error(_rbf, features, np.ones(5))
    with pytest.raises(ValueError, match=r"features_fn\(X_sample\) must return 10 rows"):
        sample_kernel_approximation_error(_rbf, lambda A: np.ones((3, 2)), X)
    bad_signs = np.r_[1.0, 0.5, np.ones(8)]
    with pytest.raises(ValueError, match=r"signs must contain only \+1 and -1, got signs\[1\] = 0\.5$"):
        sample_kernel_approximation_error(_rbf, lambda A: (features(A), bad_signs), X)
    with pytest.raises(ValueError, match=r"signs must have 10 entries .*got 2"):
        sample_kernel_approximation_error(_rbf, lambda A: (features(A), [1.0, -1.0]), X)
    with pytest.raises(ValueError,
                       match=r"kernel_fn\(X_sample, X_sample\) must return a matrix of shape \(4, 4\)"):
        sample_kernel_approximation_error(lambda A, B: np.ones((4, 3)), features, X, n_sample=4)


def test_non_positive_definite_covariance_is_rejected():
    not_pd = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    with pytest.raises(NotPositiveDefiniteError,
                       match=r"cov_q must be symmetric positive definite"):
        kl_divergence([0.0, 0.0], np.eye(2), [0.0, 0.0], not_pd)
    with pytest.raises(ValueError, match=r"cov_p must be symmetric positive definite"):
        kl_divergence([0.0, 0.0], not_pd, [0.0, 0.0], np.eye(2))
    with pytest.raises(ValueError, match=r"cov_p must be symmetric, got max"):
        kl_divergence([0.0, 0.0], [[1.0, 0.5], [0.0, 1.0]], [0.0, 0.0], np.eye(2))
