import numpy as np
import pytest

from scalegp import datasets
from scalegp.datasets import list_datasets, load_east_africa_relief, load_mauna_loa_co2


@pytest.fixture(scope="module")
def relief():
    return load_east_africa_relief()


def test_list_datasets():
    assert list_datasets() == ("east_africa_relief", "mauna_loa_co2")


def test_relief_shapes_and_types(relief):
    assert relief.X.shape == (82_800, 2)
    assert relief.y.shape == (82_800,)
    assert relief.X.dtype == np.float64 and relief.y.dtype == np.float64
    assert relief.feature_names == ("lon", "lat")
    assert relief.target_name == "elevation"
    assert relief.grid_shape == (300, 276)
    assert "82,800" in relief.description


def test_relief_values_in_box(relief):
    lon, lat = relief.X.T
    assert 29.0 <= lon.min() and lon.max() <= 52.0
    assert -12.0 <= lat.min() and lat.max() < 13.0
    assert np.all(np.isfinite(relief.y))
    # ETOPO5 averages over 5' cells: the highest cell is Kilimanjaro (3.07 S, 37.35 E),
    # the deepest lies in the Somali Basin of the Indian Ocean.
    top = np.argmax(relief.y)
    assert 3_500 < relief.y[top] < 6_000
    assert abs(lon[top] - 37.35) < 0.25 and abs(lat[top] + 3.07) < 0.25
    assert -6_000 < relief.y.min() < -4_500
    assert 0.2 < np.mean(relief.y < 0) < 0.5  # a good part of the map is ocean


def test_relief_grid_reshape(relief):
    image = relief.y.reshape(relief.grid_shape)
    lon = relief.X[:, 0].reshape(relief.grid_shape)
    lat = relief.X[:, 1].reshape(relief.grid_shape)
    assert np.all(lat == lat[:, :1]) and np.all(lon == lon[:1, :])
    assert np.all(np.diff(lat[:, 0]) > 0) and np.all(np.diff(lon[0]) > 0)
    assert lat[0, 0] == relief.X[:, 1].min()  # row 0 is the southernmost latitude
    assert image[0, 0] == relief.y[0]


def test_relief_subsample(relief):
    first = load_east_africa_relief(subsample=500, random_state=3)
    again = load_east_africa_relief(subsample=500, random_state=3)
    other = load_east_africa_relief(subsample=500, random_state=4)
    assert first.X.shape == (500, 2) and first.y.shape == (500,)
    assert first.grid_shape is None
    np.testing.assert_array_equal(first.X, again.X)
    np.testing.assert_array_equal(first.y, again.y)
    assert not np.array_equal(first.X, other.X)
    assert len(np.unique(first.X, axis=0)) == 500  # drawn without replacement
    # every subsampled row is a row of the full grid with the same target
    grid = {tuple(row): value for row, value in zip(relief.X, relief.y)}
    assert all(grid[tuple(row)] == value for row, value in zip(first.X, first.y))


@pytest.mark.parametrize("bad, error", [(0, ValueError), (82_801, ValueError), (2.5, TypeError)])
def test_relief_subsample_invalid(bad, error):
    with pytest.raises(error, match="subsample"):
        load_east_africa_relief(subsample=bad)


def test_co2():
    co2 = load_mauna_loa_co2()
    year = co2.X[:, 0]
    assert co2.X.shape == (2_225, 1) and co2.y.shape == (2_225,)
    assert co2.X.dtype == np.float64 and co2.y.dtype == np.float64
    assert co2.feature_names == ("year",) and co2.target_name == "co2"
    assert co2.grid_shape is None
    assert 1958 <= year.min() < 1958.5 and 2001.5 < year.max() < 2002
    assert np.all(np.diff(year) > 0)
    assert 312 < co2.y.min() < 316 and 370 < co2.y.max() < 375
    assert co2.y[0] == 316.1  # first week, 1958-03-29, exactly as in the source
    assert "59 missing weeks dropped" in co2.description


@pytest.mark.parametrize("name, loader", [("east_africa_relief", load_east_africa_relief),
                                          ("mauna_loa_co2", load_mauna_loa_co2)])
def test_corrupt_file_detected(name, loader, tmp_path, monkeypatch):
    filename = datasets._FILES[name][0]
    content = bytearray((datasets._DATA_DIR / filename).read_bytes())
    content[len(content) // 2] ^= 0xFF
    (tmp_path / filename).write_bytes(bytes(content))
    monkeypatch.setattr(datasets, "_DATA_DIR", tmp_path)
    with pytest.raises(OSError, match="corrupt: checksum mismatch; reinstall scalegp"):
        loader()
