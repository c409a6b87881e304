"""Values on a full tensor grid as a data source (docs/data-sources.md, "Gridded data").

Rasters (relief models, satellite images, climate fields) observe y at every cell of a grid
a_1 x ... x a_d. :class:`GridSource` is such a raster as an ordinary data source, its rows the
cells in row-major order (the last axis fastest), X_i = (a_1[t_1], ..., a_d[t_d]); every pass
of the engine can stream it (memory O(chunk d) for the coordinates). It also carries the grid
itself (:attr:`GridSource.grid`, a :class:`TensorGrid`), which a map with a tensor-product
basis uses to form its statistics Phi^T Phi and Phi^T y from per-axis sums instead of a pass
over the N = prod_j n_j cells: Gauss-Legendre features
(:meth:`scalegp.features.gauss_legendre.GaussLegendreFeatures.grid_basis_statistics`,
docs/gauss-legendre.md, section 2, "Statistics on a tensor grid"). The standardization of a fit
and the progress reporting pass the grid through (:meth:`TensorGrid.standardized`).

Every cell must have a finite value: a raster with missing cells is refused (pass its observed
cells as rows, e.g. an :class:`~scalegp.data.base.ArraySource`, to stream them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .._validation import check_dtype, check_positive_int
from .base import Chunk, DataSource, DataSummary


@dataclass(frozen=True, eq=False)
class TensorGrid:
    """Axes a_1..a_d (float64 vectors) and the values Y of shape (n_1, ..., n_d) (float64,
    C-ordered), all finite."""

    axes: tuple
    values: np.ndarray

    @property
    def n_samples(self) -> int:
        return int(self.values.size)

    def standardized(self, location, scale, y_location: float, y_scale: float) -> "TensorGrid":
        """The grid of the standardized rows: a_j -> (a_j - location_j) / scale_j and
        Y -> (Y - y_location) / y_scale, the same float64 operations as
        :class:`scalegp.data.sources.StandardizedSource` applies to each row."""
        location, scale = np.asarray(location, dtype=float), np.asarray(scale, dtype=float)
        axes = tuple((axis - location[j]) / scale[j] for j, axis in enumerate(self.axes))
        return TensorGrid(axes, (self.values - y_location) / y_scale)


class GridSource(DataSource):
    """y on every cell of the grid spanned by ``axes`` (their Cartesian product): ``values``
    has shape (len(axes[0]), ..., len(axes[d-1])), row ``i`` of the source is the cell
    ``np.unravel_index(i, values.shape)``.

    Axes are 1-D, non-empty and finite (any order; repeated coordinates are allowed and count
    as separate cells); values are finite. X is given in ``dtype`` (float64 unless float32 is
    asked), y in float64.
    """

    def __init__(self, axes, values, *, dtype=None):
        if isinstance(axes, np.ndarray) and axes.ndim == 1:
            axes = [axes]
        axes = tuple(_check_axis(axis, j) for j, axis in enumerate(axes))
        if not axes:
            raise ValueError("axes must hold at least one axis")
        shape = tuple(axis.size for axis in axes)
        try:
            values = np.array(values, dtype=np.float64, order="C")
        except (TypeError, ValueError) as error:
            raise ValueError(f"values must be numeric: {error}") from None
        if values.shape != shape:
            raise ValueError(f"values must have the axes' shape {shape}, got {values.shape}")
        bad = ~np.isfinite(values)
        if bad.any():
            cell = tuple(int(t) for t in np.unravel_index(int(np.flatnonzero(bad)[0]), shape))
            raise ValueError(
                f"values has {int(bad.sum())} NaN or inf cell(s), the first at {cell}: a grid "
                "source needs every cell; pass the observed cells as rows instead (an "
                "ArraySource or arrays X, y)")
        self.grid = TensorGrid(axes, values)
        self._dtype = check_dtype(dtype)

    @property
    def n_dims(self) -> int:
        return len(self.grid.axes)

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def n_samples(self) -> int:
        return self.grid.n_samples

    @property
    def has_sample_noise_variance(self) -> bool:
        return False

    def summary(self) -> DataSummary:
        """From the axes and values, no pass: each coordinate of axis j occurs
        N / n_j times, so column j's mean and population std are those of the axis."""
        if self._summary is None:
            axes, values = self.grid.axes, self.grid.values
            self._summary = DataSummary(
                n_samples=self.n_samples,
                X_min=np.array([axis.min() for axis in axes]),
                X_max=np.array([axis.max() for axis in axes]),
                # a constant axis gets its value and std 0 exactly, as the streamed summary
                X_mean=np.array([axis[0] if np.all(axis == axis[0]) else axis.mean()
                                 for axis in axes]),
                X_std=np.array([0.0 if np.all(axis == axis[0]) else axis.std()
                                for axis in axes]),
                y_mean=float(values.mean()), y_std=float(values.std()),
                sample_noise_variance_min=None, sample_noise_variance_max=None,
                y_min=float(values.min()), y_max=float(values.max()))
        return self._summary

    def chunks(self, rows: int) -> Iterator[Chunk]:
        rows = check_positive_int(rows, "rows")
        values = self.grid.values.reshape(-1)
        shape = self.grid.values.shape
        for start in range(0, values.size, rows):
            index = np.unravel_index(np.arange(start, min(start + rows, values.size)), shape)
            X = np.empty((index[0].size, self.n_dims), dtype=self._dtype)
            for j, axis in enumerate(self.grid.axes):
                X[:, j] = axis[index[j]]
            yield Chunk(X, values[start:start + X.shape[0]], None, start)


def _check_axis(axis, j: int) -> np.ndarray:
    try:
        axis = np.array(axis, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"axis {j} must be numeric: {error}") from None
    if axis.ndim != 1 or axis.size == 0:
        raise ValueError(f"axis {j} must be a non-empty 1-D array, got shape {axis.shape}")
    if not np.all(np.isfinite(axis)):
        raise ValueError(f"axis {j} contains NaN or inf")
    return axis
