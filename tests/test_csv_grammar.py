"""One grammar for every CSV reader and engine (issue 24, section 5): the same file gives the
same rows, or the same error, through the serial reader and through the Dask workers.

Before, the Dask path (pandas' parser) truncated a ragged row ``1,2,3,4`` to three fields and
trained on it, while the serial reader refused it; and the serial reader's cell-by-cell
fallback (Python's ``float``) took ``1_000`` and non-ASCII digits, which pandas refused. Both
now parse with :func:`scalegp.data.readers.parse_csv_lines`: numpy's C parser on plain blocks, the
grammar :data:`scalegp.data.readers.NUMBER` cell by cell otherwise. The tests run a catalogue of
malformed files through both paths (the Dask one in several byte ranges, so that a bad line
falls in a later worker's range and must be renumbered) and demand identical rows or an
identical message; and they check that numpy's parser and the grammar accept the same cells.
"""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scalegp.data.readers import (NUMBER, CsvLineError, TableError, _parse_cell, csv_format,
                             parse_csv_lines)
from scalegp.data.sources import open_source, to_arrays

dask = pytest.importorskip("dask")
from scalegp.data.distributed import _BlockLineError, _line_start, dask_file_source  # noqa: E402

HEADER = "a,b,y\n"
GOOD = "".join(f"{0.1 * i!r},{1.5 - 0.2 * i!r},{float(np.sin(i))!r}\n" for i in range(12))

#: name -> the file's bytes: ragged and short rows, the cells Python's float takes and numpy
#: does not, empty fields, quotes, inf and nan spellings, byte-order mark, line ends, blank
#: lines, a field over the csv module's limit, bytes that are not UTF-8.
CASES = {
    "clean": HEADER + GOOD,
    "ragged-row": HEADER + GOOD + "1,2,3,4\n" + GOOD,
    "short-row": HEADER + GOOD + "1,2\n" + GOOD,
    "trailing-delimiter": HEADER + GOOD + "1,2,3,\n" + GOOD,
    "underscore": HEADER + GOOD + "1_000,2,3\n" + GOOD,
    "arabic-indic-digit": HEADER + GOOD + "\u0661,2,3\n" + GOOD,
    "fullwidth-digit": HEADER + GOOD + "\uff11,2,3\n" + GOOD,
    "devanagari-in-header-file": "a,b,y\n" + "\u0967.5,2,3\n" + GOOD,
    "empty-field": HEADER + GOOD + "1,,3\n" + GOOD,
    "missing-tokens": HEADER + GOOD + "NA,null,?\n" + GOOD,
    "quoted-numbers": HEADER + '"1.5","2",3\n' + GOOD,
    "quoted-text": HEADER + GOOD + '"abc",2,3\n',
    "inf-spellings": HEADER + GOOD + "Infinity,-inf,+INF\n",
    "nan-spellings": HEADER + GOOD + "NaN,-nan,nAn\n",
    "exponents": HEADER + "1e5,1E-5,+.5e+3\n5.,.5,-0\n" + GOOD,
    "hex": HEADER + GOOD + "0x10,2,3\n",
    "spaces-around": HEADER + " 1 ,\t2\t, 3\n" + GOOD,
    "non-breaking-space": HEADER + "\u00a01,2,3\n" + GOOD,
    "bom": "\ufeff" + HEADER + GOOD,
    "bom-no-header": "\ufeff" + GOOD,
    "crlf": (HEADER + GOOD).replace("\n", "\r\n"),
    "cr-only": (HEADER + GOOD).replace("\n", "\r"),
    "blank-lines": HEADER + "\n\n" + GOOD.replace("\n", "\n  \n", 3),
    "blank-cells-row": HEADER + GOOD + ",,\n" + GOOD,
    "blank-cells-before-header": ",,\n" + HEADER + GOOD,
    "blank-cells-before-header-bom-crlf": ("\ufeff,,\n , ,\n" + HEADER + GOOD).replace("\n",
                                                                                    "\r\n"),
    # more bytes than a worker's range before the header
    "many-blank-cell-rows-before-header": ",,\n" * 600 + HEADER + GOOD,
    "blank-cells-before-header-bad-line": ",,\n" + HEADER + GOOD + GOOD + "1_000,2,3\n",
    "semicolons": (HEADER + GOOD).replace(",", ";"),
    "long-field": HEADER + GOOD + "1" * 140_000 + ",2,3\n",
    "not-utf8": HEADER.encode() + GOOD.encode() + b"1,\xff\xfe,3\n" + GOOD.encode(),
    "text-header-only": HEADER,
}


def target_of(name):
    return "2" if name == "bom-no-header" else "y"


def outcome(function):
    """("rows", X, y) or ("error", class, message) of reading a file."""
    try:
        X, y = function()
    except (TableError, ValueError) as error:
        # the two paths word the advice after the first ';' differently (the CLI flag)
        return ("error", type(error).__name__, str(error).split(";")[0])
    return ("rows", np.asarray(X).tolist(), np.asarray(y).tolist())


def read_with_dask(path, target):
    with dask.config.set(scheduler="synchronous"):
        source, _, _ = dask_file_source(path, target, block_rows=3)
        return source.X.compute(), source.y.compute()


@pytest.mark.parametrize("name", list(CASES))
def test_the_serial_reader_and_the_dask_workers_agree(name, tmp_path):
    path = tmp_path / f"{name}.csv"
    content = CASES[name]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    target = target_of(name)
    ours = outcome(lambda: serial_read(path, target))
    theirs = outcome(lambda: read_with_dask(path, target))
    assert ours == theirs


def serial_read(path, target):
    X, y, _ = to_arrays(open_source(path, target))
    return X, y


def test_the_cases_cover_refusals_and_readings(tmp_path):
    """The catalogue's expected verdicts on the serial path (the other test makes Dask agree):
    so that agreeing on a wrong verdict cannot pass."""
    refused = {"ragged-row", "short-row", "trailing-delimiter", "underscore",
               "arabic-indic-digit", "fullwidth-digit", "devanagari-in-header-file",
               "empty-field", "missing-tokens", "quoted-text", "inf-spellings",
               "nan-spellings", "hex", "non-breaking-space", "long-field", "not-utf8",
               "text-header-only", "blank-cells-row", "blank-cells-before-header-bad-line"}
    for name, content in CASES.items():
        path = tmp_path / f"{name}.csv"
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        target = target_of(name)
        verdict = outcome(lambda: serial_read(path, target))
        if name == "blank-cells-row":           # a row of blank cells is skipped
            assert verdict[0] == "rows", name
            continue
        assert (verdict[0] == "error") == (name in refused), (name, verdict)
    path = tmp_path / "ragged-row.csv"
    with pytest.raises(TableError, match=r"ragged-row.csv: line 14 has 4 fields, expected 3"):
        serial_read(path, "y")
    with pytest.raises(TableError, match=r"column 'a' is not numeric \(line 14 has '1_000'\)"):
        serial_read(tmp_path / "underscore.csv", "y")


@pytest.mark.parametrize("name", ["ragged-row", "underscore", "arabic-indic-digit",
                                  "long-field", "not-utf8"])
def test_a_bad_line_in_a_later_range_is_named_by_its_line_in_the_file(name, tmp_path):
    path = tmp_path / f"{name}.csv"
    content = CASES[name]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(TableError) as serial_error:
        serial_read(path, "y")
    with pytest.raises(TableError) as dask_error:
        read_with_dask(path, "y")
    assert "line 14" in str(serial_error.value)
    assert str(dask_error.value) == str(serial_error.value)


def test_rows_of_blank_cells_before_the_header_are_skipped(tmp_path):
    """Was: the header was found after them, but the data were read from line 2 on, so that
    the header was read as data ("column 'a' is not numeric (line 2 has 'a')"), by the serial
    reader and on the Dask workers."""
    clean = tmp_path / "clean.csv"
    clean.write_text(HEADER + GOOD)
    expected = outcome(lambda: serial_read(clean, "y"))
    for name in ("blank-cells-before-header", "blank-cells-before-header-bom-crlf",
                 "many-blank-cell-rows-before-header"):
        path = tmp_path / f"{name}.csv"
        path.write_bytes(CASES[name].encode())
        assert outcome(lambda: serial_read(path, "y")) == expected, name
        assert outcome(lambda: read_with_dask(path, "y")) == expected, name
    path = tmp_path / "bad-line.csv"
    path.write_bytes(CASES["blank-cells-before-header-bad-line"].encode())
    message = r"bad-line.csv: column 'a' is not numeric \(line 27 has '1_000'\)"
    with pytest.raises(TableError, match=message):
        serial_read(path, "y")
    with pytest.raises(TableError, match=message):
        read_with_dask(path, "y")


def test_a_worker_error_survives_pickling():
    error = _BlockLineError(40, CsvLineError("f.csv", 3, "line ", " has 4 fields, expected 3"))
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.first_byte, copy.error.line, str(copy.error)) == (
        40, 3, "f.csv: line 3 has 4 fields, expected 3")


@pytest.mark.parametrize("content", [b"ab\ncd\n", b"ab\r\ncd\r\n", b"ab\rcd\r", b"a\n\nb"])
def test_every_line_start_belongs_to_exactly_one_byte_range(content, tmp_path):
    path = tmp_path / "lines"
    path.write_bytes(content)
    starts = {0} | {i + 1 for i, byte in enumerate(content[:-1])
                    if byte == 0x0A or (byte == 0x0D and content[i + 1] != 0x0A)}
    with open(path, "rb") as handle:
        found = [_line_start(handle, offset) for offset in range(len(content) + 1)]
    for offset, start in enumerate(found):
        assert start == min([s for s in starts if s >= offset], default=len(content))


# ------------------------------------------------------- numpy's parser against the grammar
CELL = st.text(alphabet="0123456789+-.eEinfatyINFAT _\t\"x", max_size=8)


@settings(max_examples=300, deadline=None)
@given(CELL)
def test_numpys_parser_and_the_grammar_accept_the_same_cells(cell):
    """parse_csv_lines hands plain blocks to numpy.loadtxt: it must accept exactly the cells
    the grammar accepts, with the same value (catches a fast path wider than NUMBER)."""
    fmt = csv_format(__import__("csv").excel)
    line = f"{cell},1"
    try:
        expected = _parse_cell(next(__import__("csv").reader([line]))[0])
    except (ValueError, StopIteration):
        expected = None
    try:
        got = parse_csv_lines([line], 1, ("a", "b"), fmt, "f.csv")[0, 0]
    except TableError:
        got = None
    if expected is None or got is None:
        assert expected is None and got is None, (cell, expected, got)
    else:
        assert (np.isnan(expected) and np.isnan(got)) or expected == got, (cell, expected, got)


@pytest.mark.parametrize("cell, accepted", [
    ("1", True), ("-1.5e-3", True), (".5", True), ("5.", True), ("inf", True),
    ("Infinity", True), ("-NaN", True), (" 2 ", True), ("1_000", False), ("\u0661", False),
    ("\uff11", False), ("0x10", False), ("1e", False), ("", False), ("\u00a01", False)])
def test_the_grammar(cell, accepted):
    assert (NUMBER.fullmatch(cell) is not None) == accepted


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789+-.eEinfatyINFAT _\t\"x\u0661\uff11\u00a0\x0c\r",
               max_size=8))
def test_the_cell_parser_reads_exactly_the_grammar(cell):
    """_parse_cell uses float behind cheap guards; it must accept exactly NUMBER (or a
    missing token), with float's value."""
    from scalegp.data.readers import MISSING_TOKENS
    if cell.strip(" \t").lower() in MISSING_TOKENS:
        assert np.isnan(_parse_cell(cell))
        return
    if NUMBER.fullmatch(cell) is None:
        with pytest.raises(ValueError):
            _parse_cell(cell)
    else:
        value = _parse_cell(cell)
        expected = float(cell.strip(" \t"))
        assert (np.isnan(value) and np.isnan(expected)) or value == expected
