"""Vecchia prediction and learning against the exact GP.

At m = N each test point conditions on every training point, so the independent predictive
is the exact GP's; the joint predictive at m >= N + n - 1 conditions each test point on all
training and all earlier test points, the chain rule of the exact joint posterior. Both to
1e-8. At small m the errors are measured (stated below), and must shrink with m.
"""

import itertools

import numpy as np
import pytest

from scalegp.engine.exact import ExactMarginalLikelihood, ExactPosterior
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.kernels import Gaussian, Matern
from scalegp.inference.optimize import learn_hyperparameters
from scalegp.vecchia import (
    VecchiaGP,
    fit_vecchia,
    predict,
    predict_joint,
    prediction,
    sample,
    vecchia_log_likelihood,
)

NOISE = 0.05
KERNELS = [Gaussian(length_scale=0.4, variance=1.3),
           Matern(nu=0.5, length_scale=[0.3, 0.5], variance=1.3),
           Matern(nu=1.5, length_scale=[0.3, 0.5], variance=1.3)]


def data(n=80, n_test=15, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2))
    y = np.sin(5 * X[:, 0]) + X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y - y.mean(), rng.uniform(size=(n_test, 2))


@pytest.mark.parametrize("kernel", KERNELS, ids=["gaussian", "matern12", "matern32"])
def test_all_neighbours_give_the_exact_predictive(kernel):
    X, y, X_test = data()
    exact = ExactPosterior.fit(kernel, NOISE, X, y)
    for include_noise in (False, True):
        mean, var = predict(kernel, NOISE, X, y, X_test, len(X), return_var=True,
                            include_noise=include_noise)
        exact_mean, exact_var = exact.predict(X_test, return_var=True,
                                              include_noise=include_noise)
        np.testing.assert_allclose(mean, exact_mean, rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(var, exact_var, rtol=1e-8, atol=1e-8)
    joint_mean, F = predict_joint(kernel, NOISE, X, y, X_test, len(X) + len(X_test))
    exact_mean, exact_cov = exact.predict(X_test, return_cov=True)
    np.testing.assert_allclose(joint_mean, exact_mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(F @ F.T, exact_cov, rtol=1e-8, atol=1e-8)
    assert np.allclose(F, np.tril(F))


def test_accuracy_at_small_m():
    # measured max errors against the exact GP (mean; latent variance; joint covariance):
    # m = 5: 0.150, 0.055, 0.025; m = 10: 0.057, 0.0082, 0.0090; m = 20: 0.019, 0.0023, 0.0017
    X, y, X_test = data()
    kernel = KERNELS[2]
    exact = ExactPosterior.fit(kernel, NOISE, X, y)
    exact_mean, exact_var = exact.predict(X_test, return_var=True)
    _, exact_cov = exact.predict(X_test, return_cov=True)
    errors = []
    for m in (5, 10, 20):
        mean, var = predict(kernel, NOISE, X, y, X_test, m, return_var=True)
        _, F = predict_joint(kernel, NOISE, X, y, X_test, m)
        errors.append([np.abs(mean - exact_mean).max(), np.abs(var - exact_var).max(),
                       np.abs(F @ F.T - exact_cov).max()])
    errors = np.array(errors)
    assert np.all(np.diff(errors, axis=0) < 0)
    assert np.all(errors[-1] < [0.03, 0.004, 0.003])


def test_threads_and_points_are_independent():
    X, y, X_test = data(n_test=1200)
    kernel = KERNELS[1]
    serial = predict(kernel, NOISE, X, y, X_test, 10, return_var=True)
    threaded = predict(kernel, NOISE, X, y, X_test, 10, return_var=True, n_jobs=2)
    np.testing.assert_array_equal(serial, threaded)
    alone = predict(kernel, NOISE, X, y, X_test[7:8], 10, return_var=True)
    np.testing.assert_allclose(np.ravel(alone), [serial[0][7], serial[1][7]], rtol=1e-12)


def test_batches_ask_the_tree_for_their_own_neighbours(monkeypatch):
    """Each batch of test points queries the tree itself (memory O(batch m) at millions of
    test points): any batch size gives the predictive of the one-query neighbour sets."""
    X, y, X_test = data(n_test=300)
    kernel = KERNELS[1]
    default = predict(kernel, NOISE, X, y, X_test, 12, return_var=True)
    monkeypatch.setattr(prediction, "POINTS_PER_TASK", 7)
    np.testing.assert_array_equal(predict(kernel, NOISE, X, y, X_test, 12, return_var=True),
                                  default)
    near = prediction.training_neighbors(kernel, X, X_test, 12)
    j = 123
    K = kernel(X[near[j]]) + NOISE * np.eye(12)
    k = kernel(X[near[j]], X_test[j:j + 1])[:, 0]
    np.testing.assert_allclose(default[0][j], k @ np.linalg.solve(K, y[near[j]]), rtol=1e-10)
    np.testing.assert_allclose(default[1][j], kernel.diag(X_test[j:j + 1])[0]
                               - k @ np.linalg.solve(K, k), rtol=1e-8, atol=1e-12)


def test_sample_draws_from_the_joint_predictive():
    X, y, X_test = data()
    kernel = KERNELS[2]
    mean, F = predict_joint(kernel, NOISE, X, y, X_test, 10)
    draws = sample(kernel, NOISE, X, y, X_test, 10, 3, rng=4)
    expected = mean[:, None] + F @ np.random.default_rng(4).standard_normal((len(X_test), 3))
    np.testing.assert_allclose(draws, expected, rtol=1e-12)
    noisy = sample(kernel, NOISE, X, y, X_test, 10, 4000, rng=5, include_noise=True)
    # the spread of noisy draws: latent variance + s2, within 5 standard errors
    expected_var = np.sum(F**2, axis=1) + NOISE
    assert np.all(np.abs(noisy.var(axis=1) / expected_var - 1) < 5 * np.sqrt(2 / 4000))


def test_prediction_rejects_bad_input(monkeypatch):
    X, y, X_test = data()
    kernel = KERNELS[0]
    with pytest.raises(ValueError, match="X_test"):
        predict(kernel, NOISE, X, y, X_test[:, :1], 5)
    with pytest.raises(ValueError, match="m must"):
        predict(kernel, NOISE, X, y, X_test, 0)
    monkeypatch.setattr(prediction, "MAX_JOINT", 10)
    with pytest.raises(ValueError, match="at most 10 rows"):
        predict_joint(kernel, NOISE, X, y, X_test, 5)


def test_learning_at_full_sets_finds_the_exact_optimum():
    X, y, _ = data(120)
    start = Matern(nu=1.5, length_scale=[1.0, 1.0])
    model = fit_vecchia(X, y, start, 0.1, m=119, noise_variance_bounds=(1e-4, 10.0))
    hyperparameters = Hyperparameters(start, 0.1, (1e-4, 10.0))
    exact, _ = learn_hyperparameters(ExactMarginalLikelihood(hyperparameters, X, y),
                                     hyperparameters)
    # both optimize the same function from the same start; L-BFGS-B's tolerances
    np.testing.assert_allclose(model.hyperparameters_.theta, exact.theta, atol=1e-3)
    assert model.log_likelihood() == pytest.approx(
        ExactMarginalLikelihood(exact, X, y).value(exact.theta), abs=1e-6)


def test_learning_rebuilds_the_structure_when_the_scales_move():
    X, y, X_test = data(400)
    model = VecchiaGP(Matern(nu=1.5, length_scale=[5.0, 5.0]), 0.5, 10, max_structures=3)
    model.fit(X, y)
    # the structure depends on the shape of l only (l / its geometric mean): from [5, 5]
    # the learned shape moves by more than the factor 2, so the stage is run again on a
    # rebuilt structure
    history = model.history
    assert 2 <= len(history) <= 3 and history[0]["shape_factor"] > 2
    for before, after in itertools.pairwise(history):     # each rebuild at the learned scales
        assert before["shape_factor"] > 2 and after["stage"] == before["stage"]
        np.testing.assert_allclose(after["structure_length_scale"], before["length_scale"])
    np.testing.assert_allclose(model.structure_.length_scale,
                               history[-1]["structure_length_scale"])
    np.testing.assert_allclose(history[-1]["length_scale"], model.kernel_.length_scale)
    assert history[-1]["shape_factor"] <= 2 or len(history) == 3
    for record in history:
        ratio = np.array(record["length_scale"]) / record["structure_length_scale"]
        assert record["shape_factor"] == pytest.approx(
            np.exp(np.max(np.abs(np.log(ratio) - np.log(ratio).mean()))))
    mean, var = model.predict(X_test, return_var=True, include_noise=True)
    assert np.all(var > model.noise_variance_)
    fixed = VecchiaGP(model.kernel_, model.noise_variance_, 10).fit(X, y, learn=False)
    assert fixed.kernel_ == model.kernel_ and fixed.history == []
    assert fixed._structure_ is None                  # prediction builds no structure
    np.testing.assert_allclose(fixed.structure_.length_scale, model.kernel_.length_scale)
    assert fixed.log_likelihood() == pytest.approx(vecchia_log_likelihood(
        model.kernel_, model.noise_variance_, X, y, fixed.structure_), rel=1e-12)
    np.testing.assert_allclose(fixed.predict(X_test), mean, rtol=1e-12)
    assert fixed.sample(X_test, 2, rng=0).shape == (len(X_test), 2)


def test_a_uniform_change_of_the_length_scales_keeps_the_structure():
    X, y, _ = data(300)
    # the structure at l and at c l is the same: orderings and neighbours compare distances
    for ordering in ("maximin", "grid-maximin", "coordinate"):
        a = VecchiaGP(Matern(nu=1.5, length_scale=[0.3, 0.6]), 0.1, 8, ordering=ordering)
        b = VecchiaGP(Matern(nu=1.5, length_scale=[0.75, 1.5]), 0.1, 8, ordering=ordering)
        a.fit(X, y, learn=False), b.fit(X, y, learn=False)
        np.testing.assert_array_equal(a.structure_.order, b.structure_.order)
        np.testing.assert_array_equal(a.structure_.neighbors, b.structure_.neighbors)
    # one shared length scale never changes the structure: learning from a start about 10
    # times too long builds one
    model = VecchiaGP(Matern(nu=1.5, length_scale=2.0), 0.1, 8, rebuild_factor=1.5)
    model.fit(X, y)
    assert len(model.history) == 1
    assert model.history[0]["max_length_scale_factor"] > 2
    assert model.history[0]["shape_factor"] < 1.5


def test_a_schedule_learns_on_nested_samples_of_the_blocks():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(3000, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(len(X))
    y -= y.mean()
    start = Matern(nu=1.5, length_scale=[1.0, 1.0])
    staged = VecchiaGP(start, 0.1, 10, schedule=(300, 1000, None), random_state=0).fit(X, y)
    full = VecchiaGP(start, 0.1, 10, random_state=0).fit(X, y)
    points = [record["n_points"] for record in staged.history]
    assert points[0] >= 300 and points[1] >= 1000 and points[-1] == len(X)
    assert points[0] < 400 and points[1] < 1100 and len(points) == 3
    # the last stage maximizes the full likelihood, as the one-stage fit does
    np.testing.assert_allclose(staged.hyperparameters_.theta, full.hyperparameters_.theta,
                               atol=2e-3)
    # the sampled stages estimate the optimum already, and the last one is short
    assert staged.history[-1]["n_evaluations"] < full.history[-1]["n_evaluations"]
    sampled = np.array(staged.history[1]["length_scale"]) / staged.kernel_.length_scale
    assert np.all(np.abs(np.log(sampled)) < 0.3)         # measured 0.14, 0.21
    small = VecchiaGP(start, 0.1, 10, schedule=(300, 5000, 8000, None), random_state=0)
    points = [r["n_points"] for r in small.fit(X[:400], y[:400]).history]
    assert len(points) == 2 and 300 <= points[0] < 330 and points[1] == 400
    with pytest.raises(ValueError, match="schedule"):
        VecchiaGP(start, 0.1, 10, schedule=(0,))
    with pytest.raises(ValueError, match="tolerance"):
        VecchiaGP(start, 0.1, 10, tolerance=0.0)
    with pytest.raises(ValueError, match="schedule"):
        VecchiaGP(start, 0.1, 10, schedule=())


def test_model_rejects_bad_options():
    kernel = KERNELS[0]
    with pytest.raises(ValueError, match="m must"):
        VecchiaGP(kernel, 0.1, 0)
    with pytest.raises(ValueError, match="rebuild_factor"):
        VecchiaGP(kernel, 0.1, 5, rebuild_factor=1.0)
    with pytest.raises(TypeError, match="kernel"):
        VecchiaGP("matern32", 0.1, 5)
    with pytest.raises(ValueError, match="noise_variance"):
        VecchiaGP(kernel, -1.0, 5)
    with pytest.raises(ValueError, match="ordering"):
        VecchiaGP(kernel, 0.1, 5, ordering="hilbert")


def test_fisher_scoring_finds_the_lbfgs_optimum_in_few_evaluations():
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(1000, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(len(X))
    y -= y.mean()
    start = Matern(nu=1.5, length_scale=[1.0, 1.0])
    lbfgs = VecchiaGP(start, 0.1, 10, max_structures=1).fit(X, y)
    fisher = VecchiaGP(start, 0.1, 10, max_structures=1, optimizer="fisher",
                       tolerance=1e-6).fit(X, y)
    assert fisher.history[0]["converged"]
    np.testing.assert_allclose(fisher.hyperparameters_.theta, lbfgs.hyperparameters_.theta,
                               atol=2e-3)
    assert fisher.history[0]["log_likelihood"] >= lbfgs.history[0]["log_likelihood"] - 1e-6
    # from the optimum's neighbourhood (as after a sampled stage) it needs fewer
    # evaluations than L-BFGS-B: measured 8 against 14
    kernel = fisher.kernel_.with_params(length_scale=fisher.kernel_.length_scale * 1.1)
    near = [VecchiaGP(kernel, fisher.noise_variance_ * 0.9, 10, max_structures=1,
                      optimizer=optimizer, tolerance=tolerance).fit(X, y)
            for optimizer, tolerance in (("lbfgs", None), ("fisher", 1e-6))]
    assert near[1].history[0]["n_evaluations"] < near[0].history[0]["n_evaluations"]
    np.testing.assert_allclose(near[1].hyperparameters_.theta, near[0].hyperparameters_.theta,
                               atol=2e-3)
    with pytest.raises(ValueError, match="optimizer"):
        VecchiaGP(start, 0.1, 10, optimizer="newton")
