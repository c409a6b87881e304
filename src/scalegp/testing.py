"""Checks that every feature map and engine path must pass, reusable by new maps and tests.

The engine never builds an n x n matrix; these references do, on small data, so that the
engine's streaming algebra can be compared with the dense GP it stands for:

* :func:`dense_gp`: log p(y) and its gradient for K = Psi S Psi^T + s2 I, or any diagonal
  D (R&W eq. 5.9), with :func:`dense_diagonal` the noise models' diagonals;
* :func:`dense_positive_part_gp`: the same for the positive part of Psi S Psi^T
  (``docs/positive-part.md``), with the predictive mean and variance;
* :func:`check_engine_equals_dense`, :func:`check_heteroscedastic_engine_equals_dense`,
  :func:`check_features_grad`, :func:`check_map_protocol`,
  :func:`check_chunked_statistics`: the contract every registered map is held to
  (``tests/test_contract.py`` runs them over the registry);
* :func:`signed_random_fourier_features`: a signed map with a chosen negative part, for the
  engine's signed paths.

Failures raise ``AssertionError`` (numpy.testing), so the checks work in any test runner.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import features, linalg
from .engine.likelihood import MarginalLikelihood, Posterior
from .engine.statistics import Statistics

__all__ = ["dense_gp", "dense_diagonal", "dense_positive_part_gp", "check_engine_equals_dense",
           "check_heteroscedastic_engine_equals_dense",
           "check_features_grad", "check_map_protocol", "check_chunked_statistics",
           "SignedRandomFourierFeatures", "signed_random_fourier_features"]


def dense_gp(Psi, signs, dPsi, y, noise_variance, diagonal=None, diagonal_grad=None):
    """log p(y), its gradient [dPsi directions..., log s2] and K, for K = Psi S Psi^T + D.

    D = s2 I by default, or diag(``diagonal``) with ``diagonal_grad`` (P + 1, n) its
    derivatives in the same directions (the last one log s2). d log p / d theta_i =
    1/2 alpha^T dK_i alpha - 1/2 tr(K^{-1} dK_i) with dK_i = dPsi_i S Psi^T + Psi S dPsi_i^T
    + diag(d D_i), and dK / d log s2 = s2 I for D = s2 I.
    """
    n = len(y)
    S = np.ones(Psi.shape[1]) if signs is None else signs
    if diagonal is None:
        diagonal = np.full(n, float(noise_variance))
        diagonal_grad = np.zeros((len(dPsi) + 1, n))
        diagonal_grad[-1] = noise_variance
    K = (Psi * S) @ Psi.T + np.diag(diagonal)
    sign, logdet = linalg.slogdet(K)
    assert sign > 0 and linalg.eigenvalues(K).min() > 0, "K is not positive definite"
    alpha = linalg.solve(K, y)
    value = -0.5 * y @ alpha - 0.5 * logdet - 0.5 * n * np.log(2 * np.pi)
    K_inv = linalg.solve(K, np.eye(n))
    gradient = []
    for dP, dD in zip(list(dPsi) + [np.zeros_like(Psi)], diagonal_grad):
        dK = (dP * S) @ Psi.T + (Psi * S) @ dP.T + np.diag(dD)
        gradient.append(0.5 * alpha @ dK @ alpha - 0.5 * np.sum(K_inv * dK))
    return value, np.array(gradient), K


def dense_diagonal(feature_map, kernel, X, noise_variance, sample_noise_variance=None,
                   fitc=False):
    """d_i = s2 + v_i [+ max(k(x_i, x_i) - psi_i^T S psi_i, 0)] and its gradient (P + 1, n),
    computed with dense numpy from the features (the reference of :mod:`scalegp.engine.noise`)."""
    Psi, dPsi = feature_map.features(X, kernel), feature_map.features_grad(X, kernel)
    S = np.ones(Psi.shape[1]) if feature_map.signs is None else feature_map.signs
    n = X.shape[0]
    diagonal = np.full(n, float(noise_variance))
    grad = np.zeros((kernel.n_params + 1, n))
    grad[-1] = noise_variance
    if sample_noise_variance is not None:
        diagonal += sample_noise_variance
    if fitc:
        missing = kernel.diag(X) - np.sum(Psi * S * Psi, axis=1)
        diagonal += np.maximum(missing, 0)
        for j in range(kernel.n_params):
            exact_part = kernel.diag_gradient(X)[j]
            grad[j] = np.where(missing > 0, exact_part - 2 * np.sum(Psi * S * dPsi[j], axis=1),
                               0.0)
    return diagonal, grad


def dense_positive_part_gp(Psi, signs, y, noise_variance, Psi_test):
    """log p(y), predictive mean and latent variance of the eigen-clipped GP, the negative
    trace dropped, and the number of positive eigenvalues.

    A = Psi S Psi^T has its negative eigenvalues set to 0 (A+); off the training inputs the
    repaired kernel is psi(x)^T W psi(z) with W = Psi^+ A+ Psi^{+T}, since A+ lies in
    range(Psi).
    """
    A = (Psi * signs) @ Psi.T
    lam, U = linalg.eigh(A)
    A_plus = (U * np.maximum(lam, 0.0)) @ U.T
    K = A_plus + noise_variance * np.eye(len(y))
    sign, logdet = linalg.slogdet(K)
    assert sign > 0, "the repaired covariance is not positive definite"
    alpha = linalg.solve(K, y)
    value = -0.5 * (y @ alpha + logdet + len(y) * np.log(2 * np.pi))
    pinv = linalg.pseudo_inverse(Psi)
    W = pinv @ A_plus @ pinv.T
    K_s = Psi_test @ W @ Psi.T
    mean = K_s @ alpha
    var = np.einsum("ij,jk,ik->i", Psi_test, W, Psi_test) - np.einsum(
        "ij,ji->i", K_s, linalg.solve(K, K_s.T))
    tol = len(y) * np.finfo(float).eps * np.abs(lam).max()
    return value, mean, var, -lam[lam < 0].sum(), int(np.sum(lam > tol))


def check_engine_equals_dense(feature_map, kernel, X, y, noise_variance, X_test):
    """The streaming engine equals the dense GP on K = Psi S Psi^T + s2 I: likelihood (1e-10),
    gradient (1e-8), mean, variance, covariance, the noise and the FITC-style corrections.

    ``noise_variance`` must make K positive definite (a signed rule may need a larger one).
    """
    Psi = feature_map.features(X, kernel)
    value_ref, grad_ref, K = dense_gp(Psi, feature_map.signs,
                                      feature_map.features_grad(X, kernel), y, noise_variance)
    value, grad = MarginalLikelihood(feature_map, kernel, X, y)(
        np.append(kernel.theta, np.log(noise_variance)))
    np.testing.assert_allclose(value, value_ref, rtol=1e-10)
    np.testing.assert_allclose(grad, grad_ref, rtol=1e-8, atol=1e-9 * np.abs(grad_ref).max())

    posterior = Posterior.fit(feature_map, kernel, noise_variance, X, y)
    np.testing.assert_allclose(posterior.log_marginal_likelihood, value_ref, rtol=1e-10)
    Psi_s = feature_map.features(X_test, kernel)
    S = np.ones(Psi.shape[1]) if feature_map.signs is None else feature_map.signs
    K_s = (Psi_s * S) @ Psi.T
    mean_ref = K_s @ linalg.solve(K, y)
    cov_ref = (Psi_s * S) @ Psi_s.T - K_s @ linalg.solve(K, K_s.T)
    mean, var = posterior.predict(X_test, return_var=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(var, np.maximum(np.diag(cov_ref), 0), rtol=1e-8, atol=1e-10)
    _, cov = posterior.predict(X_test, return_cov=True)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-8, atol=1e-10)
    _, var_noisy = posterior.predict(X_test, return_var=True, include_noise=True)
    np.testing.assert_allclose(var_noisy, var + noise_variance, rtol=1e-12)
    _, var_fitc = posterior.predict(X_test, return_var=True, diag_correction=True)
    missing = kernel.diag(X_test) - np.einsum("ij,ij,j->i", Psi_s, Psi_s, S)
    np.testing.assert_allclose(var_fitc, var + np.maximum(missing, 0), rtol=1e-10, atol=1e-12)


def check_heteroscedastic_engine_equals_dense(feature_map, kernel, X, y, noise_variance,
                                             X_test, *, noise, sample_noise_variance=None,
                                             tolerance: float = 1e-10):
    """With a heteroscedastic diagonal (known per-row variances and/or the FITC-style term),
    the engine equals the dense GP on K = Psi S Psi^T + D: log p, gradient, predictive mean and
    latent variance, to ``tolerance`` (relative to each array's largest entry)."""
    Psi = feature_map.features(X, kernel)
    diagonal, diagonal_grad = dense_diagonal(feature_map, kernel, X, noise_variance,
                                             sample_noise_variance, noise.fitc)
    value_ref, grad_ref, K = dense_gp(Psi, feature_map.signs,
                                      feature_map.features_grad(X, kernel), y, noise_variance,
                                      diagonal, diagonal_grad)
    objective = MarginalLikelihood(feature_map, kernel, X, y, noise=noise,
                                   sample_noise_variance=sample_noise_variance)
    value, grad = objective(np.append(kernel.theta, np.log(noise_variance)))
    np.testing.assert_allclose(value, value_ref, rtol=tolerance)
    np.testing.assert_allclose(grad, grad_ref, rtol=0, atol=tolerance * np.abs(grad_ref).max())
    posterior = objective.posterior(np.append(kernel.theta, np.log(noise_variance)))
    np.testing.assert_allclose(posterior.log_marginal_likelihood, value_ref, rtol=tolerance)
    Psi_s = feature_map.features(X_test, kernel)
    S = np.ones(Psi.shape[1]) if feature_map.signs is None else feature_map.signs
    K_s = (Psi_s * S) @ Psi.T
    mean_ref = K_s @ linalg.solve(K, y)
    var_ref = np.sum(Psi_s * S * Psi_s, axis=1) - np.sum(K_s * linalg.solve(K, K_s.T).T,
                                                         axis=1)
    mean, var = posterior.predict(X_test, return_var=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=0, atol=tolerance * np.abs(mean_ref).max())
    np.testing.assert_allclose(var, np.maximum(var_ref, 0), rtol=0,
                               atol=tolerance * np.abs(var_ref).max())


def check_features_grad(feature_map, kernel, X, step: float = 1e-6):
    """features_grad equals central differences of features in every log-parameter."""
    analytic = feature_map.features_grad(X, kernel)
    assert analytic.shape == (kernel.n_params, X.shape[0], feature_map.n_components)
    theta = kernel.theta
    for i in range(kernel.n_params):
        shift = np.zeros_like(theta)
        shift[i] = step
        numeric = (feature_map.features(X, kernel.with_theta(theta + shift))
                   - feature_map.features(X, kernel.with_theta(theta - shift))) / (2 * step)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-5, atol=1e-7)


def check_map_protocol(feature_map, kernel, X, rebuild):
    """Shape, dtype (float32 in, float32 out), signs in {-1, +1}, determinism of
    ``rebuild()`` (the same build call again), completeness of ``to_state()``, input checks."""
    Psi = feature_map.features(X, kernel)
    assert Psi.shape == (X.shape[0], feature_map.n_components) and Psi.dtype == np.float64
    assert feature_map.signs is None or set(np.unique(feature_map.signs)) <= {-1.0, 1.0}
    Psi32 = feature_map.features(X.astype(np.float32), kernel)
    assert Psi32.dtype == np.float32
    np.testing.assert_allclose(Psi32, Psi, atol=1e-4 * max(1.0, np.abs(Psi).max()))
    np.testing.assert_array_equal(rebuild().features(X, kernel), Psi)    # same seed, same map
    rebuilt = type(feature_map).from_state(feature_map.to_state())
    np.testing.assert_array_equal(rebuilt.features(X, kernel), Psi)      # state is complete
    narrow = X[:, :1] if X.shape[1] > 1 else np.hstack([X, X])
    for bad, message in ((narrow, f"X must have {X.shape[1]} column"),
                         (np.full((1, X.shape[1]), np.nan), "X must be finite")):
        try:
            feature_map.features(bad, kernel)
        except ValueError as error:
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"features accepted a bad input ({message})")
    assert type(feature_map).description


def check_chunked_statistics(feature_map, kernel, X, y):
    """Statistics accumulated in chunks, or in two parts added, equal the one-shot ones."""
    one_shot = Statistics.accumulate(feature_map, kernel, X, y, chunk_size=len(y))
    chunked = Statistics.accumulate(feature_map, kernel, X, y, chunk_size=7)
    half = len(y) // 2
    split = (Statistics.accumulate(feature_map, kernel, X[:half], y[:half])
             + Statistics.accumulate(feature_map, kernel, X[half:], y[half:]))
    for other in (chunked, split):
        np.testing.assert_allclose(other.gram, one_shot.gram, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(other.projection, one_shot.projection, rtol=1e-12,
                                   atol=1e-12)
    assert split.n_samples == one_shot.n_samples
    np.testing.assert_allclose(split.y_norm2, one_shot.y_norm2, rtol=1e-12)


@dataclass(frozen=True, eq=False)
class SignedRandomFourierFeatures(features.get("rff")):
    """Random Fourier features with chosen frequency signs and weights (not registered): a
    signed rule whose negative part the tests set, for the engine's signed paths."""


def signed_random_fourier_features(X, kernel, n_components: int, negative_weight: float,
                                   n_negative: int, seed: int = 5):
    """RFF whose first ``n_negative`` frequencies get weight -negative_weight and the others
    share 1 + n_negative * negative_weight, so the total weight (the prior variance) is kept."""
    rff = features.get("rff").build(X, kernel, n_components, np.random.default_rng(seed))
    n = rff.n_frequencies
    signs = np.ones(n)
    signs[:n_negative] = -1.0
    weights = np.full(n, (1.0 + n_negative * negative_weight) / (n - n_negative))
    weights[:n_negative] = negative_weight
    return SignedRandomFourierFeatures(n_dims=X.shape[1], omega=rff.omega,
                                       frequency_weights=weights, offset=rff.offset,
                                       frequency_signs=signs, phase_shifts=rff.phase_shifts)
