"""The exact reference against scikit-learn's GaussianProcessRegressor."""

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk

import scalegp as sg
from scalegp.engine.hyperparameters import Hyperparameters

NOISE = 0.05


def data(seed, n=80, d=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) + 0.5 * np.cos(3 * X[:, -1]) + 0.2 * rng.standard_normal(n)
    return X, y, rng.uniform(-2, 2, size=(30, d))


def kernel_pairs(scale=(0.7, 1.4), variance=1.3, bounds=(1e-2, 1e2)):
    scale = np.asarray(scale)
    ours = [sg.Gaussian(length_scale=scale, variance=variance, length_scale_bounds=bounds,
                        variance_bounds=bounds)]
    theirs = [skk.ConstantKernel(variance, bounds) * skk.RBF(scale, bounds)]
    for nu in (0.5, 1.5, 2.5):
        ours.append(sg.Matern(nu=nu, length_scale=scale, variance=variance,
                              length_scale_bounds=bounds, variance_bounds=bounds))
        theirs.append(skk.ConstantKernel(variance, bounds) * skk.Matern(scale, bounds, nu=nu))
    return list(zip(ours, theirs))


IDS = ["rbf", "matern12", "matern32", "matern52"]


@pytest.mark.parametrize("ours, theirs", kernel_pairs(), ids=IDS)
def test_exact_gp_agrees_with_scikit_learn_at_fixed_hyperparameters(ours, theirs):
    X, y, Xs = data(0)
    reference = GaussianProcessRegressor(theirs, alpha=NOISE, optimizer=None).fit(X, y)
    mean_ref, std_ref = reference.predict(Xs, return_std=True)
    posterior = sg.ExactPosterior.fit(ours, NOISE, X, y)
    mean, var = posterior.predict(Xs, return_var=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(np.sqrt(var), std_ref, rtol=1e-8)
    assert posterior.log_marginal_likelihood == pytest.approx(
        reference.log_marginal_likelihood_value_, rel=1e-8)
    value, grad = sg.engine.exact.log_marginal_likelihood(ours, NOISE, X, y, eval_gradient=True)
    _, grad_ref = reference.log_marginal_likelihood(theirs.theta, eval_gradient=True)
    # scikit-learn orders (constant, length scales); ours (length scales, variance, noise)
    np.testing.assert_allclose(grad[:-2], grad_ref[1:], rtol=1e-7)
    assert grad[-2] == pytest.approx(grad_ref[0], rel=1e-7)


@pytest.mark.parametrize("ours, theirs", kernel_pairs(), ids=IDS)
def test_optimizing_from_same_start_reaches_scikit_learn_likelihood(ours, theirs):
    X, y, _ = data(1)
    reference = GaussianProcessRegressor(theirs, alpha=NOISE, n_restarts_optimizer=0).fit(X, y)
    objective = sg.ExactMarginalLikelihood(ours, X, y)
    _, result = sg.learn_hyperparameters(objective, Hyperparameters(ours, NOISE, "fixed"))
    assert result.log_marginal_likelihood == pytest.approx(
        reference.log_marginal_likelihood_value_, abs=1e-4)


@pytest.mark.parametrize("kernel", [
    sg.Gaussian(length_scale=[0.6, 1.2], variance=1.4),
    sg.Matern(nu=1.5, length_scale=[0.6, 1.2]),
    sg.Cauchy(length_scale=[0.6, 1.2], variance=0.7),
    sg.Laplacian(length_scale=0.8, variance=1.1),
], ids=["gaussian", "matern32", "cauchy", "laplacian"])
def test_exact_gradient_matches_finite_differences(kernel):
    X, y, _ = data(2, n=40)
    objective = sg.ExactMarginalLikelihood(kernel, X, y)
    theta = np.append(kernel.theta, np.log(0.1))
    _, grad = objective(theta)
    eps = 1e-6
    numeric = [(objective(theta + eps * e)[0] - objective(theta - eps * e)[0]) / (2 * eps)
               for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-7)


def test_full_covariance_matches_variance():
    X, y, Xs = data(3)
    posterior = sg.ExactPosterior.fit(sg.Matern(nu=2.5, length_scale=0.9), NOISE, X, y)
    _, cov = posterior.predict(Xs, return_cov=True, include_noise=True)
    _, var = posterior.predict(Xs, return_var=True, include_noise=True)
    np.testing.assert_allclose(np.diag(cov), var, rtol=1e-10)
