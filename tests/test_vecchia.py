"""scalegp.vecchia's orderings, conditioning sets and blocks, against brute force."""

import numpy as np
import pytest

from scalegp.vecchia import (
    build_structure,
    coordinate_order,
    grouped_blocks,
    maximin_order,
    order_points,
    ordered_neighbors,
    scaled_inputs,
    singleton_blocks,
)


def brute_maximin(U):
    """The O(N^2) definition: start nearest the centroid, then the farthest from the chosen."""
    n = len(U)
    first = int(np.argmin(np.sum((U - U.mean(axis=0)) ** 2, axis=1)))
    order, dist = [first], np.linalg.norm(U - U[first], axis=1)
    chosen = np.zeros(n, bool)
    chosen[first] = True
    for _ in range(n - 1):
        j = int(np.argmax(np.where(chosen, -1.0, dist)))
        order.append(j)
        chosen[j] = True
        dist = np.minimum(dist, np.linalg.norm(U - U[j], axis=1))
    return np.array(order)


def brute_neighbors(U, m):
    out = np.full((len(U), m), -1)
    for i in range(1, len(U)):
        d = np.sum((U[:i] - U[i]) ** 2, axis=1)
        nearest = np.argsort(d)[:m]
        out[i, :nearest.size] = nearest
    return out


@pytest.mark.parametrize("n_dims", [1, 2, 3])
def test_maximin_is_the_exact_maximin_ordering(n_dims):
    U = np.random.default_rng(n_dims).uniform(size=(400, n_dims)) * [1.0, 3.0, 0.5][:n_dims]
    order = maximin_order(U)
    np.testing.assert_array_equal(order, brute_maximin(U))
    # the distance of each point to the points before it never increases
    gaps = [np.min(np.linalg.norm(U[order[:k]] - U[order[k]], axis=1)) for k in range(1, 400)]
    assert np.all(np.diff(gaps) <= 0)


def test_maximin_with_duplicates_is_a_permutation():
    U = np.repeat(np.random.default_rng(0).uniform(size=(50, 2)), 3, axis=0)
    order = maximin_order(U)
    assert sorted(order) == list(range(150))
    assert len(set(map(tuple, U[order[:50]]))) == 50          # distinct points come first


def test_random_and_coordinate_orderings():
    U = np.random.default_rng(0).normal(size=(100, 3))
    random = order_points(U, "random", rng=5)
    assert sorted(random) == list(range(100))
    np.testing.assert_array_equal(random, order_points(U, "random", rng=5))
    assert np.all(np.diff(U[coordinate_order(U, 1), 1]) >= 0)
    assert np.all(np.diff(U[order_points(U, "coordinate")].sum(axis=1)) >= 0)
    with pytest.raises(ValueError, match="ordering"):
        order_points(U, "hilbert")
    with pytest.raises(ValueError, match="coordinate"):
        coordinate_order(U, 3)
    with pytest.raises(ValueError, match="length_scale"):
        scaled_inputs(U, [1.0, 2.0])


@pytest.mark.parametrize("ordering", ["maximin", "random", "coordinate"])
@pytest.mark.parametrize("m", [1, 7, 40])
def test_ordered_neighbors_are_the_nearest_earlier_points(ordering, m):
    U = np.random.default_rng(m).uniform(size=(600, 2)) * [1.0, 4.0]
    Uo = U[order_points(U, ordering, rng=1)]
    np.testing.assert_array_equal(ordered_neighbors(Uo, m), brute_neighbors(Uo, m))


def test_ordered_neighbors_rejects_bad_m():
    with pytest.raises(ValueError, match="m must"):
        ordered_neighbors(np.zeros((5, 2)), 0)


@pytest.mark.parametrize("exponent", [1.0, 2.0, 3.0])
def test_blocks_partition_and_contain_each_members_conditioning_set(exponent):
    U = np.random.default_rng(0).uniform(size=(500, 2))
    neighbors = ordered_neighbors(U[maximin_order(U)], 10)
    for blocks in (grouped_blocks(neighbors, exponent=exponent), singleton_blocks(neighbors)):
        seen = np.zeros(500, int)
        for b in range(blocks.n_blocks):
            rows, member = blocks.block(b)
            assert np.all(np.diff(rows) > 0)
            members = rows[member]
            seen[members] += 1
            # every point of the set precedes the block's last member, and contains each
            # member's conditioning set: h(i) = {j in T : j < i} contains c(i)
            assert rows.max() == members.max()
            for i in members:
                own = neighbors[i][neighbors[i] >= 0]
                assert np.all(np.isin(own, rows))
        np.testing.assert_array_equal(seen, 1)
    grouped = grouped_blocks(neighbors, exponent=exponent)
    assert grouped.n_blocks < 500


def test_grouped_blocks_rejects_bad_exponent():
    with pytest.raises(ValueError, match="exponent"):
        grouped_blocks(np.full((3, 2), -1), exponent=0.5)


def test_structure_orders_in_the_scaled_inputs():
    X = np.random.default_rng(0).uniform(size=(200, 2)) * [1.0, 100.0]
    structure = build_structure(X, [1.0, 100.0], 5, grouping=False)
    np.testing.assert_array_equal(structure.order, maximin_order(X / [1.0, 100.0]))
    assert structure.blocks.n_blocks == 200 and structure.m == 5
    np.testing.assert_array_equal(structure.length_scale, [1.0, 100.0])


def test_neighbors_on_a_grid_with_tied_distances_are_nearest():
    # a grid has many equal distances: the tie may be broken either way, but the kept
    # points must be at the m smallest distances among the earlier points
    g = np.arange(20.0)
    U = np.column_stack([np.repeat(g, 20), np.tile(g, 20)])
    Uo = U[maximin_order(U)]
    assert len({tuple(u) for u in Uo}) == 400
    m = 8
    neighbors = ordered_neighbors(Uo, m)
    for i in range(1, 400):
        d = np.sort(np.sum((Uo[:i] - Uo[i]) ** 2, axis=1))[:m]
        kept = neighbors[i][neighbors[i] >= 0]
        assert np.all(kept < i) and len(set(kept)) == kept.size == min(i, m)
        np.testing.assert_array_equal(np.sort(np.sum((Uo[kept] - Uo[i]) ** 2, axis=1)), d)


def test_grid_maximin_is_a_spreading_permutation():
    from scipy.spatial.distance import pdist

    from scalegp.vecchia import grid_maximin_order

    rng = np.random.default_rng(3)
    U = rng.uniform(size=(2000, 2))
    order = grid_maximin_order(U)
    np.testing.assert_array_equal(np.sort(order), np.arange(len(U)))
    np.testing.assert_array_equal(order, grid_maximin_order(U))          # deterministic
    # the first k points are spread nearly as the exact maximin's, better than random ones
    # (smallest gaps measured at k = 16, 64, 256: grid 0.168, 0.074, 0.021; exact 0.238,
    # 0.109, 0.047; random 0.080, 0.0023, 0.0020)
    exact = maximin_order(U)
    for k in (16, 64, 256):
        grid_gap = pdist(U[order[:k]]).min()
        assert grid_gap > 0.4 * pdist(U[exact[:k]]).min()
        assert grid_gap > 2 * pdist(U[:k]).min()
    duplicated = np.vstack([U[:50], U[:5]])
    order = grid_maximin_order(duplicated)
    np.testing.assert_array_equal(np.sort(order), np.arange(55))
    assert set(order[-5:].tolist()) <= set(range(5)) | set(range(50, 55))


def test_grid_maximin_cube_ids_by_integer_keys_are_those_of_unique_rows(monkeypatch):
    """The 1-D keys label the cubes in the order numpy's unique of rows does, so the ordering
    is the same; forcing the rows path (as for keys that would overflow) changes nothing."""
    from scalegp.vecchia import grid_maximin_order, ordering
    rng = np.random.default_rng(11)
    cells = rng.integers(0, 9, size=(500, 3))
    np.testing.assert_array_equal(ordering._cube_ids(cells, 9),
                                  np.unique(cells, axis=0, return_inverse=True)[1].ravel())
    U = rng.uniform(size=(3000, 2))
    keyed = grid_maximin_order(U)
    monkeypatch.setattr(ordering, "_cube_ids", lambda cells, n: np.unique(
        cells, axis=0, return_inverse=True)[1].ravel())
    np.testing.assert_array_equal(keyed, grid_maximin_order(U))


def test_threaded_neighbour_search_finds_the_same_sets():
    from scalegp.vecchia import ordered_neighbors
    U = np.random.default_rng(2).uniform(size=(4000, 2))
    np.testing.assert_array_equal(ordered_neighbors(U, 12, n_jobs=2), ordered_neighbors(U, 12))


@pytest.mark.parametrize("chunk", [1, 7, 1 << 17])
def test_ordered_neighbors_in_query_chunks_are_the_same_int32_sets(monkeypatch, chunk):
    """The tree is asked QUERY_CHUNK points at a time (memory at 9.3 million points): any
    chunk gives the brute-force sets, stored as int32 (index_dtype below 2^31 points)."""
    from scalegp.vecchia import neighbors as module

    monkeypatch.setattr(module, "QUERY_CHUNK", chunk)
    U = np.random.default_rng(3).uniform(size=(700, 2))
    Uo = U[order_points(U, "random", rng=2)]
    found = ordered_neighbors(Uo, 9)
    assert found.dtype == np.int32 and module.index_dtype(2**31) == np.intp
    np.testing.assert_array_equal(found, brute_neighbors(Uo, 9))


def test_singleton_blocks_are_each_point_with_its_conditioning_set():
    """The vectorized singletons: block i is c(i) + {i}, sorted, member i only (the first
    points have fewer than m neighbours: -1 padding dropped)."""
    U = np.random.default_rng(4).uniform(size=(300, 2))
    neighbors = ordered_neighbors(U[maximin_order(U)], 6)
    blocks = singleton_blocks(neighbors)
    assert blocks.n_blocks == 300 and blocks.n_members == 300
    assert blocks.sets.dtype == neighbors.dtype
    for i in range(300):
        rows, member = blocks.block(i)
        own = neighbors[i][neighbors[i] >= 0]
        np.testing.assert_array_equal(rows, np.sort(np.append(own, i)))
        np.testing.assert_array_equal(rows[member], [i])
