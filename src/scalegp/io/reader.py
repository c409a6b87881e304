"""Reading a model file: :func:`load` checks the archive, the metadata and every array against
the schema (:mod:`scalegp.io.schema`), then rebuilds the estimator around the same posterior
and checks that it predicts a finite value.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields

import numpy as np

from .. import kernels
from .._validation import check_positive_scalar
from ..errors import InvalidModelFileError
from ..estimators import configuration, restore
from ..estimators.auto_selection import Selection
from ..estimators.hyperparameter_average import HyperparameterAverage
from ..estimators.replicates import Replicates
from ..estimators.variance_calibration import VarianceCalibration
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.gp_regressor import GPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..inference.optimize import OptimizationResult
from ..stored import Array, Value, alternatives, declarations
from .checks import CheckedFile
from .safety import _Archive, _short
from .schema import (AVERAGE_PREFIX, CALIBRATION_PREFIX, REPLICATES_PREFIX, ESTIMATORS, FRONT_DOOR_PARAMS_ADDED, TableColumns, INPUT_STANDARDIZATION, KERNEL_PARAMS, LOCAL_PREFIX, MAP_PREFIX,
                     PARAMS_ADDED, SECTIONS)


def load(path):
    """Read a model written by :func:`save`, trusting nothing in the file.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    LowRankGPRegressor, ExactGPRegressor, GibbsGPRegressor or VecchiaGPRegressor
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
    Every value is checked against its declaration (the estimator's entries of
    :mod:`scalegp.io.schema`, each component's ``STORED``), then the rebuilt model predicts at
    one input as a last consistency check.
    """
    return _read(path, lambda reader: reader.front_door(reader.estimator()))


def load_table_columns(path) -> TableColumns | None:
    """The table columns a command-line model was trained on, or None.

    ``scalegp fit`` stores them (:func:`~scalegp.io.writer.save`'s ``table_columns``) when
    its table has a header, so that ``scalegp predict`` finds the inputs by name. The whole
    file is checked as :func:`load` checks it; the names are distinct, one per input, and the
    target is not among them.
    """
    return _read(path, lambda reader: reader.table_columns())


def _read(path, action):
    """``action(reader)`` on the checked archive at ``path``; every failure an
    :class:`~scalegp.errors.InvalidModelFileError` naming the file."""
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
            return action(_Reader(archive))
        except InvalidModelFileError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, AttributeError,
                ArithmeticError) as error:
            # a safety net: every check names its entry, so reaching it is a gap in them
            raise archive.error(f"could not be rebuilt (an unexpected {type(error).__name__}: "
                                f"{error})") from None


class _Reader(CheckedFile):
    """Validates a model file step by step and rebuilds the estimator from it."""

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
        self.table_columns()
        if "feature_names_in" in metadata:
            estimator.feature_names_in_ = np.asarray(metadata["feature_names_in"], dtype=object)
        standardization = self.input_standardization(estimator)
        if cls is GibbsGPRegressor:
            feature_map = self.feature_map()
            self.symbols["m"] = feature_map.n_components
            restore.set_fitted(estimator, self.component(feature_map=feature_map, kernel=kernel),
                               y_train_mean=float(metadata["y_train_mean"]),
                               y_train_std=float(metadata["y_train_std"]), **standardization)
            self.check_predictions(estimator)
            return estimator
        likelihood = {"noise_variance": float(metadata["noise_variance"]),
                      "log_marginal_likelihood": float(metadata["log_marginal_likelihood"])}
        if cls is LowRankGPRegressor:
            posterior = self.low_rank_posterior(kernel, likelihood)
            extra = {"dtype": metadata["dtype"]}
        else:
            posterior, extra = self.component(kernel=kernel, **likelihood), {}
        restore.set_fitted(estimator, posterior,
                           optimization_result=self.optimization_result(kernel),
                           y_train_mean=float(metadata["y_train_mean"]),
                           y_train_std=float(metadata["y_train_std"]), **standardization, **extra)
        self.check_predictions(estimator)
        return estimator

    def front_door(self, estimator):
        """A GPRegressor around ``estimator`` when the file holds one (metadata
        ``front_door``: its parameters and ``selection_``), else ``estimator``."""
        entry = self.metadata.get("front_door")
        if entry is None:
            return estimator
        keys = (("params", "object"),) + (
            () if entry.get("auto_selection", 0) is None else (("auto_selection", "object"),)
        ) + ((("variance_calibration", "object"),) if "variance_calibration" in entry else ()
             ) + tuple((key, "object") for key in ("replicates", "hyperparameter_average")
                       if key in entry)
        if "auto_selection" not in entry:
            self.require(entry, "auto_selection", "front_door.")
        self._check_entries_of({k: v for k, v in entry.items()
                                if not (k == "auto_selection" and v is None)}, "front_door",
                               keys)
        # files written before the parameter existed were never calibrated
        params = {**FRONT_DOOR_PARAMS_ADDED, **entry["params"]}
        names = GPRegressor().get_params(deep=False)
        unknown = sorted(set(params) - set(names))
        if unknown or set(names) - set(params):
            raise self.error(f"has metadata 'front_door.params' with the keys {sorted(params)}"
                             f", expected those of GPRegressor: {sorted(names)}")
        try:
            for name in ("approximation", "local"):
                params[name] = configuration.from_json(params[name])
            if isinstance(params["kernel"], dict):
                params["kernel"] = self.kernel(params["kernel"], "front_door.params.kernel")
            model = GPRegressor(**params)
            restore.validate_params(model)
            selection = entry.get("auto_selection")
            model.selection_ = None if selection is None else Selection.from_json(selection)
        except (ValueError, TypeError, KeyError) as error:
            raise self.error(f"has metadata 'front_door' that GPRegressor refuses: "
                             f"{error}") from None
        model.estimator_ = estimator
        model.variance_calibration_ = self.variance_calibration(entry.get("variance_calibration"))
        model.replicates_ = _stored_component(
            self, entry.get("replicates"), "replicates", REPLICATES_PREFIX, Replicates,
            "a grouping of repeated inputs",
            lambda arrays, values: Replicates.from_state(arrays, values, estimator))
        model.hyperparameter_average_ = _stored_component(
            self, entry.get("hyperparameter_average"), "hyperparameter_average", AVERAGE_PREFIX,
            HyperparameterAverage, "hyperparameter draws",
            lambda arrays, values: HyperparameterAverage.from_state(estimator, arrays, values))
        model.n_features_in_ = estimator.n_features_in_
        if hasattr(estimator, "feature_names_in_"):
            model.feature_names_in_ = estimator.feature_names_in_
        return model

    def variance_calibration(self, entry):
        """A GPRegressor's variance calibration (metadata ``front_door.variance_calibration``
        and the arrays ``variance_calibration.X`` and ``.t``), conditioned again on its rows;
        None where the file has none (and then none of its arrays)."""
        X = self.optional_array(CALIBRATION_PREFIX + "X")
        t = self.optional_array(CALIBRATION_PREFIX + "t")
        if entry is None:
            if X is not None or t is not None:
                raise self.error(f"has the arrays {CALIBRATION_PREFIX}X and t without "
                                 "metadata 'front_door.variance_calibration'")
            return None
        path = "front_door.variance_calibration"
        self._check_entries_of(entry, path, (("kernel", "object"), ("noise_variance", "number"),
                                             ("log_marginal_likelihood", "number"),
                                             ("cv_nlpd", "numbers")))
        if X is None or t is None:
            raise self.error(f"has metadata {path!r} but not both arrays "
                             f"{CALIBRATION_PREFIX}X and {CALIBRATION_PREFIX}t")
        if len(entry["cv_nlpd"]) != 3:
            raise self.error(f"has metadata '{path}.cv_nlpd' with {len(entry['cv_nlpd'])} "
                             "values, expected 3 (without, with, as a Gaussian)")
        kernel = self.kernel(entry["kernel"], path + ".kernel")
        try:
            return VarianceCalibration.from_state(
                kernel, check_positive_scalar(entry["noise_variance"], path + ".noise_variance"),
                entry["log_marginal_likelihood"], entry["cv_nlpd"], X, t)
        except ValueError as error:
            raise self.error(f"has a variance calibration that cannot be rebuilt: {error}") \
                from None

    def table_columns(self) -> TableColumns | None:
        metadata = self.metadata
        if "input_columns" not in metadata:
            return None
        self.require(metadata, "target_column")
        if metadata["target_column"] in metadata["input_columns"]:
            raise self.error(f"has metadata 'target_column' = "
                             f"{metadata['target_column']!r}, which is also one of its "
                             "'input_columns' (the target is not an input)")
        return TableColumns(tuple(metadata["input_columns"]), metadata["target_column"])

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

    def unfitted_estimator(self, cls, kernel):
        """The estimator with the stored parameters, validated by its own constraints."""
        params = dict(self.metadata["params"])
        names = cls().get_params(deep=False)
        legacy = any(name in configuration.FLAT_PARAMETERS for name in params)
        for name, value in PARAMS_ADDED.items():
            if name in names or (legacy and name in configuration.FLAT_PARAMETERS
                                 and cls.__name__ == "LowRankGPRegressor"):
                params.setdefault(name, value)
        try:
            params = configuration.from_flat_parameters(params)
            for name in ("approximation", "local"):
                if name in params:
                    params[name] = configuration.from_json(params[name])
        except (ValueError, TypeError) as error:
            raise self.error(f"has metadata 'params' that {cls.__name__} refuses: "
                             f"{error}") from None
        for name in names:
            self.require(params, name, "params.")
        for name in params:
            if name not in names:
                raise self.error(f"has the unknown metadata key {'params.' + name!r} (not a "
                                 f"parameter of {cls.__name__})")
        if isinstance(params["kernel"], dict):
            params["kernel"] = self.kernel(params["kernel"], "params.kernel")
        for name in ("noise_variance_bounds", "learning_schedule"):
            if isinstance(params.get(name), list):      # JSON has lists, not tuples
                params[name] = tuple(params[name])
        self._check_params_consistent(params, kernel)
        estimator = cls(**params)
        if hasattr(estimator, "_parameter_constraints"):
            try:
                restore.validate_params(estimator)
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
        if "approximation" in params:
            try:
                spec = configuration.resolve(params["approximation"], params.get("local"))
            except (ValueError, TypeError, NotImplementedError) as error:
                raise self.error(f"has metadata 'params' that do not agree: {error}") from None
            if spec.approximation != self.metadata["approximation"]:
                raise self.error(f"has metadata 'params.approximation' = "
                                 f"{_short(params['approximation'])}, but the fitted model's "
                                 f"'approximation' is {self.metadata['approximation']!r}")
        for name in ("dtype",):
            if name in params and params[name] != self.metadata[name]:
                raise self.error(f"has metadata 'params.{name}' = {_short(params[name])}, "
                                 f"but the fitted model's {name!r} is "
                                 f"{self.metadata[name]!r}")
        if "local" in params:
            entry = self.metadata.get("local")
            kind = None if entry is None else entry["kind"]
            local = configuration.as_local(params["local"])
            if (None if local is None else local.kind) != kind:
                raise self.error(f"has metadata 'params.local' = {_short(params['local'])}, but "
                                 f"the fitted model's local kind ('local.kind') is {kind!r}")
            for name, key in restore.LOCAL_SECTION_PARAMS.items():
                value = getattr(local, name, False)
                if entry is not None and value != entry.get(key, False):
                    raise self.error(f"has metadata 'params.local.{name}' = "
                                     f"{_short(value)}, but the fitted model's "
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
            feature_map = map_class.from_state(state)
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

    # ------------------------------------------------------------------ sections
    def section(self, path: str, prefix: str, component) -> dict:
        """The state of a component's section, every value checked against its declaration:
        the declared JSON values of the metadata at ``path`` and the declared arrays
        ``prefix + name`` the file holds (every listed shape is checked before any array
        data is read)."""
        for key in self.listed:
            if not key.startswith(MAP_PREFIX):
                self.check_shape(key)
        entry = self.metadata[path]
        state = {}
        for name, declaration in declarations(component).items():
            if isinstance(declaration, Value):
                if name in entry:
                    state[name] = entry[name]
            elif any(isinstance(a, Array) for a in alternatives(declaration)) \
                    and prefix + name in self.listed:
                state[name] = self.array(prefix + name)
        return state

    def component(self, **context):
        """The estimator's fixed section (:data:`~scalegp.io.schema.SECTIONS`) rebuilt by its
        component's ``from_state`` with the sections it depends on (``context``)."""
        for path, prefix, component, estimators in SECTIONS:
            if self.kind in estimators:
                break
        state = self.section(path, prefix, component)
        try:
            return component.from_state(state, **context)
        except ValueError as error:
            raise self.error(f"has a {component.__name__} (metadata {path!r} and its arrays) "
                             f"that could not be rebuilt: {error}") from None

    def low_rank_posterior(self, kernel, likelihood: dict):
        """The low-rank posterior: a local model, or the Posterior of the feature map."""
        feature_map = self.feature_map()
        if feature_map is None:
            return self.local_posterior(None, kernel, likelihood)
        if not type(feature_map).supports(kernel):
            raise self.error(f"has a kernel ('kernel.class' = {type(kernel).__name__!r}) that "
                             f"the feature map {feature_map.name!r} does not support")
        self.symbols["m"] = feature_map.n_components
        if self.local_kind is not None:
            return self.local_posterior(feature_map, kernel, likelihood)
        return self.component(feature_map=feature_map, kernel=kernel, **likelihood)

    def local_posterior(self, feature_map, kernel, likelihood: dict):
        """The local model, rebuilt by its kind from its validated section."""
        entry = self.metadata["local"]
        state = self.section("local", LOCAL_PREFIX, self.local_kind)
        try:
            return self.local_kind.from_sections(
                state, self.metadata["system"], feature_map=feature_map, kernel=kernel,
                dtype=self.metadata["dtype"],
                map_builder=lambda X, y: restore.centre_map_builder(
                    self.unfitted_estimator(ESTIMATORS[self.kind], kernel), X, y),
                **likelihood)
        except ValueError as error:
            raise self.error(f"has a local model ({entry['kind']!r}) that could not be "
                             f"rebuilt: {error}") from None

    def input_standardization(self, estimator) -> dict:
        """X_train_mean / X_train_scale keyword arguments of ``set_fitted`` (none when the
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
                mean, var = estimator.posterior_.predict(
                    restore.prediction_input(estimator, origin), return_var=True)
        except (ValueError, TypeError, IndexError, AttributeError, ArithmeticError) as error:
            raise self.error(f"holds a model that cannot predict: {error}") from None
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
            raise self.error(f"holds a model whose prediction at the origin is not finite "
                             f"(mean {mean[0]!r}, variance {var[0]!r})")


def _stored_component(reader, entry, key: str, prefix: str, cls, what: str, rebuild):
    """The GPRegressor's component ``key`` (metadata ``front_door.<key>``, the values
    ``cls.STATE_VALUES``, and the arrays ``<prefix><name>`` of ``cls.STATE_ARRAYS``),
    ``what`` it is, rebuilt by ``rebuild(arrays, values)`` (ValueError, ArithmeticError
    or LinAlgError where it cannot be); None where the file has none (and then none of
    its arrays): the grouping of repeated inputs (``replicates``), the hyperparameters
    integrated out (``hyperparameter_average``)."""
    path = f"front_door.{key}"
    arrays = {name: reader.optional_array(prefix + name) for name in cls.STATE_ARRAYS}
    if entry is None:
        if any(value is not None for value in arrays.values()):
            raise reader.error(f"has {prefix}* arrays without metadata {path!r}")
        return None
    reader._check_entries_of(entry, path, tuple((name, "number")
                                                for name in cls.STATE_VALUES))
    if any(value is None for value in arrays.values()):
        raise reader.error(f"has metadata {path!r} but not all of the arrays "
                           f"{prefix}{{{','.join(cls.STATE_ARRAYS)}}}")
    try:
        return rebuild(arrays, entry)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
        raise reader.error(f"has {what} that cannot be rebuilt: {error}") from None
