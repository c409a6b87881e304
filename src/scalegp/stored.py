"""What a stored component declares of its section of a model file (issue 25, "io by
declaration").

Every component a model file holds (a feature map, a factorized system, the low-rank and the
exact posterior, Gibbs samples, a local kind) declares the values of its section next to its
code, and writes and rebuilds itself from them:

* ``STORED``: a dict name -> :class:`Array` (an ``.npy`` member of the file) or :class:`Value`
  (a JSON value of the metadata), with the shape, the dtype kind or JSON kind, and the
  conditions every value must meet (a tuple of arrays: alternatives, each present for the
  values of the section its ``when`` names, :func:`selected`);
* ``to_state()``: name -> array or JSON value, what the writer stores;
* ``from_state(state, **context)``: the component from its validated state (the context is
  what the other sections rebuilt: the kernel, the feature map ...), ValueError for values
  that the declarations cannot refuse alone (values that disagree with each other).

:mod:`scalegp.io` walks the sections generically: it checks each value against its
declaration (kind, shape in terms of the other arrays, :data:`CONDITIONS`) before
``from_state`` sees it, and knows no component's fields. A shape is a tuple of ints and
symbols: "d" is n_features_in, "m" the feature map's n_components; any other symbol takes the
size it first meets in the file and must be the same wherever it appears.

A condition c on values v holds when ``c.holds(c.values(v))`` is true everywhere; for example
"cholesky" says A_ij = 0 for j > i and A_ii > 0 (a lower triangular factor, or a stack of
them, with a positive diagonal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

__all__ = ["Array", "Value", "Condition", "CONDITIONS", "JSON_KINDS", "ARRAY_KINDS",
           "declarations", "selected", "alternatives"]


@dataclass(frozen=True)
class Condition:
    """What every checked value of a field must be: ``holds(values(a))`` is true everywhere."""

    description: str
    holds: Callable[[np.ndarray], np.ndarray]
    of: str = "entry"
    values: Callable[[np.ndarray], np.ndarray] = np.asarray

    def failure(self, array: np.ndarray):
        """(index, value) of the first value that breaks the condition, or None."""
        values = np.atleast_1d(self.values(array))
        bad = np.argwhere(~np.asarray(self.holds(values), dtype=bool))
        if bad.size == 0:
            return None
        index = tuple(int(i) for i in bad[0])
        return (index[0] if len(index) == 1 else index), values[index].item()


def _nonsingular(eigenvalues: np.ndarray) -> np.ndarray:
    """|lambda| above m eps max|lambda|, the tolerance of linalg.SymmetricFactorization."""
    magnitude = np.abs(eigenvalues)
    largest = np.max(magnitude) if np.all(np.isfinite(magnitude)) else np.inf
    return magnitude > eigenvalues.size * np.finfo(np.float64).eps * max(largest, 1e-300)


FINITE = Condition("finite", np.isfinite)
POSITIVE = Condition("finite and > 0", lambda v: np.isfinite(v) & (v > 0))
NONNEGATIVE = Condition("finite and >= 0", lambda v: np.isfinite(v) & (v >= 0))
AT_LEAST_ONE = Condition("finite and >= 1", lambda v: np.isfinite(v) & (v >= 1))
LOWER_TRIANGULAR = Condition("0 above the diagonal (a lower triangular factor)",
                             lambda A: np.tril(np.ones(A.shape, dtype=bool)) | (A == 0))
POSITIVE_DIAGONAL = Condition("finite and > 0 on the diagonal", POSITIVE.holds,
                              of="diagonal entry",
                              values=lambda A: np.diagonal(A, axis1=-2, axis2=-1))


#: The named conditions a declaration may use (each a tuple, checked in order).
CONDITIONS: dict[str, tuple[Condition, ...]] = {
    "finite": (FINITE,),
    "positive": (POSITIVE,),
    "nonnegative": (NONNEGATIVE,),
    "at_least_one": (AT_LEAST_ONE,),
    "sign": (Condition("-1 or +1", lambda v: (v == 1) | (v == -1)),),
    "panel_count": (Condition("1 or 2", lambda v: (v == 1) | (v == 2)),),
    # a value that is reported, not computed with (inf is a legitimate "none")
    "reported": (Condition(">= 0 (inf allowed, NaN not)", lambda v: v >= 0),),
    # a reported value that may be "not computed" (NaN), else finite and >= 0
    "nan_or_nonnegative": (Condition("finite and >= 0, or NaN (not computed)",
                                     lambda v: np.isnan(v) | (np.isfinite(v) & (v >= 0))),),
    # the best value of every optimizer start (-inf: every start failed); never NaN or +inf
    "below_inf": (Condition("not NaN and < inf", lambda v: v < np.inf),),
    # a lower triangular factor (or a stack of them) with a positive diagonal
    "cholesky": (LOWER_TRIANGULAR, POSITIVE_DIAGONAL),
    # eigenvalues of a nonsingular symmetric matrix
    "nonsingular": (Condition("nonzero (|eigenvalue| > m eps max|eigenvalue|)", _nonsingular),),
}


#: JSON kinds of :class:`Value` (:mod:`scalegp.io.schema` checks each).
JSON_KINDS = ("number", "int", "bool", "str", "object", "numbers", "strings", "scale", "scalar",
              "bounds")


#: dtype kinds of :class:`Array`: float64, any integer dtype, or either.
ARRAY_KINDS = ("float", "int", "number")


def _check_conditions(names) -> None:
    for name in names:
        if name not in CONDITIONS:
            raise ValueError(f"unknown condition {name!r}; expected one of {sorted(CONDITIONS)}")


@dataclass(frozen=True)
class Array:
    """An array of a section: its shape (ints and symbols; None: any), the conditions of its
    values (names of :data:`CONDITIONS`) and its dtype kind (:data:`ARRAY_KINDS`).

    ``when``: (name, value or tuple of values): the array is present exactly when the
    section's value ``name`` is one of them (always, if None); ``optional``: the file may lack
    it."""

    shape: tuple | None
    conditions: tuple[str, ...] = ("finite",)
    kind: str = "float"
    when: tuple[str, object] | None = None
    optional: bool = False

    def __post_init__(self):
        _check_conditions(self.conditions)
        if self.kind not in ARRAY_KINDS:
            raise ValueError(f"unknown array kind {self.kind!r}; expected one of {ARRAY_KINDS}")


@dataclass(frozen=True)
class Value:
    """A JSON value of a section: its kind (:data:`JSON_KINDS`), the condition it meets (a
    name of :data:`CONDITIONS`, or None), whether it may be null, and its choices."""

    kind: str
    condition: str | None = None
    nullable: bool = False
    choices: tuple | None = None

    def __post_init__(self):
        if self.condition is not None:
            _check_conditions((self.condition,))
        if self.kind not in JSON_KINDS:
            raise ValueError(f"unknown JSON kind {self.kind!r}; expected one of {JSON_KINDS}")


def declarations(cls) -> dict:
    """The ``STORED`` declarations of a class and its bases, the subclass's winning."""
    merged = {}
    for klass in reversed(cls.__mro__):
        merged.update(vars(klass).get("STORED", {}))
    return merged


def selected(key: str, kinds: dict) -> dict:
    """The arrays of a section whose value ``key`` names one of ``kinds`` (name -> class with
    ``STORED``): name -> the declaration, present when the section's ``key`` is a kind that
    declares it so, or a tuple of such alternatives where the kinds declare a name
    differently (e.g. a shape in other symbols)."""
    groups: dict[str, dict[Array, list[str]]] = {}
    for kind_name, cls in kinds.items():
        for name, declaration in declarations(cls).items():
            if isinstance(declaration, Array):
                groups.setdefault(name, {}).setdefault(declaration, []).append(kind_name)
    out = {}
    for name, variants in groups.items():
        arrays = tuple(replace(declaration, when=(key, tuple(names)))
                       for declaration, names in variants.items())
        out[name] = arrays[0] if len(arrays) == 1 else arrays
    return out


def alternatives(declaration) -> tuple:
    """A declaration as a tuple of alternatives (one, unless :func:`selected` made several)."""
    return declaration if isinstance(declaration, tuple) else (declaration,)
