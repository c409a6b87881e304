"""
Gauss-Legendre features against the exact GP in 1-D
===================================================

Gauss-Legendre features (``approximation="glf"``) replace the kernel by a quadrature rule of
its spectral density on a fixed set of nodes, so the feature basis does not depend on the
hyperparameters: one pass over the data, then every learning step costs O(s^3) whatever n.
On a 1-D problem with 300 points the exact GP is cheap, and the two fits can be compared
directly: learned hyperparameters, log marginal likelihood and the predictive bands.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot
from scalegp.estimators.configuration import make_approximation

rng = np.random.default_rng(0)
X = np.sort(rng.uniform(-4, 4, size=(300, 1)), axis=0)
y = np.sin(2 * X[:, 0]) + 0.3 * np.cos(5 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))

# length scales in the units of x (normalize_X=False): the box (0.3, 3) holds the function's
# scale (about 0.5), and the 64 nodes resolve the kernel over all of it
kernel = sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.3, 3.0),
                     variance_bounds=(0.1, 10.0))
options = dict(kernel=kernel, normalize_X=False, noise_variance=0.01,
               noise_variance_bounds=(1e-4, 1.0))
glf = sg.LowRankGPRegressor(approximation=make_approximation("glf", n_components=64),
                            **options).fit(X, y)
exact = sg.ExactGPRegressor(**options).fit(X, y)

for name, model in (("GLF, 64 features", glf), ("exact GP", exact)):
    print(f"{name:17s} length scale {model.kernel_.length_scale[0]:.4f}  "
          f"noise variance {model.noise_variance_:.5f}  "
          f"log p(y) {model.log_marginal_likelihood_value_:.3f}")

X_plot = np.linspace(-5, 5, 400)[:, None]
mean_glf, std_glf = glf.predict(X_plot, return_std=True)
mean_exact, std_exact = exact.predict(X_plot, return_std=True)
print(f"largest difference of the means on [-5, 5]: {np.abs(mean_glf - mean_exact).max():.2e}")
print(f"largest difference of the stds on [-5, 5]:  {np.abs(std_glf - std_exact).max():.2e}")

# %%
# The 95 % bands of the latent function; outside the data (``|x| > 4``) both widen to the prior.
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
plot.plot_prediction(glf, X_plot, X_train=X, y_train=y, ax=axes[0])
plot.plot_prediction(exact, X_plot, X_train=X, y_train=y, ax=axes[1])
axes[0].set_title("Gauss-Legendre features (s = 64)")
axes[1].set_title("exact GP")
plt.show()
