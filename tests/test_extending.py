"""Adding a feature map takes one file (docs/extending.md): a map defined here, outside the
package, registered under a name for the duration of the test, runs through the whole engine
(the dense-GP contract, heteroscedastic noise, learning, the estimator, model files) without
touching any module of the package."""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import scalegp as sg
from scalegp import features, kernels, local
from scalegp.engine import Posterior, exact, systems
from scalegp.inference.gibbs import GibbsSamples
from scalegp.stored import ARRAY_KINDS, JSON_KINDS, Array, Value, declarations
from scalegp._validation import as_generator, check_matrix
from scalegp.features.base import FeatureMap, _REGISTRY, feature_dtype
from scalegp.engine.noise import FITC
from scalegp.testing import (check_chunked_statistics, check_engine_equals_dense,
                             check_features_grad, check_heteroscedastic_engine_equals_dense,
                             check_map_protocol)
from scalegp.estimators.configuration import make_approximation

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
    model = sg.LowRankGPRegressor(kernel=sg.Gaussian(length_scale=[1.0, 1.0]),
                                  random_state=0, approximation=make_approximation(NAME, n_components=40), normalize_X=False, normalize_y=False).fit(X, y)
    assert model.optimization_result_.converged
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))


# ----------------------------------------------- a map that declares its model-file section
DECLARED = "test-weighted-cosines"


def _define_declared_map(base):
    """psi_l(x) = a_l sqrt(2 s / m) cos(omega_l^T x / l + b_l): the shifted cosines with an
    amplitude a_l > 0 per column, a new array that no module of the package knows. The map
    declares its section (``STORED``, :mod:`scalegp.stored`): the shapes ("f" the
    frequencies, "d" the inputs), the amplitudes' domain and a JSON field's choices."""

    @dataclass(frozen=True, eq=False)
    class WeightedCosines(base, name=DECLARED):
        amplitudes: np.ndarray
        origin: str = "drawn"

        description = "test map: amplitude-weighted shifted cosines"
        STORED = {"omega": Array(("f", "d")), "shifts": Array(("f",)),
                  "amplitudes": Array(("f",), ("positive",)),
                  "origin": Value("str", choices=("drawn", "given"))}

        @classmethod
        def build(cls, X, kernel, n_components, rng=None, **options):
            rng = as_generator(rng)
            plain = base.build(X, kernel, n_components, rng)
            return cls(n_dims=plain.n_dims, omega=plain.omega, shifts=plain.shifts,
                       amplitudes=rng.uniform(0.5, 1.5, size=n_components))

        def features(self, X, kernel):
            Psi = super().features(X, kernel)
            return Psi * self.amplitudes.astype(Psi.dtype)

        def features_grad(self, X, kernel):
            grad = super().features_grad(X, kernel)
            return grad * self.amplitudes.astype(grad.dtype)

    return WeightedCosines


@pytest.fixture
def weighted_cosines(shifted_cosines):
    cls = _define_declared_map(shifted_cosines)
    yield cls
    _REGISTRY.pop(DECLARED)


def _saved_file(path):
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files if key != "metadata"}
        metadata = json.loads(archive["metadata"].tobytes().decode("utf-8"))
    return metadata, arrays


def _write_file(path, metadata, arrays):
    metadata = dict(metadata, arrays={key: {"shape": list(a.shape), "dtype": a.dtype.str}
                                      for key, a in arrays.items()})
    text = np.frombuffer(json.dumps(metadata).encode("utf-8"), dtype=np.uint8)
    np.savez(path, metadata=text, **arrays)
    return path


def test_a_map_with_its_own_array_saves_and_loads_without_touching_io(
        weighted_cosines, regression_data, tmp_path):
    """The map's new array and JSON field travel through the model file by its declaration
    alone: bit-identical predictions after loading, and the declaration is what the loader
    enforces (the amplitudes' shape in the map's symbols, their domain, the field's
    choices), with errors naming the field."""
    X, y = regression_data
    check_map_protocol(weighted_cosines.build(X, sg.Gaussian(), 30, np.random.default_rng(0)),
                       sg.Gaussian(), X,
                       lambda: weighted_cosines.build(X, sg.Gaussian(), 30,
                                                      np.random.default_rng(0)))
    model = sg.LowRankGPRegressor(kernel=sg.Gaussian(length_scale=[1.0, 1.0]),
                                  noise_variance=0.1, optimize=False,
                                  random_state=0, approximation=make_approximation(DECLARED, n_components=40)).fit(X, y)
    path = tmp_path / "m.npz"
    sg.save(model, path)
    metadata, arrays = _saved_file(path)
    assert arrays["feature_map.amplitudes"].shape == (40,)
    assert metadata["feature_map"]["origin"] == "drawn"
    loaded = sg.load(path)
    assert type(loaded.feature_map_) is weighted_cosines
    np.testing.assert_array_equal(loaded.feature_map_.amplitudes, model.feature_map_.amplitudes)
    X_test = X[:7] + 0.1
    for got, want in zip(loaded.predict(X_test, return_std=True),
                         model.predict(X_test, return_std=True)):
        np.testing.assert_array_equal(got, want)

    negative = arrays["feature_map.amplitudes"].copy()
    negative[3] = -0.5
    short = arrays["feature_map.amplitudes"][:-1]
    for name, changed_metadata, changed_arrays, match in (
            ("negative amplitude", metadata, {"feature_map.amplitudes": negative},
             r"has array 'feature_map\.amplitudes' whose values must be finite and > 0; "
             r"entry 3 is -0\.5"),
            ("one amplitude short", metadata, {"feature_map.amplitudes": short},
             r"has array 'feature_map\.amplitudes' of shape \(39,\), expected \(40,\)"),
            ("unknown origin", dict(metadata, feature_map=dict(metadata["feature_map"],
                                                                origin="guessed")), {},
             r"'feature_map\.origin' = 'guessed', expected one of \['drawn', 'given'\]"),
            ("amplitudes as JSON", dict(metadata, feature_map=dict(metadata["feature_map"],
                                                                    amplitudes=1.0)),
             {"feature_map.amplitudes": None},
             r"'feature_map\.amplitudes' = 1\.0, expected the array "
             r"'feature_map\.amplitudes'")):
        tampered = {key: value for key, value in {**arrays, **changed_arrays}.items()
                    if value is not None}
        with pytest.raises(sg.InvalidModelFileError, match=match):
            sg.load(_write_file(tmp_path / "tampered.npz", changed_metadata, tampered))


def _stored_components():
    """Every component class of the package that declares a model-file section."""
    return [*features.registry().values(), *systems.SYSTEMS.values(), Posterior,
            exact.ExactPosterior, GibbsSamples, *local.LOCAL_KINDS.values()]


def test_io_names_no_field_of_a_component():
    """io holds the archive's safety and the schema mechanism: the names of the arrays and
    values of every component (omega, n_nodes, probes, theta1_index, cholesky_factor ...)
    appear only in the components' own declarations, never quoted in scalegp/io."""
    io_source = "\n".join(path.read_text() for path in
                          (Path(sg.__file__).parent / "io").glob("*.py"))
    vocabulary = set(JSON_KINDS) | set(ARRAY_KINDS)       # e.g. "scale", a JSON kind
    named = {}
    for component in _stored_components():
        for name, declaration in declarations(component).items():
            if name not in vocabulary:
                for quote in ("'", '"'):
                    if f"{quote}{name}{quote}" in io_source:
                        named.setdefault(name, component.__name__)
    assert len(_stored_components()) >= len(features.names()) + 8
    assert named == {}


# ----------------------------------------------------------------- a kernel in one class
def _define_kernel():
    """The hyperbolic-secant kernel s prod_j sech((x_j - z_j) / l_j), new to the package:
    sech is the characteristic function of the hyperbolic secant law (density
    sech(pi w / 2) / 2, inverse CDF (2 / pi) log tan(pi u / 2)), so its standardized angular
    frequencies are independent hyperbolic-secant variables per dimension."""

    class Sech(sg.Kernel, names={KERNEL_NAME: {}}):
        name = KERNEL_NAME
        separable = True
        uniform_extra_dims = 0

        def _correlation(self, U):
            return np.prod(1.0 / np.cosh(U), axis=-1)

        def _correlation_grad_log_scale(self, U):
            # du_j / d log l_j = -u_j and d sech(u) / du = -tanh(u) sech(u)
            return self._correlation(U)[..., None] * U * np.tanh(U)

        def _log_base_density(self, V):
            # ordinary frequencies: the transform of sech(u) is pi sech(pi^2 eta)
            return np.sum(np.log(np.pi / np.cosh(np.pi**2 * V)), axis=1)

        def _log_base_density_grad_log(self, V):
            return -np.pi**2 * V * np.tanh(np.pi**2 * V)

        def _sample_base(self, rng, n_samples, n_dims):
            return self.frequencies_from_uniform(rng.uniform(size=(n_samples, n_dims)))

        def frequencies_from_uniform(self, U):
            return (2 / np.pi) * np.log(np.tan(0.5 * np.pi * U))

    return Sech


KERNEL_NAME = "test-sech"


@pytest.fixture
def sech_kernel():
    cls = _define_kernel()
    yield cls
    kernels.KERNEL_NAMES.pop(KERNEL_NAME)
    kernels.KERNEL_CLASSES.pop(cls.__name__)


def test_a_kernel_in_one_class_works_with_the_fourier_maps_and_model_files(
        sech_kernel, regression_data, tmp_path):
    X, y = regression_data
    kernel = kernels.get(KERNEL_NAME, length_scale=[0.8, 1.3], variance=1.5)
    assert isinstance(kernel, sech_kernel)
    # the spectral density integrates to k(0) = s (a 2-D midpoint sum over [-4, 4]^2)
    grid = np.linspace(-4, 4, 801)
    eta = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)
    assert kernel.spectral_density(eta).sum() * (grid[1] - grid[0]) ** 2 == pytest.approx(
        1.5, rel=1e-6)
    exact_K = kernel(X[:40])
    for name in ("rff", "qmc"):                 # Monte-Carlo and inverse-CDF constructions
        errors = []
        for seed in range(3):
            fmap = features.get(name).build(X, kernel, 4000, np.random.default_rng(seed))
            Psi = fmap.features(X[:40], kernel)
            errors.append(np.abs(Psi @ Psi.T - exact_K).max())
        # Monte-Carlo error of 2000 frequencies: a few times 1.5 / sqrt(2000) = 0.034
        assert max(errors) < 0.1, (name, errors)
    model = sg.LowRankGPRegressor(kernel=KERNEL_NAME,
                                  random_state=0, approximation=make_approximation("rff", n_components=64), normalize_X=False, normalize_y=False).fit(X, y)
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    assert type(loaded.kernel_) is sech_kernel
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.1, normalize_X=False, normalize_y=False).fit(X, y)
    theta = np.append(exact.kernel_.theta, np.log(exact.noise_variance_))
    _, grad = exact.log_marginal_likelihood(theta, eval_gradient=True)
    step = 1e-6
    numeric = [(exact.log_marginal_likelihood(theta + step * e)
                - exact.log_marginal_likelihood(theta - step * e)) / (2 * step)
               for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)
