"""The safety of reading a model file: the archive's members, sizes and ``.npy`` headers checked
against the bytes the file holds before anything is inflated, and bounds on the metadata's
length, nesting and integers (a small file cannot demand large arrays, nor the work on them).
"""

from __future__ import annotations

import io
import math
import os
import re
import zipfile
import zlib

import numpy as np

from ..errors import InvalidModelFileError


# ============================================================================ load
#: Limits of what :func:`load` reads (a model file is untrusted input).
MAX_MEMBERS = 64


MAX_METADATA_BYTES = 4 * 2**20


#: Nesting of JSON objects and lists (the writer's deepest is 5: params.kernel.params.*[]).
MAX_JSON_DEPTH = 32


#: Digits of a JSON integer (more than any int64; Python's own limit is 4300 digits).
MAX_JSON_INT_DIGITS = 20


#: numpy's own limit for the header of one .npy member.
MAX_NPY_HEADER_BYTES = 10_000


#: Uncompressed over compressed size of a deflated member (deflate cannot exceed 1032).
MAX_DEFLATE_RATIO = 1100


#: The bytes all members may inflate to: INFLATION_ALLOWANCE + MAX_INFLATION times the file's
#: size, so that a small file cannot demand large arrays (and the work they cost). scalegp
#: stores members uncompressed; recompressed, float64 data deflates about 1.1 times, a
#: triangular factor 2 times, integer-valued inputs up to about 8 times.
MAX_INFLATION = 16


INFLATION_ALLOWANCE = 4 * 2**20


#: Bytes of an .npy member before its data: magic string and format version.
NPY_PREAMBLE_BYTES = 8


#: What reading a damaged zip member raises (a bad CRC, a short or corrupt deflate stream).
_STREAM_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error)


_ZIP_ERRORS = (*_STREAM_ERRORS, NotImplementedError, RuntimeError, ValueError)


class _Archive:
    """The members of an ``.npz`` file, checked against the file's real size, read only by
    ``numpy.load(..., allow_pickle=False)`` after their ``.npy`` headers were checked."""

    def __init__(self, path: str, file):
        self.path = path
        start = file.read(4)
        if start != b"PK\x03\x04" or not zipfile.is_zipfile(file):
            if start == b"PK\x03\x04":
                raise self.error("is truncated or damaged: it starts like an .npz (zip) "
                                 "archive but its zip directory is missing")
            raise InvalidModelFileError(
                f"not a scalegp model file: {path!r} is not an .npz (zip) archive"
            )
        file.seek(0)
        try:
            self.npz = np.load(file, allow_pickle=False)
        except _ZIP_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        try:
            self.members = self._check_members(self.npz.zip.infolist(),
                                               os.fstat(file.fileno()).st_size)
        except BaseException:
            self.npz.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.npz.close()

    def error(self, message: str) -> InvalidModelFileError:
        return InvalidModelFileError(f"model file {self.path!r} {message}")

    def _check_members(self, infos, file_size: int) -> dict:
        """key -> ZipInfo, after the zip directory's own claims are checked."""
        if len(infos) > MAX_MEMBERS:
            raise self.error(f"has {len(infos)} members, more than the {MAX_MEMBERS} a model "
                             "file may have")
        members = {}
        for info in infos:
            name = info.filename
            if not name.endswith(".npy"):
                raise self.error(f"holds the member {name!r}, which is not an .npy array")
            if name[:-4] in members:
                raise self.error(f"holds the member {name!r} twice")
            if info.flag_bits & 0x1:
                raise self.error(f"holds the encrypted member {name!r}")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise self.error(f"holds the member {name!r} compressed by method "
                                 f"{info.compress_type}; expected stored or deflated")
            stored = info.compress_type == zipfile.ZIP_STORED
            if (stored and info.file_size != info.compress_size) or (
                    info.file_size > MAX_DEFLATE_RATIO * max(info.compress_size, 1)):
                raise self.error(
                    f"has the member {name!r} declaring {info.file_size} bytes from "
                    f"{info.compress_size} compressed ({'stored' if stored else 'deflated'}; "
                    f"at most {1 if stored else MAX_DEFLATE_RATIO} times as many)"
                )
            members[name[:-4]] = info
        compressed = sum(info.compress_size for info in infos)
        if compressed > file_size:
            raise self.error(f"has members declaring {compressed} bytes, more than the file's "
                             f"{file_size}")
        inflated = sum(info.file_size for info in infos)
        if inflated > INFLATION_ALLOWANCE + MAX_INFLATION * file_size:
            raise self.error(f"has members inflating to {inflated} bytes from a file of "
                             f"{file_size}, more than {MAX_INFLATION} times its size plus "
                             f"{INFLATION_ALLOWANCE} (scalegp writes uncompressed model "
                             "files: store its members uncompressed)")
        return members

    def header(self, key: str) -> tuple[tuple, np.dtype]:
        """(shape, dtype) from the member's .npy header, once the data it declares is checked
        to be exactly what the member holds."""
        info = self.members[key]
        try:
            with self.npz.zip.open(info) as stream:
                version = np.lib.format.read_magic(stream)
                if version not in ((1, 0), (2, 0)):
                    raise ValueError(f"unsupported .npy format version {version}")
                length_bytes = stream.read(2 if version == (1, 0) else 4)
                length = int.from_bytes(length_bytes, "little")
                header_size = NPY_PREAMBLE_BYTES + len(length_bytes) + length
                if length > MAX_NPY_HEADER_BYTES or header_size > info.file_size:
                    raise ValueError(f"header of {length} bytes (at most "
                                     f"{MAX_NPY_HEADER_BYTES}, within the member's "
                                     f"{info.file_size})")
                header = io.BytesIO(length_bytes + stream.read(length))
            parse = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                     else np.lib.format.read_array_header_2_0)
            shape, _, dtype = parse(header)
        except _STREAM_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        except (ValueError, SyntaxError, RecursionError, MemoryError, UnicodeError,
                NotImplementedError, RuntimeError) as error:
            raise self.error(f"has a damaged .npy header in array {key!r} ({error})") from None
        if dtype.hasobject:
            raise self.error(f"holds an object array {key!r} (pickled Python objects), which "
                             "scalegp neither writes nor loads")
        if any(size < 0 for size in shape):
            raise self.error(f"has array {key!r} of negative shape {shape}")
        data_size = math.prod(shape) * dtype.itemsize
        if header_size + data_size != info.file_size:
            raise self.error(
                f"has array {key!r} whose header declares shape {shape} of dtype {dtype.str} "
                f"({data_size} bytes), but the member holds {info.file_size - header_size} "
                "bytes of data"
            )
        return shape, dtype

    def read(self, key: str) -> np.ndarray:
        """The member's array in native byte order (call after :meth:`header`)."""
        try:
            array = self.npz[key]
        except _ZIP_ERRORS as error:
            raise self.error(f"is truncated or damaged ({error})") from None
        return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def _json_depth(text: str) -> int:
    """The deepest nesting of [ and { outside JSON strings (computed without recursion)."""
    outside = _JSON_STRING.sub("", text).encode("utf-8", "replace")
    codes = np.frombuffer(outside, dtype=np.uint8)
    steps = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(codes, (ord("]"), ord("}"))))
    return int(np.max(np.cumsum(steps), initial=0))


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _short(value, limit: int = 60) -> str:
    """repr of a metadata value, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
