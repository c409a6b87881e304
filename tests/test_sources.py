"""Streaming from files (scalegp.data.sources): equal to the in-memory fit, flat in memory, and
bad input refused with errors that name the problem.

A streamed fit reads the same floats (every format parses a number with correct rounding, and
the values are written with repr) and standardizes them by the same elementwise operations
into the same chunks, so its statistics are the in-memory ones float for float: the 1e-10 of
the issue is a bound, the measured difference is 0.
"""

import subprocess
import sys

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
from scalegp.data import sources
from scalegp.data.readers import TableError
from scalegp.data.sources import CsvSource, NpySource, ParquetSource, open_source
from scalegp.estimators.configuration import make_approximation

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

N = 400
TOLERANCE = 1e-10


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(N, 2)) * [1.0, 30.0] + [0.0, 100.0]
    y = np.sin(2 * X[:, 0]) + 0.01 * X[:, 1] + 0.1 * rng.standard_normal(N)
    noise = rng.uniform(0.0, 0.02, size=N)
    return X, y, noise


def write_files(folder, X, y, noise):
    """The same table as CSV, .npy, .npz (X and y) and Parquet (three row groups)."""
    table = np.column_stack([X, y, noise])
    csv = folder / "t.csv"
    csv.write_text("a,b,target,v\n" + "".join(
        ",".join(repr(float(value)) for value in row) + "\n" for row in table))
    np.save(folder / "t.npy", table)
    np.savez(folder / "t.npz", X=X, y=y)
    pq.write_table(pa.table({"a": X[:, 0], "b": X[:, 1], "target": y, "v": noise}),
                   folder / "t.parquet", row_group_size=150)
    return {"csv": CsvSource(csv, "target", noise_variance_column=None, inputs=["a", "b"]),
            "npy": NpySource(folder / "t.npy", 2, inputs=[0, 1]),
            "npz": NpySource(folder / "t.npz", "y"),
            "parquet": ParquetSource(folder / "t.parquet", "target", inputs=["a", "b"])}


@pytest.fixture
def files(tmp_path, data, monkeypatch):
    # blocks of 37 rows: every engine chunk is stitched from several file blocks
    monkeypatch.setattr(sources, "READ_ROWS", 37)
    return write_files(tmp_path, *data)


def assert_same_fit(streamed, in_memory, X):
    np.testing.assert_allclose(streamed.log_marginal_likelihood_value_,
                               in_memory.log_marginal_likelihood_value_, rtol=TOLERANCE)
    np.testing.assert_allclose(streamed.kernel_.theta, in_memory.kernel_.theta,
                               rtol=TOLERANCE, atol=TOLERANCE)
    np.testing.assert_allclose(streamed.noise_variance_, in_memory.noise_variance_,
                               rtol=TOLERANCE)
    for a, b in zip(streamed.predict(X[:60], return_std=True),
                    in_memory.predict(X[:60], return_std=True)):
        np.testing.assert_allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE)


@pytest.mark.parametrize("options", [
    dict(approximation="rff", optimize=False),
    dict(approximation="glf", optimize=True),           # fixed basis: one statistics pass
    dict(approximation="rff", optimize=True),           # two passes per evaluation
], ids=["rff-fixed", "glf-learn", "rff-learn"])
def test_streaming_from_each_format_equals_the_in_memory_fit(files, data, options):
    X, y, _ = data
    params = dict(n_components=32, normalize_X=True, normalize_y=True, random_state=0,
                  **options)
    in_memory = low_rank(**params).fit(X, y)
    for name, source in files.items():
        streamed = low_rank(**params).fit(source)
        assert streamed.n_features_in_ == 2, name
        assert_same_fit(streamed, in_memory, X)
        # log_marginal_likelihood(theta) streams from the source again
        theta = np.append(in_memory.kernel_.theta, np.log(in_memory.noise_variance_)) + 0.1
        np.testing.assert_allclose(streamed.log_marginal_likelihood(theta),
                                   in_memory.log_marginal_likelihood(theta), rtol=TOLERANCE)


def test_known_noise_variances_and_float32_stream_too(tmp_path, data):
    X, y, noise = data
    write_files(tmp_path, X, y, noise)
    source = CsvSource(tmp_path / "t.csv", "target", noise_variance_column="v")
    assert source.input_columns == ("a", "b")
    params = dict(approximation="rff", n_components=32, normalize_X=True, normalize_y=True,
                  random_state=1, optimize=False, kernel=sg.Gaussian(length_scale=0.5),
                  noise_variance=0.05)
    in_memory = low_rank(**params).fit(X, y, sample_noise_variance=noise)
    assert_same_fit(low_rank(**params).fit(source), in_memory, X)
    single = dict(params, dtype="float32")
    assert_same_fit(low_rank(**single).fit(source),
                    low_rank(**single).fit(X, y, sample_noise_variance=noise), X)


def test_every_pass_is_reported_by_name(files, data):
    X, y, _ = data
    passes, rows = [], []

    def progress(rows_done):
        rows.append(rows_done)

    progress.start_pass = lambda name, total: passes.append((name, total))
    low_rank(normalize_X=True,
                          random_state=0, approximation=make_approximation("rff", n_components=16), normalize_y=False).fit(files["npy"], progress=progress)
    names = [name for name, _ in passes]
    # rff: no pass to build the objective; each evaluation reads the statistics, then the
    # gradient's shares (an out-of-core source keeps no features between them)
    assert names[:3] == ["summary pass", "learning evaluation 1",
                         "learning evaluation 1, pass 2"]
    # the probe rows are picked by the first pass after the summary: no pass of their own
    assert names[-1] == "conditioning pass" and "probe rows pass" not in names
    assert all(total == N for name, total in passes[1:])     # known after the summary
    assert rows[-1] == N and max(rows) == N


# ----------------------------------------------------------------- refusals
def test_models_that_hold_their_rows_refuse_a_source(files):
    source = files["npy"]
    with pytest.raises(ValueError, match="local='clusters' needs the training rows"):
        low_rank(local="clusters", normalize_X=False, normalize_y=False).fit(source)
    with pytest.raises(ValueError, match="ExactGPRegressor builds n x n matrices"):
        sg.ExactGPRegressor(normalize_X=False, normalize_y=False).fit(source)
    with pytest.raises(ValueError, match="n_nodes='auto' searches on the training rows"):
        low_rank(approximation=make_approximation("glf", options={"n_nodes": "auto"}), normalize_X=False, normalize_y=False).fit(source)
    with pytest.raises(ValueError, match="y must be None when X is a data source"):
        low_rank(normalize_X=False, normalize_y=False).fit(source, np.zeros(N))


# ----------------------------------------------------------------- bad input
def test_a_nan_row_is_named_by_row_and_column_or_dropped(tmp_path, data, monkeypatch):
    monkeypatch.setattr(sources, "READ_ROWS", 50)
    X, y, _ = data
    table = np.column_stack([X, y])
    table[[7, 123, 260], [1, 0, 2]] = np.nan
    np.save(tmp_path / "gaps.npy", table)
    path = tmp_path / "gaps.csv"
    path.write_text("a,b,y\n" + "".join(
        ",".join("NA" if np.isnan(v) else repr(float(v)) for v in row) + "\n"
        for row in table))
    for file, column in ((tmp_path / "gaps.npy", "x1"), (path, "b")):
        with pytest.raises(TableError, match=rf"data row 8 has a missing or non-finite value "
                                             rf"in column '{column}' \(3 such row\(s\)\)"):
            open_source(file, 2).summary()
        source = open_source(file, 2, drop_missing=True)
        assert source.n_samples == N - 3 and source.n_dropped == 3
        keep = np.setdiff1d(np.arange(N), [7, 123, 260])
        np.testing.assert_array_equal(np.vstack([c.X for c in source.chunks(64)]),
                                      X[keep])


def test_non_numeric_columns_are_refused(tmp_path):
    path = tmp_path / "city.csv"
    path.write_text("a,city,y\n" + "1,2,3\n" * 3 + "2,Rome,3\n")
    with pytest.raises(TableError, match=r"column 'city' is not numeric \(line 5 has 'Rome'\)"):
        CsvSource(path, "y").summary()
    pq.write_table(pa.table({"a": [1.0, 2.0], "city": ["Paris", "Rome"], "y": [1.0, 2.0]}),
                   tmp_path / "city.parquet")
    with pytest.raises(TableError, match=r"column 'city' is not numeric \(type string\)"):
        ParquetSource(tmp_path / "city.parquet", "y")
    np.save(tmp_path / "text.npy", np.array([["a", "b"]]))
    with pytest.raises(TableError, match="expected a numeric array, got dtype <U1"):
        NpySource(tmp_path / "text.npy", 1)


def test_empty_files_and_missing_columns_are_named(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(TableError, match="empty.csv: the file is empty"):
        CsvSource(tmp_path / "empty.csv", "y")
    (tmp_path / "header.csv").write_text("a,y\n\n")
    with pytest.raises(TableError, match="the file has a header but no data rows"):
        CsvSource(tmp_path / "header.csv", "y").summary()
    np.save(tmp_path / "none.npy", np.zeros((0, 3)))
    with pytest.raises(TableError, match=r"expected a non-empty 2-D array, got shape \(0, 3\)"):
        NpySource(tmp_path / "none.npy", 2)
    pq.write_table(pa.table({"a": pa.array([], pa.float64()), "y": pa.array([], pa.float64())}),
                   tmp_path / "none.parquet")
    with pytest.raises(TableError, match="none.parquet: the table is empty"):
        ParquetSource(tmp_path / "none.parquet", "y")
    (tmp_path / "t.csv").write_text("a,b,y\n1,2,3\n")
    with pytest.raises(TableError, match=r"no column 'price' \(columns: a, b, y"):
        CsvSource(tmp_path / "t.csv", "price")
    with pytest.raises(TableError, match=r"no column 'c'"):
        CsvSource(tmp_path / "t.csv", "y", inputs=["a", "c"])
    with pytest.raises(TableError, match="only the target column 'y'"):
        CsvSource(tmp_path / "t.csv", "y", inputs=[])


def test_negative_noise_variance_is_named_by_row(tmp_path):
    (tmp_path / "v.csv").write_text("a,y,v\n1,2,0.1\n2,3,-0.5\n")
    with pytest.raises(TableError, match=r"column 'v' holds noise variances, which must be "
                                         r">= 0; data row 2 has -0.5"):
        CsvSource(tmp_path / "v.csv", "y", noise_variance_column="v").summary()


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name.startswith("pyarrow"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(TableError, match=r"reading Parquet needs pyarrow: pip install "
                                         r"'scalegp\[parquet\]'"):
        ParquetSource(tmp_path / "t.parquet", "y")


# ----------------------------------------------------------------- memory
PEAK = r"""
import sys, numpy as np, scalegp as sg
from scalegp.data.sources import NpySource
sg.LowRankGPRegressor(sg.Features("rff", n_components=64), optimize=False,
                      random_state=0).fit(NpySource(sys.argv[1], 2))
print([int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0])
"""


def peak_kib(path) -> int:
    result = subprocess.run([sys.executable, "-c", PEAK, str(path)], capture_output=True,
                            text=True, check=True)
    return int(result.stdout)


def write_rows(path, n):
    rng = np.random.default_rng(0)
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64, shape=(n, 3))
    for start in range(0, n, 2**20):
        stop = min(n, start + 2**20)
        array[start:stop] = rng.uniform(-2, 2, size=(stop - start, 3))
    array.flush()


@pytest.mark.parametrize("rows", [pytest.param((10**5, 2 * 10**6), id="1e5-2e6"),
                                  pytest.param((10**5, 10**7), id="1e5-1e7",
                                               marks=pytest.mark.slow)])
def test_peak_memory_is_flat_in_the_number_of_rows(tmp_path, rows):
    """A fit from .npy at 1e5 and at 2e6 (1e7: slow) rows peaks within 1.2x of a peak of
    about 180 MiB (measured ratio 1.00-1.02 for .npy and Parquet, 1.05 for CSV, at 1e7 rows:
    benchmarks/results/streaming.md). A copy of the
    table (46 MiB at 2e6 rows, 229 MiB at 1e7) or the features kept between passes (n m
    float64: 1 GiB at 2e6 rows) would exceed it; at 1e7 rows so would one float64 per row
    (76 MiB)."""
    small, large = rows
    write_rows(tmp_path / "small.npy", small)
    write_rows(tmp_path / "large.npy", large)
    ratio = peak_kib(tmp_path / "large.npy") / peak_kib(tmp_path / "small.npy")
    assert ratio < 1.2, ratio


# ----------------------------------------------------------------- command line
def run_cli(capsys, *args):
    from scalegp import cli
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_predict_streams_block_by_block(tmp_path, data, capsys, monkeypatch):
    monkeypatch.setattr(sources, "READ_ROWS", 50)
    X, y, noise = data
    write_files(tmp_path, X, y, noise)
    model = tmp_path / "m.npz"
    code, _, err = run_cli(capsys, "fit", "--approximation", "rff", tmp_path / "t.parquet", "--target", "target",
                           "--noise-variance-column", "v", "--n-components", 32,
                           "--no-optimize", "--out", model)
    assert code == 0, err
    assert "--dtype auto: float64" in err and "working memory O(chunk m + m^2)" in err
    code, _, err = run_cli(capsys, "predict", model, tmp_path / "t.csv",
                           "--out", tmp_path / "p.csv")
    assert code == 0, err
    assert f"wrote {N} predictions" in err
    fitted = sg.load(model)
    written = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    # blocks of 50 rows against one call: products of other shapes, rounding of a few ulps
    np.testing.assert_allclose(written, np.column_stack(fitted.predict(X, return_std=True)),
                               rtol=1e-13, atol=1e-15)
    # a bad row past the first blocks: an error naming it, and nothing written
    lines = (tmp_path / "t.csv").read_text().splitlines()
    lines[301] = "1.0,nan,0.0,0.0"
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "predict", model, tmp_path / "bad.csv",
                           "--out", tmp_path / "q.csv")
    assert code == 2 and "data row 301 has a missing or non-finite value in column 'b'" in err
    assert not (tmp_path / "q.csv").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    code, _, err = run_cli(capsys, "fit", "--approximation", "rff", tmp_path / "t.npy", "--target", 2, "--quiet",
                           "--n-components", 128, "--out", tmp_path / "q.npz")
    assert code == 0 and err == ""          # --quiet: no log line, no bar (m = 16 would warn
                                            # that it cannot resolve the kernel: 249 % off)


def test_dtype_auto_rule():
    from argparse import Namespace
    from scalegp.cli.fit import _dtype
    args = Namespace(dtype="auto", no_optimize=False, noise_variance=None, quiet=True,
                     noise_variance_bounds=(1e-2, 1e5), n_components=256, solver="cholesky",
                     local=None, approximation="rff")
    assert _dtype(args, 10**6, 256) == "float32"              # N m^2 = 6.6e10
    assert _dtype(args, 10**5, 256) == "float64"              # 6.6e9: too little work to pay
    args.noise_variance_bounds = (1e-6, 1e5)             # the default box reaches 1e-6
    assert _dtype(args, 10**6, 256) == "float64"
    args.no_optimize, args.noise_variance = True, 0.05   # fixed noise: its value counts
    assert _dtype(args, 10**6, 256) == "float32"
    args.solver = "qr"
    assert _dtype(args, 10**6, 256) == "float64"
    args.solver = "cholesky"                             # None: the map's default m (256)
    assert _dtype(args, 10**6, None) == "float32"


def test_progress_bars_name_each_pass_with_rate_and_time_left(files, capsys):
    from scalegp.data.sources import ProgressBars
    bars = ProgressBars()
    low_rank(normalize_X=True,
                          normalize_y=True, approximation=make_approximation("glf", n_components=16)).fit(files["csv"], progress=bars)
    bars.close()
    err = capsys.readouterr().err
    # a fixed basis conditions on its cached statistics: no conditioning pass, no bar
    assert "summary pass:" in err and "statistics pass:" in err, err
    assert "conditioning pass" not in err and "probe rows pass" not in err
    assert "rows/s" in err and "<" in err           # rate, and elapsed<left once n is known


def test_a_dask_source_fits_on_its_workers_equal_to_the_in_memory_fit(data, monkeypatch):
    """The estimator standardizes a distributed source block by block on the workers
    (sources.DistributedStandardizedSource): no chunk passes through the driver, and the fit
    equals the in-memory one up to the rounding of other block sums (measured 4e-13)."""
    dask = pytest.importorskip("dask")
    da = pytest.importorskip("dask.array")
    from scalegp.data.distributed import DaskSource
    X, y, _ = data
    driver_passes = []
    chunks = sources.StandardizedSource.chunks
    monkeypatch.setattr(sources.StandardizedSource, "chunks",
                        lambda self, rows: driver_passes.append(rows) or chunks(self, rows))
    with dask.config.set(scheduler="threads"):
        for options in (dict(approximation="rff", optimize=False),
                        dict(approximation="glf", optimize=True)):
            params = dict(n_components=32, normalize_X=True, normalize_y=True, random_state=0,
                          **options)
            source = DaskSource(da.from_array(X, chunks=(170, 2)), da.from_array(y, chunks=170))
            assert_same_fit(low_rank(**params).fit(source),
                            low_rank(**params).fit(X, y), X)
    assert driver_passes == []
