"""Reading a table file in row blocks: CSV, .npy, .npz and Parquet, never the whole file.

A reader opens a file, learns its column names (read from the file, or generated ``x0, x1,
...`` where it has none: ``has_header`` False) and checks that every column is numeric where
the format says so up front; ``blocks(rows, columns)`` then yields ``(first_row, values)``
pairs, ``values`` a float64 array (at most ``rows`` rows, the chosen columns in order) and
``first_row`` the 0-based index of its first data row. NaN marks a missing value (the CSV
tokens :data:`MISSING_TOKENS`, Parquet nulls); what to do about it is the caller's rule
(:mod:`scalegp.data.sources`). Each call of ``blocks`` is a fresh pass over the file.

How each format is read (docs/data-sources.md, "File readers"):

- CSV: the dialect is sniffed on the first 64 KiB and the header decided by
  :data:`HEADER_RULE`; each block of lines is parsed by ``numpy.loadtxt`` (numpy's C parser,
  about 20x faster than Python's ``float`` per cell), and a block it refuses (a missing token,
  a text cell, a wrong field count) is parsed again cell by cell with the csv module, which
  gives the missing values their NaN and the errors their line and cell. Both parse a number
  with correct rounding, so the values do not depend on the path, and both follow one
  grammar (:data:`NUMBER`), which the Dask workers share (:func:`parse_csv_lines`).
- .npy: a read-only memory map per block, released after the block is copied, so the file's
  pages never accumulate in the resident set (a map kept for the whole pass would count every
  page read towards the peak resident memory until the kernel reclaims it).
- .npz: each member is read as a stream from the zip archive (compressed or not); a
  Fortran-ordered member (whose rows are not contiguous) is read whole.
- Parquet (pyarrow, the optional extra ``parquet``): a row group at a time (memory O(row
  group): the writer's choice, 64 Ki to 1 Mi rows by pyarrow's defaults), in slices of ``rows``.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import re
import sys
import zipfile
import zlib
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
#: What reading a damaged zip member raises (a bad CRC, a cut deflate stream).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError)


class TableError(ValueError):
    """A data file that cannot be used as a numeric table."""


#: The path that names standard input (CSV only: it is read once, into memory).
STDIN = "-"
#: How a binary table file starts (its magic bytes), and why standard input cannot carry it:
#: these readers seek in the file (:func:`read_standard_input` refuses them by name).
BINARY_STARTS = (
    (b"\x93NUMPY", ".npy", "the .npy reader memory-maps each block of rows at its offset in "
                           "the file"),
    (b"PK\x03\x04", ".npz", "an .npz file is a zip archive, whose directory is at its end"),
    (b"PK\x05\x06", ".npz", "an .npz file is a zip archive, whose directory is at its end"),
    (b"PAR1", "Parquet", "a Parquet file is read from its footer at the end, then by row "
                         "group at the offsets the footer gives"),
)
#: A compressed CSV file, by its first bytes: refused with the command that decompresses it.
COMPRESSED_STARTS = ((b"\x1f\x8b", "gzip", "zcat"), (b"BZh", "bzip2", "bzcat"),
                     (b"\xfd7zXZ\x00", "xz", "xzcat"), (b"\x28\xb5\x2f\xfd", "zstd", "zstdcat"))


def read_standard_input(content: bytes | None = None) -> bytes:
    """The bytes of standard input (``content`` if the caller read them already), checked:
    a terminal (nothing piped: reading would wait for typing), a binary table file
    (:data:`BINARY_STARTS`) and a compressed one (:data:`COMPRESSED_STARTS`), both known by
    their first bytes, are refused with the reason, as a :class:`TableError`. Standard input is read once, whole, into memory: every pass over
    the table then parses these bytes."""
    if content is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise TableError("standard input (-) is a terminal: pipe or redirect a CSV file "
                             "into it (... - < data.csv), or name the file instead of -")
        content = sys.stdin.buffer.read()
    for start, kind, reason in BINARY_STARTS:
        if content.startswith(start):
            raise TableError(f"<standard input>: holds a {kind} file (it starts with that "
                             f"format's bytes), but - reads CSV text only: {reason}, which "
                             "needs a file to seek in; name the file instead of -")
    for start, kind, command in COMPRESSED_STARTS:
        if content.startswith(start):
            raise TableError(f"<standard input>: holds {kind}-compressed bytes; - reads CSV "
                             f"text: decompress into the pipe ({command} FILE | scalegp ... -)")
    return content


def open_reader(path, header: str = "auto", *, content: bytes | None = None):
    """The reader of ``path`` by its suffix: .npy, .npz, .parquet/.pq, anything else CSV.

    ``path`` ``"-"`` is standard input, read as CSV: its bytes ``content`` if given (a caller
    that opens it twice reads it once), else all of ``sys.stdin``
    (:func:`read_standard_input`, which refuses a terminal and the binary formats)."""
    if header not in HEADER_MODES:
        raise TableError(f"header must be one of {', '.join(HEADER_MODES)}, got {header!r}")
    if str(path) == STDIN:
        return CsvReader("<standard input>", header, content=read_standard_input(content))
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
#: The one grammar of a CSV number, for every reader and engine (the serial reader, the Dask
#: workers): optional spaces or tabs, an optional sign, then ASCII digits with an optional
#: point and exponent, or inf, infinity, nan in any case; a cell may be quoted. Python's
#: ``float`` also takes ``1_000`` and non-ASCII digits, numpy's parser does not: both are
#: refused here.
NUMBER = re.compile(r"[ \t]*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                    r"|inf(?:inity)?|nan)[ \t]*", re.IGNORECASE)
#: A block of lines with none of these characters is handed to numpy's parser, whose grammar
#: on printable ASCII without ``_`` is :data:`NUMBER`'s (tests/test_csv_grammar.py).
_NOT_PLAIN = re.compile(r"[^\t\x20-\x5e\x60-\x7e]")      # 0x5f is "_"
#: A byte that is not UTF-8, as decoded with errors="surrogateescape".
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
#: The longest CSV field read (the csv module's own limit, 128 KiB); a longer one is an error.
MAX_FIELD_CHARS = csv.field_size_limit()


def _unreadable(error: csv.Error) -> str:
    """What follows "line N" in the message of a line the csv module refuses: its own words
    ("new-line character seen in unquoted field"), except for a field over its limit, whose
    words ("field larger than field limit (131072)") are those of its parser's internals."""
    if str(error).startswith("field larger than field limit"):
        return (f" has a field longer than {MAX_FIELD_CHARS} characters, the most a CSV cell "
                "may hold")
    return f" cannot be read as CSV ({error})"


def _parse_cell(text: str) -> float:
    """A cell's value by :data:`NUMBER` (NaN for a missing token). On ASCII text without
    ``_`` and without whitespace other than spaces and tabs around it, Python's ``float``
    reads exactly :data:`NUMBER` (tests/test_csv_grammar.py), and it is faster than the
    regular expression."""
    stripped = text.strip(" \t")
    if stripped.lower() in MISSING_TOKENS:
        return np.nan
    if not stripped.isascii() or "_" in stripped or stripped != stripped.strip():
        raise ValueError(f"not a number: {text!r}")
    return float(stripped)


def _is_number(text: str) -> bool:
    try:
        _parse_cell(text)
    except ValueError:
        return False
    return True


def _blank(row) -> bool:
    return not row or not any(cell.strip() for cell in row)


class CsvLineError(TableError):
    """A CSV line that cannot be read: ``line`` is its number as counted by whoever parsed it
    (a Dask worker counts from the start of its byte range; :meth:`at_line` renumbers)."""

    def __init__(self, path, line: int, before: str, after: str):
        super().__init__(f"{path}: {before}{line}{after}")
        self.path, self.line, self.before, self.after = path, line, before, after

    def __reduce__(self):                       # Dask sends it from a worker pickled
        return type(self), (self.path, self.line, self.before, self.after)

    def at_line(self, line: int) -> "CsvLineError":
        return CsvLineError(self.path, line, self.before, self.after)


def csv_format(dialect) -> dict:
    """The csv module's formatting parameters of a sniffed dialect, as plain values (a
    sniffed dialect is a local class, which cannot be sent to a Dask worker)."""
    return {"delimiter": dialect.delimiter, "quotechar": dialect.quotechar,
            "doublequote": dialect.doublequote, "skipinitialspace": dialect.skipinitialspace,
            "escapechar": dialect.escapechar, "quoting": dialect.quoting}


def parse_csv_lines(lines, first_line: int, columns, csv_format: dict, path) -> np.ndarray:
    """The values of CSV ``lines`` (non-blank text lines without their terminators, the first
    numbered ``first_line``), one row per line with a non-blank cell, ``len(columns)`` fields
    each, every cell a :data:`NUMBER` or a :data:`MISSING_TOKENS` token (NaN).

    The grammar of every reader and engine: numpy's C parser reads a block of plain lines
    (:data:`_NOT_PLAIN`), about 20x faster than Python per cell; any other block, or one it
    refuses, is read cell by cell with the csv module, which gives missing values their NaN
    and errors (:class:`CsvLineError`) their line, column and cell.
    """
    delimiter = csv_format["delimiter"]
    plain = (_NOT_PLAIN.search("".join(lines)) is None
             and max(map(len, lines), default=0) <= MAX_FIELD_CHARS)
    if delimiter != " " and plain:
        # loadtxt splits on a single character; ' ' runs vary
        try:
            values = np.loadtxt(lines, delimiter=delimiter, comments=None, quotechar='"',
                                dtype=np.float64, ndmin=2)
            if values.shape == (len(lines), len(columns)):
                return values
        except ValueError:
            pass
    joined = "".join(lines)
    bad = _NOT_UTF8.search(joined)
    if bad is not None:
        i = next(i for i, text in enumerate(lines) if _NOT_UTF8.search(text))
        raise CsvLineError(path, first_line + i, "line ", f" is not UTF-8 text (byte "
                           f"0x{ord(bad.group()) - 0xDC00:02x})")
    rows, reader = [], csv.reader(lines, **csv_format)
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise CsvLineError(path, first_line + reader.line_num - 1, "line ",
                               _unreadable(error)) from None
        if _blank(row):
            continue
        line = first_line + reader.line_num - 1
        if len(row) != len(columns):
            raise CsvLineError(path, line, "line ", f" has {len(row)} fields, expected "
                               f"{len(columns)}")
        try:
            rows.append([_parse_cell(cell) for cell in row])
        except ValueError:
            j = next(j for j, cell in enumerate(row) if not _is_number(cell))
            cell = row[j].strip()
            shown = cell if len(cell) <= 80 else cell[:60] + "..."
            raise CsvLineError(path, line, f"column {columns[j]!r} is not numeric (line ",
                               f" has {shown!r})") from None
    return np.array(rows).reshape(len(rows), len(columns))


def non_blank_lines(handle):
    """The non-blank lines of a text ``handle``, without their terminators ("line N" in
    messages counts these)."""
    return (text.rstrip("\r\n") for text in handle if text.strip())


class CsvReader:
    """A CSV file (UTF-8, a byte-order mark allowed), read ``rows`` lines at a time.

    Rows whose cells are all blank are skipped, as are blank lines, also before the header
    (the first row with a non-blank cell); "line N" in messages counts the non-blank lines,
    the header included. Cells follow :data:`NUMBER` (:func:`parse_csv_lines`, shared with
    the Dask workers). Bytes that are not UTF-8 are decoded as lone surrogates
    (``errors="surrogateescape"``) and refused on their line. ``data_start`` is the byte the
    data rows start at (after the header; 0 without one), where the Dask workers' byte
    ranges begin.
    """

    def __init__(self, path, header: str = "auto", *, content: bytes | None = None):
        self.path = Path(path)
        self._content = content         # the bytes of a CSV held in memory (standard input)
        with self._open(newline="") as handle:
            sample = handle.read(SNIFF_BYTES)
        try:
            self._dialect = csv.Sniffer().sniff(sample, delimiters=",;\t ")
        except csv.Error:
            self._dialect = csv.excel
        self.csv_format = csv_format(self._dialect)
        with self._open(binary=True) as handle:
            end = len(codecs.BOM_UTF8) if handle.read(3) == codecs.BOM_UTF8 else 0
        with self._open(newline="") as handle:
            first, line = None, 0
            for text in handle:         # newline="": each line with its own terminator
                end += len(text.encode("utf-8", errors="surrogateescape"))
                if not text.strip():
                    continue
                line += 1
                try:
                    first = next(csv.reader([text.rstrip("\r\n")], **self.csv_format), [])
                except csv.Error as error:
                    raise TableError(f"{self.path}: line {line}{_unreadable(error)}") from None
                if not _blank(first):
                    break
                first = None
        bad = None if first is None else _NOT_UTF8.search("".join(first))
        if bad is not None:
            raise TableError(f"{self.path}: line {line} is not UTF-8 text (byte "
                             f"0x{ord(bad.group()) - 0xDC00:02x})")
        if first is None:
            raise TableError(f"{self.path}: the file is empty")
        self.has_header = {"yes": True, "no": False}.get(
            header, not all(_is_number(cell) for cell in first))
        self.columns = (tuple(cell.strip() for cell in first) if self.has_header
                        else _generated_names(len(first)))
        check_unique(self.columns, str(self.path))
        # the non-blank lines up to the header and the byte after it (none without a header)
        self._header_lines, self.data_start = (line, end) if self.has_header else (0, 0)
        self.n_rows = None          # known after a pass only

    def _open(self, *, binary: bool = False, newline=None):
        """The file (or the content in memory) as UTF-8 text with lone surrogates for bytes
        that are not UTF-8 (``newline`` as ``open``'s), or as bytes."""
        raw = open(self.path, "rb") if self._content is None else io.BytesIO(self._content)
        if binary:
            return raw
        return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape",
                                newline=newline)

    def blocks(self, rows: int, columns=None):
        columns = list(range(len(self.columns))) if columns is None else list(columns)
        start, line = 0, self._header_lines + 1
        with self._open() as handle:
            lines = itertools.islice(non_blank_lines(handle), self._header_lines, None)
            while True:
                block = list(itertools.islice(lines, rows))
                if not block:
                    break
                values = parse_csv_lines(block, line, self.columns, self.csv_format,
                                         self.path)
                if values.shape[0]:
                    yield start, values[:, columns]
                start, line = start + values.shape[0], line + len(block)
        if start == 0:
            raise TableError(f"{self.path}: the file has a header but no data rows"
                             if self.has_header else f"{self.path}: the file is empty")


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
    """One array member of a zip archive: its header, then its rows as a stream.

    The data after the header must hold exactly the rows the header declares: a member cut
    short (or a damaged archive) is a :class:`TableError` naming the file and the member.
    """

    def __init__(self, archive: zipfile.ZipFile, name: str, source: str):
        self.archive, self.name, self.source = archive, name, source
        with archive.open(name) as stream:
            self.shape, self.fortran_order, self.dtype = self._header(stream)
        _check_numeric(self.dtype, self.shape, source)
        self.n_columns = 1 if len(self.shape) == 1 else self.shape[1]

    def _header(self, stream):
        try:
            version = np.lib.format.read_magic(stream)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            return read(stream)
        except (ValueError, *_ZIP_ERRORS) as error:
            raise TableError(f"{self.source}: member {self.name!r} is not a .npy array "
                             f"({error})") from None

    def _read(self, stream, rows: int) -> np.ndarray:
        """The next ``rows`` rows' values (in the file's layout: rows x n_columns for C
        order, the whole array as n_columns x rows for Fortran order), as stored."""
        count = rows * self.n_columns
        try:
            raw = stream.read(count * self.dtype.itemsize)
        except _ZIP_ERRORS as error:
            raise TableError(f"{self.source}: member {self.name!r} is damaged ({error})") \
                from None
        if len(raw) != count * self.dtype.itemsize:
            raise TableError(
                f"{self.source}: member {self.name!r} is cut short: its header declares shape "
                f"{self.shape} ({self.shape[0] * self.n_columns * self.dtype.itemsize} bytes "
                f"of data) but it holds fewer")
        return np.frombuffer(raw, dtype=self.dtype)

    def blocks(self, rows: int):
        """(rows x n_columns) float64 blocks in order."""
        with self.archive.open(self.name) as stream:
            self._header(stream)
            if self.fortran_order:          # rows are not contiguous: read it whole
                whole = self._read(stream, self.shape[0]).reshape(self.n_columns,
                                                                  self.shape[0]).T
                for start in range(0, self.shape[0], rows):
                    yield np.array(whole[start:start + rows], dtype=np.float64)
                return
            for start in range(0, self.shape[0], rows):
                count = min(rows, self.shape[0] - start)
                yield self._read(stream, count).reshape(count, self.n_columns) \
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
def parquet_values(table, names) -> np.ndarray:
    """The columns ``names`` of a pyarrow table as float64 (rows x len(names)), nulls as NaN.

    An integer is rounded to the nearest float64, as the CSV reader rounds a decimal number
    (above 2^53 not every integer is a float64: 2^53 + 1 reads as 2^53 in every format);
    pyarrow's default "safe" cast would refuse it instead.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    return np.column_stack([
        pc.cast(table.column(name), pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        for name in names]).reshape(table.num_rows, len(names))


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
                yield start, parquet_values(part, names)
                start += part.num_rows
            del table
