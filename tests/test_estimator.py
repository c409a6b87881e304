"""LowRankGPRegressor and ExactGPRegressor (and VecchiaGPRegressor's scikit-learn checks): scikit-learn conformance, agreement with the
exact GP and with scikit-learn's GaussianProcessRegressor, target normalization, predictive
consistency, randomness bookkeeping and input validation."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import scalegp as sg
from scalegp import kernels

from .conftest import ONE_COMPONENT_CHECKS, keeping_n_components, one_component_failures
from scalegp.estimators.configuration import make_approximation

# ----------------------------------------------------------------------------- helpers


def sine_data(seed=0, n=40, noise=0.1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    y = np.sin(2 * X[:, 0]) + noise * rng.standard_normal(n)
    return X, y


def both_estimators(**params):
    return [sg.LowRankGPRegressor(random_state=0, **params, approximation=make_approximation("rff", n_components=40)),
            sg.ExactGPRegressor(random_state=0, **params)]


ESTIMATOR_IDS = ["low_rank", "exact"]

# ----------------------------------------------------------------------------- scikit-learn


@parametrize_with_checks([sg.LowRankGPRegressor(approximation=make_approximation("rff", n_components=20), normalize_X=False, normalize_y=False), sg.ExactGPRegressor(normalize_X=False, normalize_y=False),
                          sg.VecchiaGPRegressor()],
                         expected_failed_checks=one_component_failures, xfail_strict=True)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


@parametrize_with_checks([sg.GPRegressor(), sg.LowRankGPRegressor(), sg.ExactGPRegressor(),
                          sg.GibbsGPRegressor(), sg.FeatureMapTransformer()],
                         xfail_strict=True)
def test_scikit_learn_checks_with_default_parameters(estimator, check):
    """Issues 26 and 27: every exported estimator and transformer passes with its defaults
    (VecchiaGPRegressor() in test_scikit_learn_checks above). GibbsGPRegressor's 52 checks
    take about 50 s on one core: its theta1 step is the collapsed one by default, over the
    non-zero eigen-directions only."""
    check(estimator)


@pytest.mark.parametrize("check_name", ONE_COMPONENT_CHECKS)
def test_checks_that_set_one_component(check_name):
    estimator = keeping_n_components(sg.LowRankGPRegressor(approximation=make_approximation("rff", n_components=20), normalize_X=False, normalize_y=False))
    getattr(estimator_checks, check_name)("LowRankGPRegressor", estimator)


def test_exact_matches_scikit_learn_gaussian_process():
    """Same kernel, noise and normalization: scikit-learn's GPR is an independent reference."""
    X, y = sine_data(1)
    y = 3.0 * y + 2.0
    Xs = np.linspace(-3.5, 3.5, 15)[:, None]
    ours = sg.ExactGPRegressor(kernel=sg.Gaussian(length_scale=0.7, variance=1.5),
                               noise_variance=0.02, optimize=False, normalize_y=True, normalize_X=False).fit(X, y)
    theirs = GaussianProcessRegressor(skk.ConstantKernel(1.5) * skk.RBF(0.7), alpha=0.02,
                                      optimizer=None, normalize_y=True).fit(X, y)
    mean, std = ours.predict(Xs, return_std=True)
    mean_ref, std_ref = theirs.predict(Xs, return_std=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(std, std_ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(ours.log_marginal_likelihood_value_,
                               theirs.log_marginal_likelihood_value_, rtol=1e-10)


# ----------------------------------------------------------------------------- accuracy


def test_low_rank_approaches_exact_with_many_features():
    """Random Fourier features converge to the exact GP at fixed hyperparameters.

    Measured (Gaussian kernel l = 0.8, noise 0.05, n = 40, 50 test points inside the data,
    30 seeds): the RMS error of the mean is 0.029 (m = 64) -> 0.0077 (m = 1024) on average,
    the Monte-Carlo rate m^(-1/2) (ratio 0.25); the largest RMS errors at m = 1024 were 0.012
    (mean) and 0.0087 (std). The test asks for a ratio below 0.5 over 10 seeds and, at
    m = 1024, every seed within 0.03 (mean) and 0.02 (std) on targets of amplitude 1.
    """
    X, y = sine_data(0)
    Xs = np.linspace(-3, 3, 50)[:, None]
    kernel = sg.Gaussian(length_scale=0.8, variance=1.0)
    settings = dict(kernel=kernel, noise_variance=0.05, optimize=False, normalize_X=False,
                    normalize_y=False)
    mean_ref, std_ref = sg.ExactGPRegressor(**settings).fit(X, y).predict(Xs, return_std=True)

    def rms_errors(n_components, seed):
        model = sg.LowRankGPRegressor(random_state=seed, **settings, approximation=make_approximation("rff", n_components=n_components))
        mean, std = model.fit(X, y).predict(Xs, return_std=True)
        return np.sqrt(np.mean((mean - mean_ref) ** 2)), np.sqrt(np.mean((std - std_ref) ** 2))

    few = np.array([rms_errors(64, seed) for seed in range(10)])
    many = np.array([rms_errors(1024, seed) for seed in range(10)])
    assert many[:, 0].mean() < 0.5 * few[:, 0].mean()
    assert np.all(many[:, 0] < 0.03), many[:, 0]
    assert np.all(many[:, 1] < 0.02), many[:, 1]


@pytest.mark.parametrize("estimator", both_estimators(), ids=ESTIMATOR_IDS)
def test_optimization_improves_likelihood_and_is_recorded(estimator):
    X, y = sine_data(2)
    fixed = clone(estimator).set_params(optimize=False).fit(X, y)
    assert fixed.optimization_result_ is None
    assert fixed.kernel_ == kernels.get(estimator.kernel)
    assert fixed.noise_variance_ == estimator.noise_variance
    estimator = clone(estimator).fit(X, y)
    result = estimator.optimization_result_
    assert result is not None
    assert estimator.log_marginal_likelihood_value_ > fixed.log_marginal_likelihood_value_
    np.testing.assert_allclose(estimator.log_marginal_likelihood_value_,
                               result.log_marginal_likelihood, rtol=1e-10)
    np.testing.assert_allclose(np.log(estimator.noise_variance_), result.theta[-1], rtol=1e-12)
    theta = np.append(estimator.kernel_.theta, np.log(estimator.noise_variance_))
    value, gradient = estimator.log_marginal_likelihood(theta, eval_gradient=True)
    np.testing.assert_allclose(value, estimator.log_marginal_likelihood_value_, rtol=1e-10)
    assert gradient.shape == theta.shape
    assert estimator.log_marginal_likelihood() == estimator.log_marginal_likelihood_value_


# ----------------------------------------------------------------------------- normalization


@pytest.mark.parametrize("estimator", both_estimators(optimize=False, normalize_y=True),
                         ids=ESTIMATOR_IDS)
def test_normalize_y_round_trip(estimator):
    """Targets a y + b give predictions a mean + b and stds a std; the likelihood value is
    that of the normalized targets, so it does not change."""
    X, y = sine_data(3)
    Xs = np.linspace(-3, 3, 9)[:, None]
    small = clone(estimator).fit(X, y)
    large = clone(estimator).fit(X, 1000.0 * y + 500.0)
    np.testing.assert_allclose(large.y_train_mean_, 1000.0 * np.mean(y) + 500.0, rtol=1e-12)
    np.testing.assert_allclose(large.y_train_std_, 1000.0 * np.std(y), rtol=1e-12)
    mean, std = small.predict(Xs, return_std=True)
    mean_large, std_large = large.predict(Xs, return_std=True)
    np.testing.assert_allclose(mean_large, 1000.0 * mean + 500.0, rtol=1e-9)
    np.testing.assert_allclose(std_large, 1000.0 * std, rtol=1e-9)
    np.testing.assert_allclose(large.log_marginal_likelihood_value_,
                               small.log_marginal_likelihood_value_, rtol=1e-9)
    # Without normalize_y the constants are the identity and the raw targets are fitted.
    plain = clone(estimator).set_params(normalize_y=False).fit(X, y)
    assert (plain.y_train_mean_, plain.y_train_std_) == (0.0, 1.0)


def test_normalize_y_with_constant_targets_only_centres():
    X, _ = sine_data(4, n=10)
    model = sg.ExactGPRegressor(optimize=False, normalize_y=True, normalize_X=False).fit(X, np.full(10, 7.0))
    assert model.y_train_std_ == 1.0
    np.testing.assert_allclose(model.predict(X), 7.0, rtol=1e-12)


# ----------------------------------------------------------------------------- prediction


@pytest.mark.parametrize("estimator", both_estimators(normalize_y=True), ids=ESTIMATOR_IDS)
def test_predict_std_cov_and_noise_are_consistent(estimator):
    X, y = sine_data(5)
    y = 4.0 * y
    Xs = np.linspace(-3.5, 3.5, 12)[:, None]
    estimator = clone(estimator).fit(X, y)
    mean = estimator.predict(Xs)
    mean_s, std = estimator.predict(Xs, return_std=True)
    mean_c, cov = estimator.predict(Xs, return_cov=True)
    np.testing.assert_allclose(mean_s, mean, rtol=1e-12)
    np.testing.assert_allclose(mean_c, mean, rtol=1e-12)
    np.testing.assert_allclose(std**2, np.diag(cov), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(cov, cov.T, rtol=1e-12, atol=1e-14)
    # include_noise adds the learned noise variance, in the original target units.
    noise = estimator.noise_variance_ * estimator.y_train_std_**2
    _, std_noisy = estimator.predict(Xs, return_std=True, include_noise=True)
    np.testing.assert_allclose(std_noisy**2 - std**2, noise, rtol=1e-8)
    _, cov_noisy = estimator.predict(Xs, return_cov=True, include_noise=True)
    np.testing.assert_allclose(cov_noisy - cov, noise * np.eye(len(Xs)), rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match="return_std and return_cov cannot both be True"):
        estimator.predict(Xs, return_std=True, return_cov=True)


@pytest.mark.parametrize("estimator", both_estimators(), ids=ESTIMATOR_IDS)
def test_sample_y_follows_the_predictive_distribution(estimator):
    X, y = sine_data(6)
    Xs = np.linspace(-3, 3, 6)[:, None]
    estimator = clone(estimator).fit(X, y)
    mean, std = estimator.predict(Xs, return_std=True)
    samples = estimator.sample_y(Xs, n_samples=4000, random_state=1)
    assert samples.shape == (6, 4000)
    np.testing.assert_array_equal(samples, estimator.sample_y(Xs, 4000, random_state=1))
    # Sample mean: standard error std / sqrt(4000); 5 standard errors.
    assert np.all(np.abs(samples.mean(axis=1) - mean) < 5 * std / np.sqrt(4000) + 1e-12)
    # Sample std: relative standard error about 1 / sqrt(2 * 4000) = 1.1%; allow 6%.
    np.testing.assert_allclose(samples.std(axis=1), std, rtol=0.06)
    assert estimator.sample_y(Xs).shape == (6, 1)


# ----------------------------------------------------------------------------- randomness


def test_random_state_reproducible_and_streams_independent():
    X, y = sine_data(7)
    Xs = np.linspace(-3, 3, 5)[:, None]

    def fit(**params):
        return sg.LowRankGPRegressor(random_state=3, **params, approximation=make_approximation("rff", n_components=30)).fit(X, y)

    np.testing.assert_array_equal(fit().predict(Xs), fit().predict(Xs))
    # Restarts draw from their own stream: the map is the same with and without them.
    with_restarts = fit(n_restarts=2)
    assert with_restarts.optimization_result_.n_starts == 3
    np.testing.assert_array_equal(with_restarts.feature_map_.omega, fit().feature_map_.omega)
    other = sg.LowRankGPRegressor(random_state=4, approximation=make_approximation("rff", n_components=30), normalize_X=False, normalize_y=False).fit(X, y)
    assert not np.array_equal(other.feature_map_.omega, fit().feature_map_.omega)


def test_float32_features_give_close_predictions():
    X, y = sine_data(8)
    Xs = np.linspace(-3, 3, 7)[:, None]
    params = dict(approximation=sg.Features("rff", n_components=40), random_state=0,
                  optimize=False, normalize_X=False, normalize_y=False)
    single = sg.LowRankGPRegressor(dtype="float32", **params).fit(X, y)
    double = sg.LowRankGPRegressor(**params).fit(X, y)
    mean32, std32 = single.predict(Xs, return_std=True)
    mean64, std64 = double.predict(Xs, return_std=True)
    assert mean32.dtype == np.float64
    np.testing.assert_allclose(mean32, mean64, atol=1e-3)
    np.testing.assert_allclose(std32, std64, atol=1e-3)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("estimator", both_estimators(), ids=ESTIMATOR_IDS)
def test_predict_before_fit_raises_not_fitted(estimator):
    with pytest.raises(NotFittedError):
        estimator.predict(np.zeros((2, 1)))


@pytest.mark.parametrize("estimator", both_estimators(optimize=False), ids=ESTIMATOR_IDS)
def test_bad_inputs_are_named(estimator):
    X, y = sine_data(9, n=12)
    X2 = np.hstack([X, X])
    bad = X2.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"X must be finite .*row 3, column 1"):
        clone(estimator).fit(bad, y)
    model = clone(estimator).fit(X2, y)
    with pytest.raises(ValueError, match=r"X must be finite .*row 3, column 1"):
        model.predict(bad)
    with pytest.raises(ValueError, match=r"X has 3 features, but \w+ is expecting 2 features"):
        model.predict(np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[12, 13\]"):
        clone(estimator).fit(X2, np.append(y, 1.0))


@pytest.mark.parametrize("estimator", both_estimators(), ids=ESTIMATOR_IDS)
@pytest.mark.parametrize("params, error, match", [
    ({"noise_variance": 0.0}, ValueError,
     r"'noise_variance' parameter of \w+ must be a float in the range \(0\.0, inf\)\. Got 0\.0"),
    ({"noise_variance": -1.0}, ValueError,
     r"'noise_variance' parameter of \w+ must be a float in the range \(0\.0, inf\)\. Got -1\.0"),
    ({"noise_variance": "big"}, TypeError,
     r"'noise_variance' parameter of \w+ must be a float in the range \(0\.0, inf\)\. Got 'big'"),
    ({"noise_variance_bounds": (1.0, 1e-3)}, ValueError,
     r"noise_variance_bounds must satisfy lower < upper, got lower=1\.0 >= upper=0\.001"),
    ({"noise_variance_bounds": "free"}, ValueError,
     r"noise_variance_bounds must be a \(lower, upper\) pair or 'fixed', got 'free'"),
    ({"noise_variance": 10.0, "noise_variance_bounds": (1e-3, 1.0)}, ValueError,
     r"noise_variance must lie inside its bounds \[0\.001, 1\.0\], got \[10\.0\]"),
    ({"n_restarts": -1}, ValueError,
     r"'n_restarts' parameter of \w+ must be an int in the range \[0, inf\)\. Got -1"),
    ({"kernel": "squiggle"}, ValueError, r"kernel must be a Kernel or one of .*got 'squiggle'"),
    ({"kernel": sg.Gaussian(length_scale=[1.0, 2.0, 3.0])}, ValueError,
     r"length_scale has 3 entries \(ARD\) but X has 1 column"),
])
def test_bad_parameters_are_named(estimator, params, error, match):
    X, y = sine_data(10, n=10)
    with pytest.raises(error, match=match):
        clone(estimator).set_params(**params).fit(X, y)


@pytest.mark.parametrize("params, error, match", [
    ({"approximation": "magic"}, ValueError, r"approximation must be one of .*rff.*got 'magic'"),
    ({"approximation__options": [1]}, TypeError, r"options must be a dict of keyword arguments of the map's build, or None; got list"),
    ({"approximation__n_components": 0}, ValueError,
     r"approximation n_components must be an integer >= 1 or None, got 0"),
    ({"dtype": "int64"}, ValueError, r"dtype must be float64 or float32, got int64"),
])
def test_bad_low_rank_parameters_are_named(params, error, match):
    X, y = sine_data(11, n=10)
    with pytest.raises(error, match=match):
        sg.LowRankGPRegressor(approximation=make_approximation("rff", n_components=10), normalize_X=False, normalize_y=False).set_params(**params).fit(X, y)


def test_log_marginal_likelihood_theta_checks():
    X, y = sine_data(12, n=10)
    model = sg.ExactGPRegressor(optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(ValueError, match=r"theta must have shape \(3,\) \(length_scale, variance, "
                                         r"noise_variance; log scale\), got shape \(2,\)"):
        model.log_marginal_likelihood([0.0, 0.0])
    with pytest.raises(ValueError, match="eval_gradient=True requires theta"):
        model.log_marginal_likelihood(eval_gradient=True)
