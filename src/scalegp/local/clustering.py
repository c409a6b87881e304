"""Farthest-point clustering in length-scale units, and nearest-centre routing.

Distances are measured in u = x / l (l the kernel's length scale, one per input for ARD), so a
threshold theta is "theta length scales" in every direction (docs/local-models.md,
"Algorithm 1"). Both functions are public: local models (:mod:`scalegp.local.centered`) and any
model that partitions the inputs by centres call them.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import rowwise
from .._validation import as_generator, check_matrix, check_positive_int, check_positive_vector

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
    d_i = min_{c in C} |u_i - u_c|, each new centre updates d against itself only, so N_C
    centres cost O(N N_C d) (docs/local-models.md, "Algorithm 1").

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
        np.minimum(distance, np.linalg.norm(U - U[farthest], axis=1), out=distance)
    return np.array(centres)


def nearest_centres(X, centres, *, length_scale) -> np.ndarray:
    """The index of each row's nearest centre in length-scale units, argmin_c |x/l - c/l|.

    Row by row: with u = x / l - o and v = c / l - o, o the centres' mean (a reference of the
    model, not of X), |u - v|^2 = |u|^2 - 2 u.v + |v|^2, and |u|^2 is common to a row and
    drops out; the products go through the fixed blocks of :func:`scalegp.rowwise.in_blocks`,
    so a row's route is that of the row alone, bitwise. Ties go to the lower index.

    Returns
    -------
    index : ndarray of int, shape (n_samples,)
    """
    U = _scaled(X, length_scale, "X")
    V = _scaled(centres, length_scale, "centres")
    if V.shape[1] != U.shape[1]:
        raise ValueError(f"centres have {V.shape[1]} columns, X has {U.shape[1]}")
    origin = V.mean(axis=0)
    V = V - origin
    V_norm2 = np.einsum("ij,ij->i", V, V)

    def route(rows):
        with np.errstate(over="ignore", invalid="ignore"):    # a row too far: any centre
            return np.argmin(V_norm2 - 2.0 * (rows - origin) @ V.T, axis=1)
    return rowwise.in_blocks(route, U)
