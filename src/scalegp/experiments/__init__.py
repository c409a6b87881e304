"""Paper experiments, runnable as ``scalegp experiment NAME``.

Each experiment is a function ``run(output_dir: pathlib.Path, quick: bool) -> list[Path]`` that
writes PNG figures and a markdown table into ``output_dir`` and returns the written paths.
``quick=True`` runs reduced sizes (used by the smoke tests). Modules of this package register
their experiments with :func:`register`; every module is imported on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

_EXPERIMENTS: dict = {}


def register(name: str, description: str):
    """Decorator: register ``run(output_dir, quick)`` under ``name``."""
    def decorate(function):
        if name in _EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is registered twice")
        _EXPERIMENTS[name] = (function, description)
        return function
    return decorate


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


def run(name: str, output_dir, quick: bool = False) -> list[Path]:
    """Run one experiment; returns the files it wrote."""
    _discover()
    if name not in _EXPERIMENTS:
        raise ValueError(f"experiment must be one of {', '.join(sorted(_EXPERIMENTS)) or '(none)'}; "
                         f"got {name!r}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    return list(_EXPERIMENTS[name][0](output_dir, quick))
