"""Nothing the user has is ever destroyed by a write (issue 9, section 1).

Every kind of output path (regular file, missing file, folder, FIFO, socket, character
device, symbolic link, read-only file, input file under another name), planted files at
temporary names, permission bits, clean-up after killed writers, error messages, and the
command line's checks before any work; through ``sg.save``, ``write_csv``, the experiments'
writers and ``scalegp.cli.main``.
"""

import contextlib
import errno
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import scalegp as sg
from scalegp import _output, cli, experiments
from scalegp.errors import UnsafeOutputError
from scalegp.data.tables import read_table, write_csv
from scalegp.estimators.configuration import make_approximation

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VICTIM_TEXT = "precious: must never change\n"

# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(20, 2))
    y = np.sin(X).sum(axis=1)
    return sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("rff", n_components=8), normalize_X=False, normalize_y=False).fit(X, y)


@pytest.fixture(scope="module")
def figure():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(1, 1))
    yield fig
    plt.close(fig)


def save_model(model, path):
    sg.save(model, path)


def save_csv(model, path):
    write_csv(path, ["mean", "std"], np.array([[1.5, 0.25], [-2.0, 0.5]]))


def save_markdown(model, path):
    experiments.write_text(path, "# table\n")


WRITERS = {"model": (".npz", save_model), "csv": (".csv", save_csv),
           "markdown": (".md", save_markdown), "figure": (".png", None)}


@pytest.fixture(params=sorted(WRITERS))
def writer(request, model):
    """(suffix, write(path)) for each of the package's writers."""
    suffix, function = WRITERS[request.param]
    if function is None:
        fig = request.getfixturevalue("figure")
        return suffix, lambda path: experiments.write_figure(fig, path, dpi=10)
    return suffix, lambda path: function(model, path)


def assert_written(suffix, path):
    """The file at ``path`` is a complete output of the writer for ``suffix``."""
    if suffix == ".npz":
        assert isinstance(sg.load(path), sg.LowRankGPRegressor)
    elif suffix == ".csv":
        table = read_table(path)
        assert table.columns == ("mean", "std")
        np.testing.assert_array_equal(table.values, [[1.5, 0.25], [-2.0, 0.5]])
    elif suffix == ".md":
        assert open(path).read() == "# table\n"
    else:
        assert open(path, "rb").read(8) == PNG_SIGNATURE


def temporaries(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


def victim(tmp_path):
    """A file outside the output folder that an attacker wants overwritten."""
    target = tmp_path / "elsewhere" / "victim.txt"
    target.parent.mkdir(exist_ok=True)
    target.write_text(VICTIM_TEXT)
    return target


@contextlib.contextmanager
def within_seconds(seconds):
    """Fail instead of hanging (opening a FIFO for writing would block)."""
    def fail(signum, frame):
        raise AssertionError(f"blocked for more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def make_fifo(path):
    os.mkfifo(path)


def make_socket(path):
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.close()              # the socket file stays


def make_folder(path):
    os.mkdir(path)
    (path / "inside.txt").write_text("kept")


def make_link(path):
    os.symlink(victim(path.parent.parent), path)


def make_dangling_link(path):
    os.symlink(path.parent.parent / "created-by-a-link.txt", path)


KINDS = {"folder": (make_folder, "is a folder"), "fifo": (make_fifo, "is a FIFO"),
         "socket": (make_socket, "is a socket"),
         "symlink": (make_link, "is a symbolic link"),
         "dangling-symlink": (make_dangling_link, "is a symbolic link")}


def snapshot(path):
    """What must not change: the entry's type and inode, a link's target, a folder's list."""
    status = os.lstat(path)
    state = (stat.S_IFMT(status.st_mode), status.st_ino)
    if stat.S_ISLNK(status.st_mode):
        return state + (os.readlink(path),)
    if stat.S_ISDIR(status.st_mode):
        return state + (sorted(os.listdir(path)),)
    return state


def run_cli(capsys, *args):
    code = cli.main([str(arg) for arg in args])
    return code, capsys.readouterr().err


@pytest.fixture
def data_files(tmp_path):
    """The same 30-row table as CSV and as .npz (X, y)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(30, 2))
    y = np.cos(X).sum(axis=1)
    csv_path = tmp_path / "data.csv"
    csv_path.write_text("x0,x1,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in
                                              zip(X.tolist(), y.tolist())))
    npz_path = tmp_path / "data.npz"
    np.savez(npz_path, X=X, y=y)
    return csv_path, npz_path


FAST_FIT = ("--n-components", 8, "--no-optimize", "--quiet")

# ----------------------------------------------------------------------------- path kinds


def test_regular_file_is_replaced_and_missing_file_created(writer, tmp_path):
    suffix, write = writer
    path = tmp_path / f"out{suffix}"
    write(path)
    assert_written(suffix, path)
    path.write_bytes(b"old content")
    write(path)
    assert_written(suffix, path)
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_non_regular_targets_are_refused_untouched(writer, kind, tmp_path):
    suffix, write = writer
    folder = tmp_path / "out"
    folder.mkdir()
    path = folder / f"target{suffix}"
    make, message = KINDS[kind]
    make(path)
    before = snapshot(path)
    with within_seconds(10), pytest.raises(UnsafeOutputError) as raised:
        write(path)
    assert str(path) in str(raised.value) and message in str(raised.value)
    assert snapshot(path) == before
    assert temporaries(folder) == []
    # what a link points at is neither written nor created
    assert not os.path.lexists(tmp_path / "created-by-a-link.txt")
    if kind == "symlink":
        assert (tmp_path / "elsewhere" / "victim.txt").read_text() == VICTIM_TEXT


def test_dev_null_is_refused_without_being_touched(model, capsys, data_files, tmp_path):
    before = os.stat("/dev/null")
    with pytest.raises(UnsafeOutputError, match="'/dev/null': is a character device"):
        sg.save(model, "/dev/null")
    with pytest.raises(UnsafeOutputError, match="character device"):
        write_csv("/dev/null", ["a"], np.ones((1, 1)))
    code, err = run_cli(capsys, "fit", "--approximation", "rff", data_files[0], "--target", "y", "--out", "/dev/null",
                        *FAST_FIT)
    assert code == 2 and "--out '/dev/null': is a character device" in err
    sg.save(model, tmp_path / "m.npz")
    code, err = run_cli(capsys, "predict", tmp_path / "m.npz", data_files[0],
                        "--out", "/dev/null", "--quiet")
    assert code == 2 and "character device" in err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino,
                                                            before.st_rdev)
    assert [name for name in os.listdir("/dev") if name.startswith(".null.")] == []


def test_read_only_file_is_refused(writer, tmp_path, monkeypatch):
    """A file the user cannot write is not replaced (simulated: the tests may run as root)."""
    suffix, write = writer
    path = tmp_path / f"locked{suffix}"
    path.write_bytes(b"keep me")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if os.fspath(p) == str(path) and mode & os.W_OK else real_access(p, mode, **kw)))
    with pytest.raises(UnsafeOutputError, match="is a read-only file"):
        write(path)
    assert path.read_bytes() == b"keep me"


def test_missing_or_unwritable_folder_and_wrong_suffix(model, tmp_path, monkeypatch):
    with pytest.raises(UnsafeOutputError, match="the folder .*absent' does not exist"):
        sg.save(model, tmp_path / "absent" / "m.npz")
    (tmp_path / "file.txt").write_text("a file")
    with pytest.raises(UnsafeOutputError, match="file.txt' is not a folder"):
        sg.save(model, tmp_path / "file.txt" / "m.npz")
    with pytest.raises(UnsafeOutputError, match=r"ending in \.npz, got 'm\.txt'"):
        sg.save(model, tmp_path / "m.txt")
    with pytest.raises(UnsafeOutputError, match=r"ending in \.csv, got 'p\.npz'"):
        write_csv(tmp_path / "p.npz", ["a"], np.ones((1, 1)))
    with pytest.raises(UnsafeOutputError, match="expected the path of a file"):
        sg.save(model, str(tmp_path) + os.sep)
    sg.save(model, tmp_path / "UPPER.NPZ")         # the suffix is compared in any case
    assert isinstance(sg.load(tmp_path / "UPPER.NPZ"), sg.LowRankGPRegressor)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if os.fspath(p) == str(tmp_path) else real_access(p, mode, **kw)))
    with pytest.raises(UnsafeOutputError, match="is not writable"):
        sg.save(model, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "m.txt").exists()


# ----------------------------------------------------------------------------- output == input


def spellings(tmp_path, data):
    """(output, input) pairs that name the same file."""
    (tmp_path / "sub").mkdir(exist_ok=True)
    link = tmp_path / f"link{data.suffix}"
    link.symlink_to(data)
    hard = tmp_path / f"hard{data.suffix}"
    os.link(data, hard)
    return {"same": (data, data), "dot": (tmp_path / "." / data.name, data),
            "parent": (tmp_path / "sub" / ".." / data.name, data),
            "input-through-symlink": (data, link), "hardlink": (hard, data)}


def test_output_that_is_an_input_is_refused(tmp_path, data_files):
    data = data_files[0]
    before = data.read_bytes()
    for case, (output, source) in spellings(tmp_path, data).items():
        with pytest.raises(UnsafeOutputError, match="is the input file") as raised:
            _output.write_atomically(output, lambda file: file.write(b"x"), inputs=(source,))
        assert str(output) in str(raised.value), case
        assert data.read_bytes() == before, case
    other = tmp_path / "other.csv"
    _output.write_atomically(other, lambda file: file.write(b"x"), inputs=(data,))
    assert other.read_bytes() == b"x" and data.read_bytes() == before


def test_cli_fit_and_predict_refuse_their_inputs(tmp_path, data_files, model, capsys):
    npz_data = data_files[1]
    for case, (output, source) in spellings(tmp_path, npz_data).items():
        before = npz_data.read_bytes()
        code, err = run_cli(capsys, "fit", "--approximation", "rff", source, "--target", "y", "--out", output, *FAST_FIT)
        assert code == 2 and "is the input file" in err, (case, err)
        assert npz_data.read_bytes() == before
    model_path = tmp_path / "model.npz"
    sg.save(model, model_path)
    model_as_csv = tmp_path / "model-copy.csv"      # a model file may have any name
    os.link(model_path, model_as_csv)
    inputs = tmp_path / "inputs.csv"
    inputs.write_text("x0,x1\n0.5,-0.25\n0.125,1.0\n")
    model_before, inputs_before = model_path.read_bytes(), inputs.read_bytes()
    for output in (inputs, tmp_path / "." / "inputs.csv", model_as_csv):
        code, err = run_cli(capsys, "predict", model_as_csv, inputs, "--out", output,
                            "--quiet")
        assert code == 2 and "is the input file" in err and str(output) in err, err
    assert model_path.read_bytes() == model_before and inputs.read_bytes() == inputs_before
    code, err = run_cli(capsys, "predict", model_path, inputs, "--out",
                        tmp_path / "predictions.csv", "--quiet")
    assert code == 0, err
    assert read_table(tmp_path / "predictions.csv").values.shape == (2, 2)


# ----------------------------------------------------------------------------- temporary names


def plausible_temporary_names(name):
    """Names an attacker could guess: earlier schemes, and this one's with guessed parts."""
    pid = os.getpid()
    prefix = f".{name}.{_output.HOST_TAG}-{pid}-"
    return [f".{name}.tmp", f".{name}.tmp-{pid}", f"{name}.tmp", f".{name}.{pid}.tmp",
            f".{name}.{'0' * 32}.tmp", prefix + "0" * 16 + ".tmp",
            prefix + "f" * 16 + ".tmp", prefix + "0123456789abcdef.tmp"]


def test_symlinks_planted_at_plausible_temporary_names_do_nothing(writer, tmp_path):
    suffix, write = writer
    folder = tmp_path / "shared"
    folder.mkdir()
    target = victim(tmp_path)
    name = f"out{suffix}"
    planted = [folder / entry for entry in plausible_temporary_names(name)]
    for link in planted:
        link.symlink_to(target)
    write(folder / name)
    assert_written(suffix, folder / name)
    assert target.read_text() == VICTIM_TEXT
    assert all(os.readlink(link) == str(target) for link in planted)
    assert sorted(os.listdir(folder)) == sorted([name, *(link.name for link in planted)])


def test_a_taken_temporary_name_is_never_opened(model, tmp_path, monkeypatch):
    """Force the random part onto a planted symlink: O_EXCL refuses it, another is drawn."""
    target = victim(tmp_path)
    pid = os.getpid()
    planted = tmp_path / f".m.npz.{_output.HOST_TAG}-{pid}-{'a' * 16}.tmp"
    planted.symlink_to(target)
    tokens = iter(["a" * 16, "b" * 16])
    monkeypatch.setattr(_output, "_random_token", lambda: next(tokens))
    sg.save(model, tmp_path / "m.npz")
    assert target.read_text() == VICTIM_TEXT and os.readlink(planted) == str(target)
    assert isinstance(sg.load(tmp_path / "m.npz"), sg.LowRankGPRegressor)
    monkeypatch.setattr(_output, "_random_token", lambda: "a" * 16)
    with pytest.raises(FileExistsError) as raised:
        sg.save(model, tmp_path / "m.npz")
    assert str(tmp_path / "m.npz") in str(raised.value)
    assert ".tmp" not in str(raised.value) and target.read_text() == VICTIM_TEXT


def test_temporary_names_are_random_and_tagged(model, tmp_path, monkeypatch):
    moved = []
    real_replace = os.replace

    def spy(source, destination):
        moved.append(os.path.basename(source))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", spy)
    sg.save(model, tmp_path / "m.npz")
    sg.save(model, tmp_path / "m.npz")
    pattern = rf"\.m\.npz\.{_output.HOST_TAG}-{os.getpid()}-([0-9a-f]{{16}})\.tmp"
    randoms = [re.fullmatch(pattern, name)[1] for name in moved]
    assert len(randoms) == 2 and randoms[0] != randoms[1]


def test_target_changed_during_the_write_is_checked_again(tmp_path):
    """A link planted at the target while the content is written is not replaced."""
    path = tmp_path / "out.md"
    target = victim(tmp_path)

    def write(file):
        file.write("new")
        path.symlink_to(target)

    with pytest.raises(UnsafeOutputError, match="is a symbolic link"):
        _output.write_atomically(path, write, binary=False)
    assert os.readlink(path) == str(target) and target.read_text() == VICTIM_TEXT
    assert temporaries(tmp_path) == []


# ----------------------------------------------------------------------------- permissions


@contextlib.contextmanager
def umask(mask):
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o666, 0o755, 0o444])
def test_existing_permission_bits_are_kept(mode, tmp_path):
    """Also past a umask that would remove them; a file without write bits is refused, also
    for root (the bits are checked, not only os.access)."""
    path = tmp_path / "out.md"
    path.write_text("old")
    os.chmod(path, mode)
    seen = []

    def write(file):
        seen.append(stat.S_IMODE(os.fstat(file.fileno()).st_mode))
        file.write("new")

    if mode & stat.S_IWUSR:
        with umask(0o077):
            _output.write_atomically(path, write, binary=False)
        assert path.read_text() == "new"
        assert seen == [mode]                  # never more open than the final file
        assert stat.S_IMODE(os.stat(path).st_mode) == mode
    else:
        with pytest.raises(UnsafeOutputError, match="read-only"):
            _output.write_atomically(path, write, binary=False)


@pytest.mark.parametrize("mask", [0o000, 0o002, 0o022, 0o027, 0o077])
def test_new_file_mode_honours_the_umask(mask, model, tmp_path):
    with umask(mask):
        sg.save(model, tmp_path / "m.npz")
    assert stat.S_IMODE(os.stat(tmp_path / "m.npz").st_mode) == 0o666 & ~mask


# ----------------------------------------------------------------------------- clean-up


def dead_pid():
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_orphans_of_dead_writers_are_removed_and_live_ones_kept(model, tmp_path):
    prefix = f".m.npz.{_output.HOST_TAG}-"
    dead = tmp_path / f"{prefix}{dead_pid()}-{'1' * 16}.tmp"
    dead_link = tmp_path / f"{prefix}{dead_pid()}-{'2' * 16}.tmp"
    live = tmp_path / f"{prefix}{os.getppid()}-{'3' * 16}.tmp"
    other_host = tmp_path / f".m.npz.00000000-{dead_pid()}-{'4' * 16}.tmp"
    other_target = tmp_path / f".n.npz.{_output.HOST_TAG}-{dead_pid()}-{'5' * 16}.tmp"
    unrelated = [tmp_path / ".m.npz.backup", tmp_path / "notes.tmp"]
    target = victim(tmp_path)
    for path in (dead, live, other_host, other_target, *unrelated):
        path.write_bytes(b"partial")
    dead_link.symlink_to(target)
    sg.save(model, tmp_path / "m.npz")
    assert not dead.exists() and not os.path.lexists(dead_link)
    assert target.read_text() == VICTIM_TEXT          # removing a link never follows it
    assert all(path.read_bytes() == b"partial"
               for path in (live, other_host, other_target, *unrelated))


# The child installs Python's default SIGINT handler itself: a background job of a
# non-interactive shell (and some CI runners) starts with SIGINT ignored, which the child
# would inherit, and Python installs KeyboardInterrupt only where SIGINT is not ignored.
CHILD = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from scalegp._output import write_atomically

    def write(file):
        file.write(b"partial new content" * 1000)
        file.flush()
        open(sys.argv[2], "w").close()          # tell the parent the write is under way
        time.sleep(60)

    write_atomically(sys.argv[1], write)
""")


def interrupted_writer(tmp_path, signum):
    """Run a writer in a child process, send it ``signum`` mid-write; its exit code."""
    target, ready = tmp_path / "out.npz", tmp_path / "ready"
    target.write_bytes(b"old model")
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(target), str(ready)],
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert child.poll() is None, child.stderr.read().decode()
        assert time.monotonic() < deadline, "the child never started writing"
        time.sleep(0.02)
    assert len(temporaries(tmp_path)) == 1            # the write is under way
    child.send_signal(signum)
    code = child.wait(timeout=30)
    child.stderr.close()
    assert target.read_bytes() == b"old model"
    return code


def test_killed_writer_leaves_the_old_file_and_the_next_save_cleans_up(model, tmp_path):
    assert interrupted_writer(tmp_path, signal.SIGKILL) == -signal.SIGKILL
    assert len(temporaries(tmp_path)) == 1            # SIGKILL cannot be caught
    sg.save(model, tmp_path / "out.npz")
    assert temporaries(tmp_path) == []
    assert isinstance(sg.load(tmp_path / "out.npz"), sg.LowRankGPRegressor)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_terminated_writer_removes_its_temporary_file(signum, tmp_path):
    code = interrupted_writer(tmp_path, signum)
    # the process still ends by the signal (an uncaught KeyboardInterrupt re-raises SIGINT)
    assert code == -signum
    assert temporaries(tmp_path) == []


# ----------------------------------------------------------------------------- error messages


def test_write_errors_name_the_user_path_not_the_temporary(model, tmp_path, monkeypatch):
    path = tmp_path / "m.npz"

    def disk_full(file):
        temporary = os.path.join(tmp_path, temporaries(tmp_path)[0])
        raise OSError(errno.ENOSPC, "No space left on device", temporary)

    with pytest.raises(OSError) as raised:
        _output.write_atomically(path, disk_full)
    message = str(raised.value)
    assert str(path) in message and "No space left" in message and ".tmp" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__

    def cross_device(source, destination):
        raise OSError(errno.EXDEV, "Invalid cross-device link", source, destination)

    monkeypatch.setattr(os, "replace", cross_device)
    with pytest.raises(OSError) as raised:
        sg.save(model, path)
    assert str(path) in str(raised.value) and ".tmp" not in str(raised.value)
    monkeypatch.undo()

    real_open = os.open
    monkeypatch.setattr(os, "open", lambda name, *args: (
        _raise(PermissionError(errno.EACCES, "Permission denied", name))
        if str(name).endswith(".tmp") else real_open(name, *args)))
    with pytest.raises(PermissionError) as raised:
        sg.save(model, path)
    assert str(path) in str(raised.value) and ".tmp" not in str(raised.value)
    monkeypatch.undo()
    assert temporaries(tmp_path) == [] and not path.exists()


def _raise(error):
    raise error


# ----------------------------------------------------------------------------- checked before work


def test_cli_fit_checks_out_before_reading_or_fitting(tmp_path, data_files, capsys,
                                                      monkeypatch):
    calls = []
    monkeypatch.setattr("scalegp.cli.fit.open_source", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(sg.LowRankGPRegressor, "fit", lambda *a, **k: calls.append("fit"))
    start = time.perf_counter()
    for out, message in [("/nonexistent-dir/m.npz", "the folder '/nonexistent-dir' does not "
                                                     "exist"),
                         (tmp_path / "m.csv", "ending in .npz"), (tmp_path, "is a folder")]:
        code, err = run_cli(capsys, "fit", "--approximation", "rff", data_files[0], "--target", "y", "--out", out)
        assert code == 2 and f"--out {str(out)!r}" in err and message in err, err
        assert len(err.strip().splitlines()) == 1
    assert calls == [] and time.perf_counter() - start < 5


def test_cli_predict_demo_experiment_check_before_work(tmp_path, data_files, capsys,
                                                       monkeypatch):
    from scalegp.cli import demo
    from scalegp import io
    calls = []
    monkeypatch.setattr(io, "load", lambda path: calls.append(path))
    monkeypatch.setattr(demo, "run_demo", lambda **kw: calls.append("demo"))
    fifo = tmp_path / "p.csv"
    os.mkfifo(fifo)
    code, err = run_cli(capsys, "predict", tmp_path / "m.npz", data_files[0], "--out", fifo)
    assert code == 2 and "is a FIFO" in err
    code, err = run_cli(capsys, "demo", "--out", tmp_path / "demo.jpg")
    assert code == 2 and "ending in .png" in err
    link = tmp_path / "demo.png"
    link.symlink_to(victim(tmp_path))
    code, err = run_cli(capsys, "demo", "--out", link)
    assert code == 2 and "is a symbolic link" in err
    code, err = run_cli(capsys, "experiment", "glf-stock", "--out-dir", data_files[0])
    assert code == 2 and f"--out-dir {str(data_files[0])!r} is a file, expected a folder" in err
    assert calls == [] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_experiment_outputs_are_checked_before_it_runs(tmp_path, monkeypatch, capsys):
    calls = []

    def fake(output_dir, quick):
        calls.append(output_dir)
        return [experiments.write_text(output_dir / "fake.md", "# fake\n")]

    monkeypatch.setitem(experiments._EXPERIMENTS, "fake", (fake, "test", ("fake.md",)))
    out_dir = tmp_path / "new" / "folder"
    assert experiments.run("fake", out_dir) == [out_dir / "fake.md"]   # created
    os.remove(out_dir / "fake.md")
    os.mkfifo(out_dir / "fake.md")
    with pytest.raises(UnsafeOutputError, match="fake.md'.*is a FIFO"):
        experiments.run("fake", out_dir)
    code, err = run_cli(capsys, "experiment", "fake", "--out-dir", out_dir, "--quiet")
    assert code == 2 and "is a FIFO" in err
    assert len(calls) == 1
    monkeypatch.setitem(experiments._EXPERIMENTS, "fake", (fake, "test", ("other.md",)))
    with pytest.raises(RuntimeError, match="undeclared file.*fake.md"):
        experiments.run("fake", tmp_path / "elsewhere")
