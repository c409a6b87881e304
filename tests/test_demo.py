"""``scalegp demo`` (:func:`scalegp.cli.demo.run_demo`) at a small size: what it prints and returns.

The printed explanation must name the method and why it was chosen, the box searched and
its reason, the exact GP's RMSE next to the low-rank model's; and its claim about the node
counts that resolve the exact GP's length scales must hold (and be the smallest).
"""

import math
import os
import re
import struct
import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.cli import demo
from scalegp.datasets import load_east_africa_relief
from scalegp.features.gauss_legendre import GaussLegendreFeatures

SIZES = dict(model="global", subsample=600, n_components=64, exact_subsample=300, seed=0)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo with no ``out``: it creates its default figure in the working folder."""
    folder = tmp_path_factory.mktemp("demo")
    lines = []
    previous = os.getcwd()
    os.chdir(folder)
    try:
        results = demo.run_demo(**SIZES, log=lines.append)
    finally:
        os.chdir(previous)
    assert sorted(os.listdir(folder)) == [demo.DEFAULT_OUT]
    return results, lines, folder / demo.DEFAULT_OUT


def line_starting(lines, prefix):
    found = [line for line in lines if line.startswith(prefix)]
    assert len(found) == 1, (prefix, lines)
    return found[0]


def training_data():
    """The demo's training inputs (degrees) and targets (km) at SIZES."""
    relief = load_east_africa_relief()
    rows, _ = demo.split(relief.X, SIZES["seed"], SIZES["subsample"])
    return relief.X[rows], relief.y[rows] / 1000.0


def standardised_training_inputs():
    """The demo's training inputs in the model's standardised units, and the unit (deg)."""
    X, _ = training_data()
    scale = X.std(axis=0)
    return (X - X.mean(axis=0)) / scale, scale


def lowest_resolved(X, counts):
    """Per dimension, the shortest length scale the rule with ``counts`` nodes resolves."""
    kernel = sg.Matern(nu=2.5, length_scale=[1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fmap = GaussLegendreFeatures.build(X, kernel, None, n_nodes=counts,
                                           noise_variance_lower=1e-6)
    return np.exp(fmap.valid_log_bounds(kernel)[:2, 0])


def assert_smallest_resolving(X, q, length_scale, start):
    """q resolves length_scale, and one node fewer in a grown dimension does not."""
    assert np.all(length_scale >= lowest_resolved(X, q))
    for j in np.flatnonzero(q > np.asarray(start)):
        assert length_scale[j] < lowest_resolved(X, q - np.eye(2, dtype=int)[j])[j]


def test_prints_method_reason_box_and_both_rmses(demo_run):
    results, lines, _ = demo_run
    method = line_starting(lines, "method: glf ")
    assert "matern52 kernel" in method
    assert f"n_nodes='auto' within the budget n_components = {SIZES['n_components']}" in method
    assert "the search box by the region the rule resolves" in method
    assert line_starting(lines, "nodes: Gauss-Legendre features: q = [8, 8]")
    box = line_starting(lines, "length scales searched in ")
    assert "on which the rule reproduces the prior variance (valid_log_bounds)" in box
    learned = line_starting(lines, "learned: ")
    assert f"reproduce {100 * results['captured_mass']:.1f} % of its prior variance" in learned
    assert f"test RMSE {results['rmse_m']:.1f} m" in line_starting(lines, "glf: ")
    exact = line_starting(lines, f"exact GP on {SIZES['exact_subsample']} of the training")
    assert f"test RMSE {results['exact_rmse_m']:.1f} m" in exact


def test_the_split_holds_the_region_out_of_training_and_test():
    relief = load_east_africa_relief()
    region = demo.in_held_out_region(relief.X)
    assert region.sum() == 24 * 24                      # 2 x 2 degrees of 1/12-degree cells
    assert relief.y[region].max() == relief.y.max()     # Kilimanjaro, the map's highest cell
    available = len(relief.y) - region.sum() - demo.N_TEST
    train, test = demo.split(relief.X, 0, available)
    assert (train.size, test.size) == (available, demo.N_TEST)
    assert not region[train].any() and not region[test].any()
    assert np.intersect1d(train, test).size == 0
    with pytest.raises(ValueError, match=f"between 2 and {available}"):
        demo.run_demo(subsample=available + 1, out="unused.png")


def test_returned_metrics_are_finite_and_the_figure_is_written(demo_run):
    results, _, out = demo_run
    assert (results["n_train"], results["n_test"], results["n_exact"]) == (600, 5000, 300)
    assert results["n_region"] == 576 and 0 <= results["region_coverage_95"] <= 1
    for key in ("rmse_m", "nlpd_km", "exact_rmse_m", "exact_nlpd_km", "captured_mass",
                "fit_seconds", "predict_seconds", "exact_fit_seconds", "region_rmse_m",
                "region_mean_std_m", "test_mean_std_m"):
        assert math.isfinite(results[key]), key
    for key in ("length_scale_deg", "exact_length_scale_deg"):
        assert results[key].shape == (2,) and np.all(np.isfinite(results[key])), key
    # the elevations span about 9 km: an RMSE of a fitted GP is far below that
    assert 0 < results["exact_rmse_m"] < 1000 and 0 < results["rmse_m"] < 1000
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == demo.FIGURE_PIXELS


def test_on_bound_claim_names_the_smallest_resolving_rule(demo_run):
    """64 features resolve only long scales: the learned ones sit on the box's lower end, the
    exact GP's are shorter, and the printed q is the smallest rule reaching them."""
    results, lines, _ = demo_run
    assert np.all(results["on_lower_bound"]) and not np.any(results["on_upper_bound"])
    claim = line_starting(lines, "the data want shorter length scales than 64 features")
    q = np.array([int(v) for v in re.search(r"q = \[(\d+), (\d+)\] nodes", claim).groups()])
    assert f"(n_components = {int(np.prod(q))}) would resolve that" in claim
    X, scale = standardised_training_inputs()
    exact_scale = results["exact_length_scale_deg"] / scale
    assert np.all(results["length_scale_deg"] / scale < lowest_resolved(X, [8, 8]) * 1.001)
    assert_smallest_resolving(X, q, exact_scale, start=[8, 8])


def test_exact_subsample_is_validated(tmp_path):
    with pytest.raises(ValueError, match="exact_subsample must be at least 2, got 1"):
        demo.run_demo(**{**SIZES, "exact_subsample": 1}, out=tmp_path / "d.png",
                      log=lambda line: None)
    assert not (tmp_path / "d.png").exists()


@pytest.fixture(scope="module")
def small_model():
    """The demo's GLF model at SIZES, and its standardised training inputs."""
    X, y = training_data()
    model, notes, _ = demo._fit_low_rank(X, y, demo._start_kernel("matern52", 2), "glf",
                                         SIZES["n_components"], SIZES["seed"])
    assert any("searching length_scale[0]" in note for note in notes)
    return model, standardised_training_inputs()[0]


def bound_results(lower, upper=(False, False)):
    return {"on_lower_bound": np.array(lower), "on_upper_bound": np.array(upper),
            "n_exact": 300, "n_train": 600}


def exact_with(length_scale):
    return type("Exact", (), {"kernel_": sg.Matern(nu=2.5, length_scale=length_scale)})()


def test_bound_lines_inside_the_box_and_on_its_upper_end(small_model):
    model, X = small_model
    inside = demo._bound_lines(model, None, bound_results([False, False]), X)
    assert inside == ["the learned length scales lie inside the searched box: there the data "
                      "put them"]
    upper = demo._bound_lines(model, None, bound_results([False, False], [False, True]), X)
    assert len(upper) == 1 and upper[0].startswith(
        "the learned latitude length scale sits on the resolvable upper bound")


def test_bound_lines_when_the_exact_gp_learns_longer_or_shorter_scales(small_model):
    model, X = small_model
    low = np.exp(demo._search_box(model)[:2, 0])
    results = bound_results([True, False])
    longer = demo._bound_lines(model, exact_with(low * 1.05), results, X)
    assert "inside the box (300 points support less detail than 600)" in longer[0]
    assert "would resolve" not in longer[0]
    # the shortest longitude scale 27 nodes resolve, which no fewer nodes reach
    target = np.array([lowest_resolved(X, [27, 8])[0], 1.05 * low[1]])
    assert all(target[0] < lowest_resolved(X, [q, 8])[0] for q in range(8, 27))
    q = demo._resolving_nodes(model, X, exact_with(target).kernel_)
    assert q.tolist() == [27, 8]
    shorter = demo._bound_lines(model, exact_with(target), results, X)
    assert shorter[0].endswith(f"q = {q.tolist()} nodes (n_components = {int(np.prod(q))}) "
                               "would resolve that")


def test_neighbourhood_demo_prints_its_model_and_beats_the_exact_subset(tmp_path):
    """The default model at a small size: every training point, 100 per neighbourhood. On
    3,000 training points it measured 217 m against the 300-point exact GP's 396 m."""
    lines = []
    results = demo.run_demo(model="neighbors", subsample=3000, n_neighbors=100,
                            exact_subsample=300, out=tmp_path / "d.png", log=lines.append)
    method = line_starting(lines, "method: neighbourhood-local exact GPs with the matern52")
    assert f"{results['n_centres']} centres, 100 training points each" in method
    assert "32 random neighbourhoods" in method
    assert f"test RMSE {results['rmse_m']:.1f} m" in line_starting(lines, "neighbors: ")
    assert results["rmse_m"] < 0.8 * results["exact_rmse_m"]
    assert line_starting(lines, "the learned length scales lie inside the kernel's bounds")
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_vecchia_demo_prints_its_model_and_beats_the_exact_subset(tmp_path):
    """The default model at a small size. On 3,000 training points it measured 209 m
    against the 300-point exact GP's 411 m (the neighbourhood model: 217 m)."""
    assert demo.run_demo.__kwdefaults__["model"] == "vecchia"
    lines = []
    results = demo.run_demo(model="vecchia", subsample=3000, exact_subsample=300,
                            out=tmp_path / "d.png", log=lines.append)
    method = line_starting(lines, "method: Vecchia approximation (scalegp.vecchia) with the "
                                  "matern52 kernel")
    assert "its 30 nearest predecessors" in method and "its 30 nearest training" in method
    # the first sampled stage holds 1,000+ conditionals, the second all 3,000 (5,000 > N)
    assert re.search(r"on nested samples of the blocks \(1,0\d\d, 3,000 conditionals", method)
    assert f"test RMSE {results['rmse_m']:.1f} m" in line_starting(lines, "vecchia: ")
    assert results["rmse_m"] < 0.8 * results["exact_rmse_m"]
    assert results["n_centres"] is None and results["captured_mass"] is None
    assert line_starting(lines, "the learned length scales lie inside the kernel's bounds")
    # the region held out whole: the std there is above the std at the scattered test
    # points, and larger errors come with it (the peaks are missing); at 3,000 training
    # points (0.4 degrees apart) it measured 349 m against 198 m, RMSE 349 m against 209 m,
    # with 98 % of the region inside its 95 % interval (the full demo: 591 m against 48 m)
    region = line_starting(lines, "held-out region")
    assert f"RMSE {results['region_rmse_m']:.0f} m" in region
    assert results["region_mean_std_m"] > 1.5 * results["test_mean_std_m"]
    assert results["region_rmse_m"] > 1.5 * results["rmse_m"]
    assert results["region_coverage_95"] > 0.9
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_demo_refuses_an_unknown_model_and_a_global_exact(tmp_path):
    with pytest.raises(ValueError, match="model must be one of"):
        demo.run_demo(model="local", out=tmp_path / "d.png")
    with pytest.raises(ValueError, match="model='vecchia' takes no approximation"):
        demo.run_demo(model="vecchia", approximation="rff", out=tmp_path / "d.png")
    with pytest.raises(ValueError, match="approximation='exact' needs model='neighbors'"):
        demo.run_demo(model="global", approximation="exact", out=tmp_path / "d.png")
