"""The schema of a model file: the format's name and version, one declaration per metadata
entry and per array of the estimator itself (JSON kind or dtype, shape in terms of
n_features_in, the map's m and the other arrays, and the values' domain), and the sections
of its components, whose entries and arrays are the components' own declarations
(:mod:`scalegp.stored`; docs/model-files.md, "Sections by declaration").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine import Posterior, exact
from ..estimators.exact import ExactGPRegressor
from ..estimators.hyperparameter_average import HyperparameterAverage
from ..estimators.replicates import Replicates
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..estimators.vecchia import VecchiaGPRegressor
from ..inference import gibbs
from ..local import LocalModel
from ..vecchia.posterior import VecchiaPosterior
from ..stored import (AT_LEAST_ONE, CONDITIONS, FINITE, NONNEGATIVE, POSITIVE, Array, Condition,
                      Value, alternatives, declarations)


FORMAT_NAME = "scalegp-model"


SCHEMA_VERSION = 1


METADATA_KEY = "metadata"


#: Prefix of the arrays that hold the feature map's array fields.
MAP_PREFIX = "feature_map."


#: Prefix of the arrays of a local model (:mod:`scalegp.local.centered`).
LOCAL_PREFIX = "local."


#: Prefix of the arrays of a Gibbs model (:mod:`scalegp.inference.gibbs`).
GIBBS_PREFIX = "gibbs."


#: Prefix of the arrays of a GPRegressor's variance calibration
#: (:mod:`scalegp.estimators.variance_calibration`): its rows X and log ratios t.
CALIBRATION_PREFIX = "variance_calibration."


#: Prefix of the arrays of a GPRegressor learned on repeated inputs
#: (:mod:`scalegp.estimators.replicates`): the distinct inputs, their mean targets and
#: row counts.
REPLICATES_PREFIX = "replicates."


#: Prefix of the arrays of a GPRegressor whose exact or Vecchia GP's hyperparameters are
#: integrated out
#: (:mod:`scalegp.estimators.hyperparameter_average`): the members' log hyperparameters
#: and the training rows they are conditioned on again.
AVERAGE_PREFIX = "hyperparameter_average."


ESTIMATORS = {cls.__name__: cls for cls in (LowRankGPRegressor, ExactGPRegressor,
                                             GibbsGPRegressor, VecchiaGPRegressor)}


LOW_RANK, EXACT, GIBBS = "LowRankGPRegressor", "ExactGPRegressor", "GibbsGPRegressor"
VECCHIA = "VecchiaGPRegressor"


#: The estimators whose posterior is a ``system`` section with a likelihood and an
#: optimization record (all but the Gibbs sampler).
OPTIMIZED = (LOW_RANK, EXACT, VECCHIA)


#: The posterior summary's kind (metadata ``system``, :data:`SYSTEM_SELECTOR`) of a low-rank
#: model whose posterior is a local model (:mod:`scalegp.local.centered`), whose systems are
#: its kind's arrays; any other value is the kind of the :class:`~scalegp.engine.Posterior`'s
#: system.
LOCAL_FACTORIZATION = LocalModel.FACTORIZATION


#: The value of the ``system`` section that selects its arrays (:func:`scalegp.stored.selected`).
SYSTEM_SELECTOR = Posterior.SYSTEM_KIND


#: Estimator parameters added after schema version 1 was first written, with the value that
#: reproduces what a file without them was fitted with.
PARAMS_ADDED = {"normalize_X": False, "signed_rule": "keep", "solver": "cholesky",
                "local": None, "local_threshold": 2.0, "local_lazy": False,
                "local_reoptimize": False, "local_neighbors": 300,
                "local_learning_centres": 32, "objective": "dtc", "learn_knots": 0,
                "learning_schedule": None, "learning_tolerance": None}


#: GPRegressor parameters added after schema version 1 was first written, with the value
#: that files without them were fitted with (metadata ``front_door.params``).
FRONT_DOOR_PARAMS_ADDED = {"calibrate_variance": False, "split_nugget": False}


#: Arrays of the input standardization (fitted attributes X_train_mean_, X_train_scale_).
INPUT_STANDARDIZATION = ("X_train_mean", "X_train_scale")


#: The conditions of the estimator's own entries (the components name theirs, CONDITIONS).
NOT_NAN_BELOW_INF = CONDITIONS["below_inf"][0]


@dataclass(frozen=True)
class _Entry:
    """One metadata value: its dotted path, JSON kind and the condition it meets.

    ``kind`` is a key of ``_KINDS``; ``open`` marks an object whose keys are checked by the
    step that uses it (estimator parameters, kernel parameters, feature-map fields, arrays).
    """

    path: str
    kind: str
    condition: Condition | None = None
    estimators: tuple[str, ...] = (LOW_RANK, EXACT, GIBBS, VECCHIA)
    required: bool = True
    nullable: bool = False
    choices: tuple | None = None
    open: bool = False


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KINDS = {
    "number": ("a number", _is_number),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "numbers": ("a list of numbers", lambda v: isinstance(v, list) and all(map(_is_number, v))),
    "strings": ("a list of strings",
                lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)),
    "scale": ("a number or a non-empty list of numbers",
              lambda v: _is_number(v) or (isinstance(v, list) and v != []
                                          and all(map(_is_number, v)))),
    "scalar": ("a finite number, a string or true/false",
               lambda v: isinstance(v, (str, bool)) or (_is_number(v) and math.isfinite(v))),
    "bounds": ("a list of two numbers or 'fixed'",
               lambda v: v == "fixed" or (isinstance(v, list) and len(v) == 2
                                          and all(map(_is_number, v)))),
}


def _value_entry(path: str, value: Value, estimators: tuple[str, ...],
                 more_choices: tuple = ()) -> _Entry:
    """The entry of a component's declared JSON value (:class:`scalegp.stored.Value`)."""
    (condition,) = CONDITIONS[value.condition] if value.condition is not None else (None,)
    choices = None if value.choices is None else (*value.choices, *more_choices)
    return _Entry(path, value.kind, condition, estimators, nullable=value.nullable,
                  choices=choices)


def _section_entries(path: str, component, estimators: tuple[str, ...],
                     more_choices: dict | None = None) -> tuple[_Entry, ...]:
    """The entries of a component's section at the metadata ``path`` (its declared values)."""
    more_choices = more_choices or {}
    return tuple(_value_entry(f"{path}.{name}", value, estimators, more_choices.get(name, ()))
                 for name, value in declarations(component).items() if isinstance(value, Value))


#: The sections of the components of each estimator's file: (metadata path, array prefix,
#: component class, estimators). The feature map's (``feature_map``, by its name in
#: ``approximation``) and a local model's (``local``, by ``local.kind``) are found by name.
SECTIONS = (
    ("system", "", Posterior, (LOW_RANK,)),
    ("system", "", exact.ExactPosterior, (EXACT,)),
    ("gibbs", GIBBS_PREFIX, gibbs.GibbsSamples, (GIBBS,)),
    ("system", "", VecchiaPosterior, (VECCHIA,)),
)


@dataclass(frozen=True)
class TableColumns:
    """The columns of the table a command-line model was fitted on (metadata
    ``input_columns`` and ``target_column``): the inputs in the model's order, and the target."""

    inputs: tuple
    target: str


#: The metadata of schema version 1 ("format" and "schema_version" are checked first).
METADATA_ENTRIES = (
    _Entry("scalegp_version", "str"),
    _Entry("estimator", "str"),
    _Entry("params", "object", open=True),
    _Entry("n_features_in", "int", AT_LEAST_ONE),
    _Entry("feature_names_in", "strings", required=False),
    _Entry("input_columns", "strings", required=False),
    _Entry("target_column", "str", required=False),
    _Entry("front_door", "object", required=False, open=True),
    _Entry("kernel", "object"),
    _Entry("kernel.class", "str"),
    _Entry("kernel.params", "object", open=True),
    _Entry("noise_variance", "number", POSITIVE, OPTIMIZED),
    # finite, or NaN for a local kind without a likelihood (checked with the kind)
    _Entry("log_marginal_likelihood", "number", estimators=OPTIMIZED),
    _Entry("y_train_mean", "number", FINITE),
    _Entry("y_train_std", "number", POSITIVE),
    _Entry("optimization", "object", nullable=True, estimators=OPTIMIZED),
    _Entry("optimization.theta", "numbers", FINITE, OPTIMIZED),
    _Entry("optimization.log_marginal_likelihood", "number", NOT_NAN_BELOW_INF,
           OPTIMIZED),
    _Entry("optimization.n_evaluations", "int", NONNEGATIVE, OPTIMIZED),
    _Entry("optimization.n_starts", "int", NONNEGATIVE, OPTIMIZED),
    _Entry("optimization.converged", "bool", estimators=OPTIMIZED),
    _Entry("optimization.message", "str", estimators=OPTIMIZED),
    _Entry("system", "object", estimators=OPTIMIZED),
    *_section_entries("system", Posterior, (LOW_RANK,),
                      {SYSTEM_SELECTOR: (LOCAL_FACTORIZATION,)}),
    *_section_entries("system", exact.ExactPosterior, (EXACT,)),
    *_section_entries("system", VecchiaPosterior, (VECCHIA,)),
    _Entry("dtype", "str", estimators=(LOW_RANK,), choices=("float64", "float32")),
    _Entry("approximation", "str", estimators=(LOW_RANK, GIBBS)),
    _Entry("feature_map", "object", estimators=(LOW_RANK, GIBBS), open=True),
    # a Gibbs model: the chain's settings and what ran (its draws are arrays)
    _Entry("gibbs", "object", estimators=(GIBBS,)),
    *_section_entries("gibbs", gibbs.GibbsSamples, (GIBBS,)),
    # a local model (system.factorization "local"): its kind and the kind's own entries
    _Entry("local", "object", estimators=(LOW_RANK,), required=False, open=True),
    _Entry("arrays", "object", open=True),
)


#: JSON kinds of the kernel parameters (which a kernel has: its class's; values: its own
#: validation).
KERNEL_PARAMS = {"length_scale": "scale", "variance": "number", "nu": "number",
                 "length_scale_bounds": "bounds", "variance_bounds": "bounds"}


@dataclass(frozen=True)
class _ArrayField:
    """One array of a model file.

    ``shape`` holds ints and symbols: "d" is n_features_in, "m" the feature map's
    n_components; any other symbol takes the size it first meets. ``kind`` is "float"
    (float64), "int" (any integer dtype) or "number" (either). The array is present exactly
    when the metadata at ``when[0]`` equals ``when[1]`` (or one of them, for a tuple; always,
    if None), or may be absent when ``optional``. Arrays named ``feature_map.<field>`` are
    present when the map has the field and does not store it as a JSON value.
    """

    name: str
    shape: tuple | None
    conditions: tuple[Condition, ...] = (FINITE,)
    kind: str = "float"
    estimators: tuple[str, ...] = (LOW_RANK,)
    when: tuple[str, object] | None = None
    optional: bool = False
    #: For a local kind's arrays: whether the file must hold it (its ``stored_arrays``).
    present: bool | None = None

    @property
    def when_values(self) -> tuple:
        """The values of the metadata at ``when[0]`` for which the array is present."""
        value = self.when[1]
        return value if isinstance(value, tuple) else (value,)


def array_field(key: str, array: Array, estimators: tuple[str, ...] = (LOW_RANK,),
                path: str | None = None, present: bool | None = None) -> _ArrayField:
    """The field of a component's declared array (:class:`scalegp.stored.Array`) stored as
    ``key``; ``path``: the metadata path of its section (for its ``when``)."""
    when = None if array.when is None else (f"{path}.{array.when[0]}", array.when[1])
    return _ArrayField(key, array.shape,
                       tuple(c for name in array.conditions for c in CONDITIONS[name]),
                       array.kind, estimators, when, array.optional, present)


def _section_arrays(path: str, prefix: str, component, estimators) -> tuple[_ArrayField, ...]:
    return tuple(array_field(prefix + name, array, estimators, path)
                 for name, declaration in declarations(component).items()
                 for array in alternatives(declaration) if isinstance(array, Array))


#: The arrays of the estimators and of their fixed sections (those of a feature map and a
#: local kind are their classes' declarations, read when a file names them).
ARRAY_FIELDS = (
    *(field for path, prefix, component, estimators in SECTIONS
      for field in _section_arrays(path, prefix, component, estimators)),
    _ArrayField("X_train_mean", ("d",), estimators=(*OPTIMIZED, GIBBS), optional=True),
    _ArrayField("X_train_scale", ("d",), (POSITIVE,), estimators=(*OPTIMIZED, GIBBS),
                optional=True),
    # a GPRegressor's variance calibration (metadata front_door.variance_calibration: the
    # reader requires them with it and refuses them without)
    _ArrayField(CALIBRATION_PREFIX + "X", ("calibration_rows", "d"), estimators=OPTIMIZED,
                optional=True),
    _ArrayField(CALIBRATION_PREFIX + "t", ("calibration_rows",), estimators=OPTIMIZED,
                optional=True),
    # a GPRegressor learned on repeated inputs (metadata front_door.replicates, likewise)
    *(_ArrayField(REPLICATES_PREFIX + name, shape, estimators=OPTIMIZED, optional=True)
      for name, shape in Replicates.STATE_ARRAYS.items()),
    # an exact or Vecchia GP's hyperparameters integrated out
    # (front_door.hyperparameter_average)
    *(_ArrayField(AVERAGE_PREFIX + name, shape, estimators=(EXACT, VECCHIA), optional=True)
      for name, shape in HyperparameterAverage.STATE_ARRAYS.items()),
)


#: A feature-map array field without a declaration (a map outside the package that declares
#: none): finite numbers.
DEFAULT_MAP_ARRAY = _ArrayField(MAP_PREFIX + "*", None, kind="number")


#: A feature-map JSON field without a declaration: a finite number, a string, a bool or null.
DEFAULT_MAP_VALUE = Value("scalar", nullable=True)


#: Bounds on the symbols of the shapes (the exact GP refuses larger training sets).
SYMBOL_LIMITS = {"n": exact.MAX_EXACT_SAMPLES}


_DTYPE_KINDS = {"float": ("float64", lambda dt: dt.kind == "f" and dt.itemsize == 8),
                "int": ("an integer dtype", lambda dt: dt.kind in "iu"),
                "number": ("float64 or an integer dtype",
                           lambda dt: dt.kind in "iu" or (dt.kind == "f" and dt.itemsize == 8))}
