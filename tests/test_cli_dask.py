"""``scalegp fit --dask-scheduler``: the workers of a LocalCluster (two processes on loopback)
read CSV, .npy and Parquet files themselves, and the saved model predicts as the serial CLI
fit of the same file does; unreachable schedulers and the models that hold their rows are
refused with one line (docs/distributed.md, "From the command line")."""

import numpy as np
import pytest

from scalegp.cli import main
from scalegp.io import load, load_table_columns

pytest.importorskip("dask.dataframe", reason="the dask extra is part of the test install")
distributed = pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

N = 2400
#: The same rows summed in another grouping (blocks against chunks): rounding only.
TOLERANCE = 1e-10


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask-cli")
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(N, 2))
    y = np.sin(X[:, 0]) * np.cos(0.5 * X[:, 1]) + 0.1 * rng.standard_normal(N)
    sigma2 = rng.uniform(0.0, 0.02, size=N)
    np.save(folder / "data.npy", np.column_stack([X, y]))
    with open(folder / "data.csv", "w") as handle:
        handle.write("a,b,z,sigma2\n")
        for row in np.column_stack([X, y, sigma2]):
            handle.write(",".join(repr(float(value)) for value in row) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"a": X[:, 0], "z": y, "b": X[:, 1]}), folder / "data.parquet",
                   row_group_size=1000)
    missing = (folder / "data.csv").read_text().splitlines()
    missing[5] = "1.0,,0.5,0.01"
    (folder / "missing.csv").write_text("\n".join(missing) + "\n")
    return folder


def fit(path, target, out, *extra):
    return main(["fit", str(path), "--target", target, "--approximation", "glf",
                 "--n-components", "32", "--length-scale-bounds", "0.1", "10", "--quiet",
                 "--out", str(out), *extra])


def assert_same_predictions(serial, dask):
    serial = load(serial)
    X = np.random.default_rng(1).uniform(-3, 3, size=(200, serial.n_features_in_))
    mean, std = serial.predict(X, return_std=True)
    dask_mean, dask_std = load(dask).predict(X, return_std=True)
    assert np.max(np.abs(dask_mean - mean)) <= TOLERANCE
    assert np.max(np.abs(dask_std - std)) <= TOLERANCE


@pytest.mark.parametrize("name, target, extra", [
    ("data.npy", "2", ()),
    ("data.csv", "z", ()),
    ("data.csv", "z", ("--noise-variance-column", "sigma2")),
    ("data.parquet", "z", ()),
])
def test_dask_fit_predicts_as_the_serial_fit(cluster, files, tmp_path, capsys, name, target,
                                             extra):
    serial, dask = tmp_path / "serial.npz", tmp_path / "dask.npz"
    assert fit(files / name, target, serial, *extra) == 0
    # 700 rows a block: several blocks (CSV: by bytes, about 700 rows each)
    assert fit(files / name, target, dask, *extra, "--dask-scheduler",
               cluster.scheduler_address, "--dask-block-rows", "700") == 0
    assert_same_predictions(serial, dask)
    model, reference = load(dask), load(serial)
    assert model.n_features_in_ == reference.n_features_in_
    assert load_table_columns(dask) == load_table_columns(serial)


def test_the_log_names_the_scheduler_and_the_blocks(cluster, files, tmp_path, capsys):
    assert main(["fit", str(files / "data.npy"), "--target", "2", "--approximation", "glf",
                 "--n-components", "16", "--no-optimize", "--out", str(tmp_path / "m.npz"),
                 "--dask-scheduler", cluster.scheduler_address,
                 "--dask-block-rows", "1000"]) == 0
    err = capsys.readouterr().err
    assert (f"Dask scheduler {cluster.scheduler_address} (2 worker(s)): {N} rows of "
            in err)
    assert "in 3 block(s), read by the workers" in err


def test_missing_values_are_refused_or_dropped(cluster, files, tmp_path, capsys):
    address = cluster.scheduler_address
    assert fit(files / "missing.csv", "z", tmp_path / "m.npz", "--dask-scheduler",
               address) == 2
    err = capsys.readouterr().err
    assert "data row 5 has a missing or non-finite value in column 'b'" in err
    assert "--drop-missing" in err
    serial, dask = tmp_path / "serial.npz", tmp_path / "dask.npz"
    assert fit(files / "missing.csv", "z", serial, "--drop-missing") == 0
    assert fit(files / "missing.csv", "z", dask, "--drop-missing", "--dask-scheduler",
               address, "--dask-block-rows", "700") == 0
    assert_same_predictions(serial, dask)


def test_an_unreachable_scheduler_is_one_line(files, tmp_path, capsys):
    assert fit(files / "data.npy", "2", tmp_path / "m.npz", "--dask-scheduler",
               "tcp://127.0.0.1:9", "--dask-timeout", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "--dask-scheduler tcp://127.0.0.1:9: cannot reach the scheduler within 1 s" in err[0]
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("extra, named", [
    (("--approximation", "exact"), "--approximation exact"),
    (("--local", "clusters"), "--local clusters"),
    (("--local", "neighbors"), "--local neighbors"),
    (("--sampler", "gibbs"), "--sampler gibbs"),
])
def test_models_that_hold_their_rows_are_refused(files, tmp_path, capsys, extra, named):
    """Refused before connecting: the address is never tried."""
    assert main(["fit", "--approximation", "rff", str(files / "data.npy"), "--target", "2", *extra, "--out",
                 str(tmp_path / "m.npz"), "--dask-scheduler", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert f"--dask-scheduler does not take {named}" in err
    assert "holds its training rows" in err


def test_npz_archives_are_refused(cluster, tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data.npz", X=rng.normal(size=(50, 2)), y=rng.normal(size=50))
    assert main(["fit", str(tmp_path / "data.npz"), "--target", "y", "--approximation", "glf",
                 "--out", str(tmp_path / "m.npz"),
                 "--dask-scheduler", cluster.scheduler_address]) == 2
    assert "a .npz archive cannot be split into row ranges" in capsys.readouterr().err


def test_without_dask_the_error_names_the_extra(files, tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)      # import distributed fails
    assert fit(files / "data.npy", "2", tmp_path / "m.npz", "--dask-scheduler",
               "tcp://127.0.0.1:9") == 2
    assert "pip install 'scalegp[dask]'" in capsys.readouterr().err


def test_bad_cells_and_negative_noise_variances_are_one_line(cluster, files, tmp_path,
                                                              capsys):
    rows = (files / "data.csv").read_text().splitlines()
    rows[3] = "1.0,abc,0.5,0.01"
    (tmp_path / "text.csv").write_text("\n".join(rows) + "\n")
    rows = (files / "data.csv").read_text().splitlines()
    rows[1500] = "1.0,0.5,0.5,-0.25"
    (tmp_path / "negative.csv").write_text("\n".join(rows) + "\n")
    address = cluster.scheduler_address
    assert fit(tmp_path / "text.csv", "z", tmp_path / "m.npz", "--dask-scheduler",
               address) == 2
    # the serial reader's message: the workers parse with its parser (one grammar)
    assert "text.csv: column 'b' is not numeric (line 4 has 'abc')" in capsys.readouterr().err
    assert fit(tmp_path / "negative.csv", "z", tmp_path / "m.npz", "--noise-variance-column",
               "sigma2", "--dask-scheduler", address, "--dask-block-rows", "700") == 2
    err = capsys.readouterr().err
    assert "column 'sigma2' holds noise variances, which must be >= 0; data row 1500" in err


@pytest.mark.parametrize("address", ["foo://bar", "tcp://localhost:notaport", "::::",
                                     "tcp://[::1", "localhost:99999999"])
def test_a_malformed_address_is_refused_before_a_client_exists(files, tmp_path, capsys,
                                                               monkeypatch, address):
    """Issue 24: a Client made on a malformed address printed a `Client.__del__` traceback
    at exit after the error line (and waited 20 s to close): none is made now."""
    def no_client(*args, **kwargs):
        raise AssertionError("a Client was made for a malformed address")

    monkeypatch.setattr(distributed, "Client", no_client)
    assert fit(files / "data.npy", "2", tmp_path / "m.npz", "--dask-scheduler", address) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--dask-scheduler {address}: not a scheduler address" in err[0]


def test_a_scheduler_lost_mid_fit_is_one_line(cluster, files, tmp_path, capsys, monkeypatch):
    """Issue 24: the scheduler dying mid-fit surfaced as a raw FutureCancelledError."""
    from distributed.client import FutureCancelledError

    from scalegp.data.distributed import DaskSource

    def lost(self, function):
        raise FutureCancelledError("finalize-1234", "scheduler-connection-lost")

    monkeypatch.setattr(DaskSource, "map_reduce", lost)
    assert fit(files / "data.npy", "2", tmp_path / "m.npz", "--dask-scheduler",
               cluster.scheduler_address) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "the scheduler or its workers went away during the fit (FutureCancelledError" \
        in err[-1]
    assert "internal error" not in err[-1] and not (tmp_path / "m.npz").exists()


def test_one_grammar_on_the_workers_of_a_cluster(cluster, files, tmp_path, capsys):
    """Issue 24, section 5, on worker processes (errors travel pickled): a ragged row late in
    the file is refused with the serial reader's message, its line counted in the file
    (pandas truncated `1,2,3,4` to three fields and trained on it); a file with a byte-order
    mark, CRLF line ends and quoted numbers gives the serial fit's model."""
    rows = (files / "data.csv").read_text().splitlines()
    rows[2000] = rows[2000] + ",7"
    (tmp_path / "ragged.csv").write_text("\n".join(rows) + "\n")
    address = cluster.scheduler_address
    assert fit(tmp_path / "ragged.csv", "z", tmp_path / "m.npz") == 2
    serial = capsys.readouterr().err.strip()
    assert fit(tmp_path / "ragged.csv", "z", tmp_path / "m.npz", "--dask-scheduler", address,
               "--dask-block-rows", "700") == 2
    assert capsys.readouterr().err.strip() == serial
    assert "ragged.csv: line 2001 has 5 fields, expected 4" in serial
    rows = (files / "data.csv").read_text().splitlines()
    quoted = [rows[0]] + ['"' + row.replace(",", '","') + '"' for row in rows[1:]]
    (tmp_path / "odd.csv").write_bytes(("\ufeff" + "\r\n".join(quoted) + "\r\n").encode())
    assert fit(tmp_path / "odd.csv", "z", tmp_path / "serial.npz") == 0
    assert fit(tmp_path / "odd.csv", "z", tmp_path / "dask.npz", "--dask-scheduler", address,
               "--dask-block-rows", "700") == 0
    assert_same_predictions(tmp_path / "serial.npz", tmp_path / "dask.npz")


@pytest.mark.slow
def test_a_scheduler_that_dies_mid_fit_is_one_line(files, tmp_path, capsys, monkeypatch):
    """The real event: an in-process cluster closed as the fit's first pass on it starts
    (measured: FutureCancelledError after the client's 5 s reconnect attempt, then exit 2,
    one line)."""
    from scalegp.data.distributed import DaskSource
    cluster = distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                       dashboard_address=None)
    passes, original = [], DaskSource.map_reduce

    def dying(self, function):
        passes.append(function)
        if len(passes) == 1:
            cluster.close(timeout=5)
        return original(self, function)

    monkeypatch.setattr(DaskSource, "map_reduce", dying)
    try:
        assert fit(files / "data.npy", "2", tmp_path / "m.npz", "--dask-scheduler",
                   cluster.scheduler_address, "--dask-timeout", "5") == 2
    finally:
        cluster.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert "the scheduler or its workers went away during the fit" in err[-1]
    assert not (tmp_path / "m.npz").exists()
