"""Neighbourhood-local models (scalegp.local.neighborhoods): the cover, the blend, the composite
likelihood and the blended posterior, against brute-force and exact references."""

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import central_differences, low_rank
from scalegp.engine import exact
from scalegp.local import cover as cv, neighborhoods as nb
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.estimators.transformers import _build_feature_map


def rough_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.05 * rng.standard_normal(n)
    return X, y


def test_cover_members_are_the_nearest_points_and_cover_every_point():
    X, _ = rough_data()
    scale = np.array([0.5, 0.8])
    cover = cv.cover(X, 40, scale=scale)
    np.testing.assert_allclose(cover.centres[0], X.mean(axis=0))
    Z = X / scale
    for centre, members, radius in zip(cover.centres, cover.members, cover.blend_radius):
        distance = np.linalg.norm(Z - centre / scale, axis=1)
        np.testing.assert_array_equal(members, np.sort(np.argsort(distance)[:40]))
        assert radius == pytest.approx(0.5 * distance[members].max())
    t = cover.scaled_distances(X) / cover.blend_radius
    assert np.all(t.min(axis=1) <= cv.OVERLAP + 1e-12)
    # a cover with one centre fewer leaves some point uncovered (the last centre was needed)
    assert np.any(t[:, :-1].min(axis=1) > cv.OVERLAP)


def test_scaled_distances_match_brute_force():
    X, _ = rough_data(50)
    cover = cv.cover(X, 10, scale=[0.3, 1.7])
    brute = np.linalg.norm((X[:, None, :] - cover.centres[None]) / cover.scale, axis=2)
    np.testing.assert_allclose(cover.scaled_distances(X), brute, atol=1e-12)


def test_cover_refuses_bad_arguments():
    X, _ = rough_data(20)
    with pytest.raises(ValueError, match="overlap"):
        cv.cover(X, 5, scale=1.0, overlap=1.0)
    with pytest.raises(ValueError, match="n_neighbors"):
        cv.cover(X, 0, scale=1.0)
    with pytest.warns(UserWarning, match="max_centres"):
        cover = cv.cover(X, 3, scale=0.1, max_centres=2)
    assert cover.n_centres == 2


def test_blend_weights_sum_to_one_are_continuous_and_fall_back_outside():
    X, _ = rough_data()
    cover = cv.cover(X, 40, scale=0.5)
    line = np.column_stack([np.linspace(-3, 3, 20001), np.full(20001, 0.3)])
    weights = cv.blend_weights(cover, line)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    # continuity: the largest change between neighbouring points shrinks with the step
    coarse = np.abs(np.diff(weights[::10], axis=0)).max()
    fine = np.abs(np.diff(weights, axis=0)).max()
    assert fine < 0.2 * coarse
    far = cv.blend_weights(cover, np.array([[50.0, 50.0]]))
    assert np.count_nonzero(far) == 1


def exact_objective(X, y, cover, kernel, noise_variance, **options):
    hyper = Hyperparameters(kernel, noise_variance, (1e-4, 10.0))
    return nb.NeighborhoodLikelihood(hyper, cover, X, y, **options), hyper


def test_composite_likelihood_is_the_sum_of_local_exact_likelihoods_with_its_gradient():
    X, y = rough_data(200)
    kernel = sg.Matern(nu=2.5, length_scale=[0.6, 0.9], variance=1.3)
    cover = cv.cover(X, 30, scale=kernel.length_scale)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.05)
    expected = sum(exact.log_marginal_likelihood(kernel, 0.05, X[m], y[m])
                   for m in cover.members)
    value, gradient = objective(hyper.theta)
    assert value == pytest.approx(expected, rel=1e-12)
    assert objective.value(hyper.theta) == pytest.approx(expected, rel=1e-12)
    assert gradient == pytest.approx(central_differences(objective.value, hyper.theta),
                                     rel=1e-6, abs=1e-6)


def test_learning_centres_use_a_subset_and_the_posterior_all_centres():
    X, y = rough_data(200)
    kernel = sg.Gaussian(length_scale=0.7)
    cover = cv.cover(X, 30, scale=0.7)
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
    cover = cv.cover(X, len(X), scale=kernel.length_scale)
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
    cover = cv.cover(X, 40, scale=0.6)
    objective, hyper = exact_objective(X, y, cover, kernel, 0.05)
    posterior = objective.posterior(hyper.theta)
    X_test = np.random.default_rng(2).uniform(-3, 3, size=(100, 2))
    weights = cv.blend_weights(cover, X_test)
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
    cover = cv.cover(X, 40, scale=0.4)
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
    cover = cv.cover(X, len(X), scale=kernel.length_scale)
    feature_map = _build_feature_map(approximation, 2 * X, kernel, 64, {},
                                     np.random.default_rng(0),
                                     {"y": y, "noise_variance": 0.05,
                                      "noise_variance_lower": 1e-3})
    hyper = Hyperparameters(kernel, 0.05, (1e-3, 1.0))
    objective = nb.NeighborhoodLikelihood(hyper, cover, X, y, feature_map=feature_map)
    posterior = objective.posterior(hyper.theta)
    reference = sg.engine.Posterior.fit(feature_map, kernel, 0.05, X, y)
    X_test = np.random.default_rng(3).uniform(-3, 3, size=(50, 2))
    mean, var = posterior.predict(X_test, return_var=True)
    ref_mean, ref_var = reference.predict(X_test, return_var=True)
    np.testing.assert_allclose(mean, ref_mean, atol=1e-10)
    np.testing.assert_allclose(var, ref_var, atol=1e-10)
    value, gradient = objective(hyper.theta)
    ref_objective = sg.engine.MarginalLikelihood(feature_map, hyper, X, y)
    ref_value, ref_gradient = ref_objective(hyper.theta)
    assert value == pytest.approx(cover.n_centres * ref_value, rel=1e-10)
    np.testing.assert_allclose(gradient, cover.n_centres * ref_gradient, rtol=1e-8, atol=1e-8)


def test_local_fixed_basis_keeps_its_statistics_between_steps():
    """GLF neighbourhoods: one pass per neighbourhood, then O(s^3) steps."""
    X, y = rough_data(150)
    kernel = sg.Gaussian(length_scale=0.9, length_scale_bounds=(0.5, 2.0),
                         variance_bounds=(0.1, 10.0))
    cover = cv.cover(X, 50, scale=0.9)
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


# ----------------------------------------------------------------------------- the estimator


def neighbors_estimator(**params):
    defaults = dict(approximation="exact", local="neighbors", local_neighbors=40,
                    local_learning_centres=6, kernel=sg.Matern(nu=1.5, length_scale=[0.5, 0.7]),
                    noise_variance=0.03, random_state=0)
    return low_rank(**{**defaults, **params})


def test_estimator_with_every_point_in_every_neighbourhood_is_the_exact_gp():
    """k >= n: every neighbourhood is the data, so learning maximizes J log p(y | theta) (the
    exact optimum) and the blend is the exact GP's prediction."""
    X, y = rough_data(100)
    model = neighbors_estimator(local_neighbors=len(X)).fit(X, y)
    reference = sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[0.5, 0.7]),
                                    noise_variance=0.03, normalize_X=False, normalize_y=False).fit(X, y)
    np.testing.assert_allclose(model.kernel_.theta, reference.kernel_.theta, atol=2e-4)
    assert model.noise_variance_ == pytest.approx(reference.noise_variance_, rel=2e-4)
    fixed = neighbors_estimator(local_neighbors=len(X), optimize=False,
                                kernel=reference.kernel_,
                                noise_variance=reference.noise_variance_).fit(X, y)
    X_test = np.random.default_rng(1).uniform(-4, 4, size=(50, 2))
    for a, b in zip(fixed.predict(X_test, return_std=True),
                    reference.predict(X_test, return_std=True)):
        np.testing.assert_allclose(a, b, atol=1e-9)
    assert fixed.n_centres_ > 1
    assert fixed.log_marginal_likelihood_value_ == pytest.approx(
        fixed.n_centres_ * reference.log_marginal_likelihood_value_, rel=1e-10)


def test_estimator_on_a_rough_field_beats_one_exact_gp_on_a_subset():
    """The point of the model: at equal cost per GP, many small GPs resolve a short length
    scale over the whole domain that one GP on a subset cannot (measured RMSEs: 0.030 and
    0.13 on this field; the bound leaves a factor of two)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(3000, 2))
    field = lambda X: np.sin(4 * X[:, 0]) * np.cos(3 * X[:, 1])    # noqa: E731
    y = field(X) + 0.02 * rng.standard_normal(len(X))
    X_test = rng.uniform(-3, 3, size=(500, 2))
    local_model = neighbors_estimator(local_neighbors=150, local_learning_centres=16,
                                      normalize_y=True).fit(X, y)
    subset = sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[0.5, 0.7]),
                                 noise_variance=0.03, normalize_y=True, normalize_X=False).fit(X[:150], y[:150])
    local_rmse = np.sqrt(np.mean((local_model.predict(X_test) - field(X_test)) ** 2))
    subset_rmse = np.sqrt(np.mean((subset.predict(X_test) - field(X_test)) ** 2))
    assert local_rmse < 0.06 < subset_rmse / 2
    assert local_model.fit_warnings_ == []


def test_estimator_clone_grid_search_and_low_rank_local_maps():
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV
    X, y = rough_data(200)
    search = GridSearchCV(neighbors_estimator(optimize=False),
                          {"local__n_neighbors": [20, 60], "approximation": ["exact", "rff"]},
                          cv=2).fit(X, y)
    assert search.best_params_["local__n_neighbors"] in (20, 60)
    model = clone(search.best_estimator_)
    assert model.get_params()["local"].kind == "neighbors"
    glf = neighbors_estimator(approximation="glf", n_components=64, optimize=False).fit(X, y)
    assert glf.feature_map_.name == "glf" and glf.n_centres_ > 1
    assert "glf" in glf.local_model_.describe()


def test_estimator_refuses_exact_outside_neighbourhoods_and_short_memory(monkeypatch):
    X, y = rough_data(60)
    for local_kind in (None, "clusters"):
        with pytest.raises(ValueError, match="approximation='exact'.*needs local='neighbors'"):
            low_rank("exact", local=local_kind).fit(X, y)
    with pytest.raises(ValueError, match="n_neighbors must be an integer >= 1"):
        neighbors_estimator(local_neighbors=0).fit(X, y)
    monkeypatch.setattr(nb, "available_bytes", lambda: 10_000)
    with pytest.raises(sg.errors.InsufficientMemoryError, match="n_neighbors"):
        neighbors_estimator().fit(X, y)


def test_composite_noise_only_reference_is_the_sum_over_neighbourhoods():
    X, y = rough_data(150)
    model = neighbors_estimator(optimize=False).fit(X, y)
    from scalegp.engine.noise import noise_only_log_marginal_likelihood
    expected = sum(noise_only_log_marginal_likelihood(y[rows])
                   for rows in model.local_model_.neighborhoods.members)
    assert model.noise_only_log_marginal_likelihood_ == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("approximation", ["exact", "glf"])
def test_model_file_round_trip_and_tampering(approximation, tmp_path):
    import json
    import zipfile
    X, y = rough_data(120)
    size = {} if approximation == "exact" else {"n_components": 36}
    model = neighbors_estimator(approximation=approximation, normalize_X=True,
                                normalize_y=True, **size).fit(X, y)
    path = tmp_path / "m.npz"
    sg.save(model, path)
    loaded = sg.load(path)
    X_test = np.random.default_rng(2).uniform(-4, 4, size=(40, 2))
    for a, b in zip(model.predict(X_test, return_std=True),
                    loaded.predict(X_test, return_std=True)):
        np.testing.assert_array_equal(a, b)
    # targets changed in the file: the re-conditioned likelihood disagrees with the stored one
    with np.load(path) as npz:
        arrays = {key: npz[key] for key in npz.files}
    arrays["local.y_train"] = arrays["local.y_train"] + 0.5
    tampered = tmp_path / "tampered.npz"
    np.savez(tampered, **arrays)
    with pytest.raises(sg.errors.InvalidModelFileError, match="log marginal likelihood"):
        sg.load(tampered)
    assert json.loads(arrays["metadata"].tobytes())["local"]["kind"] == "neighbors"
    assert zipfile.is_zipfile(path)


def test_cli_fits_and_predicts_exact_neighbourhoods(tmp_path):
    from scalegp.cli import main
    X, y = rough_data(200)
    np.savetxt(tmp_path / "train.csv", np.column_stack([X, y]), delimiter=",", header="a,b,y",
               comments="")
    np.savetxt(tmp_path / "test.csv", X[:7], delimiter=",", header="a,b", comments="")
    model, out = tmp_path / "m.npz", tmp_path / "p.csv"
    assert main(["fit", str(tmp_path / "train.csv"), "--target", "y", "--approximation",
                 "exact", "--local", "neighbors", "--local-neighbors", "50",
                 "--local-learning-centers", "4", "--out", str(model), "--quiet"]) == 0
    loaded = sg.load(model)
    assert loaded.local == sg.Neighbors(n_neighbors=50, learning_centers=4)
    assert main(["predict", str(model), str(tmp_path / "test.csv"), "--out", str(out),
                 "--quiet"]) == 0
    predicted = np.loadtxt(out, delimiter=",", skiprows=1)
    mean, std = loaded.predict(X[:7], return_std=True)
    np.testing.assert_allclose(predicted, np.column_stack([mean, std]), rtol=1e-12)
    assert main(["fit", str(tmp_path / "train.csv"), "--target", "y", "--approximation",
                 "exact", "--local", "clusters", "--out", str(tmp_path / "x.npz"),
                 "--quiet"]) != 0


def test_a_neighbourhood_of_copies_of_one_input_covers_that_input_only():
    """k copies of one input make a neighbourhood of zero extent: its blend radius is
    POINT_RADIUS, so it covers that location and nothing else, and the other points get
    centres of their own. With the radius 1 it had, and long length scales (the data span
    0.1 length scales here, as on keggdirected), it covered every point: two centres."""
    import numpy as np
    from scalegp.local import cover as cv
    rng = np.random.default_rng(0)
    X = np.vstack([np.zeros((150, 2)), rng.uniform(0, 10, (300, 2))])
    cover = cv.cover(X, 100, scale=100.0)
    collapsed = [c for c, rows in enumerate(cover.members) if np.all(X[rows] == 0)]
    assert collapsed and all(cover.blend_radius[c] == cv.POINT_RADIUS for c in collapsed)
    assert cover.n_centres > 2
    # every training point is covered by a centre whose neighbourhood has extent
    Z, C = X / 100.0, cover.centres / 100.0
    distance = np.sqrt(((Z[:, None, :] - C[None, :, :]) ** 2).sum(-1)) / cover.blend_radius
    assert np.all(distance.min(axis=1) <= cv.OVERLAP)
    cv.check_cover(cover, X)                      # the model file's check accepts it


def test_a_model_files_cover_from_before_the_point_radius_still_loads(monkeypatch):
    """A cover written before 2026-12-05 holds the radius LEGACY_POINT_RADIUS where its
    members are copies of its centre; the file's check accepts it."""
    import numpy as np
    from scalegp.local import cover as cv
    rng = np.random.default_rng(1)
    X = np.vstack([np.zeros((150, 2)), rng.uniform(0, 10, (300, 2))])
    monkeypatch.setattr(cv, "POINT_RADIUS", cv.LEGACY_POINT_RADIUS)
    legacy = cv.cover(X, 100, scale=1.0)
    monkeypatch.undo()
    assert cv.LEGACY_POINT_RADIUS in legacy.blend_radius
    cv.check_cover(legacy, X)
