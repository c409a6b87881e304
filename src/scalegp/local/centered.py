"""Local (centred) models around any feature map (Wacker & Filippone 2022, Section 3.2).

A local model keeps one posterior per centre c, conditioned on the shifted inputs x - c with
one feature map psi (one draw, one allocation for all centres: decision 8 of the methods), and
predicts a test point x* from its centre c(x*) with the features psi(x* - c(x*)). Its kernel at
centre c is the local kernel (Eq. 6; docs/local-models.md, "The local kernel")

    k_c(x, y) = psi(x - c)^T psi(y - c),

which equals k(x, y) for every shift-invariant kernel whose approximation depends on x - y
only (Fourier maps: centring changes nothing), and which for a map accurate near the origin
(Maclaurin features) is exact at the centre: k_c(c, y) = k(c, y) when psi(0)^T psi(u) = k(0, u).

Two kinds are defined next to it, one class each, registered by name in :data:`LOCAL_KINDS`:

* ``"test-points"`` (:class:`~scalegp.local.test_points.TestPointLocalModel`): every test point is
  its own centre, the exact reformulation k(x - x*, y - x*) of Eq. 6-7, O(N* (N m^2 + m^3));
* ``"clusters"`` (:class:`~scalegp.local.clusters.ClusterLocalModel`): Algorithm 1, farthest-point
  centres with a threshold in length scales
  (:func:`scalegp.local.clustering.farthest_point_centres`), one posterior per centre, each test
  point routed to its nearest centre.

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
    An objective (:mod:`scalegp.engine.objectives`: ``value``, ``__call__`` giving the value and
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
    As :meth:`scalegp.engine.likelihood.Posterior.predict`; ``return_cov`` raises NotImplementedError (the
    centres' posteriors are different GPs, so there is no joint covariance).
``sample(X, n_samples, rng)``
    NotImplementedError, for the same reason.
``describe()``
    One line for logs and the command line.
Model files: the class attribute ``STORED`` (name -> :class:`scalegp.stored.Value`, a JSON
    value of the metadata ``local``, or :class:`scalegp.stored.Array`, the array
    ``local.<name>``) that the loader validates against, ``to_state()`` (name -> value or
    float64 array), ``stored_arrays(metadata)`` (the names present for that metadata) and
    ``from_state(state, *, feature_map, kernel, noise_variance, log_marginal_likelihood,
    n_samples, dtype, map_builder)``. Shape symbols: "d" the inputs, "m" the map's columns,
    "c" the centres, "rows" the stored training rows; conditions: those of
    :data:`scalegp.stored.CONDITIONS` ("cholesky": a stack of lower triangular factors with a
    positive diagonal).

Only unsigned maps and homoscedastic noise are supported (the estimator says so otherwise).
Every pass reuses the engine's chunk functions (:func:`scalegp.engine.statistics.chunk_gradient`,
:func:`scalegp.engine.likelihood.condition`, :func:`scalegp.engine.gradients.noise_gradient`,
:func:`scalegp.engine.gradients.fixed_basis_gradient`); :func:`centred_statistics` accumulates the
statistics of every centre in one pass over the data (docs/local-models.md, "One pass").
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import engine, linalg
from .._memory import available_bytes, default_chunk_size, format_bytes
from .._validation import check_dtype
from ..data.base import ArraySource, Chunk, DataSource
from ..engine.hyperparameters import Hyperparameters
from ..errors import InsufficientMemoryError
from ..features.base import FeatureMap, FixedBasisFeatureMap, MapAtTheta, MapSequence
from ..kernels import Kernel
from .clustering import farthest_point_centres, nearest_centres


__all__ = ["LOCAL_KINDS", "LocalContext", "LocalModel", "LocalMarginalLikelihood",
           "centred_statistics", "centred_gradients", "local_kernel", "local_memory_bytes"]


#: The local kinds by name (the estimator's ``local`` values), filled by subclassing.
LOCAL_KINDS: dict[str, type["LocalModel"]] = {}


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
            f"{what} needs about {format_bytes(needed)} for {n_centres} centres of "
            f"{n_components} x {n_components} systems, but only {format_bytes(available)} is "
            "available; raise the threshold (Clusters(threshold=...): fewer centres), lower "
            "n_components, or use Clusters(lazy=True) (only the centres test points need)")
    return needed


def _check_one_per_centre(at_maps, n_centres: int) -> Sequence[MapAtTheta]:
    if len(at_maps) != n_centres:
        raise ValueError(f"got {len(at_maps)} maps at theta for {n_centres} centres: give one "
                         "per centre (MapSequence.at repeats a shared one)")
    return at_maps


def _symmetrize_in_place(G_upper: np.ndarray) -> np.ndarray:
    lower = np.tril_indices(G_upper.shape[0], -1)
    G_upper[lower] = G_upper.T[lower]
    return G_upper


def centred_statistics(at_maps, source: DataSource, centres, *, chunk_size: int | None = None,
                       dtype=None, progress=None) -> list[engine.Statistics]:
    """The statistics of every centre, G_c = Psi_c^T Psi_c and b_c = Psi_c^T y with
    Psi_c = psi(X - c), in one pass over ``source`` (each chunk read once).

    ``at_maps`` has one map at theta per centre (the same object repeated for a shared map:
    :meth:`scalegp.features.base.MapSequence.at`). For each chunk
    the features of the rows shifted by each centre are formed in a call of their own, and
    the centre's Gram is a symmetric rank-k update, as in
    :func:`scalegp.engine.statistics.accumulate_statistics`: a centre's statistics are bitwise
    those it has alone, whatever the other centres (a test point's, for test-point centring).
    Memory: one m x m Gram per centre plus one chunk of features (docs/local-models.md, "One pass").
    """
    dtype = check_dtype(dtype)
    centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
    n_centres = centres.shape[0]
    maps = _check_one_per_centre(at_maps, n_centres)
    m = maps[0].n_components
    chunk_size = chunk_size or default_chunk_size(m, dtype.itemsize)
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
    return [engine.Statistics(_symmetrize_in_place(G_upper[j]), b[j], y_norm2, n_samples)
            for j in range(n_centres)]


def centred_gradients(at_maps, source: DataSource, centres, systems, *,
                      chunk_size: int | None = None, dtype=None) -> np.ndarray:
    """Each centre's d log p_c / d theta from one pass (each chunk read once): the sum over
    chunks of :func:`scalegp.engine.statistics.chunk_gradient` on the shifted chunk (X - c, y).

    ``at_maps``: one map at theta per centre, as for :func:`centred_statistics`.
    Returns an array (n_centres, n_params + 1); its last column (the noise) is 0, to be
    replaced by :func:`scalegp.engine.gradients.noise_gradient` of each centre (homoscedastic
    noise).
    """
    dtype = check_dtype(dtype)
    centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
    maps = _check_one_per_centre(at_maps, centres.shape[0])
    n_params = maps[0].kernel.n_params
    chunk_size = chunk_size or default_chunk_size(maps[0].n_components * (n_params + 2),
                                                     dtype.itemsize)
    gradients = np.zeros((centres.shape[0], n_params + 1))
    for chunk in source.chunks(chunk_size):
        for j, centre in enumerate(centres):
            shifted = Chunk((chunk.X - centre).astype(dtype, copy=False), chunk.y, None,
                            chunk.start)
            gradients[j] += engine.chunk_gradient(maps[j], shifted, systems[j])
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
    neighborhoods : scalegp.local.cover.Neighborhoods or None
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

    def maps(self, centres: np.ndarray, kernel: Kernel) -> MapSequence:
        """The map of each centre: the shared map repeated, or (``reoptimize``) one map per
        centre, each built on the rows routed to it, shifted by it, from its own stream
        (:func:`centre_streams`); a centre no row routes to (the first, the training mean, can
        be one) keeps the shared map, which was built around the mean."""
        if not self.reoptimize:
            return MapSequence.repeat(self.feature_map, centres.shape[0])
        if self.build_map is None or self.map_seed is None:
            raise ValueError("reoptimize needs build_map and map_seed")
        route = nearest_centres(self.source.X, centres, length_scale=kernel.length_scale)
        streams = centre_streams(self.map_seed, centres.shape[0])
        rows = [np.flatnonzero(route == j) for j in range(centres.shape[0])]
        return MapSequence(tuple(
            self.build_map(rows[j], centre, stream) if rows[j].size else self.feature_map
            for j, (centre, stream) in enumerate(zip(centres, streams))))


def centre_streams(seed: int, n_centres: int) -> list[np.random.Generator]:
    """Independent streams of the per-centre maps: the children of SeedSequence(seed), the
    same for every call (learning and the final fit, and a loaded model, draw alike)."""
    return [np.random.default_rng(child)
            for child in np.random.SeedSequence(seed).spawn(n_centres)]


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
    def maps(self) -> MapSequence:
        """The map of each centre: the shared one repeated, or one per centre
        (``reoptimize``)."""
        maps = self.context.maps(self.centres, self.hyperparameters.kernel)
        check_local_memory(self.centres.shape[0], maps.n_components,
                           "learning the hyperparameters of a local model")
        return maps

    @functools.cached_property
    def basis_statistics(self) -> list | None:
        """Phi_c^T Phi_c, Phi_c^T y of every centre for fixed-basis maps (one pass), else
        None."""
        if not all(isinstance(fm, FixedBasisFeatureMap) for fm in self.maps):
            return None
        return [engine.BasisStatistics(s) for s in centred_statistics(
            self.maps.each(engine.BasisOnly), self.context.source, self.centres, chunk_size=self.context.chunk_size,
            dtype=self.context.dtype)]

    @property
    def kernel(self) -> Kernel:
        return self.hyperparameters.kernel

    def _condition(self, theta):
        kernel, noise_variance = self.hyperparameters.values(theta)
        at_maps = self.maps.at(kernel)
        if self.basis_statistics is not None:
            statistics = [basis.at(self.maps[j], kernel)
                          for j, basis in enumerate(self.basis_statistics)]
        else:
            statistics = centred_statistics(at_maps, self.context.source, self.centres,
                                            chunk_size=self.context.chunk_size,
                                            dtype=self.context.dtype)
        conditioned = [engine.condition(s, noise_variance) for s in statistics]
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
                np.append(engine.fixed_basis_gradient(s, system,
                                                  self.maps[j].log_weights_grad(kernel)),
                          0.0)
                for j, (s, system) in enumerate(zip(statistics, systems))])
        else:
            gradients = centred_gradients(at_maps, self.context.source, self.centres, systems,
                                          chunk_size=self.context.chunk_size,
                                          dtype=self.context.dtype)
        gradients[:, -1] = [engine.noise_gradient(s, system)
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
    #: name -> Value (the kind's model-file metadata) or Array (its arrays), module docstring.
    STORED: ClassVar[dict] = {}
    #: name -> value of metadata that files written before the name existed lack.
    MODEL_FILE_DEFAULTS: ClassVar[dict] = {}
    #: The posterior summary's kind in a local model's file (metadata
    #: ``system.factorization``): its systems are the kind's own arrays.
    FACTORIZATION: ClassVar[str] = "local"
    #: Whether the kind takes the rows' known noise variances (``context.source``'s
    #: ``sample_noise_variance``); a kind that does not is refused them.
    TAKES_NOISE_VARIANCES: ClassVar[bool] = False

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
        """The cluster-centred objective at ``context.threshold``
        (:class:`LocalMarginalLikelihood`), whose posterior is this kind's ``fit``."""
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
                f"{format_bytes(self.memory_bytes)} of per-centre systems")

    @staticmethod
    def _check_no_cov(return_cov: bool) -> None:
        if return_cov:
            raise NotImplementedError(
                "a local model has no joint predictive covariance (each centre conditions a "
                "different GP); use return_std=True")

    # ----------------------------------------------------------------- model files
    @abc.abstractmethod
    def to_state(self) -> dict:
        """The kind's JSON scalars and float64 arrays, as ``STORED`` declares them."""

    @classmethod
    @abc.abstractmethod
    def stored_arrays(cls, metadata: dict) -> set[str]:
        """The names of the arrays a file of this kind with this metadata holds."""

    def system_state(self) -> dict:
        """The posterior summary of a local model's file (metadata ``system``, the section of
        :class:`scalegp.engine.Posterior` in a global model's): kind :attr:`FACTORIZATION`,
        n, no jitter and no signs."""
        return {"jitter": 0.0, "n_samples": int(self.n_samples),
                "factorization": self.FACTORIZATION, "signed": False}

    @classmethod
    def from_sections(cls, state: dict, system: dict, **context) -> "LocalModel":
        """The model from its section (``state``) and its file's posterior summary (``system``,
        :meth:`system_state`); ``context`` as :meth:`from_state`."""
        if system["signed"]:
            raise ValueError("its metadata 'system.signed' is true, but a local model has no "
                             "signs")
        return cls.from_state(state, n_samples=system["n_samples"], **context)

    @classmethod
    def has_likelihood(cls, metadata: dict) -> bool:
        """Whether a model of this kind with this metadata has a log marginal likelihood of
        its own (finite in its model file; NaN where it has none)."""
        return True

    @classmethod
    @abc.abstractmethod
    def from_state(cls, state: dict, *, feature_map, kernel, noise_variance,
                   log_marginal_likelihood, n_samples, dtype, map_builder=None) -> "LocalModel":
        """The model from its validated section; ``map_builder(X, y)`` returns the
        fit's ``build_map(rows, centre, rng)`` for training rows (X, y), for kinds that
        rebuild per-centre maps."""


def _training_arrays(source: ArraySource) -> dict[str, np.ndarray]:
    return {"X_train": np.asarray(source.X, dtype=np.float64),
            "y_train": np.asarray(source.y, dtype=np.float64)}
