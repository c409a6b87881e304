"""``scalegp predict --plot FILE.png``: a figure of a saved model's predictions for a table,
drawn with :mod:`scalegp.plot` on a figure of its own (:func:`scalegp.plot.new_figure`: no backend is switched).

What is drawn depends on the inputs (:func:`choose_plot`):

- one input: the predictive mean and its 95 % band over the range of the table's inputs
  (400 points), with the table's rows as points when it holds the model's target column;
- two inputs: maps of the predictive mean and std over the table's input box
  (:data:`MAP_POINTS` per axis), the table's inputs as points;
- more inputs: a calibration plot (coverage of the central intervals of new observations
  against their level) when the table holds the target column, else the learned length
  scales between their bounds.

At most :data:`PLOT_ROWS` rows of the table are drawn (every k-th row of a larger one, in
file order), read in a pass of their own after the predictions were written.
"""

from __future__ import annotations

import math

import numpy as np

from .._output import PNG_SUFFIXES, write_atomically
from ..data.sources import READ_ROWS
from .common import CommandError

#: Rows of the table drawn (points, and the calibration's held-out rows) at most.
PLOT_ROWS = 20_000
#: Grid points per axis of the 2-D maps.
MAP_POINTS = 150
#: Points of the 1-D prediction curve.
CURVE_POINTS = 400


def plot_rows(reader, columns, target_column, n_rows: int | None = None):
    """(X, y or None) of at most :data:`PLOT_ROWS` rows with finite values: every k-th row,
    k = ceil(n / PLOT_ROWS) (n: ``n_rows``, the rows the predictions counted, else the
    reader's), with the target column when the table has it."""
    target = (reader.columns.index(target_column)
              if reader.has_header and target_column in reader.columns else None)
    read = list(columns) + ([] if target is None else [target])
    n_rows = n_rows or reader.n_rows
    stride = 1 if not n_rows else max(1, math.ceil(n_rows / PLOT_ROWS))
    kept = []
    for start, values in reader.blocks(READ_ROWS, read):
        first = (-start) % stride
        values = values[first::stride]
        kept.append(values[np.isfinite(values).all(axis=1)])
    rows = np.vstack(kept) if kept else np.empty((0, len(read)))
    if rows.shape[0] > PLOT_ROWS:
        rows = rows[np.linspace(0, rows.shape[0] - 1, PLOT_ROWS).astype(int)]
    if target is None:
        return rows, None
    return rows[:, :-1], rows[:, -1]


def choose_plot(n_dims: int, has_targets: bool) -> str:
    """"prediction", "map", "calibration" or "length scales" (module docstring)."""
    if n_dims == 1:
        return "prediction"
    if n_dims == 2:
        return "map"
    return "calibration" if has_targets else "length scales"


def draw(model, X, y, *, include_noise: bool, input_names, target_name, variance=None):
    """(figure, kind): the figure of :func:`choose_plot` for the rows X (and targets y)."""
    from ..plot import (new_figure, plot_calibration, plot_length_scales, plot_map,
                        plot_prediction)
    if X.shape[0] == 0:
        raise CommandError("--plot: the table has no row with finite values to draw")
    kind = choose_plot(X.shape[1], y is not None)
    predictor = _Predictor(model, variance or {})
    if kind == "prediction":
        fig, ax = new_figure(figsize=(7, 4.5), layout="constrained")
        low, high = float(X[:, 0].min()), float(X[:, 0].max())
        pad = 0.02 * (high - low) if high > low else 1.0
        grid = np.linspace(low - pad, high + pad, CURVE_POINTS)[:, None]
        plot_prediction(predictor, grid, X_train=X if y is not None else None, y_train=y,
                        include_noise=include_noise, ax=ax)
        ax.set(xlabel=input_names[0], ylabel=target_name)
        if y is not None:               # the table's rows, which need not be training rows
            ax.collections[1].set_label("rows of the table")
            ax.legend(loc="best", fontsize="small")
    elif kind == "map":
        fig, axes = new_figure(1, 2, figsize=(12, 4.8), layout="constrained")
        x1, x2 = (np.linspace(X[:, j].min(), X[:, j].max(), MAP_POINTS) for j in range(2))
        if x1[0] == x1[-1] or x2[0] == x2[-1]:
            raise CommandError("--plot: the table's inputs span no area (one input is "
                               "constant); a map needs two varying inputs")
        for ax, what in zip(axes, ("mean", "std")):
            plot_map(predictor, x1, x2, what=what, include_noise=include_noise,
                     X_train=X, ax=ax)
            ax.set(xlabel=input_names[0], ylabel=input_names[1], title=f"predictive {what}")
    elif kind == "calibration":
        fig, ax = new_figure(figsize=(5.5, 5.5), layout="constrained")
        plot_calibration(predictor, X, y, ax=ax)
    else:
        if not hasattr(getattr(model, "kernel_", None), "length_scale"):
            raise CommandError(f"--plot: {X.shape[1]} inputs and no target column to "
                               "calibrate against, and the model has no length scales to "
                               "show; give a table with the target column")
        fig, ax = new_figure(figsize=(max(5.0, 0.5 * X.shape[1] + 2), 4.5),
                             layout="constrained")
        plot_length_scales(model, feature_names=input_names, ax=ax)
    return fig, kind


def write_figure(fig, path, inputs) -> None:
    write_atomically(path, lambda file: fig.savefig(file, dpi=110, format="png"),
                     suffixes=PNG_SUFFIXES, what="--plot", inputs=inputs)


class _Predictor:
    """The model's ``predict`` with the command's variance option (``--diag-correction``)."""

    def __init__(self, model, variance: dict):
        self.model, self.variance = model, variance
        if hasattr(model, "predict_interval"):
            self.predict_interval = model.predict_interval

    def predict(self, X, **kwargs):
        if kwargs.get("return_std"):
            kwargs.update(self.variance)
        return self.model.predict(X, **kwargs)
