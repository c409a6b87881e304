"""UCI regression data sets: a local copy, or a checked download into a cache.

:func:`fetch_uci` returns the inputs, the target and the 10-fold test assignment of one of the
UCI regression sets that Yang et al. (2015), Wilson et al. (2016) and Wang et al. (2019) use, in
the form of the ``treforevans/uci_datasets`` repository at commit ``UCI_COMMIT``: ``NAME.csv``
(header ``x1,...,xd,y``, then the repository's ``data.csv.gz`` lines unchanged) and
``NAME_folds.csv`` (header ``test_fold``, then the index 0..9 of the fold whose test part holds
each row: the repository's ``test_mask.csv.gz`` re-encoded). Every file is checked against the
SHA-256 recorded in ``uci_sha256.txt`` next to this module, whether it was found or downloaded.

Where the files are looked for, in order: ``data_home``; ``$SCALEGP_UCI_DIR``; the cache
``$SCALEGP_DATA/uci`` (default ``~/scalegp_data/uci``). A missing file is downloaded into
``data_home`` or the cache (never into ``$SCALEGP_UCI_DIR``, a folder the user keeps), only
when ``download_if_missing`` is true, and written only after its checksum matched: an existing
file is never replaced.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._output import CSV_SUFFIXES, write_atomically

__all__ = ["fetch_uci", "UciDataset", "UCI_NAMES", "UCI_COMMIT", "uci_cache_dir"]

#: The commit of github.com/treforevans/uci_datasets the files are taken from.
UCI_COMMIT = "f0737523712fe66a1640e4b980b927e8490b58eb"
#: Where a file is downloaded from: ``{name}`` and ``{file}`` (data or test_mask) filled in.
UCI_URL = ("https://github.com/treforevans/uci_datasets/raw/" + UCI_COMMIT
           + "/uci_datasets/{name}/{file}.csv.gz")
#: Seconds a download may wait for the server.
TIMEOUT = 60.0


def _checksums() -> dict[str, str]:
    lines = (Path(__file__).parent / "uci_sha256.txt").read_text().splitlines()
    return {file: digest for digest, file in (line.split() for line in lines if line.strip())}


#: file name -> SHA-256 of each known file.
CHECKSUMS = _checksums()
#: The data sets fetch_uci knows.
UCI_NAMES = tuple(sorted(file[:-4] for file in CHECKSUMS if not file.endswith("_folds.csv")))


@dataclass(frozen=True)
class UciDataset:
    """One UCI data set: ``X`` (n, d), ``y`` (n,), ``test_fold`` (n,) in 0..9 (split k: test
    rows where ``test_fold == k``, train rows the others), and the folder it was read from."""

    name: str
    X: np.ndarray
    y: np.ndarray
    test_fold: np.ndarray
    folder: Path


def uci_cache_dir() -> Path:
    """``$SCALEGP_DATA/uci``, default ``~/scalegp_data/uci``."""
    return Path(os.environ.get("SCALEGP_DATA", Path.home() / "scalegp_data")) / "uci"


def fetch_uci(name: str, *, data_home=None, download_if_missing: bool = True) -> UciDataset:
    """Inputs, target and fold assignment of the UCI data set ``name`` (module docstring).

    Raises
    ------
    ValueError
        ``name`` is not a known data set.
    FileNotFoundError
        The files are missing and ``download_if_missing`` is false.
    OSError
        The download failed, or a file's checksum does not match (the file is named; a
        downloaded file that does not match is not written).
    """
    if name not in UCI_NAMES:
        raise ValueError(f"unknown UCI data set {name!r}; known: {', '.join(UCI_NAMES)}")
    folders = [Path(data_home)] if data_home is not None else []
    if os.environ.get("SCALEGP_UCI_DIR"):
        folders.append(Path(os.environ["SCALEGP_UCI_DIR"]))
    folders.append(uci_cache_dir())
    found = next((folder for folder in folders
                  if all((folder / file).is_file() for file in _files(name))), None)
    if found is None:
        target = Path(data_home) if data_home is not None else uci_cache_dir()
        if not download_if_missing:
            raise FileNotFoundError(
                f"UCI data set {name!r} not found in {', '.join(map(str, folders))}; pass "
                "download_if_missing=True to download it, or set SCALEGP_UCI_DIR to a folder "
                f"holding {name}.csv and {name}_folds.csv")
        _download(name, target)
        found = target
    for file in _files(name):
        _check(found / file, (found / file).read_bytes())
    table = np.loadtxt(found / f"{name}.csv", delimiter=",", skiprows=1, ndmin=2)
    folds = np.loadtxt(found / f"{name}_folds.csv", delimiter=",", skiprows=1, dtype=int,
                       ndmin=1)
    return UciDataset(name, table[:, :-1], table[:, -1], folds, found)


def _files(name: str) -> tuple[str, str]:
    return f"{name}.csv", f"{name}_folds.csv"


def _check(path: Path, content: bytes) -> None:
    digest = hashlib.sha256(content).hexdigest()
    if digest != CHECKSUMS[path.name]:
        raise OSError(f"{path}: SHA-256 {digest} does not match the recorded "
                      f"{CHECKSUMS[path.name]} (a corrupt or different file; delete it to "
                      "download it again)")


def _get(name: str, file: str) -> bytes:
    url = UCI_URL.format(name=name, file=file)
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            return gzip.decompress(response.read())
    except (OSError, EOFError) as error:
        raise OSError(f"downloading UCI data set {name!r} from {url} failed: {error}") from None


def _download(name: str, folder: Path) -> None:
    """Download, re-encode and check both files, then create them in ``folder`` (missing ones
    only; an existing file is left as it is and checked by the caller)."""
    data = _get(name, "data")
    n_columns = data.split(b"\n", 1)[0].count(b",") + 1
    header = ",".join([f"x{j}" for j in range(1, n_columns)] + ["y"]).encode() + b"\n"
    mask = np.loadtxt(io.BytesIO(_get(name, "test_mask")), delimiter=",", dtype=int, ndmin=2)
    if not np.all(mask.sum(axis=1) == 1):
        raise OSError(f"UCI data set {name!r}: its test mask does not put every row in exactly "
                      "one test fold")
    folds = b"test_fold\n" + b"".join(b"%d\n" % k for k in mask.argmax(axis=1))
    contents = {f"{name}.csv": header + data, f"{name}_folds.csv": folds}
    for file, content in contents.items():
        _check(folder / file, content)
    folder.mkdir(parents=True, exist_ok=True)
    for file, content in contents.items():
        if not (folder / file).exists():
            write_atomically(folder / file, lambda handle, c=content: handle.write(c),
                             suffixes=CSV_SUFFIXES, replace=False)
