"""Reading a table file in row blocks: CSV, .npy, .npz and Parquet, never the whole file.

A reader opens a file, learns its column names (read from the file, or generated ``x0, x1,
...`` where it has none: ``has_header`` False) and checks that every column is numeric where
the format says so up front; ``blocks(rows, columns)`` then yields ``(first_row, values)``
pairs, ``values`` a float64 array (at most ``rows`` rows, the chosen columns in order) and
``first_row`` the 0-based index of its first data row. NaN marks a missing value (the CSV
tokens :data:`MISSING_TOKENS`, Parquet nulls); what to do about it is the caller's rule
(:mod:`scalegp.sources`). Each call of ``blocks`` is a fresh pass over the file.

How each format is read (docs/data-sources.md, "File readers"):

- CSV: the dialect is sniffed on the first 64 KiB and the header decided by
  :data:`HEADER_RULE`; each block of lines is parsed by ``numpy.loadtxt`` (numpy's C parser,
  about 20x faster than Python's ``float`` per cell), and a block it refuses (a missing token,
  a text cell, a wrong field count) is parsed again cell by cell with the csv module, which
  gives the missing values their NaN and the errors their line and cell. Both parse a number
  with correct rounding, so the values do not depend on the path.
- .npy: a read-only memory map per block, released after the block is copied, so the file's
  pages never accumulate in the resident set (a map kept for the whole pass would count every
  page read towards the peak resident memory until the kernel reclaims it).
- .npz: each member is read as a stream from the zip archive (compressed or not); a
  Fortran-ordered member (whose rows are not contiguous) is read whole.
- Parquet (pyarrow, the optional extra ``parquet``): a row group at a time (memory O(row
  group): the writer's choice, 64 Ki to 1 Mi rows by pyarrow's defaults), in slices of ``rows``.
"""

from __future__ import annotations

import csv
import itertools
import zipfile
from pathlib import Path

import numpy as np

MISSING_TOKENS = {"", "na", "nan", "null", "none", "?"}
#: How a CSV file's first line is read.
HEADER_MODES = ("auto", "yes", "no")
#: The rule, as the command line's --help states it.
HEADER_RULE = ("CSV header row: 'auto' (default) reads the first line as column names when "
               "at least one of its cells is not a number, and as data otherwise; 'yes' "
               "always reads it as names, 'no' always as data (columns x0, x1, ...). .npy and "
               ".npz arrays have no names (x0, x1, ...); Parquet columns keep theirs. Column "
               "names must be unique.")
#: Bytes of the start of a CSV file the dialect is sniffed on.
SNIFF_BYTES = 65536
PARQUET_SUFFIXES = (".parquet", ".pq")


class TableError(ValueError):
    """A data file that cannot be used as a numeric table."""


def open_reader(path, header: str = "auto"):
    """The reader of ``path`` by its suffix: .npy, .npz, .parquet/.pq, anything else CSV."""
    if header not in HEADER_MODES:
        raise TableError(f"header must be one of {', '.join(HEADER_MODES)}, got {header!r}")
    path = Path(path)
    if not path.exists():
        raise TableError(f"{path}: no such file")
    if path.is_dir():
        raise TableError(f"{path}: is a folder, expected a data file")
    if not path.is_file():          # opening a FIFO would wait for a writer; a pass reads once
        raise TableError(f"{path}: is not a regular file (a FIFO, socket or device); a data "
                         "file is read in several passes, so it must be a regular file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return NpyReader(path)
    if suffix == ".npz":
        return NpzReader(path)
    if suffix in PARQUET_SUFFIXES:
        return ParquetReader(path)
    return CsvReader(path, header)


def check_unique(columns, source: str) -> None:
    seen = {}
    for j, name in enumerate(columns):
        if name in seen:
            raise TableError(f"{source}: duplicate column name {name!r} (columns {seen[name]} "
                             f"and {j}, 0-based); column names must be unique")
        seen[name] = j


def column_index(columns, key, source: str) -> int:
    """A column by name, or by 0-based index (an int, or digits)."""
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        key = str(int(key))
    if key in columns:
        return list(columns).index(key)
    if key.lstrip("-").isdigit():
        index = int(key)
        if -len(columns) <= index < len(columns):
            return index % len(columns)
    raise TableError(f"{source}: no column {key!r} (columns: {', '.join(columns)}; "
                     "a 0-based index also works)")


def select_columns(columns, names, source: str) -> list[int]:
    """The indices of the columns ``names`` in that order (a model's input columns)."""
    missing = [name for name in names if name not in columns]
    if missing:
        raise TableError(f"{source}: missing input column(s) {', '.join(missing)} that the "
                         f"model was trained on (found: {', '.join(columns)})")
    return [list(columns).index(name) for name in names]


def _generated_names(n_columns: int) -> tuple[str, ...]:
    return tuple(f"x{j}" for j in range(n_columns))


# ------------------------------------------------------------------------------------ CSV
def _parse_cell(text: str) -> float:
    stripped = text.strip()
    if stripped.lower() in MISSING_TOKENS:
        return np.nan
    return float(stripped)


def _is_number(text: str) -> bool:
    try:
        _parse_cell(text)
    except ValueError:
        return False
    return True


def _blank(row) -> bool:
    return not row or not any(cell.strip() for cell in row)


class CsvReader:
    """A CSV file (UTF-8, a byte-order mark allowed), read ``rows`` lines at a time.

    Rows whose cells are all blank are skipped, as are blank lines; "line N" in messages
    counts the remaining rows, the header included.
    """

    def __init__(self, path, header: str = "auto"):
        self.path = Path(path)
        try:
            with open(self.path, newline="", encoding="utf-8-sig") as handle:
                sample = handle.read(SNIFF_BYTES)
                handle.seek(0)
                try:
                    self._dialect = csv.Sniffer().sniff(sample, delimiters=",;\t ")
                except csv.Error:
                    self._dialect = csv.excel
                first = next((row for row in csv.reader(handle, self._dialect)
                              if not _blank(row)), None)
        except UnicodeDecodeError as error:
            raise self._not_utf8(error) from None
        if first is None:
            raise TableError(f"{self.path}: the file is empty")
        self.has_header = {"yes": True, "no": False}.get(
            header, not all(_is_number(cell) for cell in first))
        self.columns = (tuple(cell.strip() for cell in first) if self.has_header
                        else _generated_names(len(first)))
        check_unique(self.columns, str(self.path))
        self.n_rows = None          # known after a pass only

    def blocks(self, rows: int, columns=None):
        try:
            yield from self._blocks(rows, columns)
        except UnicodeDecodeError as error:
            raise self._not_utf8(error) from None

    def _not_utf8(self, error: UnicodeDecodeError) -> TableError:
        byte = error.object[error.start:error.start + 1].hex()
        return TableError(f"{self.path}: is not UTF-8 text (byte 0x{byte}: {error.reason}); "
                          "a CSV file must be UTF-8 (ASCII is)")

    def _blocks(self, rows: int, columns=None):
        columns = list(range(len(self.columns))) if columns is None else list(columns)
        start, line = 0, 2 if self.has_header else 1
        with open(self.path, encoding="utf-8-sig") as handle:
            lines = (text for text in handle if text.strip())
            if self.has_header:
                next(lines)
            while True:
                block = [text.rstrip("\r\n") for text in itertools.islice(lines, rows)]
                if not block:
                    break
                values = self._parse(block, line)
                if values.shape[0]:
                    yield start, values[:, columns]
                start, line = start + values.shape[0], line + values.shape[0]
        if start == 0:
            raise TableError(f"{self.path}: the file has a header but no data rows"
                             if self.has_header else f"{self.path}: the file is empty")

    def _parse(self, block: list[str], first_line: int) -> np.ndarray:
        """numpy's parser on clean lines; the csv module where it refuses them."""
        n_columns = len(self.columns)
        delimiter = self._dialect.delimiter
        if delimiter != " ":         # loadtxt splits on a single character; ' ' runs vary
            try:
                values = np.loadtxt(block, delimiter=delimiter, comments=None, quotechar='"',
                                    dtype=np.float64, ndmin=2)
                if values.shape == (len(block), n_columns):
                    return values
            except ValueError:
                pass
        return self._parse_cells(block, first_line)

    def _parse_cells(self, block: list[str], first_line: int) -> np.ndarray:
        rows = [row for row in csv.reader(block, self._dialect) if not _blank(row)]
        values = np.empty((len(rows), len(self.columns)))
        for i, row in enumerate(rows):
            if len(row) != len(self.columns):
                raise TableError(f"{self.path}: line {first_line + i} has {len(row)} fields, "
                                 f"expected {len(self.columns)}")
            for j, cell in enumerate(row):
                try:
                    values[i, j] = _parse_cell(cell)
                except ValueError:
                    raise TableError(
                        f"{self.path}: column {self.columns[j]!r} is not numeric (line "
                        f"{first_line + i} has {cell.strip()!r})") from None
        return values


# ------------------------------------------------------------------------------ .npy / .npz
def _check_numeric(dtype, shape, source: str) -> None:
    if dtype.kind not in "biuf":
        raise TableError(f"{source}: expected a numeric array, got dtype {dtype}")
    if len(shape) not in (1, 2) or shape[0] == 0:
        raise TableError(f"{source}: expected a non-empty 2-D array, got shape {shape}")


class NpyReader:
    """A 1-D or 2-D numeric .npy array (columns x0, x1, ...), a memory map per block."""

    has_header = False

    def __init__(self, path):
        self.path = Path(path)
        mapped = self._map()
        _check_numeric(mapped.dtype, mapped.shape, str(self.path))
        self.n_rows = mapped.shape[0]
        self.columns = _generated_names(1 if mapped.ndim == 1 else mapped.shape[1])

    def _map(self) -> np.ndarray:
        try:
            return np.load(self.path, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError) as error:
            raise TableError(f"{self.path}: not a numeric .npy array ({error})") from None

    def blocks(self, rows: int, columns=None):
        columns = list(range(len(self.columns))) if columns is None else list(columns)
        for start in range(0, self.n_rows, rows):
            mapped = self._map()
            block = mapped[start:start + rows]
            block = block[:, None] if block.ndim == 1 else block
            values = np.array(block[:, columns], dtype=np.float64)
            del mapped, block           # unmaps the pages read (module docstring)
            yield start, values


class _NpyMember:
    """One array member of a zip archive: its header, then its rows as a stream."""

    def __init__(self, archive: zipfile.ZipFile, name: str, source: str):
        self.archive, self.name = archive, name
        with archive.open(name) as stream:
            self.shape, self.fortran_order, self.dtype = self._header(stream, source)
        _check_numeric(self.dtype, self.shape, source)
        self.n_columns = 1 if len(self.shape) == 1 else self.shape[1]

    @staticmethod
    def _header(stream, source):
        try:
            version = np.lib.format.read_magic(stream)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            return read(stream)
        except ValueError as error:
            raise TableError(f"{source}: member {stream.name!r} is not a .npy array "
                             f"({error})") from None

    def blocks(self, rows: int):
        """(rows x n_columns) float64 blocks in order."""
        with self.archive.open(self.name) as stream:
            self._header(stream, self.name)
            if self.fortran_order:          # rows are not contiguous: read it whole
                whole = np.lib.format.read_array(stream, allow_pickle=False)
                whole = whole.reshape(self.shape[0], self.n_columns)
                for start in range(0, self.shape[0], rows):
                    yield np.array(whole[start:start + rows], dtype=np.float64)
                return
            row_bytes = self.dtype.itemsize * self.n_columns
            for start in range(0, self.shape[0], rows):
                count = min(rows, self.shape[0] - start)
                raw = stream.read(count * row_bytes)
                yield np.frombuffer(raw, dtype=self.dtype).reshape(count, self.n_columns) \
                        .astype(np.float64)


class NpzReader:
    """A .npz archive holding arrays X and y (columns x0, ..., y) or one 2-D array."""

    has_header = False

    def __init__(self, path):
        self.path = Path(path)
        try:
            with zipfile.ZipFile(self.path) as archive:
                names = [name for name in archive.namelist() if name.endswith(".npy")]
        except (zipfile.BadZipFile, OSError) as error:
            raise TableError(f"{self.path}: not a readable .npz archive ({error})") from None
        keys = sorted(name[:-4] for name in names)
        if set(keys) >= {"X", "y"}:
            self._members = ["X.npy", "y.npy"]
        elif len(keys) == 1:
            self._members = names
        else:
            raise TableError(f"{self.path}: expected arrays 'X' and 'y' or a single 2-D "
                             f"array, got {keys}")
        with zipfile.ZipFile(self.path) as archive:
            members = [_NpyMember(archive, name, str(self.path)) for name in self._members]
        if len(members) == 2:
            if members[0].shape[0] != members[1].shape[0]:
                raise TableError(f"{self.path}: X has {members[0].shape[0]} rows but y has "
                                 f"{members[1].shape[0]}")
            self.columns = _generated_names(members[0].n_columns) + ("y",) * members[1].n_columns
            if members[1].n_columns != 1:
                raise TableError(f"{self.path}: y must be 1-D, got shape {members[1].shape}")
        else:
            self.columns = _generated_names(members[0].n_columns)
        self.n_rows = members[0].shape[0]

    def blocks(self, rows: int, columns=None):
        columns = list(range(len(self.columns))) if columns is None else list(columns)
        with zipfile.ZipFile(self.path) as archive:
            members = [_NpyMember(archive, name, str(self.path)) for name in self._members]
            streams = [member.blocks(rows) for member in members]
            for start, parts in zip(range(0, self.n_rows, rows), zip(*streams)):
                yield start, np.hstack(parts)[:, columns]


# ------------------------------------------------------------------------------ Parquet
class ParquetReader:
    """A Parquet file (pyarrow), read a row group at a time; nulls become NaN."""

    has_header = True

    def __init__(self, path):
        self.path = Path(path)
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise TableError(f"{self.path}: reading Parquet needs pyarrow: pip install "
                             "'scalegp[parquet]'") from None
        try:
            self._file = pq.ParquetFile(self.path)
        except (OSError, ValueError) as error:      # pyarrow's ArrowInvalid is a ValueError
            raise TableError(f"{self.path}: not a readable Parquet file ({error})") from None
        import pyarrow as pa
        schema = self._file.schema_arrow
        for field in schema:
            if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
                    or pa.types.is_boolean(field.type)):
                raise TableError(f"{self.path}: column {field.name!r} is not numeric (type "
                                 f"{field.type})")
        self.columns = tuple(schema.names)
        check_unique(self.columns, str(self.path))
        self.n_rows = self._file.metadata.num_rows
        if not self.columns or self.n_rows == 0:
            raise TableError(f"{self.path}: the table is empty")

    def blocks(self, rows: int, columns=None):
        import pyarrow as pa
        import pyarrow.compute as pc
        columns = list(range(len(self.columns))) if columns is None else list(columns)
        names = [self.columns[j] for j in columns]
        start = 0
        # one row group at a time, without threads: iter_batches reads ahead, and its
        # resident memory grew with the file (+51 MiB at 1e6 rows against +25 MiB at 1e5)
        for group in range(self._file.num_row_groups):
            table = self._file.read_row_group(group, columns=sorted(set(names)),
                                              use_threads=False)
            for offset in range(0, table.num_rows, rows):
                part = table.slice(offset, rows)
                values = np.column_stack([
                    pc.cast(part.column(name), pa.float64()).to_numpy(zero_copy_only=False)
                    for name in names])
                yield start, values
                start += part.num_rows
            del table
