"""``scalegp predict --plot FILE.png``: the figure shows the model's predictions for the table
(checked on the drawn artists and on the rendered pixels), it is the only file written
besides the named ones, and it follows --out's rules for the path."""

import os

import numpy as np
import pytest
from scipy.special import ndtri

import scalegp as sg
from scalegp import cli
from scalegp.cli import predict_plot

pytest.importorskip("matplotlib", reason="the plot extra is part of the test install")


def _table(path, X, y=None, names=None):
    names = names or [f"x{j}" for j in range(X.shape[1])]
    columns = [X] if y is None else [X, y[:, None]]
    header = ",".join(names + ([] if y is None else ["target"]))
    np.savetxt(path, np.hstack(columns), delimiter=",", header=header, comments="")
    return path


def _fit(tmp_path, X, y, *extra):
    data = _table(tmp_path / "train.csv", X, y)
    model = tmp_path / "model.npz"
    assert cli.main(["fit", str(data), "--target", "target", "--approximation", "rff",
                     "--n-components", "64", "--out", str(model), "--quiet", *extra]) == 0
    return model, data


def _pixels(path):
    import matplotlib.image
    return matplotlib.image.imread(path)


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(2 * X[:, 0]) + 0.3 * X[:, -1] + 0.05 * rng.standard_normal(n)


def test_one_input_draws_mean_band_and_rows(tmp_path):
    X, y = _data(150, 1)
    model_path, data = _fit(tmp_path, X, y)
    figure = tmp_path / "fig.png"
    assert cli.main(["predict", str(model_path), str(data), "--out", str(tmp_path / "p.csv"),
                     "--plot", str(figure), "--quiet"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["fig.png", "model.npz", "p.csv", "train.csv"]
    pixels = _pixels(figure)
    assert pixels.shape[0] > 300 and np.unique(pixels.reshape(-1, 4), axis=0).shape[0] > 50
    # the artists: the curve is the model's mean over the inputs' range, the band its
    # 95 % interval, the points the table's rows
    model = sg.load(model_path)
    fig, kind = predict_plot.draw(model, X, y, include_noise=False, input_names=["x0"],
                                  target_name="target")
    assert kind == "prediction"
    ax = fig.axes[0]
    grid = ax.lines[0].get_xdata()
    assert grid.size == predict_plot.CURVE_POINTS
    assert grid.min() < X.min() and grid.max() > X.max()
    mean, std = model.predict(grid[:, None], return_std=True)
    np.testing.assert_allclose(ax.lines[0].get_ydata(), mean, rtol=1e-12)
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.max() == pytest.approx(np.max(mean + ndtri(0.975) * std), rel=1e-12)
    np.testing.assert_allclose(ax.collections[1].get_offsets(), np.column_stack([X[:, 0], y]))
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x0", "target")


def test_one_input_without_targets_draws_no_points(tmp_path):
    X, y = _data(100, 1)
    model_path, _ = _fit(tmp_path, X, y)
    inputs = _table(tmp_path / "new.csv", X[:40])
    figure = tmp_path / "fig.png"
    assert cli.main(["predict", str(model_path), str(inputs), "--out", str(tmp_path / "p.csv"),
                     "--plot", str(figure), "--quiet"]) == 0
    from scalegp.data.readers import open_reader
    reader = open_reader(inputs)
    rows, targets = predict_plot.plot_rows(reader, [0], "target")
    assert targets is None and rows.shape == (40, 1)
    fig, _ = predict_plot.draw(sg.load(model_path), rows, None, include_noise=False,
                               input_names=["x0"], target_name="target")
    assert len(fig.axes[0].collections) == 1          # the band only: no rows as points


def test_two_inputs_draw_maps_of_mean_and_std(tmp_path):
    X, y = _data(200, 2)
    model_path, data = _fit(tmp_path, X, y)
    figure = tmp_path / "maps.png"
    assert cli.main(["predict", str(model_path), str(data), "--plot", str(figure),
                     "--out", str(tmp_path / "p.csv"), "--quiet"]) == 0
    model = sg.load(model_path)
    fig, kind = predict_plot.draw(model, X, y, include_noise=False, input_names=["x0", "x1"],
                                  target_name="target")
    assert kind == "map"
    mean_ax, std_ax = fig.axes[:2]              # the maps, then their colour bars
    x1 = np.linspace(X[:, 0].min(), X[:, 0].max(), predict_plot.MAP_POINTS)
    x2 = np.linspace(X[:, 1].min(), X[:, 1].max(), predict_plot.MAP_POINTS)
    grid = np.column_stack([np.tile(x1, x2.size), np.repeat(x2, x1.size)])
    mean, std = model.predict(grid, return_std=True)
    np.testing.assert_allclose(mean_ax.collections[0].get_array().ravel(), mean, rtol=1e-12)
    np.testing.assert_allclose(std_ax.collections[0].get_array().ravel(), std, rtol=1e-12)
    assert mean_ax.get_title() == "predictive mean" and std_ax.get_title() == "predictive std"
    # the rendered panels differ: the mean map's colours against the std map's
    pixels = _pixels(figure)[..., :3]
    half = pixels.shape[1] // 2
    left, right = pixels[:, :half].reshape(-1, 3), pixels[:, half:].reshape(-1, 3)
    assert np.abs(left.mean(axis=0) - right.mean(axis=0)).max() > 0.02


def test_more_inputs_calibration_with_targets_else_length_scales(tmp_path):
    X, y = _data(300, 3)
    model_path, data = _fit(tmp_path, X, y)
    model = sg.load(model_path)
    fig, kind = predict_plot.draw(model, X, y, include_noise=False,
                                  input_names=["x0", "x1", "x2"], target_name="target")
    assert kind == "calibration"
    levels = np.linspace(0.05, 0.95, 19)
    observed = fig.axes[0].lines[-1].get_ydata()
    np.testing.assert_allclose(observed, sg.plot.interval_coverage(model, X, y, levels))
    fig, kind = predict_plot.draw(model, X, None, include_noise=False,
                                  input_names=["x0", "x1", "x2"], target_name="target")
    assert kind == "length scales"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["x0", "x1", "x2"]
    figure = tmp_path / "calibration.png"
    assert cli.main(["predict", str(model_path), str(data), "--plot", str(figure),
                     "--out", str(tmp_path / "p.csv"), "--quiet"]) == 0
    assert _pixels(figure).shape[0] > 300


def test_the_plot_path_follows_the_out_rules(tmp_path, capsys):
    X, y = _data(80, 1)
    model_path, data = _fit(tmp_path, X, y)
    predictions = tmp_path / "p.csv"
    # a wrong suffix is refused before any work: no predictions written
    assert cli.main(["predict", str(model_path), str(data), "--out", str(predictions),
                     "--plot", str(tmp_path / "fig.jpg"), "--quiet"]) == 2
    assert "--plot" in capsys.readouterr().err and not predictions.exists()
    # a symbolic link is refused; an existing regular file the user named is replaced
    target = tmp_path / "elsewhere.png"
    target.write_bytes(b"old")
    (tmp_path / "link.png").symlink_to(target)
    assert cli.main(["predict", str(model_path), str(data), "--out", str(predictions),
                     "--plot", str(tmp_path / "link.png"), "--quiet"]) == 2
    assert target.read_bytes() == b"old"
    assert cli.main(["predict", str(model_path), str(data), "--out", str(predictions),
                     "--plot", str(target), "--quiet"]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rows_are_thinned_to_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(predict_plot, "PLOT_ROWS", 50)
    X, y = _data(400, 1)
    path = _table(tmp_path / "t.csv", X, y)
    from scalegp.data.readers import open_reader
    reader = open_reader(path)
    rows, targets = predict_plot.plot_rows(reader, [0], "target", n_rows=400)
    assert rows.shape == (50, 1)
    np.testing.assert_array_equal(rows[:, 0], X[::8, 0])
    np.testing.assert_array_equal(targets, y[::8])


def test_without_matplotlib_demo_and_plot_stop_before_any_work(tmp_path, monkeypatch, capsys):
    """Installed without the cli/plot extra, `scalegp demo` and `predict --plot` say what to
    install before fitting or predicting (the wheel check found the demo failing with an
    internal error after its whole fit)."""
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "matplotlib, which is not installed" in error and "scalegp[cli]" in error
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(importlib.util, "find_spec", real)
    X, y = _data(60, 1)
    model_path, data = _fit(tmp_path, X, y)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert cli.main(["predict", str(model_path), str(data), "--out", str(tmp_path / "p.csv"),
                     "--plot", str(tmp_path / "f.png"), "--quiet"]) == 2
    assert "--plot draws with matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "p.csv").exists()
