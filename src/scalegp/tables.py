"""Reading and writing the tables the command line works on: CSV, .npy/.npz, Parquet.

Every problem is reported as a :class:`TableError` whose message names the file, the column
or row, what was expected and what was found.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._output import CSV_SUFFIXES, write_atomically

MISSING_TOKENS = {"", "na", "nan", "null", "none", "?"}
#: How a CSV file's first line is read (``read_table(..., header=...)``).
HEADER_MODES = ("auto", "yes", "no")
#: The rule, as the command line's --help states it.
HEADER_RULE = ("CSV header row: 'auto' (default) reads the first line as column names when "
               "at least one of its cells is not a number, and as data otherwise; 'yes' "
               "always reads it as names, 'no' always as data (columns x0, x1, ...). .npy and "
               ".npz arrays have no names (x0, x1, ...); Parquet columns keep theirs. Column "
               "names must be unique.")


class TableError(ValueError):
    """A data file that cannot be used as a numeric table."""


@dataclass(frozen=True)
class Table:
    """A numeric table: column names and a float64 array (NaN marks missing values)."""

    columns: tuple[str, ...]
    values: np.ndarray
    source: str
    #: False when the columns are generated names (x0, x1, ...), not read from the file.
    has_header: bool = True

    def __post_init__(self):
        seen = {}
        for j, name in enumerate(self.columns):
            if name in seen:
                raise TableError(
                    f"{self.source}: duplicate column name {name!r} (columns {seen[name]} "
                    f"and {j}, 0-based); column names must be unique"
                )
            seen[name] = j

    def column_index(self, key: str) -> int:
        """A column by name, or by 0-based index given as digits."""
        if key in self.columns:
            return self.columns.index(key)
        if key.lstrip("-").isdigit():
            index = int(key)
            if -len(self.columns) <= index < len(self.columns):
                return index % len(self.columns)
        raise TableError(
            f"{self.source}: no column {key!r} (columns: {', '.join(self.columns)}; "
            "a 0-based index also works)"
        )

    def split_target(self, target: str, *, exclude=()) -> tuple[np.ndarray, np.ndarray,
                                                                 tuple[str, ...]]:
        """(X, y, input column names) with ``target`` as y; the columns ``exclude`` (names or
        indices, e.g. per-row noise variances) are not inputs either."""
        index = self.column_index(target)
        excluded = {index, *(self.column_index(key) for key in exclude)}
        keep = [j for j in range(len(self.columns)) if j not in excluded]
        if not keep:
            raise TableError(f"{self.source}: only the target column {target!r}"
                             f"{' and the excluded columns' if exclude else ''}; no inputs left")
        return (self.values[:, keep], self.values[:, index],
                tuple(self.columns[j] for j in keep))

    def select(self, names) -> np.ndarray:
        """The columns ``names`` in that order (used at prediction time)."""
        missing = [name for name in names if name not in self.columns]
        if missing:
            raise TableError(
                f"{self.source}: missing input column(s) {', '.join(missing)} that the model "
                f"was trained on (found: {', '.join(self.columns)})"
            )
        return self.values[:, [self.columns.index(name) for name in names]]


def missing_rows(values: np.ndarray) -> np.ndarray:
    """Indices of rows with a NaN or inf."""
    return np.flatnonzero(~np.all(np.isfinite(values), axis=1))


def read_table(path, header: str = "auto") -> Table:
    """Read CSV, .npy (2-D), .npz (one 2-D array, or X and y) or Parquet.

    ``header`` ("auto", "yes" or "no") says how a CSV file's first line is read
    (:data:`HEADER_RULE`); other formats ignore it.
    """
    if header not in HEADER_MODES:
        raise TableError(f"header must be one of {', '.join(HEADER_MODES)}, got {header!r}")
    path = Path(path)
    if not path.exists():
        raise TableError(f"{path}: no such file")
    if path.is_dir():
        raise TableError(f"{path}: is a folder, expected a data file")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return _from_array(_load_npy(path), str(path))
    if suffix == ".npz":
        return _read_npz(path)
    if suffix in (".parquet", ".pq"):
        return _read_parquet(path)
    return _read_csv(path, header)


def _load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as error:
        raise TableError(f"{path}: not a numeric .npy array ({error})") from None


def _from_array(array: np.ndarray, source: str, names=None) -> Table:
    if array.dtype.kind not in "biuf":
        raise TableError(f"{source}: expected a numeric array, got dtype {array.dtype}")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] == 0:
        raise TableError(f"{source}: expected a non-empty 2-D array, got shape {array.shape}")
    names = names or tuple(f"x{j}" for j in range(array.shape[1]))
    return Table(tuple(names), array.astype(np.float64), source, has_header=False)


def _read_npz(path: Path) -> Table:
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except (ValueError, OSError) as error:
        raise TableError(f"{path}: not a readable .npz archive ({error})") from None
    if set(arrays) >= {"X", "y"}:
        X = np.atleast_2d(arrays["X"].T).T if arrays["X"].ndim == 1 else arrays["X"]
        y = arrays["y"].reshape(-1, 1)
        if X.shape[0] != y.shape[0]:
            raise TableError(f"{path}: X has {X.shape[0]} rows but y has {y.shape[0]}")
        names = tuple(f"x{j}" for j in range(X.shape[1])) + ("y",)
        return _from_array(np.hstack([X, y]), str(path), names)
    if len(arrays) == 1:
        return _from_array(next(iter(arrays.values())), str(path))
    raise TableError(f"{path}: expected arrays 'X' and 'y' or a single 2-D array, "
                     f"got {sorted(arrays)}")


def _read_parquet(path: Path) -> Table:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TableError(
            f"{path}: reading Parquet needs pyarrow: pip install 'scalegp[parquet]'"
        ) from None
    table = pq.read_table(path)
    columns = []
    for name in table.column_names:
        column = table.column(name).to_numpy(zero_copy_only=False)
        if column.dtype.kind not in "biuf":
            raise TableError(f"{path}: column {name!r} is not numeric (type {column.dtype})")
        columns.append(column.astype(np.float64))
    if not columns or len(columns[0]) == 0:
        raise TableError(f"{path}: the table is empty")
    return Table(tuple(table.column_names), np.column_stack(columns), str(path))


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


def _read_csv(path: Path, header_mode: str) -> Table:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        sample = handle.read(65536)
        handle.seek(0)
        try:
            dialect = csv.Sniffer().sniff(sample, delimiters=",;\t ")
        except csv.Error:
            dialect = csv.excel
        rows = [row for row in csv.reader(handle, dialect) if row and any(c.strip() for c in row)]
    if not rows:
        raise TableError(f"{path}: the file is empty")
    has_header = {"yes": True, "no": False}.get(
        header_mode, not all(_is_number(cell) for cell in rows[0]))
    header = ([cell.strip() for cell in rows[0]] if has_header
              else [f"x{j}" for j in range(len(rows[0]))])
    body = rows[1:] if has_header else rows
    if not body:
        raise TableError(f"{path}: the file has a header but no data rows")
    first_line = 2 if has_header else 1
    values = np.empty((len(body), len(header)))
    for i, row in enumerate(body):
        if len(row) != len(header):
            raise TableError(
                f"{path}: line {first_line + i} has {len(row)} fields, expected {len(header)}"
            )
        for j, cell in enumerate(row):
            try:
                values[i, j] = _parse_cell(cell)
            except ValueError:
                raise TableError(
                    f"{path}: column {header[j]!r} is not numeric (line {first_line + i} "
                    f"has {cell.strip()!r})"
                ) from None
    return Table(tuple(header), values, str(path), has_header=has_header)


def write_csv(path, columns, values: np.ndarray) -> None:
    """Write a header and rows (UTF-8) atomically, by :func:`scalegp._output.write_atomically`.

    ``path`` must end in ``.csv`` and be a regular file or missing; see :mod:`scalegp._output`.
    """
    def write(handle):
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows((repr(float(v)) for v in row) for row in values)

    write_atomically(path, write, binary=False, suffixes=CSV_SUFFIXES)
