"""The gradient path each configuration of the low-rank objective gets (scalegp.engine.gradients):
chosen once, when the objective is built, and pinned here; the paths that can serve the same
configuration give the same gradient; a distributed source gets the general path (its
statistics pass keeps no features); the one per-call decision (kept features or recomputed
ones) changes no number."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import engine, features
from scalegp.engine.gradients import (FixedBasisPath, GeneralPath, MapGradientPath,
                                      PositivePartPath)
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.engine.noise import FITC
from scalegp.data.sources import open_source
from scalegp.engine.statistics import feature_cache_budget

KERNEL = sg.Gaussian(length_scale=[0.7, 0.9], length_scale_bounds=(0.3, 3.0))
NOISE = 0.05


def data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y, rng.uniform(0.0, 0.02, size=n)


def build(name, X, m=24):
    return features.get(name).build(X, KERNEL, m, np.random.default_rng(0))


class SignedGLF(features.get("glf")):
    """GLF with every fifth weight negated: a signed fixed basis (test-only)."""

    @property
    def signs(self):
        signs = np.ones(self.n_components)
        signs[::5] = -1.0
        return signs


def objective(fmap, X, y, **options):
    return engine.MarginalLikelihood(fmap, Hyperparameters(KERNEL, NOISE), X, y, **options)


BUDGET = feature_cache_budget(np.float64)


@pytest.mark.filterwarnings("ignore:Gauss-Legendre features with q")
@pytest.mark.parametrize("name, options, path, expected", [
    ("rff", {}, GeneralPath, dict(homoscedastic=True, variational=False)),
    ("rff", {"noise": FITC}, GeneralPath, dict(homoscedastic=False, variational=False)),
    ("rff", {"known": True}, GeneralPath, dict(homoscedastic=False, variational=False)),
    ("rff", {"dtype": "float32"}, GeneralPath, dict(feature_budget=0)),
    ("glf", {}, FixedBasisPath, dict(feature_budget=0)),
    ("glf", {"known": True}, GeneralPath, dict(homoscedastic=False)),
    ("glf", {"noise": FITC}, GeneralPath, dict(homoscedastic=False)),
    ("nystrom", {}, MapGradientPath, dict(variational=False)),
    ("nystrom", {"variational": True}, MapGradientPath, dict(variational=True)),
    ("nystrom", {"noise": FITC}, GeneralPath, dict(homoscedastic=False)),
    ("nystrom", {"known": True}, MapGradientPath, dict(homoscedastic=False)),
    ("nystrom", {"known": True, "variational": True}, MapGradientPath,
     dict(homoscedastic=False, variational=True)),
    ("sfs", {"signed_rule": "repair"}, PositivePartPath, dict(fixed_basis=False)),
    ("sfs", {"signed_rule": "keep", "s2": 2.0}, GeneralPath, dict(homoscedastic=True)),
    ("signed-glf", {"signed_rule": "repair"}, PositivePartPath, dict(fixed_basis=True)),
    ("signed-glf", {"signed_rule": "keep", "s2": 10.0}, FixedBasisPath, {}),
])
def test_each_configuration_gets_its_path(name, options, path, expected):
    X, y, v = data()
    if name == "signed-glf":
        fmap = SignedGLF(**build("glf", X).to_state())
    elif name == "sfs":
        rng = np.random.default_rng(11)            # benchmarks/engine_reference.py's case
        X = rng.uniform(-2, 2, size=(150, 5))
        y = np.sin(X.sum(axis=1)) + 0.1 * rng.standard_normal(150)
        fmap = features.get("sfs").build(X, fmap_kernel(X), 64, np.random.default_rng(0))
        assert fmap.signs is not None and np.any(fmap.signs < 0)
    else:
        fmap = build(name, X)
    options = dict(options)
    if options.pop("known", False):
        options["sample_noise_variance"] = v
    s2 = options.pop("s2", NOISE)           # a kept signed rule is positive definite there
    likelihood = engine.MarginalLikelihood(fmap, Hyperparameters(fmap_kernel(fmap), s2), X,
                                           y, **options)
    chosen = likelihood.gradient_path
    assert type(chosen) is path
    for attribute, value in expected.items():
        assert getattr(chosen, attribute) == value, attribute
    second_pass = path in (GeneralPath, MapGradientPath)
    assert chosen.second_pass == second_pass
    if not second_pass:
        assert likelihood.feature_budget == 0
    elif options.get("dtype") != "float32":
        assert likelihood.feature_budget == BUDGET > 0
    # the path is the objective's for good: evaluations do not change it
    likelihood(np.append(fmap_kernel(fmap).theta, np.log(s2)))
    assert likelihood.gradient_path is chosen


def fmap_kernel(fmap_or_X):
    n_dims = fmap_or_X.shape[1] if isinstance(fmap_or_X, np.ndarray) else fmap_or_X.n_dims
    return KERNEL if n_dims == 2 else sg.Gaussian(length_scale=np.linspace(1.5, 2.5, 5))


def test_an_out_of_core_source_keeps_no_features(tmp_path):
    X, y, _ = data()
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    source = open_source(tmp_path / "d.npy", 2)
    assert source.out_of_core
    for name, path in (("rff", GeneralPath), ("nystrom", MapGradientPath)):
        chosen = engine.MarginalLikelihood(build(name, X), Hyperparameters(KERNEL, NOISE),
                                           source).gradient_path
        assert type(chosen) is path and chosen.feature_budget == 0


@pytest.mark.parametrize("known", [False, True], ids=["s2", "s2+v"])
@pytest.mark.parametrize("variational", [False, True])
def test_the_map_gradient_and_the_general_path_agree(variational, known):
    """Nystrom's own pass (2 n m^2 flops; with known variances weighted rows and the noise
    part's pass, 2 n m^2 more) and the general shares ((3 + 2P) n m^2) are two formulas for
    one gradient: equal to rounding, DTC and VFE."""
    X, y, v = data()
    extra = {"sample_noise_variance": v} if known else {}
    likelihood = objective(build("nystrom", X), X, y, variational=variational, **extra)
    theta = likelihood.hyperparameters.theta + 0.1
    value, own = likelihood(theta)
    assert type(likelihood.gradient_path) is MapGradientPath
    likelihood.gradient_path = GeneralPath(BUDGET, variational, homoscedastic=not known)
    value_general, general = likelihood(theta)
    assert value_general == value
    np.testing.assert_allclose(own, general, rtol=1e-9, atol=1e-10 * np.abs(general).max())


@pytest.mark.filterwarnings("ignore:Gauss-Legendre features with q")
def test_the_fixed_basis_and_the_general_path_agree():
    """The fixed basis's O(m^3 + m P) collapse and the general second pass: one gradient."""
    X, y, _ = data()
    likelihood = objective(build("glf", X), X, y)
    theta = likelihood.hyperparameters.theta + 0.1
    _, collapsed = likelihood(theta)
    likelihood.basis_statistics = None           # statistics from a pass, as a streamed map
    likelihood.gradient_path = GeneralPath(BUDGET, False, homoscedastic=True)
    _, streamed = likelihood(theta)
    np.testing.assert_allclose(collapsed, streamed, rtol=1e-8,
                               atol=1e-10 * np.abs(streamed).max())


def dask_source(X, y, block, **options):
    da = pytest.importorskip("dask.array", reason="the dask extra is part of the test install")
    from scalegp.data.distributed import DaskSource
    return DaskSource(da.from_array(X, chunks=(block, X.shape[1])), da.from_array(y, chunks=block),
                      **options)


@pytest.mark.parametrize("name", ["nystrom", "rff"])
def test_a_distributed_source_gets_the_general_path_and_the_serial_gradient(name):
    """Its statistics pass keeps no features (they stay with the rows), so the map's own pass
    would pull every row here: the general pass runs on the workers, with no feature budget,
    and gives the serial objective's gradient (Nystrom's serial one from its own pass)."""
    X, y, _ = data(2000)
    fmap = build(name, X)
    source = dask_source(X, y, 500)
    kept = engine.KeptFeatures(BUDGET)
    engine.accumulate_statistics(fmap.at(KERNEL), source, keep_features=kept)
    assert not kept.complete                   # why the choice is made per build
    distributed = engine.MarginalLikelihood(fmap, Hyperparameters(KERNEL, NOISE), source)
    serial = objective(fmap, X, y)
    chosen = distributed.gradient_path
    assert type(chosen) is GeneralPath and chosen.homoscedastic
    assert chosen.feature_budget == 0 == distributed.feature_budget
    assert type(serial.gradient_path) is (MapGradientPath if name == "nystrom" else GeneralPath)
    theta = serial.hyperparameters.theta + 0.1
    (value, gradient), (reference_value, reference) = distributed(theta), serial(theta)
    assert value == pytest.approx(reference_value, rel=1e-10)
    np.testing.assert_allclose(gradient, reference, rtol=1e-8,
                               atol=1e-10 * np.abs(reference).max())


def test_features_beyond_the_budget_are_recomputed_with_the_same_gradient():
    """The one per-call decision: the second pass reads the kept features when they all fit,
    recomputes them otherwise; the numbers are the same."""
    X, y, _ = data(2000)
    for name in ("nystrom", "rff"):
        likelihood = objective(build(name, X), X, y)
        theta = likelihood.hyperparameters.theta + 0.1
        _, kept = likelihood(theta)
        likelihood.gradient_path.feature_budget = 1000      # a few rows: all dropped
        _, recomputed = likelihood(theta)
        np.testing.assert_allclose(recomputed, kept, rtol=1e-12,
                                   atol=1e-13 * np.abs(kept).max())
