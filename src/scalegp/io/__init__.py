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

A local model (:mod:`scalegp.local.centered`) has ``system.factorization = "local"``, its kind and
the kind's scalars under the metadata ``local``, and its arrays as ``local.<name>``; the kind
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

The package's modules: :mod:`~scalegp.io.schema` (the declarations), :mod:`~scalegp.io.safety`
(the archive's checks), :mod:`~scalegp.io.writer` (:func:`save`) and :mod:`~scalegp.io.reader`
(:func:`load`).
"""

from .reader import load
from .schema import FORMAT_NAME, SCHEMA_VERSION
from .writer import save

__all__ = ["save", "load", "FORMAT_NAME", "SCHEMA_VERSION"]
