"""Local (centred) models around any feature map (Wacker & Filippone 2022, Section 3.2).

A local model keeps one posterior per centre c, conditioned on the shifted inputs x - c with
one feature map psi (one draw, one allocation for all centres: decision 8 of the methods), and
predicts a test point x* from its centre c(x*) with the features psi(x* - c(x*)). Its kernel at
centre c is the local kernel (Eq. 6; docs/local-models.md, "The local kernel")

    k_c(x, y) = psi(x - c)^T psi(y - c),

which equals k(x, y) for every shift-invariant kernel whose approximation depends on x - y
only (Fourier maps: centring changes nothing), and which for a map accurate near the origin
(Maclaurin features) is exact at the centre: k_c(c, y) = k(c, y) when psi(0)^T psi(u) = k(0, u).

Two kinds are defined here, one class each, registered by name in :data:`LOCAL_KINDS`:

* ``"test-points"`` (:class:`TestPointLocalModel`): every test point is its own centre, the
  exact reformulation k(x - x*, y - x*) of Eq. 6-7, O(N* (N m^2 + m^3));
* ``"clusters"`` (:class:`ClusterLocalModel`): Algorithm 1, farthest-point centres with a
  threshold in length scales (:func:`scalegp.clustering.farthest_point_centres`), one posterior
  per centre, each test point routed to its nearest centre.

The local-model protocol
------------------------
What the estimator (:class:`scalegp.LowRankGPRegressor`, ``local=NAME``), the model files
(:mod:`scalegp.io`) and the command line need from a kind; a new kind is one subclass of
:class:`LocalModel` with ``kind="NAME"`` (that registers it in :data:`LOCAL_KINDS`, which the
estimator's ``local`` parameter, the model-file loader and ``scalegp fit --local`` read):

``LocalModel.fit(context, kernel, noise_variance)`` (classmethod)
    The model at fixed hyperparameters; ``context`` (:class:`LocalContext`) holds the shared
    feature map, the training source, the user's options and the streaming settings.
``LocalModel.learning_objective(context, hyperparameters)`` (classmethod)
    An objective (:mod:`scalegp.objectives`: ``value``, ``__call__`` giving the value and
    gradient, ``posterior(theta)`` calling ``fit``, ``hyperparameters``, ``n_evaluations``).
    The default is :class:`LocalMarginalLikelihood` at the cluster centres of ``threshold``.
``feature_map``, ``kernel``, ``noise_variance``, ``n_samples``
    The shared map, the hyperparameters, the training row count.
``log_marginal_likelihood``
    A float (NaN where the kind has none: see each kind).
``centres``, ``n_centres``
    The centres (n_centres, n_dims), or None / None for test-point centring.
``coefficients``
    The stacked coefficients beta of the posteriors kept (checked finite after a fit).
``memory_bytes``
    Bytes of the per-centre m x m systems kept (or, for test points, of one block's).
``predict(X, *, return_var=False, return_cov=False, include_noise=False)``
    As :meth:`scalegp.gp.Posterior.predict`; ``return_cov`` raises NotImplementedError (the
    centres' posteriors are different GPs, so there is no joint covariance).
``sample(X, n_samples, rng)``
    NotImplementedError, for the same reason.
``describe()``
    One line for logs and the command line.
Model files: ``model_file_metadata()`` (JSON scalars), ``model_file_arrays()`` (name ->
    float64 array), the class attributes ``MODEL_FILE_METADATA`` (name -> (JSON kind,
    condition name or None)) and ``MODEL_FILE_ARRAYS`` (name -> (shape symbols, condition
    names)) that the loader validates against, ``stored_arrays(metadata)`` (the names present
    for that metadata) and ``from_model_file(feature_map, kernel, noise_variance,
    log_marginal_likelihood, n_samples, metadata, arrays, dtype)``. Shape symbols: "d" the
    inputs, "m" the map's columns, "c" the centres, "rows" the stored training rows;
    conditions: "finite", "positive", "nonnegative", "cholesky" (a stack of lower triangular
    factors with a positive diagonal).

Only unsigned maps and homoscedastic noise are supported (the estimator says so otherwise).
Every pass reuses the engine's chunk functions (:func:`scalegp.gp.chunk_gradient`,
:func:`scalegp.gp.condition`, :func:`scalegp.gp.noise_gradient`,
:func:`scalegp.gp.fixed_basis_gradient`); :func:`centred_statistics` accumulates the
statistics of every centre in one pass over the data (docs/local-models.md, "One pass").
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from . import gp, linalg, resolution
from ._memory import _format_bytes, available_bytes
from ._validation import check_dtype
from .clustering import farthest_point_centres, nearest_centres
from .data import ArraySource, Chunk, DataSource
from .errors import InsufficientMemoryError
from .features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta
from .hyperparameters import Hyperparameters
from .kernels import Kernel
from .systems import CholeskySystem

__all__ = ["LOCAL_KINDS", "LocalContext", "LocalModel", "ClusterLocalModel",
           "TestPointLocalModel", "LocalMarginalLikelihood", "centred_statistics",
           "centred_gradients", "local_kernel", "local_memory_bytes", "farthest_point_centres",
           "nearest_centres"]

#: The local kinds by name (the estimator's ``local`` values), filled by subclassing.
LOCAL_KINDS: dict[str, type["LocalModel"]] = {}
#: Bytes of the m x m systems of one block of test points (test-point centring).
TEST_POINT_BLOCK_BYTES = 64 * 2**20


def local_kernel(feature_map: FeatureMap, kernel: Kernel, X, Y, centre) -> np.ndarray:
    """The local kernel k_c(x, y) = psi(x - c)^T psi(y - c) (Eq. 6), shape (len(X), len(Y)).

    (docs/local-models.md, "The local kernel")
    """
    at_map = feature_map.at(kernel)
    centre = np.asarray(centre, dtype=float)
    Psi_X = at_map.features(np.asarray(X, dtype=float) - centre)
    Psi_Y = at_map.features(np.asarray(Y, dtype=float) - centre)
    return Psi_X @ Psi_Y.T


def local_memory_bytes(n_centres: int, n_components: int) -> int:
    """Bytes of ``n_centres`` posteriors: a Gram (then its factor) and a vector of m each,
    8 (m^2 + m) per centre (docs/local-models.md, "Memory")."""
    return int(n_centres) * 8 * (n_components * n_components + n_components)


def check_local_memory(n_centres: int, n_components: int, what: str) -> int:
    """:func:`local_memory_bytes`, or :class:`InsufficientMemoryError` when it does not fit."""
    needed = local_memory_bytes(n_centres, n_components)
    available = available_bytes()
    if available is not None and needed > available:
        raise InsufficientMemoryError(
            f"{what} needs about {_format_bytes(needed)} for {n_centres} centres of "
            f"{n_components} x {n_components} systems, but only {_format_bytes(available)} is "
            "available; raise local_threshold (fewer centres), lower n_components, or use "
            "local_lazy=True (only the centres test points need)")
    return needed


def _maps_per_centre(at_maps, n_centres: int) -> list:
    if isinstance(at_maps, MapAtTheta):
        return [at_maps] * n_centres
    at_maps = list(at_maps)
    if len(at_maps) != n_centres:
        raise ValueError(f"got {len(at_maps)} maps for {n_centres} centres")
    return at_maps


def _symmetrize_in_place(G_upper: np.ndarray) -> np.ndarray:
    lower = np.tril_indices(G_upper.shape[0], -1)
    G_upper[lower] = G_upper.T[lower]
    return G_upper


def centred_statistics(at_maps, source: DataSource, centres, *, chunk_size: int | None = None,
                       dtype=None, progress=None) -> list[gp.Statistics]:
    """The statistics of every centre, G_c = Psi_c^T Psi_c and b_c = Psi_c^T y with
    Psi_c = psi(X - c), in one pass over ``source`` (each chunk read once).

    ``at_maps`` is one map at theta shared by all centres, or one per centre. For each chunk
    the features of the rows shifted by each centre are formed in a call of their own, and
    the centre's Gram is a symmetric rank-k update, as in
    :func:`scalegp.gp.accumulate_statistics`: a centre's statistics are bitwise those it has
    alone, whatever the other centres (a test point's, for test-point centring). Memory: one
    m x m Gram per centre plus one chunk of features (docs/local-models.md, "One pass").
    """
    dtype = check_dtype(dtype)
    centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
    n_centres = centres.shape[0]
    maps = _maps_per_centre(at_maps, n_centres)
    m = maps[0].n_components
    chunk_size = chunk_size or gp.default_chunk_size(m, dtype.itemsize)
    G_upper = [np.zeros((m, m), order="F") for _ in range(n_centres)]
    b = np.zeros((n_centres, m))
    chunk_gram = None if dtype == np.float64 else np.zeros((m, m), dtype=dtype, order="F")
    y_norm2, n_samples = 0.0, 0
    for chunk in source.chunks(chunk_size):
        rows = chunk.X.shape[0]
        y = chunk.y.astype(dtype, copy=False)
        for j, centre in enumerate(centres):
            Psi = np.asarray(maps[j].features((chunk.X - centre).astype(dtype, copy=False)),
                             dtype=dtype)
            if chunk_gram is None:
                G_upper[j] = linalg.symmetric_rank_k_update(G_upper[j], Psi)
            else:
                chunk_gram = linalg.symmetric_rank_k_update(chunk_gram, Psi, beta=0.0)
                G_upper[j] += chunk_gram
            b[j] += Psi.T @ y
        y_norm2 += float(chunk.y @ chunk.y)
        n_samples += rows
        if progress is not None:
            progress(chunk.start + rows)
    return [gp.Statistics(_symmetrize_in_place(G_upper[j]), b[j], y_norm2, n_samples)
            for j in range(n_centres)]


def centred_gradients(at_maps, source: DataSource, centres, systems, *,
                      chunk_size: int | None = None, dtype=None) -> np.ndarray:
    """Each centre's d log p_c / d theta from one pass (each chunk read once): the sum over
    chunks of :func:`scalegp.gp.chunk_gradient` on the shifted chunk (X - c, y).

    Returns an array (n_centres, n_params + 1); its last column (the noise) is 0, to be
    replaced by :func:`scalegp.gp.noise_gradient` of each centre (homoscedastic noise).
    """
    dtype = check_dtype(dtype)
    centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
    maps = _maps_per_centre(at_maps, centres.shape[0])
    n_params = maps[0].kernel.n_params
    chunk_size = chunk_size or gp.default_chunk_size(maps[0].n_components * (n_params + 2),
                                                     dtype.itemsize)
    gradients = np.zeros((centres.shape[0], n_params + 1))
    for chunk in source.chunks(chunk_size):
        for j, centre in enumerate(centres):
            shifted = Chunk((chunk.X - centre).astype(dtype, copy=False), chunk.y, None,
                            chunk.start)
            gradients[j] += gp.chunk_gradient(maps[j], shifted, systems[j])
    return gradients


# ============================================================================ context
@dataclass
class LocalContext:
    """What every kind's ``fit`` and ``learning_objective`` receive.

    Attributes
    ----------
    feature_map : FeatureMap
        The shared map (one draw / allocation for all centres), built on the mean-centred
        training inputs.
    source : ArraySource
        The training rows (inputs and targets as the model is fitted on them).
    threshold : float
        theta of the clustering, in length scales.
    lazy : bool
        Keep only the centres that test points need (cluster centring).
    reoptimize : bool
        One map per centre, built from the centre's own shifted rows.
    build_map : callable or None
        ``build_map(rows, centre, rng) -> FeatureMap``: a map built on X[rows] - centre
        (needed by ``reoptimize``).
    rng : numpy.random.Generator
        The stream of a neighbourhood-local model's draws.
    map_seed : int or None
        The seed of the per-centre maps' streams (:func:`centre_streams`), needed by
        ``reoptimize``; stored in the model file, so a loaded model rebuilds the same maps.
    chunk_size, dtype, progress
        As the engine's.
    neighborhoods : scalegp.neighborhoods.Neighborhoods or None
        The cover of a neighbourhood-local model (``local="neighbors"``).
    learning_centres : int or None
        The neighbourhoods a neighbourhood-local model learns on (None: all).
    """

    feature_map: FeatureMap | None
    source: ArraySource
    threshold: float
    lazy: bool = False
    reoptimize: bool = False
    build_map: Callable | None = None
    rng: np.random.Generator | None = None
    map_seed: int | None = None
    chunk_size: int | None = None
    dtype: np.dtype = np.dtype(np.float64)
    progress: Callable | None = None
    neighborhoods: object = None
    learning_centres: int | None = None

    def centres(self, kernel: Kernel) -> np.ndarray:
        """Farthest-point centres of the training inputs at the kernel's length scale."""
        return farthest_point_centres(self.source.X, self.threshold,
                                      length_scale=kernel.length_scale)

    def maps(self, centres: np.ndarray, kernel: Kernel):
        """The shared map, or (``reoptimize``) one map per centre, each built on the rows
        routed to it, shifted by it, from its own stream (:func:`centre_streams`); a centre
        no row routes to (the first, the training mean, can be one) keeps the shared map,
        which was built around the mean."""
        if not self.reoptimize:
            return self.feature_map
        if self.build_map is None or self.map_seed is None:
            raise ValueError("reoptimize needs build_map and map_seed")
        route = nearest_centres(self.source.X, centres, length_scale=kernel.length_scale)
        streams = centre_streams(self.map_seed, centres.shape[0])
        rows = [np.flatnonzero(route == j) for j in range(centres.shape[0])]
        return [self.build_map(rows[j], centre, stream) if rows[j].size else self.feature_map
                for j, (centre, stream) in enumerate(zip(centres, streams))]


def centre_streams(seed: int, n_centres: int) -> list[np.random.Generator]:
    """Independent streams of the per-centre maps: the children of SeedSequence(seed), the
    same for every call (learning and the final fit, and a loaded model, draw alike)."""
    return [np.random.default_rng(child)
            for child in np.random.SeedSequence(seed).spawn(n_centres)]


def _at(maps, kernel: Kernel):
    return maps.at(kernel) if isinstance(maps, FeatureMap) else [fm.at(kernel) for fm in maps]


def _n_components(maps) -> int:
    return maps.n_components if isinstance(maps, FeatureMap) else maps[0].n_components


# ============================================================================ objective
class LocalMarginalLikelihood:
    """The mean over centres of each centre's log marginal likelihood, and its gradient.

        L(theta) = (1 / N_C) sum_c log p_c(y | theta),

    where p_c is the GP of the local kernel k_c on all training rows (docs/local-models.md,
    "Learning"): each term approximates the same log p(y), so their mean does too. The
    centres (and per-centre maps) are fixed at construction, at the starting length scale.
    Each evaluation makes one pass for every centre's statistics and one for the gradient
    shares (:func:`centred_statistics`, :func:`centred_gradients`); for fixed-basis maps
    (GLF) the basis statistics of every centre are accumulated once and each evaluation
    costs O(N_C m^3), no pass. ``posterior(theta)`` is ``make_posterior(kernel,
    noise_variance)``.
    """

    def __init__(self, context: LocalContext, hyperparameters, make_posterior: Callable):
        self.context = context
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        self.make_posterior = make_posterior
        self.n_evaluations = 0

    # Computed at the first evaluation, so an objective used only for ``posterior`` (fixed
    # hyperparameters, or a lazy model) neither clusters twice nor holds every centre.
    @functools.cached_property
    def centres(self) -> np.ndarray:
        """The centres of learning: at the starting length scale."""
        return self.context.centres(self.hyperparameters.kernel)

    @functools.cached_property
    def maps(self):
        """The shared map, or one per centre (``reoptimize``)."""
        maps = self.context.maps(self.centres, self.hyperparameters.kernel)
        check_local_memory(self.centres.shape[0], _n_components(maps),
                           "learning the hyperparameters of a local model")
        return maps

    @functools.cached_property
    def basis_statistics(self) -> list | None:
        """Phi_c^T Phi_c, Phi_c^T y of every centre for fixed-basis maps (one pass), else
        None."""
        maps = [self.maps] if isinstance(self.maps, FeatureMap) else self.maps
        if not all(isinstance(fm, FixedBasisFeatureMap) for fm in maps):
            return None
        basis = (gp._BasisOnly(self.maps) if isinstance(self.maps, FeatureMap)
                 else [gp._BasisOnly(fm) for fm in self.maps])
        return [gp.BasisStatistics(s) for s in centred_statistics(
            basis, self.context.source, self.centres, chunk_size=self.context.chunk_size,
            dtype=self.context.dtype)]

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def _map_of(self, j: int) -> FeatureMap:
        return self.maps if isinstance(self.maps, FeatureMap) else self.maps[j]

    def _condition(self, theta):
        kernel, noise_variance = self.hyperparameters.values(theta)
        at_maps = _at(self.maps, kernel)
        if self.basis_statistics is not None:
            statistics = [basis.at(self._map_of(j), kernel)
                          for j, basis in enumerate(self.basis_statistics)]
        else:
            statistics = centred_statistics(at_maps, self.context.source, self.centres,
                                            chunk_size=self.context.chunk_size,
                                            dtype=self.context.dtype)
        conditioned = [gp.condition(s, noise_variance) for s in statistics]
        return kernel, at_maps, statistics, conditioned

    def value(self, theta) -> float:
        return float(np.mean([value for value, _, _ in self._condition(theta)[3]]))

    def __call__(self, theta) -> tuple[float, np.ndarray]:
        """(L(theta), dL / dtheta) = means over centres of the engine's values and gradients."""
        self.n_evaluations += 1
        kernel, at_maps, statistics, conditioned = self._condition(theta)
        systems = [system for _, system, _ in conditioned]
        if self.basis_statistics is not None:
            gradients = np.array([
                np.append(gp.fixed_basis_gradient(s, system,
                                                  self._map_of(j).log_weights_grad(kernel)),
                          0.0)
                for j, (s, system) in enumerate(zip(statistics, systems))])
        else:
            gradients = centred_gradients(at_maps, self.context.source, self.centres, systems,
                                          chunk_size=self.context.chunk_size,
                                          dtype=self.context.dtype)
        gradients[:, -1] = [gp.noise_gradient(s, system)
                            for s, system in zip(statistics, systems)]
        value = float(np.mean([value for value, _, _ in conditioned]))
        return value, gradients.mean(axis=0)

    def posterior(self, theta) -> "LocalModel":
        kernel, noise_variance = self.hyperparameters.values(theta)
        return self.make_posterior(kernel, noise_variance)


# ============================================================================ the kinds
class LocalModel(abc.ABC):
    """Base of the local kinds: the protocol of the module docstring."""

    kind: ClassVar[str] = ""
    #: name -> (JSON kind, condition name or None) of the kind's model-file metadata.
    MODEL_FILE_METADATA: ClassVar[dict] = {}
    #: name -> (shape symbols, condition names) of the kind's model-file arrays.
    MODEL_FILE_ARRAYS: ClassVar[dict] = {}
    #: name -> value of metadata that files written before the name existed lack.
    MODEL_FILE_DEFAULTS: ClassVar[dict] = {}

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if kind is not None:
            if kind in LOCAL_KINDS:
                raise ValueError(f"local kind {kind!r} is registered twice")
            cls.kind = kind
            LOCAL_KINDS[kind] = cls

    def __init__(self, feature_map: FeatureMap, kernel: Kernel, noise_variance: float,
                 log_marginal_likelihood: float, n_samples: int):
        self.feature_map = feature_map
        self.kernel = kernel
        self.noise_variance = float(noise_variance)
        self.log_marginal_likelihood = float(log_marginal_likelihood)
        self.n_samples = int(n_samples)

    @classmethod
    @abc.abstractmethod
    def fit(cls, context: LocalContext, kernel: Kernel, noise_variance: float) -> "LocalModel":
        """The model at fixed hyperparameters."""

    @classmethod
    def learning_objective(cls, context: LocalContext, hyperparameters):
        """The cluster-centred objective at ``context.threshold`` (:class:`LocalMarginal
        Likelihood`), whose posterior is this kind's ``fit``."""
        return LocalMarginalLikelihood(
            context, hyperparameters,
            lambda kernel, noise_variance: cls.fit(context, kernel, noise_variance))

    @property
    def centres(self) -> np.ndarray | None:
        return None

    @property
    def n_centres(self) -> int | None:
        centres = self.centres
        return None if centres is None else int(centres.shape[0])

    @property
    @abc.abstractmethod
    def coefficients(self) -> np.ndarray:
        """The stacked beta of the posteriors kept."""

    @property
    @abc.abstractmethod
    def memory_bytes(self) -> int:
        """Bytes of the per-centre systems kept."""

    @abc.abstractmethod
    def predict(self, X, *, return_var: bool = False, return_cov: bool = False,
                include_noise: bool = False):
        """Predictive mean, and the variance if ``return_var`` (latent, plus s2 if
        ``include_noise``)."""

    def sample(self, X, n_samples: int, rng) -> np.ndarray:
        raise NotImplementedError(
            f"a {self.kind!r} local model has no joint posterior over test points (each "
            "centre conditions a different GP), so it cannot draw posterior samples; use "
            "predict(return_std=True), or local=None")

    def describe(self) -> str:
        centres = ("every test point its own centre" if self.n_centres is None
                   else f"{self.n_centres} centres")
        return (f"local model {self.kind!r} around {self.feature_map.name!r} "
                f"(m = {self.feature_map.n_components}): {centres}, "
                f"{_format_bytes(self.memory_bytes)} of per-centre systems")

    @staticmethod
    def _check_no_cov(return_cov: bool) -> None:
        if return_cov:
            raise NotImplementedError(
                "a local model has no joint predictive covariance (each centre conditions a "
                "different GP); use return_std=True")

    # ----------------------------------------------------------------- model files
    @abc.abstractmethod
    def model_file_metadata(self) -> dict:
        """The kind's JSON scalars (``MODEL_FILE_METADATA``)."""

    @abc.abstractmethod
    def model_file_arrays(self) -> dict[str, np.ndarray]:
        """The kind's arrays (``MODEL_FILE_ARRAYS``), float64."""

    @classmethod
    @abc.abstractmethod
    def stored_arrays(cls, metadata: dict) -> set[str]:
        """The names of the arrays a file of this kind with this metadata holds."""

    @classmethod
    def has_likelihood(cls, metadata: dict) -> bool:
        """Whether a model of this kind with this metadata has a log marginal likelihood of
        its own (finite in its model file; NaN where it has none)."""
        return True

    @classmethod
    @abc.abstractmethod
    def from_model_file(cls, feature_map, kernel, noise_variance, log_marginal_likelihood,
                        n_samples, metadata, arrays, dtype, map_builder=None) -> "LocalModel":
        """The model from validated model-file values; ``map_builder(X, y)`` returns the
        fit's ``build_map(rows, centre, rng)`` for training rows (X, y), for kinds that
        rebuild per-centre maps."""


def _training_arrays(source: ArraySource) -> dict[str, np.ndarray]:
    return {"X_train": np.asarray(source.X, dtype=np.float64),
            "y_train": np.asarray(source.y, dtype=np.float64)}


class ClusterLocalModel(LocalModel, kind="clusters"):
    """Cluster centring (Algorithm 1; docs/local-models.md, "Algorithm 1"): one posterior per
    farthest-point centre, each test point predicted by its nearest centre's.

    For centre c with Psi_c = psi(X - c): M_c = Psi_c^T Psi_c + s2 I = L_c L_c^T,
    beta_c = M_c^{-1} Psi_c^T y; at x* routed to c, mean psi(x* - c)^T beta_c and latent
    variance s2 |L_c^{-1} psi(x* - c)|^2 (plus k(x*, x*) - |psi(x* - c)|^2 for a map bounded by
    the kernel: the DTC variance of docs/nystrom.md, section 4). The centres come from
    :func:`~scalegp.clustering.farthest_point_centres` at the model's length scale, the first
    being the training mean; routing is by :func:`~scalegp.clustering.nearest_centres`.
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

    MODEL_FILE_METADATA = {"threshold": ("number", "positive"), "lazy": ("bool", None),
                           "reoptimized": ("bool", None), "map_seed": ("int", "nonnegative")}
    MODEL_FILE_DEFAULTS = {"reoptimized": False, "map_seed": 0}
    MODEL_FILE_ARRAYS = {
        "centres": (("c", "d"), ("finite",)),
        "beta": (("c", "m"), ("finite",)),
        "cholesky_factor": (("c", "m", "m"), ("finite", "cholesky")),
        "X_train": (("rows", "d"), ("finite",)),
        "y_train": (("rows",), ("finite",)),
    }

    def __init__(self, feature_map, kernel, noise_variance, log_marginal_likelihood,
                 n_samples, *, centres: np.ndarray, threshold: float, systems: dict,
                 maps=None, lazy: bool = False, source: ArraySource | None = None,
                 map_seed: int | None = None, chunk_size: int | None = None, dtype=None,
                 centre_ratios: dict | None = None):
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self._centres = centres
        #: index -> the truncation's ratio at each centre (scalegp.resolution), as known
        self._centre_ratios = dict(centre_ratios or {})
        self.map_seed = map_seed
        self.threshold = float(threshold)
        self.systems = dict(systems)
        self.maps = feature_map if maps is None else maps
        self.lazy = bool(lazy)
        self.source = source
        self.chunk_size = chunk_size
        self.dtype = check_dtype(dtype)

    @property
    def reoptimized(self) -> bool:
        return not isinstance(self.maps, FeatureMap)

    @classmethod
    def fit(cls, context, kernel, noise_variance):
        centres = context.centres(kernel)
        maps = context.maps(centres, kernel)
        m = _n_components(maps)
        reoptimized = not isinstance(maps, FeatureMap)
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
        statistics = centred_statistics(_at(maps, kernel), context.source, centres,
                                        chunk_size=context.chunk_size, dtype=context.dtype,
                                        progress=context.progress)
        values, systems = [], {}
        for j, s in enumerate(statistics):
            value, system, _ = gp.condition(s, noise_variance)
            values.append(value)
            systems[j] = system
        return cls(context.feature_map, kernel, noise_variance, float(np.mean(values)),
                   context.source.n_samples, systems=systems, **common)

    @property
    def centres(self):
        return self._centres

    def _map_of(self, j: int) -> FeatureMap:
        return self.maps if isinstance(self.maps, FeatureMap) else self.maps[j]

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
        maps = [self._map_of(j).at(self.kernel) for j in missing]
        statistics = centred_statistics(maps, self.source, self._centres[missing],
                                        chunk_size=self.chunk_size, dtype=self.dtype)
        for j, s in zip(missing, statistics):
            self.systems[j] = gp.condition(s, self.noise_variance)[1]

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
            posterior = gp.Posterior(self._map_of(int(j)), self.kernel, self.systems[int(j)],
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
    def model_file_metadata(self):
        return {"threshold": self.threshold, "lazy": self.lazy,
                "reoptimized": self.reoptimized,
                "map_seed": int(self.map_seed) if self.reoptimized else 0}

    def model_file_arrays(self):
        if self.reoptimized and self.source.X.dtype != np.float64:
            raise NotImplementedError(
                "a local model fitted with local_reoptimize=True rebuilds its per-centre maps "
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
    def from_model_file(cls, feature_map, kernel, noise_variance, log_marginal_likelihood,
                        n_samples, metadata, arrays, dtype, map_builder=None):
        """A lazy model's centres are recomputed from its rows, as ``fit`` computed them; a
        re-optimized model's maps are rebuilt from its rows and seed (ValueError if they do
        not have the stored systems' size)."""
        source = (ArraySource(arrays["X_train"], arrays["y_train"], dtype=dtype)
                  if "X_train" in arrays else None)
        centres = (farthest_point_centres(source.X, metadata["threshold"],
                                          length_scale=kernel.length_scale)
                   if metadata["lazy"] else arrays["centres"])
        maps = None
        if not metadata["reoptimized"] and metadata["map_seed"] != 0:
            raise ValueError(f"it has map_seed {metadata['map_seed']}, which only a "
                             "re-optimized model uses (0 otherwise)")
        if metadata["reoptimized"]:
            if map_builder is None:
                raise ValueError("a re-optimized local model needs the map builder of its "
                                 "estimator to be loaded")
            context = LocalContext(feature_map, source, metadata["threshold"], reoptimize=True,
                                   build_map=map_builder(source.X, source.y),
                                   map_seed=metadata["map_seed"])
            maps = context.maps(centres, kernel)
            sizes = {fm.n_components for fm in maps}
            if not metadata["lazy"] and sizes != {arrays["beta"].shape[1]}:
                raise ValueError(f"its rebuilt per-centre maps have {sorted(sizes)} columns, "
                                 f"the stored systems {arrays['beta'].shape[1]}")
        common = dict(centres=centres, threshold=metadata["threshold"], maps=maps,
                      map_seed=metadata["map_seed"] if maps is not None else None,
                      source=source, dtype=dtype)
        if metadata["lazy"]:
            return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                       systems={}, lazy=True, **common)
        # the factor in the memory order the fit's factorization wrote it (LAPACK's, Fortran),
        # so that the solves, and the predictions, are bit-identical
        systems = {j: CholeskySystem(noise_variance, arrays["beta"][j], 0.0,
                                     np.asfortranarray(arrays["cholesky_factor"][j]))
                   for j in range(arrays["centres"].shape[0])}
        return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                   systems=systems, **common)


class TestPointLocalModel(LocalModel, kind="test-points"):
    """Test-point centring (Section 3.2, Eq. 6-7; docs/local-models.md, "Test-point
    centring"): every test point x* is its own centre, so its posterior is that of the GP
    with kernel k(x - x*, y - x*), whose test features are psi(0):

        M_* = Psi_*^T Psi_* + s2 I = L_* L_*^T,   Psi_* = psi(X - x*),
        mean(x*) = v_*^T w_*,   latent variance s2 |v_*|^2 (+ k(0, 0) - |psi(0)|^2, the DTC
        correction, for a map bounded by the kernel: Nystrom, random projection),
        v_* = L_*^{-1} psi(0),  w_* = L_*^{-1} Psi_*^T y.

    Blocks of test points are done together: one pass over the training rows gives the
    statistics of the whole block (each point's features of a chunk in a call of their own,
    so that a point's prediction is bitwise the one it has alone), and the block's m x m
    systems are factorized in one batched call (:func:`scalegp.linalg.batched_cholesky`).
    Cost O(N* (N m^2 + m^3)).

    The model needs the training rows at prediction, so it keeps them, and its model file
    stores them. It has no marginal likelihood of its own (``log_marginal_likelihood`` is NaN);
    its hyperparameters are learned on the cluster-centred objective at ``threshold``
    (:class:`LocalMarginalLikelihood`).
    """

    MODEL_FILE_METADATA = {"threshold": ("number", "positive")}
    MODEL_FILE_ARRAYS = {"X_train": (("rows", "d"), ("finite",)),
                         "y_train": (("rows",), ("finite",))}

    def __init__(self, feature_map, kernel, noise_variance, log_marginal_likelihood,
                 n_samples, *, source: ArraySource, threshold: float,
                 chunk_size: int | None = None, dtype=None, progress=None):
        super().__init__(feature_map, kernel, noise_variance, log_marginal_likelihood,
                         n_samples)
        self.source = source
        self.threshold = float(threshold)
        self.chunk_size = chunk_size
        self.dtype = check_dtype(dtype)
        self.progress = progress

    @classmethod
    def fit(cls, context, kernel, noise_variance):
        if context.reoptimize:
            raise NotImplementedError(
                "local_reoptimize applies to local='clusters' (a map per test point would "
                "be rebuilt at every prediction)")
        return cls(context.feature_map, kernel, noise_variance, math.nan,
                   context.source.n_samples, source=context.source,
                   threshold=context.threshold, chunk_size=context.chunk_size,
                   dtype=context.dtype)

    @property
    def coefficients(self):
        return np.zeros(0)

    @property
    def block_size(self) -> int:
        """Test points per block: their systems take ``TEST_POINT_BLOCK_BYTES``."""
        m = self.feature_map.n_components
        return max(1, TEST_POINT_BLOCK_BYTES // (3 * 8 * m * m))

    @property
    def memory_bytes(self):
        return local_memory_bytes(self.block_size, self.feature_map.n_components)

    def predict(self, X, *, return_var=False, return_cov=False, include_noise=False,
                progress=None):
        """``progress(test_points_done)``, if given (or set on the model), is called after
        each block."""
        self._check_no_cov(return_cov)
        X = self.feature_map.check_input(X, self.kernel)
        resolution.warn_unresolved_local(self.feature_map, self.kernel, self.noise_variance,
                                         self.source.X, X)
        progress = progress or self.progress
        at_map = self.feature_map.at(self.kernel)
        psi0 = np.asarray(at_map.features(np.zeros((1, X.shape[1]), dtype=X.dtype))[0],
                          dtype=np.float64)
        s2 = self.noise_variance
        m = psi0.size
        mean, var = np.empty(X.shape[0]), np.empty(X.shape[0])
        for start in range(0, X.shape[0], self.block_size):
            block = X[start:start + self.block_size].astype(np.float64)
            statistics = centred_statistics(at_map, self.source, block,
                                            chunk_size=self.chunk_size, dtype=self.dtype)
            A = np.stack([s.gram for s in statistics])
            A[:, np.arange(m), np.arange(m)] += s2
            # a point whose features overflow (too far for the map) predicts NaN, which the
            # estimator reports with its row; the other points are factorized as they are
            finite = np.isfinite(A).all(axis=(1, 2))
            A[~finite] = np.eye(m)
            L, _ = linalg.batched_cholesky(A, name="Psi^T Psi + noise_variance I")
            for k, s in enumerate(statistics):
                V = linalg.solve_lower(L[k], np.column_stack([psi0, s.projection]))
                mean[start + k] = V[:, 0] @ V[:, 1] if finite[k] else np.nan
                var[start + k] = s2 * (V[:, 0] @ V[:, 0]) if finite[k] else np.nan
            if progress is not None:
                progress(start + block.shape[0])
        if not return_var:
            return mean
        np.maximum(var, 0.0, out=var)
        if self.feature_map.bounded_by_kernel:        # the DTC variance (class docstring)
            var += max(float(self.kernel.diag(np.zeros((1, X.shape[1])))[0]) - psi0 @ psi0,
                       0.0)
        if include_noise:
            var += s2
        return mean, var

    # ----------------------------------------------------------------- model files
    def model_file_metadata(self):
        return {"threshold": self.threshold}

    def model_file_arrays(self):
        return _training_arrays(self.source)

    @classmethod
    def stored_arrays(cls, metadata):
        return {"X_train", "y_train"}

    @classmethod
    def has_likelihood(cls, metadata) -> bool:
        """No marginal likelihood of its own (NaN; class docstring)."""
        return False

    @classmethod
    def from_model_file(cls, feature_map, kernel, noise_variance, log_marginal_likelihood,
                        n_samples, metadata, arrays, dtype,
                        map_builder=None):
        return cls(feature_map, kernel, noise_variance, log_marginal_likelihood, n_samples,
                   source=ArraySource(arrays["X_train"], arrays["y_train"], dtype=dtype),
                   threshold=metadata["threshold"], dtype=dtype)
