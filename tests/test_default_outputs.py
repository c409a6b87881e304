"""No command writes a file the user did not name, or replaces one (issue 24, section 4).

Every subcommand runs in a fresh working folder, with its output named or not, and with a
file at the output path that is writable, read-only (``chmod 444``: refused also for root,
whose ``os.access`` says every file is writable) or absent. Afterwards the folder must hold
exactly what it held plus the named output or a default output that did not exist: no other
file appears, and no file changes unless the user named it.
"""

import hashlib
import os
import stat

import numpy as np
import pytest

import scalegp as sg
from scalegp import _output, cli, experiments
from scalegp.cli import demo
from scalegp.errors import UnsafeOutputError

OLD = b"the user's own file: must not change unless named\n"
STATES = ("absent", "writable", "read-only")


def snapshot(folder):
    """relative path -> (sha256 of the content, permission bits) of every file below."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            found[os.path.relpath(path, folder)] = (
                hashlib.sha256(open(path, "rb").read()).hexdigest(),
                stat.S_IMODE(os.lstat(path).st_mode))
    return found


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A working folder with a training table and a fitted model (the inputs)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(25, 2))
    y = np.sin(2 * X).sum(axis=1)
    (tmp_path / "data.csv").write_text(
        "a,b,y\n" + "".join(f"{p!r},{q!r},{t!r}\n" for (p, q), t in zip(X.tolist(), y.tolist())))
    model = sg.ExactGPRegressor(optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    sg.save(model, tmp_path / "model.in.npz", table_columns=sg.io.TableColumns(("a", "b"), "y"))
    monkeypatch.chdir(tmp_path)

    def fake_experiment(output_dir, quick):
        return [experiments.write_text(output_dir / "table.md", "# table\n")]

    monkeypatch.setitem(experiments._EXPERIMENTS, "fake", (fake_experiment, "test",
                                                           ("table.md",)))
    # the demo's fit is replaced by one that writes its figure the way the demo does
    monkeypatch.setattr(demo, "run_demo", fake_demo)
    return tmp_path


def fake_demo(*, out, **_):
    replace = out is not None
    path = demo.DEFAULT_OUT if out is None else out
    _output.write_atomically(path, lambda file: file.write(b"\x89PNG fake"), replace=replace)


#: command -> (arguments before --out, the option, the file written when not named or None,
#: the output's name when named)
COMMANDS = {
    "fit": (["fit", "data.csv", "--target", "y", "--approximation", "exact", "--no-optimize"],
            "--out", None, "model.npz"),
    "predict": (["predict", "model.in.npz", "data.csv"], "--out", None, "predictions.csv"),
    "demo": (["demo"], "--out", demo.DEFAULT_OUT, "figure.png"),
    "experiment": (["experiment", "fake"], "--out-dir",
                   os.path.join(experiments.DEFAULT_OUTPUT_DIR, "table.md"),
                   os.path.join("results", "table.md")),
    "evaluate": (["evaluate", "data.csv", "--target", "y", "--subsample", 20,
                  "--n-components", 8, "--no-optimize"], None, None, None),
    "list": (["list"], None, None, None),
}

#: Where fit and predict wrote when --out was not given (issue 24: files lost there).
LEGACY_DEFAULTS = {"fit": "model.npz", "predict": "predictions.csv"}


def plant(path, state):
    if state == "absent":
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as file:
        file.write(OLD)
    if state == "read-only":
        os.chmod(path, 0o444)


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("named", [True, False], ids=["named", "not-named"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_unnamed_file_is_written_and_no_file_replaced_unless_named(
        workspace, capsys, command, named, state):
    arguments, option, default, name = COMMANDS[command]
    if option is None and named:
        pytest.skip(f"{command} writes no file: there is nothing to name")
    # not named: a file at the old default names of fit and predict must survive too
    target = name if named else (default or LEGACY_DEFAULTS.get(command))
    if target is not None:
        plant(target, state)
    if named and option == "--out-dir":
        argv = arguments + [option, os.path.dirname(name)]
    elif named:
        argv = arguments + [option, name]
    else:
        argv = arguments
    before = snapshot(workspace)
    try:
        code = cli.main([str(a) for a in argv + ["--quiet"]])
    except SystemExit as exit_:             # argparse: a missing required option
        code = exit_.code
    out, err = capsys.readouterr()
    after = snapshot(workspace)

    changed = {path for path in set(before) | set(after) if before.get(path) != after.get(path)}
    if named:
        expected_code = 2 if state == "read-only" else 0
        assert code == expected_code, err
        assert changed == (set() if state == "read-only" else {target})
        if state == "read-only":
            assert "is a read-only file" in err
    elif default is not None:                 # a default output: only ever created
        assert code == (0 if state == "absent" else 2), err
        assert changed == ({default} if state == "absent" else set())
        if state != "absent":
            assert "already exists, and scalegp never replaces a file you did not name" in err
            assert option in err               # says how to choose another path
    else:                                     # nothing may be written at all
        assert changed == set()
        if command == "fit":
            assert code == 2 and "the following arguments are required: --out" in err
        else:
            assert code == 0, err
    if command == "predict" and not named:    # the CSV goes to standard output, alone
        lines = out.splitlines()
        assert lines[0] == "mean,std" and len(lines) == 26
        np.testing.assert_array_equal(
            np.array([line.split(",") for line in lines[1:]], dtype=float),
            np.column_stack(sg.load("model.in.npz").predict(
                np.loadtxt("data.csv", delimiter=",", skiprows=1)[:, :2], return_std=True)))


def test_predict_to_standard_output_with_a_dash(workspace, capsys):
    code = cli.main(["predict", "model.in.npz", "data.csv", "--out", "-"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("mean,std\n") and len(out.splitlines()) == 26
    assert "wrote 25 predictions (mean, std) to standard output" in err
    assert "mean" not in err.replace("(mean, std)", "")   # messages on stderr, CSV on stdout
    assert not os.path.exists("-")


@pytest.mark.parametrize("mode", [0o444, 0o400, 0o044, 0o000])
def test_read_only_bits_are_refused_also_for_root(tmp_path, mode):
    """Was: as root, os.access said writable and a read-only --out file was replaced."""
    path = tmp_path / "locked.csv"
    path.write_bytes(OLD)
    os.chmod(path, mode)
    with pytest.raises(UnsafeOutputError, match="is a read-only file"):
        _output.write_atomically(path, lambda file: file.write(b"new"))
    assert path.read_bytes() == OLD and stat.S_IMODE(os.stat(path).st_mode) == mode


@pytest.mark.parametrize("when", ["during the write", "after the last check"])
def test_a_default_output_that_appears_meanwhile_is_not_replaced(tmp_path, monkeypatch,
                                                                   when):
    """replace=False checks again after the write and then moves the file into place with
    os.link, which fails on an existing target: a file another process created in either
    window survives, and no temporary file is left."""
    path = tmp_path / "figure.png"
    checks = []
    real_check = _output.check_output_path

    def check(*args, **kwargs):
        result = real_check(*args, **kwargs)
        checks.append(1)
        if when == "after the last check" and len(checks) == 2:
            path.write_bytes(OLD)
        return result

    def write(file):
        file.write(b"new")
        if when == "during the write":
            path.write_bytes(OLD)

    monkeypatch.setattr(_output, "check_output_path", check)
    with pytest.raises(UnsafeOutputError, match="already exists"):
        _output.write_atomically(path, write, replace=False)
    assert path.read_bytes() == OLD and os.listdir(tmp_path) == ["figure.png"]


def test_run_demo_refuses_an_existing_default_figure_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / demo.DEFAULT_OUT).write_bytes(OLD)
    monkeypatch.setattr(demo, "load_east_africa_relief", lambda: pytest.fail("worked"))
    with pytest.raises(UnsafeOutputError, match="give out scalegp-demo.png to replace it"):
        demo.run_demo()
    assert (tmp_path / demo.DEFAULT_OUT).read_bytes() == OLD


def test_help_says_what_is_written(capsys):
    for command, phrase in [("fit", "required: scalegp writes no file you did not name"),
                            ("predict", "the CSV goes to standard output"),
                            ("demo", "a file you did not name is never replaced"),
                            ("experiment", "where no existing file is replaced")]:
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert phrase in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_predict_into_a_closed_pipe_says_so_in_one_line(workspace):
    """`scalegp predict MODEL DATA | head -2`: the reader closes the pipe early."""
    import subprocess
    import sys
    rows = np.random.default_rng(4).uniform(-1, 1, size=(5_000, 2))   # > a pipe's buffer
    np.savetxt("many.csv", rows, delimiter=",", header="a,b", comments="")
    process = subprocess.Popen(
        [sys.executable, "-m", "scalegp", "predict", "model.in.npz", "many.csv", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert process.stdout.readline() == b"mean,std\n"
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 2
    assert err.strip().splitlines() == ["scalegp predict: error: standard output was closed "
                                        "before all predictions were written (the output is "
                                        "incomplete)"]
