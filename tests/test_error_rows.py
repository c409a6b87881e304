"""The error-rows diagnostic of the auto panel (benchmarks/error_rows.py) on predictions made
up by hand, so that its arithmetic cannot rot: the rows taken out are auto's worst, the same
for every configuration, and the shares and RMSEs are those of the remaining rows."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import error_rows  # noqa: E402


def test_report_takes_out_autos_worst_rows_for_every_configuration():
    y = np.zeros(4)
    X = np.array([[0.0], [1.0], [-50.0], [2.0]])
    found = {error_rows.AUTO: np.array([0.1, 0.1, 3.0, 0.1]),
             "other": np.array([1.0, 0.0, 0.0, 0.0])}
    text = error_rows.report(found, X, y, top=1)
    lines = text.splitlines()
    auto_line = next(line for line in lines if line.startswith(f"| {error_rows.AUTO} |"))
    other_line = next(line for line in lines if line.startswith("| other |"))
    # auto: squared errors 0.01, 0.01, 9, 0.01; without row 2: sqrt(0.01) = 0.1
    assert auto_line == (f"| {error_rows.AUTO} | {np.sqrt(9.03 / 4):.4f} | 0.1000 | "
                         f"{9 / 9.03:.0%} |")
    # the other configuration loses auto's worst row (2), not its own (0)
    assert other_line == f"| other | 0.5000 | {np.sqrt(1 / 3):.4f} | 0% |"
    row_line = lines[-1]
    assert row_line == "| 2 | 0.000 | 50.0 | 3.000 | 0.000 |"
