"""The default predictive variance of Nystrom-type maps (issue 24, section 2).

Nystrom and random-projection features span the knots (or the projection's basis): q(x, x) =
|psi(x)|^2 vanishes away from them, and so did the subset-of-regressors std that ``predict``
returned by default under ``objective="dtc"`` (0.000-0.022 with all 200 training points as
knots where the exact GP gives 0.70-1.0; std 0 far from the data with 40 knots). The default
is now the DTC predictive, which adds c(x) = k(x, x) - q(x, x)
(:func:`scalegp.engine.noise.default_diag_correction`): with all training points as knots the model
is the exact GP, for the std too. ``scalegp predict --[no-]diag-correction`` chooses as the
API's ``diag_correction`` does.
"""

import warnings

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
from scalegp import features, kernels
from scalegp.cli import main
from scalegp.engine.noise import default_diag_correction
from scalegp.estimators.configuration import make_approximation

MAPS = ["nystrom", "random-projection"]
EPS = np.finfo(float).eps


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X.sum(axis=1)) + 0.1 * rng.standard_normal(n)


def _low_rank(approximation, X, y, kernel, m=None, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # K_ZZ jitter notes
        return low_rank(approximation, kernel=kernel, noise_variance=0.01, optimize=False,
                        normalize_y=True, random_state=0, n_components=m or X.shape[0],
                        approximation_options=({"knots": X} if approximation == "nystrom"
                                               and m is None else None),
                        **options).fit(X, y)


def _test_points(rng, d):
    """Inside the data, just outside it, and 10 to 30 length scales away."""
    return np.vstack([rng.uniform(-2, 2, (5, d)), np.full((1, d), 2.5), np.full((1, d), -2.8),
                      np.full((1, d), 8.0), np.full((1, d), -20.0)])


@pytest.mark.parametrize("kernel_name", ["matern12", "matern32", "matern52", "gaussian",
                                         "cauchy"])
@pytest.mark.parametrize("approximation", MAPS)
def test_all_training_points_as_knots_are_the_exact_gp_by_default(kernel_name, approximation):
    """Mean, std and covariance of the default ``predict`` against the exact GP at the same
    hyperparameters. Q = K up to the rounding of solves with K: relative error
    eps cond(K) n (measured 1e-16 to 3e-14 against tolerances 1e-12 to 4e-8; the
    subset-of-regressors variance was off by 0.6 here)."""
    X, y = _data()
    kernel = kernels.get(kernel_name, length_scale=0.7, variance=1.3)
    tolerance = EPS * np.linalg.cond(kernel(X)) * X.shape[0]
    assert tolerance < 1e-7
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.01, optimize=False,
                                normalize_y=True, normalize_X=False).fit(X, y)
    model = _low_rank(approximation, X, y, kernel)
    X_test = _test_points(np.random.default_rng(1), 2)
    mean_ref, std_ref = exact.predict(X_test, return_std=True)
    mean, std = model.predict(X_test, return_std=True)
    scale = model.y_train_std_ ** 2 * kernel.variance
    np.testing.assert_allclose(mean, mean_ref, rtol=0, atol=tolerance * np.abs(y).max())
    np.testing.assert_allclose(std**2, std_ref**2, rtol=0, atol=tolerance * scale)
    # the covariance has the correction on its diagonal (FITC's test conditional): its
    # diagonal is the exact GP's; off it, q(x, x') stands for k(x, x')
    _, cov = model.predict(X_test, return_cov=True)
    np.testing.assert_allclose(np.diag(cov), std_ref**2, rtol=0, atol=tolerance * scale)
    _, std_noisy = model.predict(X_test, return_std=True, include_noise=True)
    _, std_noisy_ref = exact.predict(X_test, return_std=True, include_noise=True)
    np.testing.assert_allclose(std_noisy**2, std_noisy_ref**2, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("approximation", MAPS)
def test_the_issue_1d_example(approximation):
    """150 knots on 150 points, 1-D: the std just outside the data and far from it is the
    exact GP's (measured: 0.547 and 1.000 both; the SoR std was 0.368 and 0.000)."""
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-2, 2, (150, 1)), axis=0)
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(150)
    kernel = sg.Matern(nu=2.5, length_scale=0.5, variance=1.0)
    tolerance = EPS * np.linalg.cond(kernel(X)) * X.shape[0]
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.01, optimize=False,
                                normalize_y=True, normalize_X=False).fit(X, y)
    model = _low_rank(approximation, X, y, kernel)
    X_test = np.array([[2.3], [3.0], [10.0]])
    _, std_ref = exact.predict(X_test, return_std=True)
    _, std = model.predict(X_test, return_std=True)
    scale = model.y_train_std_ ** 2
    np.testing.assert_allclose(std**2, std_ref**2, rtol=0, atol=tolerance * scale)
    assert std_ref[-1] == pytest.approx(model.y_train_std_, rel=1e-12)   # the prior, far away
    _, sor = model.predict(X_test, return_std=True, diag_correction=False)
    assert sor[-1] < 1e-6 * std[-1]            # what the default used to return


@pytest.mark.parametrize("approximation", MAPS)
@pytest.mark.parametrize("kernel_name", ["gaussian", "matern32"])
def test_forty_knots_predict_the_prior_std_far_from_the_data(approximation, kernel_name):
    """Far from the data k(x*, X) ~ 0, so the posterior is the prior: std = sqrt(s) y_std
    (and sqrt(s + s2) y_std with the noise), to the size of k(x*, X) (exp(-50^2 / 2) and
    exp(-50 sqrt(3)) here: below rounding). The SoR std there is 0."""
    X, y = _data(200)
    model = _low_rank(approximation, X, y, kernels.get(kernel_name, length_scale=1.0), m=40)
    far = np.array([[50.0, 50.0], [-60.0, 10.0]])
    _, std = model.predict(far, return_std=True)
    _, noisy = model.predict(far, return_std=True, include_noise=True)
    prior = model.kernel_.variance
    np.testing.assert_allclose(std, np.sqrt(prior) * model.y_train_std_, rtol=1e-12)
    np.testing.assert_allclose(noisy, np.sqrt(prior + model.noise_variance_)
                               * model.y_train_std_, rtol=1e-12)
    _, sor = model.predict(far, return_std=True, diag_correction=False)
    assert np.all(sor < 1e-6)
    draws = model.sample_y(far, n_samples=4000, random_state=0)
    # the draws' spread is the predictive std: 4000 Gaussian draws, 5 standard errors
    np.testing.assert_allclose(draws.std(axis=1), std, rtol=5 / np.sqrt(2 * 4000))


def test_the_default_corrects_exactly_the_nystrom_type_maps_and_fitc_vfe():
    """The rule: corrected for the maps whose q(x, x) is a projection (bounded_by_kernel:
    nystrom, random-projection) under every objective and for every map under fitc / vfe;
    the weight-space predictive of the other maps under dtc is unchanged."""
    corrected = {name for name in features.names()
                 if default_diag_correction(features.get(name), "dtc")}
    assert corrected == {"nystrom", "random-projection"}
    for name in features.names():
        for objective in ("fitc", "vfe"):
            assert default_diag_correction(features.get(name), objective)


@pytest.mark.parametrize("approximation, corrected", [("nystrom", True),
                                                      ("random-projection", True),
                                                      ("glf", False)])
def test_the_estimator_default_is_the_rule(approximation, corrected):
    X, y = _data(80)
    model = _low_rank(approximation, X, y, sg.Gaussian(), m=20)
    X_test = _test_points(np.random.default_rng(2), 2)
    _, std = model.predict(X_test, return_std=True)
    _, chosen = model.predict(X_test, return_std=True, diag_correction=corrected)
    _, other = model.predict(X_test, return_std=True, diag_correction=not corrected)
    np.testing.assert_array_equal(std, chosen)
    assert not np.array_equal(std, other)


# ----------------------------------------------------------------------------- CLI
@pytest.fixture
def table(tmp_path):
    X, y = _data(80)
    path = tmp_path / "train.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="a,b,y", comments="")
    far = tmp_path / "far.csv"
    np.savetxt(far, np.vstack([X[:5], [[30.0, 30.0], [-9.0, 4.0]]]), delimiter=",",
               header="a,b", comments="")
    return path, far


def _predict_csv(tmp_path, model, data, *flags):
    out = tmp_path / f"pred{len(list(tmp_path.iterdir()))}.csv"
    assert main(["predict", str(model), str(data), "--out", str(out), "--quiet",
                 *flags]) == 0
    return np.loadtxt(out, delimiter=",", skiprows=1)


def test_scalegp_predict_chooses_the_variance_as_the_api_does(tmp_path, table):
    train, far = table
    model_path = tmp_path / "model.npz"
    assert main(["fit", str(train), "--target", "y", "--approximation", "nystrom",
                 "--n-components", "20", "--out", str(model_path), "--quiet"]) == 0
    model = sg.load(model_path)
    X = np.loadtxt(far, delimiter=",", skiprows=1)
    for flags, option in (((), None), (("--diag-correction",), True),
                          (("--no-diag-correction",), False)):
        values = _predict_csv(tmp_path, model_path, far, *flags)
        mean, std = model.predict(X, return_std=True, diag_correction=option)
        np.testing.assert_array_equal(values[:, 0], mean)
        np.testing.assert_array_equal(values[:, 1], std)
    default = _predict_csv(tmp_path, model_path, far)
    off = _predict_csv(tmp_path, model_path, far, "--no-diag-correction")
    assert default[-2, 1] > 0.5 and off[-2, 1] < 1e-6      # far from the knots


@pytest.mark.parametrize("fit_flags", [("--approximation", "exact"),
                                       ("--approximation", "rff", "--local", "clusters")])
def test_scalegp_predict_refuses_the_flag_for_models_without_the_choice(tmp_path, table,
                                                                        capsys, fit_flags):
    train, far = table
    model_path = tmp_path / "model.npz"
    size = [] if "exact" in fit_flags else ["--n-components", "16"]   # exact has no features
    assert main(["fit", "--approximation", "rff", str(train), "--target", "y", *size, *fit_flags,
                 "--out", str(model_path), "--quiet"]) == 0
    out = tmp_path / "pred.csv"
    capsys.readouterr()
    assert main(["predict", str(model_path), str(far), "--out", str(out),
                 "--diag-correction"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--diag-correction chooses the variance of a global " \
                               "low-rank model" in error[0]
    assert not out.exists()


@pytest.mark.parametrize("local", ["clusters", "test-points", "neighbors"])
@pytest.mark.parametrize("approximation", MAPS)
def test_local_models_of_nystrom_type_maps_return_to_the_prior_far_from_the_data(
        local, approximation):
    """Was: local="clusters" and "neighbors" with 40 knots predicted std 0 far from the data
    (each centre's subset-of-regressors variance collapses away from its knots); the local
    posteriors now add c(x) = k(x, x) - q(x, x), as the global default does. Far away
    k(x*, X) ~ 0, so the exact GP's std is the prior's, sqrt(s) y_std (to exp(-8^2 / 2))."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (200, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    kernel = sg.Gaussian(length_scale=0.5, variance=1.3)
    far = np.array([[10.0], [50.0], [-300.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", sg.ApproximationWarning)
        model = sg.LowRankGPRegressor(make_approximation(approximation, n_components=40), kernel=kernel, noise_variance=0.01,
                                      optimize=False, local=local, random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
        _, std = model.predict(far, return_std=True)
    np.testing.assert_allclose(std, np.sqrt(kernel.variance) * model.y_train_std_, rtol=1e-10)


def test_a_local_model_confident_far_from_the_data_is_reported():
    """The far-from-the-data check of global maps covers local models too (GLF's periodic
    grid keeps a small variance there: measured std 0.04-0.15 against the prior's 1)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (200, 1))
    y = np.sin(3 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    kernel = sg.Gaussian(length_scale=0.5, variance=1.0)
    model = sg.LowRankGPRegressor("glf", kernel=kernel, noise_variance=0.01, optimize=False,
                                  local="clusters", random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.warns(sg.ApproximationWarning, match=r"glf \(m = 256\) is confident where "
                                                     r"the exact GP cannot be, at 3 of 4"):
        model.predict(np.array([[0.0], [10.0], [50.0], [-300.0]]))
