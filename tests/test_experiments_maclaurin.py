"""Smoke test of the local Maclaurin paper's experiments (quick mode): each runs end to end,
writes a PNG and a markdown table, and the sinc table shows the ordering of Fig. 2."""

import pytest

from scalegp import experiments

pytest.importorskip("matplotlib")


def test_maclaurin_kernel_experiment(tmp_path):
    written = experiments.run("maclaurin-kernel", tmp_path, quick=True)
    assert sorted(p.name for p in written) == ["maclaurin-kernel.md", "maclaurin-kernel.png"]
    assert (tmp_path / "maclaurin-kernel.png").read_bytes()[:4] == b"\x89PNG"
    table = (tmp_path / "maclaurin-kernel.md").read_text()
    assert table.startswith("# maclaurin-kernel") and "constants ours" in table


def test_maclaurin_sinc_experiment_orders_the_methods(tmp_path):
    written = experiments.run("maclaurin-sinc", tmp_path, quick=True)
    assert sorted(p.name for p in written) == ["maclaurin-sinc.md", "maclaurin-sinc.png"]
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ")
            for line in (tmp_path / "maclaurin-sinc.md").read_text().splitlines()
            if line.startswith("| ") and "| 10 |" in line}
    kl_in = {name: float(row[2]) for name, row in rows.items()}
    std_out = {name: float(row[4].rstrip(" |")) for name, row in rows.items()}
    assert kl_in["local Maclaurin"] < kl_in["Maclaurin"] < kl_in["RFF"]
    assert std_out["Maclaurin"] < 1e-3 < 0.5 < std_out["local Maclaurin"]
