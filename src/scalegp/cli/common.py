"""What every command of the command line shares: its error, options, log, progress bars and
warnings.
"""

from __future__ import annotations

import json
import sys
import warnings
from contextlib import contextmanager

from tqdm import tqdm

from ..data.sources import ProgressBars


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2."""


# --------------------------------------------------------------------------- helpers
def _parse_options(pairs) -> dict:
    """``--option key=value`` pairs; values are parsed as JSON when possible."""
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CommandError(f"--option must look like key=value, got {pair!r}")
        key, text = pair.split("=", 1)
        try:
            options[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            options[key.strip()] = text
    return options


def _to_stderr(text: str) -> None:
    """A message on stderr above the progress bars: ``tqdm.write`` clears the bars drawn
    there, prints, and draws them again, so that a message never runs into a bar."""
    tqdm.write(text, file=sys.stderr)


def _log(args, message: str) -> None:
    if not args.quiet:
        _to_stderr(message)


@contextmanager
def _progress(args):
    """A :class:`~scalegp.data.sources.ProgressBars`, or None when quiet or stderr is not a
    terminal."""
    if args.quiet or not sys.stderr.isatty():
        yield None
        return
    bars = ProgressBars()
    try:
        yield bars
    finally:
        bars.close()


@contextmanager
def _warnings_as_lines(args):
    """Print every warning raised inside as one ``scalegp COMMAND: warning: TEXT`` line,
    each distinct text once."""
    seen = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        if text not in seen:
            seen.add(text)
            _to_stderr(f"scalegp {args.command}: warning: {text}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def _describe_header(reader) -> str:
    if reader.has_header:
        return f"columns {', '.join(reader.columns)}"
    return ("no header row (the first line is data: all its cells are numbers; pass --header "
            "yes if it holds column names)")


def require_matplotlib(what: str) -> None:
    """A CommandError naming ``what`` and the extra to install when matplotlib is missing:
    checked before any work, so a long fit never ends in an import error."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        raise CommandError(f"{what} draws with matplotlib, which is not installed: "
                           "pip install 'scalegp[cli]' (or 'scalegp[plot]')")
