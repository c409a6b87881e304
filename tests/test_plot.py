"""scalegp.plot: each figure shows the numbers it claims, and nothing switches the backend."""

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from scipy.special import ndtri

import scalegp as sg
from scalegp import plot

pytest.importorskip("matplotlib", reason="the plot extra is part of the test install")


@pytest.fixture(scope="module")
def fitted_1d():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (60, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(60)
    return sg.ExactGPRegressor(random_state=0, normalize_X=False, normalize_y=False).fit(X, y), X, y


def _png(figure) -> np.ndarray:
    """The figure rendered to PNG and read back (RGBA floats)."""
    import matplotlib.image
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=60)
    buffer.seek(0)
    return matplotlib.image.imread(buffer)


def test_prediction_shows_the_mean_and_the_band(fitted_1d):
    model, X, y = fitted_1d
    grid = np.linspace(4, -4, 101)[:, None]           # unsorted on purpose
    figure, ax = plot.new_figure()
    assert plot.plot_prediction(model, grid, X_train=X, y_train=y, level=0.9, ax=ax) is ax
    sorted_grid = grid[::-1]
    mean, std = model.predict(sorted_grid, return_std=True)
    line = ax.lines[0]
    np.testing.assert_allclose(line.get_xdata(), sorted_grid[:, 0])
    np.testing.assert_allclose(line.get_ydata(), mean)
    band = ax.collections[0].get_paths()[0].vertices
    half = ndtri(0.95) * std
    np.testing.assert_allclose(band[:, 1].max(), np.max(mean + half), rtol=1e-12)
    np.testing.assert_allclose(band[:, 1].min(), np.min(mean - half), rtol=1e-12)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "90 % latent interval", "predictive mean", "training data"]
    pixels = _png(figure)
    assert pixels.shape[0] > 100 and np.unique(pixels.reshape(-1, 4), axis=0).shape[0] > 50


def test_prediction_refuses_two_inputs(fitted_1d):
    model, _, _ = fitted_1d
    with pytest.raises(ValueError, match=r"one input: X must have shape \(n, 1\)"):
        plot.plot_prediction(model, np.zeros((3, 2)), ax=plot.new_figure()[1])


@pytest.mark.parametrize("what", ["mean", "std"])
def test_map_draws_the_predictions_on_the_grid(what):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (80, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.standard_normal(80)
    model = sg.ExactGPRegressor(random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    x1, x2 = np.linspace(-2, 2, 7), np.linspace(-1, 3, 5)
    figure, ax = plot.new_figure()
    plot.plot_map(model, x1, x2, what=what, X_train=X, ax=ax)
    values = np.asarray(ax.collections[0].get_array()).reshape(5, 7)
    grid = np.column_stack([np.tile(x1, 5), np.repeat(x2, 7)])
    expected = (model.predict(grid) if what == "mean"
                else model.predict(grid, return_std=True)[1])
    np.testing.assert_allclose(values, expected.reshape(5, 7))
    assert values[4, 3] != values[0, 3]                # rows are y, columns x
    assert len(figure.axes) == 2                        # the map and its colour bar
    _png(figure)


def test_a_calibrated_model_covers_its_levels_and_an_overconfident_one_does_not():
    """Targets drawn from the GP the model knows: coverage within 3 binomial sd of every
    level; the same model with its std shrunk 3 times covers far less."""
    rng = np.random.default_rng(2)
    kernel = sg.Gaussian(length_scale=0.8)
    X = rng.uniform(-3, 3, (700, 1))
    K = kernel(X) + 0.05 * np.eye(700)
    y = np.linalg.cholesky(K) @ rng.standard_normal(700)
    model = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.05, optimize=False, normalize_X=False, normalize_y=False).fit(
        X[:200], y[:200])
    levels = np.array([0.5, 0.8, 0.95])
    coverage = plot.interval_coverage(model, X[200:], y[200:], levels)
    assert np.all(np.abs(coverage - levels) <= 3 * np.sqrt(levels * (1 - levels) / 500))

    class Overconfident:
        def predict(self, X, return_std=False, include_noise=False):
            mean, std = model.predict(X, return_std=True, include_noise=include_noise)
            return (mean, std / 3) if return_std else mean

    assert np.all(plot.interval_coverage(Overconfident(), X[200:], y[200:], levels)
                  < levels - 0.2)
    figure, ax = plot.new_figure()
    plot.plot_calibration(model, X[200:], y[200:], levels=levels, ax=ax)
    observed = [line for line in ax.lines if line.get_label().startswith("observed")][0]
    np.testing.assert_allclose(observed.get_ydata(), coverage)
    _png(figure)


def test_length_scales_with_their_bounds_and_the_ones_on_a_bound():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (120, 3))
    y = np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(120)   # x1, x2 irrelevant
    kernel = sg.Gaussian(length_scale=[1.0, 1.0, 1.0], length_scale_bounds=(0.1, 10.0))
    with pytest.warns(sg.BoundaryWarning, match="sits on its upper bound 10"):
        model = sg.ExactGPRegressor(kernel=kernel, random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    figure, ax = plot.new_figure()
    plot.plot_length_scales(model, feature_names=["a", "b", "c"], ax=ax)
    points = np.vstack([c.get_offsets() for c in ax.collections if c.get_label() in
                        ("learned", "on a bound")])
    order = np.argsort(points[:, 0])
    np.testing.assert_allclose(points[order, 1], model.kernel_.length_scale)
    bound = [c for c in ax.collections if c.get_label() == "on a bound"]
    assert bound and set(bound[0].get_offsets()[:, 0]) <= {1.0, 2.0}   # irrelevant inputs
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    with pytest.raises(ValueError, match="feature_names has 2 names for 3 inputs"):
        plot.plot_length_scales(model, feature_names=["a", "b"], ax=ax)


def test_importing_and_new_figures_leave_matplotlib_and_its_backend_alone():
    """``import scalegp`` imports no matplotlib; new_figure and the plots on its Axes never
    import pyplot or select a backend (a notebook's inline backend keeps working)."""
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import scalegp as sg
        assert "matplotlib" not in sys.modules
        from scalegp import plot
        X = np.linspace(0, 1, 20)[:, None]
        model = sg.ExactGPRegressor(optimize=False).fit(X, np.sin(X[:, 0]))
        figure, ax = plot.new_figure()
        plot.plot_prediction(model, X, ax=ax)
        plot.plot_length_scales(model, ax=ax)
        assert "matplotlib.pyplot" not in sys.modules
        import matplotlib
        assert matplotlib.rcParams._get_backend_or_none() is None
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_no_module_switches_the_backend_or_draws_through_pyplot():
    """Was: the demo and five experiment modules called matplotlib.use("Agg") when drawing,
    which switched a notebook's backend for the whole process. Only scalegp.plot's
    ``ax=None`` path imports pyplot."""
    from pathlib import Path
    package = Path(sg.__file__).parent
    offenders = [str(path.relative_to(package)) for path in package.rglob("*.py")
                 if ("matplotlib.use(" in path.read_text() or "pyplot" in path.read_text())
                 and path.name != "plot.py"]
    assert offenders == []


def test_learning_curve_is_the_optimizers_history():
    """One line per start with the objective at the start and after each iteration; the
    best curve ends at the learned value, which equals the model's log marginal likelihood
    at the learned theta, and every curve rises overall (L-BFGS-B accepts ascent steps)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, (80, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(80)
    model = sg.ExactGPRegressor(n_restarts=2, random_state=0).fit(X, y)
    result = model.optimization_result_
    assert len(result.history) == 3
    figure, ax = plot.new_figure()
    assert plot.plot_learning_curve(model, ax=ax) is ax
    curves = ax.lines[:3]
    for line, curve in zip(curves, result.history):
        np.testing.assert_array_equal(line.get_ydata(), curve)
        np.testing.assert_array_equal(line.get_xdata(), np.arange(curve.size))
        assert curve.size >= 2 and curve[-1] >= curve[0]
        assert np.all(np.diff(curve) >= -1e-9 * np.abs(curve[:-1]))       # ascent
    best = max(result.history, key=lambda curve: curve[-1])
    assert best[-1] == pytest.approx(result.log_marginal_likelihood, rel=1e-12)
    assert result.log_marginal_likelihood == pytest.approx(
        model.log_marginal_likelihood(np.append(model.kernel_.theta,
                                                np.log(model.noise_variance_))), rel=1e-10)
    assert ax.lines[3].get_ydata()[0] == result.log_marginal_likelihood   # the learned line
    assert ax.get_xlabel() == "L-BFGS-B iteration"
    assert ax.get_ylabel() == "log marginal likelihood (normalized targets)"
    pixels = _png(figure)
    assert np.unique(pixels.reshape(-1, 4), axis=0).shape[0] > 20


def test_learning_curve_continues_into_a_widened_box():
    """A trend in x0 and an input x1 the target ignores (tests/test_default_box.py): the
    length scale of x1 leaves the default box, and the widened runs continue the curve of
    the start, which ends at the learned value."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = 2 * X[:, 0] + 0.05 * X[:, 0] ** 2 + 0.1 * rng.standard_normal(60)
    model = sg.ExactGPRegressor(kernel=sg.Gaussian(length_scale=[1.0, 1.0])).fit(X, y)
    result = model.optimization_result_
    assert result.widened
    assert len(result.history) == 1
    assert result.history[0][-1] == pytest.approx(result.log_marginal_likelihood, rel=1e-12)
    # the widened runs added iterations with a higher objective than the first box's end
    assert result.history[0].max() == result.history[0][-1]


def test_learning_curve_refuses_a_model_that_learned_nothing(fitted_1d):
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (30, 1))
    model = sg.ExactGPRegressor(optimize=False).fit(X, np.sin(X[:, 0]))
    with pytest.raises(ValueError, match="no learning curve"):
        plot.plot_learning_curve(model, ax=plot.new_figure()[1])
