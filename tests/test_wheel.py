"""The wheel (``-m slow``): built from a copy of the working tree as ``python -m build`` builds
it (PEP 517, isolated: the build backend of pyproject.toml comes from the package index), it
holds every module of src/scalegp, the embedded data files and py.typed, the licence and the
``scalegp`` command. benchmarks/results/wheel-check-2026-12-04.md records the install in a
fresh virtual environment and ``scalegp demo`` run from it."""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import scalegp as sg

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "scalegp"
#: What a build of the working tree must not copy (outputs of earlier builds and tools).
IGNORED = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                 ".ruff_cache", ".pytest_cache", "docs/_build", "shared")


def _build_wheel(tmp_path) -> Path:
    source, out = tmp_path / "source", tmp_path / "dist"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(source)]
    else:       # pip's PEP 517 build, isolated in the same way
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out),
                   str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    wheels = list(out.glob("scalegp-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow
def test_the_wheel_holds_every_module_the_data_and_py_typed(tmp_path):
    wheel = _build_wheel(tmp_path)
    assert wheel.name == f"scalegp-{sg.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py")}
    assert len(modules) > 100
    assert sorted(modules - names) == []
    data = {str(path.relative_to(PACKAGE.parent))
            for pattern in ("datasets/*.npz", "datasets/*.txt", "datasets/*.md", "py.typed")
            for path in PACKAGE.glob(pattern)}
    assert {"scalegp/datasets/east_africa_relief.npz", "scalegp/datasets/mauna_loa_co2.npz",
            "scalegp/py.typed"} <= data
    assert sorted(data - names) == []
    # nothing of the repository beside the package: no tests, docs or benchmarks
    assert all(name.startswith(("scalegp/", f"scalegp-{sg.__version__}.dist-info/"))
               for name in names), sorted(names)[:20]
    info = f"scalegp-{sg.__version__}.dist-info/"
    assert f"{info}licenses/LICENSE" in names
    with zipfile.ZipFile(wheel) as archive:
        entry_points = archive.read(f"{info}entry_points.txt").decode()
        metadata = archive.read(f"{info}METADATA").decode()
        # the data files are the repository's, byte for byte
        for name in sorted(data):
            assert archive.read(name) == (PACKAGE.parent / name).read_bytes(), name
    assert "scalegp = scalegp.cli:main" in entry_points
    assert f"Version: {sg.__version__}" in metadata
    assert "License-Expression: BSD-3-Clause" in metadata
