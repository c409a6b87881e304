"""Registry of feature maps: ``get(name)``, ``names()``.

Every module of this package is imported on first use, so a new file that defines a
``FeatureMap`` subclass with ``name="..."`` is registered (and covered by the contract tests)
without touching this file.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import FeatureMap, FixedBasisFeatureMap, MapSequence, registry

__all__ = ["FeatureMap", "FixedBasisFeatureMap", "MapSequence", "get", "names", "describe"]


def _discover() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_") and module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")


_discover()


def names() -> list[str]:
    """Registered approximation names, sorted."""
    return sorted(registry())


def get(name: str) -> type[FeatureMap]:
    """The feature-map class registered under ``name`` (case-insensitive, like kernel names)."""
    maps = registry()
    if not isinstance(name, str) or name.lower() not in maps:
        raise ValueError(
            f"approximation must be one of {', '.join(sorted(maps))}; got {name!r}"
        )
    return maps[name.lower()]


def describe() -> dict[str, str]:
    """name -> one-line description (with the paper), for ``scalegp list``."""
    out = {}
    for name, cls in sorted(registry().items()):
        out[name] = cls.description + (f" [{cls.reference}]" if cls.reference else "")
    return out
