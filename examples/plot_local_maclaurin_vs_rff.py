"""
Local Maclaurin features against random Fourier features
========================================================

Maclaurin features expand the Gaussian kernel around the origin, so they are accurate near
it and collapse far from it. A local model centres the expansion at every test point
(``local="test-points"``, Wacker & Filippone 2022), which makes the kernel exact at the
centre. Random Fourier features are equally (in)accurate everywhere. With the same number
of features (D = 16) and fixed hyperparameters, this example compares both with the exact
GP on a 1-D problem: the error of the predictive mean, and the KL divergence of the
predictive marginals. Neither reproduces the exact GP with 16 features, and both say so
(the ``ApproximationWarning`` lines in the output): the warnings are part of the result.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot

rng = np.random.default_rng(1)
X = np.sort(rng.uniform(-3, 3, size=(200, 1)), axis=0)
y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))
X_test = np.linspace(-3.5, 3.5, 300)[:, None]

kernel = sg.Gaussian(length_scale=0.5)
raw = dict(normalize_X=False, normalize_y=False)     # the kernel is in the data's units
common = dict(kernel=kernel, noise_variance=0.01, optimize=False, random_state=0, **raw)
exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.01, optimize=False,
                            **raw).fit(X, y)
rff = sg.LowRankGPRegressor(sg.Features("rff", n_components=16), **common).fit(X, y)
maclaurin = sg.LowRankGPRegressor(sg.Features("maclaurin", n_components=16),
                                  local="test-points", **common).fit(X, y)

mean_exact, std_exact = exact.predict(X_test, return_std=True, include_noise=True)


def kl_to_exact(model):
    """Summed KL(exact || model) of the noisy predictive marginals at the test points."""
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    ratio = (std_exact / std) ** 2
    return 0.5 * np.sum(ratio - 1 - np.log(ratio) + (mean - mean_exact) ** 2 / std ** 2)


for name, model in (("RFF", rff), ("local Maclaurin", maclaurin)):
    error = np.abs(model.predict(X_test) - mean_exact).max()
    print(f"{name:16s} max |mean - exact| {error:.2e}   KL to exact {kl_to_exact(model):9.3g}")

# %%
# The 95 % bands of the three models; RFF's 16 features leave visible wiggles.
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, (("exact GP", exact), ("RFF, D = 16", rff),
                                    ("local Maclaurin, D = 16", maclaurin))):
    plot.plot_prediction(model, X_test, X_train=X, y_train=y, ax=ax)
    ax.set_title(name)
plt.show()
