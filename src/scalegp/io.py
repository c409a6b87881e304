"""Model files: a fitted estimator as one ``.npz``, without pickle.

The file holds the fitted state as plain numeric arrays (written by ``numpy.savez``, read by
``numpy.load(..., allow_pickle=False)``) and one array ``"metadata"``: UTF-8 JSON stored as
uint8 bytes, with the format name, the schema version, the scalegp version, the estimator
class and parameters, the fitted kernel, noise variance and normalization constants, the
feature map's scalar fields, and the shape and dtype of every array. A loaded model gives
bit-identical predictions: every array and float is stored exactly (floats as shortest
round-trip JSON), and the estimator is rebuilt around the same posterior.

Writes go to a temporary file in the target's folder, moved over the target by
``os.replace``, so a failed or interrupted save leaves an existing file untouched.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import uuid
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import fields

import numpy as np
from sklearn.utils.validation import check_is_fitted

from . import exact, features, gp, kernels, linalg
from .errors import InvalidModelFileError
from .estimator import ExactGPRegressor, LowRankGPRegressor
from .optimize import OptimizationResult

__all__ = ["save", "load", "FORMAT_NAME", "SCHEMA_VERSION"]

FORMAT_NAME = "scalegp-model"
SCHEMA_VERSION = 1
METADATA_KEY = "metadata"
#: Prefix of the arrays that hold the feature map's array fields.
MAP_PREFIX = "feature_map."

ESTIMATORS = {cls.__name__: cls for cls in (LowRankGPRegressor, ExactGPRegressor)}
REQUIRED_KEYS = ("scalegp_version", "estimator", "params", "n_features_in", "kernel",
                 "noise_variance", "log_marginal_likelihood", "y_train_mean", "y_train_std",
                 "optimization", "system", "arrays")
REQUIRED_LOW_RANK_KEYS = ("dtype", "approximation", "feature_map")
REQUIRED_SYSTEM_KEYS = {"LowRankGPRegressor": ("jitter", "n_samples", "factorization", "signed"),
                        "ExactGPRegressor": ("jitter",)}
OPTIMIZATION_KEYS = ("theta", "log_marginal_likelihood", "n_evaluations", "n_starts",
                     "converged", "message")


# ============================================================================ save
def save(model, path) -> None:
    """Write a fitted estimator to ``path`` (one ``.npz`` file, no pickle).

    Parameters
    ----------
    model : LowRankGPRegressor or ExactGPRegressor
        A fitted estimator. The training data are not stored, so a loaded model predicts
        but cannot evaluate ``log_marginal_likelihood(theta)``. A ``random_state`` that is
        not an int or None is stored as None.
    path : str or os.PathLike
        The file to write, exactly as named (no suffix is added). An existing file is
        replaced only once the new one is complete.
    """
    arrays, metadata = _encode(model)
    text = json.dumps(metadata, indent=1, sort_keys=True)
    arrays[METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    _write_atomically(os.fspath(path), arrays)


def _write_atomically(path: str, arrays: dict) -> None:
    directory, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "xb") as file:
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


def _encode(model) -> tuple[dict, dict]:
    if not isinstance(model, tuple(ESTIMATORS.values())):
        raise TypeError(
            "model must be a fitted LowRankGPRegressor or ExactGPRegressor, "
            f"got {type(model).__name__}"
        )
    check_is_fitted(model)
    from . import __version__

    posterior = model.posterior_
    metadata = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "scalegp_version": __version__,
        "estimator": type(model).__name__,
        "params": _encode_params(model),
        "n_features_in": int(model.n_features_in_),
        "kernel": _encode_kernel(model.kernel_),
        "noise_variance": float(model.noise_variance_),
        "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
        "y_train_mean": float(model.y_train_mean_),
        "y_train_std": float(model.y_train_std_),
        "optimization": _encode_optimization(model.optimization_result_),
    }
    if hasattr(model, "feature_names_in_"):
        metadata["feature_names_in"] = [str(name) for name in model.feature_names_in_]
    # column names of the table a command-line model was trained on (optional)
    if hasattr(model, "input_columns_"):
        metadata["input_columns"] = [str(name) for name in model.input_columns_]
        metadata["target_column"] = str(model.target_column_)
    if isinstance(model, LowRankGPRegressor):
        system = posterior.system
        arrays = {"beta": system.beta}
        if system.signs is not None:
            arrays["signs"] = system.signs
        if system.cholesky_factor is not None:
            arrays["cholesky_factor"] = system.cholesky_factor
        else:
            arrays["eigenvalues"] = system.indefinite.eigenvalues
            arrays["eigenvectors"] = system.indefinite.eigenvectors
        metadata["dtype"] = model._dtype.name
        metadata["approximation"] = model.feature_map_.name
        metadata["feature_map"] = {}
        for field, value in model.feature_map_.state().items():
            if isinstance(value, np.ndarray):
                arrays[MAP_PREFIX + field] = value
            else:
                metadata["feature_map"][field] = _to_json(value, f"feature-map field {field!r}")
        metadata["system"] = {
            "jitter": float(system.jitter), "n_samples": int(posterior.n_samples),
            "factorization": "cholesky" if system.cholesky_factor is not None else "eigen",
            "signed": system.signs is not None,
        }
    else:
        arrays = {"X_train": posterior.X_train, "cholesky_factor": posterior.cholesky_factor,
                  "alpha": posterior.alpha}
        metadata["system"] = {"jitter": float(posterior.jitter)}
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
def load(path):
    """Read a model written by :func:`save`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LowRankGPRegressor or ExactGPRegressor
        Fitted, with the original parameters and fitted attributes; its predictions are
        bit-identical to those of the saved model.

    Raises
    ------
    InvalidModelFileError
        If the file is missing, not an ``.npz``, truncated, holds object (pickled) arrays,
        is of another format or schema version, or lacks a required entry or has one of the
        wrong shape or dtype.
    """
    reader = _Reader(os.fspath(path))
    try:
        return reader.estimator()
    except InvalidModelFileError:
        raise
    except (ValueError, TypeError, KeyError) as error:
        raise InvalidModelFileError(
            f"model file {reader.path!r} could not be rebuilt: {error}"
        ) from None


class _Reader:
    """Validates a model file step by step and rebuilds the estimator from it."""

    def __init__(self, path: str):
        self.path = path
        self.arrays = self._read_arrays()
        self.metadata = self._read_metadata()
        self._check_array_specs()

    def error(self, message: str) -> InvalidModelFileError:
        return InvalidModelFileError(f"model file {self.path!r} {message}")

    # ------------------------------------------------------------------ validation
    def _read_arrays(self) -> dict:
        path = self.path
        if not os.path.isfile(path):
            raise InvalidModelFileError(f"not a scalegp model file: {path!r} does not exist")
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as file:
                starts_like_zip = file.read(4) == b"PK\x03\x04"
            if starts_like_zip:
                raise self.error("is truncated or damaged: it starts like an .npz (zip) "
                                 "archive but its zip directory is missing")
            raise InvalidModelFileError(
                f"not a scalegp model file: {path!r} is not an .npz (zip) archive"
            )
        arrays = {}
        try:
            with np.load(path, allow_pickle=False) as npz:
                for key in npz.files:
                    arrays[key] = self._read_member(npz, key)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        return arrays

    def _read_member(self, npz, key: str):
        try:
            return npz[key]
        except ValueError as error:
            if "allow_pickle" in str(error):
                raise self.error(
                    f"holds an object array {key!r} (pickled Python objects), which scalegp "
                    "neither writes nor loads"
                ) from None
            raise

    def _read_metadata(self) -> dict:
        raw = self.arrays.pop(METADATA_KEY, None)
        if raw is None:
            raise InvalidModelFileError(
                f"not a scalegp model file: {self.path!r} has no {METADATA_KEY!r} array"
            )
        if isinstance(raw, np.ndarray) and raw.dtype == np.uint8 and raw.ndim == 1:
            raw = raw.tobytes()
        elif isinstance(raw, np.ndarray) and raw.dtype.kind == "U" and raw.ndim == 0:
            raw = str(raw[()]).encode("utf-8")
        else:
            raise self.error(f"has a {METADATA_KEY!r} entry that is not JSON text stored as "
                             "a uint8 array")
        try:
            metadata = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise self.error(f"has unreadable metadata (not UTF-8 JSON: {error})") from None
        if not isinstance(metadata, dict):
            raise self.error("has metadata that is not a JSON object")
        if metadata.get("format") != FORMAT_NAME:
            raise InvalidModelFileError(
                f"not a scalegp model file: {self.path!r} has format "
                f"{metadata.get('format')!r}, expected {FORMAT_NAME!r}"
            )
        self.require(metadata, ("schema_version",))
        version = metadata["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise InvalidModelFileError(
                f"model file schema version {version!r} is not supported (this scalegp reads "
                f"version {SCHEMA_VERSION}): {self.path!r}"
            )
        self.require(metadata, REQUIRED_KEYS)
        name = metadata["estimator"]
        if name not in ESTIMATORS:
            raise self.error(f"holds an estimator of class {name!r}; expected one of "
                             f"{sorted(ESTIMATORS)}")
        if name == "LowRankGPRegressor":
            self.require(metadata, REQUIRED_LOW_RANK_KEYS)
        self.require(metadata["system"], REQUIRED_SYSTEM_KEYS[name], "system.")
        self.require(metadata["kernel"], ("class", "params"), "kernel.")
        if metadata["optimization"] is not None:
            self.require(metadata["optimization"], OPTIMIZATION_KEYS, "optimization.")
        return metadata

    def require(self, mapping, keys, prefix: str = "") -> None:
        if not isinstance(mapping, dict):
            raise self.error(f"has metadata entry {prefix.rstrip('.')!r} that is not an object")
        for key in keys:
            if key not in mapping:
                raise self.error(f"is missing the metadata key {prefix + key!r}")

    def _check_array_specs(self) -> None:
        specs = self.metadata["arrays"]
        self.require(specs, (), "arrays.")
        for key, spec in specs.items():
            self.require(spec, ("shape", "dtype"), f"arrays.{key}.")
            if key not in self.arrays:
                raise self.error(f"is missing the array {key!r}")
            array = self.arrays[key]
            if list(array.shape) != spec["shape"] or array.dtype.str != spec["dtype"]:
                raise self.error(
                    f"has array {key!r} of shape {array.shape} and dtype {array.dtype.str}, "
                    f"but its metadata says shape {tuple(spec['shape'])} and dtype "
                    f"{spec['dtype']}"
                )

    def array(self, key: str, shape=None) -> np.ndarray:
        """A listed array, with the shape the model needs (None entries are free)."""
        if key not in self.metadata["arrays"]:
            raise self.error(f"is missing the array {key!r}")
        array = self.arrays[key]
        if shape is not None and (array.ndim != len(shape) or any(
                want is not None and have != want for have, want in zip(array.shape, shape))):
            wanted = tuple("any" if want is None else want for want in shape)
            raise self.error(f"has array {key!r} of shape {array.shape}, expected {wanted}")
        return array

    # ------------------------------------------------------------------ rebuilding
    def estimator(self):
        metadata = self.metadata
        cls = ESTIMATORS[metadata["estimator"]]
        params = dict(metadata["params"])
        if isinstance(params.get("kernel"), dict):
            params["kernel"] = self.kernel(params["kernel"])
        if isinstance(params.get("noise_variance_bounds"), list):
            params["noise_variance_bounds"] = tuple(params["noise_variance_bounds"])
        estimator = cls(**params)
        estimator.n_features_in_ = int(metadata["n_features_in"])
        if "feature_names_in" in metadata:
            estimator.feature_names_in_ = np.asarray(metadata["feature_names_in"], dtype=object)
        if "input_columns" in metadata:
            estimator.input_columns_ = list(metadata["input_columns"])
            estimator.target_column_ = metadata.get("target_column")
        kernel = self.kernel(metadata["kernel"])
        if cls is LowRankGPRegressor:
            posterior, extra = self.low_rank_posterior(kernel), {"dtype": metadata["dtype"]}
        else:
            posterior, extra = self.exact_posterior(kernel), {}
        estimator._set_fitted(posterior, optimization_result=self.optimization_result(),
                              y_train_mean=float(metadata["y_train_mean"]),
                              y_train_std=float(metadata["y_train_std"]), **extra)
        return estimator

    def kernel(self, entry) -> kernels.Kernel:
        self.require(entry, ("class", "params"), "kernel.")
        return kernels.from_params(entry["class"], entry["params"])

    def feature_map(self):
        name = self.metadata["approximation"]
        if name not in features.names():
            raise self.error(f"uses the approximation {name!r}, which this scalegp does not "
                             f"have (available: {', '.join(features.names())})")
        map_class = features.get(name)
        scalars = self.metadata["feature_map"]
        self.require(scalars, (), "feature_map.")
        state = {}
        for field in fields(map_class):
            if field.name in scalars:
                state[field.name] = scalars[field.name]
            elif MAP_PREFIX + field.name in self.metadata["arrays"]:
                state[field.name] = self.array(MAP_PREFIX + field.name)
            else:
                raise self.error(f"is missing the feature-map field {field.name!r} of {name!r}")
        return map_class(**state)

    def low_rank_posterior(self, kernel) -> gp.Posterior:
        system_entry = self.metadata["system"]
        feature_map = self.feature_map()
        m = feature_map.n_components
        signs = self.array("signs", (m,)) if system_entry["signed"] else None
        if system_entry["factorization"] == "cholesky":
            cholesky_factor, indefinite = self.array("cholesky_factor", (m, m)), None
        elif system_entry["factorization"] == "eigen":
            cholesky_factor = None
            indefinite = linalg.SymmetricFactorization(self.array("eigenvalues", (m,)),
                                                       self.array("eigenvectors", (m, m)))
        else:
            raise self.error("has metadata 'system.factorization' "
                             f"{system_entry['factorization']!r}, expected 'cholesky' or 'eigen'")
        system = gp.FactorizedSystem(float(self.metadata["noise_variance"]), signs,
                                     cholesky_factor, indefinite, self.array("beta", (m,)),
                                     float(system_entry["jitter"]))
        return gp.Posterior(feature_map, kernel, system,
                            float(self.metadata["log_marginal_likelihood"]),
                            int(system_entry["n_samples"]))

    def exact_posterior(self, kernel) -> exact.ExactPosterior:
        X_train = self.array("X_train", (None, self.metadata["n_features_in"]))
        n = X_train.shape[0]
        return exact.ExactPosterior(
            kernel, float(self.metadata["noise_variance"]), X_train,
            self.array("cholesky_factor", (n, n)), self.array("alpha", (n,)),
            float(self.metadata["log_marginal_likelihood"]),
            float(self.metadata["system"]["jitter"]))

    def optimization_result(self):
        entry = self.metadata["optimization"]
        if entry is None:
            return None
        return OptimizationResult(
            theta=np.asarray(entry["theta"], dtype=float),
            log_marginal_likelihood=float(entry["log_marginal_likelihood"]),
            n_evaluations=int(entry["n_evaluations"]), n_starts=int(entry["n_starts"]),
            converged=bool(entry["converged"]), message=str(entry["message"]))
