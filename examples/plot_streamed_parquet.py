"""
A streamed fit from a Parquet file
==================================

A low-rank model needs only the m x m statistics Psi^T Psi, Psi^T y, y^T y and n, which add
over row chunks. :class:`scalegp.data.sources.ParquetSource` reads a Parquet file row group
by row group, so a fit never holds the file in memory; the result equals a fit on the same
rows in memory. The file is written into a temporary folder here (100,000 rows in row groups
of 20,000); the same code fits a file of billions of rows in O(chunk m + m^2) memory.
"""

import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import scalegp as sg
from scalegp import plot
from scalegp.data.sources import ParquetSource

rng = np.random.default_rng(0)
n = 100_000
X = rng.uniform(-3, 3, size=(n, 2))
y = np.sin(2 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(n)

folder = tempfile.TemporaryDirectory()
path = Path(folder.name) / "rows.parquet"
pq.write_table(pa.table({"x1": X[:, 0], "x2": X[:, 1], "y": y}), path, row_group_size=20_000)
print(f"{path.name}: {path.stat().st_size / 2**20:.1f} MiB, {n} rows")

# the length-scale box Theta the Gauss-Legendre rule is built for (docs/gauss-legendre.md)
kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.4, 2.0),
                     variance_bounds=(0.1, 100.0))
options = dict(approximation=sg.Features("glf", n_components=1024), kernel=kernel,
               noise_variance=0.01, noise_variance_bounds=(1e-4, 1.0), normalize_X=False)
streamed = sg.LowRankGPRegressor(**options).fit(ParquetSource(path, target="y"))
in_memory = sg.LowRankGPRegressor(**options).fit(X, y)

X_test = rng.uniform(-3, 3, size=(1_000, 2))
difference = np.abs(streamed.predict(X_test) - in_memory.predict(X_test)).max()
print(f"learned length scales {np.round(streamed.kernel_.length_scale, 4)}, "
      f"noise variance {streamed.noise_variance_:.5f}")
print(f"largest difference of the streamed and in-memory predictions: {difference:.1e}")
folder.cleanup()

# %%
# The streamed model's mean over the square.
grid = np.linspace(-3, 3, 80)
fig, ax = plt.subplots(figsize=(5.5, 4.5), layout="constrained")
plot.plot_map(streamed, grid, grid, what="mean", ax=ax)
ax.set_title("mean of the model fitted from the Parquet file")
plt.show()
