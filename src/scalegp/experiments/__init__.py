"""Paper experiments, runnable as ``scalegp experiment NAME``.

Each experiment is a function ``run(output_dir: pathlib.Path, quick: bool) -> list[Path]`` that
writes PNG figures and a markdown table into ``output_dir`` and returns the written paths.
``quick=True`` runs reduced sizes (used by the smoke tests). Modules of this package register
their experiments with :func:`register`, declaring the file names they write; every module is
imported on first use.

Outputs are written with :func:`write_figure` and :func:`write_text` (atomically, see
:mod:`scalegp._output`). :func:`run` checks the folder and every declared file before the
experiment starts: a folder, FIFO, device, socket or symbolic link at one of those names is
refused before any work. In the default folder (:data:`DEFAULT_OUTPUT_DIR`, used when the
user names none: ``run(..., replace=False)``) nothing is replaced: an existing file at a
declared name is refused before the experiment starts, and the writes only create files.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import pkgutil
from pathlib import Path

from .._output import (MARKDOWN_SUFFIXES, PNG_SUFFIXES, check_output_dir, check_output_path,
                       write_atomically)
from ..errors import UnsafeOutputError

#: The folder ``scalegp experiment`` writes into when no --out-dir is given.
DEFAULT_OUTPUT_DIR = "experiment-output"

_EXPERIMENTS: dict = {}
#: Whether the writes of the running experiment may replace files (False in a folder the user
#: did not name).
_REPLACE = contextvars.ContextVar("replace", default=True)


def register(name: str, description: str, *, outputs):
    """Decorator: register ``run(output_dir, quick)`` under ``name``; ``outputs`` are the names
    of the files it writes into ``output_dir``."""
    def decorate(function):
        if name in _EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is registered twice")
        _EXPERIMENTS[name] = (function, description, tuple(outputs))
        return function
    return decorate


def write_figure(fig, path: Path, *, dpi: int) -> Path:
    """Write a matplotlib figure as a PNG file, atomically; returns ``path``."""
    write_atomically(path, lambda file: fig.savefig(file, dpi=dpi, format="png"),
                     suffixes=PNG_SUFFIXES, replace=_REPLACE.get())
    return path


def write_text(path: Path, text: str) -> Path:
    """Write a markdown file (UTF-8), atomically; returns ``path``."""
    write_atomically(path, lambda file: file.write(text), binary=False,
                     suffixes=MARKDOWN_SUFFIXES, replace=_REPLACE.get())
    return path


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def names() -> list[str]:
    _discover()
    return sorted(_EXPERIMENTS)


def describe() -> dict[str, str]:
    _discover()
    return {name: _EXPERIMENTS[name][1] for name in sorted(_EXPERIMENTS)}


def run(name: str, output_dir, quick: bool = False, *, replace: bool = True) -> list[Path]:
    """Run one experiment; returns the files it wrote.

    ``output_dir`` is created if missing; it and the experiment's declared outputs in it are
    checked before the experiment starts (:class:`~scalegp.errors.UnsafeOutputError`).
    ``replace=False`` (a folder the user did not name) refuses an existing file at any
    declared name, and the writes then only create files.
    """
    _discover()
    if name not in _EXPERIMENTS:
        raise ValueError(f"experiment must be one of {', '.join(sorted(_EXPERIMENTS)) or '(none)'}; "
                         f"got {name!r}")
    function, _, outputs = _EXPERIMENTS[name]
    output_dir = Path(check_output_dir(output_dir, what="output_dir"))
    output_dir.mkdir(parents=True, exist_ok=True)
    for output in outputs:
        path = output_dir / output
        if not replace and os.path.lexists(path):
            raise UnsafeOutputError(
                f"{str(path)!r} already exists, and scalegp never replaces a file you did not "
                f"name: give --out-dir {output_dir} to replace the experiment's files there, "
                "or --out-dir with another folder")
        check_output_path(path, what="output file")
    token = _REPLACE.set(replace)
    try:
        written = list(function(output_dir, quick))
    finally:
        _REPLACE.reset(token)
    undeclared = sorted({Path(path).name for path in written} - set(outputs))
    if undeclared:
        raise RuntimeError(f"experiment {name!r} wrote undeclared file(s) "
                           f"{', '.join(undeclared)}; declare them in register(outputs=...)")
    return written
