"""
Local Maclaurin features against random Fourier features
========================================================

Maclaurin features expand the Gaussian kernel around the origin, so they are accurate near
it and collapse far from it. A local model centres the expansion at every test point
(``local="test-points"``, Wacker & Filippone 2022), which makes the kernel exact at the
centre. Random Fourier features are equally (in)accurate everywhere. With the same number
of features (D = 32) and fixed hyperparameters, this example compares both with the exact
GP: the error of the predictive mean, and the KL divergence of the predictive marginals.
"""

import numpy as np

import scalegp as sg
from scalegp import plot

rng = np.random.default_rng(1)
X = rng.uniform(-3, 3, size=(400, 2))
y = np.sin(1.5 * X[:, 0]) * np.cos(1.5 * X[:, 1]) + 0.1 * rng.standard_normal(len(X))
X_test = rng.uniform(-3, 3, size=(300, 2))

kernel = sg.Gaussian(length_scale=0.6)
common = dict(n_components=32, kernel=kernel, noise_variance=0.01, optimize=False,
              random_state=0)
exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.01, optimize=False).fit(X, y)
rff = sg.LowRankGPRegressor(approximation="rff", **common).fit(X, y)
maclaurin = sg.LowRankGPRegressor(approximation="maclaurin", local="test-points",
                                  **common).fit(X, y)

mean_exact, std_exact = exact.predict(X_test, return_std=True, include_noise=True)


def kl_to_exact(model):
    """Summed KL(exact || model) of the noisy predictive marginals at the test points."""
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    ratio = (std_exact / std) ** 2
    return 0.5 * np.sum(ratio - 1 - np.log(ratio) + (mean - mean_exact) ** 2 / std ** 2)


errors = {}
for name, model in (("RFF", rff), ("local Maclaurin", maclaurin)):
    errors[name] = model.predict(X_test) - mean_exact
    print(f"{name:16s} max |mean - exact| {np.abs(errors[name]).max():.3f}   "
          f"KL to exact {kl_to_exact(model):9.1f}")

# %%
# Where each approximation errs: the absolute error of the mean at each test point.
fig, axes = plot.new_figure(1, 2, figsize=(10, 4), sharey=True, layout="constrained")
vmax = max(np.abs(e).max() for e in errors.values())
for ax, (name, error) in zip(axes, errors.items()):
    points = ax.scatter(X_test[:, 0], X_test[:, 1], c=np.abs(error), vmin=0, vmax=vmax,
                        cmap="viridis", s=14)
    ax.set_title(f"{name}, D = 32: |mean - exact mean|")
    ax.set_xlabel("x1")
axes[0].set_ylabel("x2")
fig.colorbar(points, ax=axes, shrink=0.8)
fig
