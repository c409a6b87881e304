"""Hyperparameter boxes wider than the optimizer can take in one step (issue 24, section 2).

L-BFGS-B's first trial point is x - g, stopped only by the box: with length-scale bounds
1e-20..1e20 it used to land where the kernel is degenerate, return to the start and report
"converged" there (`scalegp fit ... --length-scale-bounds 1e-20 1e20`: the start values and a
log likelihood of -494.9 where 211.7 is reached in the default box). Wide boxes are now
searched in moving windows (:func:`scalegp.inference.optimize._windowed_search`); a run that cannot
leave a non-stationary start is reported as not converged.
"""

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp import kernels
from scalegp.inference import optimize
from scalegp.cli import main
from scalegp.engine.hyperparameters import Hyperparameters


def _data_1d(n=200):
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(n)


def _fit(model_class, X, y, kernel_name, bounds, **options):
    kernel = kernels.get(kernel_name, length_scale=1.0, length_scale_bounds=bounds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model_class(kernel=kernel, noise_variance=0.1, normalize_y=True,
                           normalize_X=True, **options).fit(X, y)


def test_the_issue_example_through_the_api_reaches_the_default_box_optimum():
    """RFF, Gaussian kernel, 1-D: the wide box gives the default box's optimum (measured:
    211.72 both; before, -494.92 at the start values, reported as converged)."""
    X, y = _data_1d()
    options = dict(approximation=sg.Features("rff", n_components=64), random_state=0)
    default = _fit(sg.LowRankGPRegressor, X, y, "gaussian", (1e-2, 1e3), **options)
    wide = _fit(sg.LowRankGPRegressor, X, y, "gaussian", (1e-20, 1e20), **options)
    assert wide.optimization_result_.converged
    assert wide.kernel_.length_scale != 1.0
    # the same optimum up to L-BFGS-B's stopping tolerance (factr eps |f| ~ 5e-7)
    assert wide.log_marginal_likelihood_value_ == pytest.approx(
        default.log_marginal_likelihood_value_, abs=1e-4)


def test_the_issue_example_through_the_cli(tmp_path, capsys):
    """``scalegp fit --length-scale-bounds 1e-20 1e20`` (in process): no warning, converged,
    the default box's log likelihood (measured: 218.16 both; before, -337.2 with a warning
    only because it was below the noise-only model)."""
    X, y = _data_1d()
    data = tmp_path / "d.csv"
    data.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n"
                                      for a, b in zip(X[:, 0].tolist(), y.tolist())))
    values = {}
    for label, bounds in (("default", ("1e-2", "1e3")), ("wide", ("1e-20", "1e20"))):
        out = tmp_path / f"{label}.npz"
        code = main(["fit", "--approximation", "rff", str(data), "--target", "y", "--out", str(out), "--kernel",
                     "gaussian", "--n-components", "64", "--seed", "0",
                     "--length-scale-bounds", *bounds])
        stderr = capsys.readouterr().err
        assert code == 0, stderr
        assert "warning" not in stderr, stderr
        model = sg.load(out)
        assert model.optimization_result_.converged
        values[label] = model.log_marginal_likelihood_value_
    assert values["wide"] == pytest.approx(values["default"], abs=1e-4)


@pytest.mark.parametrize("lower", [1e-20, 1e-100, 1e-300])
@pytest.mark.parametrize("kernel_name", ["gaussian", "matern52", "matern12"])
@pytest.mark.parametrize("model", ["exact", "nystrom"])
def test_absurd_widths_reach_the_default_box_optimum(lower, kernel_name, model):
    """The class: for every absurd width, kernel and model the wide box ends where the
    default box does (up to L-BFGS-B's tolerance), converged. 2-D, 80 rows (measured: equal
    to 1e-6 in every case; before, e.g. the exact Gaussian GP ended at the noise-only
    -283.8 instead of 50.2 on 200 rows, and 1e-300 bounds crashed)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 3, size=(80, 2))
    y = np.sin(2 * X.sum(axis=1)) + 0.05 * rng.standard_normal(80)
    model_class, options = ((sg.ExactGPRegressor, {}) if model == "exact" else
                            (sg.LowRankGPRegressor, dict(approximation=sg.Nystrom(
                                n_components=40), random_state=0)))
    default = _fit(model_class, X, y, kernel_name, (1e-2, 1e3), **options)
    wide = _fit(model_class, X, y, kernel_name, (lower, 1 / lower), **options)
    assert wide.optimization_result_.converged
    assert wide.log_marginal_likelihood_value_ == pytest.approx(
        default.log_marginal_likelihood_value_, abs=1e-3)


@pytest.mark.parametrize("noise_start", [1e-2, 0.1])     # the estimators', the CLI's
@pytest.mark.parametrize("kernel_name", ["matern52", "gaussian"])
def test_default_boxes_are_searched_as_before(noise_start, kernel_name):
    """No default box reaches further than WIDE_BOX from its default start (kernel bounds
    (1e-2, 1e2) and (1e-5, 1e5) from 1, noise (1e-6, 1e5) from 1e-2 or 0.1), so the windows
    never apply to them: the search is L-BFGS-B in the whole box (same path, same floats)."""
    X, y = _data_1d(80)
    hyperparameters = Hyperparameters(kernels.get(kernel_name), noise_start, (1e-6, 1e5))
    objective = sg.ExactMarginalLikelihood(hyperparameters, X, y)
    learned = optimize.maximize_likelihood(objective, hyperparameters.theta,
                                           hyperparameters.bounds, windows=True)
    whole = optimize.maximize_likelihood(objective, hyperparameters.theta,
                                         hyperparameters.bounds, windows=False)
    np.testing.assert_array_equal(learned.theta, whole.theta)
    assert learned.n_evaluations == whole.n_evaluations


class _OnlyTheStart:
    """A concave objective whose value is finite only at its start: L-BFGS-B cannot move."""

    def __init__(self, start):
        self.start = np.asarray(start, dtype=float)

    def __call__(self, theta):
        if np.array_equal(theta, self.start):
            return -float(np.sum((theta - 3.0) ** 2)), -2 * (theta - 3.0)
        return -np.inf, np.zeros_like(theta)


@pytest.mark.parametrize("windows", [False, True])
def test_a_run_that_cannot_leave_a_non_stationary_start_is_not_converged(windows):
    start = np.array([0.0, 1.0])
    objective = _OnlyTheStart(start)
    result = optimize.maximize_likelihood(objective, start, np.array([[-50.0, 50.0]] * 2),
                                          windows=windows)
    np.testing.assert_array_equal(result.theta, start)
    assert not result.converged
    assert result.message.startswith("NO PROGRESS")
    assert "projected gradient there is 6" in result.message


def test_a_stationary_start_still_converges():
    """The no-progress rule needs a gradient: a start at the optimum is converged."""
    objective = _OnlyTheStart([3.0, 3.0])
    result = optimize.maximize_likelihood(objective, np.array([3.0, 3.0]),
                                          np.array([[-50.0, 50.0]] * 2), windows=True)
    assert result.converged


def test_windows_move_to_a_far_optimum_and_stop_when_they_cannot_reach_it():
    """An objective rising toward its upper bound: windows of +-log(100) move there (each
    move raises it); a bound further than MAX_WINDOW_MOVES windows is reported."""
    def rising(theta):
        return float(theta[0]), np.array([1.0])

    near = optimize.WINDOW * (optimize.MAX_WINDOW_MOVES - 5)
    with pytest.warns(sg.BoundaryWarning):
        reached = optimize.maximize_likelihood(rising, np.zeros(1),
                                               np.array([[-near, near]]), windows=True)
    assert reached.converged and reached.theta[0] == pytest.approx(near)
    far = optimize.WINDOW * (optimize.MAX_WINDOW_MOVES + 5)
    stopped = optimize.maximize_likelihood(rising, np.zeros(1), np.array([[-far, far]]),
                                           windows=True)
    assert not stopped.converged and stopped.message.startswith("STILL MOVING")
    assert stopped.theta[0] == pytest.approx(optimize.WINDOW * (optimize.MAX_WINDOW_MOVES + 1))


def test_restarts_in_a_wide_box_are_drawn_near_the_start():
    """Restarts of a parameter with a wide box are drawn within WIDE_BOX of the start, not
    at length scales like 1e17."""
    seen = []

    def record(theta):
        seen.append(theta.copy())
        return -float(theta @ theta), -2 * theta

    optimize.maximize_likelihood(record, np.zeros(1), np.array([[-700.0, 700.0]]),
                                 n_restarts=20, rng=0, windows=True)
    assert np.max(np.abs(seen)) <= optimize.WIDE_BOX


def test_the_fit_warns_when_the_optimizer_made_no_progress(monkeypatch):
    """The estimator reports a no-progress run as a ConvergenceWarning naming it."""
    X, y = _data_1d(40)

    class Stuck(sg.ExactGPRegressor):
        def _objective(self, *args, **kwargs):
            inner = super()._objective(*args, **kwargs)
            start = None

            class Objective:
                def __call__(self, theta):
                    nonlocal start
                    start = theta.copy() if start is None else start
                    return inner(theta) if np.array_equal(theta, start) else (
                        -np.inf, np.zeros_like(theta))

                def posterior(self, theta):
                    return inner.posterior(theta)
            return Objective()

    with pytest.warns(sg.ConvergenceWarning, match="NO PROGRESS"):
        model = Stuck(normalize_y=True).fit(X, y)
    assert not model.optimization_result_.converged
