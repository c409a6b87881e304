"""Data sources: (X, y) and optional per-row noise variances, read in row chunks.

The engine never needs the data as one array: it streams over ``source.chunks(rows)`` and
reads the location, scale and bounding box from ``source.summary()``, one pass computed once.
Arrays in memory (:class:`ArraySource`) and re-iterable blocks (:class:`IterableSource`) are
the kinds defined here; file readers implement the same :class:`DataSource` base class.
The summary's numerics are derived in (docs/data-sources.md, "The summary pass").
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from .._validation import check_dtype, check_matrix, check_positive_int, check_vector

#: Rows per chunk of the summary pass (its result does not depend on it beyond roundoff).
SUMMARY_ROWS = 2**16
#: The exponent given to an all-zero column of a chunk: below every float64's, so merging
#: rescales it to exactly 0 and the other chunk's exponent wins.
_ZERO_EXPONENT = -1100


@dataclass(frozen=True)
class Chunk:
    """Rows ``start`` .. ``start + len(y) - 1`` of a source.

    X is (rows, n_dims), y is (rows,), sample_noise_variance is (rows,) or None when the source has
    no per-row known noise variances.
    """

    X: np.ndarray
    y: np.ndarray
    sample_noise_variance: np.ndarray | None
    start: int

    @property
    def stop(self) -> int:
        """One past the last global row of the chunk."""
        return self.start + self.y.shape[0]


@dataclass(frozen=True)
class DataSummary:
    """One pass over a source: the bounding box and population moments (ddof 0) of X and y.

    X_min, X_max, X_mean, X_std have one entry per column; sample_noise_variance_min/max are None
    when the source has no per-row noise variances; y_min and y_max bound the targets.
    """

    n_samples: int
    X_min: np.ndarray
    X_max: np.ndarray
    X_mean: np.ndarray
    X_std: np.ndarray
    y_mean: float
    y_std: float
    sample_noise_variance_min: float | None
    sample_noise_variance_max: float | None
    y_min: float = math.nan
    y_max: float = math.nan

    def X_standardization(self, center: bool) -> tuple[np.ndarray, np.ndarray]:
        """(location, scale) per column: location = mean (0 unless ``center``), scale = std,
        1 where the std is 0; X is standardized as (X - location) / scale."""
        location = self.X_mean if center else np.zeros_like(self.X_mean)
        return location, np.where(self.X_std > 0, self.X_std, 1.0)

    def y_standardization(self) -> tuple[float, float]:
        """(mean, std) of y, std 1 for constant targets (centre only)."""
        return self.y_mean, (self.y_std if self.y_std > 0 else 1.0)


class DataSource(abc.ABC):
    """n_samples rows of (X, y[, sample_noise_variance]) that can be read any number of times.

    An abstract base class rather than a typing.Protocol: every kind shares the cached
    :meth:`summary` (written once, here), and :func:`as_source` recognizes a source by type.
    A subclass implements ``n_dims``, ``dtype`` and ``_blocks()``; ``n_samples`` defaults to
    the summary's count (a pass) and should be overridden when it is known up front.
    """

    _summary: DataSummary | None = None
    #: True for a source whose rows are not held in memory (files): the engine then keeps no
    #: O(n m) features between passes (:class:`scalegp.engine.statistics.KeptFeatures`).
    out_of_core: bool = False
    #: The :class:`scalegp.data.grid.TensorGrid` of a source whose rows are every cell of a tensor
    #: grid (:class:`scalegp.data.grid.GridSource`, and the wrappers of one), else None: maps with
    #: a tensor-product basis form their statistics from it without a pass.
    grid = None

    @property
    @abc.abstractmethod
    def n_dims(self) -> int:
        """Number of columns of X."""

    @property
    @abc.abstractmethod
    def dtype(self) -> np.dtype:
        """dtype of the X blocks (float64 or float32); y and noise variances are float64."""

    @property
    def n_samples(self) -> int:
        return self.summary().n_samples

    @property
    def has_sample_noise_variance(self) -> bool:
        """Whether the rows carry known noise variances (the summary knows; a pass)."""
        return self.summary().sample_noise_variance_min is not None

    @abc.abstractmethod
    def chunks(self, rows: int) -> Iterator[Chunk]:
        """Validated chunks of exactly ``rows`` rows (the last one may have fewer), in order,
        with ``start`` the global index of their first row. A fresh pass on every call."""

    def summary(self) -> DataSummary:
        """The :class:`DataSummary`, computed in one pass on the first call and cached."""
        if self._summary is None:
            self._summary = _summarize(self.chunks(SUMMARY_ROWS))
        return self._summary


class DistributedSource(DataSource):
    """A source whose rows live elsewhere (Dask workers: :mod:`scalegp.data.distributed`): the
    engine's passes become ``map_reduce`` calls, each chunk's share computed where the chunk
    is and only the sums (m x m statistics, gradients) returned."""

    @abc.abstractmethod
    def map_reduce(self, function: Callable[[Chunk], object]):
        """sum over the source's blocks of ``function(chunk)``, whose values add (``+``)."""


class ArraySource(DataSource):
    """Arrays in memory, validated once; chunks are views (no copies).

    X is converted to ``dtype`` (float64 unless float32 is asked, as the engine does), y and
    sample_noise_variance to float64.
    """

    def __init__(self, X, y, sample_noise_variance=None, dtype=None):
        self._dtype = check_dtype(dtype)
        self.X = check_matrix(X, "X", dtype=self._dtype)
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.sample_noise_variance = (None if sample_noise_variance is None
                               else _check_noise_variance(sample_noise_variance, self.X.shape[0], 0))

    @property
    def n_dims(self) -> int:
        return self.X.shape[1]

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def has_sample_noise_variance(self) -> bool:
        return self.sample_noise_variance is not None

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    def chunks(self, rows: int) -> Iterator[Chunk]:
        rows = check_positive_int(rows, "rows")
        for start in range(0, self.n_samples, rows):
            stop = min(start + rows, self.n_samples)
            noise = None if self.sample_noise_variance is None else self.sample_noise_variance[start:stop]
            yield Chunk(self.X[start:stop], self.y[start:stop], noise, start)


class IterableSource(DataSource):
    """Blocks of (X_block, y_block) or (X_block, y_block, sample_noise_variance_block) of any sizes.

    ``blocks`` is re-iterable (a list, a tuple, any iterable whose ``iter()`` is a fresh
    iterator) or a zero-argument callable returning a fresh iterator. A one-shot iterator or
    generator is refused: the engine reads the data several times. Each block is validated as
    it is read, errors naming global rows; ``chunks(rows)`` re-blocks to exactly ``rows`` rows.
    """

    def __init__(self, blocks: Iterable | Callable[[], Iterator], n_dims: int | None = None,
                 dtype=None):
        if not callable(blocks):
            if not isinstance(blocks, Iterable):
                raise TypeError("blocks must be a re-iterable of (X, y[, sample_noise_variance]) tuples "
                                f"or a callable returning an iterator, got {type(blocks).__name__}")
            if iter(blocks) is blocks:
                raise TypeError(
                    f"blocks is a one-shot {type(blocks).__name__} (a generator or iterator), "
                    "but the engine reads the data several times: pass a list of blocks or a "
                    "zero-argument function returning a fresh iterator, e.g. lambda: read()")
        self._open = blocks if callable(blocks) else (lambda: iter(blocks))
        self._n_dims = None if n_dims is None else check_positive_int(n_dims, "n_dims")
        self._dtype = check_dtype(dtype)

    @property
    def n_dims(self) -> int:
        if self._n_dims is None:
            first = next(iter(self._open()), None)
            if first is None:
                raise ValueError("the data source is empty (blocks yielded no block)")
            self._n_dims = check_matrix(_unpack(first, 0)[0], "X (block 0)",
                                        dtype=self._dtype, min_samples=0).shape[1]
        return self._n_dims

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def has_sample_noise_variance(self) -> bool:
        """From the first block (every pass checks that all blocks agree): no pass needed."""
        first = next(iter(self._open()), None)
        if first is None:
            raise ValueError("the data source is empty (blocks yielded no block)")
        return _unpack(first, 0)[2] is not None

    def chunks(self, rows: int) -> Iterator[Chunk]:
        rows = check_positive_int(rows, "rows")
        pending, pending_rows, start = [], 0, 0
        for block in self._validated_blocks():
            while block.y.shape[0] > 0:
                take = min(rows - pending_rows, block.y.shape[0])
                pending.append(_head(block, take))
                block = _tail(block, take)
                pending_rows += take
                if pending_rows == rows:
                    yield _concatenate(pending, start)
                    start += rows
                    pending, pending_rows = [], 0
        if pending:
            yield _concatenate(pending, start)

    def _validated_blocks(self) -> Iterator[Chunk]:
        start, has_noise, n_dims = 0, None, self._n_dims
        for index, block in enumerate(self._open()):
            X, y, noise = _unpack(block, index)
            X = check_matrix(X, f"X (block {index})", dtype=self._dtype, n_dims=n_dims,
                             min_samples=0, first_row=start)
            n_dims = X.shape[1]
            y = check_vector(y, f"y (block {index})", n_samples=X.shape[0], first_row=start) \
                if X.shape[0] else np.zeros(0)
            if has_noise is None:
                has_noise = noise is not None
            elif has_noise != (noise is not None):
                raise ValueError(
                    f"block {index} {'has' if noise is not None else 'lacks'} a sample_noise_variance "
                    f"block but block 0 {'has' if has_noise else 'lacks'} one: every block or "
                    "none must carry per-row noise variances")
            if noise is not None and X.shape[0]:
                noise = _check_noise_variance(noise, X.shape[0], start, f" (block {index})")
            elif noise is not None:
                noise = np.zeros(0)
            yield Chunk(X, y, noise, start)
            start += X.shape[0]
        if self._summary is not None and start != self._summary.n_samples:
            raise ValueError(
                f"blocks gave {start} rows in this pass but {self._summary.n_samples} in the "
                "first one: the callable must return a fresh iterator over the same data")
        if start == 0:
            raise ValueError("the data source is empty (its blocks hold no rows)")


def as_source(X, y=None, *, sample_noise_variance=None, dtype=None) -> DataSource:
    """X itself when it is a :class:`DataSource` (then y and sample_noise_variance must be None; a
    ``dtype`` is the precision the caller computes in, which converts each chunk), else
    ``ArraySource(X, y, sample_noise_variance, dtype)``."""
    if isinstance(X, DataSource):
        given = [name for name, value in (("y", y), ("sample_noise_variance", sample_noise_variance))
                 if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} must be None when X is a data source (the "
                             "source carries its targets and noise variances)")
        return X
    if y is None:
        raise ValueError("y must be given when X is an array (or pass a DataSource as X)")
    return ArraySource(X, y, sample_noise_variance=sample_noise_variance, dtype=dtype)


def _check_noise_variance(values, n_rows: int, first_row: int, where: str = "") -> np.ndarray:
    noise = check_vector(values, f"sample_noise_variance{where}", n_samples=n_rows, first_row=first_row)
    if np.any(noise < 0):
        row = int(np.flatnonzero(noise < 0)[0])
        raise ValueError(f"sample_noise_variance{where} must be >= 0 (known variances), got "
                         f"{noise[row]!r} at row {first_row + row}")
    return noise


def _unpack(block, index: int):
    """(X, y, sample_noise_variance or None) of a user block."""
    if not isinstance(block, (tuple, list)) or len(block) not in (2, 3):
        raise TypeError(f"block {index} must be a tuple (X, y) or (X, y, sample_noise_variance), "
                        f"got {type(block).__name__}"
                        + (f" of length {len(block)}" if isinstance(block, (tuple, list)) else ""))
    return block[0], block[1], (block[2] if len(block) == 3 else None)


def _head(chunk: Chunk, rows: int) -> Chunk:
    noise = None if chunk.sample_noise_variance is None else chunk.sample_noise_variance[:rows]
    return Chunk(chunk.X[:rows], chunk.y[:rows], noise, chunk.start)


def _tail(chunk: Chunk, rows: int) -> Chunk:
    noise = None if chunk.sample_noise_variance is None else chunk.sample_noise_variance[rows:]
    return Chunk(chunk.X[rows:], chunk.y[rows:], noise, chunk.start + rows)


def _concatenate(pieces: list[Chunk], start: int) -> Chunk:
    """One chunk of consecutive pieces; a single piece is returned as is (a view)."""
    if len(pieces) == 1:
        return pieces[0]
    noise = (None if pieces[0].sample_noise_variance is None
             else np.concatenate([piece.sample_noise_variance for piece in pieces]))
    return Chunk(np.concatenate([piece.X for piece in pieces]),
                 np.concatenate([piece.y for piece in pieces]), noise, start)


@dataclass(frozen=True)
class _ScaledMoments:
    """count n, and per column the mean and centred sum of squares M2 of values / 2^exponent.

    Holding the moments of scaled values keeps every square finite for any finite data.
    """

    count: int
    exponent: np.ndarray
    mean: np.ndarray
    M2: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> _ScaledMoments:
        """Two-pass moments of a chunk (rows x columns) scaled by 2^e, max|v| < 2^e."""
        largest = np.max(np.abs(values), axis=0)
        exponent = np.where(largest > 0, np.frexp(largest)[1], _ZERO_EXPONENT)
        scaled = np.ldexp(values, -exponent)
        mean = np.mean(scaled, axis=0)
        return cls(values.shape[0], exponent, mean, np.sum((scaled - mean) ** 2, axis=0))

    def merge(self, other: _ScaledMoments) -> _ScaledMoments:
        """Chan, Golub & LeVeque (1983): with d = mean_b - mean_a, n = n_a + n_b,
        mean = mean_a + d n_b / n and M2 = M2_a + M2_b + d^2 n_a n_b / n, after both sides
        are rescaled (exactly, by powers of two) to the larger exponent
        (docs/data-sources.md, "Merge")."""
        exponent = np.maximum(self.exponent, other.exponent)
        mean_a, M2_a = self._rescaled(exponent)
        mean_b, M2_b = other._rescaled(exponent)
        count = self.count + other.count
        delta = mean_b - mean_a
        return _ScaledMoments(
            count, exponent, mean_a + delta * (other.count / count),
            M2_a + M2_b + delta**2 * (self.count * other.count / count))

    def _rescaled(self, exponent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shift = self.exponent - exponent
        return np.ldexp(self.mean, shift), np.ldexp(self.M2, 2 * shift)

    def mean_and_std(self) -> tuple[np.ndarray, np.ndarray]:
        """mean = 2^e mean_scaled and std = 2^e sqrt(M2 / n) in the data's units."""
        exponent = np.where(self.exponent == _ZERO_EXPONENT, 0, self.exponent)
        return (np.ldexp(self.mean, exponent),
                np.ldexp(np.sqrt(self.M2 / self.count), exponent))


@dataclass(frozen=True)
class SummaryPart:
    """The summary of some rows, mergeable with that of others (any grouping, any order of
    merges gives the same summary up to rounding): the scaled moments of [X, y], their
    running min / max, and the range of the noise variances (None without them)."""

    moments: _ScaledMoments
    low: np.ndarray
    high: np.ndarray
    noise_min: float | None
    noise_max: float | None

    @classmethod
    def of(cls, chunk: Chunk) -> SummaryPart:
        values = np.column_stack([chunk.X.astype(np.float64, copy=False), chunk.y])
        noise = chunk.sample_noise_variance
        return cls(_ScaledMoments.of(values), np.min(values, axis=0), np.max(values, axis=0),
                   None if noise is None else float(np.min(noise)),
                   None if noise is None else float(np.max(noise)))

    def merge(self, other: SummaryPart) -> SummaryPart:
        def pick(a, b, best):
            return a if b is None else b if a is None else best(a, b)
        return SummaryPart(self.moments.merge(other.moments), np.minimum(self.low, other.low),
                           np.maximum(self.high, other.high),
                           pick(self.noise_min, other.noise_min, min),
                           pick(self.noise_max, other.noise_max, max))

    def summary(self) -> DataSummary:
        """The :class:`DataSummary`. A constant column (min = max) gets its value as mean and
        std exactly 0, which the rounding of a mean of equal values would otherwise miss."""
        mean, std = self.moments.mean_and_std()
        constant = self.low == self.high
        mean, std = np.where(constant, self.low, mean), np.where(constant, 0.0, std)
        return DataSummary(self.moments.count, _frozen(self.low[:-1]), _frozen(self.high[:-1]),
                           _frozen(mean[:-1]), _frozen(std[:-1]), float(mean[-1]),
                           float(std[-1]), self.noise_min, self.noise_max,
                           float(self.low[-1]), float(self.high[-1]))


def _summarize(chunks: Iterable[Chunk]) -> DataSummary:
    """One pass: the :class:`SummaryPart` of each chunk, merged pairwise, as a binary counter
    (a stack holds at most one partial result per level: O(log chunks) of them), so rounding
    grows with the log of the number of chunks, as in numpy's pairwise sum, not with the
    number (docs/data-sources.md, "Pairwise order")."""
    partials: list[tuple[int, SummaryPart]] = []     # (level, summary of 2^level chunks)
    for chunk in chunks:
        level, part = 0, SummaryPart.of(chunk)
        while partials and partials[-1][0] == level:
            part, level = partials.pop()[1].merge(part), level + 1
        partials.append((level, part))
    if not partials:
        raise ValueError("the data source is empty (no chunk)")
    part = partials.pop()[1]
    while partials:
        part = partials.pop()[1].merge(part)
    return part.summary()


def _frozen(values: np.ndarray) -> np.ndarray:
    values = np.array(values, dtype=np.float64)
    values.flags.writeable = False
    return values
