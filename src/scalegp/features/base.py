"""The feature-map protocol.

A feature map turns inputs into Psi (n_samples x n_components) with
k(x, x') ~ sum_l sign_l psi_l(x) psi_l(x'); the engine needs nothing else. Maps are frozen
dataclasses whose fields are the theta-independent state (frequencies, nodes, landmarks), so
tests can build one directly with chosen values; :meth:`FeatureMap.build` is the only place
where randomness enters. Subclasses register themselves by name::

    @dataclass(frozen=True, eq=False)
    class RandomFourierFeatures(FourierFeatureMap, name="rff"): ...
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np

from .._validation import check_matrix
from ..kernels import Kernel
from ..stored import Value

_REGISTRY: dict[str, type["FeatureMap"]] = {}

#: m of a map built with ``n_components=None`` (the estimator's default), unless the map
#: derives its own (:attr:`FeatureMap.default_n_components` is None).
DEFAULT_N_COMPONENTS = 256


def feature_dtype(X) -> np.dtype:
    """float32 inputs give float32 features; everything else float64."""
    dtype = getattr(X, "dtype", None)
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


@dataclass(frozen=True, eq=False)
class FeatureMap(abc.ABC):
    """A low-rank kernel approximation psi: R^d -> R^m.

    Attributes
    ----------
    n_dims : int
        Input dimension d the map was built for.
    """

    n_dims: int

    #: The model-file section of the map: a declaration per dataclass field
    #: (:mod:`scalegp.stored`; a subclass adds its own fields' declarations).
    STORED = {"n_dims": Value("int", "at_least_one")}

    name: ClassVar[str] = ""
    #: One line for ``scalegp list``.
    description: ClassVar[str] = ""
    #: Paper reference for the README and ``scalegp list``.
    reference: ClassVar[str] = ""
    #: Options of :meth:`build` that :class:`scalegp.LowRankGPRegressor` fills from its fit
    #: call unless the user gave them: "y" (the training targets, normalized if asked),
    #: "noise_variance" (the starting value) and "noise_variance_lower" (the box's lower end).
    fit_context: ClassVar[tuple[str, ...]] = ()
    #: True when :meth:`build` reads X only through its number of columns and bounding box
    #: (and n, through the fit-context option "n_samples" where it lists it): the estimator
    #: then builds the map for a streaming data source from the summary's box corners
    #: (docs/data-sources.md, "Fitting from a source"). A map that reads the rows themselves
    #: (landmarks, a search on the data) keeps False and refuses streaming sources.
    builds_from_bounding_box: ClassVar[bool] = False
    #: m used when the estimator's ``n_components`` is None; None: :meth:`build` receives
    #: None and derives m from the problem (Gauss-Legendre features with ``n_nodes="auto"``).
    default_n_components: ClassVar[int | None] = DEFAULT_N_COMPONENTS
    #: True when K - Psi S Psi^T is positive semidefinite on any inputs (a Nystrom-type
    #: projection): then the VFE trace term tr(K - Q) >= 0 and the VFE objective is a lower
    #: bound of the exact log marginal likelihood (docs/nystrom.md); other maps refuse it.
    bounded_by_kernel: ClassVar[bool] = False
    #: True for quadrature rules whose weights can be negative (an indefinite Psi S Psi^T):
    #: the estimators' ``signed_rule`` applies to these maps only.
    may_have_negative_weights: ClassVar[bool] = False
    #: True where the map at theta (:meth:`at`) has ``own_gradient(items, statistics,
    #: system, *, trace_weight, n_jobs, knots, row_weights)``: the kernel part of the gradient
    #: (rows weighted where they carry known noise variances) from one pass of its own
    #: (Nystrom: :meth:`scalegp.features.nystrom.NystromAtTheta.own_gradient`). Declared on
    #: the map, so that
    #: :class:`scalegp.engine.likelihood.MarginalLikelihood` chooses its gradient path once, when
    #: it is built (:mod:`scalegp.engine.gradients`), without evaluating the map at theta.
    has_own_gradient: ClassVar[bool] = False

    def __init_subclass__(cls, name: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if name is not None:
            if name in _REGISTRY and _REGISTRY[name] is not cls:
                raise ValueError(f"feature map name {name!r} is registered twice")
            cls.name = name
            _REGISTRY[name] = cls

    # ----------------------------------------------------------------- construction
    @classmethod
    @abc.abstractmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng: np.random.Generator,
              **options) -> "FeatureMap":
        """Draw or select everything that does not depend on the hyperparameters."""

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Whether the map is defined for this kernel (every shift-invariant kernel by default:
        Fourier maps need Bochner's theorem)."""
        return kernel.shift_invariant

    # ----------------------------------------------------------------- evaluation
    @property
    @abc.abstractmethod
    def n_components(self) -> int:
        """m, the number of real columns of Psi."""

    @property
    def signs(self) -> np.ndarray | None:
        """Sign vector S (entries +-1) with k ~ Psi diag(S) Psi^T, or None when all are +1."""
        return None

    def at(self, kernel: Kernel) -> "MapAtTheta":
        """The map evaluated at the kernel's hyperparameters: everything that depends on theta
        but not on the inputs (frequency scaling, weights) is done here, once, and each chunk
        of inputs then costs only what depends on it (docs/engine.md, "Feature maps at theta").

        The default binds the kernel to :meth:`features` and :meth:`features_grad`; a family
        of maps overrides it to do its per-theta work once (Fourier and fixed-basis maps).
        """
        return MapAtTheta(self, kernel)

    def features(self, X, kernel: Kernel) -> np.ndarray:
        """Psi, shape (n_samples, n_components), in the dtype of X (float32 or float64).

        A map defines this or :meth:`at` (whose ``features`` it then calls)."""
        if type(self).at is FeatureMap.at:
            raise NotImplementedError(f"{type(self).__name__} defines neither at nor features")
        return self.at(kernel).features(X)

    def features_grad(self, X, kernel: Kernel) -> np.ndarray:
        """dPsi / d theta_i for the kernel's log-parameters, shape (n_params, n_samples, m)."""
        if type(self).at is FeatureMap.at:
            raise NotImplementedError(f"{type(self).__name__} has no analytic features_grad")
        return self.at(kernel).features_and_grad(X)[1]

    def check_input(self, X, kernel: Kernel) -> np.ndarray:
        """Validate X against the map (dtype preserved for float32)."""
        X = check_matrix(X, "X", dtype=feature_dtype(X), n_dims=self.n_dims)
        kernel.check_n_dims(self.n_dims)
        return X

    def valid_log_bounds(self, kernel: Kernel) -> np.ndarray | None:
        """The log-parameter box on which the map approximates the kernel, or None.

        Parameters
        ----------
        kernel : Kernel
            The kernel the map was built for (its bounds are the box of learning).

        Returns
        -------
        bounds : ndarray of shape (kernel.n_params, 2) or None
            Lower and upper log values, in the order of ``kernel.theta``. None (the default):
            the map holds wherever the kernel's box does (maps redrawn for each theta, or
            whose error does not depend on theta). A fixed-basis map whose nodes resolve only
            some length scales returns them; the estimator searches the intersection with
            ``kernel.bounds``.
        """
        return None

    def diagnostics(self, kernel: Kernel) -> dict:
        """What the fitted model reports about the map at the kernel's hyperparameters
        (``LowRankGPRegressor.approximation_diagnostics_``); none by default."""
        return {}

    # ----------------------------------------------------------------- model files
    def to_state(self) -> dict:
        """The dataclass fields (theta-independent state): the map's section of a model file,
        each field declared in ``STORED`` (arrays as ``.npy`` members, the rest as JSON)."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @classmethod
    def from_state(cls, state: dict) -> "FeatureMap":
        """The map from its validated section, by keyword: ``cls(**state)`` (ValueError or
        TypeError where the fields disagree, from the map's own construction)."""
        return cls(**state)


@dataclass(frozen=True, eq=False)
class FixedBasisFeatureMap(FeatureMap):
    """A map Psi = Phi diag(sqrt(w(theta))) whose basis Phi does not depend on theta.

    The engine caches Phi^T Phi and Phi^T y once; every likelihood-and-gradient evaluation
    then costs O(m^3), independent of n (GLF paper, Section 4.2, Proposition 6).
    """

    @abc.abstractmethod
    def basis(self, X) -> np.ndarray:
        """Phi, shape (n_samples, n_components), independent of the hyperparameters."""

    @abc.abstractmethod
    def weights(self, kernel: Kernel) -> np.ndarray:
        """w(theta) >= 0, shape (n_components,)."""

    @abc.abstractmethod
    def log_weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d log w_l / d theta_i, shape (n_params, n_components); finite even where w underflows."""

    def weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d w_l / d theta_i = w_l d log w_l / d theta_i, shape (n_params, n_components)."""
        return self.weights(kernel) * self.log_weights_grad(kernel)

    #: True where :meth:`grid_basis_statistics` is implemented (a tensor-product basis).
    has_grid_statistics: ClassVar[bool] = False

    def grid_basis_statistics(self, grid) -> tuple[np.ndarray, np.ndarray]:
        """(Phi^T Phi, Phi^T y) over every cell of a :class:`scalegp.data.grid.TensorGrid`,
        without a pass over the cells (maps with ``has_grid_statistics``)."""
        raise NotImplementedError(f"{self.name!r} has no tensor-grid statistics; its "
                                  "statistics come from a pass over the cells")

    def at(self, kernel: Kernel) -> "FixedBasisAtTheta":
        return FixedBasisAtTheta(self, kernel)


class MapAtTheta:
    """A feature map at fixed hyperparameters (:meth:`FeatureMap.at`).

    Attributes
    ----------
    feature_map : FeatureMap
    kernel : Kernel
    """

    def __init__(self, feature_map: FeatureMap, kernel: Kernel):
        self.feature_map = feature_map
        self.kernel = kernel

    @property
    def n_components(self) -> int:
        return self.feature_map.n_components

    @property
    def signs(self) -> np.ndarray | None:
        return self.feature_map.signs

    def check_input(self, X) -> np.ndarray:
        return self.feature_map.check_input(X, self.kernel)

    def features(self, X) -> np.ndarray:
        """Psi of a chunk of inputs, shape (n_samples, n_components), in the dtype of X."""
        return self.feature_map.features(X, self.kernel)

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(Psi, dPsi / d theta) of a chunk, shapes (n, m) and (n_params, n, m), from one
        evaluation of everything they share."""
        return (self.feature_map.features(X, self.kernel),
                self.feature_map.features_grad(X, self.kernel))

    def features_and_grad_operator(self, X, features=None) -> tuple[np.ndarray,
                                                                      "FeatureGradient"]:
        """(Psi, dPsi / d theta as an operator) of a chunk, in float64: what the engine's
        gradient needs (products with dPsi) without forming the (n_params, n, m) array where
        the map's structure allows (docs/engine.md, "Feature maps at theta"). ``features``:
        the chunk's Psi if already computed, reused where the map can (the default cannot)."""
        Psi, dPsi = self.features_and_grad(X)
        return (Psi.astype(np.float64, copy=False),
                DenseFeatureGradient(dPsi.astype(np.float64, copy=False)))


class FeatureGradient(abc.ABC):
    """dPsi_i = d Psi / d theta_i of a chunk (i over the kernel's log-parameters), known
    through the two products the engine takes with it."""

    @abc.abstractmethod
    def matvec(self, v: np.ndarray) -> np.ndarray:
        """[dPsi_i v]_i, shape (n_params, n)."""

    @abc.abstractmethod
    def row_inner(self, A: np.ndarray) -> np.ndarray:
        """[sum_l A_rl (dPsi_i)_rl]_{i, r} for A of shape (n, m), shape (n_params, n)."""


class DenseFeatureGradient(FeatureGradient):
    """The operator of a formed dPsi array (n_params, n, m)."""

    def __init__(self, dPsi: np.ndarray):
        self.dPsi = dPsi

    def matvec(self, v):
        return self.dPsi @ v

    def row_inner(self, A):
        return np.einsum("rl,prl->pr", A, self.dPsi)


class ScaledColumnsGradient(FeatureGradient):
    """dPsi_i = Psi diag(g_i / 2) (a fixed basis, Psi = Phi diag(sqrt(w)), g_i = d log w /
    d theta_i): both products are one small GEMM with Psi."""

    def __init__(self, Psi: np.ndarray, half_log_weights_grad: np.ndarray):
        self.Psi = Psi
        self.half_log_weights_grad = half_log_weights_grad

    def matvec(self, v):
        return (self.Psi @ (self.half_log_weights_grad * v).T).T

    def row_inner(self, A):
        return ((A * self.Psi) @ self.half_log_weights_grad.T).T


class FixedBasisAtTheta(MapAtTheta):
    """Psi = Phi diag(h) with h = sqrt(w(theta)) and dPsi_i = Psi diag(g_i / 2),
    g_i = d log w / d theta_i: h and g are computed once per theta."""

    def __init__(self, feature_map: FixedBasisFeatureMap, kernel: Kernel):
        super().__init__(feature_map, kernel)
        self.sqrt_weights = np.sqrt(feature_map.weights(kernel))
        self.half_log_weights_grad = 0.5 * feature_map.log_weights_grad(kernel)

    def features(self, X) -> np.ndarray:
        Phi = self.feature_map.basis(X)
        return Phi * self.sqrt_weights.astype(Phi.dtype)

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        Psi = self.features(X)
        return Psi, Psi[None, :, :] * self.half_log_weights_grad[:, None, :].astype(Psi.dtype)

    def features_and_grad_operator(self, X, features=None) -> tuple[np.ndarray,
                                                                      FeatureGradient]:
        Psi = (self.features(X) if features is None else features).astype(np.float64,
                                                                          copy=False)
        return Psi, ScaledColumnsGradient(Psi, self.half_log_weights_grad)


def registry() -> dict[str, type[FeatureMap]]:
    return dict(_REGISTRY)


@dataclass(frozen=True)
class MapSequence:
    """One feature map per part of a model: per centre of a local model
    (:mod:`scalegp.local`), per theta1 atom of the Gibbs grid
    (:class:`scalegp.inference.gibbs.AtomMaps`).

    The shared case, one map for every part, is the same map repeated (:meth:`repeat`,
    ``shared`` True). It is made where the model is built (:meth:`of`, the one place that
    accepts "one map or a sequence"), so the code that uses the maps indexes ``maps[j]`` and
    never asks which case it has. Part j's features are psi_j(x) = ``maps[j].features(x)``,
    of rank m_j = ``ranks[j]``; ``n_components`` is the largest, max_j m_j. :meth:`at` and
    :meth:`each` evaluate a shared map once, so the shared case costs what one map costs.
    """

    maps: tuple
    shared: bool = False

    def __post_init__(self):
        maps = tuple(self.maps)
        if not maps or not all(isinstance(fmap, FeatureMap) for fmap in maps):
            raise TypeError(f"{type(self).__name__} needs one built FeatureMap per part "
                            "(per centre, per theta1 atom)")
        if len({fmap.n_dims for fmap in maps}) != 1:
            raise ValueError(f"the maps of {type(self).__name__} must all have the same n_dims")
        if self.shared and any(fmap is not maps[0] for fmap in maps):
            raise ValueError("a shared MapSequence repeats one map")
        object.__setattr__(self, "maps", maps)
        object.__setattr__(self, "shared", bool(self.shared))

    @classmethod
    def repeat(cls, feature_map: FeatureMap, count: int):
        """The shared case: ``feature_map`` for each of ``count`` parts."""
        return cls((feature_map,) * int(count), shared=True)

    @classmethod
    def of(cls, maps, count: int, part: str = "part"):
        """The boundary: one map (repeated) or a sequence of ``count`` maps, as ``cls``;
        ValueError names ``part`` when a sequence has another length."""
        if isinstance(maps, FeatureMap):
            return cls.repeat(maps, count)
        sequence = maps if isinstance(maps, cls) else cls(tuple(maps))
        if len(sequence) != count:
            raise ValueError(f"{type(sequence).__name__} has {len(sequence)} maps for "
                             f"{count} {part}s: give one map per {part}")
        return sequence

    def __len__(self) -> int:
        return len(self.maps)

    def __getitem__(self, j: int) -> FeatureMap:
        return self.maps[j]

    def __iter__(self):
        return iter(self.maps)

    def take(self, indices):
        """The maps of the parts ``indices``, in that order (shared stays shared)."""
        return type(self)(tuple(self.maps[int(j)] for j in indices), shared=self.shared)

    def each(self, function) -> tuple:
        """(function(maps[0]), function(maps[1]), ...), evaluated once for a shared map."""
        if self.shared:
            return (function(self.maps[0]),) * len(self.maps)
        return tuple(function(fmap) for fmap in self.maps)

    def at(self, kernel: Kernel) -> tuple:
        """The maps at theta, one per part (:meth:`FeatureMap.at`)."""
        return self.each(lambda fmap: fmap.at(kernel))

    @property
    def n_dims(self) -> int:
        return self.maps[0].n_dims

    @property
    def name(self) -> str:
        return self.maps[0].name

    @property
    def ranks(self) -> np.ndarray:
        """m_j of each part, shape (len(self),)."""
        return np.array([fmap.n_components for fmap in self.maps])

    @property
    def n_components(self) -> int:
        """The largest rank, max_j m_j."""
        return int(self.ranks.max())

    @property
    def bounded_by_kernel(self) -> bool:
        """True when every part's map is a Nystrom-type projection (FeatureMap's flag)."""
        return all(fmap.bounded_by_kernel for fmap in self.maps)

    @property
    def signs(self):
        """None when every map is unsigned, else the first map's signs."""
        return next((fmap.signs for fmap in self.maps if fmap.signs is not None), None)
