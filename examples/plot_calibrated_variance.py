"""
Predictive intervals where the noise depends on the inputs
==========================================================

A GP has one noise variance for every input. Where the errors grow across the domain, its
intervals are too wide where the data are quiet and too narrow where they are not, though
their coverage over all points is right. :class:`scalegp.GPRegressor` (``approximation="auto"``)
learns the log ratio of its cross-validated squared errors to its predictive variances by
a second GP, and keeps that calibration where a nested cross-validation says it predicts
better (docs/choosing.md, "Calibrated predictive variances"). The predictive distribution
of a new observation is then a scale mixture of Gaussians, and ``predict_interval`` gives
its own central interval. Below: 300 points whose noise standard deviation grows from 0.02
to 0.98, the 90 % intervals of the calibrated and of the homoscedastic model, and their
coverage of 4,000 new points in each quarter of the domain.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot


def noisy_sine(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 2, (n, 1))
    sigma = 0.02 + 0.24 * X[:, 0] ** 2
    return X, np.sin(3 * X[:, 0]) + sigma * rng.standard_normal(n)


X, y = noisy_sine(300, seed=0)
X_test, y_test = noisy_sine(4000, seed=5)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")      # the auto fit's notes are printed below instead
    calibrated = sg.GPRegressor(random_state=0).fit(X, y)
    homoscedastic = sg.GPRegressor(random_state=0, calibrate_variance=False).fit(X, y)
for note in calibrated.selection_.notes:
    print("note:", note)

quarter = np.minimum((X_test[:, 0] / 0.5).astype(int), 3)
for name, model in (("calibrated", calibrated), ("homoscedastic", homoscedastic)):
    lower, upper = model.predict_interval(X_test, 0.9, include_noise=True)
    inside = (lower <= y_test) & (y_test <= upper)
    by_quarter = [f"{inside[quarter == k].mean():.3f}" for k in range(4)]
    print(f"{name:14s} 90 % coverage: all {inside.mean():.3f}; by quarter of [0, 2]: "
          f"{', '.join(by_quarter)}; NLPD "
          f"{-np.mean(model.log_predictive_density(X_test, y_test)):.3f}")

# %%
# The 90 % intervals of a new observation; the calibrated one widens with the noise.
X_plot = np.linspace(0, 2, 300)[:, None]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, (("calibrated by the inputs", calibrated),
                                    ("one noise variance", homoscedastic))):
    plot.plot_prediction(model, X_plot, X_train=X, y_train=y, level=0.9,
                         include_noise=True, ax=ax)
    ax.set_title(name)
plt.show()
