"""Reading and writing the tables the command line works on: CSV, .npy/.npz, Parquet.

:func:`read_table` reads a whole file through its reader (:mod:`scalegp.data.readers`, which the
streaming sources of :mod:`scalegp.data.sources` use block by block), so both see the same
values, header rule and errors. Every problem is reported as a :class:`TableError` whose
message names the file, the column or row, what was expected and what was found.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

import numpy as np

from .._output import CSV_SUFFIXES, write_atomically
from .readers import (HEADER_MODES, HEADER_RULE, MISSING_TOKENS, TableError, check_unique,
                      open_reader)

__all__ = ["Table", "TableError", "read_table", "write_csv", "write_csv_blocks", "write_csv_rows",
           "HEADER_MODES", "HEADER_RULE", "MISSING_TOKENS"]

#: Rows a whole-table read takes per block.
READ_ROWS = 65536


@dataclass(frozen=True)
class Table:
    """A numeric table: column names and a float64 array (NaN marks missing values)."""

    columns: tuple[str, ...]
    values: np.ndarray
    source: str
    #: False when the columns are generated names (x0, x1, ...), not read from the file.
    has_header: bool = True

    def __post_init__(self):
        check_unique(self.columns, self.source)


def read_table(path, header: str = "auto") -> Table:
    """Read CSV, .npy (1-D or 2-D), .npz (one 2-D array, or X and y) or Parquet whole.

    ``header`` ("auto", "yes" or "no") says how a CSV file's first line is read
    (:data:`HEADER_RULE`); other formats ignore it.
    """
    reader = open_reader(path, header)
    values = np.vstack([block for _, block in reader.blocks(READ_ROWS)])
    return Table(reader.columns, values, str(reader.path), has_header=reader.has_header)


def write_csv(path, columns, values: np.ndarray) -> None:
    """Write a header and rows (UTF-8) atomically: :func:`write_csv_blocks` of one block."""
    write_csv_blocks(path, columns, [values])


def write_csv_blocks(path, columns, blocks, *, inputs=()) -> int:
    """Write a header and the rows of ``blocks`` (an iterable of 2-D arrays, consumed as it is
    written, so a long prediction never is one array) atomically, by
    :func:`scalegp._output.write_atomically`; returns the number of rows written.

    ``path`` must end in ``.csv``, be a regular file or missing, and not be one of ``inputs``;
    see :mod:`scalegp._output`. Values are written with ``repr`` (they read back exactly).
    """
    written = 0

    def write(handle):
        nonlocal written
        written = write_csv_rows(handle, columns, blocks)

    write_atomically(path, write, binary=False, inputs=inputs, suffixes=CSV_SUFFIXES)
    return written


def write_csv_rows(handle, columns, blocks, *, lineterminator: str = "\r\n") -> int:
    """Write a header and the rows of ``blocks`` to an open text stream (a file of
    :func:`write_csv_blocks`, or standard output with ``lineterminator="\\n"``); returns
    the number of rows written. Values are written with ``repr`` (they read back exactly)."""
    writer = csv.writer(handle, lineterminator=lineterminator)
    writer.writerow(columns)
    written = 0
    for values in blocks:
        writer.writerows((repr(float(v)) for v in row) for row in values)
        written += len(values)
    return written
