"""Contract tests run over every registered feature map (``features.names()``): a new map is
covered automatically. For each map and each kernel it supports, the streaming engine must
equal the dense GP built from K = Psi S Psi^T + s2 I (mean, variance, likelihood, gradient),
features_grad must match finite differences, and the map must respect its own protocol."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.errors import NotPositiveDefiniteError
from scalegp.engine.likelihood import Posterior
from scalegp.testing import (check_chunked_statistics, check_engine_equals_dense,
                             check_features_grad, check_map_protocol)

from .conftest import map_kernel_cases

NOISE = 0.3
N_COMPONENTS = 24


def build(name, kernel, X, seed=0):
    return features.get(name).build(X, kernel, N_COMPONENTS, np.random.default_rng(seed))


@pytest.mark.parametrize("name, kernel", list(map_kernel_cases()))
def test_engine_equals_dense_gp(name, kernel, regression_data):
    X, y = regression_data
    fmap = build(name, kernel, X)
    Psi = fmap.features(X, kernel)
    noise = NOISE
    if fmap.signs is not None:
        # A signed rule can make Psi S Psi^T + s2 I indefinite at this tiny budget: then the
        # engine must refuse clearly; the equality is checked at the first s2 where K is PD.
        S = fmap.signs
        while np.linalg.eigvalsh((Psi * S) @ Psi.T + noise * np.eye(len(y))).min() <= 0:
            with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
                Posterior.fit(fmap, kernel, noise, X, y)
            noise *= 4.0
    check_engine_equals_dense(fmap, kernel, X, y, noise,
                              np.random.default_rng(1).uniform(-2, 2, size=(15, 2)))


@pytest.mark.parametrize("name, kernel", list(map_kernel_cases()))
def test_features_grad_matches_finite_differences(name, kernel, regression_data):
    X, _ = regression_data
    check_features_grad(build(name, kernel, X), kernel, X[:20])


@pytest.mark.parametrize("name, kernel", list(map_kernel_cases()))
def test_map_protocol(name, kernel, regression_data):
    X, _ = regression_data
    check_map_protocol(build(name, kernel, X), kernel, X, lambda: build(name, kernel, X))


@pytest.mark.parametrize("name, kernel", [
    case for case in map_kernel_cases()
    if issubclass(features.get(case.values[0]), features.FixedBasisFeatureMap)])
def test_fixed_basis_does_not_depend_on_theta(name, kernel, regression_data):
    X, _ = regression_data
    fmap = build(name, kernel, X)
    other = kernel.with_theta(kernel.theta + 0.3)
    np.testing.assert_array_equal(fmap.basis(X), fmap.basis(X))
    Psi, Psi_other = fmap.features(X, kernel), fmap.features(X, other)
    np.testing.assert_allclose(Psi_other, fmap.basis(X) * np.sqrt(fmap.weights(other)),
                               rtol=1e-12)
    assert not np.allclose(Psi, Psi_other)


@pytest.mark.parametrize("name, kernel", list(map_kernel_cases()))
def test_chunked_statistics_equal_one_shot(name, kernel, regression_data):
    X, y = regression_data
    check_chunked_statistics(build(name, kernel, X), kernel, X, y)


def test_registry_lists_and_rejects():
    assert "rff" in features.names()
    assert features.get("rff").name == "rff"
    with pytest.raises(ValueError, match="approximation must be one of .*rff.*; got 'nope'"):
        features.get("nope")
    assert set(features.describe()) == set(features.names())
    assert sg.features is features
