"""Figures of a fitted GP: predictions with bands, maps, calibration, learned length scales,
the learning curve of the hyperparameters.

Matplotlib is imported only when a function here is called (the ``plot`` extra), and nothing
here switches its backend: with ``ax=None`` a function draws on a new figure from
``matplotlib.pyplot.subplots`` (so figures show inline in a notebook and in interactive
sessions), and :func:`new_figure` makes a figure that belongs to no pyplot state (what the
command line and the experiments use to write files: ``fig.savefig(path)``).

Each plotting function returns the Axes it drew on, as scikit-learn's ``*Display`` classes
expose ``ax_``. Intervals are central: for a Gaussian predictive, mean +- z_{(1+p)/2} std;
for a model with its own ``predict_interval`` (the Gibbs estimator's mixture over draws), its
equal-tailed interval.
"""

from __future__ import annotations

import numpy as np

from ._validation import check_level
from .metrics import central_interval

__all__ = ["new_figure", "plot_prediction", "plot_map", "plot_calibration",
           "plot_length_scales", "plot_learning_curve", "interval_coverage"]


def _axes(ax):
    """``ax``, or the Axes of a new pyplot figure."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt
    return plt.subplots()[1]


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize=None, dpi=None, layout=None,
               **subplots_kw):
    """(figure, axes) as ``pyplot.subplots`` returns them, of a Figure outside pyplot: no
    backend is selected or switched, and the figure is freed with its last reference
    (``figure.savefig`` writes it). ``layout``: None, "constrained" or "tight"."""
    from matplotlib.figure import Figure
    figure = Figure(figsize=figsize, dpi=dpi, layout=layout)
    return figure, figure.subplots(nrows, ncols, **subplots_kw)


def _interval(estimator, X, level: float, include_noise: bool):
    """(mean, lower, upper) of the central ``level`` predictive interval at X."""
    check_level(level)
    if hasattr(estimator, "predict_interval"):
        mean = estimator.predict(X)
        lower, upper = estimator.predict_interval(X, level, include_noise=include_noise)
        return mean, lower, upper
    mean, std = estimator.predict(X, return_std=True, include_noise=include_noise)
    return (mean, *central_interval(mean, std, level))


def plot_prediction(estimator, X, *, X_train=None, y_train=None, level: float = 0.95,
                    include_noise: bool = False, ax=None):
    """The predictive mean over one input and its central ``level`` band, with the training
    data as points.

    Parameters
    ----------
    estimator : fitted regressor with ``predict(X, return_std=True)``
    X : array of shape (n, 1)
        Where to draw the prediction (sorted here).
    X_train, y_train : arrays, optional
        Observations to show as points.
    level : float in (0, 1)
        Coverage of the band (0.95: mean +- 1.96 std).
    include_noise : bool
        Band of a new observation (latent std plus the noise) instead of the latent function.
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : the Axes drawn on
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[1] != 1:
        raise ValueError(f"plot_prediction draws one input: X must have shape (n, 1), got "
                         f"{X.shape}; use plot_map for two inputs")
    X = X[np.argsort(X[:, 0], kind="stable")]
    mean, lower, upper = _interval(estimator, X, level, include_noise)
    ax = _axes(ax)
    what = "observation" if include_noise else "latent"
    ax.fill_between(X[:, 0], lower, upper, alpha=0.3, color="C0", linewidth=0,
                    label=f"{100 * level:g} % {what} interval")
    ax.plot(X[:, 0], mean, color="C0", label="predictive mean")
    if X_train is not None and y_train is not None:
        ax.scatter(np.asarray(X_train, dtype=float)[:, 0], y_train, s=8, color="k",
                   label="training data", zorder=3)
    ax.set(xlabel="x", ylabel="y")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_map(estimator, x, y, *, what: str = "mean", include_noise: bool = False,
             X_train=None, cmap=None, ax=None):
    """A map of the predictive mean or std over the grid ``x`` by ``y`` (two inputs), with a
    colour bar; training inputs, if given, as small points (where the std is low).

    Parameters
    ----------
    estimator : fitted regressor on two inputs
    x, y : 1-D arrays
        The grid's axes: the map predicts at every (x_i, y_j), row-wise in y.
    what : {"mean", "std"}
    include_noise : bool
        The std of a new observation instead of the latent function's (``what="std"``).
    X_train : array of shape (n, 2), optional
    cmap : matplotlib colormap name, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    ax : the Axes drawn on
    """
    if what not in ("mean", "std"):
        raise ValueError(f"what must be 'mean' or 'std', got {what!r}")
    x, y = (np.asarray(axis, dtype=float) for axis in (x, y))
    if x.ndim != 1 or y.ndim != 1 or x.size < 2 or y.size < 2:
        raise ValueError("x and y must be 1-D grid axes of at least 2 points each")
    grid = np.column_stack([np.tile(x, y.size), np.repeat(y, x.size)])
    if what == "mean":
        values = estimator.predict(grid)
    else:
        values = estimator.predict(grid, return_std=True, include_noise=include_noise)[1]
    ax = _axes(ax)
    image = ax.pcolormesh(x, y, values.reshape(y.size, x.size), shading="auto",
                          cmap=cmap or ("viridis" if what == "mean" else "magma"))
    ax.figure.colorbar(image, ax=ax, label=f"predictive {what}")
    if X_train is not None:
        X_train = np.asarray(X_train, dtype=float)
        ax.scatter(X_train[:, 0], X_train[:, 1], s=1, color="w", alpha=0.5, linewidths=0)
    ax.set(xlabel="x1", ylabel="x2", xlim=(x.min(), x.max()), ylim=(y.min(), y.max()))
    return ax


def interval_coverage(estimator, X, y, levels, *, include_noise: bool = True) -> np.ndarray:
    """The fraction of the targets y inside the central predictive interval at each level
    (observations: the noise included by default). A calibrated model's coverage equals
    the level up to the binomial spread sqrt(p (1 - p) / n)."""
    y = np.asarray(y, dtype=float)
    coverage = []
    for level in levels:
        _, lower, upper = _interval(estimator, X, float(level), include_noise)
        coverage.append(float(np.mean((lower <= y) & (y <= upper))))
    return np.array(coverage)


def plot_calibration(estimator, X, y, *, levels=None, include_noise: bool = True, ax=None):
    """Coverage of the central predictive intervals against their level, on held-out data:
    on the diagonal for a calibrated model, below it for an overconfident one. The grey band
    is +- 2 binomial standard deviations around the diagonal (sqrt(p (1 - p) / n)).

    Returns
    -------
    ax : the Axes drawn on
    """
    levels = np.linspace(0.05, 0.95, 19) if levels is None else np.asarray(levels, float)
    n = np.asarray(y).size
    coverage = interval_coverage(estimator, X, y, levels, include_noise=include_noise)
    ax = _axes(ax)
    spread = 2.0 * np.sqrt(levels * (1.0 - levels) / max(n, 1))
    ax.fill_between(levels, levels - spread, levels + spread, color="0.85", linewidth=0,
                    label="calibrated +- 2 sd")
    ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=1)
    ax.plot(levels, coverage, "o-", color="C3", label=f"observed ({n} points)")
    ax.set(xlabel="nominal level of the central interval", ylabel="observed coverage",
           xlim=(0, 1), ylim=(0, 1), aspect="equal")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def plot_length_scales(estimator, *, feature_names=None, ax=None):
    """The learned length scale of each input (log scale) between its bounds. With
    ``normalize_X`` they are in standard deviations of each input, as the estimator learns
    them.

    Returns
    -------
    ax : the Axes drawn on
    """
    kernel = estimator.kernel_
    scales = np.broadcast_to(np.asarray(kernel.length_scale, dtype=float),
                             (estimator.n_features_in_,))
    names = (list(feature_names) if feature_names is not None
             else list(getattr(estimator, "feature_names_in_",
                               [f"x{j}" for j in range(scales.size)])))
    if len(names) != scales.size:
        raise ValueError(f"feature_names has {len(names)} names for {scales.size} inputs")
    ax = _axes(ax)
    positions = np.arange(scales.size)
    bounds = kernel.length_scale_bounds
    if bounds != "fixed":
        low, high = bounds
        ax.axhspan(low, high, color="0.92", zorder=0, label="bounds")
        on_bound = np.isclose(scales, low) | np.isclose(scales, high)
    else:
        on_bound = np.zeros(scales.size, dtype=bool)
    ax.scatter(positions[~on_bound], scales[~on_bound], color="C0", zorder=3,
               label="learned")
    if on_bound.any():
        ax.scatter(positions[on_bound], scales[on_bound], color="C3", marker="x", zorder=3,
                   label="on a bound")
    ax.set_yscale("log")
    ax.set_xticks(positions, names, rotation=45 if scales.size > 6 else 0)
    unit = " (standard deviations)" if getattr(estimator, "normalize_X", False) else ""
    ax.set(ylabel=f"length scale{unit}")
    ax.legend(loc="best", fontsize="small")
    return ax


def plot_learning_curve(estimator, *, ax=None):
    """The objective maximized by ``fit`` against the L-BFGS-B iteration: one line per start
    (``n_restarts`` + 1), from ``estimator.optimization_result_.history``
    (:attr:`scalegp.inference.optimize.OptimizationResult.history`: the log marginal
    likelihood at the start and after each iteration; the runs in a widened box and the
    learned Nystrom knots continue the curve of the start they began from), and the learned
    value as a dotted line. With ``normalize_y`` the objective is that of the normalized
    targets, as ``log_marginal_likelihood_value_``.

    Raises ValueError for an estimator that learned nothing (``optimize=False``, a loaded
    model, all parameters fixed, the Gibbs sampler).

    Returns
    -------
    ax : the Axes drawn on
    """
    result = getattr(estimator, "optimization_result_", None)
    history = getattr(result, "history", ())
    if result is None or not any(len(curve) for curve in history):
        raise ValueError(
            f"{type(estimator).__name__} has no learning curve: it learned no "
            "hyperparameters (fit with optimize=True; a model read from a file keeps none)")
    ax = _axes(ax)
    for start, curve in enumerate(history):
        curve = np.asarray(curve, dtype=float)
        ax.plot(np.arange(curve.size), curve, marker=".", markersize=4,
                label="start" if len(history) == 1 else f"start {start}")
    ax.axhline(result.log_marginal_likelihood, color="0.4", linestyle=":", linewidth=1,
               label=f"learned {result.log_marginal_likelihood:.6g}")
    targets = " (normalized targets)" if getattr(estimator, "normalize_y", False) else ""
    ax.set(xlabel="L-BFGS-B iteration", ylabel=f"log marginal likelihood{targets}")
    ax.legend(loc="lower right", fontsize="small")
    return ax
