"""``scalegp demo``: a GP fitted to the embedded East Africa relief map, drawn side by side.

Train on a random subsample of the 82,800-point ETOPO5 crop, learn the hyperparameters of an
anisotropic Matern-5/2 kernel, test on held-out grid points, then predict the whole grid and
write a PNG with the data, the predicted mean and the predicted standard deviation.
"""

from __future__ import annotations

import time

import numpy as np

from .datasets import load_east_africa_relief
from .metrics import nlpd, rmse

#: Width and height of the demo figure in pixels.
FIGURE_PIXELS = (1500, 500)
N_TEST = 5000


#: Length-scale box (degrees) of the demo's Matern kernel: 2,048 Gauss-Legendre features over
#: the 23 x 25 degree map reproduce the prior variance to within 10 % from 1.2 to 5 degrees
#: (``GaussLegendreFeatures.captured_mass``); shorter scales need more features (the map
#: warns), longer ones leave the spectral peak between the nodes.
LENGTH_SCALE_BOUNDS = (1.2, 5.0)


def run_demo(*, subsample: int = 20000, n_components: int = 2048, approximation: str = "glf",
             out="scalegp-demo.png", seed: int = 0, log=print) -> dict:
    """Fit, evaluate and draw; returns the metrics and timings that were printed."""
    from . import kernels
    from .estimator import LowRankGPRegressor

    relief = load_east_africa_relief()
    n = len(relief.y)
    if not 2 <= subsample <= n - N_TEST:
        raise ValueError(f"subsample must be between 2 and {n - N_TEST}, got {subsample}")
    rows = np.random.default_rng(seed).permutation(n)
    train, test = rows[N_TEST:N_TEST + subsample], rows[:N_TEST]
    y_km = relief.y / 1000.0
    kernel = kernels.Matern(nu=2.5, length_scale=[2.0, 2.0],
                            length_scale_bounds=LENGTH_SCALE_BOUNDS, variance_bounds=(0.05, 50.0))
    model = LowRankGPRegressor(approximation=approximation, n_components=n_components,
                               kernel=kernel, noise_variance=0.05,
                               noise_variance_bounds=(1e-4, 10.0), normalize_y=True,
                               random_state=seed)
    start = time.perf_counter()
    model.fit(relief.X[train], y_km[train])
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mean, std = model.predict(relief.X[test], return_std=True, include_noise=True)
    predict_seconds = time.perf_counter() - start
    results = {
        "n_train": len(train), "n_test": len(test),
        "rmse_m": 1000.0 * rmse(y_km[test], mean),
        "nlpd_km": nlpd(y_km[test], mean, std**2),
        "fit_seconds": fit_seconds, "predict_seconds": predict_seconds,
    }
    log(f"East Africa relief (ETOPO5, {n} grid points): {approximation} with "
        f"{n_components} components, {len(train)} training / {len(test)} test points")
    log(f"learned kernel {model.kernel_}, noise variance {model.noise_variance_:.4g}")
    log(f"test RMSE {results['rmse_m']:.1f} m, NLPD {results['nlpd_km']:.3f} (in km), "
        f"fit {fit_seconds:.2f} s, predict {predict_seconds:.3f} s for {len(test)} points")
    grid_mean, grid_std = model.predict(relief.X, return_std=True)
    _draw(relief, y_km, grid_mean, grid_std, train, out)
    log(f"wrote {out}")
    return results


def _draw(relief, y_km, grid_mean, grid_std, train, out) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shape = relief.grid_shape
    lon, lat = relief.X[:, 0], relief.X[:, 1]
    extent = (lon.min(), lon.max(), lat.min(), lat.max())
    dpi = 100
    fig, axes = plt.subplots(1, 3, figsize=(FIGURE_PIXELS[0] / dpi, FIGURE_PIXELS[1] / dpi),
                             dpi=dpi, constrained_layout=True)
    limits = dict(vmin=float(y_km.min()), vmax=float(y_km.max()))
    panels = [(y_km, "data: elevation (km)", "terrain", limits),
              (grid_mean, "predicted mean (km)", "terrain", limits),
              (grid_std, "predicted std (km)", "magma",     # edges would set the scale
               dict(vmin=float(np.percentile(grid_std, 1)),
                    vmax=float(np.percentile(grid_std, 99))))]
    for axis, (values, title, cmap, scale) in zip(axes, panels):
        image = axis.imshow(values.reshape(shape), origin="lower", extent=extent, cmap=cmap,
                            aspect="auto", **scale)
        axis.set_title(title)
        axis.set_xlabel("longitude (deg E)")
        fig.colorbar(image, ax=axis, shrink=0.85)
    axes[0].set_ylabel("latitude (deg N)")
    axes[0].plot(lon[train[:2000]], lat[train[:2000]], ",", color="k", alpha=0.3)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
