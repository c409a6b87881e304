"""Table files that reached users as raw internal errors (issue 24, section 3), read or refused
with a message that names the file: Fortran-ordered .npz members ("the magic string is not
correct"), an .npz member cut short, Parquet integers above 2^53 (pyarrow's "Integer value
... not in range"), a CSV field over the csv module's 131,072 characters."""

import io
import zipfile

import numpy as np
import pytest

from scalegp.cli import main
from scalegp.data.readers import TableError
from scalegp.data.sources import open_source, to_arrays
from scalegp.estimators.configuration import make_approximation

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def table(n=30):
    rng = np.random.default_rng(5)
    return np.column_stack([rng.uniform(-1, 1, size=(n, 3)), rng.standard_normal(n)])


@pytest.mark.parametrize("layout", ["X-and-y", "one-table"])
@pytest.mark.parametrize("dtype", ["<f8", ">f4", "<i4"])
def test_fortran_ordered_npz_members_read_as_their_c_ordered_copy(layout, dtype, tmp_path,
                                                                  monkeypatch):
    """df[cols].to_numpy() is Fortran-ordered; every dtype and byte order, in blocks that cut
    the rows (the member is read whole, then sliced)."""
    from scalegp.data import sources
    monkeypatch.setattr(sources, "READ_ROWS", 7)
    values = (table() * 100).astype(dtype)
    for order, name in (("C", "c.npz"), ("F", "f.npz")):
        copy = np.array(values, order=order)
        if layout == "X-and-y":
            np.savez(tmp_path / name, X=np.array(copy[:, :3], order=order), y=copy[:, 3])
        else:
            np.savez(tmp_path / name, table=copy)
    assert np.isfortran(np.load(tmp_path / "f.npz")["X" if layout == "X-and-y" else "table"])
    target = "y" if layout == "X-and-y" else 3
    X_c, y_c, _ = to_arrays(open_source(tmp_path / "c.npz", target))
    X_f, y_f, _ = to_arrays(open_source(tmp_path / "f.npz", target))
    np.testing.assert_array_equal(X_f, X_c)
    np.testing.assert_array_equal(y_f, y_c)
    np.testing.assert_array_equal(X_c, values[:, :3].astype(float))


def npz_with_short_member(path, rows_declared, rows_held, order="C"):
    """An .npz whose X.npy header declares ``rows_declared`` rows but holds ``rows_held``."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {
        "descr": "<f8", "fortran_order": order == "F", "shape": (rows_declared, 2)})
    data = np.arange(rows_held * 2, dtype="<f8").tobytes()
    y = io.BytesIO()
    np.save(y, np.zeros(rows_declared))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", header.getvalue() + data)
        archive.writestr("y.npy", y.getvalue())


@pytest.mark.parametrize("order", ["C", "F"])
def test_an_npz_member_shorter_than_its_header_names_the_file(order, tmp_path):
    path = tmp_path / "short.npz"
    npz_with_short_member(path, 100, 40, order)
    with pytest.raises(TableError, match=r"short.npz: member 'X.npy' is cut short: its header "
                                         r"declares shape \(100, 2\)"):
        to_arrays(open_source(path, "y"))


def test_the_cli_names_the_file_of_a_short_member(tmp_path, capsys):
    path = tmp_path / "short.npz"
    npz_with_short_member(path, 100, 40)
    assert main(["fit", "--approximation", "rff", str(path), "--target", "y", "--out", str(tmp_path / "m.npz"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "short.npz: member 'X.npy' is cut short" in err and "internal error" not in err


def test_parquet_integers_above_2_53_read_as_the_csv_reader_rounds_them(tmp_path):
    """2^53 + 1 is no float64: every format reads the nearest one (round half to even), as
    Python's float of the decimal text does; pyarrow's safe cast refused it."""
    n = 20
    ids = np.arange(n, dtype=np.int64) + 2**53 - 3
    y = np.linspace(0, 1, n)
    pq.write_table(pa.table({"id": ids, "y": y}), tmp_path / "t.parquet")
    (tmp_path / "t.csv").write_text("id,y\n" + "".join(f"{i},{v!r}\n" for i, v in
                                                         zip(ids.tolist(), y.tolist())))
    X_parquet, _, _ = to_arrays(open_source(tmp_path / "t.parquet", "y"))
    X_csv, _, _ = to_arrays(open_source(tmp_path / "t.csv", "y"))
    np.testing.assert_array_equal(X_parquet[:, 0], X_csv[:, 0])
    np.testing.assert_array_equal(X_parquet[:, 0], [float(i) for i in ids.tolist()])


def test_parquet_integers_above_2_53_on_the_dask_workers(tmp_path):
    dask = pytest.importorskip("dask")
    from scalegp.data.distributed import dask_file_source
    ids = np.arange(10, dtype=np.int64) + 2**60 + 1
    pq.write_table(pa.table({"id": ids, "y": np.linspace(0, 1, 10)}), tmp_path / "t.parquet")
    with dask.config.set(scheduler="synchronous"):
        source, _, _ = dask_file_source(tmp_path / "t.parquet", "y")
        np.testing.assert_array_equal(source.X.compute()[:, 0], [float(i) for i in ids.tolist()])


@pytest.mark.parametrize("where, line", [("a data line", 4), ("the header", 1)])
def test_a_csv_field_over_the_limit_is_one_line_naming_the_line(tmp_path, capsys, where,
                                                                  line):
    """Was (fuzz case ".csv huge text field"): the csv module's own words, "field larger than
    field limit (131072)", in the message."""
    path = tmp_path / "long.csv"
    rows = ["a,b", "1,2", "3,4", "x" * 140_000 + ",5"]
    if where == "the header":
        rows = ["a" * 140_000 + ",b", "1,2", "3,4"]
    path.write_text("\n".join(rows) + "\n")
    assert main(["fit", "--approximation", "rff", str(path), "--target", "b", "--out", str(tmp_path / "m.npz"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"scalegp fit: error: {path}: line {line} has a field longer than 131072 "
                   "characters, the most a CSV cell may hold"]


def test_a_model_file_with_fortran_ordered_members_loads_the_same(tmp_path):
    """io.py reads members with numpy.load (after checking their headers), which takes both
    orders: a model file rewritten with every 2-D member in Fortran order predicts the same."""
    import warnings

    import scalegp as sg
    from scalegp.io import load
    from scalegp.io import save
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(30, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False).fit(
            X, np.sin(X[:, 0]))
    save(model, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz") as archive:
        members = {key: archive[key] for key in archive.files}
    assert any(value.ndim == 2 for value in members.values())
    np.savez(tmp_path / "f.npz", **{key: np.asfortranarray(value) if value.ndim == 2 else value
                                   for key, value in members.items()})
    np.testing.assert_array_equal(load(tmp_path / "f.npz").predict(X),
                                  load(tmp_path / "m.npz").predict(X))
