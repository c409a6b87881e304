"""
A fit on a Dask cluster
=======================

Every pass over the data (the summary, the statistics, the gradient) is a sum over row
blocks, so on a Dask collection each block's share is computed on the worker holding it and
the shares are added in a tree, in block order (docs/distributed.md). The estimator takes Dask
arrays directly. Here a ``LocalCluster`` of two threads stands in for a real cluster; the
fit equals the in-memory fit on the same rows to rounding.
"""

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

import scalegp as sg
from scalegp import plot

rng = np.random.default_rng(0)
X = rng.uniform(-3, 3, size=(100_000, 2))
y = np.sin(2 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(len(X))

# the length-scale box Theta the Gauss-Legendre rule is built for (docs/gauss-legendre.md)
kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.4, 2.0),
                     variance_bounds=(0.1, 100.0))
options = dict(approximation=sg.Features("glf", n_components=1024), kernel=kernel,
               noise_variance=0.01, noise_variance_bounds=(1e-4, 1.0), normalize_X=False)

with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                  dashboard_address=None) as cluster, Client(cluster):
    X_dask = da.from_array(X, chunks=(25_000, 2))      # four row blocks
    y_dask = da.from_array(y, chunks=25_000)
    on_dask = sg.LowRankGPRegressor(**options).fit(X_dask, y_dask)

in_memory = sg.LowRankGPRegressor(**options).fit(X, y)
X_test = rng.uniform(-3, 3, size=(1_000, 2))
print(f"length scales on Dask {np.round(on_dask.kernel_.length_scale, 6)}, "
      f"in memory {np.round(in_memory.kernel_.length_scale, 6)}")
print("largest difference of the predictions: "
      f"{np.abs(on_dask.predict(X_test) - in_memory.predict(X_test)).max():.1e}")

# %%
# The standard deviation of the Dask-fitted model: flat inside the data, growing outside.
grid = np.linspace(-4, 4, 80)
fig, ax = plt.subplots(figsize=(5.5, 4.5), layout="constrained")
plot.plot_map(on_dask, grid, grid, what="std", ax=ax)
ax.set_title("predictive std of the model fitted on Dask")
plt.show()
