"""Adding a feature map takes one file (docs/extending.md): a map defined here, outside the
package, registered under a name for the duration of the test, runs through the whole engine
(the dense-GP contract, heteroscedastic noise, learning, the estimator, model files) without
touching any module of the package."""

from dataclasses import dataclass

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp._validation import as_generator, check_matrix
from scalegp.features.base import FeatureMap, _REGISTRY, feature_dtype
from scalegp.noise import FITC
from scalegp.testing import (check_chunked_statistics, check_engine_equals_dense,
                             check_features_grad, check_heteroscedastic_engine_equals_dense,
                             check_map_protocol)

NAME = "test-shifted-cosines"


def _define_map():
    """psi_l(x) = sqrt(2 s / m) cos(omega_l^T x / l + b_l) (Rahimi & Recht 2007, the single
    phase-shifted cosine), written the minimal way: ``build``, ``n_components``, ``features``
    and ``features_grad`` only (no ``at``: the engine binds the kernel itself)."""

    @dataclass(frozen=True, eq=False)
    class ShiftedCosines(FeatureMap, name=NAME):
        omega: np.ndarray
        shifts: np.ndarray

        description = "test map: phase-shifted random cosines"

        @classmethod
        def build(cls, X, kernel, n_components, rng=None, **options):
            X = check_matrix(X, "X")
            rng = as_generator(rng)
            omega = kernel.sample_standard_frequencies(n_components, X.shape[1], rng)
            return cls(n_dims=X.shape[1], omega=omega,
                       shifts=rng.uniform(0, 2 * np.pi, size=n_components))

        @property
        def n_components(self):
            return self.omega.shape[0]

        def _phases(self, X, kernel):
            X = self.check_input(X, kernel)
            dtype = feature_dtype(X)
            U = (X / kernel.length_scale).astype(dtype)
            return U, U @ self.omega.T.astype(dtype) + self.shifts.astype(dtype)

        def features(self, X, kernel):
            _, Z = self._phases(X, kernel)
            return np.sqrt(2 * kernel.variance / self.n_components).astype(Z.dtype) * np.cos(Z)

        def features_grad(self, X, kernel):
            U, Z = self._phases(X, kernel)
            amplitude = np.sqrt(2 * kernel.variance / self.n_components).astype(Z.dtype)
            sin = -amplitude * np.sin(Z)
            if kernel.anisotropic:
                scales = [sin * -(U[:, j:j + 1] * self.omega[:, j]) for j in range(self.n_dims)]
            else:
                scales = [sin * -(U @ self.omega.T)]
            return np.stack(scales + [0.5 * amplitude * np.cos(Z)])

    return ShiftedCosines


@pytest.fixture
def shifted_cosines():
    cls = _define_map()
    yield cls
    _REGISTRY.pop(NAME)


def test_a_map_in_one_file_passes_the_engine_contract(shifted_cosines, regression_data):
    X, y = regression_data
    kernel = sg.Matern(nu=1.5, length_scale=[0.7, 1.3])
    fmap = shifted_cosines.build(X, kernel, 30, np.random.default_rng(0))
    X_test = X[:9] + 0.05
    check_features_grad(fmap, kernel, X)
    check_map_protocol(fmap, kernel, X,
                       lambda: shifted_cosines.build(X, kernel, 30, np.random.default_rng(0)))
    check_chunked_statistics(fmap, kernel, X, y)
    check_engine_equals_dense(fmap, kernel, X, y, 0.3, X_test)
    check_heteroscedastic_engine_equals_dense(fmap, kernel, X, y, 0.3, X_test, noise=FITC,
                                              sample_noise_variance=np.full(len(y), 0.1))


def test_a_map_in_one_file_learns_saves_and_loads(shifted_cosines, regression_data, tmp_path):
    X, y = regression_data
    assert NAME in features.names()
    model = sg.LowRankGPRegressor(approximation=NAME, n_components=40,
                                  kernel=sg.Gaussian(length_scale=[1.0, 1.0]),
                                  random_state=0).fit(X, y)
    assert model.optimization_result_.converged
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))
