"""A harness that runs fuzz cases through the command line in-process and classifies them.

A :class:`Case` is an argument list, the files it needs (written into a fresh folder, which
is the working directory of the run) and an oracle for its result. :func:`run_case` runs
``scalegp.cli.main(argv)`` there with stdout and stderr captured and a time limit, and
classifies the outcome by this rule, in this order:

- **hang**: ``main`` did not return within the case's time limit;
- **data loss**: a file in the folder that the command line does not name as its output
  (``--out``, ``--out-dir``) was changed or removed, or a new file appeared that it does not
  name, or the named output was changed although it was read-only (mode bits, whoever runs
  it) or the command failed;
- **crash**: an exception escaped ``main``, or stderr holds a traceback or an "internal
  error", or the exit code is not 0, 1 (non-finite result) or 2 (user error), or an error
  exit printed no ``error:`` line, more than one, or one that does not name the file the
  case says it must (e.g. a malformed data file);
- **clean error**: exit 1 or 2 with one ``scalegp ...: error: ...`` line;
- **ok**: exit 0 and the case's oracle accepts the result;
- **silent wrong**: exit 0 but the oracle rejects it (the result disagrees with a reference,
  a number is not finite, or the input must be refused: a case without an oracle).

An oracle is ``oracle(folder, stdout) -> None`` (accepted) or a string saying what is wrong.
A case may also say that a valid input must not be refused (``must_succeed``): a clean error
there is reported as "refused valid", which the suites count and fail on as well.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import os
import re
import signal
import stat
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

OK, CLEAN_ERROR = "ok", "clean error"
CRASH, SILENT_WRONG, DATA_LOSS, HANG = "crash", "silent wrong", "data loss", "hang"
REFUSED_VALID = "refused valid"
OUTCOMES = (OK, CLEAN_ERROR, CRASH, SILENT_WRONG, DATA_LOSS, HANG, REFUSED_VALID)
#: The outcomes a suite fails on.
BAD = (CRASH, SILENT_WRONG, DATA_LOSS, HANG, REFUSED_VALID)
#: Files planted in every case folder: what the commands' defaults would replace.
DECOYS = {"model.npz": b"a model the user keeps\n", "predictions.csv": b"mean,std\n1,2\n",
          "scalegp-demo.png": b"a figure the user keeps\n"}
#: Forms of Python's and numpy's own messages: an error line holding one is a raw internal
#: error that escaped scalegp's checks, even when its class (TypeError, ValueError) makes the
#: command line print it as one line.
RAW_MESSAGES = re.compile(
    r"unexpected keyword argument|has no attribute|cannot reshape array|codec can't decode|"
    r"Integer value .* not in range|is out of bounds|could not convert string to float|"
    r"magic string is not correct|object is not subscriptable|unsupported operand type|"
    r"invalid literal for int|positional argument|field larger than field limit|"
    r"operands could not be broadcast|division by zero|math domain error|"
    r"array must not contain infs or NaNs|object of type .* has no len")
#: Flags whose value names a file or folder the command may write.
OUTPUT_FLAGS = ("--out", "--out-dir")


@dataclass
class Case:
    """One fuzz case: ``scalegp ARGV`` run in a folder prepared by ``setup``."""

    family: str
    name: str
    argv: list
    setup: Callable[[Path], None] = lambda folder: None
    #: None: the input must be refused (exit 0 is a silent wrong answer)
    oracle: Optional[Callable[[Path, str], Optional[str]]] = None
    #: a name the error line must contain (the malformed file's)
    must_mention: Optional[str] = None
    must_succeed: bool = False
    timeout: float = 20.0

    def outputs(self) -> set:
        """The paths the command line names as outputs (relative to the case folder)."""
        argv = [str(a) for a in self.argv]
        named = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUTPUT_FLAGS}
        named |= {a.split("=", 1)[1] for a in argv
                  if "=" in a and a.split("=", 1)[0] in OUTPUT_FLAGS}
        return {os.path.normpath(name) for name in named}

    def command(self) -> str:
        """The case as a shell line (its reproduction, with the setup named)."""
        return "scalegp " + " ".join(str(a) for a in self.argv)


@dataclass
class Verdict:
    outcome: str
    detail: str = ""
    code: object = None
    stderr: str = ""


# ------------------------------------------------------------------------- the folder state


def _entry(path: Path):
    """What must not change in a folder entry: its type, mode bits and content (a link's
    target, a file's digest)."""
    status = os.lstat(path)
    kind = stat.S_IFMT(status.st_mode)
    if stat.S_ISLNK(status.st_mode):
        return kind, os.readlink(path)
    if stat.S_ISREG(status.st_mode):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return kind, stat.S_IMODE(status.st_mode), digest
    return kind, stat.S_IMODE(status.st_mode)


def snapshot(folder: Path) -> dict:
    """{relative path: entry} of everything under ``folder`` (links not followed)."""
    state = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            state[os.path.relpath(path, folder)] = _entry(path)
    return state


def lost_files(before: dict, after: dict, outputs: set, success: bool) -> list:
    """What the rule calls data loss, as readable lines (empty: nothing lost)."""
    problems = []
    for name, entry in before.items():
        named = name in outputs
        if name not in after:
            problems.append(f"{name} was removed")
        elif after[name] != entry:
            read_only = entry[0] == stat.S_IFREG and not entry[1] & 0o222
            if not named:
                problems.append(f"{name}, not named as an output, was changed")
            elif read_only:
                problems.append(f"{name}, a read-only output, was replaced")
            elif not success:
                problems.append(f"{name}, the output, was changed by a failed command")
    for name in after.keys() - before.keys():
        if name not in outputs and not any(name.startswith(out + os.sep) for out in outputs):
            problems.append(f"{name} was written, but the user did not name it")
    return problems


# ------------------------------------------------------------------------- running a case


class _Timeout(BaseException):
    """Raised by SIGALRM inside ``main`` (a BaseException, so ``main`` does not catch it)."""


@contextlib.contextmanager
def time_limit(seconds: float):
    def expire(signum, frame):
        raise _Timeout()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def call_main(argv, folder: Path, timeout: float):
    """(exit code or "timeout", stdout, stderr, escaped exception text or None) of
    ``scalegp.cli.main(argv)`` run in ``folder``."""
    from scalegp import cli
    out, err = io.StringIO(), io.StringIO()
    code, escaped = None, None
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                time_limit(timeout):
            try:
                code = cli.main([str(a) for a in argv])
            except SystemExit as stop:          # argparse: --help, --version, usage errors
                code = stop.code if isinstance(stop.code, int) else 2
            except _Timeout:
                code = "timeout"
            except Exception:                   # noqa: BLE001 -- the failure sought
                escaped = traceback.format_exc()
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue(), escaped


def _error_lines(stderr: str) -> list:
    return [line for line in stderr.splitlines()
            if line.startswith("scalegp") and ": error:" in line]


def run_case(case: Case, folder: Path) -> Verdict:
    """Run ``case`` in the empty folder ``folder`` and classify it (module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in DECOYS.items():
        if name not in {str(a) for a in case.argv}:
            (folder / name).write_bytes(content)
    case.setup(folder)
    before = snapshot(folder)
    code, stdout, stderr, escaped = call_main(case.argv, folder, case.timeout)
    after = snapshot(folder)
    if code == "timeout":
        return Verdict(HANG, f"no answer within {case.timeout:g} s", code, stderr)
    lost = lost_files(before, after, case.outputs(), code == 0)
    if lost:
        return Verdict(DATA_LOSS, "; ".join(lost), code, stderr)
    if escaped is not None:
        return Verdict(CRASH, escaped.strip().splitlines()[-1], code, stderr)
    if "Traceback" in stderr or "internal error" in stderr:
        line = next((text for text in stderr.splitlines() if "internal error" in text),
                    stderr.strip().splitlines()[-1])
        return Verdict(CRASH, line, code, stderr)
    if code not in (0, 1, 2):
        return Verdict(CRASH, f"exit code {code}", code, stderr)
    if code != 0:
        errors = _error_lines(stderr)
        if len(errors) != 1:
            return Verdict(CRASH, f"exit {code} with {len(errors)} error lines: {stderr!r}",
                           code, stderr)
        if RAW_MESSAGES.search(errors[0]):
            return Verdict(CRASH, f"a raw internal error: {errors[0]}", code, stderr)
        if case.must_mention and case.must_mention not in errors[0]:
            return Verdict(CRASH, f"the error does not name {case.must_mention}: {errors[0]}",
                           code, stderr)
        if case.must_succeed:
            return Verdict(REFUSED_VALID, errors[0], code, stderr)
        return Verdict(CLEAN_ERROR, errors[0], code, stderr)
    if case.oracle is None:
        return Verdict(SILENT_WRONG, "exit 0, but the input must be refused", code, stderr)
    try:
        problem = case.oracle(folder, stdout)
    except Exception as error:          # noqa: BLE001 -- e.g. a written model that fails to load
        problem = f"the result cannot be checked: {type(error).__name__}: {error}"
    if problem:
        return Verdict(SILENT_WRONG, problem, code, stderr)
    return Verdict(OK, "", code, stderr)


# ------------------------------------------------------------------------- oracles' helpers


def finite_problem(name: str, values) -> Optional[str]:
    """None, or a line naming the first non-finite value of ``values``."""
    values = np.asarray(values, dtype=float)
    bad = np.flatnonzero(~np.isfinite(values.ravel()))
    if bad.size:
        return f"{name} holds a non-finite value ({values.ravel()[bad[0]]}) at {bad[0]}"
    return None


def differs(name: str, got, expected, scale: float = 1.0, tolerance: float = 1e-8):
    """None if ``got`` equals ``expected`` to ``tolerance * (scale + |expected|)``, else a line
    naming the largest difference. The tolerance is far below any posterior sd of the cases
    (0.01 and up) and far above the rounding of a reordered sum (1e-15 relative)."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    if got.shape != expected.shape:
        return f"{name} has shape {got.shape}, expected {expected.shape}"
    problem = finite_problem(name, got)
    if problem:
        return problem
    error = np.abs(got - expected)
    limit = tolerance * (scale + np.abs(expected))
    if np.any(error > limit):
        worst = int(np.argmax(error - limit))
        return (f"{name} differs from the reference by {error.ravel()[worst]:.3g} at "
                f"{np.unravel_index(worst, got.shape)} ({got.ravel()[worst]:.6g} against "
                f"{expected.ravel()[worst]:.6g})")
    return None


# ------------------------------------------------------------------------- reporting


@dataclass
class Tally:
    """Counts of outcomes per family, with the bad cases kept for the report."""

    counts: dict = field(default_factory=lambda: collections.defaultdict(collections.Counter))
    bad: list = field(default_factory=list)

    def add(self, case: Case, verdict: Verdict) -> None:
        self.counts[case.family][verdict.outcome] += 1
        if verdict.outcome in BAD:
            self.bad.append((case, verdict))

    def table(self) -> str:
        """The counts as a Markdown table, one row per family and a total."""
        lines = ["| family | cases | " + " | ".join(OUTCOMES) + " |",
                 "|---" * (len(OUTCOMES) + 2) + "|"]
        total = collections.Counter()
        for family in sorted(self.counts):
            counter = self.counts[family]
            total.update(counter)
            lines.append(f"| {family} | {sum(counter.values())} | "
                         + " | ".join(str(counter[c]) for c in OUTCOMES) + " |")
        lines.append(f"| all | {sum(total.values())} | "
                     + " | ".join(str(total[c]) for c in OUTCOMES) + " |")
        return "\n".join(lines)

    def report(self, cases: list) -> str:
        return "\n".join(f"[{v.outcome}] {c.family}: {c.name}: {c.command()}: {v.detail}"
                         for c, v in cases)
