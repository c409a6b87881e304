"""Data sources that read a table file block by block: CSV, .npy / .npz, Parquet.

A :class:`FileSource` is a :class:`scalegp.data.base.DataSource` over a reader of
:mod:`scalegp.data.readers`: the target column, the input columns (all others by default) and an
optional column of known per-row noise variances, chosen by name or 0-based index as on the
command line. Every pass reads the file again, ``READ_ROWS`` rows at a time, and re-blocks to
the engine's chunks, so a fit holds O(chunk_size * m + m^2) numbers whatever the number of
rows (docs/data-sources.md, "Memory"). Its ``out_of_core`` flag tells the engine not to keep
the features of a pass for the next one (:class:`scalegp.engine.statistics.KeptFeatures`), which
would be O(n m).

Rows are checked as they are read, with the same rules and messages as the command line: a
missing or non-finite value is an error naming its data row (1-based, the header not
counted), its column and how many such rows the file has (the pass reads on to count them),
unless ``drop_missing``, which skips those rows and counts them (``n_dropped``); a negative
noise variance is an error naming its row.

:class:`StandardizedSource` maps another source's chunks to standardized units, and
:class:`PassReporter` reports every pass over a source to a progress callback, with its name.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .._validation import check_dtype
from .base import Chunk, DataSource, DataSummary, DistributedSource, IterableSource
from .grid import GridSource
from .readers import (CsvReader, NpyReader, NpzReader, ParquetReader, TableError, column_index,
                      open_reader)

__all__ = ["FileSource", "CsvSource", "NpySource", "ParquetSource", "open_source",
           "checked_blocks", "to_arrays", "gather_rows", "StandardizedSource",
           "DistributedStandardizedSource", "standardized", "PassReporter", "READ_ROWS"]

#: Rows read from a file per block (a Parquet batch is at most this long).
READ_ROWS = 65536


def checked_blocks(reader, columns, *, drop_missing: bool = False, what: str = "data row",
                   counts: dict | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """The reader's blocks of ``columns`` with every value finite.

    A row with a NaN or inf is dropped when ``drop_missing`` (``counts["dropped"]`` counts
    them); otherwise the pass reads to the end counting such rows and raises a
    :class:`~scalegp.data.readers.TableError` naming the first one (``what`` N, 1-based), its
    column and the count. Yields (first data row of the block, values).
    """
    first_bad, n_bad, dropped = None, 0, 0
    for start, values in reader.blocks(READ_ROWS, columns):
        finite = np.isfinite(values)
        complete = finite.all(axis=1)
        if complete.all():
            if first_bad is None:
                yield start, values
            continue
        if drop_missing:
            dropped += int(np.count_nonzero(~complete))
            yield start, values[complete]
            continue
        if first_bad is None:
            row = int(np.flatnonzero(~complete)[0])
            first_bad = (start + row, reader.columns[columns[int(np.flatnonzero(
                ~finite[row])[0])]])
        n_bad += int(np.count_nonzero(~complete))
    if first_bad is not None:
        row, column = first_bad
        raise TableError(
            f"{reader.path}: {what} {row + 1} has a missing or non-finite value in column "
            f"{column!r} ({n_bad} such row(s)); fix the data or drop those rows "
            "(drop_missing=True; --drop-missing on the command line)")
    if counts is not None:
        counts["dropped"] = dropped


class FileSource(IterableSource):
    """The rows of a table file as (X, y[, sample_noise_variance]), read a block at a time.

    Parameters
    ----------
    reader : a reader of :mod:`scalegp.data.readers`
    target : str or int
        The target column, by name or 0-based index.
    inputs : sequence of str or int, optional
        The input columns in order; default every column but the target and the noise column.
    noise_variance_column : str or int, optional
        A column of known per-row noise variances (>= 0, target units squared).
    drop_missing : bool, default=False
        Skip rows with a missing or non-finite value in the chosen columns (``n_dropped``
        after a pass) instead of failing.
    dtype : float64 (default) or float32, the dtype of the X chunks.
    """

    out_of_core = True

    def __init__(self, reader, target, inputs=None, noise_variance_column=None, *,
                 drop_missing: bool = False, dtype=None):
        self.reader = reader
        source = str(reader.path)
        columns = reader.columns
        self._target = column_index(columns, target, source)
        self._noise = None if noise_variance_column is None else column_index(columns, noise_variance_column,
                                                                       source)
        if self._noise is not None and self._noise == self._target:
            raise TableError(f"{source}: the noise variance column {columns[self._noise]!r} "
                             "is the target column")
        excluded = {self._target, self._noise}
        if inputs is None:
            self._inputs = [j for j in range(len(columns)) if j not in excluded]
        else:
            self._inputs = [column_index(columns, key, source) for key in inputs]
            used = [columns[j] for j in self._inputs if j in excluded]
            if used:
                raise TableError(f"{source}: column {used[0]!r} is the target or the noise "
                                 "variance column, not an input")
        if not self._inputs:
            raise TableError(f"{source}: only the target column {columns[self._target]!r}"
                             f"{' and the noise variance column' if self._noise is not None else ''}"
                             "; no inputs left")
        self.drop_missing = bool(drop_missing)
        self.n_dropped: int | None = None
        super().__init__(self._read, n_dims=len(self._inputs), dtype=dtype)

    @property
    def input_columns(self) -> tuple[str, ...]:
        return tuple(self.reader.columns[j] for j in self._inputs)

    @property
    def target_column(self) -> str:
        return self.reader.columns[self._target]

    @property
    def has_sample_noise_variance(self) -> bool:
        return self._noise is not None

    def _read(self):
        """(X, y[, v]) blocks of the file: a fresh pass on every call."""
        columns = self._inputs + [self._target] + ([] if self._noise is None else [self._noise])
        d = len(self._inputs)
        counts = {}
        for start, values in checked_blocks(self.reader, columns,
                                            drop_missing=self.drop_missing, counts=counts):
            if self._noise is None:
                yield values[:, :d], values[:, d]
                continue
            noise = values[:, d + 1]
            if np.any(noise < 0):
                row = int(np.flatnonzero(noise < 0)[0])
                raise TableError(
                    f"{self.reader.path}: column {self.reader.columns[self._noise]!r} holds "
                    "noise variances, which must be >= 0; data row "
                    f"{start + row + 1} has {noise[row]:g}")
            yield values[:, :d], values[:, d], noise
        self.n_dropped = counts["dropped"]


class CsvSource(FileSource):
    """A CSV file read in blocks of lines (``header``: :data:`scalegp.data.readers.HEADER_RULE`)."""

    def __init__(self, path, target, inputs=None, noise_variance_column=None, *, header="auto",
                 drop_missing=False, dtype=None):
        super().__init__(CsvReader(path, header), target, inputs, noise_variance_column,
                         drop_missing=drop_missing, dtype=dtype)


class NpySource(FileSource):
    """A .npy array (a memory map per block) or a .npz archive (its members as streams);
    columns are x0, x1, ... (and y for an archive of X and y)."""

    def __init__(self, path, target, inputs=None, noise_variance_column=None, *, drop_missing=False,
                 dtype=None):
        reader = NpzReader(path) if str(path).lower().endswith(".npz") else NpyReader(path)
        super().__init__(reader, target, inputs, noise_variance_column, drop_missing=drop_missing,
                         dtype=dtype)


class ParquetSource(FileSource):
    """A Parquet file read by record batches (needs pyarrow: ``pip install 'scalegp[parquet]'``)."""

    def __init__(self, path, target, inputs=None, noise_variance_column=None, *, drop_missing=False,
                 dtype=None):
        super().__init__(ParquetReader(path), target, inputs, noise_variance_column,
                         drop_missing=drop_missing, dtype=dtype)


def open_source(path, target, inputs=None, noise_variance_column=None, *, header="auto",
                drop_missing=False, dtype=None) -> FileSource:
    """The :class:`FileSource` of ``path`` by its suffix (:func:`scalegp.data.readers.open_reader`)."""
    return FileSource(open_reader(path, header), target, inputs, noise_variance_column,
                      drop_missing=drop_missing, dtype=dtype)


def to_arrays(source: DataSource):
    """(X, y, noise variances or None) of all the source's rows, in memory: for the models
    that hold their training rows (the exact GP, local models)."""
    chunks = list(source.chunks(READ_ROWS))
    noise = (None if chunks[0].sample_noise_variance is None
             else np.concatenate([chunk.sample_noise_variance for chunk in chunks]))
    return (np.vstack([chunk.X for chunk in chunks]),
            np.concatenate([chunk.y for chunk in chunks]), noise)


def gather_rows(source: DataSource, rows, progress=None):
    """(X, y) of the source's rows ``rows`` (0-based, distinct, in that order), in one pass;
    ``progress(rows_done)`` after each chunk."""
    rows = np.asarray(rows, dtype=np.int64)
    X, y = np.empty((rows.size, source.n_dims)), np.empty(rows.size)
    for chunk in source.chunks(READ_ROWS):
        inside = np.flatnonzero((rows >= chunk.start) & (rows < chunk.stop))
        X[inside] = chunk.X[rows[inside] - chunk.start]
        y[inside] = chunk.y[rows[inside] - chunk.start]
        if progress is not None:
            progress(chunk.stop)
    return X, y


def _standardize(chunk: Chunk, location, scale, y_location, y_scale, dtype) -> Chunk:
    """A chunk in standardized units (:class:`StandardizedSource`), X in float64 then cast."""
    X = (chunk.X.astype(np.float64, copy=False) - location) / scale
    noise = None if chunk.sample_noise_variance is None else chunk.sample_noise_variance / y_scale**2
    return Chunk(X.astype(dtype, copy=False), (chunk.y - y_location) / y_scale, noise,
                 chunk.start)


def _standardized_call(function, standardization, chunk: Chunk):
    """``function`` of the standardized chunk (a top-level function: Dask pickles it)."""
    return function(_standardize(chunk, *standardization))


class WrappedSource(DataSource):
    """A source over another (``source``): its rows' shape, dtype, grid, count, noise variances
    and out-of-core promise are the wrapped source's unless a wrapper changes them."""

    def __init__(self, source: DataSource):
        self.source = source
        self.out_of_core = getattr(source, "out_of_core", False)

    @property
    def n_dims(self) -> int:
        return self.source.n_dims

    @property
    def dtype(self) -> np.dtype:
        return self.source.dtype

    @property
    def grid(self):
        return self.source.grid

    @property
    def n_samples(self) -> int:
        return self.source.n_samples

    @property
    def has_sample_noise_variance(self) -> bool:
        return self.source.has_sample_noise_variance


class StandardizedSource(WrappedSource):
    """Another source's rows in standardized units: X -> (X - location) / scale,
    y -> (y - y_location) / y_scale and noise variances / y_scale^2, chunk by chunk.

    The same elementwise operations as the in-memory fit, in float64, so every value is the
    same float; X is then cast to ``dtype`` (the precision of the fit, as the in-memory fit
    casts its standardized array). :func:`standardized` gives the distributed kind for a
    :class:`~scalegp.data.base.DistributedSource`.
    """

    def __init__(self, source: DataSource, location, scale, y_location: float,
                 y_scale: float, *, dtype=None):
        super().__init__(source)
        self._standardization = (np.asarray(location), np.asarray(scale), float(y_location),
                                 float(y_scale), check_dtype(dtype))
        self._wanted, self.picked = None, None

    def pick_rows(self, indices) -> None:
        """Keep the standardized float64 inputs at the sorted ``indices`` as the next pass
        streams by: ``picked`` holds them once that pass has run to its end (rows a caller
        needs later, without a pass of their own)."""
        self._wanted, self.picked = np.asarray(indices, dtype=np.int64), None

    @property
    def dtype(self) -> np.dtype:
        return self._standardization[-1]

    @property
    def grid(self):
        """The source's grid in standardized units (None when it has none)."""
        grid = self.source.grid
        return None if grid is None else grid.standardized(*self._standardization[:4])

    def chunks(self, rows: int) -> Iterator[Chunk]:
        wanted, self._wanted = self._wanted, None
        location, scale = self._standardization[:2]
        picked = []
        for chunk in self.source.chunks(rows):
            if wanted is not None:
                inside = wanted[(wanted >= chunk.start) & (wanted < chunk.stop)]
                picked.append((chunk.X[inside - chunk.start].astype(np.float64) - location)
                              / scale)
            yield _standardize(chunk, *self._standardization)
        if wanted is not None:
            self.picked = np.vstack(picked)


class DistributedStandardizedSource(StandardizedSource, DistributedSource):
    """A standardized distributed source: its passes stay where the rows are, each block
    standardized on its worker before the engine's function sees it."""

    def map_reduce(self, function):
        return self.source.map_reduce(functools.partial(_standardized_call, function,
                                                        self._standardization))


def standardized(source: DataSource, location, scale, y_location: float, y_scale: float, *,
                 dtype=None) -> StandardizedSource:
    """The :class:`StandardizedSource` of ``source`` (distributed when the source is)."""
    kind = (DistributedStandardizedSource if isinstance(source, DistributedSource)
            else StandardizedSource)
    return kind(source, location, scale, y_location, y_scale, dtype=dtype)


@dataclass(frozen=True)
class PickedRows:
    """Rows picked from the blocks of a distributed pass, in block order: they add."""

    X: np.ndarray

    def __add__(self, other: "PickedRows") -> "PickedRows":
        return PickedRows(np.vstack([self.X, other.X]))


def rows_among(indices, chunk: Chunk) -> PickedRows:
    """The chunk's rows among the sorted global ``indices`` (for ``map_reduce``)."""
    inside = indices[(indices >= chunk.start) & (indices < chunk.stop)]
    return PickedRows(np.asarray(chunk.X[inside - chunk.start], dtype=np.float64))


class ProgressBars:
    """Progress as tqdm bars on stderr, the package's one progress protocol (the passes of
    :class:`PassReporter`, the stages of the Gibbs sampler, ``approximation="auto"``'s
    seconds against its budget): ``start_pass(name, total, unit="rows", initial=0)`` opens a
    bar named after the pass or stage (count done, rate and, with a known total, time left;
    ``initial`` the count it starts at, outside the rate), and ``self(done)`` advances it
    (opening a bar named "pass" where none was started: an in-memory fit's passes are not
    announced)."""

    def __init__(self):
        self.bar = None

    def start_pass(self, name: str, total, unit: str = "rows", initial=0) -> None:
        from tqdm import tqdm
        self.close()
        self.bar = tqdm(total=total, desc=name, unit=unit, unit_scale=True, initial=initial,
                        file=sys.stderr, leave=False)

    def __call__(self, done: int) -> None:
        if self.bar is None:          # a pass over rows in memory is not announced
            self.start_pass("pass", None)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class PassReporter(WrappedSource):
    """A source that reports every pass over it: ``progress(rows_done)`` after each chunk
    and, when the callback has it, ``progress.start_pass(name, total_rows)`` before the pass
    (total None while the number of rows is unknown; :class:`ProgressBars` draws them). ``stage``
    names what the passes are for; the passes of one stage are numbered (name "STAGE, pass J" from
    the second on)."""

    def __init__(self, source: DataSource, progress):
        super().__init__(source)
        self.progress = progress
        self._stage, self._passes = "pass", 0

    @property
    def stage(self) -> str:
        return self._stage

    @stage.setter
    def stage(self, name: str) -> None:
        self._stage, self._passes = name, 0

    def summary(self) -> DataSummary:
        if isinstance(self.source, GridSource):
            return self.source.summary()          # from the axes and values: no pass
        if self.source._summary is None:
            self.stage = "summary pass"
            self.source._summary = DataSource.summary(self)
        return self.source._summary

    def chunks(self, rows: int) -> Iterator[Chunk]:
        self._passes += 1
        name = self._stage if self._passes == 1 else f"{self._stage}, pass {self._passes}"
        start_pass = getattr(self.progress, "start_pass", None)
        if start_pass is not None:
            known = self.source._summary is not None or not isinstance(self.source,
                                                                        IterableSource)
            start_pass(name, self.source.n_samples if known else None)
        for chunk in self.source.chunks(rows):
            yield chunk
            self.progress(chunk.stop)
