"""Neighbourhood-local GP models: one GP per centre, trained on the centre's nearest points.

A global low-rank model spreads its m columns over the whole input box, so for a rough field
(relief, say) its resolution is bounded by m; an exact GP is bounded by its n. A
neighbourhood-local model instead keeps one GP per centre c, trained only on the k training
points nearest c, so each GP sees a small extent at full resolution (docs/local-models.md,
"Neighbourhood-local models"):

* **Cover.** An adaptive farthest-point cover of the training points, in units of the
  starting length scales, fixed while the hyperparameters are learned (the objective is then
  smooth in theta): :mod:`scalegp.local.cover`.
* **Local posteriors.** Each neighbourhood is an exact GP (``approximation="exact"``: it keeps
  alpha = (K + s2 I + V)^{-1} y and its rows, and a variance refactorizes K + s2 I + V on
  demand, one neighbourhood at a time: :class:`_LocalExactGP`) or a
  low-rank GP of any feature map, with one map for all centres (one draw, one rule) built on
  the neighbourhoods shifted to their centres, x - c: a fixed-basis map (GLF) then covers a
  small box, so few nodes resolve short length scales. V = diag(v_i) holds the rows' known
  noise variances where the fit has them (``sample_noise_variance``; 0 otherwise): each
  local GP takes its own rows' v as the global GP takes all of them (docs/engine.md, "Noise
  models").
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

import numpy as np

from .._memory import available_bytes, default_chunk_size
from .._validation import (as_generator, check_matrix, check_noise_variances,
                           check_positive_int, check_vector)
from ..engine import exact
from ..engine.hyperparameters import Hyperparameters
from ..engine.noise import noise_only_log_marginal_likelihood
from ..engine.objectives import low_rank_objective
from ..errors import InsufficientMemoryError
from ..features.base import FeatureMap
from ..stored import Array
from ..rowwise import one_blas_thread
from .centered import LocalContext, LocalModel
from .cover import Neighborhoods, blend_pairs, check_cover, describe_cover

__all__ = ["NeighborhoodLikelihood", "NeighborhoodPosterior", "required_bytes",
           "check_memory"]


def _one_blas_thread():
    """BLAS limited to one thread: the local systems (k x k, k in the hundreds) are too small
    for threaded BLAS, whose idle threads spin; on the shared 2-core machine the East Africa
    fit took 199 s with OpenBLAS's default threads and 58 s with one (docs/decisions.md,
    "One BLAS thread for local systems")."""
    return one_blas_thread()


def _rows_of(sample_noise_variance, rows):
    """The known noise variances of ``rows`` (None where the fit has none)."""
    return None if sample_noise_variance is None else sample_noise_variance[rows]


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
    """An exact local GP that keeps its coefficients alpha = (K + s2 I + V)^{-1} y and its
    training rows, not its k x k Cholesky factor: the mean k(x, X_N) alpha needs alpha only,
    and a variance refactorizes K + s2 I + V on demand (V: the rows' known noise variances,
    ``sample_noise_variance``, or 0), by the same computation as the fit
    (:meth:`scalegp.engine.exact.ExactPosterior.fit`), so predictions are those of the kept
    factor, bitwise. A fitted model then holds O(n_centres k) numbers instead of
    O(n_centres k^2) (2.3 GB for the relief map's 3,260 neighbourhoods of 300 points), and
    a prediction with variance holds one factor at a time."""

    def __init__(self, posterior, rows, X, y, sample_noise_variance=None):
        self.kernel, self.noise_variance = posterior.kernel, posterior.noise_variance
        self.alpha, self.rows = posterior.alpha, rows
        self.log_marginal_likelihood, self.jitter = (posterior.log_marginal_likelihood,
                                                     posterior.jitter)
        self._X, self._y, self._v = X, y, sample_noise_variance

    def posterior(self, *, factor: bool = True):
        """The exact posterior of the neighbourhood (refactorized with ``factor``; else
        without its factor, which only a variance reads)."""
        X = check_matrix(self._X[self.rows], "X")
        if factor:
            return exact.ExactPosterior.fit(self.kernel, self.noise_variance, X,
                                            self._y[self.rows], _rows_of(self._v, self.rows))
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
    sample_noise_variance : array of shape (n_samples,) or None
        The rows' known noise variances v_i: each local GP's covariance is
        K + s2 I + diag(v_{N_c}) (module docstring).
    """

    def __init__(self, hyperparameters, neighborhoods: Neighborhoods, X, y, *,
                 feature_map: FeatureMap | None = None, learning_centres: int | None = None,
                 rng=None, solver: str = "cholesky", dtype=None, sample_noise_variance=None):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.neighborhoods = neighborhoods
        self.X = check_matrix(X, "X")
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.sample_noise_variance = (
            None if sample_noise_variance is None
            else check_noise_variances(sample_noise_variance, self.X.shape[0]))
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
            v = _rows_of(self.sample_noise_variance, rows)
            if self.feature_map is None:
                objective = exact.ExactMarginalLikelihood(self.hyperparameters, X, y,
                                                          sample_noise_variance=v)
            else:
                objective = low_rank_objective(
                    self.feature_map, self.hyperparameters, X - self.neighborhoods.centres[c],
                    y, solver=self.solver, dtype=self.dtype, sample_noise_variance=v)
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
                                              self.X, self.y, self.sample_noise_variance)
                locals_.append(posterior)
                if c not in self.learning_centres:   # not needed again: free its memory
                    self._objectives.pop(c, None)
        value = sum(p.log_marginal_likelihood if self.feature_map is None
                    else p.posterior.log_marginal_likelihood for p in locals_)
        return NeighborhoodPosterior(self.neighborhoods, tuple(locals_), kernel,
                                     float(noise_variance), float(value),
                                     feature_map=self.feature_map, X=self.X, y=self.y,
                                     sample_noise_variance=self.sample_noise_variance)


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
    sample_noise_variance_train : the training rows' known noise variances, or None
    """

    TAKES_NOISE_VARIANCES = True

    def __init__(self, neighborhoods: Neighborhoods, local_posteriors: tuple, kernel,
                 noise_variance: float, log_marginal_likelihood: float, *,
                 feature_map: FeatureMap | None = None, X=None, y=None,
                 sample_noise_variance=None):
        n_samples = len(np.unique(np.concatenate(neighborhoods.members)))
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self.neighborhoods = neighborhoods
        self.local_posteriors = local_posteriors
        self.X_train, self.y_train = X, y
        self.sample_noise_variance_train = sample_noise_variance
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
            rng=context.rng, dtype=context.dtype,
            sample_noise_variance=context.source.sample_noise_variance)

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
              "X_train": Array(("rows", "d")), "y_train": Array(("rows",)),
              # a fit with known noise variances (standardized as y_train)
              "sample_noise_variance": Array(("rows",), ("finite", "nonnegative"),
                                             optional=True)}

    def to_state(self) -> dict:
        cover = self.neighborhoods
        state = {"centres": np.asarray(cover.centres, dtype=np.float64),
                 "blend_radius": np.asarray(cover.blend_radius, dtype=np.float64),
                 "scale": np.asarray(cover.scale, dtype=np.float64),
                 "members": np.stack(cover.members).astype(np.float64),
                 "X_train": np.asarray(self.X_train, dtype=np.float64),
                 "y_train": np.asarray(self.y_train, dtype=np.float64)}
        if self.sample_noise_variance_train is not None:
            state["sample_noise_variance"] = np.asarray(self.sample_noise_variance_train,
                                                        dtype=np.float64)
        return state

    @classmethod
    def stored_arrays(cls, metadata: dict) -> set:
        return {name for name, array in cls.STORED.items() if not array.optional}

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
        model = NeighborhoodLikelihood(
            hyperparameters, cover, state["X_train"], state["y_train"], feature_map=feature_map,
            dtype=dtype, sample_noise_variance=state.get("sample_noise_variance"),
        ).posterior(hyperparameters)
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
