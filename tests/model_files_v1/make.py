"""Writes the model files of tests/test_model_files_v1.py with the scalegp it imports.

They were written by the code before the model-file sections were declared by their
components (issue 25, "io by declaration"; commit 75122de), with::

    PYTHONPATH=<that checkout>/src python tests/model_files_v1/make.py

Each ``<kind>.npz`` is a saved model; ``expected.npz`` holds the test inputs and, per kind,
the mean and standard deviation the saved model predicted there.
"""

import warnings
from pathlib import Path

import numpy as np

import scalegp as sg

HERE = Path(__file__).resolve().parent

KINDS = {
    "rff": lambda: sg.LowRankGPRegressor(approximation="rff", n_components=16, random_state=0),
    "glf": lambda: sg.LowRankGPRegressor(
        approximation="glf", kernel=sg.Gaussian(length_scale_bounds=(0.3, 3.0)),
        n_components=64, optimize=False, random_state=0),
    "sorf": lambda: sg.LowRankGPRegressor(approximation="sorf", n_components=16,
                                          optimize=False, random_state=0),
    "maclaurin": lambda: sg.LowRankGPRegressor(
        approximation="maclaurin", kernel=sg.Gaussian(), n_components=17, optimize=False,
        approximation_options={"sketch": "complex-rademacher"}, random_state=0),
    "nystrom": lambda: sg.LowRankGPRegressor(approximation="nystrom", n_components=12,
                                             optimize=False, random_state=0),
    "random-projection": lambda: sg.LowRankGPRegressor(
        approximation="random-projection", n_components=30, optimize=False,
        approximation_options={"epsilon": 0.05}, random_state=0),
    "signed-eigen": lambda: sg.LowRankGPRegressor(
        approximation="sfs", n_components=32, noise_variance=0.5, optimize=False,
        signed_rule="keep", random_state=0),
    "repaired": lambda: sg.LowRankGPRegressor(approximation="sfs", n_components=32,
                                              noise_variance=0.05, optimize=False,
                                              random_state=0),
    "standardized": lambda: sg.LowRankGPRegressor(n_components=16, normalize_X=True,
                                                  random_state=0),
    "exact": lambda: sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0])),
    "clusters": lambda: sg.LowRankGPRegressor(n_components=16, local="clusters",
                                              local_threshold=1.0, optimize=False,
                                              random_state=0),
    "clusters-lazy": lambda: sg.LowRankGPRegressor(n_components=16, local="clusters",
                                                   local_lazy=True, local_threshold=1.0,
                                                   optimize=False, random_state=0),
    "test-points": lambda: sg.LowRankGPRegressor(n_components=16, local="test-points",
                                                 optimize=False, random_state=0),
    "neighbors-exact": lambda: sg.LowRankGPRegressor(
        approximation="exact", local="neighbors", local_neighbors=12, optimize=False),
    "gibbs": lambda: sg.GibbsGPRegressor(n_components=8, theta1_grid=[0.2, 0.5, 1.0],
                                         n_iter=14, burn_in=4, random_state=0),
}


def data(n=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)


def main():
    X, y = data()
    X_test = np.random.default_rng(1).uniform(-2, 2, size=(6, 2))
    expected = {"X_test": X_test}
    for name, make in KINDS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(X, y)
        sg.save(model, HERE / f"{name}.npz")
        mean, std = model.predict(X_test, return_std=True)
        expected[f"{name}.mean"], expected[f"{name}.std"] = mean, std
    np.savez(HERE / "expected.npz", **expected)


if __name__ == "__main__":
    main()
