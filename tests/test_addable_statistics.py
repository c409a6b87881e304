"""Statistics are sums over rows of pure functions of a chunk (docs/engine.md, "Statistics"):
computed chunk by chunk and summed in a random order they equal the in-memory ones to 1e-12,
for the likelihood statistics, the gradient's shares and the QR R-factor."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.data import as_source
from scalegp.gp import (FactorizedSystem, MarginalLikelihood, Statistics, accumulate_gradient,
                        chunk_gradient, chunk_statistics)
from scalegp.noise import FITC, HOMOSCEDASTIC
from scalegp.qr import QRBasisStatistics
from scalegp.testing import signed_random_fourier_features

CHUNK_ROWS = 13
SEEDS = (0, 1, 2)


def _data(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y, rng.uniform(0.0, 0.3, size=n)


def _shuffled_chunks(X, y, variances, seed):
    chunks = list(as_source(X, y, noise_variance=variances).chunks(CHUNK_ROWS))
    order = np.random.default_rng(100 + seed).permutation(len(chunks))
    return [chunks[i] for i in order]


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("noise", [HOMOSCEDASTIC, FITC], ids=["homoscedastic", "fitc"])
@pytest.mark.parametrize("name", ["rff", "glf", "signed-rff"])
def test_chunk_statistics_and_gradient_shares_add_in_any_order(name, noise, seed):
    X, y, variances = _data(seed)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1], length_scale_bounds=(0.1, 10.0))
    if name == "signed-rff":        # a signed map whose K stays positive definite at s2
        fmap = signed_random_fourier_features(X, kernel, 24, 0.002, n_negative=2, seed=seed)
    else:
        fmap = features.get(name).build(X, kernel, 24, np.random.default_rng(seed))
    at_map = fmap.at(kernel)
    s2 = 1.5
    in_memory = Statistics.accumulate(fmap, kernel, X, y, noise=noise, noise_variance=s2,
                                      sample_noise_variance=variances, chunk_size=len(y))
    shares = [chunk_statistics(at_map, chunk, noise=noise, noise_variance=s2)
              for chunk in _shuffled_chunks(X, y, variances, seed)]
    total = sum(shares[1:], shares[0])
    for field in ("gram", "projection", "y_norm2", "log_weight_sum"):
        _close(getattr(total, field), getattr(in_memory, field))
    assert total.n_samples == in_memory.n_samples == len(y)

    system = FactorizedSystem.factor(in_memory, s2, fmap.signs)
    gradient = accumulate_gradient(at_map, as_source(X, y, noise_variance=variances), system,
                                   noise=noise, chunk_size=len(y))
    summed = sum(chunk_gradient(at_map, chunk, system, noise=noise)
                 for chunk in _shuffled_chunks(X, y, variances, seed))
    _close(summed, gradient)


@pytest.mark.parametrize("seed", SEEDS)
def test_qr_statistics_add_in_any_order(seed):
    X, y, _ = _data(seed)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1], length_scale_bounds=(0.1, 10.0))
    fmap = features.get("glf").build(X, kernel, 30, np.random.default_rng(seed))
    in_memory = QRBasisStatistics.accumulate(fmap, X, y, chunk_size=len(y))
    shares = [QRBasisStatistics.of_chunk(fmap, chunk)
              for chunk in _shuffled_chunks(X, y, None, seed)]
    # a random binary tree, as a Dask reduction would build it
    rng = np.random.default_rng(seed)
    while len(shares) > 1:
        i = int(rng.integers(len(shares) - 1))
        shares[i:i + 2] = [shares[i] + shares[i + 1]]
    _close(shares[0].factor, in_memory.factor)
    _close(shares[0].y_norm2, in_memory.y_norm2)
    assert shares[0].n_samples == len(y)


def test_chunked_objective_equals_in_memory_with_known_variances():
    X, y, variances = _data(5)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = features.get("orf").build(X, kernel, 24, np.random.default_rng(0))
    theta = np.append(kernel.theta, np.log(0.2))
    whole = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=variances,
                               chunk_size=len(y))(theta)
    chunked = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=variances,
                                 chunk_size=7)(theta)
    _close(chunked[0], whole[0])
    _close(chunked[1], whole[1])
