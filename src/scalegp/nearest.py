"""Nearest-neighbour search in scaled inputs by a k-d tree: the neighbour machinery shared by
the Vecchia approximation (:mod:`scalegp.vecchia`: each test point's training neighbours)
and the neighbourhood-local models (:mod:`scalegp.local`: the cover, the neighbourhoods, the
blend and the routing to centres).

Distances are Euclidean in the scaled inputs u = x / l (l one length scale, or one per
input), where they are the kernel's distances. :class:`ScaledTree` is a
:class:`scipy.spatial.cKDTree` over u: a query for the k nearest points costs O(k log N)
(for points of bounded density), a query for the points within a radius O(log N + the
points found), against O(N d) for one row of a brute-force distance matrix.

The tree's distances are its own arithmetic; the callers that need a distance bitwise as a
formula of their own (the cover's blend radii, the blend weights) recompute it on the
points the tree returns, and ask the tree for a radius enlarged by ``RADIUS_MARGIN``, so
that a point the tree's rounding would place just outside is not lost.

:func:`pairs_within` answers the reverse question: the centres c (each with its own radius
r_c) whose ball |u - c| < r_c holds a query point. The centres are grouped by radius octave
(r_max / r_c < 2 within a group), each group has its tree and is asked for its largest
radius, so at most 2^d times the pairs found are examined; the caller keeps those its own
formula puts inside.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ._validation import check_matrix

__all__ = ["MAX_COORDINATE", "RADIUS_MARGIN", "ScaledTree", "pairs_within"]

#: Relative enlargement of a radius asked of the tree (its distances round differently from
#: the callers' formulas, by a few units in the last place).
RADIUS_MARGIN = 1e-9
#: Largest scaled coordinate a query may have: its square stays finite, which the tree's
#: arithmetic needs (:func:`pairs_within` finds no pair for a row beyond it).
MAX_COORDINATE = 1e150


class ScaledTree:
    """A k-d tree over the points X / scale.

    Parameters
    ----------
    X : array (n, d)
        The points, in input units.
    scale : float or array (d,), default=1.0
        The length scales: distances are |(x - z) / scale|.
    """

    def __init__(self, X, scale=1.0):
        X = check_matrix(X, "X")
        scale = np.asarray(scale, dtype=float).ravel()
        if scale.size not in (1, X.shape[1]) or np.any(~(scale > 0)):
            raise ValueError(f"scale must be positive, of size 1 or {X.shape[1]}, got {scale!r}")
        self.scale = scale
        #: The scaled points u = x / scale, shape (n, d).
        self.points = X / scale
        self.tree = cKDTree(self.points)

    @property
    def n_points(self) -> int:
        return self.points.shape[0]

    def nearest(self, X, k: int, *, workers: int = 1) -> np.ndarray:
        """Indices of the k nearest points to each row of X (input units), nearest first,
        shape (len(X), k); k is capped at the number of points."""
        return self.nearest_scaled(check_matrix(X, "X") / self.scale, k, workers=workers)

    def nearest_scaled(self, U, k: int, *, workers: int = 1) -> np.ndarray:
        """As :meth:`nearest`, for queries already in scaled units."""
        U = np.atleast_2d(np.asarray(U, dtype=float))
        k = min(int(k), self.n_points)
        _, idx = self.tree.query(U, k=k, workers=workers)
        return np.asarray(idx, dtype=np.intp).reshape(U.shape[0], k)

    def within_scaled(self, u, radius: float) -> np.ndarray:
        """Indices (increasing) of the points within ``radius`` of the scaled point u,
        radius enlarged by :data:`RADIUS_MARGIN` (a superset of those a caller's own
        formula puts within it)."""
        found = self.tree.query_ball_point(np.asarray(u, dtype=float),
                                           float(radius) * (1.0 + RADIUS_MARGIN))
        return np.sort(np.asarray(found, dtype=np.intp))


def pairs_within(centres, radii, U) -> tuple[np.ndarray, np.ndarray]:
    """(rows, centre indices) of the pairs with |U[row] - centres[c]| <= radii[c] (scaled
    units, radius enlarged by :data:`RADIUS_MARGIN`), a superset of the pairs inside; sorted
    by row, then centre. Centres grouped by radius octave (module docstring)."""
    centres = np.asarray(centres, dtype=float)
    radii = np.asarray(radii, dtype=float)
    U = np.asarray(U, dtype=float)
    measurable = np.flatnonzero(np.max(np.abs(U), axis=1, initial=0.0) <= MAX_COORDINATE)
    if measurable.size < U.shape[0]:                    # too far for the tree: no pair
        rows, found = pairs_within(centres, radii, U[measurable])
        return measurable[rows], found
    if U.shape[0] == 0 or centres.shape[0] == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    octave = np.floor(np.log2(radii / radii.max())).astype(np.int64)
    rows, found = [], []
    for level in np.unique(octave):
        ids = np.flatnonzero(octave == level)
        tree = cKDTree(centres[ids])
        reach = float(radii[ids].max()) * (1.0 + RADIUS_MARGIN)
        hits = tree.query_ball_point(U, reach)
        counts = np.fromiter((len(h) for h in hits), dtype=np.intp, count=len(hits))
        if counts.sum() == 0:
            continue
        row = np.repeat(np.arange(U.shape[0]), counts)
        centre = ids[np.concatenate([np.asarray(h, dtype=np.intp) for h in hits if h])]
        near = (np.sqrt(np.sum((U[row] - centres[centre]) ** 2, axis=1))
                <= radii[centre] * (1.0 + RADIUS_MARGIN))
        rows.append(row[near])
        found.append(centre[near])
    if not rows:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    rows, found = np.concatenate(rows), np.concatenate(found)
    order = np.lexsort((found, rows))
    return rows[order], found[order]
