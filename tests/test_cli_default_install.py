"""The command line with only the default install (pyproject's ``dependencies``, no extra), on a
terminal: ``scalegp fit`` draws its progress bars (tqdm, a core dependency) and cannot fail
with ModuleNotFoundError. The child process refuses to import any module outside the standard
library, scalegp and the distributions that the core dependencies pull in (read from the
installed metadata), and its stderr is a pseudo-terminal, so the bars' code path runs."""

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from .fuzz_cases import write_option_data

ROOT = Path(__file__).resolve().parents[1]

#: Run in the child: the import system sees only the allowed top-level modules (passed as
#: JSON) and the standard library's own files (its private modules such as
#: ``_sysconfigdata_*`` are not all in ``sys.stdlib_module_names``): one finder replaces
#: sys.meta_path, asks the original finders and keeps only those, so a missing module
#: behaves as if not installed (``import`` raises ModuleNotFoundError,
#: ``importlib.util.find_spec`` returns None).
CHILD = r"""
import json, os, sys, sysconfig
ALLOWED = set(json.loads(os.environ["SCALEGP_TEST_ALLOWED_MODULES"]))
STDLIB = tuple(os.path.join(os.path.realpath(sysconfig.get_paths()[key]), "")
               for key in ("stdlib", "platstdlib"))
def in_stdlib(spec):
    origin = os.path.realpath(spec.origin or "")
    return origin.startswith(STDLIB) and "-packages" not in origin
class DefaultInstallOnly:
    def __init__(self, finders):
        self.finders = finders
    def find_spec(self, name, path=None, target=None):
        for finder in self.finders:
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                top = name.partition(".")[0]
                return spec if top in ALLOWED or in_stdlib(spec) else None
        return None
    def invalidate_caches(self):
        for finder in self.finders:
            getattr(finder, "invalidate_caches", lambda: None)()
sys.meta_path[:] = [DefaultInstallOnly(list(sys.meta_path))]
from scalegp.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def default_install_modules() -> set:
    """Top-level import names of the core dependencies and of everything they require
    (their extras left out), plus the standard library and scalegp."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    todo, closure = [Requirement(text).name for text in declared], set()
    while todo:
        name = _canonical(todo.pop())
        if name in closure:
            continue
        closure.add(name)
        for text in metadata.requires(name) or []:   # a missing one raises: not skipped
            requirement = Requirement(text)              # no extra, and this platform's
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    provided = {module for module, distributions in metadata.packages_distributions().items()
                if any(_canonical(d) in closure for d in distributions)}
    return provided | set(sys.stdlib_module_names) | {"scalegp"}


def test_the_core_dependencies_include_tqdm():
    """The bars need nothing beyond the default install."""
    assert "tqdm" in default_install_modules()
    assert "matplotlib" not in default_install_modules()       # the set is not everything


def _run_on_a_terminal(argv, cwd) -> tuple[int, str]:
    """``scalegp ARGV`` in a child whose stderr is a pseudo-terminal; (exit code, what it
    wrote there)."""
    master, slave = pty.openpty()
    # a terminal of 30 x 100 (a new pty is 0 x 0, where tqdm draws bars of no width)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = dict(os.environ, SCALEGP_TEST_ALLOWED_MODULES=json.dumps(sorted(
        default_install_modules())), PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, *argv], cwd=cwd, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    written = bytearray()
    while True:                          # drain the terminal, or the child blocks on it
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:              # the child closed its end
                break
            if not data:
                break
            written += data
        elif child.poll() is not None:
            break
    child.stdout.read()
    code = child.wait(timeout=300)
    os.close(master)
    return code, written.decode(errors="replace")


@pytest.mark.parametrize("model", [[], ["--approximation", "rff", "--n-components", "16"]],
                         ids=["auto", "rff-streamed"])
def test_fit_on_a_terminal_needs_only_the_default_install(tmp_path, model):
    write_option_data(tmp_path)
    code, terminal = _run_on_a_terminal(["fit", "d.csv", "--target", "y", "--out", "m.npz",
                                         *model], tmp_path)
    assert code == 0, terminal
    assert "ModuleNotFoundError" not in terminal and "error" not in terminal.lower(), terminal
    assert "summary pass" in terminal, terminal     # a tqdm bar was drawn on the terminal
    # no message runs into a bar: each starts on a line of its own (tqdm.write)
    assert re.search(r"(rows|it)/s\][^\s\x1b]", terminal) is None, repr(terminal)
    assert (tmp_path / "m.npz").is_file()


def test_the_guard_refuses_what_the_default_install_lacks(tmp_path):
    """The check can fail: a command that needs an extra (matplotlib) fails in the child."""
    write_option_data(tmp_path)
    code, terminal = _run_on_a_terminal(["demo", "--out", "x.png"], tmp_path)
    assert code == 2 and "matplotlib, which is not installed" in terminal, terminal
