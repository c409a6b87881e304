"""Packaging facts that must not drift: one version, the licence pyproject declares."""

import re
from pathlib import Path

import scalegp as sg

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_citation_agrees():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and not re.search(r'^version\s*=\s*"', pyproject,
                                                                  re.MULTILINE)
    assert 'version = {attr = "scalegp._version.__version__"}' in pyproject
    citation = re.search(r"^version: (\S+)$", (ROOT / "CITATION.cff").read_text(), re.MULTILINE)
    assert citation and citation.group(1) == sg.__version__


def test_licence_file_matches_the_declared_licence():
    assert 'license = "BSD-3-Clause"' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    assert (ROOT / "src" / "scalegp" / "py.typed").exists()


def test_changelog_has_an_unreleased_section():
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()
