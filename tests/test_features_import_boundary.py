"""No module of ``scalegp.features`` imports the GP engine (docs/gauss-legendre.md, section 7:
model selection that needs likelihoods, such as ``n_nodes="auto"``, lives outside the package
and is handed to the map's ``build``). Checked on the syntax tree of every module, imports
inside functions included, relative and absolute alike."""

import ast
from pathlib import Path

import pytest

import scalegp.features

FEATURES = Path(scalegp.features.__file__).parent
PACKAGE = "scalegp.features"
#: The engine: objectives, solvers, optimizer and estimators.
ENGINE = ("scalegp.engine", "scalegp.inference", "scalegp.estimators")


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module an import statement of ``path`` may load: the module of
    ``from X import y`` and X.y (y may be a submodule), resolved against the package."""
    parts = PACKAGE.split(".")            # level 1 is the package, for __init__ and modules
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[: len(parts) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def engine_imports(path: Path) -> list[str]:
    return sorted(name for name in imported_modules(path)
                  if any(name == e or name.startswith(e + ".") for e in ENGINE))


@pytest.mark.parametrize("path", sorted(FEATURES.glob("*.py")), ids=lambda p: p.name)
def test_no_feature_module_imports_the_engine(path):
    assert engine_imports(path) == [], f"{path.name} imports the engine"


def test_the_scan_finds_engine_imports(tmp_path):
    """The scan sees the forms an engine import takes (so the test above can fail)."""
    module = tmp_path / "probe.py"
    module.write_text("from ..engine import gp as engine\nimport scalegp.engine.qr\n"
                      "def f():\n    from ..inference.optimize import learn_hyperparameters\n"
                      "    from scalegp.engine import exact\n"
                      "from .base import FeatureMap\nfrom ..kernels import Kernel\n")
    assert engine_imports(module) == ["scalegp.engine", "scalegp.engine.exact",
                                      "scalegp.engine.gp", "scalegp.engine.qr",
                                      "scalegp.inference.optimize",
                                      "scalegp.inference.optimize.learn_hyperparameters"]
