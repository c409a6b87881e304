"""Kernels: exact values against independent formulas, spectral densities by numerical
Fourier inversion, frequency samplers against the kernel, derivatives against finite
differences, parameter bookkeeping and validation."""

import numpy as np
import pytest
from scipy import integrate, special
from sklearn.gaussian_process import kernels as skk

import scalegp as sg
from scalegp import kernels

from .conftest import all_kernels, kernel_id

KERNELS_ARD = all_kernels(2, ard=True)
KERNELS_ISO = all_kernels(2, ard=False)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_matern_matches_scikit_learn(nu):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    scale = np.array([0.5, 1.0, 2.0])
    ours = sg.Matern(nu=nu, length_scale=scale, variance=2.0)(X, Y)
    theirs = 2.0 * skk.Matern(length_scale=scale, nu=nu)(X, Y)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def test_gaussian_matches_scikit_learn():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(6, 2))
    ours = sg.Gaussian(length_scale=[0.3, 2.0], variance=0.5)(X)
    np.testing.assert_allclose(ours, 0.5 * skk.RBF([0.3, 2.0])(X), rtol=1e-13)


def test_cauchy_and_laplacian_closed_forms():
    x, z = np.array([[0.3, -1.0]]), np.array([[1.1, 0.5]])
    scale = np.array([0.7, 2.0])
    delta = (x - z)[0] / scale
    cauchy = sg.Cauchy(length_scale=scale, variance=3.0)(x, z)[0, 0]
    laplace = sg.Laplacian(length_scale=scale, variance=3.0)(x, z)[0, 0]
    assert cauchy == pytest.approx(3.0 / ((1 + delta[0] ** 2) * (1 + delta[1] ** 2)), rel=1e-14)
    assert laplace == pytest.approx(3.0 * np.exp(-np.abs(delta).sum()), rel=1e-14)


@pytest.mark.parametrize("kernel", all_kernels(1, ard=False), ids=kernel_id)
def test_spectral_density_inverts_to_kernel_1d(kernel):
    """kappa(delta) = int p(eta) cos(2 pi eta delta) d eta (ordinary-frequency convention)."""
    def density(eta):
        return kernel.spectral_density(np.array([[eta]]))[0]
    for delta in [0.0, 0.37, 1.3]:
        if delta == 0.0:
            value = 2 * integrate.quad(density, 0, np.inf, limit=500, epsabs=1e-12)[0]
        else:   # QAWF: Fourier integral for the slowly decaying densities
            value = 2 * integrate.quad(density, 0, np.inf, weight="cos",
                                       wvar=2 * np.pi * delta, limlst=200)[0]
        expected = kernel(np.array([[delta]]), np.array([[0.0]]))[0, 0]
        assert value == pytest.approx(expected, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("nu", [0.5, 1.5, 2.5])
def test_matern_density_inverts_to_kernel_2d(nu):
    """For a radial 2-D density, kappa(r) = int_0^inf 2 pi rho p(rho) J0(2 pi rho r) d rho."""
    kernel = sg.Matern(nu=nu, length_scale=0.8, variance=1.0)
    for r in [0.0, 0.5, 1.2]:
        def integrand(rho):
            return (2 * np.pi * rho * kernel.spectral_density(np.array([[rho, 0.0]]))[0]
                    * special.j0(2 * np.pi * rho * r))
        value = sum(integrate.quad(integrand, a, b, limit=400, epsabs=1e-11)[0]
                    for a, b in [(0, 1), (1, 10), (10, 100), (100, 3000)])
        expected = kernel(np.array([[r, 0.0]]), np.zeros((1, 2)))[0, 0]
        assert value == pytest.approx(expected, rel=2e-4 if nu == 0.5 else 1e-6)


@pytest.mark.parametrize("kernel", KERNELS_ARD, ids=kernel_id)
def test_ard_density_is_scaled_unit_density(kernel):
    """p_theta(eta) = s prod_j l_j p_0(L eta): the ARD density is the unit one, rescaled;
    separable kernels factor over dimensions."""
    rng = np.random.default_rng(2)
    eta = rng.normal(size=(5, 2))
    scale = kernel.length_scale
    unit = kernel.with_params(length_scale=np.ones(2), variance=1.0)
    expected = kernel.variance * scale.prod() * unit.spectral_density(eta * scale)
    np.testing.assert_allclose(kernel.spectral_density(eta), expected, rtol=1e-12)
    if kernel.separable:
        one_d = [kernel.with_params(length_scale=[scale[j]], variance=1.0) for j in range(2)]
        product = kernel.variance * np.prod(
            [one_d[j].spectral_density(eta[:, j:j + 1]) for j in range(2)], axis=0)
        np.testing.assert_allclose(kernel.spectral_density(eta), product, rtol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS_ARD + KERNELS_ISO, ids=kernel_id)
def test_standard_frequencies_reproduce_kernel(kernel):
    """E[cos(omega^T delta / l)] = kappa(delta): Monte-Carlo mean within 5 standard errors."""
    rng = np.random.default_rng(7)
    omega = kernel.sample_standard_frequencies(200_000, 2, rng)
    for delta in [np.array([0.3, -0.2]), np.array([1.0, 0.8])]:
        samples = np.cos(omega @ (delta / np.broadcast_to(kernel.length_scale, (2,))))
        expected = kernel(delta[None, :], np.zeros((1, 2)))[0, 0] / kernel.variance
        stderr = samples.std() / np.sqrt(samples.size)
        assert abs(samples.mean() - expected) < 5 * stderr


@pytest.mark.parametrize("kernel", KERNELS_ARD + KERNELS_ISO, ids=kernel_id)
def test_log_density_gradient_matches_finite_differences(kernel):
    rng = np.random.default_rng(3)
    eta = rng.normal(size=(9, 2))
    analytic = kernel.log_spectral_density_grad(eta)
    theta, eps = kernel.theta, 1e-6
    for i in range(kernel.n_params):
        step = np.zeros_like(theta)
        step[i] = eps
        plus = kernel.with_theta(theta + step).log_spectral_density(eta)
        minus = kernel.with_theta(theta - step).log_spectral_density(eta)
        np.testing.assert_allclose(analytic[:, i], (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("kernel", KERNELS_ARD + KERNELS_ISO, ids=kernel_id)
def test_kernel_gradient_matches_finite_differences(kernel):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(8, 2))
    analytic = kernel.gradient(X)
    theta, eps = kernel.theta, 1e-6
    for i in range(kernel.n_params):
        step = np.zeros_like(theta)
        step[i] = eps
        numeric = (kernel.with_theta(theta + step)(X) - kernel.with_theta(theta - step)(X)) / (2 * eps)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-6, atol=1e-8)


def test_log_density_stays_finite_where_density_underflows():
    kernel = sg.Gaussian(length_scale=50.0)
    eta = np.array([[10.0]])
    assert kernel.spectral_density(eta)[0] == 0.0
    assert np.isfinite(kernel.log_spectral_density(eta)[0])
    assert np.all(np.isfinite(kernel.log_spectral_density_grad(eta)))


def test_parameter_order_names_and_bounds():
    kernel = sg.Matern(nu=1.5, length_scale=[0.5, 2.0], variance=3.0,
                       length_scale_bounds=(1e-2, 1e2), variance_bounds="fixed")
    assert kernel.param_names == ["length_scale[0]", "length_scale[1]", "variance"]
    np.testing.assert_allclose(kernel.theta, np.log([0.5, 2.0, 3.0]))
    np.testing.assert_allclose(kernel.bounds, np.log([[1e-2, 1e2], [1e-2, 1e2], [3.0, 3.0]]))
    moved = kernel.with_theta(np.log([1.0, 1.0, 5.0]))
    assert moved.variance == pytest.approx(3.0)   # a fixed parameter does not move
    np.testing.assert_allclose(moved.length_scale, [1.0, 1.0])
    assert kernels.from_params("Matern", moved.get_params()) == moved


def test_kernel_names():
    assert isinstance(kernels.get("matern32"), sg.Matern) and kernels.get("matern32").nu == 1.5
    assert isinstance(kernels.get("rbf", length_scale=2.0), sg.Gaussian)
    with pytest.raises(ValueError, match="kernel must be a Kernel or one of"):
        kernels.get("polynomial")


@pytest.mark.parametrize("kwargs, message", [
    (dict(length_scale=-1.0), "length_scale must contain finite positive numbers only, got"),
    (dict(length_scale=0.0), "length_scale must contain finite positive numbers"),
    (dict(length_scale=np.nan), "length_scale must contain finite positive numbers"),
    (dict(variance=0.0), "variance must be a finite positive number, got 0.0"),
    (dict(variance="big"), "variance must be a positive number, got 'big'"),
    (dict(length_scale_bounds=(10.0, 1.0)), "length_scale_bounds must satisfy lower < upper, got lower=10.0"),
    (dict(variance_bounds=(-1.0, 1.0)), "variance_bounds must satisfy 0 < lower < upper"),
    (dict(length_scale=1e6), r"length_scale must lie inside its bounds \[0.01, 100.0\], got"),
])
def test_bad_kernel_parameters(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        sg.Gaussian(**kwargs)


def test_bad_matern_nu_and_dimensions():
    with pytest.raises(ValueError, match="nu must be one of 0.5, 1.5, 2.5, got 2.0"):
        sg.Matern(nu=2.0)
    with pytest.raises(ValueError, match="length_scale has 3 entries .* X has 2 column"):
        sg.Gaussian(length_scale=[1, 2, 3])(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="theta must be a finite vector of length 2"):
        sg.Gaussian().with_theta([0.0, np.nan])


@pytest.mark.parametrize("kernel", all_kernels(6, ard=True) + all_kernels(6, ard=False),
                         ids=kernel_id)
def test_gradient_inner_equals_the_contraction_of_the_gradient_stack(kernel):
    """<E, dk(X, Z)/d theta_p> of ``gradient_inner_and_input_contraction`` (one GEMM for the
    smooth radial kernels, one length scale per input included: what the exact likelihood's
    gradient uses) against the stack of ``gradient``, on inputs offset 5 from the origin
    (the shift of ``_scaled_squared_distances``). Tolerance: the expansion's rounding,
    (d + 4) eps (8 beta^2 + 2 r^2) with beta, r ~ 3 length scales here, about 1e-13
    relative to sum |E o dk|; 1e-11 leaves room."""
    rng = np.random.default_rng(11)
    X, Z = rng.normal(5.0, 1.0, size=(40, 6)), rng.normal(5.0, 1.0, size=(30, 6))
    E = rng.standard_normal((40, 30))
    stack = kernel.gradient(X, Z)
    want = np.array([np.sum(E * dK) for dK in stack])
    scale = np.array([np.sum(np.abs(E * dK)) for dK in stack])
    got, _ = kernel.gradient_inner_and_input_contraction(X, Z, E, input_contraction=False)
    assert np.all(np.abs(got - want) <= 1e-11 * scale), (got, want)
    # the exact likelihood's form: k(X, X) and its contraction from the same distances
    W = E[:, :30] @ E[:, :30].T
    gram, inner = kernel.gram_and_gradient_inner(X)
    np.testing.assert_allclose(gram, kernel(X), rtol=1e-15, atol=1e-15)
    gram += 1.0                                   # the caller's to modify: inner unchanged
    stack = kernel.gradient(X)
    want = np.array([np.sum(W * dK) for dK in stack])
    scale = np.array([np.sum(np.abs(W * dK)) for dK in stack])
    got = inner(W)
    assert np.all(np.abs(got - want) <= 1e-11 * scale), (got, want)


@pytest.mark.parametrize("kernel", KERNELS_ARD + KERNELS_ISO, ids=kernel_id)
def test_cross_gradient_and_shared_scale_sum(kernel):
    """gradient(X, Y) is the X-Y block of gradient([X; Y]); the one-scale sum that radial
    kernels override equals the sum of the per-dimension derivatives."""
    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(6, 2)), rng.normal(size=(4, 2))
    if not kernel.shift_invariant:
        X, Y = np.abs(X), np.abs(Y)
    full = kernel.gradient(np.vstack([X, Y]))
    np.testing.assert_allclose(kernel.gradient(X, Y), full[:, :6, 6:], rtol=1e-13, atol=1e-15)
    U = kernel._scaled_differences(X, Y)
    np.testing.assert_allclose(kernel._correlation_grad_log_scale_sum(U),
                               kernel._correlation_grad_log_scale(U).sum(axis=-1),
                               rtol=1e-13, atol=1e-15)
