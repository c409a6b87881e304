"""Where a global map cannot resolve a setting, fit and predict say so once (issue 24 §2).

At fit: the relative Frobenius error of the training kernel matrix, estimated on the probe
rows (scalegp.local.resolution.training_kernel_error). At prediction: a latent variance below the
exact GP's least possible one (scalegp.local.resolution.exact_variance_floor) far from the data.
"""

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.local import resolution
from scalegp.estimators.configuration import make_approximation


def _smooth_1d(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 1))
    return X, np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def _smooth_2d(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(X[:, 0]) * np.cos(0.7 * X[:, 1]) + 0.1 * rng.standard_normal(n)


def test_issue_example_orf_on_20d_ard_inputs_warns_at_fit():
    """ORF with 512 features on 20-D inputs at unit ARD length scales: its training kernel
    matrix is over 100 % off (the issue measured 92 %)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 20))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(600)
    with pytest.warns(sg.ApproximationWarning,
                      match=r"orf with m = 512 columns cannot resolve .* % off K .*limit 50 %"):
        model = sg.LowRankGPRegressor(make_approximation("orf", n_components=512), kernel=sg.Gaussian(length_scale=np.ones(20)),
                                      optimize=False, random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    assert any("cannot resolve" in message for message in model.fit_warnings_)


@pytest.mark.parametrize("approximation, n_components, length_scale", [
    ("orf", 512, np.ones(20)), ("rff", 64, 0.3), ("nystrom", 40, 0.2), ("rff", 256, 1.0)])
def test_the_estimate_is_the_full_matrix_error(approximation, n_components, length_scale):
    """The probe-row estimate of ||K~ - K||_F / ||K||_F is the full n x n value within 10 %
    of the larger of it and the limit, so the decision is the full matrix's (measured: 0.4 %
    off for the ORF case; 0.003 for RFF at 1 %), for near-diagonal and smooth K alike."""
    rng = np.random.default_rng(1)
    n_dims = np.size(length_scale)
    X = rng.standard_normal((800, n_dims))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(800)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.LowRankGPRegressor(make_approximation(approximation, n_components=n_components),
                                      kernel=sg.Gaussian(length_scale=length_scale),
                                      optimize=False, random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    posterior = model.posterior_
    probe = X[np.linspace(0, 799, 64).astype(int)]
    estimate = resolution.training_kernel_error(posterior, probe, 800)
    Psi = posterior.features(X)
    K = posterior.kernel(X)
    full = np.linalg.norm(Psi @ Psi.T - K) / np.linalg.norm(K)
    assert abs(estimate - full) <= 0.1 * max(full, resolution.KERNEL_ERROR_LIMIT)


@pytest.mark.parametrize("approximation", ["rff", "orf", "qmc", "glf", "nystrom"])
@pytest.mark.parametrize("problem", [_smooth_1d, _smooth_2d])
def test_default_configurations_on_ordinary_data_are_silent(approximation, problem):
    # issue 28: no warning of any kind from a default configuration on data it suits
    # (GLF learns in the box its rule resolves; K_ZZ's jitter below KNOT_JITTER_QUIET is
    # recorded, not warned)
    X, y = problem()
    inside = np.random.default_rng(5).uniform(-2, 2, size=(50, X.shape[1]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = sg.LowRankGPRegressor(approximation, normalize_y=True, normalize_X=True,
                                      random_state=0).fit(X, y)
        model.predict(inside, return_std=True)


@pytest.mark.parametrize("approximation, n_components", [("rff", 64), ("glf", None)])
def test_confident_far_from_the_data_is_reported(approximation, n_components):
    """Far from the data the exact GP returns to its prior; these maps keep a small variance
    there (random features alias, GLF's grid is periodic)."""
    X, y = _smooth_1d()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.LowRankGPRegressor(make_approximation(approximation, n_components=n_components),
                                      normalize_y=True, normalize_X=False,
                                      noise_variance=1e-2, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.ApproximationWarning)
        model.predict(np.linspace(-2, 2, 41)[:, None], return_std=True)     # inside: silent
    far = np.array([[0.0], [10.0], [50.0], [-300.0]])
    with pytest.warns(sg.ApproximationWarning,
                      match=r"confident where the exact GP cannot be, at [1-3] of 4 test row"):
        model.predict(far)                          # the mean alone is checked too
    _, std = model.predict(far, return_std=True)
    prior_std = np.sqrt(model.kernel_.variance) * model.y_train_std_
    assert np.min(std[1:]) < 0.71 * prior_std       # what the warning is about


def test_nystrom_is_silent_far_from_the_data_with_its_default_correction_only():
    """A Nystrom prior collapses away from the knots: the default (DTC-corrected) variance
    returns to the prior there, the uncorrected one is reported."""
    X, y = _smooth_1d()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.LowRankGPRegressor(make_approximation("nystrom", n_components=64), normalize_y=True, random_state=0, normalize_X=False).fit(X, y)
    far = np.array([[10.0], [50.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.ApproximationWarning)
        model.predict(far, return_std=True)
        model.predict(far, return_std=True, diag_correction=True)
    with pytest.warns(sg.ApproximationWarning, match=r"confident where the exact GP cannot be"):
        model.predict(far, return_std=True, diag_correction=False)


@pytest.mark.parametrize("kernel", [
    sg.Gaussian(length_scale=0.4, variance=2.0),
    sg.Gaussian(length_scale=[0.3, 1.5], variance=1.0),
    sg.Matern(nu=1.5, length_scale=0.5), sg.Laplacian(length_scale=0.7),
    sg.Cauchy(length_scale=0.5)])
@pytest.mark.parametrize("noise_variance", [1e-4, 1e-2])
def test_the_floor_is_a_lower_bound_of_the_exact_variance(kernel, noise_variance):
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(120, 2))
    K = kernel(X) + noise_variance * np.eye(120)
    Xt = np.vstack([rng.uniform(-1, 1, size=(30, 2)), rng.uniform(-2.5, 2.5, size=(200, 2)),
                    rng.uniform(-6, 6, size=(200, 2))])             # inside, near, far
    k_star = kernel(Xt, X)
    exact = kernel.diag(Xt) - np.einsum("ij,ji->i", k_star, np.linalg.solve(K, k_star.T))
    floor = resolution.exact_variance_floor(kernel, Xt, (X.min(0), X.max(0)), 120,
                                            noise_variance)
    assert np.all(exact >= floor - 1e-12)
    assert np.sum(floor > 0.5 * kernel.diag(Xt)) >= 30          # not vacuous far away


def test_a_loaded_model_is_not_checked_at_prediction(tmp_path):
    X, y = _smooth_1d()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.LowRankGPRegressor(make_approximation("nystrom", n_components=64), normalize_y=True, random_state=0, normalize_X=False).fit(X, y)
    sg.save(model, tmp_path / "model.npz")
    loaded = sg.load(tmp_path / "model.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.ApproximationWarning)
        loaded.predict(np.array([[50.0]]))
