"""The package's wings and their order, and its import graph read from the source (issue 25).

One place declares the architecture: :data:`LAYERS` lists the wings from the bottom up, and a
module may import from its own layer or any layer below, never from one above (an "upward
arrow"). A module's wing is its folder (``scalegp/engine/...`` is the engine), or, for the
modules at the top of the package, :data:`TOP_LEVEL`. ``tests/test_architecture.py`` fails on
a cycle, an upward arrow, a private name used across wings (:func:`private_reaches`) and a
factorization outside :mod:`scalegp.linalg` (:func:`factorizations`);
``benchmarks/structure.py`` prints the numbers (docs/extending.md, "The layout of the
package"). Only the standard library is used: the graph is read from the syntax trees, imports
inside functions included, nothing is imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "scalegp"
ROOT = Path(__file__).resolve().parent

#: The wings from the bottom up; the wings of one layer may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),                     # errors, checks, memory, output, linear algebra, kernels,
                                   # metrics, plots: the top-level modules and kernels/
    ("data", "datasets"),          # data sources, readers, tables; the embedded data sets
    ("features",),                 # feature maps and the rules and sketches they are built on
    ("engine",),                   # statistics, likelihood, posterior, systems, noise
    ("inference",),                # hyperparameter learning, Gibbs sampling, knot learning
    ("local", "vecchia"),          # local (centred) and neighbourhood models, clustering; the
                                   # Vecchia approximation
    ("estimators",),               # the scikit-learn estimators and transformer
    ("io",),                       # model files
    ("experiments",),              # the papers' experiments, run by the command line
    ("cli",),                      # the command line and the demo
    ("package",),                  # the package's face (__init__, __main__) and testing
)

#: The wing of each module at the top of the package (every other module's is its folder).
TOP_LEVEL: dict[str, str] = {
    "scalegp": "package", "__main__": "package", "testing": "package",
    "_architecture": "base", "_version": "base", "errors": "base", "_validation": "base",
    "_limits": "base", "_memory": "base", "_output": "base", "linalg": "base",
    "parallel": "base", "rowwise": "base", "kernels": "base", "metrics": "base",
    "plot": "base", "stored": "base", "nearest": "base",
}

LAYER_OF: dict[str, int] = {wing: level for level, wings in enumerate(LAYERS) for wing in wings}

#: Package-private helper modules: every wing may import them and use their public names. Any
#: other module or name that starts with an underscore is private to its wing.
HELPERS = frozenset({"scalegp._validation", "scalegp._memory", "scalegp._output",
                     "scalegp._limits", "scalegp._version"})

#: Functions of numpy.linalg, scipy.linalg, scipy.sparse.linalg and LAPACK (scipy.linalg.lapack)
#: that factorize a matrix or solve with one: only :mod:`scalegp.linalg` calls them.
FACTORIZING = frozenset({
    "cholesky", "cho_factor", "cho_solve", "solve", "solve_triangular", "eig", "eigh",
    "eigvals", "eigvalsh", "eigsh", "qr", "svd", "svdvals", "lu", "lu_factor", "lu_solve",
    "inv", "pinv", "lstsq", "cond", "det", "slogdet", "ldl",
    *(f"{t}{routine}" for t in "sd" for routine in (
        "potrf", "potrs", "potri", "trtri", "trtrs", "gesv", "getrf", "getrs", "geqrf",
        "syev", "syevd", "syevr", "gesdd", "gesvd"))})
LINALG_MODULES = ("numpy.linalg", "scipy.linalg", "scipy.sparse.linalg", "scipy.linalg.lapack")


def module_name(path: Path, root: Path = ROOT) -> str:
    """``scalegp.engine.likelihood`` for ``<root>/engine/likelihood.py``; a package is named by
    its folder."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGE, *parts])


def wing(module: str) -> str:
    """The wing of a module: its folder below the package, else :data:`TOP_LEVEL`."""
    parts = module.split(".")
    if len(parts) == 1:
        return TOP_LEVEL[PACKAGE]
    if parts[1] in LAYER_OF and (len(parts) > 2 or parts[1] not in TOP_LEVEL):
        return parts[1]
    return TOP_LEVEL[parts[1]]


@dataclass
class Module:
    """One module of the package: where it is, its size, and what it imports."""
    name: str
    path: Path
    lines: int
    classes: dict[str, int]                     # class name -> lines
    imports: set[str] = field(default_factory=set)
    #: (imported module, name) for every ``from module import _private`` and ``module._private``
    private_uses: set[tuple[str, str]] = field(default_factory=set)
    #: private names the module defines (functions, classes, attributes, variables)
    defines: set[str] = field(default_factory=set)
    #: (line, text) of every ``obj._private`` with obj neither ``self`` nor ``cls``
    private_attributes: list[tuple[int, str]] = field(default_factory=list)
    #: (line, text) of every call of a :data:`FACTORIZING` function of numpy or scipy
    factorizations: list[tuple[int, str]] = field(default_factory=list)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _resolve(node: ast.ImportFrom, name: str, is_package: bool) -> str:
    """The absolute module of a ``from ... import`` statement in module ``name``."""
    if not node.level:
        return node.module or ""
    parts = name.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def read_package(root: Path = ROOT) -> dict[str, Module]:
    """Every module of the package under ``root`` with its imports of other package modules."""
    paths = sorted(root.rglob("*.py"))
    modules = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        classes = {node.name: node.end_lineno - node.lineno + 1
                   for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
        name = module_name(path, root)
        modules[name] = Module(name, path, len(text.splitlines()), classes)
    for module in modules.values():
        is_package = module.path.name == "__init__.py"
        tree = ast.parse(module.path.read_text(encoding="utf-8"))
        aliases = {}                            # local name -> package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        target = alias.name
                        module.imports.add(target)
                        aliases[alias.asname or alias.name] = target
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(node, module.name, is_package)
                if source.split(".")[0] != PACKAGE:
                    continue
                for alias in node.names:
                    child = f"{source}.{alias.name}"
                    if child in modules:
                        module.imports.add(child)
                        aliases[alias.asname or alias.name] = child
                    else:
                        module.imports.add(source)
                        if is_private(alias.name):
                            module.private_uses.add((source, alias.name))
        _read_names(module, tree, aliases)
        module.imports.discard(module.name)
        module.imports &= set(modules)
    return modules


def _read_names(module: Module, tree: ast.Module, aliases: dict[str, str]) -> None:
    """Fill the private names a module defines and reaches, and its factorizing calls."""
    linalg_aliases, linalg_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in ("numpy", "scipy"):
                    linalg_aliases |= {f"{alias.asname or alias.name}.linalg",
                                       f"{alias.asname or alias.name}.sparse.linalg"}
                elif alias.name in LINALG_MODULES:
                    linalg_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in LINALG_MODULES:
                    linalg_aliases.add(alias.asname or alias.name)
                elif node.module in LINALG_MODULES and alias.name in FACTORIZING:
                    linalg_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.defines.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            module.defines.add(node.id)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Store):
                module.defines.add(node.attr)
            elif is_private(node.attr):
                if isinstance(node.value, ast.Name) and node.value.id in aliases:
                    module.private_uses.add((aliases[node.value.id], node.attr))
                elif not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    module.private_attributes.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            function = ast.unparse(node.func)
            owner, _, name = function.rpartition(".")
            if (owner in linalg_aliases and name in FACTORIZING) or function in linalg_names:
                module.factorizations.append((node.lineno, function))
    module.defines = {name for name in module.defines if is_private(name)}


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(modules[v].imports):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return sorted(components)


def longest_chain(modules: dict[str, Module]) -> list[str]:
    """The longest chain of imports (a cycle counted as one floor): the graph's depth."""
    component_of = {v: v for v in modules}
    for component in cycles(modules):
        for v in component:
            component_of[v] = component[0]
    edges: dict[str, set[str]] = {component_of[v]: set() for v in modules}
    for v, module in modules.items():
        edges[component_of[v]] |= {component_of[w] for w in module.imports} - {component_of[v]}
    best: dict[str, list[str]] = {}

    def chain(v):
        if v not in best:
            best[v] = [v] + max((chain(w) for w in sorted(edges[v])), key=len, default=[])
        return best[v]

    return max((chain(v) for v in sorted(edges)), key=len, default=[])


def wing_chain(modules: dict[str, Module]) -> list[str]:
    """The longest chain of wings, each importing the next (the depth of the wing graph, whose
    only edges run down or sideways within a layer when there is no upward arrow)."""
    edges: dict[str, set[str]] = {}
    for name, module in modules.items():
        edges.setdefault(wing(name), set()).update(wing(w) for w in module.imports)
    for source, targets in edges.items():
        targets.discard(source)
    best: dict[str, list[str]] = {}

    def chain(v, seen=()):
        if v in seen:                          # a cycle of wings: stop there
            return []
        if v not in best:
            best[v] = [v] + max((chain(w, seen + (v,)) for w in sorted(edges.get(v, ()))),
                                key=len, default=[])
        return best[v]

    return max((chain(v) for v in sorted(edges)), key=len, default=[])


def upward_arrows(modules: dict[str, Module]) -> list[tuple[str, str]]:
    """Every import from a module to one of a higher layer."""
    return sorted((v, w) for v, module in modules.items() for w in module.imports
                  if LAYER_OF[wing(w)] > LAYER_OF[wing(v)])


def private_reaches(modules: dict[str, Module]) -> list[str]:
    """A line for every private module or name used outside its wing.

    Private to its wing: a module whose name starts with an underscore (but the
    :data:`HELPERS`, which every wing may import), and a name that does: imported from another
    wing's module or read from it (``module._name``), or read as ``obj._name`` from an object
    when no module of the reader's wing defines ``_name`` (``self`` and ``cls`` excepted). A
    helper's own private names are private to it.
    """
    defined: dict[str, set[str]] = {}
    for name, module in modules.items():
        defined.setdefault(wing(name), set()).update(module.defines)
    found = []
    for name, module in sorted(modules.items()):
        here = wing(name)
        for target in sorted(module.imports):
            if (any(is_private(part) for part in target.split(".")[1:])
                    and target not in HELPERS and wing(target) != here):
                found.append(f"{name} imports {target}")
        for target, attribute in sorted(module.private_uses):
            if target != name and (wing(target) != here or target in HELPERS):
                found.append(f"{name} uses {target}.{attribute}")
        for _, text in sorted(set(module.private_attributes)):
            if text.rpartition(".")[2] not in defined[here]:
                found.append(f"{name} reads {text}")
    return list(dict.fromkeys(found))


def factorizations(modules: dict[str, Module]) -> dict[str, int]:
    """The factorizing calls of each module but :mod:`scalegp.linalg` that makes any."""
    return {name: len(module.factorizations) for name, module in sorted(modules.items())
            if name != f"{PACKAGE}.linalg" and module.factorizations}
