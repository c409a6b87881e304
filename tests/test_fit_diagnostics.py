"""Fit diagnostics (no silent wrong answers), robust normalize_y, normalize_X, glf-semigroup.

Each class of failure is provoked and must be reported: an optimizer that stopped early or
whose line search failed, non-finite results, a fit worse than the noise-only model; and the
cases that must *not* be reported (a good fit) are checked alongside, so the tests can fail.
"""

import functools
import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

import scalegp as sg
from scalegp.inference import optimize
from scalegp.engine.noise import noise_only_log_marginal_likelihood
from scalegp.features.gauss_legendre import MASS_TOLERANCE
from scalegp.features.glf_semigroup import SemigroupGaussLegendreFeatures
from scalegp.estimators.configuration import make_approximation


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.05 * rng.standard_normal(n)
    return X, y


def _fit_recording(estimator, X, y, **fit_params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y, **fit_params)
    return caught


def _of(caught, category):
    return [str(w.message) for w in caught if issubclass(w.category, category)]


# ----------------------------------------------------------------- convergence
def test_a_good_fit_reports_nothing():
    X, y = _data()
    model = sg.ExactGPRegressor(normalize_y=True, normalize_X=False)
    caught = _fit_recording(model, X, y)
    assert model.optimization_result_.converged
    assert model.fit_warnings_ == []
    assert not _of(caught, sg.ConvergenceWarning) and not _of(caught, sg.FitQualityWarning)
    assert model.log_marginal_likelihood_value_ > model.noise_only_log_marginal_likelihood_


def test_iteration_limit_warns_convergence(monkeypatch):
    X, y = _data()
    monkeypatch.setattr(optimize, "maximize_likelihood",
                        functools.partial(optimize.maximize_likelihood, max_iter=1))
    model = sg.ExactGPRegressor(normalize_y=True, normalize_X=False)
    caught = _fit_recording(model, X, y)
    assert not model.optimization_result_.converged
    messages = _of(caught, sg.ConvergenceWarning)
    assert len(messages) == 1 and "stopped without converging" in messages[0]
    assert "ITERATIONS REACHED LIMIT" in messages[0]
    assert model.fit_warnings_ == messages
    assert issubclass(sg.ConvergenceWarning, SklearnConvergenceWarning)


class _WrongGradient:
    """An objective whose gradient has the wrong sign: L-BFGS-B's line search must fail."""

    def __init__(self, objective):
        self.objective = objective

    def __call__(self, theta):
        value, gradient = self.objective(theta)
        return value, -gradient

    def posterior(self, theta):
        return self.objective.posterior(theta)


class _WrongGradientGP(sg.ExactGPRegressor):
    def _objective(self, state, hyperparameters, X, y, progress=None,
                   sample_noise_variance=None):
        return _WrongGradient(super()._objective(state, hyperparameters, X, y, progress,
                                                 sample_noise_variance))


def test_abnormal_line_search_counts_as_not_converged():
    X, y = _data()
    model = _WrongGradientGP(normalize_y=True)
    caught = _fit_recording(model, X, y)
    assert model.optimization_result_.message.startswith("ABNORMAL")
    messages = _of(caught, sg.ConvergenceWarning)
    assert len(messages) == 1 and "line search failed" in messages[0]


# ----------------------------------------------------------------- non-finite results
def test_huge_targets_without_normalize_y_raise_and_leave_no_model():
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(60, 1))
    y = 1e300 * np.sin(X[:, 0])
    model = sg.LowRankGPRegressor(random_state=0, approximation=make_approximation("rff", n_components=32), normalize_X=False, normalize_y=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # numpy's overflow notices
        with pytest.raises(sg.NonFiniteResultError,
                           match=r"non-finite log marginal likelihood .*normalize_y=True"):
            model.fit(X, y)
    assert not hasattr(model, "posterior_") and not hasattr(model, "fit_warnings_")


@pytest.mark.parametrize("make", [
    lambda: sg.ExactGPRegressor(normalize_y=True, optimize=False, normalize_X=False),
    lambda: sg.LowRankGPRegressor(normalize_y=True, optimize=False,
                                  random_state=3, approximation=make_approximation("rff", n_components=40), normalize_X=False),
], ids=["exact", "low_rank"])
def test_normalize_y_at_1e300_equals_the_rescaled_fit(make):
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, size=(60, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(60)
    base = make().fit(X, y)
    huge = make().fit(X, 1e300 * y)
    X_test = np.linspace(-3, 3, 7)[:, None]
    mean, std = base.predict(X_test, return_std=True)
    huge_mean, huge_std = huge.predict(X_test, return_std=True)
    assert np.all(np.isfinite(huge_mean)) and np.all(np.isfinite(huge_std))
    np.testing.assert_allclose(huge_mean / 1e300, mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(huge_std / 1e300, std, rtol=1e-10)
    np.testing.assert_allclose(huge.y_train_std_ / 1e300, np.std(y), rtol=1e-12)
    samples = huge.sample_y(X_test, n_samples=3, random_state=0)
    np.testing.assert_allclose(samples / 1e300, base.sample_y(X_test, 3, random_state=0),
                               rtol=1e-7, atol=1e-9)
    with pytest.raises(sg.NonFiniteResultError, match="return_std=True"):
        huge.predict(X_test, return_cov=True)


def test_normalize_y_at_1e300_learns_finite_hyperparameters():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(80, 1))
    y = 1e300 * (np.sin(X[:, 0]) + 0.1 * rng.standard_normal(80))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sg.BoundaryWarning)
        model = sg.ExactGPRegressor(normalize_y=True, normalize_X=False).fit(X, y)
    assert math.isfinite(model.log_marginal_likelihood_value_)
    mean = model.predict(X)
    assert np.sqrt(np.mean(((mean - y) / 1e300) ** 2)) < 0.2


# ----------------------------------------------------------------- worse than noise only
def test_noise_only_log_marginal_likelihood_is_the_white_noise_optimum():
    rng = np.random.default_rng(4)
    y = 3.0 * rng.standard_normal(50) + 1.0
    s2 = np.mean(y**2)
    expected = np.sum(norm.logpdf(y, scale=np.sqrt(s2)))
    assert noise_only_log_marginal_likelihood(y) == pytest.approx(expected, rel=1e-12)
    for other in (0.5 * s2, 2.0 * s2):        # s2 = mean(y^2) is the maximum
        assert np.sum(norm.logpdf(y, scale=np.sqrt(other))) < expected
    assert noise_only_log_marginal_likelihood(1e300 * y) == pytest.approx(
        expected - 50 * math.log(1e300), rel=1e-12)


def _badly_scaled(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.uniform(0, 1, n) * 1e6, rng.uniform(0, 1, n) * 1e-6])
    y = np.sin(6 * X[:, 0] / 1e6) + np.cos(4 * X[:, 1] / 1e-6) + 0.1 * rng.standard_normal(n)
    return X, y


def test_column_scales_1e6_and_1e_minus_6_are_flagged_and_fixed_by_normalize_X():
    X, y = _badly_scaled()
    raw = sg.LowRankGPRegressor(normalize_y=True, random_state=0, approximation=make_approximation("rff", n_components=64), normalize_X=False)
    caught = _fit_recording(raw, X, y)
    assert raw.log_marginal_likelihood_value_ < raw.noise_only_log_marginal_likelihood_
    messages = _of(caught, sg.FitQualityWarning)
    assert len(messages) == 1 and "below the noise-only model's" in messages[0]
    # the unscaled model is also too far from its kernel for 64 features (resolution check)
    assert raw.fit_warnings_ == messages + _of(caught, sg.ApproximationWarning)
    scaled = sg.LowRankGPRegressor(normalize_y=True, normalize_X=True,
                                   random_state=0, approximation=make_approximation("rff", n_components=64))
    caught = _fit_recording(scaled, X, y)
    assert not _of(caught, sg.FitQualityWarning)
    assert scaled.log_marginal_likelihood_value_ > scaled.noise_only_log_marginal_likelihood_


def test_fixed_bad_hyperparameters_are_flagged():
    X, y = _data()
    kernel = sg.Gaussian(length_scale=1e-3, variance=1e3, length_scale_bounds="fixed",
                         variance_bounds="fixed")
    bad = sg.ExactGPRegressor(kernel=kernel, noise_variance=1e-6, optimize=False,
                              normalize_y=True, normalize_X=False)
    assert _of(_fit_recording(bad, X, y), sg.FitQualityWarning)
    good = sg.ExactGPRegressor(kernel=sg.Gaussian(length_scale=1.0), noise_variance=1e-2,
                               optimize=False, normalize_y=True, normalize_X=False)
    assert not _of(_fit_recording(good, X, y), sg.FitQualityWarning)


# ----------------------------------------------------------------- normalize_X
@pytest.mark.parametrize("make", [
    lambda **kw: sg.ExactGPRegressor(optimize=False, normalize_y=True, **kw),
    lambda **kw: sg.LowRankGPRegressor(optimize=False, normalize_y=True,
                                       random_state=5, **kw, approximation=make_approximation("rff", n_components=50)),
], ids=["exact", "low_rank"])
def test_normalize_X_makes_predictions_independent_of_input_units(make):
    X, y = _data()
    units = np.array([1e6, 1e-6])
    base = make(normalize_X=True).fit(X, y)
    scaled = make(normalize_X=True).fit(X * units + np.array([5e6, -3e-6]), y)
    X_test = np.random.default_rng(6).uniform(-2, 2, size=(9, 2))
    mean, std = base.predict(X_test, return_std=True)
    scaled_mean, scaled_std = scaled.predict(X_test * units + np.array([5e6, -3e-6]),
                                             return_std=True)
    np.testing.assert_allclose(scaled_mean, mean, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(scaled_std, std, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(scaled.X_train_scale_, np.std(X, axis=0) * units, rtol=1e-12)
    theta = np.append(base.kernel_.theta, math.log(base.noise_variance_))
    assert scaled.log_marginal_likelihood(theta) == pytest.approx(
        base.log_marginal_likelihood(theta), rel=1e-9)


def test_normalize_X_attributes():
    X, y = _data()
    off = sg.ExactGPRegressor(normalize_X=False, normalize_y=False).fit(X, y)
    np.testing.assert_array_equal(off.X_train_mean_, np.zeros(2))
    np.testing.assert_array_equal(off.X_train_scale_, np.ones(2))
    X_constant = np.column_stack([X[:, 0], np.full(len(X), 7.0)])
    on = sg.ExactGPRegressor(normalize_X=True, normalize_y=False).fit(X_constant, y)
    np.testing.assert_allclose(on.X_train_mean_, [np.mean(X[:, 0]), 7.0], rtol=1e-14)
    np.testing.assert_allclose(on.X_train_scale_, [np.std(X[:, 0]), 1.0], rtol=1e-14)
    # huge inputs: mean and std are computed without overflow
    huge = sg.ExactGPRegressor(normalize_X=True, optimize=False, normalize_y=False).fit(X * 1e300, y)
    np.testing.assert_allclose(huge.X_train_scale_, np.std(X, axis=0) * 1e300, rtol=1e-12)


def test_normalize_X_only_scales_inputs_of_a_semigroup_kernel():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 50, size=(60, 1))
    y = 1.0 / (1.0 + X[:, 0] / 25.0) + 0.01 * rng.standard_normal(60)
    kernel = sg.kernels.get("reciprocal_semigroup", length_scale=1.0,
                            length_scale_bounds=(0.5, 2.0))
    model = sg.LowRankGPRegressor(kernel=kernel,
                                  normalize_X=True, normalize_y=True, approximation=make_approximation("glf-semigroup", n_components=64))
    model.fit(X, y)
    np.testing.assert_array_equal(model.X_train_mean_, [0.0])
    np.testing.assert_allclose(model.X_train_scale_, [np.std(X)], rtol=1e-14)
    assert np.all(np.isfinite(model.predict(X)))


# ----------------------------------------------------------------- glf-semigroup
def _semigroup_kernel_error(fmap, kernel, X):
    Psi = fmap.features(X, kernel)
    return np.max(np.abs(Psi @ Psi.T - kernel(X))) / kernel.variance


def test_glf_semigroup_warns_where_the_rule_cannot_resolve_the_kernel():
    rng = np.random.default_rng(8)
    kernel = sg.kernels.get("reciprocal_semigroup", length_scale=1.0,
                            length_scale_bounds=(0.5, 2.0))
    X1 = rng.uniform(0, 1, size=(200, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # d = 1, q = 256: resolved, silent
        low = SemigroupGaussLegendreFeatures.build(X1, kernel, 256)
    assert _semigroup_kernel_error(low, kernel, X1) < 1e-8
    X3 = rng.uniform(0, 1, size=(200, 3))
    with pytest.warns(UserWarning, match=r"q = \[6, 6, 6\] .*cannot resolve the kernel"):
        high = SemigroupGaussLegendreFeatures.build(X3, kernel, 256)
    assert _semigroup_kernel_error(high, kernel, X3) > MASS_TOLERANCE    # really poor
    with pytest.raises(ValueError, match="X must be non-negative for glf-semigroup"):
        SemigroupGaussLegendreFeatures.build(X1 - 0.5, kernel, 256)
    with pytest.raises(ValueError, match="X must be non-negative for glf-semigroup"):
        low.basis(X1 - 0.5)


def _repeated_records(n_repeated, seed=0):
    """A smooth noisy field (noise variance 0.01, about 2 % of the targets' variance) whose
    first ``n_repeated`` rows are copied, inputs and target."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(60)
    return np.vstack([X, X[:n_repeated]]), np.append(y, y[:n_repeated])


@pytest.mark.parametrize("make", [
    lambda: sg.ExactGPRegressor(),
    lambda: sg.VecchiaGPRegressor(n_neighbors=10, random_state=0),
])
def test_repeated_records_that_drive_the_noise_to_zero_are_reported(make):
    """60 copies of 60 noisy rows: the learned noise falls below 1e-3 of the targets'
    variance and the fit says why; the same rows once, or the copies with a noise floor,
    report nothing."""
    from scalegp.estimators.base import REPEATED_NOISE_SHARE
    X, y = _repeated_records(60)
    model = make()
    messages = _of(_fit_recording(model, X, y), sg.errors.FitQualityWarning)
    assert model.noise_variance_ < REPEATED_NOISE_SHARE
    assert messages and messages[0].startswith("60 of 120 training rows repeat an earlier row")
    assert model.fit_warnings_[-1] == messages[0]
    X1, y1 = _repeated_records(0)
    model = make()
    assert not _of(_fit_recording(model, X1, y1), sg.errors.FitQualityWarning)
    assert model.noise_variance_ > REPEATED_NOISE_SHARE
    floored = make().set_params(noise_variance_bounds=(1e-2, 1e5))
    assert not _of(_fit_recording(floored, X, y), sg.errors.FitQualityWarning)


def test_repeated_records_are_counted_exactly():
    from scalegp.estimators.training_data import repeated_records
    X = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, -0.0], [1.0, 0.0]])
    assert repeated_records(X, np.array([1.0, 1.0, 2.0, 3.0, 3.0])) == 1
    assert repeated_records(X, np.array([1.0, 1.0, 1.0, 3.0, 3.0])) == 2
    assert repeated_records(X[:1], np.array([1.0])) == 0
    signed = np.array([[0.0, 1.0], [-0.0, 1.0]])             # equal numbers, other bytes
    assert repeated_records(signed, np.array([2.0, 2.0])) == 1


def test_repeated_records_with_known_noise_variances_are_not_interpolated():
    """With known per-row variances a row's noise is s2 + v_i: copies with v_i of a fifth of
    the targets' variance are not interpolated however low s2 goes, and nothing is reported
    (the variance calibration's GP of log ratios, known variance pi^2 / 2 per row, said so
    on every repeated input); with v_i = 0 the copies are reported as without."""
    X, y = _repeated_records(60)
    model = sg.ExactGPRegressor()
    known = np.full(y.size, 0.2 * np.var(y))
    assert not _of(_fit_recording(model, X, y, sample_noise_variance=known),
                   sg.errors.FitQualityWarning)
    zero = sg.ExactGPRegressor()
    messages = _of(_fit_recording(zero, X, y, sample_noise_variance=np.zeros(y.size)),
                   sg.errors.FitQualityWarning)
    assert messages and "repeat an earlier row" in messages[0]
