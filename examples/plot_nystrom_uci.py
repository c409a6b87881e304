"""
Nystrom features with learned knots on a UCI set
================================================

Nystrom (predictive-process) features put the kernel's knots at m input points; with
``learn_knots`` the knot positions are learned together with the hyperparameters on Titsias'
variational bound (``objective="vfe"``). This example fits the concrete compressive strength
set (1,030 rows, 8 inputs; :func:`scalegp.datasets.fetch_uci` reads a local copy or
downloads it once into a cache, checked by its SHA-256) on its first fold: fixed knots
against learned ones, at m = 32, with one length scale per input. The learned knots stop
at ``learn_knots=30`` iterations of L-BFGS-B, before the optimizer converges (the
``ConvergenceWarning`` line says so): a budget, which already lowers the test RMSE and
raises the bound.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.datasets import fetch_uci

data = fetch_uci("concrete")
train, test = data.test_fold != 0, data.test_fold == 0
print(f"concrete: {len(data.y)} rows, {data.X.shape[1]} inputs; "
      f"{train.sum()} train / {test.sum()} test")

kernel = sg.Matern(nu=1.5, length_scale=np.ones(data.X.shape[1]))        # one scale per input
results = {}
for name, learn in (("fixed knots", 0), ("learned knots", 30)):
    model = sg.LowRankGPRegressor(sg.Nystrom(n_components=32, objective="vfe",
                                             learn_knots=learn),
                                  kernel=kernel, random_state=0)
    model.fit(data.X[train], data.y[train])
    mean = model.predict(data.X[test])
    rmse = np.sqrt(np.mean((mean - data.y[test]) ** 2))
    results[name] = model
    print(f"{name:14s} test RMSE {rmse:6.3f} MPa   "
          f"bound {model.log_marginal_likelihood_value_:9.2f}")

# %%
# The learned length scales of both fits, one per input, with the search box.
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, results.items()):
    plot.plot_length_scales(model, ax=ax)
    ax.set_title(name)
plt.show()
