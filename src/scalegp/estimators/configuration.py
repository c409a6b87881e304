"""Configuration objects: the parts of a model that have options of their own.

An estimator's ``approximation`` and ``local`` parameters take either a name (a shorthand
for the part with its defaults) or one of these objects, which hold exactly the options that
part reads::

    LowRankGPRegressor(approximation=Nystrom(n_components=512, knots="random", learn_knots=150),
                       local=None)
    LowRankGPRegressor(approximation="exact", local=Neighbors(n_neighbors=300,
                                                              learning_centers=32))

So an option cannot be passed to a configuration that ignores it: ``Neighbors`` has no
``threshold``, ``Features("rff")`` refuses ``signed_rule="keep"`` (rff has no negative
weights) at fit. The objects are scikit-learn parameter containers (``get_params``,
``set_params``, ``clone``), so nested names work in ``set_params`` and ``GridSearchCV``:
``approximation__n_components``, ``local__n_neighbors`` (a name given as the parameter is
first replaced by its object with the defaults: :func:`as_approximation`, :func:`as_local`).

:func:`resolve` turns an estimator's parameters into one flat, validated
:class:`Resolved` record that the fit plumbing reads (``spec.local_neighbors`` ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, clone

from .. import features
from ..engine.objectives import OBJECTIVES, SOLVERS
from ..vecchia import DEFAULT_M, ORDERINGS
from ..vecchia.learning import OPTIMIZERS as VECCHIA_OPTIMIZERS
from ..vecchia.learning import check_schedule, check_tolerance


__all__ = ["Clusters", "Exact", "Features", "Neighbors", "Nystrom", "Resolved", "TestPoints",
           "Vecchia",
           "as_approximation", "as_local", "make_approximation", "make_local", "resolve",
           "resolve_for_sampler"]


class _Configuration(BaseEstimator):
    """A parameter container with scikit-learn's get_params / set_params / clone / repr."""

    #: The name the part is known by (``approximation="nystrom"``, ``local="neighbors"``).
    kind: str = ""

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.get_params() == self.get_params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(sorted(self.get_params().items()))))


# --------------------------------------------------------------------------- approximations
class Features(_Configuration):
    """A feature map of :mod:`scalegp.features` (any registered name but ``"nystrom"``, which
    has :class:`~scalegp.estimators.configuration.Nystrom`), with the engine options that
    apply to feature maps.

    Parameters
    ----------
    name : str, default="rff"
        The map, one of :func:`scalegp.features.names` (case-insensitive).
    n_components : int or None, default=None
        m, the number of features; None: the map's default (256, or the grown budget of
        ``"glf"`` with ``n_nodes="auto"``: :class:`scalegp.LowRankGPRegressor`).
    objective : {"dtc", "fitc"}, default="dtc"
        What learning maximizes and the model conditions on (docs/nystrom.md, section 3);
        ``"vfe"`` needs a map bounded by the kernel (:class:`Nystrom`).
    solver : {"cholesky", "qr"}, default="cholesky"
        "qr": the QR variant of the GLF paper's Appendix A.2 (fixed-basis maps, float64).
    signed_rule : {"repair", "keep"}, default="repair"
        For quadrature rules with negative weights only (``ssr``, ``sgq``, ``dfs``, ``sfs``):
        condition on the positive part of Psi S Psi^T, or on the signed rule itself
        (docs/positive-part.md). "keep" with another map is refused.
    options : dict or None, default=None
        Keyword arguments of the map's ``build`` (e.g. ``{"n_nodes": "auto"}`` for glf);
        an option the map does not take is refused by its ``build``.
    """

    def __init__(self, name="rff", n_components=None, objective="dtc", solver="cholesky",
                 signed_rule="repair", options=None):
        self.name = name
        self.n_components = n_components
        self.objective = objective
        self.solver = solver
        self.signed_rule = signed_rule
        self.options = options

    @property
    def kind(self) -> str:
        return str(self.name).lower()


class Nystrom(_Configuration):
    """Nystrom features at knots Z (docs/nystrom.md), with the sparse-GP objectives.

    Parameters
    ----------
    n_components : int or None, default=None
        m, the number of knots (None: 256).
    knots : str or array of shape (m, n_dims), default="pivoted_cholesky"
        "pivoted_cholesky" (chosen at the starting hyperparameters), "random", "grid",
        "kmeans" or the knots themselves (docs/nystrom.md, section 2).
    objective : {"dtc", "fitc", "vfe"}, default="dtc"
        "vfe": Titsias' bound (SGPR); with known noise variances its trace term is
        sum_i (k_ii - q_ii) / (2 (s2 + v_i)) (docs/nystrom.md, Eq. V.4).
    learn_knots : int, default=0
        With ``objective="vfe"``: L-BFGS-B iterations over the knots and the hyperparameters
        together after the hyperparameters are learned at the rule's knots
        (:mod:`scalegp.inference.knot_learning`); 0 keeps the knots.
    options : dict or None, default=None
        Further keyword arguments of :meth:`scalegp.features.nystrom.NystromFeatures.build`.
    """

    kind = "nystrom"

    def __init__(self, n_components=None, knots="pivoted_cholesky", objective="dtc",
                 learn_knots=0, options=None):
        self.n_components = n_components
        self.knots = knots
        self.objective = objective
        self.learn_knots = learn_knots
        self.options = options


class Exact(_Configuration):
    """No approximation: exact GPs (with ``local=Neighbors(...)``: one per neighbourhood)."""

    kind = "exact"


class Vecchia(_Configuration):
    """The Vecchia approximation (:class:`scalegp.VecchiaGPRegressor`, docs/vecchia.md): each
    training point conditioned on its m nearest predecessors in an ordering of the scaled
    inputs, O(N m^3) per likelihood evaluation and O(N m) memory; exact at m = N - 1.

    Parameters
    ----------
    n_neighbors : int, default=30
        m, the conditioning-set size of the likelihood (``scalegp.vecchia.DEFAULT_M``).
    ordering : {"maximin", "grid-maximin", "random", "coordinate"}, default="maximin"
        The ordering of the training points (:data:`scalegp.vecchia.ORDERINGS`).
    optimizer : {"lbfgs", "fisher"}, default="lbfgs"
        L-BFGS-B, or Fisher scoring as GpGp.
    n_neighbors_predict : int, None or "auto", default=None
        Training neighbours per test point (None: ``n_neighbors``; "auto": measured on
        held-out training rows, :class:`scalegp.VecchiaGPRegressor`).
    learning_schedule : sequence of (int or None), or None, default=None
        Learning stages on nested samples of the likelihood's blocks (None: the whole
        likelihood at once); :class:`scalegp.VecchiaGPRegressor`.
    learning_tolerance : float or None, default=None
        A learning stage's stopping gain, about this times the log likelihood per point;
        :class:`scalegp.VecchiaGPRegressor`.
    """

    kind = "vecchia"

    def __init__(self, n_neighbors=DEFAULT_M, ordering="maximin", optimizer="lbfgs",
                 n_neighbors_predict=None, learning_schedule=None, learning_tolerance=None):
        self.n_neighbors = n_neighbors
        self.ordering = ordering
        self.optimizer = optimizer
        self.n_neighbors_predict = n_neighbors_predict
        self.learning_schedule = learning_schedule
        self.learning_tolerance = learning_tolerance

    def estimator_parameters(self) -> dict:
        """The keyword arguments of :class:`scalegp.VecchiaGPRegressor` this configuration
        sets, validated (ValueError naming the option)."""
        _check_int(self.n_neighbors, "Vecchia n_neighbors", 1)
        if self.n_neighbors_predict != "auto":
            _check_int(self.n_neighbors_predict, "Vecchia n_neighbors_predict", 1,
                       allow_none=True)
        _check_choice(self.ordering, ORDERINGS, "Vecchia ordering")
        _check_choice(self.optimizer, VECCHIA_OPTIMIZERS, "Vecchia optimizer")
        schedule = (None if self.learning_schedule is None else
                    check_schedule(self.learning_schedule, "Vecchia learning_schedule"))
        return {"n_neighbors": int(self.n_neighbors), "ordering": self.ordering,
                "optimizer": self.optimizer,
                "n_neighbors_predict": (self.n_neighbors_predict
                                        if self.n_neighbors_predict in (None, "auto")
                                        else int(self.n_neighbors_predict)),
                "learning_schedule": schedule,
                "learning_tolerance": check_tolerance(self.learning_tolerance,
                                                      "Vecchia learning_tolerance")}


# --------------------------------------------------------------------------- local models
class TestPoints(_Configuration):
    """Every test point is its own centre (Eq. 6-7 of the Maclaurin paper;
    docs/local-models.md).

    Parameters
    ----------
    threshold : float, default=2.0
        Learning maximizes the mean log marginal likelihood over farthest-point centres at
        this covering radius, in length scales.
    """

    kind = "test-points"

    def __init__(self, threshold=2.0):
        self.threshold = threshold


class Clusters(_Configuration):
    """Farthest-point centres (Algorithm 1), each test point routed to the nearest.

    Parameters
    ----------
    threshold : float, default=2.0
        The covering radius theta in length scales: every training input lies within theta
        of a centre.
    lazy : bool, default=False
        Fit computes the centres only; each predict conditions the centres it needs.
    reoptimize : bool, default=False
        One map per centre, built on the training rows routed to it.
    """

    kind = "clusters"

    def __init__(self, threshold=2.0, lazy=False, reoptimize=False):
        self.threshold = threshold
        self.lazy = lazy
        self.reoptimize = reoptimize


class Neighbors(_Configuration):
    """One GP per centre of an adaptive cover, trained on its nearest training points,
    predictions blended over the nearest centres (docs/local-models.md,
    "Neighbourhood-local models").

    Parameters
    ----------
    n_neighbors : int, default=300
        k, the training points of each neighbourhood.
    learning_centers : int or None, default=32
        The neighbourhoods, drawn at random, whose composite likelihood is maximized
        (None: all of them).
    """

    kind = "neighbors"

    def __init__(self, n_neighbors=300, learning_centers=32):
        self.n_neighbors = n_neighbors
        self.learning_centers = learning_centers


APPROXIMATIONS = {"nystrom": Nystrom, "exact": Exact}
#: The type of every configuration object (for scikit-learn's parameter validation).
CONFIGURATION_TYPE = _Configuration
LOCALS = {"test-points": TestPoints, "clusters": Clusters, "neighbors": Neighbors}


def as_approximation(value) -> _Configuration:
    """The configuration object of an ``approximation`` parameter (a name or an object)."""
    if isinstance(value, (Features, Nystrom, Exact)):
        return value
    if not isinstance(value, str):
        raise TypeError(f"approximation must be a name (see scalegp.features.names(), or "
                        f"'exact') or scalegp.Features / Nystrom / Exact, got {value!r}")
    name = value.lower()
    if name in APPROXIMATIONS:
        return APPROXIMATIONS[name]()
    return Features(features.get(name).name)


def as_local(value) -> _Configuration | None:
    """The configuration object of a ``local`` parameter (None, a name or an object)."""
    if value is None or isinstance(value, (TestPoints, Clusters, Neighbors)):
        return value
    if isinstance(value, str) and value in LOCALS:
        return LOCALS[value]()
    raise ValueError(f"local must be None, one of {sorted(LOCALS)} or scalegp.TestPoints / "
                     f"Clusters / Neighbors, got {value!r}")


def make_approximation(name, **options) -> _Configuration:
    """The configuration object of the approximation ``name`` with ``options`` (the analogue
    of :func:`scalegp.kernels.get`): ``make_approximation("nystrom", n_components=64,
    objective="vfe")`` is ``Nystrom(n_components=64, objective="vfe")``, and
    ``make_approximation("rff", n_components=64)`` is ``Features("rff", n_components=64)``.
    For Nystrom a ``"knots"`` entry of ``options["options"]`` becomes its ``knots``. An
    option the approximation does not have is refused (TypeError)."""
    config = as_approximation(name)
    if isinstance(config, Nystrom) and "knots" in (options.get("options") or {}):
        options["options"] = dict(options["options"])
        options["knots"] = options["options"].pop("knots")
        options["options"] = options["options"] or None
    unknown = sorted(set(options) - set(config.get_params()))
    if unknown:
        raise TypeError(f"{type(config).__name__} ({config.kind}) has no option "
                        f"{', '.join(unknown)}; it has {', '.join(sorted(config.get_params()))}")
    return clone(config).set_params(**options)


def make_local(kind, **options) -> _Configuration | None:
    """The configuration object of the local model ``kind`` with ``options``
    (``make_local("neighbors", n_neighbors=50)``); an option the kind does not have is
    refused (TypeError)."""
    config = as_local(kind)
    if config is None:
        if options:
            raise TypeError(f"local=None takes no options, got {', '.join(sorted(options))}")
        return None
    unknown = sorted(set(options) - set(config.get_params()))
    if unknown:
        raise TypeError(f"{type(config).__name__} ({config.kind}) has no option "
                        f"{', '.join(unknown)}; it has {', '.join(sorted(config.get_params()))}")
    return clone(config).set_params(**options)


# --------------------------------------------------------------------------- resolution
@dataclass(frozen=True)
class Resolved:
    """An estimator's approximation and local model as one flat, validated record."""

    approximation: str                  # a registered map name, or "exact"
    n_components: int | None = None
    options: dict = field(default_factory=dict)
    objective: str = "dtc"
    solver: str = "cholesky"
    signed_rule: str = "repair"
    learn_knots: int = 0
    local: str | None = None
    local_threshold: float = 2.0
    local_lazy: bool = False
    local_reoptimize: bool = False
    local_neighbors: int = 300
    local_learning_centers: int | None = 32


def _check_choice(value, choices, name: str) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")


def _check_int(value, name: str, minimum: int, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}"
                         f"{' or None' if allow_none else ''}, got {value!r}")


def _check_flag(value, name: str) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def _resolve_approximation(config) -> dict:
    if isinstance(config, Exact):
        return {"approximation": "exact"}
    _check_int(config.n_components, "approximation n_components", 1, allow_none=True)
    if config.options is not None and not isinstance(config.options, Mapping):
        raise TypeError(f"options must be a dict of keyword arguments of the map's build, or "
                        f"None; got {type(config.options).__name__}")
    options = dict(config.options or {})
    if isinstance(config, Nystrom):
        _check_choice(config.objective, OBJECTIVES, "Nystrom objective")
        _check_int(config.learn_knots, "Nystrom learn_knots", 0)
        if "knots" in options:
            raise ValueError("Nystrom(options={'knots': ...}): give the knots as "
                             "Nystrom(knots=...)")
        options["knots"] = config.knots
        return {"approximation": "nystrom", "n_components": config.n_components,
                "options": options, "objective": config.objective,
                "learn_knots": int(config.learn_knots)}
    map_class = features.get(config.name)
    if map_class.name == "nystrom":
        raise ValueError("Features('nystrom'): use scalegp.Nystrom(...), which holds the "
                         "knots and the sparse objectives")
    _check_choice(config.objective, OBJECTIVES, f"{map_class.name} objective")
    _check_choice(config.solver, SOLVERS, "solver")
    _check_choice(config.signed_rule, {"repair", "keep"}, "signed_rule")
    if config.signed_rule != "repair" and not map_class.may_have_negative_weights:
        signed = ", ".join(name for name in features.names()
                           if features.get(name).may_have_negative_weights)
        raise ValueError(f"signed_rule={config.signed_rule!r} applies to quadrature rules "
                         f"with negative weights ({signed}); {map_class.name!r} has none, so "
                         "the option would be ignored")
    return {"approximation": map_class.name, "n_components": config.n_components,
            "options": options, "objective": config.objective, "solver": config.solver,
            "signed_rule": config.signed_rule}


def _resolve_local(config) -> dict:
    if config is None:
        return {}
    if isinstance(config, Neighbors):
        _check_int(config.n_neighbors, "Neighbors n_neighbors", 1)
        _check_int(config.learning_centers, "Neighbors learning_centers", 1, allow_none=True)
        return {"local": "neighbors", "local_neighbors": int(config.n_neighbors),
                "local_learning_centers": (None if config.learning_centers is None
                                           else int(config.learning_centers))}
    if not (isinstance(config.threshold, Real) and not isinstance(config.threshold, bool)
            and config.threshold > 0):
        raise ValueError(f"{type(config).__name__} threshold must be a number > 0, got "
                         f"{config.threshold!r}")
    resolved = {"local": config.kind, "local_threshold": float(config.threshold)}
    if isinstance(config, Clusters):
        _check_flag(config.lazy, "Clusters lazy")
        _check_flag(config.reoptimize, "Clusters reoptimize")
        resolved.update(local_lazy=config.lazy, local_reoptimize=config.reoptimize)
    return resolved


def resolve(approximation, local=None) -> Resolved:
    """The flat record of an ``approximation`` and a ``local`` parameter, after the checks
    that one part's options agree with the other's: an exact approximation needs
    ``Neighbors``; local models condition on the DTC model with the Cholesky solver."""
    approximation = as_approximation(approximation)
    local = as_local(local)
    resolved = Resolved(**_resolve_approximation(approximation), **_resolve_local(local))
    if resolved.approximation == "exact" and resolved.local != "neighbors":
        raise ValueError("approximation='exact' (an exact GP per neighbourhood) needs "
                         f"local='neighbors', got local={resolved.local!r}; for one exact GP "
                         "use scalegp.ExactGPRegressor")
    if resolved.local is not None:
        if resolved.solver != "cholesky":
            raise NotImplementedError(f"local models use solver='cholesky', got "
                                      f"solver={resolved.solver!r}")
        if resolved.objective != "dtc":
            raise NotImplementedError(f"local models use objective='dtc', got "
                                      f"objective={resolved.objective!r}")
    return resolved


def resolve_for_sampler(approximation) -> Resolved:
    """:func:`resolve` for the Gibbs sampler, which conditions on the DTC model with the
    Cholesky solver and a map of its own: a configuration that asks for anything else is
    refused rather than ignored."""
    config = as_approximation(approximation)
    if isinstance(config, Exact):
        raise ValueError("the Gibbs sampler needs a feature map, not approximation='exact'")
    resolved = resolve(config)
    defaults = Resolved(approximation=resolved.approximation)
    ignored = [f"{name}={getattr(resolved, name)!r}"
               for name in ("objective", "solver", "signed_rule", "learn_knots")
               if getattr(resolved, name) != getattr(defaults, name)]
    if ignored:
        raise ValueError(f"the Gibbs sampler conditions on the DTC model of the map with the "
                         f"Cholesky solver; it does not take {', '.join(ignored)}")
    return resolved


# --------------------------------------------------------------------------- model files
_CLASSES = {cls.__name__: cls for cls in (Features, Nystrom, Exact, Vecchia, TestPoints,
                                          Clusters, Neighbors)}

#: The flat estimator parameters of model files written before the configuration objects
#: (schema 1), with the object and option each one moved to.
FLAT_PARAMETERS = {
    "n_components": ("approximation", "n_components"),
    "approximation_options": ("approximation", "options"),
    "objective": ("approximation", "objective"),
    "solver": ("approximation", "solver"),
    "signed_rule": ("approximation", "signed_rule"),
    "learn_knots": ("approximation", "learn_knots"),
    "local_threshold": ("local", "threshold"),
    "local_lazy": ("local", "lazy"),
    "local_reoptimize": ("local", "reoptimize"),
    "local_neighbors": ("local", "n_neighbors"),
    "local_learning_centres": ("local", "learning_centers"),
}


def to_json(config):
    """A model file's JSON form of an ``approximation`` or ``local`` parameter: a name or
    None as it is, an object as ``{"class": ..., "params": {...}}`` (arrays as lists)."""
    if config is None or isinstance(config, str):
        return config
    params = {}
    for name, value in config.get_params().items():
        params[name] = value.tolist() if hasattr(value, "tolist") else value
    return {"class": type(config).__name__, "params": params}


def from_json(value):
    """The inverse of :func:`to_json` (ValueError for an unknown class or option); an
    object passes as it is."""
    if value is None or isinstance(value, (str, _Configuration)):
        return value
    if not (isinstance(value, dict) and set(value) == {"class", "params"}
            and value["class"] in _CLASSES and isinstance(value["params"], dict)):
        raise ValueError(f"not a configuration object: {str(value)[:80]}")
    params = dict(value["params"])
    if isinstance(params.get("knots"), list):
        params["knots"] = np.asarray(params["knots"], dtype=float)
    if isinstance(params.get("learning_schedule"), list):
        params["learning_schedule"] = tuple(params["learning_schedule"])
    return _CLASSES[value["class"]](**params)


def from_flat_parameters(params: dict) -> dict:
    """Estimator parameters of a schema-1 model file (flat ``n_components``,
    ``local_neighbors`` ...) as configuration objects; a parameter that the stored
    configuration did not read (its default, written by the old estimator) is dropped."""
    flat = {name: params.pop(name) for name in list(params) if name in FLAT_PARAMETERS}
    if not flat:
        return params
    approximation = as_approximation(from_json(params.get("approximation", "rff")))
    changes = {FLAT_PARAMETERS[name][1]: value for name, value in flat.items()
               if FLAT_PARAMETERS[name][0] == "approximation"}
    if isinstance(approximation, Exact):
        changes = {}
    elif isinstance(approximation, Nystrom):
        options = dict(changes.pop("options", None) or {})
        if "knots" in options:
            changes["knots"] = options.pop("knots")
        changes["options"] = options or None
        changes.pop("solver", None)
        changes.pop("signed_rule", None)
    else:
        changes.pop("learn_knots", None)
        if not features.get(approximation.name).may_have_negative_weights:
            changes.pop("signed_rule", None)
    params["approximation"] = approximation.set_params(**changes)
    local = as_local(params.get("local"))
    if local is not None:
        names = local.get_params()
        local.set_params(**{FLAT_PARAMETERS[name][1]: value for name, value in flat.items()
                            if FLAT_PARAMETERS[name][0] == "local"
                            and FLAT_PARAMETERS[name][1] in names})
        params["local"] = local
    return params
