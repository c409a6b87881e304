"""
The Vecchia approximation on the relief map
===========================================

:mod:`scalegp.vecchia` approximates the GP likelihood by conditioning each point, in a
maximin ordering, on its m nearest previous points. It is a core in the package (the
estimators and the command line do not reach it yet); this example uses it directly on a
subsample of the relief map, at fixed hyperparameters, against the exact GP on the same
points.
"""

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import vecchia
from scalegp.datasets import load_east_africa_relief

relief = load_east_africa_relief(subsample=3_000, random_state=1)
X = (relief.X - relief.X.mean(axis=0)) / relief.X.std(axis=0)
y = (relief.y - relief.y.mean()) / relief.y.std()
X_train, y_train, X_test, y_test = X[:2_500], y[:2_500], X[2_500:], y[2_500:]

kernel = sg.Matern(nu=2.5, length_scale=[0.3, 0.3])
noise = 0.01
exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=noise,
                            optimize=False).fit(X_train, y_train)
for m in (5, 15, 30):
    gp = vecchia.VecchiaGP(kernel, noise, m=m).fit(X_train, y_train)
    mean = gp.predict(X_test)
    rmse = np.sqrt(np.mean((mean - y_test) ** 2))
    print(f"Vecchia, m = {m:2d}: test RMSE {rmse:.4f} (standardised); "
          f"max |mean - exact mean| {np.abs(mean - exact.predict(X_test)).max():.4f}")
print(f"exact GP:       test RMSE {np.sqrt(np.mean((exact.predict(X_test) - y_test) ** 2)):.4f}")

# %%
# Test predictions of the m = 30 model against the exact GP's.
fig, ax = plt.subplots(figsize=(4.5, 4.5), layout="constrained")
ax.scatter(exact.predict(X_test), gp.predict(X_test), s=6)
ax.axline((0, 0), slope=1, color="grey", lw=1)
ax.set_xlabel("exact GP mean")
ax.set_ylabel("Vecchia mean, m = 30")
plt.show()
