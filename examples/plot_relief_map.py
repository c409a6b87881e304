"""
The East Africa relief map
==========================

The embedded relief map (elevation in metres over longitude and latitude) fitted with
Gauss-Legendre features, and the predictive mean and standard deviation drawn over a grid
finer than the data. The mean shows the relief the model resolves; the standard deviation
shows where it is unsure: it grows over the region held out whole (a 1 x 1 degree square
without training points) and stays near the noise level elsewhere.

The demo (``scalegp demo``) fits all 77,800 training points with a neighbourhood-local
model; this example subsamples 6,000 points so that it runs in seconds.
"""

import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.datasets import load_east_africa_relief

relief = load_east_africa_relief(subsample=8_000, random_state=0)
X, y = relief.X, relief.y
print(f"{len(y)} points; inputs {relief.feature_names}; target {relief.target_name}")

# hold out a square whole, to see the uncertainty where there are no data
centre = np.median(X, axis=0)
held_out = np.all(np.abs(X - centre) < 0.5, axis=1)
X_train, y_train = X[~held_out][:6_000], y[~held_out][:6_000]

kernel = sg.Matern(nu=2.5, length_scale=[1.0, 1.0], length_scale_bounds=(0.05, 10.0))
model = sg.LowRankGPRegressor(approximation="glf", n_components=1024, kernel=kernel,
                              normalize_X=True, normalize_y=True, random_state=0)
model.fit(X_train, y_train)
rmse = np.sqrt(np.mean((model.predict(X[held_out]) - y[held_out]) ** 2))
print(f"learned length scales (standardised): {np.round(model.kernel_.length_scale, 3)}")
print(f"RMSE on the {held_out.sum()} held-out points of the square: {rmse:.0f} m")

# %%
# Mean and standard deviation on a 120 x 120 grid over the map; the square is outlined.
lon = np.linspace(X[:, 0].min(), X[:, 0].max(), 120)
lat = np.linspace(X[:, 1].min(), X[:, 1].max(), 120)
fig, (ax_mean, ax_std) = plot.new_figure(1, 2, figsize=(11, 4.5), layout="constrained")
plot.plot_map(model, lon, lat, what="mean", ax=ax_mean, cmap="terrain")
plot.plot_map(model, lon, lat, what="std", ax=ax_std, X_train=X_train[::10])
for ax in (ax_mean, ax_std):
    ax.plot(centre[0] + 0.5 * np.array([-1, 1, 1, -1, -1]),
            centre[1] + 0.5 * np.array([-1, -1, 1, 1, -1]), color="red", lw=1.5)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
ax_mean.set_title("predictive mean (m)")
ax_std.set_title("predictive std (m); every 10th training point")
fig
