"""Every reference to the project's documentation resolves inside the repository.

Docstrings, comments, the README and recorded outputs cite the method notes as
``docs/<page>.md``, optionally followed by a quoted section title or a section number. These
tests check that each cited page exists, that each cited title or number is a heading (or a
bold paragraph label) of that page, and that no reference to notes kept outside the
repository (the restored-mathematics files the project was started from) remains.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Trees whose text files are scanned; README.md and the docs pages themselves are added.
SCANNED_TREES = ("src", "tests", "benchmarks")
SCANNED_SUFFIXES = (".py", ".md", ".txt", ".json")
SKIPPED_PARTS = {"__pycache__", ".pytest_cache"}

PAGE = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)")
#: docs/<page>.md, "<Title>" (the title may follow on the next comment or docstring line).
TITLED = re.compile(r'docs/([A-Za-z0-9_.-]+\.md),(?:\s|#:?)*"([^"\n]+)"')
#: docs/<page>.md, section N / sections N-M / section N there
NUMBERED = re.compile(r"docs/([A-Za-z0-9_.-]+\.md),? sections? (\d+)(?:-(\d+))?")

#: References to files outside the repository, which CI and users cannot follow.
OUTSIDE = {
    "a section of the external specification ('spec A.8')": re.compile(r"\b[Ss]pec [A-D]\.?\d"),
    "the external specification ('the spec')": re.compile(r"\b[Tt]he spec\b|\bspec's\b"),
    "the external decisions file ('METHODS decision N')": re.compile(r"\bMETHODS\b"),
    "the external method notes ('methods/*.md')": re.compile(r"\bmethods/[\w.-]+\.md\b"),
    "the external design file ('DESIGN.md')": re.compile(r"\bDESIGN\.md\b"),
}


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    for tree in SCANNED_TREES:
        for path in sorted((ROOT / tree).rglob("*")):
            if (path.is_file() and path.suffix in SCANNED_SUFFIXES
                    and not SKIPPED_PARTS & set(path.parts)
                    and not any(part.endswith(".egg-info") for part in path.parts)):
                files.append(path)
    # this file names the forbidden patterns in order to find them
    return [path for path in files if path != Path(__file__).resolve()]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8", errors="replace")
            for path in scanned_files()}


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def headings(page: str) -> set[str]:
    """Headings (without '#' and a leading 'N.') and bold paragraph labels of a docs page."""
    text = (DOCS / page).read_text(encoding="utf-8")
    titles = {re.sub(r"^\d+\.\s+", "", m.group(1)).strip()
              for m in re.finditer(r"^#+\s+(.+)$", text, re.MULTILINE)}
    titles |= {m.group(1).strip().rstrip(".") for m in re.finditer(r"\*\*([^*\n]+)\*\*", text)}
    return titles


def numbered_sections(page: str) -> set[int]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return {int(m.group(1)) for m in re.finditer(r"^#+\s+(\d+)\.", text, re.MULTILINE)}


def test_the_scan_sees_the_code_and_its_references(texts):
    assert "src/scalegp/engine/likelihood.py" in texts and "README.md" in texts
    cited = [m.group(1) for text in texts.values() for m in PAGE.finditer(text)]
    # the notes are cited from the engine, the kernels and every family of feature maps
    assert {"engine.md", "conventions.md", "gauss-legendre.md", "quadrature-features.md",
            "decisions.md", "positive-part.md"} <= set(cited)


def test_every_cited_docs_page_exists(texts):
    missing = [f"{name}:{line_of(text, m.start())}: docs/{m.group(1)}"
               for name, text in texts.items() for m in PAGE.finditer(text)
               if not (DOCS / m.group(1)).is_file()]
    assert not missing, ("references to docs pages that do not exist (expected a file "
                         f"under {DOCS}):\n" + "\n".join(missing))


def test_every_cited_section_title_is_a_heading_of_its_page(texts):
    wrong = []
    for name, text in texts.items():
        for m in TITLED.finditer(text):
            page, title = m.group(1), m.group(2)
            if (DOCS / page).is_file() and title not in headings(page):
                wrong.append(f"{name}:{line_of(text, m.start())}: docs/{page}, {title!r}")
    assert not wrong, ("section titles that are no heading or bold label of the cited page:\n"
                       + "\n".join(wrong))


def test_every_cited_section_number_exists(texts):
    wrong = []
    for name, text in texts.items():
        for m in NUMBERED.finditer(text):
            page = m.group(1)
            if not (DOCS / page).is_file():
                continue
            wanted = set(range(int(m.group(2)), int(m.group(3) or m.group(2)) + 1))
            if not wanted <= numbered_sections(page):
                wrong.append(f"{name}:{line_of(text, m.start())}: docs/{page}, {m.group(0)!r}")
    assert not wrong, ("section numbers the cited page does not have ('## N. Title' "
                       "headings):\n" + "\n".join(wrong))


@pytest.mark.parametrize("what", sorted(OUTSIDE))
def test_no_reference_to_notes_outside_the_repository(texts, what):
    pattern = OUTSIDE[what]
    found = [f"{name}:{line_of(text, m.start())}: {m.group(0)!r}"
             for name, text in texts.items() for m in pattern.finditer(text)]
    assert not found, (f"references to {what}, a file outside the repository; cite the "
                       "project's own notes under docs/ instead:\n" + "\n".join(found))
