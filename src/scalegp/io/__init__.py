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
declaration per field (JSON kind or dtype, shape in terms of n_features_in, the map's m and
the other arrays, and the values' domain): the estimator's own entries
(``METADATA_ENTRIES``, ``KERNEL_PARAMS``, the input standardization) in
:mod:`~scalegp.io.schema`, and the section of each component the file holds as the
component declares it (docs/model-files.md, "Sections by declaration"). The components are
then rebuilt by keyword from their checked sections (``from_state``) and their own
validation, checked against each other, and the rebuilt model must predict a finite value.
Every failure is an :class:`~scalegp.errors.InvalidModelFileError` naming the entry.

The sections: the feature map's (metadata ``feature_map``, arrays ``feature_map.<field>``,
the class named by ``approximation``), the low-rank :class:`~scalegp.engine.Posterior`'s
(metadata ``system``, its system's arrays unprefixed), the exact posterior's (``system``,
``X_train``, ``cholesky_factor``, ``alpha``), the Gibbs samples' (``gibbs``, ``gibbs.<name>``;
a Gibbs model has no noise variance, likelihood, optimization or factorized system,
docs/gibbs.md, "The estimator") and a local model's (``system.factorization = "local"``,
metadata ``local`` with its kind, arrays ``local.<name>``). This package knows none of their
fields: a new map, system or local kind needs no change here (every field of the package's
components is declared: tests/test_model_file_schema.py enumerates them; a field of a map
from outside the package that it does not declare is a finite array or a JSON scalar).

Writes go through :func:`scalegp._output.write_atomically`: a temporary file created
exclusively in the target's folder, moved over the target by ``os.replace``, so a failed or
interrupted save leaves an existing file untouched; only a regular file or a missing path is
ever replaced.

The package's modules: :mod:`~scalegp.io.schema` (the declarations), :mod:`~scalegp.io.safety`
(the archive's checks), :mod:`~scalegp.io.writer` (:func:`save`) and :mod:`~scalegp.io.reader`
(:func:`load`).
"""

from .reader import load, load_table_columns
from .schema import FORMAT_NAME, SCHEMA_VERSION, TableColumns
from .writer import save

__all__ = ["save", "load", "load_table_columns", "TableColumns", "FORMAT_NAME",
           "SCHEMA_VERSION"]
