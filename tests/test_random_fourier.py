"""Random Fourier features: unbiasedness, m^(-1/2) error decay, low-rank GP -> exact GP."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features, metrics

from .conftest import all_kernels, kernel_id

RFF = features.get("rff")


def relative_error(kernel, X, n_components, seed):
    fmap = RFF.build(X, kernel, n_components, np.random.default_rng(seed))
    Psi = fmap.features(X, kernel)
    return metrics.kernel_approximation_error(kernel(X), Psi @ Psi.T)


@pytest.mark.parametrize("kernel", [
    sg.Gaussian(length_scale=[0.7, 1.2]), sg.Matern(nu=1.5, length_scale=0.9),
    sg.Cauchy(length_scale=[0.8, 1.0]), sg.Laplacian(length_scale=1.1)], ids=kernel_id)
def test_kernel_error_decays_like_inverse_square_root(kernel):
    X = np.random.default_rng(0).uniform(-1.5, 1.5, size=(150, 2))
    sizes = np.array([32, 128, 512, 2048])
    errors = [np.mean([relative_error(kernel, X, m, seed) for seed in range(10)]) for m in sizes]
    slope = np.polyfit(np.log(sizes), np.log(errors), 1)[0]
    assert -0.6 <= slope <= -0.4, f"slope {slope:.3f}, errors {errors}"


@pytest.mark.parametrize("kernel", all_kernels(2), ids=kernel_id)
def test_estimator_is_unbiased(kernel):
    """Mean over seeds of psi(x)^T psi(z) is k(x, z) within 4 standard errors."""
    rng = np.random.default_rng(11)
    X = rng.uniform(-1, 1, size=(6, 2))
    exact = kernel(X)
    estimates = []
    for seed in range(400):
        Psi = RFF.build(X, kernel, 16, np.random.default_rng(seed)).features(X, kernel)
        estimates.append(Psi @ Psi.T)
    estimates = np.array(estimates)
    mean = estimates.mean(axis=0)
    stderr = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    off_diagonal = ~np.eye(len(X), dtype=bool)
    assert np.all(np.abs(mean - exact)[off_diagonal] <= 4 * stderr[off_diagonal])
    np.testing.assert_allclose(np.diag(mean), kernel.variance, rtol=1e-12)   # cos^2 + sin^2


def test_many_features_approach_exact_gp():
    rng = np.random.default_rng(5)
    X = rng.uniform(-2, 2, size=(200, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    Xs = np.linspace(-2, 2, 50)[:, None]
    kernel = sg.Gaussian(length_scale=0.5)
    exact_mean, exact_var = sg.ExactPosterior.fit(kernel, 0.01, X, y).predict(Xs, return_var=True)
    gaps = []
    for m in (64, 4096):
        fmap = RFF.build(X, kernel, m, np.random.default_rng(0))
        mean, var = sg.Posterior.fit(fmap, kernel, 0.01, X, y).predict(Xs, return_var=True)
        gaps.append(np.abs(mean - exact_mean).max())
    assert gaps[1] < 0.05 and gaps[1] < gaps[0] / 3
