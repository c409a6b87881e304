"""The local kind ``"clusters"`` (Wacker & Filippone 2022, Algorithm 1): farthest-point centres
with a threshold in length scales (:func:`scalegp.local.clustering.farthest_point_centres`), one
posterior per centre, each test point routed to its nearest centre (docs/local-models.md).
"""

from __future__ import annotations

import math

import numpy as np

from .. import engine
from .._validation import check_dtype
from ..data.base import ArraySource
from ..engine.systems import CholeskySystem
from ..features.base import MapSequence
from ..stored import Array, Value
from . import resolution
from .centered import (LocalContext, LocalModel, _training_arrays, centred_statistics,
                       check_local_memory, local_memory_bytes)
from .clustering import farthest_point_centres, nearest_centres


class ClusterLocalModel(LocalModel, kind="clusters"):
    """Cluster centring (Algorithm 1; docs/local-models.md, "Algorithm 1"): one posterior per
    farthest-point centre, each test point predicted by its nearest centre's.

    For centre c with Psi_c = psi(X - c): M_c = Psi_c^T Psi_c + s2 I = L_c L_c^T,
    beta_c = M_c^{-1} Psi_c^T y; at x* routed to c, mean psi(x* - c)^T beta_c and latent
    variance s2 |L_c^{-1} psi(x* - c)|^2 (plus k(x*, x*) - |psi(x* - c)|^2 for a map bounded by
    the kernel: the DTC variance of docs/nystrom.md, section 4). The centres come from
    :func:`~scalegp.local.clustering.farthest_point_centres` at the model's length scale, the first
    being the training mean; routing is by :func:`~scalegp.local.clustering.nearest_centres`.
    All centres' statistics come from one pass (:func:`centred_statistics`); the systems take
    8 (m^2 + m) N_C bytes (``memory_bytes``), checked against the available memory first.

    Lazy mode (``lazy=True``): ``fit`` computes the centres only and keeps the training rows;
    each ``predict`` accumulates, in one pass, the statistics of the centres its test points
    route to that are not cached yet, and caches their systems. A lazy model's
    ``log_marginal_likelihood`` is NaN (it would need every centre). Its model file stores the
    training rows (and the threshold), not the cache: a loaded model recomputes the centres
    and refills the cache identically.

    ``reoptimize=True`` builds one map per centre from the rows routed to it, shifted by it,
    each from its own stream of ``map_seed`` (:func:`centre_streams`). Its model file stores
    the seed and the training rows besides the systems; a loaded model rebuilds the maps from
    them exactly as the fit built them (the map builder of the stored estimator parameters).
    """

    STORED = {"threshold": Value("number", "positive"), "lazy": Value("bool"),
              "reoptimized": Value("bool"), "map_seed": Value("int", "nonnegative"),
              "centres": Array(("c", "d")), "beta": Array(("c", "m")),
              "cholesky_factor": Array(("c", "m", "m"), ("finite", "cholesky")),
              "X_train": Array(("rows", "d")), "y_train": Array(("rows",))}
    MODEL_FILE_DEFAULTS = {"reoptimized": False, "map_seed": 0}

    def __init__(self, feature_map, kernel, noise_variance, log_marginal_likelihood,
                 n_samples, *, centres: np.ndarray, threshold: float, systems: dict,
                 maps=None, lazy: bool = False, source: ArraySource | None = None,
                 map_seed: int | None = None, chunk_size: int | None = None, dtype=None,
                 centre_ratios: dict | None = None):
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self._centres = centres
        #: index -> the truncation's ratio at each centre (scalegp.local.resolution), as known
        self._centre_ratios = dict(centre_ratios or {})
        self.map_seed = map_seed
        self.threshold = float(threshold)
        self.systems = dict(systems)
        #: the map of each centre (the shared one repeated unless re-optimized)
        self.maps = MapSequence.repeat(feature_map, len(centres)) if maps is None else maps
        self.lazy = bool(lazy)
        self.source = source
        self.chunk_size = chunk_size
        self.dtype = check_dtype(dtype)

    @property
    def reoptimized(self) -> bool:
        return not self.maps.shared

    @classmethod
    def fit(cls, context, kernel, noise_variance):
        centres = context.centres(kernel)
        maps = context.maps(centres, kernel)
        m = maps.n_components
        reoptimized = not maps.shared
        common = dict(centres=centres, threshold=context.threshold,
                      maps=maps if reoptimized else None,
                      map_seed=context.map_seed if reoptimized else None,
                      chunk_size=context.chunk_size, dtype=context.dtype)
        if context.lazy:
            return cls(context.feature_map, kernel, noise_variance, math.nan,
                       context.source.n_samples, systems={}, lazy=True, source=context.source,
                       **common)
        if reoptimized:                     # its model file rebuilds the maps from the rows
            common["source"] = context.source
        common["centre_ratios"] = resolution.centre_ratios(
            context.feature_map, kernel, noise_variance, context.source.X, centres)
        check_local_memory(centres.shape[0], m, "a cluster-centred local model")
        statistics = centred_statistics(maps.at(kernel), context.source, centres,
                                        chunk_size=context.chunk_size, dtype=context.dtype,
                                        progress=context.progress)
        values, systems = [], {}
        for j, s in enumerate(statistics):
            value, system, _ = engine.condition(s, noise_variance)
            values.append(value)
            systems[j] = system
        return cls(context.feature_map, kernel, noise_variance, float(np.mean(values)),
                   context.source.n_samples, systems=systems, **common)

    @property
    def centres(self):
        return self._centres

    @property
    def coefficients(self):
        if not self.systems:
            return np.zeros(0)
        return np.concatenate([self.systems[j].beta for j in sorted(self.systems)])

    @property
    def memory_bytes(self):
        return local_memory_bytes(len(self.systems), self.feature_map.n_components)

    def route(self, X) -> np.ndarray:
        """The index of each row's centre (nearest in length scales)."""
        return nearest_centres(X, self._centres, length_scale=self.kernel.length_scale)

    def _condition_missing(self, needed: np.ndarray) -> None:
        missing = [int(j) for j in needed if int(j) not in self.systems]
        if not missing:
            return
        check_local_memory(len(self.systems) + len(missing), self.feature_map.n_components,
                           "the centres of a lazy local model")
        statistics = centred_statistics(self.maps.take(missing).at(self.kernel), self.source, self._centres[missing],
                                        chunk_size=self.chunk_size, dtype=self.dtype)
        for j, s in zip(missing, statistics):
            self.systems[j] = engine.condition(s, self.noise_variance)[1]

    def predict(self, X, *, return_var=False, return_cov=False, include_noise=False):
        self._check_no_cov(return_cov)
        X = self.feature_map.check_input(X, self.kernel)
        route = self.route(X)
        resolution.warn_unresolved_routed(
            self.feature_map, self.kernel, self.noise_variance,
            None if self.source is None else self.source.X, self._centres, X, route,
            self._centre_ratios)
        needed = np.unique(route)
        if self.lazy:
            self._condition_missing(needed)
        mean = np.empty(X.shape[0])
        var = np.empty(X.shape[0]) if return_var else None
        for j in needed:
            rows = np.flatnonzero(route == j)
            posterior = engine.Posterior(self.maps[int(j)], self.kernel, self.systems[int(j)],
                                     math.nan, self.n_samples)
            shifted = (X[rows] - self._centres[j]).astype(X.dtype, copy=False)
            out = posterior.predict(shifted, return_var=return_var, include_noise=include_noise,
                                    diag_correction=posterior.feature_map.bounded_by_kernel)
            if return_var:
                mean[rows], var[rows] = out
            else:
                mean[rows] = out
        return (mean, var) if return_var else mean

    # ----------------------------------------------------------------- model files
    def to_state(self):
        scalars = {"threshold": self.threshold, "lazy": self.lazy,
                   "reoptimized": self.reoptimized,
                   "map_seed": int(self.map_seed) if self.reoptimized else 0}
        return {**scalars, **self._stored_arrays()}

    def _stored_arrays(self):
        if self.reoptimized and self.source.X.dtype != np.float64:
            raise NotImplementedError(
                "a local model fitted with Clusters(reoptimize=True) rebuilds its per-centre maps "
                "from the stored float64 training rows, which differ from these float32 ones; "
                "fit it in float64 to save it")
        training = _training_arrays(self.source) if self.lazy or self.reoptimized else {}
        if self.lazy:                   # the centres follow from the rows and the threshold
            return training
        order = range(self._centres.shape[0])
        return {"centres": np.asarray(self._centres, dtype=np.float64),
                "beta": np.stack([self.systems[j].beta for j in order]),
                "cholesky_factor": np.stack([self.systems[j].cholesky_factor for j in order]),
                **training}

    @classmethod
    def has_likelihood(cls, metadata) -> bool:
        """A lazy model's likelihood would need every centre: it has none (NaN)."""
        return not metadata["lazy"]

    @classmethod
    def stored_arrays(cls, metadata):
        training = {"X_train", "y_train"}
        if metadata["lazy"]:
            return training
        return {"centres", "beta", "cholesky_factor"} | (training if metadata["reoptimized"]
                                                         else set())

    @classmethod
    def from_state(cls, state, *, feature_map, kernel, noise_variance,
                   log_marginal_likelihood, n_samples, dtype, map_builder=None):
        """A lazy model's centres are recomputed from its rows, as ``fit`` computed them; a
        re-optimized model's maps are rebuilt from its rows and seed (ValueError if they do
        not have the stored systems' size)."""
        source = (ArraySource(state["X_train"], state["y_train"], dtype=dtype)
                  if "X_train" in state else None)
        centres = (farthest_point_centres(source.X, state["threshold"],
                                          length_scale=kernel.length_scale)
                   if state["lazy"] else state["centres"])
        maps = None
        if not state["reoptimized"] and state["map_seed"] != 0:
            raise ValueError(f"it has map_seed {state['map_seed']}, which only a "
                             "re-optimized model uses (0 otherwise)")
        if state["reoptimized"]:
            if map_builder is None:
                raise ValueError("a re-optimized local model needs the map builder of its "
                                 "estimator to be loaded")
            context = LocalContext(feature_map, source, state["threshold"], reoptimize=True,
                                   build_map=map_builder(source.X, source.y),
                                   map_seed=state["map_seed"])
            maps = context.maps(centres, kernel)
            sizes = {fm.n_components for fm in maps}
            if not state["lazy"] and sizes != {state["beta"].shape[1]}:
                raise ValueError(f"its rebuilt per-centre maps have {sorted(sizes)} columns, "
                                 f"the stored systems {state['beta'].shape[1]}")
        common = dict(centres=centres, threshold=state["threshold"], maps=maps,
                      map_seed=state["map_seed"] if maps is not None else None,
                      source=source, dtype=dtype)
        if state["lazy"]:
            return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                       systems={}, lazy=True, **common)
        # the factor in the memory order the fit's factorization wrote it (LAPACK's, Fortran),
        # so that the solves, and the predictions, are bit-identical
        systems = {j: CholeskySystem(noise_variance, state["beta"][j], 0.0,
                                     np.asfortranarray(state["cholesky_factor"][j]))
                   for j in range(state["centres"].shape[0])}
        return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                   systems=systems, **common)
