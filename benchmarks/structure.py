"""The structure numbers of the package, from its import graph (issue 25, "Must show").

    .venv/bin/python benchmarks/structure.py           # a markdown table
    .venv/bin/python benchmarks/structure.py --json    # the same numbers as JSON

Read from the syntax trees of ``src/scalegp`` (imports inside functions included, nothing
imported) by :mod:`scalegp._architecture`, which also declares the wings and their order:
modules and lines per folder, the largest module and class, the depth of the import graph (the
longest chain of imports, a cycle counted as one floor) and of the graph of wings, the cycles and
the upward arrows (an import from a lower wing to a higher one), the private names reached across
wings and the calls that factorize a matrix outside ``scalegp.linalg``.
``tests/test_architecture.py`` holds the same graph to zero cycles and zero upward arrows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_architecture():
    """:mod:`scalegp._architecture` of this checkout, loaded alone (the package is not imported)."""
    spec = importlib.util.spec_from_file_location(
        "scalegp._architecture", ROOT / "src" / "scalegp" / "_architecture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


arch = load_architecture()

MODULE_LIMIT, CLASS_LIMIT = 700, 400


def numbers(root: Path = arch.ROOT) -> dict:
    modules = arch.read_package(root)
    folders = defaultdict(lambda: {"modules": 0, "lines": 0})
    for module in modules.values():
        folder = module.path.parent.relative_to(root).as_posix()
        folders[folder]["modules"] += 1
        folders[folder]["lines"] += module.lines
    largest = max(modules.values(), key=lambda m: m.lines)
    classes = [(lines, f"{m.name}.{name}") for m in modules.values()
               for name, lines in m.classes.items()]
    chain = arch.longest_chain(modules)
    return {
        "modules": len(modules),
        "lines": sum(m.lines for m in modules.values()),
        "folders": dict(sorted(folders.items())),
        "largest_module": {"name": largest.name, "lines": largest.lines},
        "largest_class": {"name": max(classes)[1], "lines": max(classes)[0]},
        "modules_over_limit": {m.name: m.lines for m in sorted(modules.values(),
                               key=lambda m: -m.lines) if m.lines > MODULE_LIMIT},
        "classes_over_limit": {name: lines for lines, name in sorted(classes, reverse=True)
                               if lines > CLASS_LIMIT},
        "depth": len(chain),
        "longest_chain": chain,
        "wing_depth": len(arch.wing_chain(modules)),
        "wing_chain": arch.wing_chain(modules),
        "cycles": arch.cycles(modules),
        "upward_arrows": [list(arrow) for arrow in arch.upward_arrows(modules)],
        "private_reaches": arch.private_reaches(modules),
        "factorizations_outside_linalg": arch.factorizations(modules),
    }


def markdown(n: dict) -> str:
    lines = ["| folder (under src/scalegp) | modules | lines |", "|---|---:|---:|"]
    lines += [f"| {folder} | {v['modules']} | {v['lines']:,} |" for folder, v in n["folders"].items()]
    lines += [f"| **all** | **{n['modules']}** | **{n['lines']:,}** |", ""]
    over = lambda d: ", ".join(f"{k} {v:,}" for k, v in d.items()) or "none"  # noqa: E731
    lines += [
        "| measure | value |", "|---|---|",
        f"| largest module | {n['largest_module']['name']} ({n['largest_module']['lines']:,} lines) |",
        f"| largest class | {n['largest_class']['name']} ({n['largest_class']['lines']:,} lines) |",
        f"| modules over {MODULE_LIMIT} lines | {len(n['modules_over_limit'])}: "
        f"{over(n['modules_over_limit'])} |",
        f"| classes over {CLASS_LIMIT} lines | {len(n['classes_over_limit'])}: "
        f"{over(n['classes_over_limit'])} |",
        f"| depth of the import graph (floors) | {n['depth']}: {' -> '.join(n['longest_chain'])} |",
        f"| depth in wings | {n['wing_depth']}: {' -> '.join(n['wing_chain'])} |",
        f"| cycles | {len(n['cycles'])}"
        + "".join(f"; {{{', '.join(c)}}}" for c in n["cycles"]) + " |",
        f"| upward arrows | {len(n['upward_arrows'])}"
        + "".join(f"; {a} -> {b}" for a, b in n["upward_arrows"]) + " |",
        f"| private names reached across wings | {len(n['private_reaches'])}"
        + "".join(f"; {line}" for line in n["private_reaches"]) + " |",
        f"| factorizing calls outside linalg | "
        f"{sum(n['factorizations_outside_linalg'].values())}: "
        f"{over(n['factorizations_outside_linalg'])} |",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON, not markdown")
    args = parser.parse_args()
    n = numbers()
    print(json.dumps(n, indent=1) if args.json else markdown(n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
