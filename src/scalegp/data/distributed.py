"""The engine's passes over Dask collections: statistics where the rows are, sums on the driver.

Every pass of the engine is a sum over rows of a pure function of a chunk
(:func:`scalegp.engine.statistics.chunk_statistics`,
:func:`scalegp.engine.statistics.chunk_gradient`, the summary's
:class:`scalegp.data.base.SummaryPart`), so over a ``dask.array`` it is a map over the row blocks
followed by a tree reduction of the partial sums (docs/distributed.md):

    S = sum_b f(block_b),  computed as  ((f_1 + f_2) + (f_3 + f_4)) + ...

The tree is fixed by the blocks' order, not by which worker finishes first, so a result does
not depend on the schedule, a retried task (a lost worker) gives the same bits, and the
serial sum over the same blocks differs only by rounding (1e-10 relative, tested). Only m x m
statistics, gradients and summaries travel to the driver: the rows never do, except through
:meth:`DaskSource.chunks`, the local fallback for code that streams rows itself (it pulls one
block at a time through the driver).

:class:`DaskSource` wraps a ``dask.array`` X (n, d) and y (n,) (with optional per-row known
noise variances), or the columns of a ``dask.dataframe``; any Dask scheduler runs it (the
default one, or ``client``'s: a ``distributed.Client`` of a cluster).
"""

from __future__ import annotations

import io
import operator
import os
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from .._validation import check_dtype, check_positive_int
from .base import ArraySource, Chunk, DataSummary, DistributedSource, SummaryPart
from .readers import CsvLineError, non_blank_lines, parquet_values, parse_csv_lines

__all__ = ["DaskSource", "is_dask_collection", "dask_file_source", "FILE_BLOCK_ROWS",
           "check_scheduler_address", "lost_cluster_errors"]


def _dask():
    try:
        import dask
        import dask.array
    except ImportError:                               # pragma: no cover - depends on the install
        raise ImportError("scalegp.data.distributed needs Dask: pip install 'scalegp[dask]'") from None
    return dask


def is_dask_collection(value) -> bool:
    """Whether ``value`` is a Dask collection (without importing Dask when it is not loaded)."""
    import sys
    if "dask" not in sys.modules:
        return False
    from dask import is_dask_collection as check
    return bool(check(value))


def _block_chunk(X, y, sample_noise_variance, start: int, dtype) -> Chunk:
    """One block as a validated :class:`Chunk` with global rows (errors name them)."""
    try:
        chunk = next(ArraySource(X, y, sample_noise_variance, dtype=dtype).chunks(max(1, len(y))))
    except ValueError as error:
        raise ValueError(f"in the Dask block of rows {start} to {start + len(y) - 1} "
                         f"(block-local row numbers): {error}") from None
    return replace(chunk, start=start)


def _apply(function, X, y, sample_noise_variance, start, dtype):
    return function(_block_chunk(X, y, sample_noise_variance, start, dtype))


def _merge_parts(a: SummaryPart, b: SummaryPart) -> SummaryPart:
    return a.merge(b)


class DaskSource(DistributedSource):
    """Rows of Dask arrays, processed on the workers (module docstring).

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_dims)
        Rechunked to a single block along the columns; the row blocks are the units of work.
    y : dask.array.Array of shape (n_samples,)
        Rechunked to X's row blocks.
    sample_noise_variance : dask.array.Array of shape (n_samples,), optional
        Known per-row noise variances (>= 0).
    dtype : {"float64", "float32"}, optional
        Of the X blocks (the engine's ``dtype``).
    client : distributed.Client, optional
        The scheduler to compute on; None: Dask's default (the active client, if any).
    """

    def __init__(self, X, y, sample_noise_variance=None, *, dtype=None, client=None):
        dask = _dask()
        self._dtype = check_dtype(dtype)
        X, y = dask.array.asarray(X), dask.array.asarray(y)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D dask array, got {X.ndim} dimension(s)")
        if y.ndim != 1:
            raise ValueError(f"y must be a 1-D dask array, got {y.ndim} dimension(s)")
        if any(np.isnan(size) for size in X.shape + y.shape):
            raise ValueError("the Dask arrays have unknown block sizes; compute them first "
                             "(dask.array: X.compute_chunk_sizes(); dask.dataframe: "
                             "to_dask_array(lengths=True), or DaskSource.from_dataframe)")
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        if X.shape[0] == 0:
            raise ValueError("the data source is empty (X has no rows)")
        self.X = X.rechunk({1: -1})
        self.y = y.rechunk({0: self.X.chunks[0]})
        self.sample_noise_variance = (None if sample_noise_variance is None else
                               dask.array.asarray(sample_noise_variance).rechunk(
                                   {0: self.X.chunks[0]}))
        if self.sample_noise_variance is not None and self.sample_noise_variance.shape != y.shape:
            raise ValueError(f"sample_noise_variance has shape {self.sample_noise_variance.shape}, expected "
                             f"{y.shape}")
        self.client = client
        self._starts = np.concatenate([[0], np.cumsum(self.X.chunks[0])[:-1]]).astype(int)

    @classmethod
    def from_dataframe(cls, frame, target, inputs=None, *, noise_variance_column=None, dtype=None,
                       client=None) -> "DaskSource":
        """The ``target`` column of a ``dask.dataframe`` as y and ``inputs`` (default: every
        other column, minus ``noise_variance_column``) as X; non-numeric columns are refused."""
        columns = list(frame.columns)
        for name in [target] + list(inputs or []) + ([noise_variance_column] if noise_variance_column else []):
            if name not in columns:
                raise ValueError(f"the dataframe has no column {name!r} (it has {columns})")
        if inputs is None:
            inputs = [c for c in columns if c not in (target, noise_variance_column)]
        if not inputs:
            raise ValueError("no input columns: the dataframe holds only the target")
        for name in list(inputs) + [target]:
            if getattr(frame[name].dtype, "kind", "O") not in "biuf":   # pandas' own dtypes
                raise ValueError(f"column {name!r} is not numeric (dtype {frame[name].dtype})")
        X = frame[list(inputs)].to_dask_array(lengths=True)
        y = frame[target].to_dask_array(lengths=True)
        v = None if noise_variance_column is None else frame[noise_variance_column].to_dask_array(lengths=True)
        return cls(X, y, v, dtype=dtype, client=client)

    # ----------------------------------------------------------------- the protocol
    @property
    def n_dims(self) -> int:
        return int(self.X.shape[1])

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def has_sample_noise_variance(self) -> bool:
        return self.sample_noise_variance is not None

    @property
    def n_blocks(self) -> int:
        return len(self.X.chunks[0])

    def _blocks(self):
        """Delayed (X, y, sample_noise_variance) of each row block, with its first global row."""
        X_blocks = self.X.to_delayed()[:, 0]
        y_blocks = self.y.to_delayed()
        v_blocks = ([None] * self.n_blocks if self.sample_noise_variance is None
                    else self.sample_noise_variance.to_delayed())
        return zip(X_blocks, y_blocks, v_blocks, self._starts)

    def _compute(self, delayed_value):
        if self.client is not None:
            return self.client.compute(delayed_value).result()
        return delayed_value.compute()

    def _tree(self, function: Callable[[Chunk], object], combine=operator.add):
        """The delayed pairwise reduction of ``function`` over the blocks, in block order."""
        dask = _dask()
        function = dask.delayed(function, pure=True, traverse=False)
        level = [dask.delayed(_apply, pure=True)(function, X, y, v, int(start), self._dtype)
                 for X, y, v, start in self._blocks()]
        while len(level) > 1:
            paired = [dask.delayed(combine, pure=True)(a, b)
                      for a, b in zip(level[0::2], level[1::2])]
            level = paired + level[len(paired) * 2:]
        return level[0]

    def map_reduce(self, function: Callable[[Chunk], object]):
        """sum_b function(block_b), mapped on the workers, reduced as a tree (module
        docstring)."""
        return self._compute(self._tree(function))

    def summary(self) -> DataSummary:
        """The one-pass :class:`DataSummary`, merged as a tree of per-block parts."""
        if self._summary is None:
            self._summary = self._compute(self._tree(SummaryPart.of, _merge_parts)).summary()
        return self._summary

    def chunks(self, rows: int) -> Iterator[Chunk]:
        """The rows through the driver, one block at a time (the local fallback: module
        docstring), re-cut to ``rows`` rows."""
        rows = check_positive_int(rows, "rows")
        pending = []
        for X, y, v, start in self._blocks():
            X, y, v = self._compute(_dask().delayed(lambda *a: a)(X, y, v))
            chunk = _block_chunk(X, y, v, int(start), self._dtype)
            pending.append(chunk)
            while sum(len(c.y) for c in pending) >= rows:
                head, pending = _take(pending, rows)
                yield head
        if pending:
            yield _take(pending, sum(len(c.y) for c in pending))[0]


def _take(chunks: list, rows: int) -> tuple[Chunk, list]:
    """The first ``rows`` rows of consecutive chunks as one chunk, and the rest."""
    X = np.concatenate([c.X for c in chunks])
    y = np.concatenate([c.y for c in chunks])
    has_noise = chunks[0].sample_noise_variance is not None
    v = np.concatenate([c.sample_noise_variance for c in chunks]) if has_noise else None
    start = chunks[0].start
    head = Chunk(X[:rows], y[:rows], None if v is None else v[:rows], start)
    if rows == len(y):
        return head, []
    rest = Chunk(X[rows:], y[rows:], None if v is None else v[rows:], start + rows)
    return head, [rest]


# ------------------------------------------------------------------------- files read by workers
#: Rows per block of a file read by the workers (:func:`dask_file_source`), by default.
FILE_BLOCK_ROWS = 1_000_000


def _npy_block(path: str, start: int, stop: int, columns) -> np.ndarray:
    """Rows [start, stop) of the chosen columns of a .npy file, read by a worker through a
    memory map (as :class:`scalegp.data.readers.NpyReader` reads them)."""
    mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    block = mapped[start:stop]
    block = block[:, None] if block.ndim == 1 else block
    values = np.array(block[:, list(columns)], dtype=np.float64)
    del mapped, block
    return values


def _line_start(handle, offset: int) -> int:
    """The first byte >= ``offset`` that starts a line of the file: ``offset`` itself when the
    byte before it ends a line (\\n, or a \\r not followed by \\n), else the byte after the
    next line end (the size of the file when none follows)."""
    if offset == 0:
        return 0
    handle.seek(offset - 1)
    position, previous = offset - 1, b""
    while True:
        data = handle.read(65536)
        if not data:                # the end of the file (after a final \\r too)
            return position
        for index, byte in enumerate(data):
            if previous == b"\r" and byte != 0x0A:
                return position + index
            if byte == 0x0A:
                return position + index + 1
            previous = b"\r" if byte == 0x0D else b""
        position += len(data)


class _BlockLineError(Exception):
    """A worker's :class:`scalegp.data.readers.CsvLineError`, with the byte its range's lines start
    at, so that the driver can number the line from the start of the file."""

    def __init__(self, first_byte: int, error):
        super().__init__(str(error))
        self.first_byte, self.error = first_byte, error

    def __reduce__(self):
        return type(self), (self.first_byte, self.error)


def _csv_block(path: str, start: int, stop: int, names, csv_format, columns) -> np.ndarray:
    """The chosen ``columns`` of the CSV lines that start in bytes [start, stop), parsed by
    :func:`scalegp.data.readers.parse_csv_lines` (the serial reader's grammar and errors)."""
    with open(path, "rb") as handle:
        first = _line_start(handle, start)
        last = _line_start(handle, stop) if stop < os.path.getsize(path) else stop
        handle.seek(first)
        raw = handle.read(max(0, last - first))
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8-sig" if first == 0 else "utf-8",
                            errors="surrogateescape", newline=None)
    try:
        lines = list(non_blank_lines(text))
        values = (parse_csv_lines(lines, 1, names, csv_format, path) if lines
                  else np.empty((0, len(names))))
    except CsvLineError as error:
        raise _BlockLineError(first, error) from None
    return values[:, list(columns)]


def _renumbered(path, error: _BlockLineError):
    """The worker's error with its line counted from the start of the file (the non-blank
    lines before the worker's range, read here: an error path only) and the file named as
    the user named it."""
    with open(path, "rb") as handle:
        before = handle.read(error.first_byte)
    text = io.TextIOWrapper(io.BytesIO(before), encoding="utf-8-sig", errors="replace",
                            newline=None)
    count = sum(1 for line in text if line.strip())
    return CsvLineError(path, count + error.error.line, error.error.before, error.error.after)


def _parquet_block(path: str, group: int, offset: int, rows: int, names) -> np.ndarray:
    """Rows [offset, offset + rows) of one row group of a Parquet file, the columns ``names``
    as float64 (:func:`scalegp.data.readers.parquet_values`, as the serial reader reads them)."""
    import pyarrow.parquet as pq
    table = pq.ParquetFile(path).read_row_group(group, columns=sorted(set(names)),
                                                use_threads=False).slice(offset, rows)
    return parquet_values(table, names)


def _check_block(values: np.ndarray, noise_column=None):
    """(rows, incomplete rows, first incomplete row, its first bad column, first complete
    row whose noise variance in ``noise_column`` is negative, or -1) of a block."""
    finite = np.isfinite(values)
    complete = finite.all(axis=1)
    negative = -1
    if noise_column is not None:
        below = np.flatnonzero(complete & (np.where(finite[:, noise_column],
                                                    values[:, noise_column], 0.0) < 0))
        negative = int(below[0]) if below.size else -1
    bad = np.flatnonzero(~complete)
    if bad.size == 0:
        return len(values), 0, -1, -1, negative
    return (len(values), int(bad.size), int(bad[0]),
            int(np.flatnonzero(~finite[bad[0]])[0]), negative)


def _innermost(error: BaseException) -> str:
    """The message of the innermost cause of ``error`` (Dask wraps a reader's errors)."""
    while error.__cause__ is not None or error.__context__ is not None:
        error = error.__cause__ or error.__context__
    return " ".join(str(error).split()) or type(error).__name__


def _complete_rows(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values).all(axis=1)]


def _file_blocks(reader, columns, block_rows: int):
    """Delayed float64 blocks of the columns ``columns`` (indices) of ``reader``'s file, each
    read by a worker from the file at the same path."""
    dask = _dask()
    from .readers import CsvReader, NpyReader, ParquetReader
    path = str(reader.path.resolve())
    names = [reader.columns[j] for j in columns]
    if isinstance(reader, NpyReader):
        read = dask.delayed(_npy_block, pure=True)
        return [read(path, start, min(start + block_rows, reader.n_rows), columns)
                for start in range(0, reader.n_rows, block_rows)]
    if isinstance(reader, ParquetReader):
        read = dask.delayed(_parquet_block, pure=True)
        metadata = reader._file.metadata
        return [read(path, group, offset, block_rows, names)
                for group in range(metadata.num_row_groups)
                for offset in range(0, metadata.row_group(group).num_rows, block_rows)]
    if isinstance(reader, CsvReader):
        # byte ranges of about block_rows rows (bytes per row from the first 64 KiB), each
        # parsed on a worker by the serial reader's own parser
        with open(path, "rb") as handle:
            sample = handle.read(65536)
        row_bytes = max(1.0, len(sample) / max(1, sample.count(b"\n")))
        size = os.path.getsize(path)
        step = max(1024, int(block_rows * row_bytes))
        read = dask.delayed(_csv_block, pure=True)
        return [read(path, start, min(start + step, size), reader.columns,
                     reader.csv_format, columns)
                for start in range(reader.data_start, size, step)]
    from .readers import TableError
    raise TableError(f"{reader.path}: the Dask workers read CSV, .npy and Parquet files; a "
                     ".npz archive cannot be split into row ranges (save it as one .npy "
                     "array, or as Parquet)")


def dask_file_source(path, target, inputs=None, noise_variance_column=None, *, header="auto",
                     drop_missing=False, dtype=None, client=None,
                     block_rows: int = FILE_BLOCK_ROWS):
    """A :class:`DaskSource` over a table file that the Dask workers read themselves.

    The columns are chosen as :func:`scalegp.data.sources.open_source` chooses them (by name or
    0-based index, the same header rule and messages; only the file's first 64 KiB, its
    header or metadata is read here). The workers read the file at the same path
    (docs/distributed.md, "From the command line"): a .npy file as memory-mapped row ranges of
    ``block_rows`` rows, a Parquet file by row groups (in slices of ``block_rows``), a CSV
    file in byte ranges of about ``block_rows`` rows, each worker taking the lines that start
    in its range and parsing them with the serial reader's parser
    (:func:`scalegp.data.readers.parse_csv_lines`: one grammar, the same values and errors, a
    line named by its number in the file).

    One check pass on the workers counts every block's rows and the rows with a missing or
    non-finite value: without ``drop_missing`` the first such row is an error naming its data
    row and column (as the serial reader does); with it those rows are left out on the
    workers, every later pass too. Returns ``(source, file_source, info)``: the
    :class:`DaskSource`, the (unread) :class:`scalegp.data.sources.FileSource` whose column names
    it uses, and a dict with ``n_blocks``, ``n_rows`` and ``n_dropped``.
    """
    dask = _dask()
    import dask.array as da
    from .readers import TableError
    from .sources import open_source
    block_rows = check_positive_int(block_rows, "block_rows")
    file_source = open_source(path, target, inputs, noise_variance_column, header=header,
                              drop_missing=drop_missing, dtype=dtype)
    reader = file_source.reader
    d = len(file_source._inputs)
    columns = file_source._inputs + [file_source._target] + (
        [] if file_source._noise is None else [file_source._noise])
    check = dask.delayed(_check_block, pure=True)
    noise_column = None if file_source._noise is None else d + 1
    try:
        blocks = _file_blocks(reader, columns, block_rows)
        checks = [check(block, noise_column) for block in blocks]
        checks = (client.gather(client.compute(checks)) if client is not None
                  else dask.compute(*checks))
    except TableError:
        raise
    except _BlockLineError as error:                    # a worker's CSV line, renumbered
        raise _renumbered(reader.path, error) from None
    except (ValueError, TypeError, OSError) as error:     # a worker could not read a block
        raise TableError(f"{reader.path}: a Dask worker could not read the file "
                         f"({_innermost(error)}); every column used must be numeric, and "
                         "the file readable by the workers at the same path") from None
    n_bad = sum(check[1] for check in checks)
    offset = 0
    for rows, count, row, column, negative in checks:
        if count and not drop_missing:
            raise TableError(
                f"{reader.path}: data row {offset + row + 1} has a missing or non-finite "
                f"value in column {reader.columns[columns[column]]!r} ({n_bad} such row(s)); "
                "fix the data or drop those rows (--drop-missing)")
        if negative >= 0:
            raise TableError(
                f"{reader.path}: column {reader.columns[file_source._noise]!r} holds noise "
                f"variances, which must be >= 0; data row {offset + negative + 1} is negative")
        offset += rows
    parts = []
    for block, (rows, count, _, _, _) in zip(blocks, checks):
        kept = rows - count
        if kept == 0:
            continue
        if count:
            block = dask.delayed(_complete_rows, pure=True)(block)
        parts.append(da.from_delayed(block, shape=(kept, len(columns)), dtype=np.float64))
    n_rows = sum(check[0] for check in checks)
    if n_rows == 0:                                     # as the serial reader says it
        raise TableError(f"{reader.path}: the file has a header but no data rows"
                         if reader.has_header else f"{reader.path}: the file is empty")
    if not parts:
        raise TableError(f"{reader.path}: no complete rows")
    values = da.concatenate(parts, axis=0)
    X, y = values[:, :d], values[:, d]
    v = values[:, d + 1] if file_source._noise is not None else None
    source = DaskSource(X, y, v, dtype=dtype, client=client)
    file_source.n_dropped = n_bad
    return source, file_source, {"n_blocks": source.n_blocks, "n_rows": n_rows,
                                 "n_dropped": n_bad}


# ------------------------------------------------------------------ the command line's client
def check_scheduler_address(address: str) -> None:
    """ValueError unless ``address`` is [SCHEME://]HOST[:PORT] with a scheme Dask knows and
    a port in 0..65535 (Dask's own parsers, without connecting)."""
    from distributed.comm.addressing import normalize_address, parse_address, parse_host_port
    from distributed.comm.registry import get_backend
    scheme, location = parse_address(normalize_address(address))
    get_backend(scheme)
    if scheme != "inproc":
        try:
            port = parse_host_port(location, default_port=8786)[1]
        except ValueError:
            raise ValueError(f"no port number in {location!r}") from None
        if not 0 <= port <= 65535:
            raise ValueError(f"port {port} is not in 0..65535")


def lost_cluster_errors() -> tuple:
    """What a ``distributed.Client`` raises when the scheduler dies or its workers keep
    dying mid-computation (a cancelled future, a closed connection, a killed worker)."""
    from concurrent.futures import CancelledError
    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError
    return (CancelledError, CommClosedError, KilledWorker)
