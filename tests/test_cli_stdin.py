"""``scalegp predict MODEL -``: inputs as CSV on standard input, predictions on standard output
(``scalegp predict model.npz - < new.csv > pred.csv``); ``scalegp fit -`` and ``scalegp
evaluate -``: the training table as CSV on standard input; the refusals where standard input
cannot work (a terminal, a binary or compressed format, Dask)."""

import gzip
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scalegp.cli import main
from scalegp.io import load, load_table_columns

from .fuzz_cases import write_option_data

ROOT = Path(__file__).resolve().parents[1]


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


# ------------------------------------------------------------------------ fit and evaluate -
FIT = ["--target", "y", "--approximation", "rff", "--n-components", "32", "--quiet"]


def _run(monkeypatch, capsys, argv, stdin):
    """``scalegp ARGV`` through main() with ``stdin`` (bytes, or a stream object) as standard
    input; (exit code, stdout, stderr)."""
    stream = io.TextIOWrapper(io.BytesIO(stdin)) if isinstance(stdin, bytes) else stdin
    monkeypatch.setattr(sys, "stdin", stream)
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _predictions(path):
    model = load(path)
    X = np.linspace(-2, 2, 12 * model.n_features_in_).reshape(12, -1)
    mean, std = model.predict(X, return_std=True)
    return np.column_stack([mean, std])


@pytest.mark.parametrize("extra", [[], ["--approximation", "glf"], ["--local", "clusters"],
                                   ["--noise-variance-column", "v"]],
                         ids=["rff", "glf", "clusters", "noise-column"])
def test_fit_from_standard_input_equals_the_fit_from_the_file(tmp_path, monkeypatch, capsys,
                                                              extra):
    """Every pass of the fit (summary, learning, statistics) reads the bytes of standard
    input; the model equals the one fitted from the file, to the last bit."""
    write_option_data(tmp_path)
    argv = FIT + extra
    code, _, err = _run(monkeypatch, capsys,
                        ["fit", str(tmp_path / "d.csv"), "--out", str(tmp_path / "f.npz"),
                         *argv], b"")
    assert code == 0, err
    code, out, err = _run(monkeypatch, capsys,
                          ["fit", "-", "--out", str(tmp_path / "s.npz"), *argv],
                          (tmp_path / "d.csv").read_bytes())
    assert code == 0 and out == "", err
    np.testing.assert_array_equal(_predictions(tmp_path / "s.npz"),
                                  _predictions(tmp_path / "f.npz"))
    assert load_table_columns(tmp_path / "s.npz") == load_table_columns(tmp_path / "f.npz")


def test_fit_from_standard_input_names_it_in_its_messages(tmp_path, monkeypatch, capsys):
    code, _, err = _run(monkeypatch, capsys, ["fit", "-", "--out", str(tmp_path / "m.npz"),
                                              "--target", "2"], b"1,2,3\n")
    assert code == 2 and "<standard input>: need at least 2 complete rows, got 1" in err
    code, _, err = _run(monkeypatch, capsys, ["fit", "-", "--out", str(tmp_path / "m.npz"),
                                              "--target", "y"], b"a,b,y\n1,2,x\n")
    assert code == 2 and "<standard input>: column 'y' is not numeric (line 2 has 'x')" in err


def _binary_tables(folder):
    """The bytes of one small table in each binary format."""
    values = np.arange(12.0).reshape(4, 3)
    np.save(folder / "t.npy", values)
    np.savez(folder / "t.npz", values)
    pq = pytest.importorskip("pyarrow.parquet", reason="the parquet case needs pyarrow")
    import pyarrow as pa
    pq.write_table(pa.table({"a": values[:, 0], "y": values[:, 2]}), folder / "t.parquet")
    (folder / "t.csv.gz").write_bytes(gzip.compress(b"a,y\n1,2\n3,4\n"))
    return {kind: (folder / name).read_bytes() for kind, name in (
        (".npy", "t.npy"), (".npz", "t.npz"), ("Parquet", "t.parquet"), ("gzip", "t.csv.gz"))}


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_binary_formats_on_standard_input_are_refused_with_the_reason(
        tmp_path, monkeypatch, capsys, model, command):
    for kind, content in _binary_tables(tmp_path).items():
        argv = (["fit", "-", "--target", "y", "--out", str(tmp_path / "m.npz")]
                if command == "fit" else ["predict", str(model), "-"])
        code, out, err = _run(monkeypatch, capsys, argv, content)
        assert code == 2 and out == "" and err.count("\n") == 1, err
        if kind == "gzip":
            assert "holds gzip-compressed bytes" in err and "zcat FILE |" in err, err
        else:
            assert f"holds a {kind} file" in err and "needs a file to seek in" in err, err
        assert not (tmp_path / "m.npz").exists()


class _Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


@pytest.mark.parametrize("command", ["fit", "predict"])
def test_a_terminal_on_standard_input_is_refused_before_waiting(tmp_path, monkeypatch, capsys,
                                                                model, command):
    """Nothing piped: reading would wait for typing, so - is refused at once."""
    argv = (["fit", "-", "--target", "y", "--out", str(tmp_path / "m.npz")]
            if command == "fit" else ["predict", str(model), "-"])
    code, _, err = _run(monkeypatch, capsys, argv, _Terminal(io.BytesIO(b"a,y\n1,2\n3,4\n")))
    assert code == 2 and "standard input (-) is a terminal" in err, err


def test_dask_refuses_standard_input(tmp_path, monkeypatch, capsys):
    """The workers read DATA at its path, in byte ranges: standard input exists only here.
    Refused before any scheduler is contacted (the address is unreachable)."""
    write_option_data(tmp_path)
    code, _, err = _run(monkeypatch, capsys,
                        ["fit", "-", *FIT, "--out", str(tmp_path / "m.npz"),
                         "--dask-scheduler", "tcp://127.0.0.1:9", "--dask-timeout", "0.1"],
                        (tmp_path / "d.csv").read_bytes())
    assert code == 2 and "--dask-scheduler does not take DATA - (standard input)" in err, err


def test_evaluate_reads_standard_input(tmp_path, monkeypatch, capsys):
    write_option_data(tmp_path)
    argv = ["--target", "y", "--approximations", "rff", "--n-components", "16", "--quiet"]
    from_file = _run(monkeypatch, capsys, ["evaluate", str(tmp_path / "d.csv"), *argv], b"")
    from_stdin = _run(monkeypatch, capsys, ["evaluate", "-", *argv],
                      (tmp_path / "d.csv").read_bytes())
    assert from_file[0] == from_stdin[0] == 0, from_stdin[2]
    strip = [line.rsplit("|", 2)[0] for line in from_file[1].splitlines()]   # less fit times
    assert [line.rsplit("|", 2)[0] for line in from_stdin[1].splitlines()] == strip


#: The default model, which draws no warning on these 40 rows (stderr stays empty with --quiet).
SHELL_FIT = ["--target", "y", "--quiet"]                 # auto: the exact GP here


def test_fit_and_predict_through_a_shell_pipe(tmp_path):
    """As a user types it: ``scalegp fit - ... < d.csv``, then ``scalegp predict m.npz -
    < new.csv > pred.csv``; the model equals the one ``scalegp fit d.csv`` writes (both in
    fresh processes, so that the comparison is bit for bit: inside the test process the
    state left by other tests, such as BLAS thread limits, could move the last bits)."""
    write_option_data(tmp_path)
    python = shlex.quote(sys.executable)
    fit = f"{python} -m scalegp fit"
    result = subprocess.run(
        f"{fit} - {' '.join(SHELL_FIT)} --out m.npz < d.csv && "
        f"{fit} d.csv {' '.join(SHELL_FIT)} --out f.npz && "
        f"{python} -m scalegp predict m.npz - --quiet < d.csv > pred.csv",
        shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"),
                                                    os.environ.get("PYTHONPATH", "")])))
    assert result.returncode == 0 and result.stderr == "", result.stderr
    np.testing.assert_array_equal(_predictions(tmp_path / "m.npz"),
                                  _predictions(tmp_path / "f.npz"))
    predicted = np.loadtxt(tmp_path / "pred.csv", delimiter=",", skiprows=1)
    assert predicted.shape == (40, 2) and np.all(predicted[:, 1] > 0)
