"""Hyperparameters: the one owner of theta (docs/engine.md, "Hyperparameters")."""

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.engine.hyperparameters import Hyperparameters


def test_encode_decode_and_box():
    kernel = sg.Matern(nu=1.5, length_scale=[0.5, 2.0], variance=3.0,
                       length_scale_bounds=(0.1, 10.0), variance_bounds="fixed")
    hp = Hyperparameters(kernel, 0.2, (1e-3, 1.0))
    assert hp.names == ["length_scale[0]", "length_scale[1]", "variance", "noise_variance"]
    np.testing.assert_allclose(hp.theta, np.log([0.5, 2.0, 3.0, 0.2]), rtol=1e-15)
    decoded, noise = hp.decode(hp.theta)
    np.testing.assert_allclose(decoded.length_scale, [0.5, 2.0], rtol=1e-14)
    assert decoded.nu == 1.5 and noise == pytest.approx(0.2, rel=1e-14)
    np.testing.assert_array_equal(hp.free, [True, True, False, True])
    np.testing.assert_allclose(hp.bounds[-1], np.log([1e-3, 1.0]))
    assert hp.values(hp) == (kernel, 0.2)                   # user values are not rounded
    with pytest.raises(ValueError, match=r"theta must have shape \(4,\)"):
        hp.decode(np.zeros(3))
    fixed = Hyperparameters(kernel, 0.2)
    assert fixed.noise_log_bounds == (np.log(0.2),) * 2 and not fixed.free[-1]
    with pytest.raises(ValueError, match="noise_variance"):
        Hyperparameters(kernel, 5.0, (1e-3, 1.0))


def test_restricted_to_a_maps_valid_region_warns_and_intersects():
    kernel = sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.01, 100.0))
    hp = Hyperparameters(kernel, 0.1, (1e-4, 1.0))
    assert hp.restricted_to(None) is hp
    valid = np.log([[0.5, 5.0], [1e-9, 1e9]])
    with pytest.warns(UserWarning, match=r"searching length_scale in \[0.5, 5\]"):
        narrowed = hp.restricted_to(valid)
    np.testing.assert_allclose(narrowed.bounds[0], np.log([0.5, 5.0]))
    np.testing.assert_allclose(narrowed.bounds[1], kernel.bounds[1])     # variance untouched
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.array_equal(narrowed.restricted_to(valid).bounds, narrowed.bounds)
    with pytest.raises(ValueError, match="does not meet its bounds"):
        hp.restricted_to(np.log([[200.0, 300.0], [1e-9, 1e9]]))


def test_learning_stays_inside_the_narrowed_box():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(80, 1))
    y = np.sin(6 * X[:, 0]) + 0.05 * rng.standard_normal(80)       # wants a short length scale
    kernel = sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.01, 100.0))
    hp = Hyperparameters(kernel, 0.1, (1e-4, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        narrowed = hp.restricted_to(np.log([[0.5, 5.0], [1e-9, 1e9]]))
        learned, _ = sg.learn_hyperparameters(sg.ExactMarginalLikelihood(hp, X, y), narrowed)
    assert learned.kernel.length_scale[0] == pytest.approx(0.5, rel=1e-9)    # on the bound
