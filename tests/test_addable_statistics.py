"""Statistics are sums over rows of pure functions of a chunk (docs/engine.md, "Statistics"):
computed chunk by chunk and summed in a random order they equal the in-memory ones to 1e-12,
for the likelihood statistics, the gradient's shares and the QR R-factor."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.engine import gradients
from scalegp.data.base import Chunk, IterableSource, as_source
from scalegp.engine.statistics import (KeptFeatures, Statistics, accumulate_gradient,
                                       chunk_gradient, chunk_statistics)
from scalegp.engine.likelihood import MarginalLikelihood
from scalegp.engine.noise import FITC, HOMOSCEDASTIC
from scalegp.engine.qr import QRBasisStatistics
from scalegp.engine.systems import FactorizedSystem
from scalegp.testing import signed_random_fourier_features

CHUNK_ROWS = 13
SEEDS = (0, 1, 2)


def _data(seed=0, n=200):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y, rng.uniform(0.0, 0.3, size=n)


def _iterable_source(X, y, variances, seed):
    """The rows as user blocks of random sizes (1 to 40 rows), re-blocked by the source."""
    cuts = np.cumsum(np.random.default_rng(50 + seed).integers(1, 41, size=len(y)))
    cuts = [0] + [int(c) for c in cuts[cuts < len(y)]] + [len(y)]
    blocks = [(X[a:b], y[a:b]) + (() if variances is None else (variances[a:b],))
              for a, b in zip(cuts[:-1], cuts[1:])]
    return IterableSource(blocks)


def _shuffled_chunks(X, y, variances, seed):
    chunks = list(_iterable_source(X, y, variances, seed).chunks(CHUNK_ROWS))
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
    gradient = accumulate_gradient(at_map, as_source(X, y, sample_noise_variance=variances), system,
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


@pytest.mark.parametrize("name", ["orf", "glf"])
def test_objective_on_an_iterable_source_equals_in_memory(name):
    """The whole objective (value, gradient, posterior) from an iterable source of blocks, with
    known per-row variances and without."""
    X, y, variances = _data(5)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1], length_scale_bounds=(0.1, 10.0))
    fmap = features.get(name).build(X, kernel, 24, np.random.default_rng(0))
    theta = np.append(kernel.theta, np.log(0.2))
    for v in (None, variances):
        whole = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=v,
                                   chunk_size=len(y))
        streamed = MarginalLikelihood(fmap, kernel, _iterable_source(X, y, v, 0), chunk_size=7)
        for (value, grad), (ref_value, ref_grad) in ((streamed(theta), whole(theta)),):
            _close(value, ref_value)
            _close(grad, ref_grad)
        _close(streamed.posterior(theta).predict(X[:5]), whole.posterior(theta).predict(X[:5]))


@pytest.mark.parametrize("budget", [0, 5_000, 10**9], ids=["none", "overflows", "all"])
def test_gradient_pass_with_and_without_kept_features(budget, monkeypatch):
    """The gradient pass reuses the statistics pass's features when they fit the budget, and
    recomputes them (the same numbers) when they do not, or stop fitting half way."""
    X, y, variances = _data(6)
    kernel = sg.Matern(nu=2.5, length_scale=[0.8, 1.1])
    fmap = features.get("rff").build(X, kernel, 25, np.random.default_rng(0))
    theta = np.append(kernel.theta, np.log(0.2))
    reference = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=variances,
                                   chunk_size=16)(theta)
    monkeypatch.setattr(gradients, "feature_cache_budget", lambda dtype: budget)
    objective = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=variances,
                                   chunk_size=16)
    calls = []
    original = type(fmap.at(kernel)).features
    monkeypatch.setattr(type(fmap.at(kernel)), "features",
                        lambda self, X: calls.append(len(X)) or original(self, X))
    value, grad = objective(theta)
    _close(value, reference[0])
    _close(grad, reference[1])
    evaluated = sum(calls)
    assert evaluated == (len(y) if budget == 10**9 else 2 * len(y))   # one pass or two


def _chunk_at(start, rows=1):
    return Chunk(np.zeros((rows, 1)), np.zeros(rows), None, start)


def test_kept_features_drop_everything_past_the_budget():
    kept = KeptFeatures(budget=100)
    kept.add(_chunk_at(0), np.zeros(10))
    assert kept.complete and len(kept.items) == 1
    kept.add(_chunk_at(1), np.zeros(10))
    assert not kept.complete and kept.items == []
    kept.add(_chunk_at(2), np.zeros(1))
    assert kept.items == []


def test_kept_features_are_in_row_order_whatever_order_threads_add_them():
    kept = KeptFeatures(budget=10**6)
    for start in (4, 0, 8, 2):
        kept.add(_chunk_at(start, 2), np.full(3, start))
    assert [chunk.start for chunk, _ in kept.items] == [0, 2, 4, 8]
    assert [Psi[0] for _, Psi in kept.items] == [0, 2, 4, 8]
