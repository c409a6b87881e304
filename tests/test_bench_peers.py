"""The peers benchmark's harness on a tiny workload, so that benchmarks/bench_peers.py cannot
rot: subprocess servers, skip rules, scores, ratios and the three outputs."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_peers  # noqa: E402


def test_scores_against_the_gaussian_density():
    y, mean, var = np.array([0.0, 1.0]), np.array([0.5, 0.5]), np.array([1.0, 4.0])
    rmse, nlpd = bench_peers.scores(mean, var, y)
    assert rmse == pytest.approx(0.5)
    expected = np.mean([0.5 * np.log(2 * np.pi * v) + 0.125 / v for v in var])
    assert nlpd == pytest.approx(expected)
    assert np.isnan(bench_peers.scores(mean, None, y)[1])


def test_skip_rules():
    workload = bench_peers.Workload("f", "f-1000", 100_000, 8, 1.0, "", "")
    assert "d = 8" in bench_peers.skip_reason("scalegp GLF", workload, [], 60)
    assert "GiB" in bench_peers.skip_reason("sklearn exact GP", workload, [], 60)
    earlier = [{"n_train": 10_000, "fit_s": 7.0}]
    assert "predicted 70 s" in bench_peers.skip_reason("scalegp RFF", workload, earlier, 60)
    assert bench_peers.skip_reason("scalegp RFF", workload, earlier, 80) is None
    killed = [{"n_train": 10_000, "stopped": True, "killed": True}]
    assert "time limit at N = 10,000" in bench_peers.skip_reason("scalegp RFF", workload,
                                                                 killed, 600)


def test_reported_pass_scales_the_first_chunk_away():
    # two passes of 3 chunks of 10 rows; the second starts at t = 10, 2 s per chunk
    calls = [(1, 10), (2, 20), (3, 30), (12, 10), (14, 20), (16, 30)]
    assert bench_peers.reported_pass_seconds(calls, 30, 0.0) == pytest.approx(3.0)
    assert bench_peers.reported_pass_seconds([(5, 30)], 30, 0.0) is None


def test_ratios_to_the_best_peer():
    rows = [{"workload": "w", "library": "scalegp", "rmse": 1.0, "fit_s": 2.0, "nlpd": 0.1},
            {"workload": "w", "library": "GPyTorch", "rmse": 2.0, "fit_s": 8.0, "nlpd": 0.5},
            {"workload": "w", "library": "scikit-learn", "rmse": 4.0, "fit_s": 4.0,
             "nlpd": float("nan")}]
    bench_peers.add_ratios(rows)
    assert rows[0]["rmse_over_best_peer"] == 0.5
    assert rows[0]["fit_s_over_best_peer"] == 0.5
    assert rows[1]["fit_s_over_best_peer"] == 2.0
    assert rows[0]["nlpd_minus_best_peer"] == pytest.approx(-0.4)
    assert "nlpd_minus_best_peer" not in rows[2]


def test_harness_end_to_end(tmp_path):
    methods = "scalegp GLF,sklearn exact GP,sklearn Nystroem + Ridge"
    result = bench_peers.main(["--quick", "--families", "synthetic-1d", "--sizes", "200,300",
                               "--methods", methods, "--limit", "60",
                               "--cache-dir", str(tmp_path / "cache"),
                               "--out", str(tmp_path / "peers")])
    rows = {(row["method"], row["n_train"]): row for row in result["rows"]}
    assert len(rows) == 6
    ours = rows[("scalegp GLF", 300)]
    # 1-D sin with noise sd 0.1 (about 0.14 standardised): a GP fit gets close to the noise
    assert 0.1 < ours["rmse"] < 0.2 and np.isfinite(ours["nlpd"])
    assert ours["peak_mib"] > ours["baseline_mib"] > 0
    assert ours["pass_s"] > 0 and ours["floor_s"] > 0 and ours["columns"] == 256
    assert np.isnan(rows[("sklearn Nystroem + Ridge", 300)]["nlpd"])
    exact = rows[("sklearn exact GP", 300)]
    assert "skipped" in exact or exact["rmse"] < 0.2
    assert json.loads((tmp_path / "peers.json").read_text())["rows"]
    text = (tmp_path / "peers.md").read_text()
    assert "## For the README (Performance)" in text and "synthetic-1d-300" in text
    assert (tmp_path / "peers.png").stat().st_size > 0
    assert "--cache-dir" not in result["meta"]["command"]
