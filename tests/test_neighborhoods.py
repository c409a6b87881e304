"""Neighbourhood-local models (scalegp.neighborhoods): the cover, the blend, the composite
likelihood and the blended posterior, against brute-force and exact references."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import exact, neighborhoods as nb
from scalegp.hyperparameters import Hyperparameters
from scalegp.transformers import _build_feature_map


def rough_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    return X, y


def test_cover_members_are_the_nearest_points_and_cover_every_point():
    X, _ = rough_data()
    scale = np.array([0.5, 0.8])
    cover = nb.cover(X, 40, scale=scale)
    np.testing.assert_allclose(cover.centres[0], X.mean(axis=0))
    Z = X / scale
    for centre, members, radius in zip(cover.centres, cover.members, cover.blend_radius):
        distance = np.linalg.norm(Z - centre / scale, axis=1)
        np.testing.assert_array_equal(members, np.sort(np.argsort(distance)[:40]))
        assert radius == pytest.approx(0.5 * distance[members].max())
    t = cover.scaled_distances(X) / cover.blend_radius
    assert np.all(t.min(axis=1) <= nb.OVERLAP + 1e-12)
    # a cover with one centre fewer leaves some point uncovered (the last centre was needed)
    assert np.any(t[:, :-1].min(axis=1) > nb.OVERLAP)


def test_scaled_distances_match_brute_force():
    X, _ = rough_data(50)
    cover = nb.cover(X, 10, scale=[0.3, 1.7])
    brute = np.linalg.norm((X[:, None, :] - cover.centres[None]) / cover.scale, axis=2)
    np.testing.assert_allclose(cover.scaled_distances(X), brute, atol=1e-12)


def test_cover_refuses_bad_arguments():
    X, _ = rough_data(20)
    with pytest.raises(ValueError, match="overlap"):
        nb.cover(X, 5, scale=1.0, overlap=1.0)
    with pytest.raises(ValueError, match="n_neighbors"):
        nb.cover(X, 0, scale=1.0)
    with pytest.warns(UserWarning, match="max_centres"):
        cover = nb.cover(X, 3, scale=0.1, max_centres=2)
    assert cover.n_centres == 2


def test_blend_weights_sum_to_one_are_continuous_and_fall_back_outside():
    X, _ = rough_data()
    cover = nb.cover(X, 40, scale=0.5)
    line = np.column_stack([np.linspace(-3, 3, 20001), np.full(20001, 0.3)])
    weights = nb.blend_weights(cover, line)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    # continuity: the largest change between neighbouring points shrinks with the step
    coarse = np.abs(np.diff(weights[::10], axis=0)).max()
    fine = np.abs(np.diff(weights, axis=0)).max()
    assert fine < 0.2 * coarse
    far = nb.blend_weights(cover, np.array([[50.0, 50.0]]))
    assert np.count_nonzero(far) == 1


def exact_objective(X, y, cover, kernel, noise_variance, **options):
    hyper = Hyperparameters(kernel, noise_variance, (1e-4, 10.0))
    return nb.NeighborhoodLikelihood(hyper, cover, X, y, **options), hyper


def test_composite_likelihood_is_the_sum_of_local_exact_likelihoods_with_its_gradient():
    X, y = rough_data(200)
    kernel = sg.Matern(nu=2.5, length_scale=[0.6, 0.9], variance=1.3)
    cover = nb.cover(X, 30, scale=kernel.length_scale)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.05)
    expected = sum(exact.log_marginal_likelihood(kernel, 0.05, X[m], y[m])
                   for m in cover.members)
    value, gradient = objective(hyper.theta)
    assert value == pytest.approx(expected, rel=1e-12)
    assert objective.value(hyper.theta) == pytest.approx(expected, rel=1e-12)
    step = 1e-6
    for i in range(hyper.theta.size):
        up, down = hyper.theta.copy(), hyper.theta.copy()
        up[i] += step
        down[i] -= step
        numeric = (objective.value(up) - objective.value(down)) / (2 * step)
        assert gradient[i] == pytest.approx(numeric, rel=1e-6, abs=1e-6)


def test_learning_centres_use_a_subset_and_the_posterior_all_centres():
    X, y = rough_data(200)
    kernel = sg.Gaussian(length_scale=0.7)
    cover = nb.cover(X, 30, scale=0.7)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.05, learning_centres=3, rng=1)
    assert objective.learning_centres.size == 3
    expected = sum(exact.log_marginal_likelihood(kernel, 0.05, X[cover.members[c]],
                                                 y[cover.members[c]])
                   for c in objective.learning_centres)
    assert objective.value(hyper.theta) == pytest.approx(expected, rel=1e-12)
    posterior = objective.posterior(hyper.theta)
    assert len(posterior.local_posteriors) == cover.n_centres


def test_with_every_point_in_every_neighbourhood_the_blend_is_the_exact_gp():
    X, y = rough_data(120)
    kernel = sg.Matern(nu=1.5, length_scale=[0.5, 0.7], variance=0.9)
    cover = nb.cover(X, len(X), scale=kernel.length_scale)
    assert cover.n_centres > 1
    objective, hyper = exact_objective(X, y, cover, kernel, 0.03)
    posterior = objective.posterior(hyper.theta)
    X_test = np.random.default_rng(5).uniform(-4, 4, size=(200, 2))
    mean, var = posterior.predict(X_test, return_var=True, include_noise=True)
    reference = exact.ExactPosterior.fit(kernel, 0.03, X, y)
    ref_mean, ref_var = reference.predict(X_test, return_var=True, include_noise=True)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-10)
    np.testing.assert_allclose(var, ref_var, atol=1e-10)
    assert posterior.log_marginal_likelihood == pytest.approx(
        cover.n_centres * reference.log_marginal_likelihood, rel=1e-12)


def test_mixture_variance_of_the_blend():
    """Two neighbourhoods that disagree: the variance is the mixture's, not the average."""
    X, y = rough_data(200)
    kernel = sg.Gaussian(length_scale=0.6)
    cover = nb.cover(X, 40, scale=0.6)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.05)
    posterior = objective.posterior(hyper.theta)
    X_test = np.random.default_rng(2).uniform(-3, 3, size=(100, 2))
    weights = nb.blend_weights(cover, X_test)
    means, variances = zip(*(p.predict(X_test, return_var=True)
                             for p in posterior.local_posteriors))
    means, variances = np.array(means).T, np.array(variances).T
    expected_mean = np.sum(weights * means, axis=1)
    expected_var = np.sum(weights * (variances + means**2), axis=1) - expected_mean**2
    mean, var = posterior.predict(X_test, return_var=True, chunk_size=7)
    np.testing.assert_allclose(mean, expected_mean, atol=1e-12)
    np.testing.assert_allclose(var, expected_var, atol=1e-12)
    assert np.any(var > np.sum(weights * variances, axis=1) + 1e-6)


def test_blended_mean_is_continuous_where_nearest_centre_routing_jumps():
    X, y = rough_data(300)
    kernel = sg.Matern(nu=2.5, length_scale=0.4)
    cover = nb.cover(X, 40, scale=0.4)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.01)
    posterior = objective.posterior(hyper.theta)
    line = np.column_stack([np.linspace(-2.5, 2.5, 4001), np.full(4001, -0.2)])
    mean = posterior.predict(line)
    nearest = np.argmin(cover.scaled_distances(line) / cover.blend_radius, axis=1)
    routed = np.array([posterior.local_posteriors[c].predict(x[None])[0]
                       for c, x in zip(nearest, line)])
    step_blend = np.abs(np.diff(mean)).max()
    step_routed = np.abs(np.diff(routed)).max()
    fine = posterior.predict(np.column_stack([np.linspace(-2.5, 2.5, 40001),
                                              np.full(40001, -0.2)]))
    assert np.abs(np.diff(fine)).max() < 0.2 * step_blend     # shrinks with the step
    assert step_routed > 5 * step_blend                         # routing jumps at borders


@pytest.mark.parametrize("approximation", ["rff", "glf"])
def test_shift_invariant_map_with_all_points_equals_the_global_low_rank_gp(approximation):
    """Centring changes nothing for a shift-invariant map (RFF: the cos/sin pair of a shift is
    a rotation of the features; GLF: the same pairs on fixed nodes)."""
    X, y = rough_data(150)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1], length_scale_bounds=(0.4, 3.0),
                         variance_bounds=(0.1, 10.0))
    cover = nb.cover(X, len(X), scale=kernel.length_scale)
    feature_map = _build_feature_map(approximation, 2 * X, kernel, 64, {},
                                     np.random.default_rng(0),
                                     {"y": y, "noise_variance": 0.05,
                                      "noise_variance_lower": 1e-3})
    hyper = Hyperparameters(kernel, 0.05, (1e-3, 1.0))
    objective = nb.NeighborhoodLikelihood(hyper, cover, X, y, feature_map=feature_map)
    posterior = objective.posterior(hyper.theta)
    reference = sg.gp.Posterior.fit(feature_map, kernel, 0.05, X, y)
    X_test = np.random.default_rng(3).uniform(-3, 3, size=(50, 2))
    mean, var = posterior.predict(X_test, return_var=True)
    ref_mean, ref_var = reference.predict(X_test, return_var=True)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-10)
    np.testing.assert_allclose(var, ref_var, atol=1e-10)
    value, gradient = objective(hyper.theta)
    ref_objective = sg.gp.MarginalLikelihood(feature_map, hyper, X, y)
    ref_value, ref_gradient = ref_objective(hyper.theta)
    assert value == pytest.approx(cover.n_centres * ref_value, rel=1e-10)
    np.testing.assert_allclose(gradient, cover.n_centres * ref_gradient, rtol=1e-8, atol=1e-8)


def test_local_fixed_basis_keeps_its_statistics_between_steps():
    """GLF neighbourhoods: one pass per neighbourhood, then O(s^3) steps."""
    X, y = rough_data(150)
    kernel = sg.Gaussian(length_scale=0.9, length_scale_bounds=(0.5, 2.0),
                         variance_bounds=(0.1, 10.0))
    cover = nb.cover(X, 50, scale=0.9)
    shifted = np.vstack([X[m] - c for m, c in zip(cover.members, cover.centres)])
    feature_map = _build_feature_map("glf", shifted, kernel, 64, {}, np.random.default_rng(0),
                                     {"noise_variance_lower": 1e-3})
    hyper = Hyperparameters(kernel, 0.05, (1e-3, 1.0))
    objective = nb.NeighborhoodLikelihood(hyper, cover, X, y, feature_map=feature_map)
    objective(hyper.theta)
    cached = [objective._local_objective(c).basis_statistics for c in range(cover.n_centres)]
    assert all(statistics is not None for statistics in cached)
    objective(hyper.theta + 0.1)
    assert all(objective._local_objective(c).basis_statistics is cached[c]
               for c in range(cover.n_centres))
