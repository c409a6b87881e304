"""Farthest-point clustering in length-scale units, and nearest-centre routing.

Distances are measured in u = x / l (l the kernel's length scale, one per input for ARD), so a
threshold theta is "theta length scales" in every direction (docs/local-models.md,
"Algorithm 1"). Both functions are public: local models (:mod:`scalegp.local.centered`) and any
model that partitions the inputs by centres call them.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._validation import as_generator, check_matrix, check_positive_int, check_positive_vector
from ..nearest import MAX_COORDINATE, RADIUS_MARGIN, ScaledTree

__all__ = ["farthest_point_centres", "nearest_centres", "MAX_CENTRES"]

#: The default cap on the number of centres of :func:`farthest_point_centres` (the authors').
MAX_CENTRES = 10_000


def _scaled(X, length_scale, name: str) -> np.ndarray:
    X = check_matrix(X, name)
    scale = check_positive_vector(length_scale, "length_scale")
    if scale.size not in (1, X.shape[1]):
        raise ValueError(f"length_scale must have 1 or {X.shape[1]} entries (one per input), "
                         f"got {scale.size}")
    return X / scale


def farthest_point_centres(X, threshold, *, length_scale, first="mean",
                           max_centres: int = MAX_CENTRES, rng=None) -> np.ndarray:
    """Centres whose covering radius, in length scales, is at most ``threshold``.

    Farthest-point clustering (Wacker & Filippone 2022, Algorithm 1, step 2): start from the
    training mean; while some point is farther than theta from every centre, add the
    farthest one. With u = x / l and the running minimum distance
    d_i = min_{c in C} |u_i - u_c|, each new centre updates d against itself only, and only
    for the points within the current covering radius of it (one ball query of a k-d tree,
    :class:`scalegp.nearest.ScaledTree`): N_C centres cost O(N_C (log N + the ball's points))
    for the updates plus an O(N) argmax each, instead of O(N N_C d) distances
    (docs/local-models.md, "Algorithm 1").

    Parameters
    ----------
    X : array-like of shape (n_samples, n_dims)
    threshold : float
        theta > 0, in units of the length scale.
    length_scale : float or array-like of shape (n_dims,)
    first : {"mean", "point"}, default="mean"
        The first centre: the mean of X (the authors' choice) or the first row of X in the
        shuffled order.
    max_centres : int, default=10_000
        A cap on N_C; when it stops the clustering first, a ``UserWarning`` says so and
        gives the covering radius reached.
    rng : None, int or numpy.random.Generator, optional
        Shuffles the rows before clustering, which only breaks ties among equally far points
        (None: the rows' own order).

    Returns
    -------
    centres : ndarray of shape (n_centres, n_dims)
        In the units of X; the first is the mean (``first="mean"``), the others are rows of X.
    """
    U = _scaled(X, length_scale, "X")
    X = check_matrix(X, "X")
    threshold = float(threshold)
    if not (np.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold must be a finite number > 0 (in length scales), "
                         f"got {threshold!r}")
    max_centres = check_positive_int(max_centres, "max_centres")
    if first not in ("mean", "point"):
        raise ValueError(f"first must be 'mean' or 'point', got {first!r}")
    order = (np.arange(X.shape[0]) if rng is None
             else as_generator(rng).permutation(X.shape[0]))
    U, X = U[order], X[order]
    if first == "mean":
        centres = [X.mean(axis=0)]
        distance = np.linalg.norm(U - U.mean(axis=0), axis=1)
    else:
        centres = [X[0]]
        distance = np.linalg.norm(U - U[0], axis=1)
    tree = ScaledTree(U)                         # U is already in length scales
    while True:
        farthest = int(np.argmax(distance))
        radius = float(distance[farthest])
        if radius <= threshold:
            break
        if len(centres) == max_centres:
            warnings.warn(
                f"farthest-point clustering stopped at max_centres = {max_centres} centres "
                f"with a covering radius of {radius:.4g} length scales, above the threshold "
                f"{threshold:.4g}: raise the threshold or max_centres", UserWarning,
                stacklevel=2)
            break
        centres.append(X[farthest])
        # only points closer to the new centre than ``radius`` (every distance is at most
        # that) move: one ball query, the rest keep their distance
        near = tree.within_scaled(U[farthest], radius)
        distance[near] = np.minimum(distance[near],
                                    np.linalg.norm(U[near] - U[farthest], axis=1))
    return np.array(centres)


def nearest_centres(X, centres, *, length_scale) -> np.ndarray:
    """The index of each row's nearest centre in length-scale units, argmin_c |x/l - c/l|.

    A tree search over the centres (:class:`scalegp.nearest.ScaledTree`, O(log N_C) per
    row instead of a pass over all centres): each row's two nearest centres by the tree,
    and where their distances tie to within :data:`~scalegp.nearest.RADIUS_MARGIN` every
    centre within that reach, compared by |u - v|^2 from the differences; ties go to the
    lower index. A row's route depends on that row alone; a row too far for the tree
    (a scaled coordinate above :data:`~scalegp.nearest.MAX_COORDINATE`) is compared with
    every centre in units of its own size.

    Returns
    -------
    index : ndarray of int, shape (n_samples,)
    """
    U = _scaled(X, length_scale, "X")
    V = _scaled(centres, length_scale, "centres")
    if V.shape[1] != U.shape[1]:
        raise ValueError(f"centres have {V.shape[1]} columns, X has {U.shape[1]}")
    route = np.zeros(U.shape[0], dtype=np.intp)
    if V.shape[0] == 1:
        return route
    size = np.max(np.abs(U), axis=1, initial=0.0)
    near = np.flatnonzero(size <= MAX_COORDINATE)
    for i in np.flatnonzero(size > MAX_COORDINATE):     # too far for the tree: in units of
        squared = np.sum(((V - U[i]) / size[i]) ** 2, axis=1)    # |u|, no overflow
        route[i] = np.flatnonzero(squared == squared.min())[0]
    if near.size == 0:
        return route
    tree = ScaledTree(V)
    distance, index = tree.tree.query(U[near], k=2)
    route[near] = index[:, 0]
    tied = np.flatnonzero(distance[:, 1] <= distance[:, 0] * (1.0 + RADIUS_MARGIN) + 1e-300)
    for i in tied:                               # exact or near ties: the lower index wins
        u = U[near[i]]
        candidates = tree.within_scaled(u, distance[i, 1])
        squared = np.sum((V[candidates] - u) ** 2, axis=1)
        route[near[i]] = candidates[np.flatnonzero(squared == squared.min())[0]]
    return route
