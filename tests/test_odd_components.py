"""Odd numbers of Fourier features: a cos/sin-pair map with m = 2 S + 1 ends with one
phase-shifted cosine sqrt(2 s a) cos(z + b), b ~ U(0, 2 pi) (unbiased, as scikit-learn's
RBFSampler). The engine's contract checks (scalegp.testing, run over the registry by
tests/test_contract.py) are rerun at an odd m for every map that builds one; the formula, the weights and the unbiasedness are checked here."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features, testing

from .conftest import all_kernels, kernel_id

ODD = 25
X_PROBE = np.random.default_rng(0).uniform(-2, 2, size=(30, 2))


def builds_odd(name) -> bool:
    cls = features.get(name)
    kernel = next((k for k in all_kernels(2) if cls.supports(k)), None)
    return kernel is not None and cls.build(X_PROBE, kernel, ODD, np.random.default_rng(0)).n_components == ODD


ODD_CASES = [pytest.param(name, kernel, id=f"{name}-{kernel_id(kernel)}")
             for name in features.names() if builds_odd(name)
             for kernel in all_kernels(2, ard=True) + all_kernels(2, ard=False)[:1]
             if features.get(name).supports(kernel)]


def build(name, kernel, X):
    return features.get(name).build(X, kernel, ODD, np.random.default_rng(0))


CONTRACT_CHECKS = {
    "engine_equals_dense_gp": lambda fmap, kernel, X, y, name: testing.check_engine_equals_dense(
        fmap, kernel, X, y, 0.3, np.random.default_rng(1).uniform(-2, 2, size=(15, 2))),
    "features_grad": lambda fmap, kernel, X, y, name: testing.check_features_grad(
        fmap, kernel, X[:20]),
    "map_protocol": lambda fmap, kernel, X, y, name: testing.check_map_protocol(
        fmap, kernel, X, lambda: build(name, kernel, X)),
    "chunked_statistics": lambda fmap, kernel, X, y, name: testing.check_chunked_statistics(
        fmap, kernel, X, y),
}


def test_the_monte_carlo_maps_build_odd_counts():
    names = {case.values[0] for case in ODD_CASES}
    assert {"rff", "orf", "qmc", "sorf"} <= names


@pytest.mark.parametrize("check", list(CONTRACT_CHECKS))
@pytest.mark.parametrize("name, kernel", ODD_CASES)
def test_contract_holds_at_an_odd_count(check, name, kernel, regression_data):
    X, y = regression_data
    CONTRACT_CHECKS[check](build(name, kernel, X), kernel, X, y, name)


@pytest.mark.parametrize("name", ["rff", "orf", "qmc", "sorf"])
@pytest.mark.parametrize("m", [1, 7])
def test_odd_features_are_the_pairs_and_one_shifted_cosine(name, m):
    kernel = sg.Gaussian(length_scale=[0.7, 1.3], variance=1.8)
    fmap = features.get(name).build(X_PROBE, kernel, m, np.random.default_rng(4))
    S = m // 2
    assert fmap.n_components == m and fmap.n_frequencies == S + 1 and fmap.n_pairs == S
    assert fmap.phase_shifts.shape == (1,) and 0 <= fmap.phase_shifts[0] < 2 * np.pi
    Z = ((X_PROBE - fmap.offset) / kernel.length_scale) @ fmap.omega.T
    pairs = np.sqrt(kernel.variance * 2 / m)
    expected = np.hstack([pairs * np.cos(Z[:, :S]), pairs * np.sin(Z[:, :S]),
                          np.sqrt(2 * kernel.variance / m) * np.cos(Z[:, S:] + fmap.phase_shifts)])
    np.testing.assert_allclose(fmap.features(X_PROBE, kernel), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(fmap.frequency_weights.sum(), 1.0, rtol=1e-14)


def test_even_counts_have_no_phase_shift():
    fmap = features.get("rff").build(X_PROBE, sg.Gaussian(), 24, np.random.default_rng(0))
    assert fmap.phase_shifts is None and fmap.n_pairs == fmap.n_frequencies == 12
    np.testing.assert_array_equal(fmap.frequency_weights, np.full(12, 1 / 12))


def test_single_column_is_unbiased():
    """m = 1 (RBFSampler with one component): the mean of psi(x) psi(z) over independent maps
    is k(x, z), within 4 standard errors of the sample."""
    kernel = sg.Matern(nu=1.5, length_scale=[0.8, 1.1], variance=1.4)
    pair = X_PROBE[:2]
    products = np.array([
        np.prod(features.get("rff").build(pair, kernel, 1, np.random.default_rng(seed))
                .features(pair, kernel)[:, 0])
        for seed in range(4000)])
    exact = kernel(pair)[0, 1]
    standard_error = products.std(ddof=1) / np.sqrt(products.size)
    assert abs(products.mean() - exact) < 4 * standard_error
    assert standard_error < 0.05 * kernel.variance   # the check resolves the bias it tests
