"""Neighbourhood-local GP models: one GP per centre, trained on the centre's nearest points.

A global low-rank model spreads its m columns over the whole input box, so for a rough field
(relief, say) its resolution is bounded by m; an exact GP is bounded by its n. A
neighbourhood-local model instead keeps one GP per centre c, trained only on the k training
points nearest c, so each GP sees a small extent at full resolution (docs/local-models.md,
"Neighbourhood-local models"):

* **Cover.** Centres are chosen by an adaptive farthest-point cover: the neighbourhood of a
  centre c is its k nearest training points, R_c the distance of the k-th, and its blend radius
  r_c = R_c / 2; the next centre is the training point worst covered, the largest
  min_c |x - c| / r_c, until every training point has |x - c| / r_c <= ``overlap`` for some c.
  Distances are measured in units of the starting length scales (x / l), and the cover stays
  fixed while the hyperparameters are learned (the objective is then smooth in theta).
  A k-d tree over the scaled training points (:class:`scalegp.nearest.ScaledTree`, shared
  with the Vecchia approximation) gives each centre's k nearest points (O(k log N); ties at
  the k-th distance, common on a grid, go to the lower rows), and
  the coverage min_c |x - c| / r_c is updated only for the points of one ball query around
  the new centre (radius: the current worst coverage times r_c, beyond which no point can
  improve), with the distances by the same formula as a pass over all points: the cover is
  that of the brute-force O(N N_C d) computation, bitwise (its partial sort chose among
  points tied at the k-th distance arbitrarily: the members may differ there, the centres
  and radii do not), plus an O(N) argmax per centre.
* **Local posteriors.** Each neighbourhood is an exact GP (``approximation="exact"``: it keeps
  alpha = (K + s2 I)^{-1} y and its rows, and a variance refactorizes K + s2 I on demand,
  one neighbourhood at a time: :class:`_LocalExactGP`) or a
  low-rank GP of any feature map, with one map for all centres (one draw, one rule) built on
  the neighbourhoods shifted to their centres, x - c: a fixed-basis map (GLF) then covers a
  small box, so few nodes resolve short length scales.
* **Shared hyperparameters** maximize the block composite likelihood
  sum_c log p(y_{N_c} | theta), the sum of the local log marginal likelihoods (or of a random
  subset of ``learning_centres`` of them: a cheaper, unbiased-up-to-scale estimate of the
  same objective); gradients add the same way. With a fixed basis each local objective keeps
  its basis statistics, so a step costs O(N_C s^3) after one pass.
* **Blended prediction.** With the compactly supported C^1 weight
  w_c(x) = (1 - t^2)^2 for t = |x - c| / r_c < 1 (0 beyond), the predictive distribution is the
  mixture sum_c w_c p_c(f(x) | y) / sum_c w_c: mean mu = sum_c w~_c mu_c and variance
  sum_c w~_c (v_c + mu_c^2) - mu^2 (the mixture's), w~ = w / sum w. Every point covered by
  the cover has a weight >= (1 - overlap^2)^2 > 0, and the weights are continuous, so the mean
  is continuous across neighbourhood borders. A test point outside every blend support (far
  from the training data) takes the centre with the smallest |x - c| / r_c alone.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._memory import available_bytes, default_chunk_size
from .._validation import as_generator, check_matrix, check_positive_int, check_vector
from ..engine import exact
from ..engine.hyperparameters import Hyperparameters
from ..engine.noise import noise_only_log_marginal_likelihood
from ..engine.objectives import low_rank_objective
from ..errors import InsufficientMemoryError
from ..features.base import FeatureMap
from ..stored import Array
from ..nearest import MAX_COORDINATE, RADIUS_MARGIN, ScaledTree, pairs_within
from ..rowwise import one_blas_thread
from .centered import LocalContext, LocalModel

__all__ = ["Neighborhoods", "cover", "check_cover", "NeighborhoodLikelihood",
           "NeighborhoodPosterior", "blend_weights", "required_bytes", "check_memory"]

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


def _one_blas_thread():
    """BLAS limited to one thread: the local systems (k x k, k in the hundreds) are too small
    for threaded BLAS, whose idle threads spin; on the shared 2-core machine the East Africa
    fit took 199 s with OpenBLAS's default threads and 58 s with one (docs/decisions.md,
    "One BLAS thread for local systems")."""
    return one_blas_thread()


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


class _Shifted:
    """A local posterior on inputs shifted by its centre (x - c): what a feature map sees.

    A map bounded by the kernel (Nystrom, random projection) predicts the DTC variance, with
    c(x) = k(x, x) - q(x, x) added (docs/nystrom.md, section 4): its own q vanishes away from
    the neighbourhood's knots, where the subset-of-regressors variance would collapse to 0."""

    def __init__(self, posterior, centre: np.ndarray):
        self.posterior = posterior
        self.centre = centre
        self.diag_correction = bool(posterior.feature_map.bounded_by_kernel)

    def predict(self, X, return_var=False):
        return self.posterior.predict(X - self.centre, return_var=return_var,
                                      diag_correction=self.diag_correction)


class _LocalExactGP:
    """An exact local GP that keeps its coefficients alpha = (K + s2 I)^{-1} y and its
    training rows, not its k x k Cholesky factor: the mean k(x, X_N) alpha needs alpha only,
    and a variance refactorizes K + s2 I on demand, by the same computation as the fit
    (:meth:`scalegp.engine.exact.ExactPosterior.fit`), so predictions are those of the kept
    factor, bitwise. A fitted model then holds O(n_centres k) numbers instead of
    O(n_centres k^2) (2.3 GB for the relief map's 3,260 neighbourhoods of 300 points), and
    a prediction with variance holds one factor at a time."""

    def __init__(self, posterior, rows, X, y):
        self.kernel, self.noise_variance = posterior.kernel, posterior.noise_variance
        self.alpha, self.rows = posterior.alpha, rows
        self.log_marginal_likelihood, self.jitter = (posterior.log_marginal_likelihood,
                                                     posterior.jitter)
        self._X, self._y = X, y

    def posterior(self, *, factor: bool = True):
        """The exact posterior of the neighbourhood (refactorized with ``factor``; else
        without its factor, which only a variance reads)."""
        X = check_matrix(self._X[self.rows], "X")
        if factor:
            return exact.ExactPosterior.fit(self.kernel, self.noise_variance, X,
                                            self._y[self.rows])
        return exact.ExactPosterior(self.kernel, self.noise_variance, X, None, self.alpha,
                                    self.log_marginal_likelihood, self.jitter)

    def predict(self, X, return_var: bool = False):
        return self.posterior(factor=return_var).predict(X, return_var=return_var)


class NeighborhoodLikelihood:
    """The block composite likelihood sum_c log p(y_{N_c} | theta) of a cover (an objective:
    :mod:`scalegp.engine.objectives`), its gradient, and the neighbourhood posterior at theta.

    Parameters
    ----------
    hyperparameters : Hyperparameters
    neighborhoods : Neighborhoods
    X, y : training inputs and targets
    feature_map : FeatureMap or None
        None: exact local GPs. A map: low-rank local GPs on x - c.
    learning_centres : int or None
        Evaluate ``value`` and ``__call__`` on this many centres drawn at random (``rng``), not
        all: learning then costs that many local objectives per step. ``posterior`` always
        conditions every neighbourhood.
    solver, dtype : the low-rank engine's options
    (:func:`scalegp.engine.objectives.low_rank_objective`)
    """

    def __init__(self, hyperparameters, neighborhoods: Neighborhoods, X, y, *,
                 feature_map: FeatureMap | None = None, learning_centres: int | None = None,
                 rng=None, solver: str = "cholesky", dtype=None):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.neighborhoods = neighborhoods
        self.X = check_matrix(X, "X")
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.feature_map = feature_map
        self.solver = solver
        self.dtype = dtype
        centres = np.arange(neighborhoods.n_centres)
        if learning_centres is not None:
            learning_centres = check_positive_int(learning_centres, "learning_centres")
            if learning_centres < neighborhoods.n_centres:
                centres = np.sort(as_generator(rng).choice(
                    neighborhoods.n_centres, size=learning_centres, replace=False))
        self.learning_centres = centres
        self._objectives = {}
        self.n_evaluations = 0

    def _local_objective(self, c: int):
        """The objective of neighbourhood c (kept: a fixed basis keeps its statistics)."""
        if c not in self._objectives:
            rows = self.neighborhoods.members[c]
            X, y = self.X[rows], self.y[rows]
            if self.feature_map is None:
                objective = exact.ExactMarginalLikelihood(self.hyperparameters, X, y)
            else:
                objective = low_rank_objective(
                    self.feature_map, self.hyperparameters, X - self.neighborhoods.centres[c],
                    y, solver=self.solver, dtype=self.dtype)
            self._objectives[c] = objective
        return self._objectives[c]

    def value(self, theta) -> float:
        with _one_blas_thread():
            return float(sum(self._local_objective(c).value(theta)
                             for c in self.learning_centres))

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        self.n_evaluations += 1
        value, gradient = 0.0, 0.0
        with _one_blas_thread():
            for c in self.learning_centres:
                local_value, local_gradient = self._local_objective(c)(theta)
                value += local_value
                gradient = gradient + np.asarray(local_gradient)
        return float(value), gradient

    def posterior(self, theta) -> "NeighborhoodPosterior":
        """Every neighbourhood conditioned at theta (or at a Hyperparameters' values)."""
        kernel, noise_variance = self.hyperparameters.values(theta)
        locals_ = []
        with _one_blas_thread():
            for c in range(self.neighborhoods.n_centres):
                posterior = self._local_objective(c).posterior(theta)
                if self.feature_map is not None:
                    posterior = _Shifted(posterior, self.neighborhoods.centres[c])
                else:                   # alpha kept, the k x k factor dropped
                    posterior = _LocalExactGP(posterior, self.neighborhoods.members[c],
                                              self.X, self.y)
                locals_.append(posterior)
                if c not in self.learning_centres:   # not needed again: free its memory
                    self._objectives.pop(c, None)
        value = sum(p.log_marginal_likelihood if self.feature_map is None
                    else p.posterior.log_marginal_likelihood for p in locals_)
        return NeighborhoodPosterior(self.neighborhoods, tuple(locals_), kernel,
                                     float(noise_variance), float(value),
                                     feature_map=self.feature_map, X=self.X, y=self.y)


class NeighborhoodPosterior(LocalModel, kind="neighbors"):
    """The blended predictive distribution of a neighbourhood-local model (module docstring),
    a local kind of :mod:`scalegp.local.centered` (``LowRankGPRegressor(local="neighbors")``).

    Attributes
    ----------
    neighborhoods : Neighborhoods
    local_posteriors : tuple
        One per centre, with ``predict(X, return_var=...)`` (latent, no noise).
    kernel, noise_variance : the shared hyperparameters
    log_marginal_likelihood : float
        The composite sum_c log p(y_{N_c}) over every neighbourhood.
    noise_only_log_marginal_likelihood : float
        sum_c max_s2 log N(y_{N_c} | 0, s2 I), the same sum for the best noise-only model:
        what the composite value is compared with (a fit below it explains the data worse
        than white noise).
    feature_map : FeatureMap or None
        The map of the local GPs (None: exact local GPs).
    X_train, y_train : the training rows (kept for model files), or None
    """

    def __init__(self, neighborhoods: Neighborhoods, local_posteriors: tuple, kernel,
                 noise_variance: float, log_marginal_likelihood: float, *,
                 feature_map: FeatureMap | None = None, X=None, y=None):
        n_samples = len(np.unique(np.concatenate(neighborhoods.members)))
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self.neighborhoods = neighborhoods
        self.local_posteriors = local_posteriors
        self.X_train, self.y_train = X, y
        self.noise_only_log_marginal_likelihood = (
            None if y is None else float(sum(noise_only_log_marginal_likelihood(y[rows])
                                             for rows in neighborhoods.members)))

    @classmethod
    def learning_objective(cls, context: LocalContext, hyperparameters):
        """The block composite likelihood of the context's cover
        (:class:`NeighborhoodLikelihood`)."""
        return NeighborhoodLikelihood(
            hyperparameters, context.neighborhoods, context.source.X, context.source.y,
            feature_map=context.feature_map, learning_centres=context.learning_centres,
            rng=context.rng, dtype=context.dtype)

    @classmethod
    def fit(cls, context: LocalContext, kernel, noise_variance: float):
        hyperparameters = Hyperparameters(kernel, noise_variance)
        return cls.learning_objective(context, hyperparameters).posterior(hyperparameters)

    @property
    def centres(self) -> np.ndarray:
        return self.neighborhoods.centres

    @property
    def coefficients(self) -> np.ndarray:
        return np.concatenate([p.alpha if self.feature_map is None else p.posterior.system.beta
                               for p in self.local_posteriors])

    @property
    def memory_bytes(self) -> int:
        """Bytes of the local systems: alpha and the row indices per exact local GP (its
        factor is recomputed on demand: :class:`_LocalExactGP`); an m x m factor and beta
        per low-rank one."""
        if self.feature_map is None:
            return int(sum(p.alpha.nbytes + p.rows.nbytes for p in self.local_posteriors))
        m = self.feature_map.n_components
        return 8 * (m * m + m) * len(self.local_posteriors)

    def describe(self) -> str:
        what = "exact GPs" if self.feature_map is None else (
            f"{self.feature_map.name!r} GPs (m = {self.feature_map.n_components})")
        return f"local model 'neighbors' of {what}: {describe_cover(self.neighborhoods)}"

    # ----------------------------------------------------------------- model files
    # The local systems (k x k factors for exact local GPs) are far larger than the data, so
    # a file keeps the training rows and the cover, and loading conditions every
    # neighbourhood again at the stored hyperparameters (as ``fit`` did: same predictions).
    #: Its local GPs may be exact (``approximation="exact"``, no feature map).
    EXACT_LOCAL_GPS = True
    STORED = {"centres": Array(("c", "d")), "blend_radius": Array(("c",), ("positive",)),
              "scale": Array(("d",), ("positive",)),
              "members": Array(("c", "neighbors"), ("nonnegative",)),
              "X_train": Array(("rows", "d")), "y_train": Array(("rows",))}

    def to_state(self) -> dict:
        cover = self.neighborhoods
        return {"centres": np.asarray(cover.centres, dtype=np.float64),
                "blend_radius": np.asarray(cover.blend_radius, dtype=np.float64),
                "scale": np.asarray(cover.scale, dtype=np.float64),
                "members": np.stack(cover.members).astype(np.float64),
                "X_train": np.asarray(self.X_train, dtype=np.float64),
                "y_train": np.asarray(self.y_train, dtype=np.float64)}

    @classmethod
    def stored_arrays(cls, metadata: dict) -> set:
        return set(cls.STORED)

    @classmethod
    def from_state(cls, state, *, feature_map, kernel, noise_variance,
                   log_marginal_likelihood, n_samples, dtype, map_builder=None):
        """Condition the stored cover again; ValueError if the members are not row indices
        or the likelihood differs from the stored one (the file's rows were altered)."""
        members = state["members"]
        n_rows = state["X_train"].shape[0]
        if np.any(members != np.round(members)) or np.any(members >= n_rows):
            raise ValueError(f"'members' must hold row indices below {n_rows}")
        members = members.astype(np.intp)
        if np.any(np.diff(members, axis=1) <= 0):
            raise ValueError("each row of 'members' must be strictly increasing")
        cover = Neighborhoods(state["centres"], tuple(members), state["blend_radius"],
                              state["scale"])
        covered = len(np.unique(members))
        if covered != n_samples:
            raise ValueError(f"its neighbourhoods cover {covered} rows, but the file says "
                             f"n_samples = {n_samples}")
        # everything conditioning costs (O(n_centres k^3)) is checked first
        check_cover(cover, state["X_train"])
        check_memory(cover, feature_map)
        hyperparameters = Hyperparameters(kernel, noise_variance)
        model = NeighborhoodLikelihood(hyperparameters, cover, state["X_train"],
                                       state["y_train"], feature_map=feature_map,
                                       dtype=dtype).posterior(hyperparameters)
        if not np.isclose(model.log_marginal_likelihood, log_marginal_likelihood,
                          rtol=1e-9, atol=1e-9):
            raise ValueError(
                f"its log marginal likelihood is {model.log_marginal_likelihood!r} on the "
                f"stored rows, but the file says {log_marginal_likelihood!r}")
        return model

    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False, chunk_size: int | None = None):
        """Blended mean, and optionally the mixture variance (+ s2 if ``include_noise``)."""
        self._check_no_cov(return_cov)
        X = check_matrix(X, "X", n_dims=self.neighborhoods.centres.shape[1])
        chunk_size = chunk_size or default_chunk_size(self.neighborhoods.n_centres)
        with _one_blas_thread():
            mean, second = self._blend(X, return_var, chunk_size)
        if not return_var:
            return mean
        var = np.maximum(second - mean**2, 0.0)
        if include_noise:
            var += self.noise_variance
        return mean, var

    def _blend(self, X, return_var: bool, chunk_size: int):
        """(sum_c w~_c mu_c, sum_c w~_c (v_c + mu_c^2) or None) at the rows of X.

        The weights come ``chunk_size`` rows at a time (:func:`blend_pairs`: a tree search,
        and only the nonzero weights kept); each centre then predicts all its rows in one
        call (an exact local GP refactorizes once per call for a variance), and each row adds its
        centres' terms in the centres' order: a row's value is the one it has alone."""
        rows, centres, weights = [], [], []
        for start in range(0, X.shape[0], chunk_size):
            row, centre, weight = blend_pairs(self.neighborhoods, X[start:start + chunk_size])
            rows.append(row + start)
            centres.append(centre)
            weights.append(weight)
        rows, centres, weights = (np.concatenate(part) for part in (rows, centres, weights))
        order = np.argsort(centres, kind="stable")          # by centre, rows ascending
        rows, centres, weights = rows[order], centres[order], weights[order]
        starts = np.flatnonzero(np.diff(centres, prepend=-1))
        mean = np.zeros(X.shape[0])
        second = np.zeros(X.shape[0]) if return_var else None
        for start, stop in zip(starts, np.append(starts[1:], rows.size)):
            used, w = rows[start:stop], weights[start:stop]
            result = self.local_posteriors[centres[start]].predict(X[used],
                                                                   return_var=return_var)
            local_mean = result[0] if return_var else result
            mean[used] += w * local_mean
            if return_var:
                second[used] += w * (result[1] + local_mean**2)
        return mean, second


def describe_cover(neighborhoods: Neighborhoods) -> str:
    """One line: centres, points per neighbourhood, blend radii."""
    sizes = [len(m) for m in neighborhoods.members]
    return (f"{neighborhoods.n_centres} centres, {sizes[0]} training points each, blend "
            f"radius {np.min(neighborhoods.blend_radius):.3g} to "
            f"{np.max(neighborhoods.blend_radius):.3g} length scales")



def required_bytes(neighborhoods: Neighborhoods, feature_map: FeatureMap | None, *,
                   itemsize: int = 8) -> int:
    """Bytes a fitted neighbourhood model needs: for exact local GPs, k coefficients and k
    row indices per centre kept, and the one neighbourhood conditioned at a time (its k x k
    kernel matrix and factor, its k inputs: :class:`_LocalExactGP`); for low-rank ones an
    m x m factor and m coefficients per centre (float64 whatever ``itemsize``, which sizes
    the exact GPs' inputs)."""
    if feature_map is None:
        n_dims = neighborhoods.centres.shape[1]
        sizes = np.array([len(rows) for rows in neighborhoods.members], dtype=np.int64)
        largest = int(sizes.max()) if sizes.size else 0
        return int(16 * sizes.sum() + 16 * largest * largest + itemsize * largest * n_dims)
    m = feature_map.n_components
    return 8 * (m * m + m) * neighborhoods.n_centres


def check_memory(neighborhoods: Neighborhoods, feature_map: FeatureMap | None, *,
                 itemsize: int = 8) -> None:
    """Raise InsufficientMemoryError before conditioning a cover that will not fit."""
    needed = required_bytes(neighborhoods, feature_map, itemsize=itemsize)
    available = available_bytes()
    if available is not None and needed > available:
        raise InsufficientMemoryError(
            f"the neighbourhood-local model needs about {needed / 2**30:.2f} GiB for its "
            f"{neighborhoods.n_centres} local systems ({describe_cover(neighborhoods)}), but "
            f"only {available / 2**30:.2f} GiB is available; choose fewer neighbours "
            "(Neighbors(n_neighbors=...)) or a low-rank local map")
