"""
The East Africa relief map
==========================

The embedded relief map (elevation in metres over longitude and latitude) fitted with the
library's model for rough spatial fields, a neighbourhood-local model of exact GPs
(``local="neighbors"``): one exact GP per centre of an adaptive cover, each on its k nearest
training points, blended continuously over the nearest centres, with hyperparameters shared
and learned on a composite likelihood of random neighbourhoods. The mean and the standard
deviation are drawn over a grid finer than the training points; a 3 x 3 degree square is held
out whole, where the standard deviation shows what the model does not know.

The demo (``scalegp demo``) fits all 77,800 training points with k = 300 (test RMSE 50 m on
scattered held-out points); this example uses 10,000 points and k = 100 so that it runs in
seconds.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.datasets import load_east_africa_relief
from scalegp.estimators.configuration import Neighbors

relief = load_east_africa_relief(subsample=10_000, random_state=0)
X, y = relief.X, relief.y
print(f"{len(y)} points; inputs {relief.feature_names}; target {relief.target_name}")

centre = np.median(X, axis=0)
held_out = np.all(np.abs(X - centre) < 1.5, axis=1)
X_train, y_train = X[~held_out], y[~held_out]

model = sg.LowRankGPRegressor(approximation="exact", kernel="matern52",
                              local=Neighbors(n_neighbors=100, learning_centers=16),
                              normalize_X=True, normalize_y=True, random_state=0)
model.fit(X_train, y_train)
rmse = np.sqrt(np.mean((model.predict(X[held_out]) - y[held_out]) ** 2))
print(f"{len(y_train)} training points, {model.n_centres_} centres; test RMSE on the "
      f"{held_out.sum()} points of the held-out square: {rmse:.0f} m")

# %%
# Mean and standard deviation on a 150 x 150 grid; the held-out square is outlined in red.
lon = np.linspace(X[:, 0].min(), X[:, 0].max(), 150)
lat = np.linspace(X[:, 1].min(), X[:, 1].max(), 150)
fig, (ax_mean, ax_std) = plt.subplots(1, 2, figsize=(11, 4.5), layout="constrained")
plot.plot_map(model, lon, lat, what="mean", ax=ax_mean, cmap="terrain")
plot.plot_map(model, lon, lat, what="std", ax=ax_std)
for ax in (ax_mean, ax_std):
    ax.plot(centre[0] + 1.5 * np.array([-1, 1, 1, -1, -1]),
            centre[1] + 1.5 * np.array([-1, -1, 1, 1, -1]), color="red", lw=1.5)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
ax_mean.set_title("predictive mean (m)")
ax_std.set_title("predictive std (m)")
plt.show()
