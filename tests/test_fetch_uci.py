"""scalegp.datasets.fetch_uci: local copies and downloads, each file checked by its SHA-256.

The download path runs against an HTTP server on the loopback serving the repository's two
files of a data set (data.csv.gz, test_mask.csv.gz) rebuilt from the local copy, so the
re-encoding is checked against the recorded checksums of the real files."""

import gzip
import http.server
import threading
from functools import partial

import numpy as np
import pytest

from scalegp.datasets import uci
from scalegp.experiments.quadrature import find_uci_dir, uci_available

pytestmark = pytest.mark.skipif(not uci_available(), reason="UCI CSV files not found "
                                "(../shared/data/uci or $SCALEGP_UCI_DIR): the source files")
NAME = "yacht"


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The repository's layout of NAME on a loopback HTTP server; yields the request log."""
    source = find_uci_dir()
    lines = (source / f"{NAME}.csv").read_bytes().split(b"\n", 1)[1]
    folds = np.loadtxt(source / f"{NAME}_folds.csv", skiprows=1, dtype=int)
    mask = np.zeros((folds.size, 10), dtype=int)
    mask[np.arange(folds.size), folds] = 1
    root = tmp_path / "www" / NAME
    root.mkdir(parents=True)
    (root / "data.csv.gz").write_bytes(gzip.compress(lines))
    (root / "test_mask.csv.gz").write_bytes(gzip.compress(
        "".join(",".join(map(str, row)) + "\n" for row in mask).encode()))
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(Handler, directory=str(tmp_path / "www")))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(uci, "UCI_URL", f"http://127.0.0.1:{httpd.server_port}/"
                                        "{name}/{file}.csv.gz")
    monkeypatch.delenv("SCALEGP_UCI_DIR", raising=False)
    monkeypatch.setenv("SCALEGP_DATA", str(tmp_path / "cache"))
    yield requests
    httpd.shutdown()


def test_a_download_is_rebuilt_byte_for_byte_and_cached(server, tmp_path):
    data = uci.fetch_uci(NAME)
    assert data.folder == tmp_path / "cache" / "uci" and len(server) == 2
    for file in (f"{NAME}.csv", f"{NAME}_folds.csv"):      # the recorded checksums hold
        assert (data.folder / file).read_bytes() == (find_uci_dir() / file).read_bytes()
    assert data.X.shape == (308, 6) and data.y.shape == (308,)
    assert sorted(set(data.test_fold.tolist())) == list(range(10))
    again = uci.fetch_uci(NAME)                             # from the cache: no request
    assert len(server) == 2
    np.testing.assert_array_equal(again.X, data.X)


def test_a_download_that_does_not_match_is_not_written(server, tmp_path, monkeypatch):
    monkeypatch.setitem(uci.CHECKSUMS, f"{NAME}.csv", "0" * 64)
    with pytest.raises(OSError, match=r"yacht\.csv: SHA-256 [0-9a-f]{64} does not match"):
        uci.fetch_uci(NAME, data_home=tmp_path / "home")
    assert not (tmp_path / "home" / f"{NAME}.csv").exists()


def test_a_corrupt_local_copy_is_refused_by_name(tmp_path):
    for file in (f"{NAME}.csv", f"{NAME}_folds.csv"):
        (tmp_path / file).write_bytes((find_uci_dir() / file).read_bytes())
    with (tmp_path / f"{NAME}.csv").open("ab") as handle:
        handle.write(b"1,2,3,4,5,6,7\n")
    with pytest.raises(OSError, match=r"yacht\.csv: SHA-256 .* delete it to download it again"):
        uci.fetch_uci(NAME, data_home=tmp_path, download_if_missing=False)


def test_missing_without_download_and_unknown_names(tmp_path, monkeypatch):
    monkeypatch.delenv("SCALEGP_UCI_DIR", raising=False)
    monkeypatch.setenv("SCALEGP_DATA", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="pass download_if_missing=True"):
        uci.fetch_uci(NAME, data_home=tmp_path / "none", download_if_missing=False)
    with pytest.raises(ValueError, match="unknown UCI data set 'nope'; known: airfoil"):
        uci.fetch_uci("nope")


def test_the_local_copy_is_found_through_the_environment(monkeypatch):
    monkeypatch.setenv("SCALEGP_UCI_DIR", str(find_uci_dir()))
    data = uci.fetch_uci("concrete", download_if_missing=False)
    assert data.X.shape == (1030, 8) and data.folder == find_uci_dir()
