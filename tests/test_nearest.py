"""The tree search shared by the Vecchia approximation and the neighbourhood models
(scalegp.nearest), and the local models' tree-based cover, blend and routing, against the
brute-force O(N N_C d) computations they replaced (the code before, kept here as the
reference): the same centres, members, radii and routes bitwise, the same weights to
rounding."""

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp import nearest
from scalegp.engine import exact
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.local import clustering
from scalegp.local import cover as cv, neighborhoods as nb


def brute_cover(X, n_neighbors, scale, overlap=cv.OVERLAP, max_centres=None):
    """The cover as computed before the tree: a distance vector per centre."""
    n_samples, n_dims = X.shape
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (n_dims,)).copy()
    Z = X / scale
    coverage = np.full(n_samples, np.inf)
    centres, members, radii = [], [], []
    centre = Z.mean(axis=0)
    while True:
        distance = np.sqrt(np.sum((Z - centre) ** 2, axis=1))
        nearest_rows = np.argpartition(distance, n_neighbors - 1)[:n_neighbors]
        reach = float(distance[nearest_rows].max())
        radius = 0.5 * reach if reach > 0 else 1.0
        centres.append(centre * scale)
        members.append(np.sort(nearest_rows))
        radii.append(radius)
        np.minimum(coverage, distance / radius, out=coverage)
        worst = int(np.argmax(coverage))
        if coverage[worst] <= overlap or len(centres) == max_centres:
            break
        centre = Z[worst].copy()
    return np.array(centres), members, np.array(radii)


@pytest.mark.parametrize("n_dims, n_neighbors", [(2, 25), (3, 40), (8, 30)])
def test_tree_cover_is_the_brute_force_cover_bitwise(n_dims, n_neighbors):
    rng = np.random.default_rng(n_dims)
    X = rng.uniform(-2, 2, size=(400, n_dims)) * np.linspace(0.5, 2.0, n_dims)
    scale = np.linspace(0.4, 1.3, n_dims)
    cover = cv.cover(X, n_neighbors, scale=scale, max_centres=None)
    centres, members, radii = brute_cover(X, n_neighbors, scale)
    np.testing.assert_array_equal(cover.centres, centres)
    np.testing.assert_array_equal(cover.blend_radius, radii)
    assert len(cover.members) == len(members)
    for got, want in zip(cover.members, members):
        np.testing.assert_array_equal(got, want)


def test_the_cover_has_no_default_cap_and_a_cap_still_warns():
    """In 8-D a neighbourhood's blend radius holds few points, so the cover needs about one
    centre per point; the old cap of 20,000 centres stopped it on kin40k's 25,600."""
    assert cv.MAX_CENTRES is None
    X = np.random.default_rng(1).standard_normal((300, 8))
    cover = cv.cover(X, 30, scale=1.0)
    t = cv.blend_weights(cover, X) > 0
    assert t.any(axis=1).all() and cover.n_centres > 100
    with pytest.warns(UserWarning, match="max_centres = 50"):
        assert cv.cover(X, 30, scale=1.0, max_centres=50).n_centres == 50


def brute_weights(cover, X):
    t = cover.scaled_distances(X) / cover.blend_radius
    weights = np.where(t < 1.0, (1.0 - np.minimum(t, 1.0) ** 2) ** 2, 0.0)
    total = weights.sum(axis=1)
    outside = total == 0
    if np.any(outside):
        weights[outside, np.argmin(t[outside], axis=1)] = 1.0
        total[outside] = 1.0
    return weights / total[:, None]


def test_blend_pairs_are_the_dense_weights():
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(500, 2))
    cover = cv.cover(X, 30, scale=[0.5, 0.9])
    X_test = np.vstack([rng.uniform(-4, 4, size=(300, 2)), [[50.0, -50.0]], [[1e300, 0.0]],
                        X[:20]])
    rows, centres, weights = cv.blend_pairs(cover, X_test)
    assert np.all(np.diff(rows) >= 0) and np.all(weights > 0)
    dense = np.zeros((len(X_test), cover.n_centres))
    dense[rows, centres] = weights
    with np.errstate(over="ignore", invalid="ignore"):
        expected = brute_weights(cover, X_test)
    np.testing.assert_allclose(dense, expected, rtol=1e-14, atol=1e-15)
    np.testing.assert_array_equal(dense > 0, expected > 0)
    assert np.count_nonzero(dense[300]) == 1 and dense[301, 0] == 1.0     # far rows


def test_exact_local_gps_keep_no_factor_and_predict_as_with_it():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 2))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(300)
    kernel = sg.Matern(nu=2.5, length_scale=[0.6, 0.8])
    cover = cv.cover(X, 40, scale=kernel.length_scale)
    hyper = Hyperparameters(kernel, 0.02, (1e-4, 1.0))
    posterior = nb.NeighborhoodLikelihood(hyper, cover, X, y).posterior(hyper.theta)
    assert not any(hasattr(p, "cholesky_factor") for p in posterior.local_posteriors)
    assert posterior.memory_bytes == sum(8 * 2 * len(rows) for rows in cover.members)
    X_test = rng.uniform(-3, 3, size=(60, 2))
    for c in (0, cover.n_centres // 2, cover.n_centres - 1):
        rows = cover.members[c]
        kept = exact.ExactPosterior.fit(kernel, 0.02, X[rows], y[rows])
        for a, b in zip(posterior.local_posteriors[c].predict(X_test, return_var=True),
                        kept.predict(X_test, return_var=True)):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(posterior.local_posteriors[c].predict(X_test),
                                      kept.predict(X_test))
    # what a model needs: the coefficients and rows, and one neighbourhood's matrices
    assert nb.required_bytes(cover, None) < 3 * posterior.memory_bytes + 2 * 16 * 40 ** 2


def brute_farthest(X, threshold, length_scale, max_centres=10_000):
    U = X / length_scale
    centres = [X.mean(axis=0)]
    distance = np.linalg.norm(U - U.mean(axis=0), axis=1)
    while True:
        farthest = int(np.argmax(distance))
        if distance[farthest] <= threshold or len(centres) == max_centres:
            break
        centres.append(X[farthest])
        np.minimum(distance, np.linalg.norm(U - U[farthest], axis=1), out=distance)
    return np.array(centres)


@pytest.mark.parametrize("n_dims", [2, 5])
def test_farthest_point_centres_and_routes_are_the_brute_force_ones(n_dims):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((600, n_dims))
    scale = np.linspace(0.5, 1.5, n_dims)
    centres = clustering.farthest_point_centres(X, 0.8, length_scale=scale)
    np.testing.assert_array_equal(centres, brute_farthest(X, 0.8, scale))
    X_test = np.vstack([rng.standard_normal((400, n_dims)), X[:30]])
    U, V = X_test / scale, centres / scale
    brute = np.argmin(np.sum((U[:, None, :] - V[None]) ** 2, axis=2), axis=1)
    np.testing.assert_array_equal(
        clustering.nearest_centres(X_test, centres, length_scale=scale), brute)


def test_routing_ties_go_to_the_lower_index():
    centres = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [5.0, 5.0]])
    X = np.array([[0.0, 0.0], [0.5, 0.5], [-0.5, -0.5], [0.9, 0.0], [1e300, 0.0]])
    with np.errstate(over="ignore", invalid="ignore"):
        route = clustering.nearest_centres(X, centres, length_scale=1.0)
    # the far row: every centre is 1e300 away to rounding, a tie: the lower index
    np.testing.assert_array_equal(route, [0, 0, 2, 0, 0])


def test_scaled_tree_and_pairs_within_against_brute_force():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 10, size=(1000, 3))
    scale = np.array([1.0, 2.0, 0.5])
    tree = nearest.ScaledTree(X, scale)
    Q = rng.uniform(0, 10, size=(50, 3))
    distance = np.linalg.norm((Q[:, None] - X[None]) / scale, axis=2)
    np.testing.assert_array_equal(tree.nearest(Q, 7), np.argsort(distance, axis=1)[:, :7])
    assert tree.nearest(Q[:2], 5000).shape == (2, 1000)
    np.testing.assert_array_equal(tree.within_scaled(Q[0] / scale, 1.5),
                                  np.flatnonzero(distance[0] <= 1.5))
    radii = rng.uniform(0.05, 2.0, size=1000)           # many octaves
    rows, found = nearest.pairs_within(X / scale, radii, Q / scale)
    inside = distance <= radii[None, :]
    want_rows, want_found = np.nonzero(inside)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(found, want_found)
    with pytest.raises(ValueError, match="scale must be positive"):
        nearest.ScaledTree(X, [1.0, -1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nearest.pairs_within(X[:0], radii[:0], Q)[0].size == 0


def test_ties_at_the_kth_distance_go_to_the_lower_rows():
    """On a grid many points tie at a neighbourhood's k-th distance; the members are the
    nearest, then the lowest rows among those tied."""
    g = np.arange(9.0)
    X = np.column_stack([np.repeat(g, 9), np.tile(g, 9)])[::-1].copy()   # rows reversed
    cover = cv.cover(X, 7, scale=1.0)
    Z = X / cover.scale
    for centre, members in zip(cover.centres, cover.members):
        distance = np.sqrt(np.sum((Z - centre) ** 2, axis=1))
        want = np.sort(np.lexsort((np.arange(len(X)), distance))[:7])
        np.testing.assert_array_equal(members, want)
    assert any(np.sum(np.isclose(np.sqrt(np.sum((Z - c) ** 2, axis=1)),
                                 0.5 * 2 * r)) > 1
               for c, r in zip(cover.centres, cover.blend_radius))      # ties did occur


def test_check_cover_finds_a_centre_too_close_by_the_tree_search():
    rng = np.random.default_rng(9)
    X = rng.uniform(-3, 3, size=(600, 2))
    cover = cv.cover(X, 20, scale=0.5)
    cv.check_cover(cover, X)                          # a fitted cover keeps the rules
    late = cover.n_centres - 3
    centres = cover.centres.copy()
    centres[late] = centres[5] + 1e-3                 # next to an earlier centre
    members = list(cover.members)
    Z = X / cover.scale
    members[late] = np.sort(np.argsort(np.linalg.norm(Z - centres[late] / cover.scale,
                                                      axis=1))[:20])
    radii = cover.blend_radius.copy()
    radii[late] = 0.5 * np.linalg.norm(Z[members[late]] - centres[late] / cover.scale,
                                       axis=1).max()
    moved = cv.Neighborhoods(centres, tuple(members), radii, cover.scale)
    with pytest.raises(ValueError, match=f"centre {late} lies within 0.75 blend radii"):
        cv.check_cover(moved, X)
