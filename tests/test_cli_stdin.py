"""``scalegp predict MODEL -``: inputs as CSV on standard input, predictions on standard output
(``scalegp predict model.npz - < new.csv > pred.csv``)."""

import io
import sys

import pytest

from scalegp.cli import main

from .fuzz_cases import write_option_data


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stdin")
    write_option_data(folder)
    main(["fit", str(folder / "d.csv"), "--target", "y", "--out", str(folder / "m.npz"),
          "--approximation", "rff", "--n-components", "32", "--quiet"])
    return folder / "m.npz"


def _predict(monkeypatch, capsys, argv, stdin: bytes):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    capsys.readouterr()
    code = main(["predict", *argv, "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


ROWS = "a,b,v\n0,0,0\n1.5,-1,0.02\n-2,2,0.01\n"


def test_standard_input_gives_the_file_predictions(model, tmp_path, monkeypatch, capsys):
    (tmp_path / "t.csv").write_text(ROWS)
    from_file = _predict(monkeypatch, capsys, [str(model), str(tmp_path / "t.csv")], b"")[1]
    from_stdin = _predict(monkeypatch, capsys, [str(model), "-"], ROWS.encode())[1]
    assert from_stdin == from_file and len(from_stdin.splitlines()) == 4


def test_standard_input_without_a_header_is_matched_by_position(model, monkeypatch, capsys):
    """The column rule opens the data twice (as headerless and as named): standard input is
    read once."""
    named = _predict(monkeypatch, capsys, [str(model), "-"], ROWS.encode())[1]
    bare = _predict(monkeypatch, capsys, [str(model), "-"],
                    ROWS.split("\n", 1)[1].encode())[1]
    assert bare == named


def test_a_bad_row_on_standard_input_is_named(model, monkeypatch, capsys):
    code, _, err = _predict(monkeypatch, capsys, [str(model), "-"], b"a,b,v\n0,0,x\n")
    assert code == 2 and "<standard input>: column 'v' is not numeric (line 2 has 'x')" in err
    code, _, err = _predict(monkeypatch, capsys, [str(model), "-"], b"")
    assert code == 2 and "<standard input>: the file is empty" in err
