"""
The Vecchia approximation on the relief map
===========================================

:class:`scalegp.VecchiaGPRegressor` approximates the GP likelihood by conditioning each point,
in a maximin ordering, on its m nearest previous points (:mod:`scalegp.vecchia`). This example
fits it on a subsample of the relief map at fixed hyperparameters for three m, against the
exact GP on the same points, then learns the hyperparameters with m = 30.
"""

import time

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp.datasets import load_east_africa_relief

relief = load_east_africa_relief(subsample=3_000, random_state=1)
X = (relief.X - relief.X.mean(axis=0)) / relief.X.std(axis=0)
y = (relief.y - relief.y.mean()) / relief.y.std()
X_train, y_train, X_test, y_test = X[:2_500], y[:2_500], X[2_500:], y[2_500:]

kernel = sg.Matern(nu=2.5, length_scale=[0.3, 0.3])
noise = 0.01
exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=noise,
                            optimize=False).fit(X_train, y_train)
exact_mean = exact.predict(X_test)
for m in (5, 15, 30):
    gp = sg.VecchiaGPRegressor(kernel=kernel, noise_variance=noise, n_neighbors=m,
                               optimize=False).fit(X_train, y_train)
    mean = gp.predict(X_test)
    rmse = np.sqrt(np.mean((mean - y_test) ** 2))
    print(f"Vecchia, m = {m:2d}: test RMSE {rmse:.4f} (standardised); "
          f"max |mean - exact mean| {np.abs(mean - exact_mean).max():.4f}; log likelihood "
          f"{gp.log_marginal_likelihood_value_:.1f} (exact "
          f"{exact.log_marginal_likelihood_value_:.1f})")
print(f"exact GP:       test RMSE {np.sqrt(np.mean((exact_mean - y_test) ** 2)):.4f}")

# %%
# Learning the hyperparameters with m = 30 (scaled Vecchia: the neighbour sets are rebuilt
# if the learned length scales change shape).
start = time.perf_counter()
learned = sg.VecchiaGPRegressor(kernel=kernel, noise_variance=noise,
                                n_neighbors=30).fit(X_train, y_train)
print(f"learned in {time.perf_counter() - start:.1f} s: {learned.kernel_}, noise variance "
      f"{learned.noise_variance_:.3g}, {learned.n_structures_} structure(s); test RMSE "
      f"{np.sqrt(np.mean((learned.predict(X_test) - y_test) ** 2)):.4f}")

# %%
# Test predictions of the m = 30 model at fixed hyperparameters against the exact GP's.
fig, ax = plt.subplots(figsize=(4.5, 4.5), layout="constrained")
ax.scatter(exact_mean, gp.predict(X_test), s=6)
ax.axline((0, 0), slope=1, color="grey", lw=1)
ax.set_xlabel("exact GP mean")
ax.set_ylabel("Vecchia mean, m = 30")
plt.show()
