"""The checks of a model file against its schema: the metadata (bounded, every entry declared),
the listing of the arrays, their shapes in terms of the other fields and their values' domain.

:class:`CheckedFile` reads and checks; :class:`scalegp.io.reader._Reader` rebuilds the model
from what it checked.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields

import numpy as np

from .. import features, local
from ..errors import InvalidModelFileError
from ..stored import Array, Value, declarations
from .safety import (MAX_JSON_DEPTH, MAX_JSON_INT_DIGITS, MAX_METADATA_BYTES, _Archive,
                     _json_depth, _short)
from .schema import (_DTYPE_KINDS, _KINDS, ARRAY_FIELDS, DEFAULT_MAP_ARRAY, DEFAULT_MAP_VALUE,
                     ESTIMATORS, FORMAT_NAME, GIBBS, LOCAL_FACTORIZATION, LOCAL_PREFIX, LOW_RANK,
                     SYSTEM_SELECTOR,
                     MAP_PREFIX, METADATA_ENTRIES, METADATA_KEY, SCHEMA_VERSION, SYMBOL_LIMITS,
                     _ArrayField, _Entry, _value_entry, array_field)


class CheckedFile:
    """A model file's metadata and arrays, each checked against the schema when read."""

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
        if self.kind == GIBBS and self.map_class is None:
            raise self.error("uses the approximation 'exact', but a Gibbs model samples the "
                             "weights of a feature map")
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
        metadata checked against the kind's declared values (``STORED``); None for a global
        one."""
        factorization = self.metadata["system"][SYSTEM_SELECTOR]
        if factorization != LOCAL_FACTORIZATION:
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
        values = {name: value for name, value in declarations(cls).items()
                  if isinstance(value, Value)}
        self._check_entries_of(entry, "local", [("kind", "str")] + [
            (name, value.kind) for name, value in values.items()])
        for name, value in values.items():
            self.check_value(_value_entry(f"local.{name}", value, (LOW_RANK,)), entry[name])
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
        """name -> _ArrayField of every array this file may hold: the estimator's, and those
        its components declare (of a name declared several times, the alternative whose
        ``when`` this file meets)."""
        applicable = {}
        for field in ARRAY_FIELDS:
            if self.kind not in field.estimators:
                continue
            if field.name in applicable and not self._wanted(field):
                continue
            applicable[field.name] = field
        if self.local_kind is not None:
            stored = self.local_kind.stored_arrays(self.metadata["local"])
            for name, array in declarations(self.local_kind).items():
                if isinstance(array, Array):
                    applicable[LOCAL_PREFIX + name] = array_field(
                        LOCAL_PREFIX + name, array, present=name in stored)
        if self.map_class is not None:
            declared = declarations(self.map_class)
            for field in fields(self.map_class):
                declaration = declared.get(field.name)
                if isinstance(declaration, Array):
                    applicable[MAP_PREFIX + field.name] = array_field(MAP_PREFIX + field.name,
                                                                      declaration)
                elif declaration is None:
                    applicable[MAP_PREFIX + field.name] = DEFAULT_MAP_ARRAY
        return applicable

    def _wanted(self, field: _ArrayField) -> bool:
        """Whether the file's metadata asks for the field (its ``when``)."""
        return field.when is None or self.entry(field.when[0]) in field.when_values

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
            wanted = field.present if field.present is not None else self._wanted(field)
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

    def map_scalar(self, field, value):
        """A feature-map field stored as a JSON value: as the map declares it; a declared array
        only as null where the field's default is None (absent); an undeclared field as a
        JSON scalar."""
        declaration = declarations(self.map_class).get(field.name, DEFAULT_MAP_VALUE)
        if isinstance(declaration, Array):
            if value is not None or field.default is not None:
                raise self.error(f"has metadata 'feature_map.{field.name}' = {_short(value)}, "
                                 f"expected the array {MAP_PREFIX + field.name!r}"
                                 f"{' (or null)' if field.default is None else ''}")
        else:
            self.check_value(_value_entry(f"feature_map.{field.name}", declaration,
                                          (self.kind,)), value)
        return value
