"""The engine beyond the registry contract: the fixed-basis path (with a small test-only
fixed-frequency map), signed features, jitter and NaN handling, input validation,
hyperparameter learning."""

import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import scalegp as sg
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp import features
from scalegp.errors import NotPositiveDefiniteError, NumericalWarning
from scalegp import linalg
from scalegp.features.base import FixedBasisFeatureMap
from scalegp.features.nystrom import NystromAtTheta, NystromFeatures
from scalegp.engine.statistics import BasisStatistics, Statistics
from scalegp.engine.likelihood import MarginalLikelihood, Posterior

from scalegp.testing import dense_gp as dense_reference
from scalegp.testing import signed_random_fourier_features


@dataclass(frozen=True, eq=False)
class FixedFrequencyCosines(FixedBasisFeatureMap):
    """Test-only fixed basis: cos/sin at fixed ordinary frequencies eta_l with midpoint-rule
    weights dv * p_theta(eta_l), i.e. a crude quadrature of the spectral integral
    (docs/gauss-legendre.md, section 1).
    Not registered (no name), so it stays out of the library's registry."""

    eta: np.ndarray
    cell_volume: float

    @classmethod
    def build(cls, X, kernel, n_components, rng, **options):
        raise NotImplementedError("built directly in tests")

    @property
    def n_components(self):
        return 2 * self.eta.shape[0]

    def basis(self, X):
        X = np.asarray(X, dtype=float)
        Z = 2 * np.pi * X @ self.eta.T
        return np.hstack([np.cos(Z), np.sin(Z)])

    def weights(self, kernel):
        w = 2 * self.cell_volume * kernel.spectral_density(self.eta)   # +eta and -eta cells
        return np.concatenate([w, w])

    def log_weights_grad(self, kernel):
        g = kernel.log_spectral_density_grad(self.eta).T
        return np.hstack([g, g])


def half_grid(step=0.25, limit=3.0):
    """Midpoints of a half-plane grid (first coordinate > 0): one of each +-eta pair."""
    centres = np.arange(-limit + step / 2, limit, step)
    e1, e2 = np.meshgrid(centres[centres > 0], centres)
    return np.column_stack([e1.ravel(), e2.ravel()])


@pytest.fixture
def fixed_map():
    return FixedFrequencyCosines(n_dims=2, eta=half_grid(), cell_volume=0.25**2)


def test_fixed_basis_likelihood_equals_dense_and_never_touches_data(fixed_map, regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.2], variance=1.5)
    likelihood = MarginalLikelihood(fixed_map, kernel, X, y)
    likelihood.X = likelihood.y = None          # the cached statistics must suffice
    for theta_shift in [0.0, 0.2, -0.3]:
        k = kernel.with_theta(kernel.theta + theta_shift)
        value, grad = likelihood(np.append(k.theta, np.log(0.2)))
        Psi = fixed_map.features(X, k)
        value_ref, grad_ref, _ = dense_reference(Psi, None, fixed_map.features_grad(X, k), y, 0.2)
        assert value == pytest.approx(value_ref, rel=1e-10)
        np.testing.assert_allclose(grad, grad_ref, rtol=1e-8, atol=1e-10)


def test_fixed_basis_gradient_matches_finite_differences(fixed_map, regression_data):
    X, y = regression_data
    kernel = sg.Matern(nu=2.5, length_scale=[0.9, 1.1], variance=1.2)
    likelihood = MarginalLikelihood(fixed_map, kernel, X, y)
    theta = np.append(kernel.theta, np.log(0.1))
    _, grad = likelihood(theta)
    eps = 1e-6
    numeric = [(likelihood.value(theta + eps * e) - likelihood.value(theta - eps * e)) / (2 * eps)
               for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7)


def test_fixed_basis_weights_grad_matches_finite_differences(fixed_map):
    kernel = sg.Cauchy(length_scale=[0.7, 1.3], variance=0.9)
    analytic = fixed_map.weights_grad(kernel)
    eps = 1e-6
    for i in range(kernel.n_params):
        step = np.zeros(kernel.n_params)
        step[i] = eps
        numeric = (fixed_map.weights(kernel.with_theta(kernel.theta + step))
                   - fixed_map.weights(kernel.with_theta(kernel.theta - step))) / (2 * eps)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-6, atol=1e-12)


def test_basis_statistics_rescale_to_feature_statistics(fixed_map, regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=0.7)
    direct = Statistics.accumulate(fixed_map, kernel, X, y)
    cached = BasisStatistics.accumulate(fixed_map, X, y, chunk_size=13).at(fixed_map, kernel)
    np.testing.assert_allclose(cached.gram, direct.gram, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(cached.projection, direct.projection, rtol=1e-12, atol=1e-14)


def signed_map(X, kernel, negative_weight):
    return signed_random_fourier_features(X, kernel, 40, negative_weight, n_negative=4)


def test_signed_features_equal_dense_indefinite(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = signed_map(X, kernel, 0.01)
    assert fmap.signs is not None and np.sum(fmap.signs < 0) == 8
    value, grad = MarginalLikelihood(fmap, kernel, X, y)(np.append(kernel.theta, np.log(0.3)))
    value_ref, grad_ref, K = dense_reference(fmap.features(X, kernel), fmap.signs,
                                             fmap.features_grad(X, kernel), y, 0.3)
    assert value == pytest.approx(value_ref, rel=1e-10)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-8, atol=1e-10)
    mean = Posterior.fit(fmap, kernel, 0.3, X, y).predict(X[:5])
    Psi = fmap.features(X, kernel)
    np.testing.assert_allclose(mean, ((Psi[:5] * fmap.signs) @ Psi.T) @ np.linalg.solve(K, y),
                               rtol=1e-9)


def test_signed_features_not_positive_definite_is_a_clear_error(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = signed_map(X, kernel, 3.0)          # large negative weights: K~ indefinite
    Psi = fmap.features(X, kernel)
    assert np.linalg.eigvalsh((Psi * fmap.signs) @ Psi.T + 1e-3 * np.eye(len(y))).min() < 0
    with pytest.raises(NotPositiveDefiniteError, match="is not positive definite .* negative eigenvalues"):
        Posterior.fit(fmap, kernel, 1e-3, X, y)


def test_rank_deficient_gram_succeeds_with_warning_naming_jitter():
    # two inputs, each repeated ten times, far apart: K is two exact blocks of ones, and a
    # noise of 1e-20 vanishes in 1 + 1e-20, so the Cholesky pivots are exactly 0 whatever
    # the BLAS blocking or threading
    X = np.repeat([[0.0], [100.0]], 10, axis=0)
    y = np.repeat([0.5, -1.0], 10)
    kernel = sg.Gaussian(length_scale=1.0)
    with pytest.warns(NumericalWarning, match=r"added jitter \d\.\d+e-\d+ to its diagonal"):
        posterior = sg.ExactPosterior.fit(kernel, 1e-20, X, y)
    assert posterior.jitter > 0
    np.testing.assert_allclose(posterior.predict(np.array([[0.0], [100.0]])), [0.5, -1.0],
                               atol=1e-6)


def test_rank_deficient_feature_gram_succeeds_with_warning():
    X = np.repeat(np.linspace(0, 1, 10)[:, None], 3, axis=0)       # 10 distinct inputs
    y = np.sin(X[:, 0])
    kernel = sg.Gaussian(length_scale=0.3)
    fmap = features.get("rff").build(X, kernel, 200, np.random.default_rng(0))   # m >> 10
    with pytest.warns(NumericalWarning, match=r"Psi\^T Psi \+ noise_variance I .* added jitter"):
        posterior = Posterior.fit(fmap, kernel, 1e-300, X, y)
    assert posterior.system.jitter > 0 and np.isfinite(posterior.log_marginal_likelihood)
    np.testing.assert_allclose(posterior.predict(X[:10]), y[:10], atol=1e-4)


def test_nan_matrix_is_an_error_not_a_wrong_answer():
    A = np.eye(3)
    A[1, 2] = np.nan
    with pytest.raises(ValueError, match="contains NaN or inf"):
        sg.linalg.cholesky(A)


def test_hopeless_matrix_raises_not_positive_definite():
    with pytest.raises(NotPositiveDefiniteError, match="not positive definite even with jitter"):
        sg.linalg.cholesky(np.diag([1.0, -1.0]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inverse_and_triangular_factors_agree_with_dense_algebra(dtype):
    rng = np.random.default_rng(4)
    B = rng.standard_normal((40, 12)).astype(dtype)
    A = (B.T @ B + np.eye(12)).astype(dtype)
    L, _ = sg.linalg.cholesky(A)
    rtol = 1e-10 if dtype == np.float64 else 1e-3
    inverse = np.linalg.inv(A.astype(np.float64))
    np.testing.assert_allclose(sg.linalg.inverse_from_cholesky(L), inverse, rtol=rtol,
                               atol=rtol * np.abs(inverse).max())
    np.testing.assert_allclose(sg.linalg.inverse_diagonal_from_cholesky(L), np.diag(inverse),
                               rtol=rtol)
    R = sg.linalg.triangular_factor(B)                   # R^T R = B^T B, diag(R) >= 0
    assert R.shape == (12, 12) and np.all(np.diag(R) >= 0)
    np.testing.assert_allclose(R.T @ R, B.T @ B, rtol=rtol, atol=rtol * 40)
    np.testing.assert_allclose(np.tril(R, -1), 0)


def test_float32_accumulation_is_close_to_float64(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = features.get("rff").build(X, kernel, 64, np.random.default_rng(0))
    s64 = Statistics.accumulate(fmap, kernel, X, y)
    s32 = Statistics.accumulate(fmap, kernel, X, y, dtype=np.float32)
    assert s32.gram.dtype == np.float64
    np.testing.assert_allclose(s32.gram, s64.gram, atol=1e-4 * np.abs(s64.gram).max())
    mean32 = Posterior.fit(fmap, kernel, 0.1, X, y, dtype="float32").predict(X)
    mean64 = Posterior.fit(fmap, kernel, 0.1, X, y).predict(X)
    np.testing.assert_allclose(mean32, mean64, atol=1e-3)


@pytest.mark.parametrize("call, message", [
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X[:, 0], y), "X must be a 2-D array .* got a 1-D array"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X, y[:-1]), "y must have 60 entries .* got 59"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X[:0], y[:0]), "X must have at least 1 sample"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, np.where(X > 1.5, np.inf, X), y), "X must be finite .* row"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X, np.where(y > 0.5, np.nan, y)), "y must be finite"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X.astype(str).astype(object), y), "X must contain numbers only"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, np.array([["a", "b"]] * 60), y), "X must contain numbers only"),
    (lambda fm, k, X, y: Statistics.accumulate(fm, k, X, y, dtype="int32"), "dtype must be float64 or float32, got int32"),
    (lambda fm, k, X, y: Posterior.fit(fm, k, 0.0, X, y), "noise_variance must be a finite positive number, got 0.0"),
    (lambda fm, k, X, y: Posterior.fit(fm, k, -1.0, X, y), "noise_variance must be a finite positive number, got -1.0"),
    (lambda fm, k, X, y: Posterior.fit(fm, k, 0.1, X[:, [0, 1, 1]], y), "X must have 2 column"),
    (lambda fm, k, X, y: features.get("rff").build(X, k, 2.5, 0), "n_components must be an integer >= 1, got 2.5"),
    (lambda fm, k, X, y: features.get("rff").build(X, k, 0, 0), "n_components must be an integer >= 1, got 0"),
    (lambda fm, k, X, y: sg.ExactPosterior.fit(k, 0.1, np.zeros((10_001, 2)), np.zeros(10_001)), "limited to n_samples <= 10000 .* got n_samples = 10001"),
])
def test_bad_input_names_parameter_expectation_and_value(call, message, regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = features.get("rff").build(X, kernel, 16, np.random.default_rng(0))
    with pytest.raises((ValueError, TypeError), match=message):
        call(fmap, kernel, X, y)


def test_learning_improves_likelihood_and_warns_on_bounds(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.5, 5.0))
    fmap = features.get("rff").build(X, kernel, 64, np.random.default_rng(0))
    objective = MarginalLikelihood(fmap, kernel, X, y)
    start = objective(np.append(kernel.theta, np.log(0.5)))[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        learned, result = sg.learn_hyperparameters(
            objective, Hyperparameters(kernel, 0.5, (1e-4, 10.0)), n_restarts=2,
            rng=np.random.default_rng(1))
    assert result.log_marginal_likelihood > start + 10
    assert result.n_starts == 3
    assert objective.value(learned.theta) == pytest.approx(result.log_marginal_likelihood,
                                                           rel=1e-10)
    scales = learned.kernel.length_scale
    on_bound = np.isclose(scales, 0.5) | np.isclose(scales, 5.0)
    bound_warnings = [w for w in caught if issubclass(w.category, sg.BoundaryWarning)]
    assert bool(on_bound.any()) == bool(bound_warnings)


def test_bound_warning_when_optimum_is_outside_box(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=5.0, length_scale_bounds=(4.0, 50.0))   # truth ~ 0.5-1
    with pytest.warns(sg.BoundaryWarning, match="length_scale = 4 sits on its lower bound 4"):
        sg.learn_hyperparameters(sg.ExactMarginalLikelihood(kernel, X, y),
                                 Hyperparameters(kernel, 0.1, (1e-4, 10.0)))


def test_noise_can_be_fixed(regression_data):
    X, y = regression_data
    kernel = sg.Gaussian(length_scale=1.0)
    learned, _ = sg.learn_hyperparameters(sg.ExactMarginalLikelihood(kernel, X, y),
                                          Hyperparameters(kernel, 0.05, "fixed"))
    assert learned.noise_variance == pytest.approx(0.05, rel=1e-12)


def test_cholesky_jitter_below_quiet_threshold_is_recorded_without_warning():
    # ones(10, 10) has pivots exactly 0 after the first: it needs jitter, and the first try
    # (initial_jitter: 1.5e-10 of the mean diagonal) succeeds
    A = np.ones((10, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        L, jitter = linalg.cholesky(A, name="K_ZZ", quiet_below=linalg.KNOT_JITTER_QUIET)
    assert 0 < jitter <= linalg.KNOT_JITTER_QUIET
    np.testing.assert_allclose(L @ L.T, A + jitter * np.eye(10), atol=1e-12)
    with pytest.warns(NumericalWarning, match=r"K_ZZ was not numerically positive definite"):
        linalg.cholesky(A, name="K_ZZ", quiet_below=jitter / 2)


def test_nystrom_with_redundant_knots_factorizes_quietly_and_keeps_its_jitter():
    # twice the same five knots: K_ZZ is singular in exact arithmetic, the jitter on its
    # diagonal is a knot "noise" of 1.5e-10 (linalg.KNOT_JITTER_QUIET), recorded, not warned
    knots = np.tile(np.linspace(0, 1, 5)[:, None], (2, 1))
    kernel = sg.Gaussian(length_scale=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        at = NystromAtTheta(NystromFeatures(n_dims=1, knots=knots), kernel)
    assert 0 < at.jitter <= linalg.KNOT_JITTER_QUIET
    np.testing.assert_allclose(at.factor @ at.factor.T, kernel(knots) + at.jitter * np.eye(10),
                               atol=1e-12)
