"""The training data of a fit: arrays in memory, or a data source streamed chunk by chunk.

``fit`` standardizes the data, builds the feature map, runs the objective, checks a few
predictions and keeps what ``log_marginal_likelihood(theta)`` needs, through one interface
with two kinds: :class:`InMemoryData` (arrays, as scikit-learn passes them) and
:class:`StreamedData` (a :class:`scalegp.data.base.DataSource`, whose rows are never held: the
standardization comes from its one-pass summary, and the map is built from the summary's
bounding box; docs/data-sources.md, "Fitting from a source"). Both give the same floats to
the engine, so a streamed fit equals the in-memory fit on the same rows.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._validation import check_dtype, check_noise_variances
from ..data.base import ArraySource, DataSource, DistributedSource
from ..data.sources import PassReporter, rows_among, standardized
from ..engine.noise import noise_only_log_marginal_likelihood


def probe_indices(n_samples: int, count: int) -> np.ndarray:
    """``count`` evenly spaced rows of ``n_samples`` (all when fewer), where ``fit`` checks
    that its predictions are finite."""
    return np.linspace(0, n_samples - 1, min(n_samples, count)).astype(int)


def _standardization(summary, kernel, normalize_X: bool, normalize_y: bool, n_dims: int):
    """(X location, X scale, y mean, y std): the summary's, or 0 / 1 where not asked."""
    X_mean, X_scale = np.zeros(n_dims), np.ones(n_dims)
    if normalize_X:
        # a kernel of x + z (not shift-invariant) needs x >= 0: scale only, no centring
        X_mean, X_scale = summary.X_standardization(center=kernel.shift_invariant)
    y_mean, y_std = 0.0, 1.0
    if normalize_y:                    # constant targets: centre only (std 1)
        y_mean, y_std = summary.y_standardization()
    return X_mean, X_scale, y_mean, y_std


def repeated_records(X, y) -> int:
    """Rows whose inputs and target both equal an earlier row's, exactly."""
    records = np.column_stack([X, y]) + 0.0                  # -0.0 -> 0.0
    return int(records.shape[0] - np.unique(records, axis=0).shape[0])


class InMemoryData:
    """Validated arrays X (n, d) and y (n,), standardized as asked."""

    def __init__(self, X, y, kernel, normalize_X, normalize_y, sample_noise_variance,
                 progress):
        # the one-pass summary of the data (bounding box, means, stds; docs/data-sources.md)
        summary = ArraySource(X, y).summary() if normalize_X or normalize_y else None
        self.X_mean, self.X_scale, self.y_mean, self.y_std = _standardization(
            summary, kernel, normalize_X, normalize_y, X.shape[1])
        self.X = (X - self.X_mean) / self.X_scale
        self.y = (y - self.y_mean) / self.y_std
        self.sample_noise_variance = (None if sample_noise_variance is None else
                               check_noise_variances(sample_noise_variance, X.shape[0])
                               / self.y_std**2)
        self.progress = progress
        self.build_inputs = self.X
        self.n_samples = X.shape[0]
        self.largest_abs_y = float(np.max(np.abs(y)))

    def stage(self, name: str) -> None:
        """What the next passes are for (shown by a streamed fit's progress only)."""

    def rows(self, indices) -> np.ndarray:
        """The standardized training inputs at ``indices``."""
        return self.X[indices]

    def noise_only_log_marginal_likelihood(self) -> float:
        return noise_only_log_marginal_likelihood(self.y)

    def kept(self):
        """(X, y, noise variances) for ``log_marginal_likelihood(theta)`` after the fit."""
        return self.X, self.y, self.sample_noise_variance


class StreamedData:
    """A data source, read by passes, standardized chunk by chunk.

    Memory: a chunk at a time; the map is built on the two corners of the standardized
    bounding box (exact: x -> (x - a) / s is monotone in floating point, so the box of the
    standardized rows is the standardized box), with n from the summary. ``progress`` sees
    every pass, named by :meth:`stage` (:class:`scalegp.data.sources.PassReporter`).
    """

    def __init__(self, source: DataSource, kernel, normalize_X, normalize_y, progress, *,
                 dtype=None, probe_rows: int = 0):
        dtype = check_dtype(dtype)
        # a distributed source's chunks are on its workers: no pass to report from here
        self._distributed = isinstance(source, DistributedSource)
        reported = progress is not None and not self._distributed
        self._reporter = PassReporter(source, progress) if reported else None
        read = source if self._reporter is None else self._reporter
        self.summary = summary = read.summary()
        self.X_mean, self.X_scale, self.y_mean, self.y_std = _standardization(
            summary, kernel, normalize_X, normalize_y, source.n_dims)
        standardization = (self.X_mean, self.X_scale, self.y_mean, self.y_std)
        self.X = standardized(read, *standardization, dtype=dtype)
        self._kept = standardized(source, *standardization, dtype=dtype)
        self.y = self.sample_noise_variance = self.progress = None
        self.build_inputs = (np.vstack([summary.X_min, summary.X_max]) - self.X_mean) \
            / self.X_scale
        self.n_samples = summary.n_samples
        self.largest_abs_y = max(abs(summary.y_min), abs(summary.y_max))
        # the fit's first pass after the summary picks the rows its predictions are probed at
        self._probe = probe_indices(self.n_samples, probe_rows)
        self.X.pick_rows(self._probe)

    def stage(self, name: str) -> None:
        if self._reporter is not None:
            self._reporter.stage = name

    def rows(self, indices) -> np.ndarray:
        """The standardized inputs at the sorted ``indices``: those picked by the fit's first
        pass after the summary (the probe rows), or gathered in a pass of their own."""
        indices = np.asarray(indices)
        if self.X.picked is not None and np.array_equal(indices, self._probe):
            return self.X.picked
        if self._distributed:
            return self.X.map_reduce(functools.partial(rows_among, indices)).X
        picked = []
        for chunk in self.X.chunks(max(1, min(self.n_samples, 2**16))):
            inside = indices[(indices >= chunk.start) & (indices < chunk.stop)]
            picked.append(np.asarray(chunk.X[inside - chunk.start], dtype=np.float64))
        return np.vstack(picked)

    def noise_only_log_marginal_likelihood(self) -> float:
        """The in-memory value from the summary: with u = (y - y_mean) / y_std,
        mean(u^2) = (std(y)^2 + (mean(y) - y_mean)^2) / y_std^2, and log mean(u^2) =
        2 log hypot(std(y), mean(y) - y_mean) - 2 log y_std (hypot: no overflow)."""
        spread = math.hypot(self.summary.y_std, self.summary.y_mean - self.y_mean)
        if spread == 0:
            return math.inf
        log_s2 = 2 * math.log(spread) - 2 * math.log(self.y_std)
        return -0.5 * self.n_samples * (math.log(2 * math.pi) + log_s2 + 1.0)

    def kept(self):
        return self._kept, None, None


class Staged:
    """An objective that names each of its evaluations as a stage ("learning evaluation K")
    before it runs, so the passes it makes are reported by name; everything else is the
    objective's own."""

    def __init__(self, objective, stage):
        self._objective, self._stage = objective, stage
        self._evaluations = 0

    def __call__(self, theta):
        self._evaluations += 1
        self._stage(f"learning evaluation {self._evaluations}")
        return self._objective(theta)

    def value(self, theta):
        self._evaluations += 1
        self._stage(f"learning evaluation {self._evaluations}")
        return self._objective.value(theta)

    def __getattr__(self, name):
        return getattr(self._objective, name)
