"""The default hyperparameter box holds the optimum or widens itself (issue 26, section 1):
a parameter that learning leaves on a library-default bound has that side moved out by
WIDENING_FACTOR and learning continues; a user's bounds never move."""

import math
import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.engine.hyperparameters import (DEFAULT_NOISE_VARIANCE_BOUNDS, WIDENING_FACTOR,
                                            Hyperparameters)
from scalegp.inference import optimize
from scalegp.estimators.configuration import make_approximation


@pytest.fixture(scope="module")
def trend_data():
    """A near-linear trend in x0 and an input x1 the target does not depend on: the
    likelihood rises with the length scale of x1 well past the default bound 100."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = 2 * X[:, 0] + 0.05 * X[:, 0] ** 2 + 0.1 * rng.standard_normal(60)
    return X, y


def _fit(X, y, kernel, **params):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sg.ExactGPRegressor(kernel=kernel, **params).fit(X, y)
    return model, [w for w in caught if issubclass(w.category, sg.BoundaryWarning)]


def test_default_box_widens_past_a_binding_bound(trend_data, tmp_path):
    X, y = trend_data
    model, bound_warnings = _fit(X, y, sg.Gaussian(length_scale=[1.0, 1.0]))
    user, user_warnings = _fit(X, y, sg.Gaussian(length_scale=[1.0, 1.0],
                                                 length_scale_bounds=(1e-2, 99.0)))
    result = model.optimization_result_
    assert result.widened and result.widened[0][:2] == ("length_scale[1]", "upper")
    assert model.kernel_.length_scale[1] > 100.0
    assert model.kernel_.length_scale_bounds[1] == pytest.approx(100.0 * WIDENING_FACTOR)
    # the widened optimum is interior and better than the best of the user's box
    assert model.kernel_.length_scale[1] < model.kernel_.length_scale_bounds[1] / 2
    assert model.log_marginal_likelihood_value_ > user.log_marginal_likelihood_value_ + 1.0
    assert not bound_warnings
    # the user's box: kept, and the optimum on it warned about
    assert user.optimization_result_.widened == ()
    assert user.kernel_.length_scale[1] == pytest.approx(99.0)
    assert user.kernel_.length_scale_bounds == (1e-2, 99.0)
    assert len(user_warnings) == 1 and "upper bound 99" in str(user_warnings[0].message)
    # the fitted model (its kernel on the widened box) saves and loads
    sg.save(model, tmp_path / "m.npz")
    again = sg.load(tmp_path / "m.npz")
    np.testing.assert_allclose(again.predict(X[:5]), model.predict(X[:5]), rtol=1e-10)


def test_default_sides_are_only_the_library_defaults():
    default = Hyperparameters(sg.Gaussian(length_scale=[1.0, 2.0]), 0.01,
                              DEFAULT_NOISE_VARIANCE_BOUNDS)
    np.testing.assert_array_equal(default.default_sides(),
                                  [[1, 1], [1, 1], [1, 1], [0, 1]])
    users = Hyperparameters(sg.Gaussian(length_scale=[1.0, 2.0], length_scale_bounds=(0.1, 10),
                                        variance_bounds="fixed"), 0.01, (1e-4, 1.0))
    assert not users.default_sides().any()
    restricted = default.restricted_to(default.kernel.bounds)      # narrowed by a map
    np.testing.assert_array_equal(restricted.default_sides(),
                                  [[0, 0], [0, 0], [0, 0], [0, 1]])
    with pytest.raises(ValueError, match="cannot widen"):
        restricted.widened(default.default_sides())


def test_widened_moves_only_the_marked_sides():
    box = Hyperparameters(sg.Gaussian(length_scale=[1.0, 2.0]), 0.01,
                          DEFAULT_NOISE_VARIANCE_BOUNDS)
    sides = np.zeros((4, 2), dtype=bool)
    sides[1, 1] = sides[3, 1] = True          # one length scale's upper side, the noise's
    wider = box.widened(sides, factor=10.0)
    assert wider.kernel.length_scale_bounds == (1e-2, 1e3)     # shared by both scales
    assert wider.kernel.variance_bounds == box.kernel.variance_bounds
    assert wider.noise_variance_bounds == (1e-6, 1e6)
    np.testing.assert_array_equal(wider.theta, box.theta)
    with pytest.raises(ValueError, match="factor"):
        box.widened(sides, factor=1.0)


def _box():
    return Hyperparameters(sg.Gaussian(length_scale=1.0), 0.01, DEFAULT_NOISE_VARIANCE_BOUNDS)


def _objective(length_scale_term):
    """log p = term(log l) - (log s)^2 - (log s2 - log 0.1)^2, with its gradient."""
    def make(_hyperparameters):
        def objective(theta):
            value, slope = length_scale_term(theta[0])
            return (value - theta[1] ** 2 - (theta[2] - math.log(0.1)) ** 2,
                    np.array([slope, -2 * theta[1], -2 * (theta[2] - math.log(0.1))]))
        return objective
    return make


def test_optimum_outside_the_default_box_is_reached():
    peak = 12.0                                      # l* = e^12 = 1.6e5: two widenings
    make = _objective(lambda t: (-(t - peak) ** 2, -2 * (t - peak)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.BoundaryWarning)
        learned, result = optimize.learn_widening(make, _box())
    assert result.theta[0] == pytest.approx(peak, abs=1e-4)
    assert result.theta[2] == pytest.approx(math.log(0.1), abs=1e-4)
    assert [side[:2] for side in result.widened] == [("length_scale", "upper")] * 2
    assert learned.kernel.length_scale_bounds[1] == pytest.approx(1e8)
    assert result.converged
    # the same objective in the box without widening stops on the wall and says so
    with pytest.warns(sg.BoundaryWarning, match="upper bound 100"):
        _, boxed = optimize.learn_hyperparameters(make(None), _box())
    assert boxed.log_marginal_likelihood < result.log_marginal_likelihood - 40


def test_flat_beyond_the_bound_stops_without_a_warning():
    # log p saturates as l grows (an input the target does not depend on)
    make = _objective(lambda t: (-math.exp(2.0 - t), math.exp(2.0 - t)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.BoundaryWarning)
        learned, result = optimize.learn_widening(make, _box())
    # 100 -> 1e5 gains 0.07 > WIDENING_GAIN, 1e5 -> 1e8 gains 7e-5 < WIDENING_GAIN: stop
    assert len(result.widened) == 2
    assert learned.kernel.length_scale_bounds[1] == pytest.approx(1e8)


def test_still_rising_after_every_widening_warns():
    make = _objective(lambda t: (t, 1.0))
    with pytest.warns(sg.BoundaryWarning, match="upper bound 1e\\+11"):
        learned, result = optimize.learn_widening(make, _box())
    assert len(result.widened) == optimize.MAX_WIDENINGS
    assert learned.kernel.length_scale == pytest.approx(100.0 * 1e3 ** 3)


def test_user_box_is_never_widened():
    make = _objective(lambda t: (t, 1.0))
    box = Hyperparameters(sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.1, 50.0)),
                          0.01, DEFAULT_NOISE_VARIANCE_BOUNDS)
    with pytest.warns(sg.BoundaryWarning, match="upper bound 50"):
        learned, result = optimize.learn_widening(make, box)
    assert result.widened == () and learned.kernel.length_scale == pytest.approx(50.0)


def test_a_fixed_basis_map_keeps_its_box(trend_data):
    # Gauss-Legendre features are built on the box (their rule resolves only it)
    X, y = trend_data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glf = sg.LowRankGPRegressor(kernel=sg.Gaussian(length_scale=[1.0, 1.0]), approximation=make_approximation("glf", n_components=64)).fit(X, y)
        nystrom = sg.LowRankGPRegressor(kernel=sg.Gaussian(length_scale=[1.0, 1.0]),
                                        random_state=0, approximation=make_approximation("nystrom", n_components=40)).fit(X, y)
    assert glf.optimization_result_.widened == ()
    # the default box became the one the rule resolves whole (gauss_legendre.resolved_box)
    low, high = glf.kernel_.length_scale_bounds
    default_low, default_high = sg.Gaussian().length_scale_bounds
    assert default_low <= low < high <= default_high and (low, high) != (default_low, default_high)
    valid = np.exp(glf.feature_map_.valid_log_bounds(glf.kernel_)[:2])
    np.testing.assert_allclose(valid, [[low, high], [low, high]])
    assert nystrom.optimization_result_.widened
    assert nystrom.kernel_.length_scale[1] > 100.0
