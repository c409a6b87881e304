"""Data sources: re-iterable exact re-blocking, the one-pass summary against the estimator's
in-memory standardization, and validation errors naming global rows."""

import numpy as np
import pytest

from scalegp.data import base as data
from scalegp.data.base import ArraySource, Chunk, DataSource, IterableSource, as_source
from scalegp.engine.noise import power_of_two_scale
from scalegp.estimators.configuration import make_approximation


def _location_scale(values: np.ndarray, *, center: bool = True):
    """The in-memory reference the estimator used before the one-pass summary: mean and std
    (1 where it is 0) of values / 2^e, max|v| < 2^e, scaled back."""
    scale = power_of_two_scale(values)
    Z = values / scale
    mean = np.mean(Z, axis=0)
    std = np.sqrt(np.mean((Z - mean) ** 2, axis=0))
    location = mean * scale if center else np.zeros_like(scale)
    return location, np.where(std > 0, std * scale, 1.0)

RELATIVE = 1e-13
CHUNK_ROWS = (1, 2, 7, 64, 99, 100, 101, 1000)


def problem(seed, n=100, d=3, noise=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10, size=d) + rng.normal(size=d) * 5
    y = rng.normal(size=n) * 3 + 1
    v = rng.uniform(0, 2, size=n) if noise else None
    return X, y, v


def blocks_of(X, y, v, sizes):
    """The rows cut into consecutive blocks of the given sizes (cycled)."""
    blocks, start, i = [], 0, 0
    while start < len(y):
        stop = start + sizes[i % len(sizes)]
        blocks.append((X[start:stop], y[start:stop]) if v is None
                      else (X[start:stop], y[start:stop], v[start:stop]))
        start, i = stop, i + 1
    return blocks


def sources(X, y, v=None):
    return {"array": ArraySource(X, y, sample_noise_variance=v),
            "blocks": IterableSource(blocks_of(X, y, v, [13, 1, 40, 5])),
            "callable": IterableSource(lambda: iter(blocks_of(X, y, v, [37]))),
            "empty blocks between": IterableSource(
                blocks_of(X, y, v, [30, 0, 70]) if v is None else blocks_of(X, y, v, [100]))}


def assert_close(actual, expected, scale):
    """|actual - expected| <= RELATIVE * scale entrywise (a mean is compared on its column's
    scale: its relative error is unbounded when it is near 0)."""
    actual, expected = np.atleast_1d(actual), np.atleast_1d(expected)
    assert actual.shape == expected.shape
    assert np.all(np.abs(actual - expected) <= RELATIVE * np.atleast_1d(scale)), \
        (actual, expected)


# -- the protocol -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["array", "blocks", "callable", "empty blocks between"])
@pytest.mark.parametrize("rows", CHUNK_ROWS)
def test_chunks_reblock_exactly_with_global_offsets_and_reiterate(kind, rows):
    X, y, v = problem(0, noise=kind != "empty blocks between")
    source = sources(X, y, v)[kind]
    for _ in range(2):                      # a second pass gives the same chunks
        chunks = list(source.chunks(rows))
        sizes = [len(chunk.y) for chunk in chunks]
        assert sizes[:-1] == [rows] * (len(sizes) - 1) and 1 <= sizes[-1] <= rows
        assert [chunk.start for chunk in chunks] == list(range(0, 100, rows))
        assert chunks[-1].stop == 100
        for chunk in chunks:
            assert chunk.X.shape == (len(chunk.y), 3)
            np.testing.assert_array_equal(chunk.X, X[chunk.start:chunk.stop])
            np.testing.assert_array_equal(chunk.y, y[chunk.start:chunk.stop])
            if v is None:
                assert chunk.sample_noise_variance is None
            else:
                np.testing.assert_array_equal(chunk.sample_noise_variance, v[chunk.start:chunk.stop])
    assert source.n_samples == 100 and source.n_dims == 3


def test_array_chunks_are_views_and_float32_is_kept():
    X, y, _ = problem(1)
    source = ArraySource(X, y)
    chunk = next(source.chunks(10))
    assert np.shares_memory(chunk.X, X) and np.shares_memory(chunk.y, y)
    X32 = X.astype(np.float32)
    source32 = ArraySource(X32, y, dtype=np.float32)
    assert source32.dtype == np.float32
    chunk = next(source32.chunks(10))
    assert chunk.X.dtype == np.float32 and np.shares_memory(chunk.X, X32)
    assert ArraySource(X32, y).dtype == np.float64       # float64 unless float32 is asked


def test_iterable_chunks_inside_one_block_are_views():
    X, y, _ = problem(2)
    source = IterableSource([(X, y)])
    assert all(np.shares_memory(chunk.X, X) for chunk in source.chunks(30))


def test_summary_is_computed_once(monkeypatch):
    X, y, _ = problem(3)
    passes = []
    source = IterableSource(lambda: passes.append(1) or iter(blocks_of(X, y, None, [10])))
    assert source.n_samples == 100
    first = source.summary()
    assert source.summary() is first and len(passes) == 1
    with pytest.raises(ValueError):
        first.X_mean[0] = 0.0                          # the summary is frozen


def test_as_source_passes_sources_through_and_wraps_arrays():
    X, y, v = problem(4, noise=True)
    source = IterableSource([(X, y)])
    assert as_source(source) is source
    wrapped = as_source(X, y, sample_noise_variance=v, dtype=np.float32)
    assert isinstance(wrapped, ArraySource) and isinstance(wrapped, DataSource)
    assert wrapped.dtype == np.float32 and wrapped.summary().sample_noise_variance_max == v.max()
    with pytest.raises(ValueError, match="y must be None when X is a data source"):
        as_source(source, y)
    with pytest.raises(ValueError, match="y must be given"):
        as_source(X)


# -- the summary --------------------------------------------------------------------------------

def summaries(source_of, rows_list, monkeypatch):
    for rows in rows_list:
        monkeypatch.setattr(data, "SUMMARY_ROWS", rows)
        yield rows, source_of().summary()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("kind", ["array", "blocks"])
def test_summary_equals_the_in_memory_standardization(seed, kind, monkeypatch):
    X, y, v = problem(seed, n=300, d=4, noise=True)
    X_location, X_scale = _location_scale(X)
    y_location, y_scale = _location_scale(y)
    for rows, summary in summaries(lambda: sources(X, y, v)[kind], CHUNK_ROWS, monkeypatch):
        assert summary.n_samples == 300
        np.testing.assert_array_equal(summary.X_min, X.min(axis=0))
        np.testing.assert_array_equal(summary.X_max, X.max(axis=0))
        assert (summary.sample_noise_variance_min, summary.sample_noise_variance_max) == (v.min(), v.max())
        assert_close(summary.X_mean, X_location, X_scale)
        assert_close(summary.X_std, X_scale, X_scale)
        assert_close(summary.X_std, np.std(X, axis=0), X_scale)
        assert_close(summary.y_mean, y_location, y_scale)
        assert_close(summary.y_std, y_scale, y_scale)
        for center in (True, False):
            location, scale = summary.X_standardization(center)
            expected_location, expected_scale = _location_scale(X, center=center)
            assert_close(location, expected_location, X_scale)
            assert_close(scale, expected_scale, X_scale)
        assert_close(summary.y_standardization(), _location_scale(y), y_scale)


def test_summary_of_values_near_the_float64_maximum(monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2)) * [1e300, 1e-300]
    y = rng.uniform(-8e307, 8e307, size=200)                 # y^2 and sum y overflow
    X[50:, 0] *= 1e-200                                       # chunks of very different size
    y_location, y_scale = _location_scale(y)
    X_location, X_scale = _location_scale(X)
    assert np.isfinite(y_scale) and np.isfinite(y_location)
    for rows, summary in summaries(lambda: ArraySource(X, y), (1, 3, 50, 64, 200), monkeypatch):
        assert_close(summary.y_mean, y_location, y_scale)
        assert_close(summary.y_std, y_scale, y_scale)
        assert_close(summary.X_mean, X_location, X_scale)
        assert_close(summary.X_std, X_scale, X_scale)


def test_constant_and_zero_columns_have_std_zero_and_scale_one(monkeypatch):
    X = np.column_stack([np.full(57, 3.25), np.zeros(57), np.full(57, 0.1), np.arange(57.0)])
    y = np.full(57, -1e300)
    for rows, summary in summaries(lambda: ArraySource(X, y), (1, 5, 57, 100), monkeypatch):
        np.testing.assert_array_equal(summary.X_std[:3], [0.0, 0.0, 0.0])
        np.testing.assert_array_equal(summary.X_mean[:3], [3.25, 0.0, 0.1])
        assert summary.y_std == 0.0 and summary.y_mean == -1e300
        location, scale = summary.X_standardization(center=True)
        np.testing.assert_array_equal(location[:3], [3.25, 0.0, 0.1])
        np.testing.assert_array_equal(scale[:3], [1.0, 1.0, 1.0])
        assert summary.y_standardization() == (-1e300, 1.0)
    # the in-memory computation agrees where its mean of equal values rounds to the value
    expected_location, expected_scale = _location_scale(X[:, :2])
    np.testing.assert_array_equal(location[:2], expected_location)
    np.testing.assert_array_equal(scale[:2], expected_scale)


def test_summary_of_float32_inputs_is_the_float64_summary_of_their_values(monkeypatch):
    X, y, _ = problem(6, n=250)
    X32 = X.astype(np.float32)
    X_location, X_scale = _location_scale(X32.astype(np.float64))
    for rows, summary in summaries(lambda: ArraySource(X32, y, dtype=np.float32), (1, 16, 250),
                                   monkeypatch):
        assert summary.X_mean.dtype == np.float64
        assert_close(summary.X_mean, X_location, X_scale)
        assert_close(summary.X_std, X_scale, X_scale)
        np.testing.assert_array_equal(summary.X_min, X32.min(axis=0))


def test_rounding_of_the_mean_does_not_grow_with_the_number_of_chunks(monkeypatch):
    rng = np.random.default_rng(14)
    X = rng.normal(size=(30000, 1)) + 1e3            # the mean dominates: rounding shows
    y = rng.normal(size=30000) - 1e3
    X_location, X_scale = _location_scale(X)
    y_location, y_scale = _location_scale(y)
    for rows, summary in summaries(lambda: ArraySource(X, y), (1, 3, 1000), monkeypatch):
        assert abs(summary.X_mean[0] - X_location[0]) <= 4 * np.spacing(1e3)
        assert abs(summary.y_mean - y_location) <= 4 * np.spacing(1e3)
        assert_close(summary.X_std, X_scale, X_scale)
        assert_close(summary.y_std, y_scale, y_scale)


def test_summary_merge_does_not_depend_on_chunk_order():
    X, y, _ = problem(7, n=400)
    values = np.column_stack([X, y])
    parts = np.split(values, [1, 30, 31, 200, 333])
    order = np.random.default_rng(8).permutation(len(parts))
    forward, shuffled = (data._ScaledMoments.of(parts[0]), data._ScaledMoments.of(parts[order[0]]))
    for i in range(1, len(parts)):
        forward = forward.merge(data._ScaledMoments.of(parts[i]))
        shuffled = shuffled.merge(data._ScaledMoments.of(parts[order[i]]))
    location, scale = _location_scale(values)
    for moments in (forward, shuffled):
        mean, std = moments.mean_and_std()
        assert_close(mean, location, scale)
        assert_close(std, scale, scale)


# -- errors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["array", "blocks"])
def test_non_finite_values_are_reported_at_their_global_row_and_column(kind):
    X, y, v = problem(9, noise=True)
    X[57, 2] = np.nan
    with pytest.raises(ValueError, match=r"X.* must be finite .* row 57, column 2"):
        list(sources(X, y, v)[kind].chunks(10))
    X[57, 2] = 0.0
    y[83] = np.inf
    with pytest.raises(ValueError, match=r"y.* must be finite .* row 83"):
        list(sources(X, y, v)[kind].chunks(10))
    y[83] = 0.0
    v[91] = np.nan
    with pytest.raises(ValueError, match=r"noise_variance.* must be finite .* row 91"):
        list(sources(X, y, v)[kind].chunks(10))


@pytest.mark.parametrize("kind", ["array", "blocks"])
def test_negative_noise_variances_are_refused_at_their_row(kind):
    X, y, v = problem(10, noise=True)
    v[66] = -1e-3
    with pytest.raises(ValueError, match=r"noise_variance.* must be >= 0 .* row 66"):
        list(sources(X, y, v)[kind].chunks(10))


def test_empty_sources_are_refused():
    with pytest.raises(ValueError, match="at least 1 sample"):
        ArraySource(np.zeros((0, 2)), np.zeros(0))
    for blocks in ([], [(np.zeros((0, 2)), np.zeros(0))]):
        with pytest.raises(ValueError, match="empty"):
            IterableSource(blocks).summary()
    with pytest.raises(ValueError, match="empty"):
        IterableSource([]).n_dims


def test_inconsistent_blocks_are_refused():
    X, y, v = problem(11, noise=True)
    with pytest.raises(ValueError, match=r"X \(block 1\) must have 3 column"):
        list(IterableSource([(X[:10], y[:10]), (X[10:, :2], y[10:])]).chunks(5))
    with pytest.raises(ValueError, match=r"X \(block 0\) must have 2 column"):
        list(IterableSource([(X, y)], n_dims=2).chunks(5))
    with pytest.raises(ValueError, match=r"y \(block 1\) must have 90 entries"):
        list(IterableSource([(X[:10], y[:10]), (X[10:], y[:90:-1])]).chunks(5))
    with pytest.raises(ValueError, match="block 1 lacks a sample_noise_variance block"):
        list(IterableSource([(X[:10], y[:10], v[:10]), (X[10:], y[10:])]).chunks(5))
    with pytest.raises(TypeError, match="block 0 must be a tuple"):
        list(IterableSource([X]).chunks(5))


def test_one_shot_generators_are_refused():
    X, y, _ = problem(12)
    with pytest.raises(TypeError, match="one-shot generator .* several times"):
        IterableSource((X[i:i + 10], y[i:i + 10]) for i in range(0, 100, 10))
    with pytest.raises(TypeError, match="one-shot list_iterator"):
        IterableSource(iter([(X, y)]))


def test_a_callable_returning_an_exhausted_iterator_is_caught_on_the_second_pass():
    X, y, _ = problem(15)
    shared = iter(blocks_of(X, y, None, [25]))
    source = IterableSource(lambda: shared)
    assert source.n_samples == 100
    with pytest.raises(ValueError, match="0 rows in this pass but 100 in the first"):
        list(source.chunks(10))


def test_chunk_rows_must_be_positive():
    X, y, _ = problem(13)
    with pytest.raises(ValueError, match="rows must be an integer >= 1"):
        next(ArraySource(X, y).chunks(0))
    assert isinstance(next(ArraySource(X, y).chunks(1000)), Chunk)


def test_estimator_standardizes_through_the_summary_and_keeps_constant_columns():
    """normalize_X / normalize_y use the one-pass summary: a constant column (57 copies of 0.1,
    whose in-memory std rounds to 1.4e-17) and constant targets (-1e300) get scale 1, instead
    of a division by a rounding residue."""
    import scalegp as sg
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(-1, 1, 57), np.full(57, 0.1)])
    assert _location_scale(X)[1][1] != 1.0               # the residue the summary removes
    model = sg.LowRankGPRegressor(optimize=False, normalize_X=True,
                                  normalize_y=True, random_state=0, approximation=make_approximation("rff", n_components=8)).fit(X, np.sin(X[:, 0]))
    assert model.X_train_scale_[1] == 1.0 and model.X_train_mean_[1] == 0.1
    summary = data.ArraySource(X, np.full(57, -1e300)).summary()
    assert summary.y_standardization() == (-1e300, 1.0)


def test_iterable_source_knows_its_noise_variances_without_a_pass():
    """has_sample_noise_variance reads the first block only (the engine asks it before any pass)."""
    opened = []

    def blocks():
        opened.append(1)
        yield np.ones((3, 2)), np.zeros(3), np.full(3, 0.1)
        raise AssertionError("read past the first block")

    source = data.IterableSource(blocks)
    assert source.has_sample_noise_variance and len(opened) == 1
    assert not data.IterableSource([(np.ones((3, 2)), np.zeros(3))]).has_sample_noise_variance
