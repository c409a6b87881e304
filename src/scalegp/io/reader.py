"""Model files: a fitted estimator as one ``.npz``, without pickle.

The file holds the fitted state as plain numeric arrays (written by ``numpy.savez``, read by
``numpy.load(..., allow_pickle=False)``) and one array ``"metadata"``: UTF-8 JSON stored as
uint8 bytes, with the format name, the schema version, the scalegp version, the estimator
class and parameters, the fitted kernel, noise variance and normalization constants, the
feature map's scalar fields, and the shape and dtype of every array. A loaded model gives
bit-identical predictions: every array and float is stored exactly (floats as shortest
round-trip JSON), and the estimator is rebuilt around the same posterior.

Reading trusts nothing in the file. The zip directory's sizes are checked against the file's
real size (all members together inflate to at most ``MAX_INFLATION`` times it, plus
``INFLATION_ALLOWANCE``: a small file cannot demand large arrays, nor the work on them), and
each listed member's ``.npy`` header against the bytes the member holds, before any array is
inflated; members the metadata does not list are refused unread. The
metadata (bounded in length and nesting) and every array are then checked against one
declaration per field (``METADATA_ENTRIES``, ``KERNEL_PARAMS``, ``MAP_SCALARS``,
``ARRAY_FIELDS``: JSON kind or dtype, shape in terms of n_features_in, the map's m and the
other arrays, and the values' domain); the kernel, the feature map and the estimator are
rebuilt by their own validation, checked against each other, and the rebuilt model must
predict a finite value. Every failure is an :class:`~scalegp.errors.InvalidModelFileError`
naming the entry. A new field is one line in these tables; every field of the package's
models has one (tests/test_model_file_schema.py enumerates them), and a field of a map from
outside the package that they do not declare is a finite array or a JSON scalar.

A local model (:mod:`scalegp.local.centered`) has ``system.factorization = "local"``, its kind and the
kind's scalars under the metadata ``local``, and its arrays as ``local.<name>``; the kind
declares them (``MODEL_FILE_METADATA``, ``MODEL_FILE_ARRAYS``, ``stored_arrays``), and the
loader checks them like its own tables (``LOCAL_CONDITIONS``), so a new kind needs no change
here. Test-point and lazy cluster models store their (standardized) training rows.

A :class:`~scalegp.estimators.gibbs.GibbsGPRegressor` stores its draws as ``gibbs.<name>``
arrays (the theta1 grid, tau, theta2, the grid index and the weights of every retained
draw) and the chain's settings under the metadata ``gibbs``; it has no noise variance,
likelihood, optimization or factorized system (docs/gibbs.md, "The estimator").

Writes go through :func:`scalegp._output.write_atomically`: a temporary file created
exclusively in the target's folder, moved over the target by ``os.replace``, so a failed or
interrupted save leaves an existing file untouched; only a regular file or a missing path is
ever replaced.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import os
import re
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ..engine import exact, systems
from .. import engine
from .. import features, kernels
from ..inference import gibbs
from ..local import centered as local
from ..features import sketches
from .._version import __version__
from .._output import MODEL_SUFFIXES, write_atomically
from ..errors import InvalidModelFileError
from ..estimators.exact import ExactGPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..features._sketching import CERTIFICATES
from ..features.random_projection import REDUCTIONS
from ..estimators.gibbs import GibbsGPRegressor
from ..inference.optimize import OptimizationResult

__all__ = ["save", "load", "FORMAT_NAME", "SCHEMA_VERSION"]

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


# ============================================================================ save
def save(model, path) -> None:
    """Write a fitted estimator to ``path`` (one ``.npz`` file, no pickle).

    Parameters
    ----------
    model : LowRankGPRegressor, ExactGPRegressor or GibbsGPRegressor
        A fitted estimator. The training data are not stored, so a loaded model predicts
        but cannot evaluate ``log_marginal_likelihood(theta)``. A ``random_state`` that is
        not an int or None is stored as None.
    path : str or os.PathLike
        The file to write, exactly as named: it must end in ``.npz`` (no suffix is added).
        An existing regular file is replaced only once the new one is complete, keeping its
        permission bits; see :mod:`scalegp._output` for what is refused.

    Raises
    ------
    UnsafeOutputError
        ``path`` is a folder, device, FIFO, socket, symbolic link or read-only file, its
        folder is missing or not writable, or it does not end in ``.npz``.
    """
    arrays, metadata = _encode(model)
    text = json.dumps(metadata, indent=1, sort_keys=True)
    arrays[METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    write_atomically(path, lambda file: np.savez(file, **arrays), suffixes=MODEL_SUFFIXES)


def _encode(model) -> tuple[dict, dict]:
    if not isinstance(model, tuple(ESTIMATORS.values())):
        raise TypeError(
            "model must be a fitted LowRankGPRegressor, ExactGPRegressor or GibbsGPRegressor, "
            f"got {type(model).__name__}"
        )
    check_is_fitted(model)
    if isinstance(model, GibbsGPRegressor):
        return _encode_gibbs(model)
    posterior = model.posterior_
    metadata = {
        **_common_metadata(model, model.kernel_),
        "noise_variance": float(model.noise_variance_),
        "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
        "y_train_mean": float(model.y_train_mean_),
        "y_train_std": float(model.y_train_std_),
        "optimization": _encode_optimization(model.optimization_result_),
    }
    if isinstance(model, LowRankGPRegressor) and model.local_model_ is not None:
        arrays = {LOCAL_PREFIX + key: value
                  for key, value in posterior.model_file_arrays().items()}
        metadata["local"] = {"kind": posterior.kind,
                             **_to_json(posterior.model_file_metadata(), "local-model metadata")}
        metadata["system"] = {"jitter": 0.0, "n_samples": int(posterior.n_samples),
                              "factorization": "local", "signed": False}
    elif isinstance(model, LowRankGPRegressor):
        system = posterior.system
        arrays = {"beta": system.beta, **system.arrays()}
        if model.feature_map_.signs is not None:
            arrays["signs"] = np.asarray(model.feature_map_.signs, dtype=np.float64)
        metadata["system"] = {
            "jitter": float(system.jitter), "n_samples": int(posterior.n_samples),
            "factorization": system.name,
            "signed": model.feature_map_.signs is not None,
        }
    else:
        arrays = {}
    if isinstance(model, LowRankGPRegressor):
        metadata["dtype"] = model.dtype_.name
        _encode_feature_map(model.feature_map_, arrays, metadata)
    else:
        arrays = {"X_train": posterior.X_train, "cholesky_factor": posterior.cholesky_factor,
                  "alpha": posterior.alpha}
        metadata["system"] = {"jitter": float(posterior.jitter)}
    return _finish(model, arrays, metadata)


def _common_metadata(model, kernel) -> dict:
    metadata = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "scalegp_version": __version__,
        "estimator": type(model).__name__,
        "params": _encode_params(model),
        "n_features_in": int(model.n_features_in_),
        "kernel": _encode_kernel(kernel),
        "y_train_mean": float(model.y_train_mean_),
        "y_train_std": float(model.y_train_std_),
    }
    if hasattr(model, "feature_names_in_"):
        metadata["feature_names_in"] = [str(name) for name in model.feature_names_in_]
    # column names of the table a command-line model was trained on (optional)
    if hasattr(model, "input_columns_"):
        metadata["input_columns"] = [str(name) for name in model.input_columns_]
        metadata["target_column"] = str(model.target_column_)
    return metadata


def _encode_feature_map(feature_map, arrays: dict, metadata: dict) -> None:
    """The map's name and state; a neighbourhood model of exact local GPs has no map:
    approximation "exact", no fields."""
    metadata["approximation"] = "exact" if feature_map is None else feature_map.name
    metadata["feature_map"] = {}
    state = {} if feature_map is None else feature_map.state()
    for field, value in state.items():
        if isinstance(value, np.ndarray):
            arrays[MAP_PREFIX + field] = value
        else:
            metadata["feature_map"][field] = _to_json(value, f"feature-map field {field!r}")


def _encode_gibbs(model) -> tuple[dict, dict]:
    samples = model.samples_
    if isinstance(samples.feature_map, gibbs.AtomMaps):
        raise NotImplementedError(
            "saving a Gibbs model with one map per theta1 atom (map_per_atom=True) is not "
            "implemented: the model file stores one feature map")
    metadata = _common_metadata(model, samples.kernel)
    metadata["gibbs"] = {
        "diag_correction": bool(samples.diag_correction), "collapsed": bool(samples.collapsed),
        "cost_model": str(samples.cost_model), "n_iter": int(samples.n_iter),
        "burn_in": int(samples.burn_in), "thin": int(samples.thin),
        "n_grid": int(samples.theta1_grid.size), "n_floored": int(samples.n_floored)}
    arrays = {GIBBS_PREFIX + "theta1_grid": samples.theta1_grid, GIBBS_PREFIX + "tau": samples.tau,
              GIBBS_PREFIX + "theta2": samples.theta2,
              GIBBS_PREFIX + "theta1_index": samples.theta1_index,
              GIBBS_PREFIX + "weights": samples.weights}
    _encode_feature_map(samples.feature_map, arrays, metadata)
    return _finish(model, arrays, metadata)


def _finish(model, arrays: dict, metadata: dict) -> tuple[dict, dict]:
    """Add the input standardization and the listing of the arrays."""
    for name in INPUT_STANDARDIZATION:
        value = getattr(model, name + "_", None)
        if value is not None:
            arrays[name] = np.asarray(value, dtype=np.float64)
    for key, array in arrays.items():
        if array.dtype.hasobject:
            raise TypeError(f"cannot store array {key!r} of dtype object in a model file")
    metadata["arrays"] = {key: {"shape": list(array.shape), "dtype": array.dtype.str}
                          for key, array in arrays.items()}
    return arrays, metadata


def _encode_kernel(kernel) -> dict:
    return {"class": type(kernel).__name__, "params": _to_json(kernel.get_params(), "kernel")}


def _encode_params(model) -> dict:
    params = {}
    for name, value in model.get_params(deep=False).items():
        if name == "kernel" and isinstance(value, kernels.Kernel):
            value = _encode_kernel(value)
        elif name == "dtype":
            value = np.dtype(value).name
        elif name == "random_state" and not isinstance(value, (numbers.Integral, type(None))):
            value = None
        elif isinstance(value, gibbs.GammaPrior):
            value = [value.shape, value.rate]
        elif isinstance(value, np.ndarray):
            value = value.tolist()
        params[name] = _to_json(value, f"parameter {name!r}")
    return params


def _encode_optimization(result):
    if result is None:
        return None
    return {"theta": [float(t) for t in result.theta],
            "log_marginal_likelihood": float(result.log_marginal_likelihood),
            "n_evaluations": int(result.n_evaluations), "n_starts": int(result.n_starts),
            "converged": bool(result.converged), "message": str(result.message)}


def _to_json(value, what: str):
    """A JSON value (None, bool, int, float, str, list, dict with str keys) or TypeError."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_to_json(item, what) for item in value]
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return {key: _to_json(item, what) for key, item in value.items()}
    raise TypeError(
        f"cannot store {what} in a model file: values of type {type(value).__name__} are not "
        "supported (numbers, strings, None, lists and dicts with string keys only)"
    )


# ============================================================================ load
#: Limits of what :func:`load` reads (a model file is untrusted input).
MAX_MEMBERS = 64
MAX_METADATA_BYTES = 4 * 2**20
#: Nesting of JSON objects and lists (the writer's deepest is 5: params.kernel.params.*[]).
MAX_JSON_DEPTH = 32
#: Digits of a JSON integer (more than any int64; Python's own limit is 4300 digits).
MAX_JSON_INT_DIGITS = 20
#: numpy's own limit for the header of one .npy member.
MAX_NPY_HEADER_BYTES = 10_000
#: Uncompressed over compressed size of a deflated member (deflate cannot exceed 1032).
MAX_DEFLATE_RATIO = 1100
#: The bytes all members may inflate to: INFLATION_ALLOWANCE + MAX_INFLATION times the file's
#: size, so that a small file cannot demand large arrays (and the work they cost). scalegp
#: stores members uncompressed; recompressed, float64 data deflates about 1.1 times, a
#: triangular factor 2 times, integer-valued inputs up to about 8 times.
MAX_INFLATION = 16
INFLATION_ALLOWANCE = 4 * 2**20
#: Bytes of an .npy member before its data: magic string and format version.
NPY_PREAMBLE_BYTES = 8

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
#: What reading a damaged zip member raises (a bad CRC, a short or corrupt deflate stream).
_STREAM_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error)
_ZIP_ERRORS = (*_STREAM_ERRORS, NotImplementedError, RuntimeError, ValueError)


def _system_arrays(kind) -> tuple[str, ...]:
    """The arrays of a low-rank system of this kind, as the schema declares them."""
    return tuple(field.name for field in ARRAY_FIELDS
                 if field.when is not None and field.when[0] == "system.factorization"
                 and kind.name in field.when_values)


def load(path):
    """Read a model written by :func:`save`, trusting nothing in the file.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LowRankGPRegressor, ExactGPRegressor or GibbsGPRegressor
        Fitted, with the original parameters and fitted attributes; its predictions are
        bit-identical to those of the saved model.

    Raises
    ------
    InvalidModelFileError
        Naming the entry, for any file that is not a complete, consistent scalegp model:
        missing, not an ``.npz``, truncated or damaged; of another format or schema version;
        with members that are unlisted, duplicated, encrypted, of object dtype (pickle) or
        whose ``.npy`` header declares more data than the member holds (checked before any
        array is inflated; see the ``MAX_*`` limits of this module); metadata that is not
        JSON, nested deeper than ``MAX_JSON_DEPTH``, longer than ``MAX_METADATA_BYTES``, or
        with a missing, unknown or ill-typed key; a value outside its domain (non-finite,
        a non-positive noise variance, length scale, variance or ``y_train_std``, negative
        jitter, signs other than +-1, a Cholesky factor that is not lower triangular with a
        positive diagonal, a singular eigen-factorization); an array of another dtype
        (complex, strings, integers where floats are stored) or of a shape inconsistent with
        the others (``n_features_in``, the feature map, the kernel's length scales); a
        feature map, kernel or estimator parameter its own class refuses.

    Notes
    -----
    Every value is checked against the declarations ``METADATA_ENTRIES``, ``MAP_SCALARS``
    and ``ARRAY_FIELDS`` of this module (one line per field), then the rebuilt model
    predicts at one input as a last consistency check.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        found = ("is not a regular file (a folder, FIFO, socket or device)"
                 if os.path.exists(path) else "does not exist")
        raise InvalidModelFileError(f"not a scalegp model file: {path!r} {found}")
    try:
        file = open(path, "rb")
    except OSError as error:
        raise InvalidModelFileError(f"model file {path!r} cannot be read ({error})") from None
    with file, _Archive(path, file) as archive:
        try:
            return _Reader(archive).estimator()
        except InvalidModelFileError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                ArithmeticError) as error:
            # a safety net: every check names its entry, so reaching it is a gap in them
            raise archive.error(f"could not be rebuilt (an unexpected {type(error).__name__}: "
                                f"{error})") from None


class _Archive:
    """The members of an ``.npz`` file, checked against the file's real size, read only by
    ``numpy.load(..., allow_pickle=False)`` after their ``.npy`` headers were checked."""

    def __init__(self, path: str, file):
        self.path = path
        start = file.read(4)
        if start != b"PK\x03\x04" or not zipfile.is_zipfile(file):
            if start == b"PK\x03\x04":
                raise self.error("is truncated or damaged: it starts like an .npz (zip) "
                                 "archive but its zip directory is missing")
            raise InvalidModelFileError(
                f"not a scalegp model file: {path!r} is not an .npz (zip) archive"
            )
        file.seek(0)
        try:
            self.npz = np.load(file, allow_pickle=False)
        except _ZIP_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        try:
            self.members = self._check_members(self.npz.zip.infolist(),
                                               os.fstat(file.fileno()).st_size)
        except BaseException:
            self.npz.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.npz.close()

    def error(self, message: str) -> InvalidModelFileError:
        return InvalidModelFileError(f"model file {self.path!r} {message}")

    def _check_members(self, infos, file_size: int) -> dict:
        """key -> ZipInfo, after the zip directory's own claims are checked."""
        if len(infos) > MAX_MEMBERS:
            raise self.error(f"has {len(infos)} members, more than the {MAX_MEMBERS} a model "
                             "file may have")
        members = {}
        for info in infos:
            name = info.filename
            if not name.endswith(".npy"):
                raise self.error(f"holds the member {name!r}, which is not an .npy array")
            if name[:-4] in members:
                raise self.error(f"holds the member {name!r} twice")
            if info.flag_bits & 0x1:
                raise self.error(f"holds the encrypted member {name!r}")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise self.error(f"holds the member {name!r} compressed by method "
                                 f"{info.compress_type}; expected stored or deflated")
            stored = info.compress_type == zipfile.ZIP_STORED
            if (stored and info.file_size != info.compress_size) or (
                    info.file_size > MAX_DEFLATE_RATIO * max(info.compress_size, 1)):
                raise self.error(
                    f"has the member {name!r} declaring {info.file_size} bytes from "
                    f"{info.compress_size} compressed ({'stored' if stored else 'deflated'}; "
                    f"at most {1 if stored else MAX_DEFLATE_RATIO} times as many)"
                )
            members[name[:-4]] = info
        compressed = sum(info.compress_size for info in infos)
        if compressed > file_size:
            raise self.error(f"has members declaring {compressed} bytes, more than the file's "
                             f"{file_size}")
        inflated = sum(info.file_size for info in infos)
        if inflated > INFLATION_ALLOWANCE + MAX_INFLATION * file_size:
            raise self.error(f"has members inflating to {inflated} bytes from a file of "
                             f"{file_size}, more than {MAX_INFLATION} times its size plus "
                             f"{INFLATION_ALLOWANCE} (scalegp writes uncompressed model "
                             "files: store its members uncompressed)")
        return members

    def header(self, key: str) -> tuple[tuple, np.dtype]:
        """(shape, dtype) from the member's .npy header, once the data it declares is checked
        to be exactly what the member holds."""
        info = self.members[key]
        try:
            with self.npz.zip.open(info) as stream:
                version = np.lib.format.read_magic(stream)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f"unsupported .npy format version {version}")
                length_bytes = stream.read(2 if version == (1, 0) else 4)
                length = int.from_bytes(length_bytes, "little")
                header_size = NPY_PREAMBLE_BYTES + len(length_bytes) + length
                if length > MAX_NPY_HEADER_BYTES or header_size > info.file_size:
                    raise ValueError(f"header of {length} bytes (at most "
                                     f"{MAX_NPY_HEADER_BYTES}, within the member's "
                                     f"{info.file_size})")
                header = io.BytesIO(length_bytes + stream.read(length))
            parse = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                     else np.lib.format.read_array_header_2_0)
            shape, _, dtype = parse(header)
        except _STREAM_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        except (ValueError, SyntaxError, RecursionError, MemoryError, UnicodeError,
                NotImplementedError, RuntimeError) as error:
            raise self.error(f"has a damaged .npy header in array {key!r} ({error})") from None
        if dtype.hasobject:
            raise self.error(f"holds an object array {key!r} (pickled Python objects), which "
                             "scalegp neither writes nor loads")
        if any(size < 0 for size in shape):
            raise self.error(f"has array {key!r} of negative shape {shape}")
        data_size = math.prod(shape) * dtype.itemsize
        if header_size + data_size != info.file_size:
            raise self.error(
                f"has array {key!r} whose header declares shape {shape} of dtype {dtype.str} "
                f"({data_size} bytes), but the member holds {info.file_size - header_size} "
                "bytes of data"
            )
        return shape, dtype

    def read(self, key: str) -> np.ndarray:
        """The member's array in native byte order (call after :meth:`header`)."""
        try:
            array = self.npz[key]
        except _ZIP_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


class _Reader:
    """Validates a model file step by step and rebuilds the estimator from it."""

    def __init__(self, archive: _Archive):
        self.archive = archive
        self.path = archive.path
        self.metadata = self._read_metadata()
        self.kind = self.metadata["estimator"]
        self._check_entries(self.metadata, METADATA_ENTRIES)
        self.map_class = self._map_class() if self.kind in (LOW_RANK, GIBBS) else None
        self.local_kind = self._local_kind() if self.kind == LOW_RANK else None
        if (self.kind == LOW_RANK and self.map_class is None
                and not getattr(self.local_kind, "EXACT_LOCAL_GPS", False)):
            raise self.error("uses the approximation 'exact', which only a neighbourhood-local "
                             "model (metadata 'local.kind' = \"neighbors\") has")
        self._check_likelihood()
        self.listed = self._check_listing()
        self.symbols = {"d": self.metadata["n_features_in"]}

    def error(self, message: str) -> InvalidModelFileError:
        return InvalidModelFileError(f"model file {self.path!r} {message}")

    # ------------------------------------------------------------------ metadata
    def _read_metadata(self) -> dict:
        if METADATA_KEY not in self.archive.members:
            raise InvalidModelFileError(
                f"not a scalegp model file: {self.path!r} has no {METADATA_KEY!r} array"
            )
        shape, dtype = self.archive.header(METADATA_KEY)
        if not ((dtype == np.uint8 and len(shape) == 1) or (dtype.kind == "U" and shape == ())):
            raise self.error(f"has a {METADATA_KEY!r} entry that is not JSON text stored as "
                             "a uint8 array")
        size = math.prod(shape) * dtype.itemsize
        if size > MAX_METADATA_BYTES:
            raise self.error(f"has {size} bytes of metadata, more than the "
                             f"{MAX_METADATA_BYTES} a model file may have")
        raw = self.archive.read(METADATA_KEY)
        try:
            text = raw.tobytes().decode("utf-8") if dtype == np.uint8 else str(raw[()])
        except UnicodeDecodeError as error:
            raise self.error(f"has unreadable metadata (not UTF-8 JSON: {error})") from None
        depth = _json_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise self.error(f"has metadata nested {depth} levels deep, more than the "
                             f"{MAX_JSON_DEPTH} a model file may have")
        try:
            metadata = json.loads(text, object_pairs_hook=self._unique_keys,
                                  parse_int=self._bounded_int)
        except json.JSONDecodeError as error:
            raise self.error(f"has unreadable metadata (not UTF-8 JSON: {error})") from None
        if not isinstance(metadata, dict):
            raise self.error("has metadata that is not a JSON object")
        if metadata.get("format") != FORMAT_NAME:
            raise InvalidModelFileError(
                f"not a scalegp model file: {self.path!r} has format "
                f"{metadata.get('format')!r}, expected {FORMAT_NAME!r}"
            )
        self.require(metadata, "schema_version")
        version = metadata["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise InvalidModelFileError(
                f"model file schema version {version!r} is not supported (this scalegp reads "
                f"version {SCHEMA_VERSION}): {self.path!r}"
            )
        self.require(metadata, "estimator")
        name = metadata["estimator"]
        if not isinstance(name, str) or name not in ESTIMATORS:
            raise self.error(f"holds an estimator of class {name!r}; expected one of "
                             f"{sorted(ESTIMATORS)}")
        return metadata

    def _unique_keys(self, pairs) -> dict:
        keys = [key for key, _ in pairs]
        for key in keys:
            if keys.count(key) > 1:
                raise self.error(f"has metadata with the key {key!r} twice in one object")
        return dict(pairs)

    def _bounded_int(self, digits: str) -> int:
        if len(digits.lstrip("-")) > MAX_JSON_INT_DIGITS:
            raise self.error(f"has metadata holding an integer of {len(digits)} digits "
                             f"(at most {MAX_JSON_INT_DIGITS})")
        return int(digits)

    def require(self, mapping: dict, key: str, prefix: str = "") -> None:
        if key not in mapping:
            raise self.error(f"is missing the metadata key {prefix + key!r}")

    def _check_entries(self, metadata: dict, entries) -> None:
        """Every entry of the table (for this estimator) is present and valid; no other key
        is in an object the table describes."""
        for entry in entries:
            if self.kind not in entry.estimators:
                continue
            parent, _, key = entry.path.rpartition(".")
            container = self.entry(parent) if parent else metadata
            if container is None:                       # a nullable parent that is null
                continue
            if key not in container:
                if entry.required:
                    self.require(container, key, parent + "." if parent else "")
                continue
            self.check_value(entry, container[key])
        described = {entry.path for entry in entries if self.kind in entry.estimators}
        for path in ("", *(e.path for e in entries if e.kind == "object" and not e.open
                           and self.kind in e.estimators)):
            container = self.entry(path) if path else metadata
            prefix = path + "." if path else ""
            for key in container or {}:
                if prefix + key not in described | {"format", "schema_version"}:
                    raise self.error(f"has the unknown metadata key {prefix + key!r} (not "
                                     f"part of schema version {SCHEMA_VERSION} for "
                                     f"{self.kind})")

    def entry(self, path: str):
        """The metadata value at a dotted path (its parents are checked objects)."""
        value = self.metadata
        for key in path.split("."):
            value = value[key] if value is not None else None
        return value

    def check_value(self, entry: _Entry, value) -> None:
        if value is None and entry.nullable:
            return
        expected, matches = _KINDS[entry.kind]
        if not matches(value):
            raise self.error(f"has metadata {entry.path!r} = {_short(value)}, expected "
                             f"{expected}{' or null' if entry.nullable else ''}")
        if entry.choices is not None and value not in entry.choices:
            raise self.error(f"has metadata {entry.path!r} = {value!r}, expected one of "
                             f"{list(entry.choices)}")
        if entry.condition is not None:
            failure = entry.condition.failure(np.asarray(value, dtype=float))
            if failure is not None:
                where = "" if entry.kind != "numbers" else f" (entry {failure[0]})"
                raise self.error(f"has metadata {entry.path!r}{where} = {failure[1]!r}, "
                                 f"expected a number {entry.condition.description}")

    # ------------------------------------------------------------------ arrays
    def _map_class(self):
        """The feature map's class; None for "exact" (the local GPs of a neighbourhood model,
        which :meth:`_local_kind` then requires)."""
        name = self.metadata["approximation"]
        if name == "exact":
            return None
        if name not in features.names():
            raise self.error(f"uses the approximation {name!r}, which this scalegp does not "
                             f"have (available: {', '.join(features.names())})")
        return features.get(name)

    def _local_kind(self):
        """The local kind's class (:data:`scalegp.local.centered.LOCAL_KINDS`) of a local model, its
        metadata checked against the kind's ``MODEL_FILE_METADATA``; None for a global one."""
        factorization = self.metadata["system"]["factorization"]
        if factorization != "local":
            if "local" in self.metadata:
                raise self.error(f"has metadata 'local', which only a model with metadata "
                                 f"'system.factorization' = \"local\" has (it is "
                                 f"{factorization!r})")
            return None
        self.require(self.metadata, "local")
        entry = self.metadata["local"]
        if not isinstance(entry, dict):
            raise self.error(f"has metadata 'local' = {_short(entry)}, expected an object")
        self.require(entry, "kind", "local.")
        kind = entry["kind"]
        if not isinstance(kind, str) or kind not in local.LOCAL_KINDS:
            raise self.error(f"has metadata 'local.kind' = {_short(kind)}, expected one of "
                             f"{sorted(local.LOCAL_KINDS)}")
        cls = local.LOCAL_KINDS[kind]
        for name, value in cls.MODEL_FILE_DEFAULTS.items():   # files written before the name
            entry.setdefault(name, value)
        self._check_entries_of(entry, "local", [("kind", "str")] + [
            (name, json_kind) for name, (json_kind, _) in cls.MODEL_FILE_METADATA.items()])
        for name, (json_kind, condition) in cls.MODEL_FILE_METADATA.items():
            if condition is not None:
                for check in LOCAL_CONDITIONS[condition]:
                    self.check_value(_Entry(f"local.{name}", json_kind, check), entry[name])
        return cls

    def _check_likelihood(self) -> None:
        """'log_marginal_likelihood' is finite, or NaN for a local kind that has none."""
        if self.kind == GIBBS:
            return
        value = self.metadata["log_marginal_likelihood"]
        kind = self.local_kind
        if kind is None or kind.has_likelihood(self.metadata["local"]):
            if not math.isfinite(value):
                raise self.error(f"has metadata 'log_marginal_likelihood' = {value!r}, "
                                 "expected a finite number")
        elif not math.isnan(value):
            raise self.error(f"has metadata 'log_marginal_likelihood' = {value!r}, expected "
                             f"NaN: a local model of kind {kind.kind!r} with this metadata has "
                             "no likelihood of its own")

    def _applicable_fields(self) -> dict:
        """name -> _ArrayField of every array this file may hold."""
        applicable = {field.name: field for field in ARRAY_FIELDS
                      if self.kind in field.estimators and not field.name.startswith(MAP_PREFIX)}
        if self.local_kind is not None:
            stored = self.local_kind.stored_arrays(self.metadata["local"])
            for name, (shape, conditions) in self.local_kind.MODEL_FILE_ARRAYS.items():
                applicable[LOCAL_PREFIX + name] = _ArrayField(
                    LOCAL_PREFIX + name, tuple(shape),
                    tuple(c for name_ in conditions for c in LOCAL_CONDITIONS[name_]),
                    present=name in stored)
        if self.map_class is not None:
            declared = {field.name: field for field in ARRAY_FIELDS}
            for field in fields(self.map_class):
                name = MAP_PREFIX + field.name
                if field.name not in MAP_SCALARS:
                    applicable[name] = declared.get(name, DEFAULT_MAP_ARRAY)
        return applicable

    def _check_listing(self) -> dict:
        """key -> _ArrayField of each listed array, after the listing, the zip members and the
        .npy headers agree (no array data is read here)."""
        listing = self.metadata["arrays"]
        applicable = self._applicable_fields()
        for key, spec in listing.items():
            if key not in applicable:
                raise self.error(f"lists the array {key!r}, which a {self.kind} of "
                                 f"{self.metadata.get('approximation', 'schema')!r} does not "
                                 f"have (schema version {SCHEMA_VERSION})")
            self._check_spec(key, spec)
        for key, field in applicable.items():
            if key.startswith(MAP_PREFIX) or field.optional:
                continue
            if field.present is not None:
                wanted = field.present
            else:
                wanted = field.when is None or self.entry(field.when[0]) in field.when_values
            if wanted and key not in listing:
                raise self.error(f"is missing the array {key!r}")
            if not wanted and key in listing and field.present is not None:
                raise self.error(f"has the array {key!r}, which a local model of kind "
                                 f"{self.metadata['local']['kind']!r} with this metadata "
                                 "does not store")
            if not wanted and key in listing:
                raise self.error(f"has the array {key!r}, which only a model with metadata "
                                 f"{field.when[0]!r} = "
                                 f"{' or '.join(json.dumps(v) for v in field.when_values)} has")
        for key in self.archive.members:
            if key != METADATA_KEY and key not in listing:
                raise self.error(f"holds the member {key + '.npy'!r}, which its metadata does "
                                 "not list (not read)")
        for key, spec in listing.items():
            if key not in self.archive.members:
                raise self.error(f"is missing the array {key!r}")
            shape, dtype = self.archive.header(key)
            if list(shape) != spec["shape"] or dtype.str != spec["dtype"]:
                raise self.error(
                    f"has array {key!r} of shape {shape} and dtype {dtype.str}, but its "
                    f"metadata says shape {tuple(spec['shape'])} and dtype {spec['dtype']}"
                )
            expected, matches = _DTYPE_KINDS[applicable[key].kind]
            if not matches(dtype):
                raise self.error(f"has array {key!r} of dtype {dtype}, expected {expected}")
        return {key: field for key, field in applicable.items() if key in listing}

    def _check_spec(self, key: str, spec) -> None:
        if not isinstance(spec, dict) or set(spec) != {"shape", "dtype"}:
            raise self.error(f"has metadata 'arrays.{key}' = {_short(spec)}, expected an "
                             "object with the keys 'shape' and 'dtype'")
        shape = spec["shape"]
        if not isinstance(shape, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise self.error(f"has metadata 'arrays.{key}.shape' = {_short(shape)}, expected a "
                             "list of integers >= 0")
        if not isinstance(spec["dtype"], str):
            raise self.error(f"has metadata 'arrays.{key}.dtype' = {_short(spec['dtype'])}, "
                             "expected a string")

    def check_shape(self, key: str) -> None:
        """The listed shape against the field's shape, binding its symbols."""
        want = self.listed[key].shape
        shape = tuple(self.metadata["arrays"][key]["shape"])
        if want is None:
            return
        for have, size in zip(shape, want):
            if isinstance(size, str) and size not in self.symbols:
                limit = SYMBOL_LIMITS.get(size)
                if limit is not None and have > limit:
                    raise self.error(f"has array {key!r} of shape {shape}: {have} exceeds "
                                     f"the limit {limit} of its dimension {size!r}")
                self.symbols[size] = have
        wanted = tuple(self.symbols.get(size, size) for size in want)
        if shape != wanted:
            raise self.error(f"has array {key!r} of shape {shape}, expected {wanted}")

    def array(self, key: str) -> np.ndarray:
        """A listed array, its values checked against the field's conditions."""
        self.check_shape(key)
        array = self.archive.read(key)
        for condition in self.listed[key].conditions:
            failure = condition.failure(array)
            if failure is not None:
                index, value = failure
                raise self.error(f"has array {key!r} whose values must be "
                                 f"{condition.description}; {condition.of} {index} is "
                                 f"{value!r}")
        return array

    def optional_array(self, key: str):
        return self.array(key) if key in self.listed else None

    # ------------------------------------------------------------------ rebuilding
    def estimator(self):
        metadata = self.metadata
        cls = ESTIMATORS[self.kind]
        kernel = self.kernel(metadata["kernel"], "kernel")
        n_dims = metadata["n_features_in"]
        try:
            kernel.check_n_dims(n_dims)
        except ValueError as error:
            raise self.error(f"has a kernel ('kernel.params.length_scale') that does not fit "
                             f"n_features_in = {n_dims}: {error}") from None
        estimator = self.unfitted_estimator(cls, kernel)
        estimator.n_features_in_ = n_dims
        for key in ("feature_names_in", "input_columns"):
            if key in metadata and len(metadata[key]) != n_dims:
                raise self.error(f"has metadata {key!r} with {len(metadata[key])} names, "
                                 f"expected n_features_in = {n_dims}")
            seen = set()
            for name in metadata.get(key, ()):
                if name in seen:
                    raise self.error(f"has metadata {key!r} naming {name!r} twice (a model's "
                                     "input columns are distinct)")
                seen.add(name)
        if "feature_names_in" in metadata:
            estimator.feature_names_in_ = np.asarray(metadata["feature_names_in"], dtype=object)
        if "input_columns" in metadata:
            self.require(metadata, "target_column")
            if metadata["target_column"] in metadata["input_columns"]:
                raise self.error(f"has metadata 'target_column' = "
                                 f"{metadata['target_column']!r}, which is also one of its "
                                 "'input_columns' (the target is not an input)")
            estimator.input_columns_ = list(metadata["input_columns"])
            estimator.target_column_ = metadata["target_column"]
        standardization = self.input_standardization(estimator)
        if cls is GibbsGPRegressor:
            estimator._set_fitted(self.gibbs_samples(kernel),
                                  y_train_mean=float(metadata["y_train_mean"]),
                                  y_train_std=float(metadata["y_train_std"]), **standardization)
            self.check_predictions(estimator)
            return estimator
        if cls is LowRankGPRegressor:
            posterior, extra = self.low_rank_posterior(kernel), {"dtype": metadata["dtype"]}
        else:
            posterior, extra = self.exact_posterior(kernel), {}
        estimator._set_fitted(posterior, optimization_result=self.optimization_result(kernel),
                              y_train_mean=float(metadata["y_train_mean"]),
                              y_train_std=float(metadata["y_train_std"]), **standardization,
                              **extra)
        self.check_predictions(estimator)
        return estimator

    def kernel(self, entry, path: str) -> kernels.Kernel:
        self._check_entries_of(entry, path, (("class", "str"), ("params", "object")))
        try:
            names = kernels.from_params(entry["class"], {}).get_params()
        except ValueError as error:
            raise self.error(f"has a kernel ({path!r}) that could not be rebuilt: "
                             f"{error}") from None
        self._check_entries_of(entry["params"], path + ".params",
                               [(name, KERNEL_PARAMS.get(name, "number")) for name in names])
        try:
            return kernels.from_params(entry["class"], entry["params"])
        except (ValueError, TypeError) as error:
            raise self.error(f"has a kernel ({path!r}) that could not be rebuilt: "
                             f"{error}") from None

    def _check_entries_of(self, mapping, path: str, keys) -> None:
        """A JSON object with exactly these (key, kind) pairs."""
        if not isinstance(mapping, dict):
            raise self.error(f"has metadata {path!r} = {_short(mapping)}, expected an object")
        for key, kind in keys:
            self.require(mapping, key, path + ".")
            self.check_value(_Entry(f"{path}.{key}", kind), mapping[key])
        unknown = set(mapping) - {key for key, _ in keys}
        if unknown:
            raise self.error(f"has the unknown metadata key {path + '.' + min(unknown)!r}")

    def unfitted_estimator(self, cls, kernel):
        """The estimator with the stored parameters, validated by its own constraints."""
        params = dict(self.metadata["params"])
        names = cls().get_params(deep=False)
        for name, value in PARAMS_ADDED.items():
            if name in names:
                params.setdefault(name, value)
        for name in names:
            self.require(params, name, "params.")
        for name in params:
            if name not in names:
                raise self.error(f"has the unknown metadata key {'params.' + name!r} (not a "
                                 f"parameter of {cls.__name__})")
        if isinstance(params["kernel"], dict):
            params["kernel"] = self.kernel(params["kernel"], "params.kernel")
        if isinstance(params.get("noise_variance_bounds"), list):
            params["noise_variance_bounds"] = tuple(params["noise_variance_bounds"])
        self._check_params_consistent(params, kernel)
        estimator = cls(**params)
        if hasattr(estimator, "_parameter_constraints"):
            try:
                estimator._validate_params()
            except (ValueError, TypeError) as error:
                raise self.error(f"has metadata 'params' that {cls.__name__} refuses: "
                                 f"{error}") from None
        return estimator

    def _check_params_consistent(self, params: dict, kernel) -> None:
        """The parameters agree with the fitted model they produced."""
        try:
            family = type(kernels.get(params["kernel"]))
        except (ValueError, TypeError) as error:
            raise self.error(f"has metadata 'params.kernel' that is not a kernel: "
                             f"{error}") from None
        if family is not type(kernel):
            raise self.error(f"has metadata 'params.kernel' of class {family.__name__}, but "
                             f"its fitted kernel ('kernel.class') is {type(kernel).__name__}")
        for name in ("approximation", "dtype"):
            if name in params and params[name] != self.metadata[name]:
                raise self.error(f"has metadata 'params.{name}' = {_short(params[name])}, "
                                 f"but the fitted model's {name!r} is "
                                 f"{self.metadata[name]!r}")
        if "local" in params:
            entry = self.metadata.get("local")
            kind = None if entry is None else entry["kind"]
            if params["local"] != kind:
                raise self.error(f"has metadata 'params.local' = {_short(params['local'])}, but "
                                 f"the fitted model's local kind ('local.kind') is {kind!r}")
            for name, key in (("local_lazy", "lazy"), ("local_reoptimize", "reoptimized")):
                if entry is not None and params.get(name) != entry.get(key, False):
                    raise self.error(f"has metadata 'params.{name}' = "
                                     f"{_short(params.get(name))}, but the fitted model's "
                                     f"'local.{key}' is {json.dumps(entry.get(key, False))}")

    def feature_map(self):
        map_class = self.map_class
        if map_class is None:                   # approximation "exact" (checked in listing)
            if self.metadata["feature_map"]:
                raise self.error("has feature-map fields, but its approximation is 'exact'")
            return None
        name = map_class.name
        scalars = self.metadata["feature_map"]
        names = {field.name for field in fields(map_class)}
        for key in scalars:
            if key not in names:
                raise self.error(f"has the feature-map field {key!r}, which {name!r} does "
                                 "not have")
        state = {}
        for field in fields(map_class):
            key = MAP_PREFIX + field.name
            if field.name in scalars and key in self.listed:
                raise self.error(f"stores the feature-map field {field.name!r} twice (as "
                                 f"metadata and as the array {key!r})")
            if key in self.listed:
                state[field.name] = self.array(key)
            elif field.name in scalars:
                state[field.name] = self.map_scalar(field, scalars[field.name])
            else:
                raise self.error(f"is missing the feature-map field {field.name!r} of {name!r}")
        try:
            feature_map = map_class(**state)
        except (ValueError, TypeError) as error:
            raise self.error(f"has a feature map ({name!r}) that could not be rebuilt: "
                             f"{error}") from None
        if feature_map.n_components < 1:
            raise self.error(f"has a feature map ({name!r}) of {feature_map.n_components} "
                             "columns (its array fields disagree)")
        if feature_map.n_dims != self.metadata["n_features_in"]:
            raise self.error(f"has a feature map for n_dims = {feature_map.n_dims} "
                             f"('feature_map.n_dims'), but n_features_in = "
                             f"{self.metadata['n_features_in']}")
        return feature_map

    def map_scalar(self, field, value):
        """A feature-map field stored as a JSON value."""
        if field.name in MAP_SCALARS:
            self.check_value(MAP_SCALARS[field.name], value)
        elif MAP_PREFIX + field.name in _DECLARED_MAP_ARRAYS:
            if value is not None or field.default is not None:
                raise self.error(f"has metadata 'feature_map.{field.name}' = {_short(value)}, "
                                 f"expected the array {MAP_PREFIX + field.name!r}"
                                 f"{' (or null)' if field.default is None else ''}")
        else:                                   # a map outside the package, undeclared
            self.check_value(_Entry(f"feature_map.{field.name}", "scalar", nullable=True),
                             value)
        return value

    def low_rank_posterior(self, kernel) -> engine.Posterior:
        system_entry = self.metadata["system"]
        feature_map = self.feature_map()
        if feature_map is None:
            return self.local_posterior(None, kernel)
        if not type(feature_map).supports(kernel):
            raise self.error(f"has a kernel ('kernel.class' = {type(kernel).__name__!r}) that "
                             f"the feature map {feature_map.name!r} does not support")
        self.symbols["m"] = feature_map.n_components
        repaired = system_entry["factorization"] == "repaired"
        if not repaired:
            self.symbols["k"] = feature_map.n_components
        signed = system_entry["signed"]
        if signed != (feature_map.signs is not None):
            raise self.error(f"has metadata 'system.signed' = {json.dumps(signed)}, but its "
                             f"feature map {'has' if not signed else 'has no'} signs")
        if FACTORIZATIONS[system_entry["factorization"]] != signed:
            raise self.error(f"has metadata 'system.factorization' = "
                             f"{system_entry['factorization']!r}, which is not that of a "
                             f"{'signed' if signed else 'unsigned'} system ('system.signed')")
        for key in self.listed:                 # every shape before any system data is read
            if not key.startswith(MAP_PREFIX):
                self.check_shape(key)
        if self.local_kind is not None:
            return self.local_posterior(feature_map, kernel)
        signs = self.optional_array("signs")
        if signs is not None and not np.array_equal(signs, feature_map.signs):
            raise self.error("has array 'signs' that differs from its feature map's signs")
        kind = systems.SYSTEMS[system_entry["factorization"]]
        arrays = {key: self.array(key) for key in _system_arrays(kind)}
        self._check_system_arrays(kind, arrays, signs)
        system = kind.from_arrays(arrays, float(self.metadata["noise_variance"]),
                                  float(system_entry["jitter"]), signs)
        return engine.Posterior(feature_map, kernel, system,
                            float(self.metadata["log_marginal_likelihood"]),
                            system_entry["n_samples"])

    def local_posterior(self, feature_map, kernel):
        """The local model, rebuilt by its kind from its validated arrays."""
        for key in self.listed:                 # every shape before any array data is read
            if not key.startswith(MAP_PREFIX):
                self.check_shape(key)
        entry = self.metadata["local"]
        if feature_map is None and self.metadata["system"]["signed"]:
            raise self.error("has metadata 'system.signed' = true, but exact local GPs have "
                             "no signs")
        arrays = {key[len(LOCAL_PREFIX):]: self.array(key) for key in self.listed
                  if key.startswith(LOCAL_PREFIX)}
        try:
            return self.local_kind.from_model_file(
                feature_map, kernel, float(self.metadata["noise_variance"]),
                float(self.metadata["log_marginal_likelihood"]),
                self.metadata["system"]["n_samples"], entry, arrays, self.metadata["dtype"],
                map_builder=lambda X, y: self.unfitted_estimator(
                    ESTIMATORS[self.kind], kernel)._stored_centre_map_builder(X, y))
        except ValueError as error:
            raise self.error(f"has a local model ({entry['kind']!r}) that could not be "
                             f"rebuilt: {error}") from None

    def _check_system_arrays(self, kind, arrays: dict, signs) -> None:
        """What the schema's per-array conditions cannot say: the inertia of an eigen system,
        and the sizes and order of a repaired system's spectrum."""
        if kind is systems.EigenSystem:
            n_negative = int(np.sum(arrays["eigenvalues"] < 0))
            expected = int(np.sum(signs < 0))
            if n_negative != expected:
                raise self.error(
                    f"has array 'eigenvalues' with {n_negative} negative values, "
                    f"but {expected} are expected from its signs: the stored system is not "
                    "that of a positive definite covariance"
                )
        if kind is systems.RepairedSystem:
            # k = r <= m repaired features, whose spectrum, ascending, holds exactly r positive
            # eigenvalues among at most m
            m, k, size = self.symbols["m"], self.symbols["k"], self.symbols["spectrum"]
            if k > m or size > m:
                raise self.error(f"has a repaired system of {k} features and a spectrum of "
                                 f"{size} eigenvalues, but its feature map has only {m}")
            spectrum = arrays[POSITIVE_PART_PREFIX + "eigenvalues"]
            if np.any(np.diff(spectrum) < 0):
                raise self.error(f"has array {POSITIVE_PART_PREFIX + 'eigenvalues'!r} that is "
                                 "not in ascending order (as the eigen-decomposition writes it)")
            if int(np.sum(spectrum > 0)) != k:
                raise self.error(
                    f"has array {POSITIVE_PART_PREFIX + 'eigenvalues'!r} with "
                    f"{int(np.sum(spectrum > 0))} positive values, but its repaired system has "
                    f"{k} features (one per positive eigenvalue)")

    def gibbs_samples(self, kernel) -> gibbs.GibbsSamples:
        """The draws of a Gibbs model, checked against the grid, the map and the chain."""
        entry = self.metadata["gibbs"]
        feature_map = self.feature_map()
        if not type(feature_map).supports(kernel) or feature_map.signs is not None:
            raise self.error(f"has a feature map ({feature_map.name!r}) that a Gibbs model "
                             f"cannot use with the kernel {type(kernel).__name__!r} (it must "
                             "support it and be unsigned)")
        if kernel.anisotropic:
            raise self.error("has an anisotropic kernel ('kernel.params.length_scale'), but a "
                             "Gibbs model has one length scale")
        self.symbols["m"] = feature_map.n_components
        self.symbols["t"] = entry["n_grid"]
        for key in self.listed:                 # every shape before any data is read
            if not key.startswith(MAP_PREFIX):
                self.check_shape(key)
        n_draws = self.symbols["S"]
        n_iter, burn_in, thin = entry["n_iter"], entry["burn_in"], entry["thin"]
        if burn_in >= n_iter or n_draws != len(range(burn_in, n_iter, thin)):
            raise self.error(f"has {n_draws} draws, but metadata 'gibbs' says n_iter = "
                             f"{n_iter}, burn_in = {burn_in}, thin = {thin} (which keep "
                             f"{len(range(burn_in, n_iter, thin))})")
        diagonal = entry["diag_correction"]
        if (entry["cost_model"] == "statistics") == diagonal:
            raise self.error(f"has metadata 'gibbs.cost_model' = {entry['cost_model']!r}, "
                             f"which is not that of a chain with diag_correction = "
                             f"{json.dumps(diagonal)}")
        try:
            grid = gibbs.check_theta1_grid(self.array(GIBBS_PREFIX + "theta1_grid"))
        except ValueError as error:
            raise self.error(f"has array 'gibbs.theta1_grid' that is not a grid: "
                             f"{error}") from None
        index = self.array(GIBBS_PREFIX + "theta1_index").astype(np.int64)
        if np.any(index >= grid.size):
            raise self.error(f"has array 'gibbs.theta1_index' with entry {int(index.max())}, "
                             f"past the {grid.size} atoms of its grid")
        return gibbs.GibbsSamples(
            feature_map, kernel, grid, self.array(GIBBS_PREFIX + "tau"),
            self.array(GIBBS_PREFIX + "theta2"), index, self.array(GIBBS_PREFIX + "weights"),
            diagonal, entry["cost_model"], entry["collapsed"], n_iter, burn_in, thin,
            entry["n_floored"])

    def exact_posterior(self, kernel) -> exact.ExactPosterior:
        for key in self.listed:                 # every shape before any data is read
            self.check_shape(key)
        return exact.ExactPosterior(
            kernel, float(self.metadata["noise_variance"]), self.array("X_train"),
            self.array("cholesky_factor"), self.array("alpha"),
            float(self.metadata["log_marginal_likelihood"]),
            float(self.metadata["system"]["jitter"]))

    def input_standardization(self, estimator) -> dict:
        """X_train_mean / X_train_scale keyword arguments of ``_set_fitted`` (none when the
        file has none: the estimator's defaults, inputs not standardized)."""
        stored = {name: self.optional_array(name) for name in INPUT_STANDARDIZATION}
        if all(value is None for value in stored.values()):
            return {}
        if not getattr(estimator, "normalize_X", True):
            identity = {"X_train_mean": 0.0, "X_train_scale": 1.0}
            for name, value in stored.items():
                if value is not None and np.any(value != identity[name]):
                    raise self.error(f"has array {name!r} that is not all {identity[name]}, "
                                     "but metadata 'params.normalize_X' is false")
        return {name: value for name, value in stored.items() if value is not None}

    def optimization_result(self, kernel):
        entry = self.metadata["optimization"]
        if entry is None:
            return None
        expected = kernel.n_params + 1
        if len(entry["theta"]) != expected:
            raise self.error(f"has metadata 'optimization.theta' of length "
                             f"{len(entry['theta'])}, expected {expected} (the kernel's "
                             "parameters and the noise variance)")
        return OptimizationResult(
            theta=np.asarray(entry["theta"], dtype=float),
            log_marginal_likelihood=float(entry["log_marginal_likelihood"]),
            n_evaluations=entry["n_evaluations"], n_starts=entry["n_starts"],
            converged=entry["converged"], message=entry["message"])

    def check_predictions(self, estimator) -> None:
        """The rebuilt posterior predicts a finite mean and variance at the (standardized)
        origin, where every map is defined."""
        origin = np.zeros((1, self.metadata["n_features_in"]))
        try:
            if isinstance(estimator, GibbsGPRegressor):
                mean, var = estimator.samples_.predict(origin, return_var=True)
            else:
                mean, var = estimator.posterior_.predict(estimator._prediction_input(origin),
                                                         return_var=True)
        except (ValueError, TypeError, IndexError, AttributeError, ArithmeticError) as error:
            raise self.error(f"holds a model that cannot predict: {error}") from None
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
            raise self.error(f"holds a model whose prediction at the origin is not finite "
                             f"(mean {mean[0]!r}, variance {var[0]!r})")


def _json_depth(text: str) -> int:
    """The deepest nesting of [ and { outside JSON strings (computed without recursion)."""
    outside = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    codes = np.frombuffer(outside, dtype=np.uint8)
    steps = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(codes, (ord("]"), ord("}"))))
    return int(np.max(np.cumsum(steps), initial=0))


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _short(value, limit: int = 60) -> str:
    """repr of a metadata value, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
