"""The schema of a model file: one declaration per metadata entry and per array (JSON kind or
dtype, shape in terms of n_features_in, the map's m and the other arrays, and the values'
domain), the format's name and version, and the conditions the values must meet.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..engine import exact, systems
from ..estimators.exact import ExactGPRegressor
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..features import sketches
from ..features.projections import CERTIFICATES
from ..features.random_projection import REDUCTIONS
from ..inference import gibbs


FORMAT_NAME = "scalegp-model"


SCHEMA_VERSION = 1


METADATA_KEY = "metadata"


#: Prefix of the arrays that hold the feature map's array fields.
MAP_PREFIX = "feature_map."


#: Prefix of the arrays of a local model (:mod:`scalegp.local.centered`).
LOCAL_PREFIX = "local."


#: Prefix of the arrays of a Gibbs model (:mod:`scalegp.inference.gibbs`).
GIBBS_PREFIX = "gibbs."


ESTIMATORS = {cls.__name__: cls for cls in (LowRankGPRegressor, ExactGPRegressor,
                                             GibbsGPRegressor)}


LOW_RANK, EXACT, GIBBS = "LowRankGPRegressor", "ExactGPRegressor", "GibbsGPRegressor"


#: system.factorization -> whether it is the factorization of a signed map's system
#: ("repaired": the Cholesky system of the positive part of a signed approximation).
#: "local": a local model (:mod:`scalegp.local.centered`), whose systems are its kind's arrays.
FACTORIZATIONS = {"cholesky": False, "eigen": True, "repaired": True, "local": False}


#: Prefix of the arrays of a repaired system's positive part (scalegp.engine.positive_part).
POSITIVE_PART_PREFIX = systems.POSITIVE_PART_PREFIX


#: Estimator parameters added after schema version 1 was first written, with the value that
#: reproduces what a file without them was fitted with.
PARAMS_ADDED = {"normalize_X": False, "signed_rule": "keep", "solver": "cholesky",
                "local": None, "local_threshold": 2.0, "local_lazy": False,
                "local_reoptimize": False, "local_neighbors": 300,
                "local_learning_centres": 32, "objective": "dtc", "learn_knots": 0}


#: Arrays of the input standardization (fitted attributes X_train_mean_, X_train_scale_).
INPUT_STANDARDIZATION = ("X_train_mean", "X_train_scale")


@dataclass(frozen=True)
class _Condition:
    """What every checked value of a field must be: ``holds(values(a))`` is true everywhere."""

    description: str
    holds: Callable[[np.ndarray], np.ndarray]
    of: str = "entry"
    values: Callable[[np.ndarray], np.ndarray] = np.asarray

    def failure(self, array: np.ndarray):
        """(index, value) of the first value that breaks the condition, or None."""
        values = np.atleast_1d(self.values(array))
        bad = np.argwhere(~np.asarray(self.holds(values), dtype=bool))
        if bad.size == 0:
            return None
        index = tuple(int(i) for i in bad[0])
        return (index[0] if len(index) == 1 else index), values[index].item()


def _nonsingular(eigenvalues: np.ndarray) -> np.ndarray:
    """|lambda| above m eps max|lambda|, the tolerance of linalg.SymmetricFactorization."""
    magnitude = np.abs(eigenvalues)
    largest = np.max(magnitude) if np.all(np.isfinite(magnitude)) else np.inf
    return magnitude > eigenvalues.size * np.finfo(np.float64).eps * max(largest, 1e-300)


FINITE = _Condition("finite", np.isfinite)


POSITIVE = _Condition("finite and > 0", lambda v: np.isfinite(v) & (v > 0))


NONNEGATIVE = _Condition("finite and >= 0", lambda v: np.isfinite(v) & (v >= 0))


AT_LEAST_ONE = _Condition("finite and >= 1", lambda v: np.isfinite(v) & (v >= 1))


#: For values that are reported, not computed with (inf is a legitimate "none").
NOT_NAN_NONNEGATIVE = _Condition(">= 0 (inf allowed, NaN not)", lambda v: v >= 0)


#: A reported value that may be "not computed" (NaN), else finite and >= 0.
NAN_OR_NONNEGATIVE = _Condition("finite and >= 0, or NaN (not computed)",
                                lambda v: np.isnan(v) | (np.isfinite(v) & (v >= 0)))


#: The best value of every optimizer start (-inf: every start failed); never NaN or +inf.
NOT_NAN_BELOW_INF = _Condition("not NaN and < inf", lambda v: v < np.inf)


SIGN = _Condition("-1 or +1", lambda v: (v == 1) | (v == -1))


PANEL_COUNT = _Condition("1 or 2", lambda v: (v == 1) | (v == 2))


LOWER_TRIANGULAR = _Condition("0 above the diagonal (a lower triangular factor)",
                              lambda A: np.tril(np.ones(A.shape, dtype=bool)) | (A == 0))


POSITIVE_DIAGONAL = _Condition("finite and > 0 on the diagonal", POSITIVE.holds,
                               of="diagonal entry", values=np.diagonal)


NONSINGULAR = _Condition("nonzero (|eigenvalue| > m eps max|eigenvalue|)", _nonsingular)


STACKED_POSITIVE_DIAGONAL = _Condition(
    "finite and > 0 on the diagonal", POSITIVE.holds, of="diagonal entry",
    values=lambda A: np.diagonal(A, axis1=-2, axis2=-1))


#: The conditions a local kind names (``LocalModel.MODEL_FILE_ARRAYS``, ``MODEL_FILE_METADATA``).
LOCAL_CONDITIONS = {"finite": (FINITE,), "positive": (POSITIVE,), "nonnegative": (NONNEGATIVE,),
                    "cholesky": (LOWER_TRIANGULAR, STACKED_POSITIVE_DIAGONAL)}


@dataclass(frozen=True)
class _Entry:
    """One metadata value: its dotted path, JSON kind and the condition it meets.

    ``kind`` is a key of ``_KINDS``; ``open`` marks an object whose keys are checked by the
    step that uses it (estimator parameters, kernel parameters, feature-map fields, arrays).
    """

    path: str
    kind: str
    condition: _Condition | None = None
    estimators: tuple[str, ...] = (LOW_RANK, EXACT, GIBBS)
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


#: The metadata of schema version 1 ("format" and "schema_version" are checked first).
METADATA_ENTRIES = (
    _Entry("scalegp_version", "str"),
    _Entry("estimator", "str"),
    _Entry("params", "object", open=True),
    _Entry("n_features_in", "int", AT_LEAST_ONE),
    _Entry("feature_names_in", "strings", required=False),
    _Entry("input_columns", "strings", required=False),
    _Entry("target_column", "str", required=False),
    _Entry("kernel", "object"),
    _Entry("kernel.class", "str"),
    _Entry("kernel.params", "object", open=True),
    _Entry("noise_variance", "number", POSITIVE, (LOW_RANK, EXACT)),
    # finite, or NaN for a local kind without a likelihood (checked with the kind)
    _Entry("log_marginal_likelihood", "number", estimators=(LOW_RANK, EXACT)),
    _Entry("y_train_mean", "number", FINITE),
    _Entry("y_train_std", "number", POSITIVE),
    _Entry("optimization", "object", nullable=True, estimators=(LOW_RANK, EXACT)),
    _Entry("optimization.theta", "numbers", FINITE, (LOW_RANK, EXACT)),
    _Entry("optimization.log_marginal_likelihood", "number", NOT_NAN_BELOW_INF,
           (LOW_RANK, EXACT)),
    _Entry("optimization.n_evaluations", "int", NONNEGATIVE, (LOW_RANK, EXACT)),
    _Entry("optimization.n_starts", "int", NONNEGATIVE, (LOW_RANK, EXACT)),
    _Entry("optimization.converged", "bool", estimators=(LOW_RANK, EXACT)),
    _Entry("optimization.message", "str", estimators=(LOW_RANK, EXACT)),
    _Entry("system", "object", estimators=(LOW_RANK, EXACT)),
    _Entry("system.jitter", "number", NONNEGATIVE, (LOW_RANK, EXACT)),
    _Entry("system.n_samples", "int", AT_LEAST_ONE, (LOW_RANK,)),
    _Entry("system.factorization", "str", estimators=(LOW_RANK,), choices=tuple(FACTORIZATIONS)),
    _Entry("system.signed", "bool", estimators=(LOW_RANK,)),
    _Entry("dtype", "str", estimators=(LOW_RANK,), choices=("float64", "float32")),
    _Entry("approximation", "str", estimators=(LOW_RANK, GIBBS)),
    _Entry("feature_map", "object", estimators=(LOW_RANK, GIBBS), open=True),
    # a Gibbs model: the chain's settings and what ran (its draws are arrays)
    _Entry("gibbs", "object", estimators=(GIBBS,)),
    _Entry("gibbs.diag_correction", "bool", estimators=(GIBBS,)),
    _Entry("gibbs.collapsed", "bool", estimators=(GIBBS,)),
    _Entry("gibbs.cost_model", "str", estimators=(GIBBS,), choices=gibbs.COST_MODELS),
    _Entry("gibbs.n_iter", "int", AT_LEAST_ONE, (GIBBS,)),
    _Entry("gibbs.burn_in", "int", NONNEGATIVE, (GIBBS,)),
    _Entry("gibbs.thin", "int", AT_LEAST_ONE, (GIBBS,)),
    _Entry("gibbs.n_grid", "int", AT_LEAST_ONE, (GIBBS,)),
    _Entry("gibbs.n_floored", "int", NONNEGATIVE, (GIBBS,)),
    # a local model (system.factorization "local"): its kind and the kind's own entries
    _Entry("local", "object", estimators=(LOW_RANK,), required=False, open=True),
    _Entry("arrays", "object", open=True),
)


#: JSON kinds of the kernel parameters (which a kernel has: its class's; values: its own
#: validation).
KERNEL_PARAMS = {"length_scale": "scale", "variance": "number", "nu": "number",
                 "length_scale_bounds": "bounds", "variance_bounds": "bounds"}


#: Feature-map fields stored as JSON values; a map's own construction checks their agreement
#: with its other fields. A field of a map outside the package that neither this table nor
#: ARRAY_FIELDS declares must be a JSON scalar: a finite number, a string, a bool or null.
MAP_SCALARS = {
    "n_dims": _Entry("feature_map.n_dims", "int", AT_LEAST_ONE),
    "epsilon": _Entry("feature_map.epsilon", "number", POSITIVE),
    "selection": _Entry("feature_map.selection", "str"),
    # maclaurin
    "sketch": _Entry("feature_map.sketch", "str", choices=("explicit", *sketches.SKETCHES)),
    "expected_error": _Entry("feature_map.expected_error", "number", NAN_OR_NONNEGATIVE),
    # random projection
    "rank": _Entry("feature_map.rank", "int", AT_LEAST_ONE),
    "oversampling": _Entry("feature_map.oversampling", "int", NONNEGATIVE),
    "reduction": _Entry("feature_map.reduction", "str", choices=REDUCTIONS),
    "target_error": _Entry("feature_map.target_error", "number", POSITIVE, nullable=True),
    "certified_error": _Entry("feature_map.certified_error", "number", NONNEGATIVE,
                              nullable=True),
    "certificate": _Entry("feature_map.certificate", "str", nullable=True,
                          choices=CERTIFICATES),
}


@dataclass(frozen=True)
class _ArrayField:
    """One array of a model file.

    ``shape`` holds ints and symbols: "d" is n_features_in, "m" the feature map's
    n_components; any other symbol takes the size it first meets. ``kind`` is "float"
    (float64), "int" (any integer dtype) or "number" (either). The array is present exactly
    when the metadata at ``when[0]`` equals ``when[1]`` (or one of them, for a tuple; always,
    if None), or may be absent
    when ``optional``. Arrays named ``feature_map.<field>`` are present when the map has the
    field and does not store it as a JSON value.
    """

    name: str
    shape: tuple | None
    conditions: tuple[_Condition, ...] = (FINITE,)
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


ARRAY_FIELDS = (
    # "k": the dimension of the factorized system, m (r <= m for a repaired one)
    _ArrayField("beta", ("k",), when=("system.factorization", ("cholesky", "eigen", "repaired"))),
    _ArrayField("signs", ("m",), (SIGN,), when=("system.signed", True)),
    _ArrayField("cholesky_factor", ("k", "k"), (FINITE, LOWER_TRIANGULAR, POSITIVE_DIAGONAL),
                when=("system.factorization", ("cholesky", "repaired"))),
    _ArrayField(POSITIVE_PART_PREFIX + "transform", ("m", "k"),
                when=("system.factorization", "repaired")),
    _ArrayField(POSITIVE_PART_PREFIX + "eigenvalues", ("spectrum",),
                when=("system.factorization", "repaired")),
    _ArrayField("eigenvalues", ("m",), (FINITE, NONSINGULAR),
                when=("system.factorization", "eigen")),
    _ArrayField("eigenvectors", ("m", "m"), when=("system.factorization", "eigen")),
    _ArrayField("X_train", ("n", "d"), estimators=(EXACT,)),
    _ArrayField("cholesky_factor", ("n", "n"), (FINITE, LOWER_TRIANGULAR, POSITIVE_DIAGONAL),
                estimators=(EXACT,)),
    _ArrayField("alpha", ("n",), estimators=(EXACT,)),
    _ArrayField("X_train_mean", ("d",), estimators=(LOW_RANK, EXACT, GIBBS), optional=True),
    _ArrayField("X_train_scale", ("d",), (POSITIVE,), estimators=(LOW_RANK, EXACT, GIBBS),
                optional=True),
    # "t": the grid's atoms (metadata gibbs.n_grid), "S": the retained draws
    _ArrayField(GIBBS_PREFIX + "theta1_grid", ("t",), (POSITIVE,), estimators=(GIBBS,)),
    _ArrayField(GIBBS_PREFIX + "tau", ("S",), (POSITIVE,), estimators=(GIBBS,)),
    _ArrayField(GIBBS_PREFIX + "theta2", ("S",), (POSITIVE,), estimators=(GIBBS,)),
    _ArrayField(GIBBS_PREFIX + "theta1_index", ("S",), (NONNEGATIVE,), kind="int",
                estimators=(GIBBS,)),
    _ArrayField(GIBBS_PREFIX + "weights", ("S", "m"), estimators=(GIBBS,)),
    _ArrayField(MAP_PREFIX + "omega", ("f", "d")),
    _ArrayField(MAP_PREFIX + "frequency_weights", ("f",), (NONNEGATIVE,)),
    _ArrayField(MAP_PREFIX + "offset", ("d",)),
    _ArrayField(MAP_PREFIX + "frequency_signs", ("f",), (SIGN,)),
    _ArrayField(MAP_PREFIX + "phase_shifts", ("single",)),
    _ArrayField(MAP_PREFIX + "sign_diagonals", (3, "blocks", "block_size"), (SIGN,)),
    _ArrayField(MAP_PREFIX + "row_scales", ("f",)),
    _ArrayField(MAP_PREFIX + "n_nodes", ("d",), (AT_LEAST_ONE,), kind="int"),
    _ArrayField(MAP_PREFIX + "half_width", ("d",), (POSITIVE,)),
    _ArrayField(MAP_PREFIX + "panels", ("d",), (PANEL_COUNT,), kind="int"),
    _ArrayField(MAP_PREFIX + "truncation_bound", ("d",), (NOT_NAN_NONNEGATIVE,)),
    _ArrayField(MAP_PREFIX + "theoretical_n_nodes", ("d",), (NOT_NAN_NONNEGATIVE,)),
    # random projection: the points the projection is built on, and the sketch
    _ArrayField(MAP_PREFIX + "inputs", ("points", "d")),
    _ArrayField(MAP_PREFIX + "probes", ("points", "sketch_columns")),
    # Nystrom: the knots (m of them)
    _ArrayField(MAP_PREFIX + "knots", ("m", "d")),
    # maclaurin: D_n per degree, the sketch matrices side by side (imaginary part: complex
    # sketches only; sum_n n D_n columns, checked by the map)
    _ArrayField(MAP_PREFIX + "allocation", ("degree",), (AT_LEAST_ONE,), kind="int"),
    _ArrayField(MAP_PREFIX + "projections", ("d", "projection_columns")),
    _ArrayField(MAP_PREFIX + "projections_imag", ("d", "projection_columns")),
)


#: A feature-map array field without a declaration above (a new map): finite numbers.
DEFAULT_MAP_ARRAY = _ArrayField(MAP_PREFIX + "*", None, kind="number")


_DECLARED_MAP_ARRAYS = {field.name for field in ARRAY_FIELDS if field.name.startswith(MAP_PREFIX)}


#: Bounds on the symbols of the shapes (the exact GP refuses larger training sets).
SYMBOL_LIMITS = {"n": exact.MAX_EXACT_SAMPLES}


_DTYPE_KINDS = {"float": ("float64", lambda dt: dt.kind == "f" and dt.itemsize == 8),
                "int": ("an integer dtype", lambda dt: dt.kind in "iu"),
                "number": ("float64 or an integer dtype",
                           lambda dt: dt.kind in "iu" or (dt.kind == "f" and dt.itemsize == 8))}


def _system_arrays(kind) -> tuple[str, ...]:
    """The arrays of a low-rank system of this kind, as the schema declares them."""
    return tuple(field.name for field in ARRAY_FIELDS
                 if field.when is not None and field.when[0] == "system.factorization"
                 and kind.name in field.when_values)
