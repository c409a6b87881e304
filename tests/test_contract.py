"""Contract tests run over every registered feature map (``features.names()``): a new map is
covered automatically. For each map and each kernel it supports, the streaming engine must
equal the dense GP built from K = Psi S Psi^T + s2 I (mean, variance, likelihood, gradient),
features_grad must match finite differences, and the map must respect its own protocol."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.errors import NotPositiveDefiniteError
from scalegp.gp import MarginalLikelihood, Posterior, Statistics

from .conftest import all_kernels, kernel_id

NOISE = 0.3
N_COMPONENTS = 24


def cases():
    for name in features.names():
        cls = features.get(name)
        for kernel in all_kernels(2, ard=True) + all_kernels(2, ard=False)[:1]:
            if cls.supports(kernel):
                yield pytest.param(name, kernel, id=f"{name}-{kernel_id(kernel)}")


def build(name, kernel, X, seed=0):
    return features.get(name).build(X, kernel, N_COMPONENTS, np.random.default_rng(seed))


def dense_reference(Psi, signs, dPsi, y, noise):
    """Dense GP on K = Psi S Psi^T + s2 I: log p(y) and gradient (R&W eq. 5.9)."""
    S = np.ones(Psi.shape[1]) if signs is None else signs
    K = (Psi * S) @ Psi.T + noise * np.eye(len(y))
    sign, logdet = np.linalg.slogdet(K)
    assert sign > 0 and np.linalg.eigvalsh(K).min() > 0
    alpha = np.linalg.solve(K, y)
    value = -0.5 * y @ alpha - 0.5 * logdet - 0.5 * len(y) * np.log(2 * np.pi)
    K_inv = np.linalg.inv(K)    # the dense reference of a test, small n
    grads = []
    for dP in dPsi:
        dK = (dP * S) @ Psi.T + (Psi * S) @ dP.T
        grads.append(0.5 * alpha @ dK @ alpha - 0.5 * np.trace(K_inv @ dK))
    grads.append(noise * (0.5 * alpha @ alpha - 0.5 * np.trace(K_inv)))
    return value, np.array(grads), K


@pytest.mark.parametrize("name, kernel", list(cases()))
def test_engine_equals_dense_gp(name, kernel, regression_data):
    X, y = regression_data
    fmap = build(name, kernel, X)
    Psi = fmap.features(X, kernel)
    dPsi = fmap.features_grad(X, kernel)
    noise = NOISE
    if fmap.signs is not None:
        # A signed rule can make Psi S Psi^T + s2 I indefinite at this tiny budget: then the
        # engine must refuse clearly; the equality is checked at the first s2 where K is PD.
        S = fmap.signs
        while np.linalg.eigvalsh((Psi * S) @ Psi.T + noise * np.eye(len(y))).min() <= 0:
            with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
                Posterior.fit(fmap, kernel, noise, X, y)
            noise *= 4.0
    value_ref, grad_ref, K = dense_reference(Psi, fmap.signs, dPsi, y, noise)

    likelihood = MarginalLikelihood(fmap, kernel, X, y)
    value, grad = likelihood(np.append(kernel.theta, np.log(noise)))
    assert value == pytest.approx(value_ref, rel=1e-10)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-8, atol=1e-9 * np.abs(grad_ref).max())

    posterior = Posterior.fit(fmap, kernel, noise, X, y)
    assert posterior.log_marginal_likelihood == pytest.approx(value_ref, rel=1e-10)
    Xs = np.random.default_rng(1).uniform(-2, 2, size=(15, 2))
    Psi_s = fmap.features(Xs, kernel)
    S = np.ones(Psi.shape[1]) if fmap.signs is None else fmap.signs
    K_s = (Psi_s * S) @ Psi.T
    mean_ref = K_s @ np.linalg.solve(K, y)
    cov_ref = (Psi_s * S) @ Psi_s.T - K_s @ np.linalg.solve(K, K_s.T)
    mean, var = posterior.predict(Xs, return_var=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(var, np.maximum(np.diag(cov_ref), 0), rtol=1e-8, atol=1e-10)
    mean_cov, cov = posterior.predict(Xs, return_cov=True)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-8, atol=1e-10)
    _, var_noisy = posterior.predict(Xs, return_var=True, include_noise=True)
    np.testing.assert_allclose(var_noisy, var + noise, rtol=1e-12)
    _, var_fitc = posterior.predict(Xs, return_var=True, diag_correction=True)
    missing = kernel.diag(Xs) - np.einsum("ij,ij,j->i", Psi_s, Psi_s, S)
    np.testing.assert_allclose(var_fitc, var + np.maximum(missing, 0), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, kernel", list(cases()))
def test_features_grad_matches_finite_differences(name, kernel, regression_data):
    X, _ = regression_data
    fmap = build(name, kernel, X)
    analytic = fmap.features_grad(X[:20], kernel)
    assert analytic.shape == (kernel.n_params, 20, fmap.n_components)
    theta, eps = kernel.theta, 1e-6
    for i in range(kernel.n_params):
        step = np.zeros_like(theta)
        step[i] = eps
        numeric = (fmap.features(X[:20], kernel.with_theta(theta + step))
                   - fmap.features(X[:20], kernel.with_theta(theta - step))) / (2 * eps)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name, kernel", list(cases()))
def test_map_protocol(name, kernel, regression_data):
    X, _ = regression_data
    fmap = build(name, kernel, X)
    Psi = fmap.features(X, kernel)
    assert Psi.shape == (X.shape[0], fmap.n_components) and Psi.dtype == np.float64
    assert fmap.signs is None or set(np.unique(fmap.signs)) <= {-1.0, 1.0}
    Psi32 = fmap.features(X.astype(np.float32), kernel)
    assert Psi32.dtype == np.float32
    np.testing.assert_allclose(Psi32, Psi, atol=1e-4 * max(1.0, np.abs(Psi).max()))
    again = features.get(name).build(X, kernel, N_COMPONENTS, np.random.default_rng(0))
    np.testing.assert_array_equal(again.features(X, kernel), Psi)    # same seed, same map
    rebuilt = type(fmap)(**fmap.state())
    np.testing.assert_array_equal(rebuilt.features(X, kernel), Psi)  # state is complete
    with pytest.raises(ValueError, match="X must have 2 column"):
        fmap.features(X[:, :1], kernel)
    with pytest.raises(ValueError, match="X must be finite"):
        fmap.features(np.array([[0.0, np.nan]]), kernel)
    assert features.get(name).description


@pytest.mark.parametrize("name, kernel", [
    case for case in cases()
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


@pytest.mark.parametrize("name, kernel", list(cases()))
def test_chunked_statistics_equal_one_shot(name, kernel, regression_data):
    X, y = regression_data
    fmap = build(name, kernel, X)
    one_shot = Statistics.accumulate(fmap, kernel, X, y, chunk_size=len(y))
    chunked = Statistics.accumulate(fmap, kernel, X, y, chunk_size=7)
    np.testing.assert_allclose(chunked.gram, one_shot.gram, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(chunked.projection, one_shot.projection, rtol=1e-12, atol=1e-12)
    split = (Statistics.accumulate(fmap, kernel, X[:25], y[:25])
             + Statistics.accumulate(fmap, kernel, X[25:], y[25:]))
    np.testing.assert_allclose(split.gram, one_shot.gram, rtol=1e-12, atol=1e-12)
    assert split.n_samples == one_shot.n_samples and split.y_norm2 == pytest.approx(one_shot.y_norm2)


def test_registry_lists_and_rejects():
    assert "rff" in features.names()
    assert features.get("rff").name == "rff"
    with pytest.raises(ValueError, match="approximation must be one of .*rff.*; got 'nope'"):
        features.get("nope")
    assert set(features.describe()) == set(features.names())
    assert sg.features is features
