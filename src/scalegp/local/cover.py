"""The cover of a neighbourhood-local model: centres, their neighbourhoods and blend weights.

The geometry of :mod:`scalegp.local.neighborhoods` (docs/local-models.md,
"Neighbourhood-local models"), fixed while the hyperparameters are learned:

* **Cover.** Centres are chosen by an adaptive farthest-point cover: the neighbourhood of a
  centre c is its k nearest training points, R_c the distance of the k-th, and its blend radius
  r_c = R_c / 2; the next centre is the training point worst covered, the largest
  min_c |x - c| / r_c, until every training point has |x - c| / r_c <= ``overlap`` for some c.
  Distances are measured in units of the starting length scales (x / l).
  A k-d tree over the scaled training points (:class:`scalegp.nearest.ScaledTree`, shared
  with the Vecchia approximation) gives each centre's k nearest points (O(k log N); ties at
  the k-th distance, common on a grid, go to the lower rows), and
  the coverage min_c |x - c| / r_c is updated only for the points of one ball query around
  the new centre (radius: the current worst coverage times r_c, beyond which no point can
  improve), with the distances by the same formula as a pass over all points: the cover is
  that of the brute-force O(N N_C d) computation, bitwise (its partial sort chose among
  points tied at the k-th distance arbitrarily: the members may differ there, the centres
  and radii do not), plus an O(N) argmax per centre.
* **Blend weights.** w_c(x) = (1 - t^2)^2 for t = |x - c| / r_c < 1 (0 beyond), compactly
  supported and C^1: every point the cover covers has a weight >= (1 - overlap^2)^2 > 0.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_matrix, check_positive_int
from ..nearest import MAX_COORDINATE, RADIUS_MARGIN, ScaledTree, pairs_within

__all__ = ["Neighborhoods", "cover", "check_cover", "blend_pairs", "blend_weights",
           "describe_cover", "OVERLAP"]


#: Largest |x - c| / r_c of a covered training point: every training point keeps a blend
#: weight of at least (1 - OVERLAP^2)^2 = 0.19 from some centre.
OVERLAP = 0.75
#: Most centres a cover may have by default: None, no cap. A cover has at most one centre
#: per training point plus their mean (each new centre is an uncovered training point), and
#: exact local GPs keep k numbers per centre, not a k x k factor (:class:`_LocalExactGP`),
#: so the cover's size is bounded by the data; :func:`check_memory` refuses a cover whose
#: low-rank systems (m x m each) would not fit. The cap was 20,000, set by the kept factors
#: (2.3 GB for 3,260 exact neighbourhoods of 300 points); in 8-D, where a blend radius holds
#: few points and the cover needs about one centre per point, it stopped kin40k's cover of
#: 25,600 points (benchmarks/results/local-fast.md).
MAX_CENTRES = None
#: Relative tolerance of :func:`check_cover` (a float32 fit's distances round at 6e-8).
COVER_TOLERANCE = 1e-5
#: Blend radius (in length scales) of a neighbourhood whose k members are all copies of its
#: centre: it covers that location only. The radius 1 it had before let such a neighbourhood
#: cover every point within 0.75 length scales, on keggdirected (one input repeated 2,678
#: times, ARD length scales up to 100) nearly all of them: 4 centres for 10,000 rows and a
#: test RMSE of 1.93 at the exact GP's hyperparameters, where that GP reaches 0.094.
POINT_RADIUS = 1e-9
#: The radius model files written before 2026-12-05 hold for such a neighbourhood.
LEGACY_POINT_RADIUS = 1.0


@dataclass(frozen=True, eq=False)
class Neighborhoods:
    """The geometry of a neighbourhood-local model, fixed while hyperparameters are learned.

    Attributes
    ----------
    centres : ndarray (n_centres, n_dims)
        In input units.
    members : tuple of int arrays
        The training rows of each centre's neighbourhood (its ``n_neighbors`` nearest).
    blend_radius : ndarray (n_centres,)
        r_c, in units of ``scale``.
    scale : ndarray (n_dims,)
        Distances are |(x - c) / scale| (the starting length scales).
    """

    centres: np.ndarray
    members: tuple
    blend_radius: np.ndarray
    scale: np.ndarray

    @property
    def n_centres(self) -> int:
        return self.centres.shape[0]

    def scaled_distances(self, X) -> np.ndarray:
        """|(x - c) / scale| for every row of X and every centre, shape (n, n_centres)."""
        Z = X / self.scale
        C = self.centres / self.scale
        squared = np.zeros((Z.shape[0], C.shape[0]))
        with np.errstate(over="ignore"):    # a row too far to measure: inf, outside all
            for j in range(Z.shape[1]):    # per dimension: no cancellation, O(n n_centres)
                squared += (Z[:, j, None] - C[None, :, j]) ** 2
        return np.sqrt(squared)


def cover(X, n_neighbors: int, *, scale, overlap: float = OVERLAP,
          max_centres: int | None = MAX_CENTRES) -> Neighborhoods:
    """The adaptive farthest-point cover of X by neighbourhoods of ``n_neighbors`` points.

    Parameters
    ----------
    X : ndarray (n_samples, n_dims)
    n_neighbors : int
        k, the training points of each neighbourhood (all of them if k >= n_samples).
    scale : float or ndarray (n_dims,)
        The length scales distances are measured in.
    overlap : float in (0, 1), default=OVERLAP
        Every training point ends within ``overlap`` blend radii of a centre.
    max_centres : int or None, default=MAX_CENTRES (None)
        The cover stops there with a warning (some points then have smaller weights); None:
        no cap.

    Returns
    -------
    Neighborhoods
        The first centre is the training mean; each later one the training point with the
        largest min_c |x - c| / r_c (module docstring).
    """
    X = check_matrix(X, "X")
    n_samples, n_dims = X.shape
    n_neighbors = min(check_positive_int(n_neighbors, "n_neighbors"), n_samples)
    if not 0.0 < overlap < 1.0:
        raise ValueError(f"overlap must lie in (0, 1), got {overlap!r}")
    scale = np.broadcast_to(np.asarray(scale, dtype=float), (n_dims,)).copy()
    tree = ScaledTree(X, scale)
    Z = tree.points
    coverage = np.full(n_samples, np.inf)        # min_c |z - c| / r_c so far
    centres, members, radii = [], [], []
    centre, worst_coverage = Z.mean(axis=0), np.inf
    while True:
        nearest = _nearest_members(tree, centre, n_neighbors)
        radius = blend_radius(float(_distance_to(Z[nearest], centre).max()))
        centres.append(centre * scale)
        members.append(nearest)
        radii.append(radius)
        # only points closer than worst_coverage radii (every coverage is at most that) can
        # be covered better by the new centre: one ball query, not a pass over all points
        rows = (np.arange(n_samples) if not np.isfinite(worst_coverage)
                else tree.within_scaled(centre, worst_coverage * radius))
        coverage[rows] = np.minimum(coverage[rows], _distance_to(Z[rows], centre) / radius)
        worst = int(np.argmax(coverage))
        worst_coverage = float(coverage[worst])
        if worst_coverage <= overlap:
            break
        if max_centres is not None and len(centres) == max_centres:
            warnings.warn(
                f"the neighbourhood cover stopped at max_centres = {max_centres}: a training "
                f"point lies {coverage[worst]:.3g} blend radii from its nearest centre "
                f"(target {overlap}); raise n_neighbors or max_centres", UserWarning,
                stacklevel=2)
            break
        centre = Z[worst].copy()
    return Neighborhoods(np.array(centres), tuple(members), np.array(radii), scale)


def _nearest_members(tree: ScaledTree, centre, k: int) -> np.ndarray:
    """The k training rows nearest the scaled centre by |z - c| (:func:`_distance_to`), ties
    at the k-th distance going to the lower rows (on a grid many points tie), increasing.

    The tree gives the k + 1 nearest; when the (k+1)-th is not farther than the k-th (a tie,
    or one within rounding), every row within the k-th distance is measured and ordered by
    (distance, row)."""
    n = tree.n_points
    near = tree.nearest_scaled(centre, min(n, k + 1))[0]
    distance = _distance_to(tree.points[near], centre)
    order = np.argsort(distance, kind="stable")
    if n <= k:
        return np.sort(near)
    reach = distance[order[k - 1]]
    if distance[order[k]] > reach * (1.0 + RADIUS_MARGIN):
        return np.sort(near[order[:k]])
    rows = tree.within_scaled(centre, reach)
    distance = _distance_to(tree.points[rows], centre)
    return np.sort(rows[np.lexsort((rows, distance))[:k]])


def blend_radius(reach: float) -> float:
    """A neighbourhood's blend radius: half the distance of its farthest member, or
    ``POINT_RADIUS`` when all its k members sit at the centre (k copies of one input: the
    neighbourhood is that one location, and covers nothing else)."""
    return 0.5 * reach if reach > 0 else POINT_RADIUS


def _distance_to(Z, centre) -> np.ndarray:
    """|z - c| for every row of Z (the cover's formula: the tree only finds the rows)."""
    return np.sqrt(np.sum((Z - centre) ** 2, axis=1))


def check_cover(neighborhoods: Neighborhoods, X, *, overlap: float = OVERLAP,
                tolerance: float = COVER_TOLERANCE) -> None:
    """Raise ValueError unless ``neighborhoods`` keeps the rules of :func:`cover` that bound
    its size (a model file's cover, checked before any neighbourhood is conditioned).

    In scaled units z = x / scale: at most one centre per row plus the first, which is the
    mean of the z's; the blend radius of each centre is half the distance of its farthest
    member (:func:`blend_radius`; files written before 2026-12-05 have 1 where that is 0);
    and each later centre lies farther than ``overlap`` blend radii from
    every earlier one (the greedy rule: centres pack like those of a fit, so a file cannot
    repeat one centre many times). A radius is at least half the distance of the k-th
    nearest row, so this bounds the number of centres as the fit's rule does. Comparisons
    allow a relative ``tolerance`` (the fit may have computed in float32). Cost
    O(n_centres (k d + log n_centres) + N d): the pairs of centres close enough to break the
    rule come from a tree search (:func:`scalegp.nearest.pairs_within`), against
    O(n_centres k^3) for conditioning. Which
    rows each neighbourhood holds is checked afterwards, by the likelihood of the model.
    """
    Z = X / neighborhoods.scale
    C = neighborhoods.centres / neighborhoods.scale
    radii = neighborhoods.blend_radius
    n_rows, n_centres = Z.shape[0], C.shape[0]
    if n_centres > n_rows + 1:
        raise ValueError(f"it has {n_centres} centres for {n_rows} training rows (a cover has "
                         "at most one per row, plus their mean)")
    size = 1.0 + float(np.max(np.abs(Z)))
    if np.max(np.abs(C[0] - Z.mean(axis=0))) > tolerance * size:
        raise ValueError("its first centre is not the mean of the training rows")
    for c, rows in enumerate(neighborhoods.members):
        reach = float(np.max(_distances(Z[rows], C[c:c + 1])))
        radius = blend_radius(reach)
        if reach == 0 and radii[c] == LEGACY_POINT_RADIUS:     # written before 2026-12-05
            continue
        if abs(radii[c] - radius) > tolerance * radius:
            raise ValueError(f"neighbourhood {c} has the blend radius {radii[c]!r}, not half "
                             f"the distance of its farthest row ({radius!r})")
    limit = overlap * radii * (1 - tolerance)
    if np.max(np.abs(C)) <= MAX_COORDINATE:
        # the pairs of centres within reach from a tree search (O(n_centres log n_centres)),
        # measured by the differences as below; the first later centre too close is named
        later, earlier = pairs_within(C, limit, C)
        keep = earlier < later
        later, earlier = later[keep], earlier[keep]
        squared = np.zeros(later.size)
        for j in range(C.shape[1]):
            squared += (C[earlier, j] - C[later, j]) ** 2
        close = np.sqrt(squared) <= limit[earlier]
        if np.any(close):
            raise ValueError(f"centre {int(later[close].min())} lies within {overlap} blend "
                             "radii of an earlier centre, which the cover never chooses")
        return
    chunk = max(1, 2**20 // n_centres)          # coordinates too large for the tree
    for start in range(1, n_centres, chunk):
        stop = min(start + chunk, n_centres)
        between = _distances(C[:stop], C[start:stop])          # (stop, stop - start)
        for j, c in enumerate(range(start, stop)):
            if np.any(between[:c, j] <= limit[:c]):
                raise ValueError(f"centre {c} lies within {overlap} blend radii of an earlier "
                                 "centre, which the cover never chooses")


def _distances(Z, C) -> np.ndarray:
    """|z - c| for every row of Z and C, shape (len(Z), len(C)), by differences."""
    squared = np.zeros((Z.shape[0], C.shape[0]))
    for j in range(Z.shape[1]):
        squared += (Z[:, j, None] - C[None, :, j]) ** 2
    return np.sqrt(squared)


def blend_pairs(neighborhoods: Neighborhoods, X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, centres, w~) of the nonzero normalized weights w~_c(x) (module docstring),
    sorted by row, then centre.

    The centres whose support |x - c| < r_c holds a row come from a tree search
    (:func:`scalegp.nearest.pairs_within`, O(n log n_centres) for a cover of bounded overlap),
    and t = |x - c| / r_c is computed on those pairs by the formula of
    :meth:`Neighborhoods.scaled_distances`; only a row outside every support (weight 1 on
    its centre of smallest t) is measured against every centre."""
    X = check_matrix(X, "X", n_dims=neighborhoods.centres.shape[1])
    Z = X / neighborhoods.scale
    C = neighborhoods.centres / neighborhoods.scale
    radius = neighborhoods.blend_radius
    with np.errstate(over="ignore", invalid="ignore"):   # a row too far: no pair, inf below
        rows, centres = pairs_within(C, radius, Z)
        squared = np.zeros(rows.size)
        for j in range(Z.shape[1]):
            squared += (Z[rows, j] - C[centres, j]) ** 2
    t = np.sqrt(squared) / radius[centres]
    inside = t < 1.0
    rows, centres, t = rows[inside], centres[inside], t[inside]
    weights = (1.0 - t ** 2) ** 2
    outside = np.ones(X.shape[0], dtype=bool)
    outside[rows] = False
    if np.any(outside):
        far = np.flatnonzero(outside)
        nearest = np.argmin(neighborhoods.scaled_distances(X[far]) / radius, axis=1)
        rows = np.concatenate([rows, far])
        centres = np.concatenate([centres, nearest])
        weights = np.concatenate([weights, np.ones(far.size)])
        order = np.lexsort((centres, rows))
        rows, centres, weights = rows[order], centres[order], weights[order]
    total = np.bincount(rows, weights=weights, minlength=X.shape[0])
    return rows, centres, weights / total[rows]


def blend_weights(neighborhoods: Neighborhoods, X) -> np.ndarray:
    """w~_c(x): the normalized weights (1 - t^2)^2, t = |x - c| / r_c, shape (n, n_centres)
    (:func:`blend_pairs` as a dense matrix).

    A row outside every support gets weight 1 on its centre of smallest t (module docstring).
    """
    rows, centres, weights = blend_pairs(neighborhoods, X)
    dense = np.zeros((np.shape(X)[0], neighborhoods.n_centres))
    dense[rows, centres] = weights
    return dense


def describe_cover(neighborhoods: Neighborhoods) -> str:
    """One line: centres, points per neighbourhood, blend radii."""
    sizes = [len(m) for m in neighborhoods.members]
    return (f"{neighborhoods.n_centres} centres, {sizes[0]} training points each, blend "
            f"radius {np.min(neighborhoods.blend_radius):.3g} to "
            f"{np.max(neighborhoods.blend_radius):.3g} length scales")
