"""The README's quick start runs as written, and the README keeps its promises of form.

The quick start is the first ``python`` block after the ``<!-- quick-start -->`` marker; it
runs in a fresh interpreter in a temporary folder (it writes ``model.npz`` there), and must
fit, predict and save without error. The set-up commands stay where ``.ci/run`` and the
documentation build's test read them.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def block_after(marker: str, language: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(rf"```{language}\n(.*?)```", re.DOTALL).search(text, start)
    assert match is not None, f"no {language} block after {marker}"
    return match.group(1)


def test_readme_is_short_and_keeps_its_markers():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < 150, f"README.md has {len(lines)} lines (limit 150)"
    for marker in ("<!-- demo-command -->", "<!-- test-command -->", "<!-- docs-command -->",
                   "<!-- quick-start -->"):
        assert marker in lines, marker
    assert "sphinx-build -W" in block_after("<!-- docs-command -->", "bash")
    assert len(block_after("<!-- quick-start -->", "python").strip().splitlines()) <= 15


def test_quick_start_runs(tmp_path):
    code = block_after("<!-- quick-start -->", "python")
    env_src = str(ROOT / "src")
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {env_src!r})\n" + code],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "chosen: " in result.stdout                  # the selection table was printed
    assert "length_scale=" in result.stdout             # and the learned kernel
    assert (tmp_path / "model.npz").is_file()


def test_readme_links_resolve():
    """Every relative link of the README names a file of the repository."""
    text = README.read_text(encoding="utf-8")
    missing = [target for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
               if "://" not in target and not (ROOT / target).exists()]
    assert not missing, f"README links to missing files: {missing}"
