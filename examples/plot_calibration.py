"""
Are the intervals calibrated?
=============================

A predictive distribution is calibrated when its central p-intervals hold a fraction p of
new observations. :func:`scalegp.plot.plot_calibration` draws that coverage on held-out data
against p. Three models of the same data: the exact GP on a subsample, Gauss-Legendre
features on all training points with learned hyperparameters, and the same model with its
noise variance set ten times too small, whose intervals are too narrow (its fit says that
it explains the data worse than white noise: the ``FitQualityWarning`` line).
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.estimators.configuration import make_approximation

rng = np.random.default_rng(2)
X = rng.uniform(-3, 3, size=(6_000, 2))
y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.standard_normal(len(X))
X_train, y_train, X_test, y_test = X[:5_000], y[:5_000], X[5_000:], y[5_000:]

# length scales in the units of x (normalize_X=False), in a box the 32 x 32 nodes resolve
kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.4, 2.0),
                     variance_bounds=(0.1, 10.0))
features = make_approximation("glf", n_components=1024)
exact = sg.ExactGPRegressor(kernel=kernel, normalize_X=False).fit(X_train[:600], y_train[:600])
glf = sg.LowRankGPRegressor(approximation=features, kernel=kernel, normalize_X=False,
                            noise_variance_bounds=(1e-4, 1.0)).fit(X_train, y_train)
overconfident = sg.LowRankGPRegressor(approximation=features, kernel=glf.kernel_,
                                      normalize_X=False,
                                      noise_variance=glf.noise_variance_ / 10,
                                      optimize=False).fit(X_train, y_train)
models = {"exact GP, 600 points": exact, "GLF, 5,000 points": glf,
          "GLF, noise variance / 10": overconfident}
print(f"learned noise variance {glf.noise_variance_:.4f} of the standardized target (the "
      f"data's: 0.04 / var(y) = {0.04 / y_train.var():.4f})")
levels = np.array([0.5, 0.8, 0.9, 0.95])
for name, model in models.items():
    coverage = plot.interval_coverage(model, X_test, y_test, levels)
    print(f"{name:25s} coverage at {levels}: {np.round(coverage, 3)}")

# %%
# Coverage against level; the diagonal is perfect calibration.
fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, models.items()):
    plot.plot_calibration(model, X_test, y_test, ax=ax)
    ax.set_title(name)
plt.show()
