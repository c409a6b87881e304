"""Titsias' VFE bound with known per-row noise variances (docs/nystrom.md, Eq. V.4):

    F = log N(y; 0, Q + D) - 1/2 sum_i (k(x_i, x_i) - q_ii) / d_i,   d_i = s2 + v_i,

against a dense computation from kernel matrices; its gradients in theta (the engine's
general pass) and in the knots (the Nystrom map's own pass with weighted rows, and the noise
part's second pass) against finite differences; the bound below the exact GP's likelihood
with the same diagonal and equal to it with every training point as a knot; and the
estimator with ``sample_noise_variance`` learning knots (it dropped the variances there).
"""

import numpy as np
import pytest

import scalegp as sg
from scalegp import kernels
from scalegp.engine import exact
from scalegp.engine.gradients import GeneralPath
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.engine.likelihood import MarginalLikelihood
from scalegp.engine.statistics import accumulate_noise_gradient, features_by_chunk
from scalegp.features import nystrom
from scalegp.inference.knot_learning import LearnedKnotsObjective
from tests.conftest import central_differences

NOISE = 0.05


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(45, 2))
    v = rng.uniform(0.0, 0.4, size=45)
    v[::9] = 0.0                                   # rows without measurement error
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + rng.normal(0, np.sqrt(0.01 + v))
    return X, y, v


def kernel_of(name="matern32"):
    return kernels.get(name, length_scale=np.array([0.8, 1.3]), variance=1.5)


def knot_map(X, m=9, seed=0):
    rng = np.random.default_rng(seed)
    knots = X[rng.choice(len(X), m, replace=False)] + 0.05 * rng.standard_normal((m, 2))
    return nystrom.NystromFeatures(n_dims=2, knots=knots, selection=nystrom.LEARNED)


def dense_bound(kernel, Z, X, y, noise, v):
    """Eq. V.4 from kernel matrices only: Q = K_XZ K_ZZ^{-1} K_ZX, D = diag(s2 + v)."""
    K_XZ = kernel(X, Z)
    Q = K_XZ @ np.linalg.solve(kernel(Z), K_XZ.T)
    d = noise + v
    C = Q + np.diag(d)
    value = -0.5 * (y @ np.linalg.solve(C, y) + np.linalg.slogdet(C)[1]
                    + len(y) * np.log(2 * np.pi))
    return value - 0.5 * np.sum((kernel.diag(X) - np.diag(Q)) / d)


@pytest.mark.parametrize("path", ["map-gradient", "general"])
@pytest.mark.parametrize("name", ["matern32", "gaussian", "matern52"])
@pytest.mark.parametrize("chunk_size, n_jobs", [(None, 1), (7, 1), (7, 3)])
def test_bound_and_theta_gradient_against_dense_and_differences(path, name, chunk_size, n_jobs,
                                                                data):
    """Both gradient paths that take known variances: Nystrom's own pass (its choice) with
    weighted rows and the noise part's pass, and the engine's general pass."""
    X, y, v = data
    kernel = kernel_of(name)
    fmap = knot_map(X)
    engine = MarginalLikelihood(fmap, Hyperparameters(kernel, NOISE), X, y,
                                sample_noise_variance=v, variational=True,
                                chunk_size=chunk_size, n_jobs=n_jobs)
    assert engine.gradient_path.name == "map-gradient"
    if path == "general":
        engine.gradient_path = GeneralPath(engine.feature_budget, True, homoscedastic=False)
    theta = engine.hyperparameters.theta
    value, gradient = engine(theta)
    assert value == pytest.approx(dense_bound(kernel, fmap.knots, X, y, NOISE, v), rel=1e-10)

    def dense(t):
        k, s2 = engine.hyperparameters.values(t)
        return dense_bound(k, fmap.knots, X, y, s2, v)

    reference = central_differences(dense, theta)
    # central differences of a smooth function at step 1e-6: error ~ 1e-6 relative
    np.testing.assert_allclose(gradient, reference, rtol=0,
                               atol=1e-6 * np.abs(reference).max())


def test_the_ignored_variances_change_the_bound(data):
    """The bound uses v: ignoring it gives another value (the test above cannot pass by a
    path that drops v), and v = 0 on every row gives the homoscedastic bound and gradient."""
    X, y, v = data
    kernel, fmap = kernel_of(), knot_map(X)
    theta = np.append(kernel.theta, np.log(NOISE))
    with_v = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=v,
                                variational=True)(theta)
    without = MarginalLikelihood(fmap, kernel, X, y, variational=True)(theta)
    zeros = MarginalLikelihood(fmap, kernel, X, y, sample_noise_variance=np.zeros(len(y)),
                               variational=True)(theta)
    assert abs(with_v[0] - without[0]) > 1.0
    assert zeros[0] == pytest.approx(without[0], rel=1e-12)
    np.testing.assert_allclose(zeros[1], without[1], rtol=0,
                               atol=1e-10 * np.abs(without[1]).max())


def test_bound_is_below_the_exact_likelihood_and_tight_at_all_points(data):
    X, y, v = data
    rng = np.random.default_rng(5)
    for trial in range(5):
        kernel = kernels.get("matern32", length_scale=np.exp(rng.uniform(-1, 1, 2)),
                             variance=float(np.exp(rng.uniform(-1, 1))))
        noise = float(np.exp(rng.uniform(-4, -1)))
        theta = np.append(kernel.theta, np.log(noise))
        exact_value = exact.ExactMarginalLikelihood(
            Hyperparameters(kernel, noise), X, y, sample_noise_variance=v)(theta)[0]
        bound = MarginalLikelihood(knot_map(X, m=int(rng.integers(3, 20)), seed=trial), kernel,
                                   X, y, sample_noise_variance=v, variational=True).value(theta)
        assert bound < exact_value
    kernel = kernel_of()
    theta = np.append(kernel.theta, np.log(NOISE))
    every = nystrom.NystromFeatures.build(X, kernel, None, knots=X)
    cond = every.diagnostics(kernel)["knot_condition_number"]
    tolerance = 10 * np.finfo(float).eps * cond          # Q = K up to solves with K_ZZ
    assert tolerance < 1e-8, cond
    ex = exact.ExactMarginalLikelihood(Hyperparameters(kernel, NOISE), X, y,
                                       sample_noise_variance=v)
    value_ref, grad_ref = ex(theta)
    value, grad = MarginalLikelihood(every, kernel, X, y, sample_noise_variance=v,
                                     variational=True)(theta)
    assert value == pytest.approx(value_ref, rel=tolerance)
    np.testing.assert_allclose(grad, grad_ref, rtol=0, atol=tolerance * np.abs(grad_ref).max())


@pytest.mark.parametrize("chunk_size, n_jobs", [(None, 1), (8, 2)])
def test_knot_objective_gradient_against_differences(chunk_size, n_jobs, data):
    """p = [theta..., vec(Z)]: the weighted rows of the Nystrom map's own pass (kernel part
    and knots) and the noise part's second pass, against central differences of the bound."""
    X, y, v = data
    objective = LearnedKnotsObjective(knot_map(X), Hyperparameters(kernel_of(), NOISE), X, y,
                                      sample_noise_variance=v, chunk_size=chunk_size,
                                      n_jobs=n_jobs)
    p = objective.start()
    value, gradient = objective(p)
    reference = central_differences(objective.value, p)
    np.testing.assert_allclose(gradient, reference, rtol=0,
                               atol=1e-6 * np.abs(reference).max())
    assert value == pytest.approx(
        dense_bound(kernel_of(), objective.feature_map(p).knots, X, y, NOISE, v), rel=1e-10)


def test_noise_part_refuses_the_fitc_diagonal(data):
    X, y, v = data
    engine = MarginalLikelihood(knot_map(X), kernel_of(), X, y, sample_noise_variance=v)
    at_map, _, _, system, _ = engine.conditioned(engine.hyperparameters.theta)
    with pytest.raises(ValueError, match="without the FITC term"):
        accumulate_noise_gradient(at_map, features_by_chunk(at_map, engine.source), system,
                                  noise=sg.engine.noise.FITC)


def test_estimator_learns_knots_with_known_variances():
    """Nystrom-VFE with learned knots and known variances learns s2 near the unknown part
    (0.01; ignoring v it takes up their mean, about 0.2) and a bound near the exact GP's
    likelihood; before the fix the fit passed the variances to theta's learning but not to
    the knots', which then learned s2 = 0.21, as if it ignored them."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (300, 2))
    v = rng.uniform(0, 0.4, 300)
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + rng.normal(0, np.sqrt(0.01 + v))
    options = dict(normalize_y=False, random_state=0)
    approximation = sg.Nystrom(n_components=40, knots="random", objective="vfe", learn_knots=60)
    with pytest.warns(sg.errors.ConvergenceWarning):      # 60 iterations: not converged
        model = sg.LowRankGPRegressor(approximation=approximation, **options).fit(
            X, y, sample_noise_variance=v)
    ignoring = sg.LowRankGPRegressor(approximation=approximation, **options)
    with pytest.warns(sg.errors.ConvergenceWarning):
        ignoring.fit(X, y)
    exact_model = sg.ExactGPRegressor(normalize_y=False).fit(X, y, sample_noise_variance=v)
    assert 0.003 < model.noise_variance_ < 0.03
    assert ignoring.noise_variance_ > 0.1
    bound, exact_value = model.log_marginal_likelihood_value_, \
        exact_model.log_marginal_likelihood_value_
    assert exact_value - 2.0 < bound < exact_value
