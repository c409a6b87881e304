"""
Repeated inputs: copies of records and the split nugget
=======================================================

Where rows repeat an input with the same target (copies of a record, or a discrete
target), a GP whose only nugget is its noise variance reads them as measurements that
agree exactly: its likelihood says there is no noise, and it interpolates every row.
:class:`scalegp.GPRegressor` (``approximation="auto"``) splits the nugget instead into
micro-scale variation, shared by equal inputs, and measurement error, estimated from the
targets' spread within the repeated inputs, and learns on the distinct inputs' mean
targets (docs/choosing.md, "Repeated inputs"; :mod:`scalegp.estimators.replicates`).
Below: 150 noisy observations of a sine (noise standard deviation 0.25), 100 of them
copied once more, as a table joined twice would copy them; the model that reads the rows
as they are (``split_nugget=False``) against the split one, scored on 2,000 new points.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np

import scalegp as sg
from scalegp import plot


def field(X):
    return np.sin(3 * X[:, 0])


rng = np.random.default_rng(0)
X_distinct = rng.uniform(0, 3, (150, 1))
y_distinct = field(X_distinct) + 0.25 * rng.standard_normal(150)
copied = rng.choice(150, size=100, replace=False)
X = np.vstack([X_distinct, X_distinct[copied]])
y = np.concatenate([y_distinct, y_distinct[copied]])
X_test = rng.uniform(0, 3, (2000, 1))
y_test = field(X_test) + 0.25 * rng.standard_normal(2000)

models = {}
for name, split in (("the rows as they are", False), ("the nugget split", None)):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the row-wise fit warns about the copies
        models[name] = sg.GPRegressor(split_nugget=split, calibrate_variance=False,
                                      random_state=0).fit(X, y)
print("note:", models["the nugget split"].selection_.notes[0])
for name, model in models.items():
    mean = model.predict(X_test)
    nlpd = -np.mean(model.log_predictive_density(X_test, y_test))
    print(f"{name:22s} noise variance {model.noise_variance_:.3g} (standardized); new "
          f"points: RMSE "
          f"against the field {np.sqrt(np.mean((mean - field(X_test)) ** 2)):.3f}, NLPD "
          f"{nlpd:.3f}")

# %%
# The mean and the 90 % interval of a new observation; circles are the copied records.
X_plot = np.linspace(0, 3, 400)[:, None]
fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True, layout="constrained")
for ax, (name, model) in zip(axes, models.items()):
    plot.plot_prediction(model, X_plot, X_train=X, y_train=y, level=0.9,
                         include_noise=True, ax=ax)
    ax.plot(X_distinct[copied, 0], y_distinct[copied], "o", mfc="none", mec="k", ms=6,
            label="copied records")
    ax.plot(X_plot[:, 0], field(X_plot), "k:", label="the field")
    ax.set_title(name)
    ax.legend(loc="lower left", fontsize=8)
plt.show()
