"""The package's wings and their order, and its import graph read from the source (issue 25).

One place declares the architecture: :data:`LAYERS` lists the wings from the bottom up, and a
module may import from its own layer or any layer below, never from one above (an "upward
arrow"). A module's wing is its folder (``scalegp/engine/...`` is the engine), or, for the
modules at the top of the package, :data:`TOP_LEVEL`. ``tests/test_architecture.py`` fails on
a cycle or an upward arrow; ``benchmarks/structure.py`` prints the numbers. Only the standard
library is used: the graph is read from the syntax trees, imports inside functions included,
nothing is imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "scalegp"
ROOT = Path(__file__).resolve().parent

#: The wings from the bottom up; the wings of one layer may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),                     # errors, checks, memory, output, linear algebra, kernels
    ("data", "datasets"),          # data sources, readers, tables; the embedded data sets
    ("features",),                 # feature maps and the rules and sketches they are built on
    ("engine",),                   # statistics, likelihood, posterior, systems, noise
    ("inference",),                # hyperparameter learning, Gibbs sampling, knot learning
    ("local",),                    # local (centred) and neighbourhood models, clustering
    ("estimators",),               # the scikit-learn estimators and transformer
    ("io",),                       # model files
    ("experiments",),              # the papers' experiments, run by the command line
    ("cli",),                      # the command line and the demo
    ("package",),                  # the package's face (__init__, __main__) and testing
)

#: The wing of each module at the top of the package (every other module's is its folder).
TOP_LEVEL: dict[str, str] = {
    "scalegp": "package", "__main__": "package", "testing": "package",
    "_architecture": "base", "errors": "base", "_validation": "base", "_limits": "base",
    "_memory": "base", "_output": "base", "linalg": "base", "parallel": "base",
    "rowwise": "base", "kernels": "base", "metrics": "base",
    # the flat layout before issue 25: each module's wing as its docstring describes it
    "data": "data", "sources": "data", "readers": "data", "tables": "data", "grid": "data",
    "distributed": "data", "datasets": "datasets",
    "glf_theory": "features", "quadrature": "features", "sketches": "features",
    "gp": "engine", "systems": "engine", "noise": "engine", "positive_part": "engine",
    "qr": "engine", "objectives": "engine", "hyperparameters": "engine", "exact": "engine",
    "optimize": "inference", "gibbs": "inference", "knot_learning": "inference",
    "glf_selection": "inference",
    "local": "local", "neighborhoods": "local", "clustering": "local", "resolution": "local",
    "estimator": "estimators", "gibbs_estimator": "estimators", "transformers": "estimators",
    "_training_data": "estimators",
    "io": "io", "cli": "cli", "demo": "cli",
}

LAYER_OF: dict[str, int] = {wing: level for level, wings in enumerate(LAYERS) for wing in wings}


def module_name(path: Path, root: Path = ROOT) -> str:
    """``scalegp.engine.gp`` for ``<root>/engine/gp.py``; a package is named by its folder."""
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
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            module.private_uses.add((source, alias.name))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                module.private_uses.add((aliases[node.value.id], node.attr))
        module.imports.discard(module.name)
        module.imports &= set(modules)
    return modules


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


def upward_arrows(modules: dict[str, Module]) -> list[tuple[str, str]]:
    """Every import from a module to one of a higher layer."""
    return sorted((v, w) for v, module in modules.items() for w in module.imports
                  if LAYER_OF[wing(w)] > LAYER_OF[wing(v)])
