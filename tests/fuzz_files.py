"""Malformed data files for the fuzz suite: each mutation of a clean table says what a
correct reader must make of it.

A mutation is ``mutate(names, values) -> Mutant``: the file's bytes, and ``expected``, the
table a correct reader returns (the rows that remain, as float64), or None when the file must
be refused. ``kind`` is "valid" (the file follows the documented grammar: it must be read,
docs/data-sources.md), "either" (a reader may refuse it, but if it reads it, it must read
``expected``: e.g. ``1_000`` or non-ASCII digits, on which issue 24 section 5 asks for one
grammar) or "invalid" (it must be refused). ``extra`` are flags the file needs
(``--drop-missing``).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field

import numpy as np

VALID, EITHER, INVALID = "valid", "either", "invalid"
ARABIC_DIGITS = "٠١٢٣٤٥٦٧٨٩"


@dataclass
class Mutant:
    content: bytes
    expected: object            # an array, or None: must be refused
    kind: str
    header: bool = True         # whether the file carries the column names
    extra: list = field(default_factory=list)


def table(seed: int, n: int, n_inputs: int, target: bool):
    """(names, values): inputs on [-2, 2], and a smooth noisy target as the last column."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, n_inputs))
    names = ["a", "b", "c", "d"][:n_inputs]
    if not target:
        return names, X
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] + 0.05 * rng.standard_normal(n)
    return names + ["y"], np.column_stack([X, y])


# ------------------------------------------------------------------------------------ CSV


def csv_text(names, values, sep=",", newline="\n", header=True, cell=repr):
    lines = [sep.join(names)] if header else []
    lines += [sep.join(cell(float(v)) for v in row) for row in values]
    return newline.join(lines) + newline


def _with_cell(names, values, row, column, text, **kwargs):
    """The CSV of ``values`` with the cell (row, column) written as ``text``."""
    cells = [[repr(float(v)) for v in r] for r in values]
    cells[row][column] = text
    lines = [",".join(names)] + [",".join(r) for r in cells]
    return "\n".join(lines) + "\n"


def _with_line(names, values, row, change):
    """The CSV of ``values`` with the line of data row ``row`` replaced by ``change(line)``."""
    lines = csv_text(names, values).splitlines()
    lines[row + 1] = change(lines[row + 1])
    return "\n".join(lines) + "\n"


def _replaced(values, row, column, value):
    copy = values.copy()
    copy[row, column] = value
    return copy


def _dropped(values, row):
    return np.delete(values, row, axis=0)


def csv_mutations():
    """{name: mutate(names, values) -> Mutant} of CSV files."""
    u = lambda text: text.encode("utf-8")     # noqa: E731
    m = {}
    m["clean"] = lambda n, v: Mutant(u(csv_text(n, v)), v, VALID)
    m["crlf line ends"] = lambda n, v: Mutant(u(csv_text(n, v, newline="\r\n")), v, VALID)
    m["old-mac line ends"] = lambda n, v: Mutant(u(csv_text(n, v, newline="\r")), v, EITHER)
    m["byte-order mark"] = lambda n, v: Mutant(b"\xef\xbb\xbf" + u(csv_text(n, v)), v, VALID)
    m["semicolons"] = lambda n, v: Mutant(u(csv_text(n, v, sep=";")), v, VALID)
    m["tabs"] = lambda n, v: Mutant(u(csv_text(n, v, sep="\t")), v, VALID)
    m["spaces around cells"] = lambda n, v: Mutant(u(csv_text(n, v, sep=" ,  ")), v, VALID)
    m["blank lines"] = lambda n, v: Mutant(u(csv_text(n, v).replace("\n", "\n\n   \n")), v,
                                           VALID)
    m["no header"] = lambda n, v: Mutant(u(csv_text(n, v, header=False)), v, VALID,
                                         header=False)
    m["quoted numbers"] = lambda n, v: Mutant(
        u(csv_text(n, v, cell=lambda x: f'"{x!r}"')), v, VALID)
    m["exponents and signs"] = lambda n, v: Mutant(
        u(csv_text(n, v, cell=lambda x: f"{x:+.17e}")), v, VALID)
    m["a row of empty cells"] = lambda n, v: Mutant(
        u(csv_text(n, v).replace("\n", "\n" + "," * (len(n) - 1) + "\n", 1)), v, VALID)
    m["a row of empty cells before the header"] = lambda n, v: Mutant(
        u("," * (len(n) - 1) + "\n" + csv_text(n, v)), v, VALID)
    m["ragged long row"] = lambda n, v: Mutant(
        u(_with_line(n, v, 2, lambda line: line + ",1.0")), None, INVALID)
    m["ragged short row"] = lambda n, v: Mutant(
        u(_with_line(n, v, 3, lambda line: line.split(",", 1)[1])), None, INVALID)
    # an extra unnamed column, all missing: not an input of predict, an input of fit
    m["trailing commas"] = lambda n, v: Mutant(u(csv_text(n, v).replace("\n", ",\n")), v,
                                               EITHER)
    m["text cell"] = lambda n, v: Mutant(u(_with_cell(n, v, 4, 0, "abc")), None, INVALID)
    m["hex float"] = lambda n, v: Mutant(u(_with_cell(n, v, 4, 0, "0x1p3")), None, INVALID)
    m["missing token"] = lambda n, v: Mutant(u(_with_cell(n, v, 5, 0, "NA")), None, INVALID)
    m["missing token, --drop-missing"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 5, 0, "NA")), _dropped(v, 5), VALID, extra=["--drop-missing"])
    m["nan"] = lambda n, v: Mutant(u(_with_cell(n, v, 2, 1, "nan")), None, INVALID)
    m["inf"] = lambda n, v: Mutant(u(_with_cell(n, v, 2, 0, "-inf")), None, INVALID)
    m["inf, --drop-missing"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 2, 0, "inf")), _dropped(v, 2), VALID, extra=["--drop-missing"])
    m["overflowing literal"] = lambda n, v: Mutant(u(_with_cell(n, v, 6, 0, "1e400")), None,
                                                   INVALID)
    m["underflowing literal"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 6, 0, "1e-400")), _replaced(v, 6, 0, 0.0), VALID)
    m["subnormal"] = lambda n, v: Mutant(u(_with_cell(n, v, 6, 0, "5e-324")),
                                         _replaced(v, 6, 0, 5e-324), VALID)
    m["extreme magnitude"] = lambda n, v: Mutant(u(_with_cell(n, v, 7, 0, "1e300")),
                                                 _replaced(v, 7, 0, 1e300), EITHER)
    m["a far row"] = lambda n, v: Mutant(u(_with_cell(n, v, 7, 0, "1e9")),
                                         _replaced(v, 7, 0, 1e9), VALID)
    m["long zero-padded number"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 1, 0, "0" * 5000 + "1.5")), _replaced(v, 1, 0, 1.5), VALID)
    m["field over the csv module's limit"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 1, 0, "0" * 140_000 + "1.5")), _replaced(v, 1, 0, 1.5), EITHER)
    m["huge text field"] = lambda n, v: Mutant(u(_with_cell(n, v, 1, 0, "x" * 140_000)), None,
                                               INVALID)
    m["underscore digits"] = lambda n, v: Mutant(u(_with_cell(n, v, 8, 0, "1_000")),
                                                 _replaced(v, 8, 0, 1000.0), EITHER)
    m["arabic-indic digits"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 8, 0, ARABIC_DIGITS[1] + ARABIC_DIGITS[2])),
        _replaced(v, 8, 0, 12.0), EITHER)
    m["fullwidth digits"] = lambda n, v: Mutant(u(_with_cell(n, v, 8, 0, "３")),
                                                _replaced(v, 8, 0, 3.0), EITHER)
    m["decimal comma"] = lambda n, v: Mutant(u(_with_cell(n, v, 9, 0, '"1,5"')), None, INVALID)
    m["duplicate header"] = lambda n, v: Mutant(
        u(csv_text([n[0]] + n[:-1] if len(n) > 2 else [n[0], n[0]], v)), None, INVALID)
    m["header only"] = lambda n, v: Mutant(u(",".join(n) + "\n"), None, INVALID)
    m["empty"] = lambda n, v: Mutant(b"", None, INVALID)
    m["only blank lines"] = lambda n, v: Mutant(b"\n  \n\t\n", None, INVALID)
    m["invalid utf-8"] = lambda n, v: Mutant(
        u(_with_cell(n, v, 3, 0, "<>")).replace(b"<>", b"\xff\xfe"), None, INVALID)
    m["nul byte"] = lambda n, v: Mutant(u(_with_cell(n, v, 3, 0, "1\x002")), None, INVALID)
    m["binary garbage"] = lambda n, v: Mutant(bytes(range(256)) * 4, None, INVALID)
    m["one row"] = lambda n, v: Mutant(u(csv_text(n, v[:1])), v[:1], EITHER)
    return m


# ------------------------------------------------------------------------------ .npy / .npz


def npy_bytes(array, version=None, allow_pickle=False):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asanyarray(array), version=version,
                              allow_pickle=allow_pickle)
    return buffer.getvalue()


def npy_claiming(array, n_rows):
    """An .npy member whose header declares ``n_rows`` rows over the data of ``array``."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {
        "descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
        "shape": (n_rows,) + array.shape[1:]})
    return buffer.getvalue() + np.ascontiguousarray(array).tobytes()


def zip_bytes(members, compression=zipfile.ZIP_STORED):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in members:
            archive.writestr(name, content)
    return buffer.getvalue()


def _split(values, target):
    """(X, y) members of a fit table, or the single member X of a prediction table."""
    return (values[:, :-1], values[:, -1]) if target else (values, None)


def npz_of(values, target, X=None, y=None, compression=zipfile.ZIP_STORED, extra=()):
    X0, y0 = _split(values, target)
    X = npy_bytes(X0) if X is None else X
    members = [("X.npy", X)]
    if target:
        members.append(("y.npy", npy_bytes(y0) if y is None else y))
    return zip_bytes(members + list(extra), compression)


def npz_mutations(target: bool):
    """{name: mutate(names, values) -> Mutant} of .npz archives (X and y, or X alone)."""
    m = {}
    m["clean"] = lambda n, v: Mutant(npz_of(v, target), v, VALID, header=False)
    m["deflated"] = lambda n, v: Mutant(npz_of(v, target, compression=zipfile.ZIP_DEFLATED), v,
                                        VALID, header=False)
    m["fortran-ordered X"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(np.asfortranarray(_split(v, target)[0]))), v, VALID,
        header=False)
    m["fortran-ordered, deflated"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(np.asfortranarray(_split(v, target)[0])),
               compression=zipfile.ZIP_DEFLATED), v, VALID, header=False)
    m["npy format 2.0"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0], version=(2, 0))), v, VALID,
        header=False)
    m["big-endian"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0].astype(">f8"))), v, VALID,
        header=False)
    m["float16"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0].astype(np.float16))),
        _with_inputs(v, target, lambda X: X.astype(np.float16).astype(float)), VALID,
        header=False)
    m["int64 above 2**53"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_big_ints(_split(v, target)[0]))),
        _with_inputs(v, target, lambda X: _big_ints(X).astype(float)), EITHER, header=False)
    m["bool inputs"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0] > 0)),
        _with_inputs(v, target, lambda X: (X > 0).astype(float)), EITHER, header=False)
    m["complex"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0].astype(complex))), None, INVALID,
        header=False)
    m["object (pickled)"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0].astype(object), allow_pickle=True)),
        None, INVALID, header=False)
    m["3-D X"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_bytes(_split(v, target)[0][:, :, None])), None, INVALID,
        header=False)
    m["no rows"] = lambda n, v: Mutant(npz_of(v[:0], target), None, INVALID, header=False)
    m["header claims more rows"] = lambda n, v: Mutant(
        npz_of(v, target, X=npy_claiming(_split(v, target)[0], len(v) + 5)), None, INVALID,
        header=False)
    m["nan"] = lambda n, v: Mutant(npz_of(_replaced(v, 3, 0, np.nan), target), None, INVALID,
                                   header=False)
    m["truncated archive"] = lambda n, v: Mutant(npz_of(v, target)[:-40], None, INVALID,
                                                 header=False)
    m["not a zip"] = lambda n, v: Mutant(b"PK\x03\x04 not really", None, INVALID, header=False)
    m["empty archive"] = lambda n, v: Mutant(zip_bytes([]), None, INVALID, header=False)
    m["member not an array"] = lambda n, v: Mutant(
        npz_of(v, target, X=b"\x93NUMPY garbage"), None, INVALID, header=False)
    if target:
        m["an extra member"] = lambda n, v: Mutant(
            npz_of(v, target, extra=[("z.npy", npy_bytes(np.arange(3.0)))]), v, VALID,
            header=False)
        m["y of two columns"] = lambda n, v: Mutant(
            npz_of(v, target, y=npy_bytes(np.column_stack([v[:, -1], v[:, -1]]))), None,
            INVALID, header=False)
        m["y as a column"] = lambda n, v: Mutant(npz_of(v, target, y=npy_bytes(v[:, -1:])), v,
                                                 EITHER, header=False)
        m["y shorter than X"] = lambda n, v: Mutant(npz_of(v, target, y=npy_bytes(v[:-1, -1])),
                                                    None, INVALID, header=False)
        m["nan in y"] = lambda n, v: Mutant(npz_of(_replaced(v, 4, -1, np.nan), target), None,
                                            INVALID, header=False)
        m["other member names"] = lambda n, v: Mutant(
            zip_bytes([("p.npy", npy_bytes(v[:, :-1])), ("q.npy", npy_bytes(v[:, -1]))]), None,
            INVALID, header=False)
    return m


def _big_ints(X):
    return (2**60 + np.round(X * 1000)).astype(np.int64)


def _with_inputs(values, target, change):
    if not target:
        return change(values)
    return np.column_stack([change(values[:, :-1]), values[:, -1]])


def npy_mutations():
    """{name: mutate(names, values) -> Mutant} of .npy arrays (the whole table)."""
    m = {}
    m["clean"] = lambda n, v: Mutant(npy_bytes(v), v, VALID, header=False)
    m["fortran-ordered"] = lambda n, v: Mutant(npy_bytes(np.asfortranarray(v)), v, VALID,
                                               header=False)
    m["big-endian"] = lambda n, v: Mutant(npy_bytes(v.astype(">f8")), v, VALID, header=False)
    m["float32"] = lambda n, v: Mutant(npy_bytes(v.astype(np.float32)),
                                       v.astype(np.float32).astype(float), VALID, header=False)
    m["3-D"] = lambda n, v: Mutant(npy_bytes(v[:, :, None]), None, INVALID, header=False)
    m["no rows"] = lambda n, v: Mutant(npy_bytes(v[:0]), None, INVALID, header=False)
    m["object (pickled)"] = lambda n, v: Mutant(npy_bytes(v.astype(object), allow_pickle=True),
                                                None, INVALID, header=False)
    m["strings"] = lambda n, v: Mutant(npy_bytes(v.astype(str)), None, INVALID, header=False)
    m["truncated data"] = lambda n, v: Mutant(npy_bytes(v)[:-17], None, INVALID, header=False)
    m["header claims more rows"] = lambda n, v: Mutant(npy_claiming(v, len(v) + 5), None,
                                                       INVALID, header=False)
    m["nan"] = lambda n, v: Mutant(npy_bytes(_replaced(v, 3, 0, np.nan)), None, INVALID,
                                   header=False)
    m["not an npy"] = lambda n, v: Mutant(b"\x93NUMPY\x01\x00garbage", None, INVALID,
                                          header=False)
    return m


# ------------------------------------------------------------------------------ Parquet


def parquet_bytes(columns: dict, row_group_size=None):
    import pyarrow as pa
    import pyarrow.parquet as pq
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer, row_group_size=row_group_size)
    return buffer.getvalue()


def parquet_mutations():
    """{name: mutate(names, values) -> Mutant} of Parquet files."""
    import pyarrow as pa

    def plain(n, v, **changes):
        columns = {name: pa.array(v[:, j]) for j, name in enumerate(n)}
        columns.update(changes)
        return columns

    m = {}
    m["clean"] = lambda n, v: Mutant(parquet_bytes(plain(n, v)), v, VALID)
    m["row groups of 5"] = lambda n, v: Mutant(parquet_bytes(plain(n, v), row_group_size=5), v,
                                               VALID)
    m["float32 column"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array(v[:, 0].astype(np.float32)))),
        _replaced_column(v, 0, v[:, 0].astype(np.float32).astype(float)), VALID)
    m["int64 above 2**53"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array(_big_ints(v[:, :1])[:, 0]))),
        _replaced_column(v, 0, _big_ints(v[:, :1])[:, 0].astype(float)), EITHER)
    m["null"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array([None] + v[1:, 0].tolist()))), None, INVALID)
    m["null, --drop-missing"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array([None] + v[1:, 0].tolist()))), _dropped(v, 0),
        VALID, extra=["--drop-missing"])
    m["string column"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array([str(x) for x in v[:, 0]]))), None, INVALID)
    m["bool column"] = lambda n, v: Mutant(
        parquet_bytes(plain(n, v, a=pa.array(v[:, 0] > 0))),
        _replaced_column(v, 0, (v[:, 0] > 0).astype(float)), EITHER)
    m["no rows"] = lambda n, v: Mutant(parquet_bytes(plain(n, v[:0])), None, INVALID)
    m["truncated"] = lambda n, v: Mutant(parquet_bytes(plain(n, v))[:-30], None, INVALID)
    m["not parquet"] = lambda n, v: Mutant(b"PAR1 not really PAR1", None, INVALID)
    m["duplicate names"] = lambda n, v: Mutant(_duplicate_parquet(n, v), None, INVALID)
    return m


def _replaced_column(values, column, new):
    copy = values.copy()
    copy[:, column] = new
    return copy


def _duplicate_parquet(names, values):
    import pyarrow as pa
    import pyarrow.parquet as pq
    arrays = [pa.array(values[:, j]) for j in range(values.shape[1])]
    table = pa.Table.from_arrays(arrays, names=[names[0]] + list(names[:-1]))
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def mutations(suffix: str, target: bool) -> dict:
    """The mutations of files with ``suffix`` (a fit table when ``target``)."""
    if suffix == ".csv":
        return csv_mutations()
    if suffix == ".npz":
        return npz_mutations(target)
    if suffix == ".npy":
        return npy_mutations()
    return parquet_mutations()
