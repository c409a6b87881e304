"""
Bayesian hyperparameters: intervals from the Gibbs sampler
==========================================================

:class:`scalegp.GibbsGPRegressor` samples the noise precision, the kernel variance and the
length scale (on a grid) by the Gibbs sampler of Banerjee, Dunson & Tokdar (2013), instead of
maximizing the marginal likelihood. Its predictive distribution is a mixture over the kept
draws, and ``predict_interval`` gives the mixture's equal-tailed interval. With 100 noisy
points, where the length scale is not sharply determined, the mixture's interval is compared
with the Gaussian band of the maximum-likelihood fit.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.estimators.configuration import make_approximation

rng = np.random.default_rng(3)
X = np.sort(rng.uniform(0, 10, size=(100, 1)), axis=0)
y = np.sin(X[:, 0]) + 0.2 * rng.standard_normal(len(X))

# theta1 = 1 / (2 l^2) on a grid of length scales from 0.6 to 4
theta1_grid = 1 / (2 * np.geomspace(0.6, 4.0, 40) ** 2)
# 64 Gauss-Legendre nodes resolve the kernel over the grid's length scales; maximum
# likelihood searches (0.6, 3), the box that rule resolves for it
features = make_approximation("glf", n_components=64)
gibbs = sg.GibbsGPRegressor(approximation=features, collapsed=True, theta1_grid=theta1_grid,
                            n_iter=1500, burn_in=500, random_state=0).fit(X, y)
ml = sg.LowRankGPRegressor(approximation=features, normalize_y=True,
                           kernel=sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.6, 3.0)),
                           random_state=0).fit(X, y)

print("posterior means:", {k: round(float(v), 4) for k, v in gibbs.posterior_means_.items()})
print("effective sample sizes:",
      {k: round(float(v)) for k, v in gibbs.effective_sample_sizes_.items()})
print(f"maximum likelihood: length scale {ml.kernel_.length_scale[0]:.3f}, "
      f"noise variance {ml.noise_variance_:.4f}")

X_plot = np.linspace(-1, 11, 300)[:, None]
lower, upper = gibbs.predict_interval(X_plot, 0.95)
print(f"mean width of the 95 % interval: Gibbs mixture {np.mean(upper - lower):.3f}")

# %%
# Left: the mixture's 95 % interval (Gibbs); right: mean +- 1.96 std at the
# maximum-likelihood hyperparameters.
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
plot.plot_prediction(gibbs, X_plot, X_train=X, y_train=y, ax=axes[0])
plot.plot_prediction(ml, X_plot, X_train=X, y_train=y, ax=axes[1])
axes[0].set_title("Gibbs sampler: mixture over 1,000 draws")
axes[1].set_title("maximum likelihood")
plt.show()
