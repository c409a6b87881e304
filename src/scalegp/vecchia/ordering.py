"""Orderings of the training points for the Vecchia approximation.

All orderings act on the *scaled* inputs u = x / l (l the kernel's ARD length scales), where
Euclidean distance is the kernel's distance.

``"maximin"`` (default; Guinness 2018): the first point is the one nearest to the centroid;
each next point is the one farthest from all points chosen so far,

    i_k = argmax_{i not chosen} min_{j < k} |u_i - u_{i_j}|,

so the first points cover the domain coarsely and later points fill it in. It is computed
exactly, without any O(N^2) step: each unchosen point keeps its distance to the chosen set
in a lazy max-heap; choosing point j at distance D = dist(j) can only lower dist(i) for
points within D of u_j (every unchosen i has dist(i) <= D), so only the points of one
ball query of radius D (scipy.spatial.cKDTree) are updated. For points spread with bounded
density, the k-th chosen point's radius is about (volume / k)^(1/d) and its ball holds about
N / k points, so the updates total O(N log N) and the ball queries O(N log N) tree work,
plus one Python step per point (about 30 us: 2-3 s for 1e5 points).

``"grid-maximin"``: an approximate maximin ordering in O(N log N) vectorized steps (no Python
step per point: 0.1 s instead of 3 s for 77,800 points). Level r = 0, 1, ... covers the
bounding box with cubes of side h_r = span / 2^r; in each cube that holds no point of an
earlier level, the point nearest the cube's centre joins level r. Levels come in order, and
within a level points are sorted by decreasing distance to the earlier levels' points (the
maximin criterion, evaluated once per level by one cKDTree query). So every point of level r
is at least about h_r / 2 from the points before it in other cubes, and the level sets
densify geometrically, as the exact maximin's do (docs/vecchia.md compares the two).

``"random"``: a uniform permutation from ``rng``.
``"coordinate"``: sorted by one scaled coordinate (``coordinate=j``), or by the sum of the
scaled coordinates (``coordinate=None``), as in Vecchia (1988).
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.spatial import cKDTree

from .._validation import as_generator, check_matrix

ORDERINGS = ("maximin", "grid-maximin", "random", "coordinate")


def scaled_inputs(X, length_scale) -> np.ndarray:
    """u = x / l (one length scale for every column, or one per column)."""
    X = check_matrix(X, "X")
    length_scale = np.asarray(length_scale, dtype=float).ravel()
    if length_scale.size not in (1, X.shape[1]) or np.any(~(length_scale > 0)):
        raise ValueError(f"length_scale must be positive, of size 1 or {X.shape[1]}, got "
                         f"{length_scale!r}")
    return X / length_scale


def maximin_order(U) -> np.ndarray:
    """The exact maximin permutation of the rows of U (see the module docstring).

    Ties (equal distances, duplicated points) are broken by the lower row index. Duplicated
    points get distance 0 and come last.
    """
    U = check_matrix(U, "U")
    n = U.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    tree = cKDTree(U)
    first = int(np.argmin(np.einsum("ij,ij->i", U - U.mean(axis=0), U - U.mean(axis=0))))
    dist = np.sqrt(np.einsum("ij,ij->i", U - U[first], U - U[first]))
    chosen = np.zeros(n, dtype=bool)
    chosen[first] = True
    order = np.empty(n, dtype=np.intp)
    order[0] = first
    heap = [(-d, i) for i, d in enumerate(dist.tolist()) if i != first]
    heapq.heapify(heap)
    for k in range(1, n):
        while True:                               # lazy deletion of stale entries
            negative, j = heapq.heappop(heap)
            if not chosen[j] and -negative == dist[j]:
                break
        chosen[j] = True
        order[k] = j
        radius = dist[j]
        if radius <= 0.0:                        # only duplicates are left: any order
            rest = np.flatnonzero(~chosen)
            order[k + 1:] = rest
            break
        near = np.asarray(tree.query_ball_point(U[j], radius), dtype=np.intp)
        near = near[~chosen[near]]
        if near.size == 0:
            continue
        d = np.sqrt(np.einsum("ij,ij->i", U[near] - U[j], U[near] - U[j]))
        lower = d < dist[near]
        for i, value in zip(near[lower].tolist(), d[lower].tolist()):
            dist[i] = value
            heapq.heappush(heap, (-value, i))
    return order


#: Levels of :func:`grid_maximin_order` before the rest (duplicates) is appended as it is.
MAX_GRID_LEVELS = 60


def grid_maximin_order(U) -> np.ndarray:
    """The approximate ("grid") maximin permutation of the rows of U (module docstring).

    Deterministic; ties broken by the lower row index; duplicated points come last."""
    U = check_matrix(U, "U")
    n = U.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    low = U.min(axis=0)
    span = float(np.max(U.max(axis=0) - low))
    if not span > 0.0:                           # all points equal
        return np.arange(n)
    remaining = np.arange(n)
    parts: list[np.ndarray] = []
    chosen = np.zeros((0, U.shape[1]))
    for level in range(MAX_GRID_LEVELS):
        if remaining.size == 0:
            break
        side = span / 2.0 ** level
        cells = np.floor((U[remaining] - low) / side).astype(np.int64)
        taken = np.floor((chosen - low) / side).astype(np.int64)
        # cube ids shared by the remaining and the earlier points
        inverse = _cube_ids(np.vstack([taken, cells]), 2 ** level + 1)
        occupied = np.zeros(int(inverse.max()) + 1 if inverse.size else 0, dtype=bool)
        occupied[inverse[:len(taken)]] = True
        cube = inverse[len(taken):]
        free = ~occupied[cube]
        centre = (cells + 0.5) * side + low
        offset = np.einsum("ij,ij->i", U[remaining] - centre, U[remaining] - centre)
        # per free cube, the point nearest its centre (then the lower row)
        candidates = np.flatnonzero(free)
        by_cube = candidates[np.lexsort((remaining[candidates], offset[candidates],
                                         cube[candidates]))]
        first = np.ones(by_cube.size, dtype=bool)
        first[1:] = cube[by_cube[1:]] != cube[by_cube[:-1]]
        pick = by_cube[first]
        rows = remaining[pick]
        if len(chosen):
            far = cKDTree(chosen).query(U[rows], k=1)[0]
            rows = rows[np.lexsort((rows, -far))]
        else:
            rows = np.sort(rows)
        parts.append(rows)
        chosen = np.vstack([chosen, U[rows]])
        keep = np.ones(remaining.size, dtype=bool)
        keep[pick] = False
        remaining = remaining[keep]
    parts.append(remaining)
    return np.concatenate(parts).astype(np.intp)


def _cube_ids(cells, n_cells: int) -> np.ndarray:
    """Consecutive ids of the distinct rows of ``cells`` (integers in [0, n_cells)), in the
    rows' lexicographic order: one integer key per row, c_0 n^(d-1) + ... + c_{d-1}, sorted
    in 1-D (numpy's unique of rows sorts a row view, several times slower), or the rows
    themselves when the key would overflow int64."""
    n_dims = cells.shape[1]
    if n_dims * np.log2(float(n_cells)) < 62:
        key = np.zeros(cells.shape[0], dtype=np.int64)
        for j in range(n_dims):
            key = key * n_cells + cells[:, j]
        return np.unique(key, return_inverse=True)[1].ravel()
    return np.unique(cells, axis=0, return_inverse=True)[1].ravel()


def coordinate_order(U, coordinate: int | None = None) -> np.ndarray:
    """Rows sorted by scaled coordinate ``coordinate``, or by the sum of the coordinates."""
    U = check_matrix(U, "U")
    if coordinate is None:
        key = U.sum(axis=1)
    else:
        if not isinstance(coordinate, (int, np.integer)) or not 0 <= coordinate < U.shape[1]:
            raise ValueError(f"coordinate must be None or an integer in [0, {U.shape[1]}), got "
                             f"{coordinate!r}")
        key = U[:, coordinate]
    return np.argsort(key, kind="stable")


def order_points(U, ordering: str = "maximin", *, rng=None,
                 coordinate: int | None = None) -> np.ndarray:
    """The permutation of ``ordering`` (:data:`ORDERINGS`) of the rows of
    the scaled inputs U."""
    if ordering == "maximin":
        return maximin_order(U)
    if ordering == "grid-maximin":
        return grid_maximin_order(U)
    if ordering == "random":
        U = check_matrix(U, "U")
        return as_generator(rng).permutation(U.shape[0])
    if ordering == "coordinate":
        return coordinate_order(U, coordinate)
    raise ValueError(f"ordering must be one of {ORDERINGS}, got {ordering!r}")
