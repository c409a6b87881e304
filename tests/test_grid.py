"""Gridded data (scalegp.data.grid, docs/data-sources.md, "Gridded data"): the grid source's rows
and refusals, the Gauss-Legendre statistics on a tensor grid against Phi^T Phi and Phi^T y
of the streamed rows, the engine taking them without a pass, and fits on a grid source equal
to the fits on the same rows as arrays."""

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.data.base import ArraySource
from scalegp.features.gauss_legendre import GaussLegendreFeatures
from scalegp.engine.statistics import BasisStatistics
from scalegp.data.grid import GridSource
from scalegp.estimators.configuration import make_approximation


def rows_of(source, chunk=37):
    chunks = list(source.chunks(chunk))
    return np.vstack([c.X for c in chunks]), np.concatenate([c.y for c in chunks])


def random_grid(shape, seed=0, sort=True):
    rng = np.random.default_rng(seed)
    axes = [rng.uniform(-2, 3, size=n) for n in shape]
    axes = [np.sort(a) if sort else a for a in axes]
    return axes, rng.standard_normal(shape)


# ------------------------------------------------------------------------- the source
def test_rows_are_the_cells_in_row_major_order():
    axes, values = random_grid((4, 3, 5))
    X, y = rows_of(GridSource(axes, values), chunk=7)
    mesh = np.meshgrid(*axes, indexing="ij")
    np.testing.assert_array_equal(X, np.column_stack([m.ravel() for m in mesh]))
    np.testing.assert_array_equal(y, values.ravel())
    source = GridSource(axes, values, dtype="float32")
    assert source.n_samples == 60 and source.n_dims == 3 and not source.has_sample_noise_variance
    chunk = next(source.chunks(100))
    assert chunk.X.dtype == np.float32 and chunk.y.dtype == np.float64 and chunk.start == 0


def test_one_axis_may_be_given_bare():
    source = GridSource(np.arange(5.0), np.arange(5.0) ** 2)
    X, y = rows_of(source)
    np.testing.assert_array_equal(X[:, 0], np.arange(5.0))
    np.testing.assert_array_equal(y, np.arange(5.0) ** 2)


@pytest.mark.parametrize("axes, values, message", [
    ([np.arange(3.0), np.arange(2.0)], np.zeros((2, 3)), "axes' shape"),
    ([np.arange(3.0)], np.array([1.0, np.nan, 2.0]), r"1 NaN or inf cell\(s\), the first at \(1,\)"),
    ([np.array([0.0, np.inf])], np.zeros(2), "axis 0 contains NaN"),
    ([np.zeros(0)], np.zeros(0), "non-empty 1-D"),
    ([np.zeros((2, 2))], np.zeros((2, 2)), "non-empty 1-D"),
    ([["a", "b"]], np.zeros(2), "axis 0 must be numeric"),
    ([np.arange(2.0)], ["x", "y"], "values must be numeric"),
    ([], np.zeros(()), "at least one axis"),
])
def test_bad_grids_are_refused_by_name(axes, values, message):
    with pytest.raises(ValueError, match=message):
        GridSource(axes, values)


# ------------------------------------------------------------- statistics on the grid
@pytest.mark.parametrize("kernel, n_nodes, shape", [
    ("gaussian", [7], (23,)),              # odd q: the origin column
    ("matern52", [5, 6], (11, 9)),
    ("matern32", [5, 3], (8, 13)),         # every q odd: the origin column in 2-D
    ("cauchy", [4, 6], (10, 7)),           # two panels per dimension
    ("gaussian", [3, 4, 5], (6, 5, 4)),
    ("laplacian", [3, 5, 3], (5, 4, 6)),
])
def test_grid_statistics_equal_those_of_the_rows(kernel, n_nodes, shape):
    axes, values = random_grid(shape, seed=len(shape), sort=False)
    axes[0][1] = axes[0][0]                                  # a repeated coordinate
    source = GridSource(axes, values)
    X, y = rows_of(source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fmap = GaussLegendreFeatures.build(X, sg.kernels.get(kernel), None, n_nodes=n_nodes)
    Phi = fmap.basis(X)
    gram, projection = fmap.grid_basis_statistics(source.grid)
    # both are sums of N products of unit-modulus factors; the rows' Gram rounds each of its
    # N s^2 products once, the grid's per-axis sums fewer: differences ~ N eps
    tolerance = 20 * X.shape[0] * np.finfo(float).eps
    np.testing.assert_allclose(gram, Phi.T @ Phi, rtol=0, atol=tolerance * np.abs(gram).max())
    np.testing.assert_allclose(projection, Phi.T @ y, rtol=0,
                               atol=tolerance * np.abs(projection).max())
    assert np.array_equal(gram, gram.T)


def test_the_engine_takes_the_grid_statistics_without_a_pass(monkeypatch):
    axes, values = random_grid((30, 20))
    source = GridSource(axes, values)
    X, y = rows_of(source)
    fmap = GaussLegendreFeatures.build(X, sg.kernels.get("matern52"), 64)
    streamed = BasisStatistics.accumulate(fmap, ArraySource(X, y)).statistics

    def no_pass(self, rows):
        raise AssertionError("the grid statistics made a pass over the cells")

    monkeypatch.setattr(GridSource, "chunks", no_pass)
    gridded = BasisStatistics.accumulate(fmap, source).statistics
    np.testing.assert_allclose(gridded.gram, streamed.gram, rtol=0,
                               atol=1e-12 * np.abs(streamed.gram).max())
    np.testing.assert_allclose(gridded.projection, streamed.projection, rtol=0,
                               atol=1e-12 * np.abs(streamed.projection).max())
    assert gridded.y_norm2 == pytest.approx(streamed.y_norm2, rel=1e-13)
    assert gridded.n_samples == streamed.n_samples == 600


def test_maps_without_grid_statistics_refuse_to_give_them():
    axes, values = random_grid((5, 4))
    X, _ = rows_of(GridSource(axes, values))
    fmap = sg.features.get("rff").build(X, sg.kernels.get("gaussian"), 16,
                                        np.random.default_rng(0))
    assert not getattr(fmap, "has_grid_statistics", False)


# ------------------------------------------------------------------------- fits
@pytest.fixture
def raster():
    rng = np.random.default_rng(3)
    lon, lat = np.linspace(0, 10, 60), np.linspace(-3, 3, 35)
    values = (np.sin(lon)[:, None] * np.cos(lat)[None, :]
              + 0.1 * rng.standard_normal((60, 35)))
    source = GridSource([lon, lat], values)
    return source, *rows_of(source)


@pytest.mark.parametrize("approximation, n_components", [("glf", 144), ("rff", 144),
                                                         ("qmc", 64)])
def test_a_fit_on_a_grid_source_equals_the_fit_on_its_rows(approximation, n_components,
                                                           raster):
    """GLF through the grid statistics, the other maps by streaming the cells: learning,
    standardization and predictions as from the arrays.

    Each fit must have an optimum to reach: with 64 random Fourier features the likelihood
    has none on this raster (the signal variance runs to its widened bound, 1e8, and
    L-BFGS-B stops "ABNORMAL" on the ridge, where rounding in the order of the sums decides
    the stopping point: 4.6e-7 nats apart on numpy 2.4 / OpenBLAS 0.3.31); with 144 both
    fits converge to the same optimum (257.13 nats, equal to 1e-13)."""
    source, X, y = raster
    fits = []
    for data in ((X, y), (source,)):
        model = sg.LowRankGPRegressor(kernel="matern52", normalize_X=True, normalize_y=True,
                                      random_state=0, approximation=make_approximation(approximation, n_components=n_components))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fits.append(model.fit(*data))
    arrays, grid = fits
    assert grid.log_marginal_likelihood_value_ == pytest.approx(
        arrays.log_marginal_likelihood_value_, rel=1e-9)
    np.testing.assert_allclose(grid.kernel_.theta, arrays.kernel_.theta, rtol=0, atol=1e-6)
    test = np.random.default_rng(4).uniform([0, -3], [10, 3], size=(40, 2))
    mean_a, std_a = arrays.predict(test, return_std=True)
    mean_g, std_g = grid.predict(test, return_std=True)
    np.testing.assert_allclose(mean_g, mean_a, rtol=0, atol=1e-6 * np.abs(mean_a).max())
    np.testing.assert_allclose(std_g, std_a, rtol=1e-6)


def test_glf_on_a_grid_at_fixed_theta_equals_the_rows_to_rounding(raster):
    source, X, y = raster
    fits = [sg.LowRankGPRegressor(kernel="matern52",
                                  normalize_X=True, normalize_y=True, optimize=False, approximation=make_approximation("glf", n_components=144)).fit(*data)
            for data in ((X, y), (source,))]
    assert fits[1].log_marginal_likelihood_value_ == pytest.approx(
        fits[0].log_marginal_likelihood_value_, rel=1e-12)
    test = X[::97]
    np.testing.assert_allclose(fits[1].predict(test), fits[0].predict(test), rtol=0,
                               atol=1e-10)


def test_the_summary_needs_no_pass_and_equals_the_streamed_one(monkeypatch):
    axes, values = random_grid((9, 1, 6))          # a constant axis: mean its value, std 0
    source = GridSource(axes, values)
    streamed = ArraySource(*rows_of(source)).summary()
    monkeypatch.setattr(GridSource, "chunks", lambda self, rows: iter(()))
    summary = source.summary()
    for name in ("X_min", "X_max", "X_mean", "X_std"):
        np.testing.assert_allclose(getattr(summary, name), getattr(streamed, name),
                                   rtol=1e-14, atol=1e-15)
    assert summary.X_std[1] == 0 and summary.X_mean[1] == axes[1][0]
    for name in ("y_mean", "y_std", "y_min", "y_max"):
        assert getattr(summary, name) == pytest.approx(getattr(streamed, name), rel=1e-13)
    assert summary.n_samples == 54 and summary.sample_noise_variance_min is None
