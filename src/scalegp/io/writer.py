"""Writing a model file: :func:`save` encodes the fitted estimator as plain arrays and one JSON
metadata array, and writes them atomically (:func:`scalegp._output.write_atomically`).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping

import numpy as np
from sklearn.utils.validation import check_is_fitted

from .. import kernels
from .._output import MODEL_SUFFIXES, write_atomically
from .._version import __version__
from ..estimators import configuration
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.gp_regressor import GPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..inference import gibbs
from .schema import (AVERAGE_PREFIX, CALIBRATION_PREFIX, REPLICATES_PREFIX, ESTIMATORS, FORMAT_NAME, GIBBS_PREFIX, INPUT_STANDARDIZATION,
                     LOCAL_PREFIX, MAP_PREFIX, METADATA_KEY, SCHEMA_VERSION, TableColumns)


# ============================================================================ save
def save(model, path, *, table_columns: TableColumns | None = None) -> None:
    """Write a fitted estimator to ``path`` (one ``.npz`` file, no pickle).

    Parameters
    ----------
    model : GPRegressor, LowRankGPRegressor, ExactGPRegressor, GibbsGPRegressor or VecchiaGPRegressor
        A fitted estimator (a GPRegressor is stored as its ``estimator_`` with its own
        parameters and ``selection_`` in the metadata entry ``front_door``). The training data are not stored (except what the posterior
        predicts from: the exact GP's and the Vecchia model's training inputs, and the
        Vecchia model's standardized targets), so a loaded model predicts but cannot
        evaluate ``log_marginal_likelihood(theta)``. A ``random_state`` that is
        not an int or None is stored as None.
    path : str or os.PathLike
        The file to write, exactly as named: it must end in ``.npz`` (no suffix is added).
        An existing regular file is replaced only once the new one is complete, keeping its
        permission bits; see :mod:`scalegp._output` for what is refused.
    table_columns : TableColumns, optional
        The columns of the table the model was fitted on (``scalegp fit`` passes them when
        its table has a header): stored so that :func:`~scalegp.io.reader.load_table_columns`
        finds the inputs of a new table by name.

    Raises
    ------
    UnsafeOutputError
        ``path`` is a folder, device, FIFO, socket, symbolic link or read-only file, its
        folder is missing or not writable, or it does not end in ``.npz``.
    """
    front_door = None
    if isinstance(model, GPRegressor):            # its fitted model, and how it was chosen
        check_is_fitted(model, "estimator_")
        selection = model.selection_
        front_door = {"params": _encode_params(model),
                      "auto_selection": None if selection is None else _to_json(
                          selection.to_json(), "selection_")}
        calibration = getattr(model, "variance_calibration_", None)
        grouped = getattr(model, "replicates_", None)
        average = getattr(model, "hyperparameter_average_", None)
        model = model.estimator_
    arrays, metadata = _encode(model)
    if front_door is not None and calibration is not None:
        state = calibration.to_state()
        front_door["variance_calibration"] = {
            "kernel": _encode_kernel(state["kernel"]),
            **{key: _to_json(state[key], "variance_calibration_")
               for key in ("noise_variance", "log_marginal_likelihood", "cv_nlpd")}}
        for name in ("X", "t"):
            array = np.asarray(state[name], dtype=np.float64)
            arrays[CALIBRATION_PREFIX + name] = array
            metadata["arrays"][CALIBRATION_PREFIX + name] = {"shape": list(array.shape),
                                                             "dtype": array.dtype.str}
    components = () if front_door is None else (
        (grouped, "replicates", REPLICATES_PREFIX),
        (average, "hyperparameter_average", AVERAGE_PREFIX))
    for component, key, prefix in components:
        if component is None:
            continue
        front_door[key] = {name: _to_json(getattr(component, name), key + "_")
                           for name in component.STATE_VALUES}
        for name in component.STATE_ARRAYS:
            array = np.asarray(getattr(component, name), dtype=np.float64)
            arrays[prefix + name] = array
            metadata["arrays"][prefix + name] = {"shape": list(array.shape),
                                                 "dtype": array.dtype.str}
    if front_door is not None:
        metadata["front_door"] = front_door
    if table_columns is not None:
        inputs = [str(name) for name in table_columns.inputs]
        if len(inputs) != metadata["n_features_in"] or len(set(inputs)) != len(inputs):
            raise ValueError(f"table_columns.inputs must name the model's "
                             f"{metadata['n_features_in']} inputs once each, got {inputs}")
        if str(table_columns.target) in inputs:
            raise ValueError(f"table_columns.target {table_columns.target!r} is one of the inputs")
        metadata["input_columns"] = inputs
        metadata["target_column"] = str(table_columns.target)
    text = json.dumps(metadata, indent=1, sort_keys=True)
    arrays[METADATA_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    write_atomically(path, lambda file: np.savez(file, **arrays), suffixes=MODEL_SUFFIXES)


def _encode(model) -> tuple[dict, dict]:
    if not isinstance(model, tuple(ESTIMATORS.values())):
        raise TypeError(
            "model must be a fitted LowRankGPRegressor, ExactGPRegressor, GibbsGPRegressor or "
            f"VecchiaGPRegressor, got {type(model).__name__}"
        )
    check_is_fitted(model)
    arrays: dict = {}
    if isinstance(model, GibbsGPRegressor):
        samples = model.samples_
        metadata = _common_metadata(model, samples.kernel)
        _write_section(samples.to_state(), "gibbs", GIBBS_PREFIX, arrays, metadata)
        _encode_feature_map(samples.feature_map, arrays, metadata)
        return _finish(model, arrays, metadata)
    posterior = model.posterior_
    metadata = {
        **_common_metadata(model, model.kernel_),
        "noise_variance": float(model.noise_variance_),
        "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
        "optimization": _encode_optimization(model.optimization_result_),
    }
    if isinstance(model, LowRankGPRegressor) and model.local_model_ is not None:
        _write_section(posterior.to_state(), "local", LOCAL_PREFIX, arrays, metadata)
        metadata["local"] = {"kind": posterior.kind, **metadata["local"]}
        metadata["system"] = posterior.system_state()
    else:
        _write_section(posterior.to_state(), "system", "", arrays, metadata)
    if isinstance(model, LowRankGPRegressor):
        metadata["dtype"] = model.dtype_.name
        _encode_feature_map(model.feature_map_, arrays, metadata)
    return _finish(model, arrays, metadata)


def _write_section(state: dict, path: str, prefix: str, arrays: dict, metadata: dict) -> None:
    """A component's section: its arrays as ``prefix + name``, its JSON values under the
    metadata ``path`` (what its ``to_state`` returns, as its ``STORED`` declares it)."""
    section = metadata.setdefault(path, {})
    for name, value in state.items():
        if isinstance(value, np.ndarray):
            arrays[prefix + name] = value
        else:
            section[name] = _to_json(value, f"{path.replace('_', '-')} field {name!r}")


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
    return metadata


def _encode_feature_map(feature_map, arrays: dict, metadata: dict) -> None:
    """The map's name and section; a neighbourhood model of exact local GPs has no map:
    approximation "exact", no fields."""
    metadata["approximation"] = "exact" if feature_map is None else feature_map.name
    state = {} if feature_map is None else feature_map.to_state()
    _write_section(state, "feature_map", MAP_PREFIX, arrays, metadata)


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
        elif name in ("approximation", "local"):
            value = configuration.to_json(value)
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
