"""The variance calibration by the inputs (scalegp.estimators.variance_calibration): the
scale mixture's density (Eq. C.1), the log ratios' moments, the decision by nested
cross-validation, and GPRegressor's use of it (predictions, log densities, model files)."""

import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.stats

import scalegp as sg
from scalegp.errors import InvalidModelFileError
from scalegp.estimators import variance_calibration as vc


def heteroscedastic(n, seed=0):
    """y = sin(3 x) + sigma(x) e on [0, 2], sigma rising from 0.02 to 0.5."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 2, (n, 1))
    sigma = 0.02 + 0.24 * X[:, 0] ** 2
    return X, np.sin(3 * X[:, 0]) + sigma * rng.standard_normal(n), sigma


def homoscedastic(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 2, (n, 2))
    return X, np.sin(3 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.standard_normal(n)


def test_the_mixture_density_is_the_integral_over_h():
    """Against the trapezoid rule on 400,001 points of h in log space, for typical errors
    and outliers up to 300 standard deviations (where plain Gauss-Hermite nodes around m miss
    the mass: 24 of them were 0.29 off at e / sqrt(v) = 100, s = 1)."""
    cases = [(0.3, 0.5, -0.4, 0.7), (2.5, 0.1, 1.0, 1.5), (-0.01, 2.0, -3.0, 0.2),
             (4.0, 1.0, 0.0, 2.5), (10.0, 0.01, -2.0, 1.0), (30.0, 0.01, -3.0, 0.5),
             (0.0, 1.0, 0.0, 1.0)]
    for e, v, m, s in cases:
        h = np.linspace(m - 20 * s, m + 40 * s + 30, 400_001)
        log_integrand = (scipy.stats.norm.logpdf(e, scale=np.sqrt(v * np.exp(h)))
                         + scipy.stats.norm.logpdf(h, m, s))
        top = log_integrand.max()
        expected = top + np.log(np.trapezoid(np.exp(log_integrand - top), h))
        got = vc.mixture_log_density(np.array([e]), np.array([v]), np.array([m]),
                                     np.array([s]))[0]
        assert got == pytest.approx(expected, abs=1e-6)
    # s = 0: the Gaussian of variance v e^m
    np.testing.assert_allclose(
        vc.mixture_log_density(np.array([0.7]), np.array([0.3]), np.array([0.4]), np.zeros(1)),
        scipy.stats.norm.logpdf(0.7, scale=np.sqrt(0.3 * np.exp(0.4))), rtol=1e-12)
    # a density in e: it integrates to 1
    total, _ = scipy.integrate.quad(lambda e: np.exp(vc.mixture_log_density(
        np.array([e]), np.array([0.5]), np.array([-0.3]), np.array([1.2]))[0]), -60, 60,
        limit=400)
    assert total == pytest.approx(1.0, abs=1e-6)


def test_log_ratios_of_calibrated_errors_have_the_clipped_log_chi2_moments():
    """t = max(log chi2_1, -12) + 1.2704 for calibrated errors: mean 0.0040 and variance
    4.834 (numerical integration of the clipped log chi2_1 density; unclipped 0 and
    pi^2 / 2 = 4.935)."""
    rng = np.random.default_rng(0)
    v = np.exp(rng.uniform(-3, 1, 200_000))
    t = vc.log_ratios(np.sqrt(v) * rng.standard_normal(v.size), v)
    standard_error = np.sqrt(vc.LOG_CHI2_VARIANCE / v.size)
    assert abs(t.mean() - 0.0040) < 4 * standard_error
    # the sample variance's standard error: sqrt((mu_4 - sigma^4) / n), mu_4 = 135.4
    assert abs(t.var() - 4.834) < 4 * np.sqrt((135.4 - 4.834 ** 2) / v.size)
    assert vc.LOG_CHI2_VARIANCE == pytest.approx(np.pi ** 2 / 2)
    assert vc.log_ratios(np.zeros(1), np.ones(1))[0] == vc.LOWEST_LOG_RATIO - vc.LOG_CHI2_MEAN


def cv_residuals(X, y, folds):
    """An exact GP's cross-validated errors and predictive variances (noise included), at
    the hyperparameters learned on all rows."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.ExactGPRegressor(kernel=sg.Matern(nu=2.5, length_scale=np.ones(X.shape[1])),
                                    noise_variance=0.01).fit(X, y)
        errors, variances = np.empty(y.size), np.empty(y.size)
        for held in folds:
            train = np.ones(y.size, dtype=bool)
            train[held] = False
            fold = sg.ExactGPRegressor(kernel=model.kernel_, noise_variance=model.noise_variance_,
                                       optimize=False).fit(X[train], y[train])
            mean, std = fold.predict(X[held], return_std=True, include_noise=True)
            errors[held], variances[held] = y[held] - mean, std ** 2
    return model, errors, variances


def test_heteroscedastic_errors_are_calibrated_and_predicted_better():
    """sigma(x) varies 25-fold: the calibration is kept and its factor follows sigma^2
    (measured rank correlation 0.985); on new rows its mixture's NLPD is lower than the
    homoscedastic GP's (measured: 0.71 lower on 2,000 test rows, where the nested
    cross-validation predicted 0.59)."""
    X, y, _ = heteroscedastic(300)
    folds = np.array_split(np.random.default_rng(1).permutation(y.size), 5)
    model, errors, variances = cv_residuals(X, y, folds)
    calibration = vc.learn(X, errors, variances, folds)
    before, mixture, gaussian = calibration.cv_nlpd
    assert calibration.accepted and mixture < before - 0.3 and gaussian < before
    X_test, y_test, sigma = heteroscedastic(2000, seed=2)
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    plain = -np.mean(scipy.stats.norm.logpdf(y_test, mean, std))
    calibrated = -np.mean(calibration.log_density(X_test, y_test - mean, std ** 2))
    assert calibrated < plain - 0.5
    factor = calibration.variance_factor(X_test)
    rank = scipy.stats.spearmanr(factor, sigma).statistic
    assert rank > 0.9


def test_homoscedastic_errors_are_not_calibrated():
    """One noise level: the nested cross-validation finds no gain (measured gains 0.002,
    0.004 and -0.002 on three draws, the threshold being MIN_GAIN = 0.01)."""
    for seed in range(3):
        X, y = homoscedastic(300, seed)
        folds = np.array_split(np.random.default_rng(seed).permutation(y.size), 5)
        _, errors, variances = cv_residuals(X, y, folds)
        calibration = vc.learn(X, errors, variances, folds)
        assert not calibration.accepted, calibration.describe()


@pytest.fixture(scope="module")
def calibrated_model():
    X, y, _ = heteroscedastic(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return X, y, sg.GPRegressor(random_state=0).fit(X, y)


def test_gp_regressor_keeps_the_calibration_and_predicts_with_it(calibrated_model):
    X, y, model = calibrated_model
    calibration = model.variance_calibration_
    assert calibration is not None
    assert any(note.startswith("predictive variance calibrated") for note in
               model.selection_.notes)
    X_test, y_test, _ = heteroscedastic(200, seed=3)
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    chosen = _chosen(model)
    plain_mean, plain_std = chosen.predict(X_test, return_std=True, include_noise=True)
    np.testing.assert_array_equal(mean, plain_mean)             # the mean is the model's
    np.testing.assert_allclose(std, plain_std * np.sqrt(calibration.variance_factor(X_test)),
                               rtol=1e-12)
    # the latent std is the chosen model's
    np.testing.assert_array_equal(model.predict(X_test, return_std=True)[1],
                                  chosen.predict(X_test, return_std=True)[1])
    np.testing.assert_allclose(model.log_predictive_density(X_test, y_test),
                               calibration.log_density(X_test, y_test - mean, plain_std ** 2),
                               rtol=1e-12)
    with pytest.raises(NotImplementedError, match="no joint covariance"):
        model.predict(X_test, return_cov=True, include_noise=True)


def _chosen(model):
    """What the calibration sits on: the chosen model's prediction, the average over its
    hyperparameters where auto integrated them out (Eq. A.2), else the estimator's."""
    average = model.hyperparameter_average_
    return model.estimator_ if average is None else average


@pytest.fixture(scope="module")
def plain_model(calibrated_model):
    X, y, _ = calibrated_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sg.GPRegressor(random_state=0, calibrate_variance=False).fit(X, y)


def test_gp_regressor_without_calibration(calibrated_model, plain_model):
    X, y, _ = calibrated_model
    plain = plain_model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        known = sg.GPRegressor(random_state=0).fit(X, y, sample_noise_variance=np.full(
            y.size, 1e-4))
    assert plain.variance_calibration_ is None
    mean, std = plain.predict(X[:5], return_std=True, include_noise=True)
    np.testing.assert_allclose(plain.log_predictive_density(X[:5], y[:5]),
                               scipy.stats.norm.logpdf(y[:5], mean, std), rtol=1e-12)
    assert known.variance_calibration_ is None
    assert any("known noise variances" in note for note in known.selection_.notes)
    with pytest.raises(ValueError, match="calibrate_variance only appl"):
        sg.GPRegressor(approximation="exact", calibrate_variance=True).fit(X, y)


def test_the_mixture_interval_has_the_integral_coverage():
    """Eq. C.2: the half width q of the central interval against the coverage
    int (2 Phi(q / sqrt(v e^h)) - 1) N(h; m, s^2) dh by the trapezoid rule on 400,001
    points, for levels 0.5 to 0.999 and s up to 3; s = 0 is the Gaussian's."""
    h_grid = np.linspace(-40, 40, 400_001)
    for v, m, s in [(2.0, 0.7, 0.3), (0.5, -1.0, 1.0), (1.0, 0.0, 2.0), (3.0, 2.0, 3.0)]:
        for level in (0.5, 0.9, 0.99, 0.999):
            q = vc.mixture_half_width(np.array([v]), np.array([m]), np.array([s]), level)[0]
            scale = np.sqrt(v * np.exp(m + s * h_grid))
            tail = np.trapezoid(2 * scipy.stats.norm.sf(q / scale)
                                * scipy.stats.norm.pdf(h_grid), h_grid)
            assert 1 - tail == pytest.approx(level, abs=1e-6), (v, m, s, level)
    gaussian = vc.mixture_half_width(np.array([0.3]), np.array([0.4]), np.zeros(1), 0.9)
    np.testing.assert_allclose(gaussian, scipy.stats.norm.ppf(0.95) * np.sqrt(
        0.3 * np.exp(0.4)), rtol=1e-12)
    # heavier tails than the Gaussian of the mixture's variance at high levels
    v, m, s = np.ones(1), np.zeros(1), np.ones(1)
    assert vc.mixture_half_width(v, m, s, 0.99)[0] > scipy.stats.norm.ppf(0.995) * np.exp(0.25)


def test_calibrated_intervals_hold_their_coverage_where_the_noise_differs(calibrated_model,
                                                                          plain_model):
    """On the heteroscedastic data (sigma from 0.02 to 0.98 across [0, 2]), 4,000 new
    points: the homoscedastic 90 % intervals cover 1.0 where the noise is low and 0.68
    where it is high (measured), the calibrated ones 0.87 to 0.95; both about 0.9 over all
    rows. The rule: in each quarter of the domain the calibrated coverage is within 0.06
    of 0.9 (binomial sd 0.0095 per quarter), and the homoscedastic one misses by more
    than 0.15 somewhere."""
    _, _, model = calibrated_model
    X_test, y_test, _ = heteroscedastic(4000, seed=5)
    quarters = np.minimum((X_test[:, 0] / 0.5).astype(int), 3)
    worst = {}
    for name, fitted in (("calibrated", model), ("plain", plain_model)):
        lower, upper = fitted.predict_interval(X_test, 0.9, include_noise=True)
        inside = (lower <= y_test) & (y_test <= upper)
        worst[name] = max(abs(inside[quarters == k].mean() - 0.9) for k in range(4))
        assert abs(inside.mean() - 0.9) < 0.03, name
    assert worst["calibrated"] < 0.06 and worst["plain"] > 0.15, worst
    # its pieces: the mixture's q with noise, the Gaussian's for the latent function
    mean, std = _chosen(model).predict(X_test[:50], return_std=True, include_noise=True)
    lower, upper = model.predict_interval(X_test[:50], 0.8, include_noise=True)
    half = model.variance_calibration_.half_width(X_test[:50], std ** 2, 0.8)
    np.testing.assert_allclose(lower, mean - half, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(upper, mean + half, rtol=1e-12, atol=1e-12)
    mean, std = model.predict(X_test[:50], return_std=True)
    lower, upper = model.predict_interval(X_test[:50], 0.8)
    np.testing.assert_allclose(upper - mean, scipy.stats.norm.ppf(0.9) * std, rtol=1e-12)
    np.testing.assert_allclose(mean - lower, scipy.stats.norm.ppf(0.9) * std, rtol=1e-12)
    for level in (0, 1, 1.5, True, "0.9"):
        with pytest.raises(ValueError, match="level must be a number strictly between"):
            model.predict_interval(X_test[:5], level)


def test_a_model_file_keeps_the_calibration(calibrated_model, tmp_path):
    X, y, model = calibrated_model
    path = tmp_path / "m.npz"
    sg.save(model, path)
    loaded = sg.load(path)
    X_test = np.linspace(0, 2, 50)[:, None]
    for a, b in zip(loaded.predict(X_test, return_std=True, include_noise=True),
                    model.predict(X_test, return_std=True, include_noise=True)):
        np.testing.assert_array_equal(a, b)
    assert loaded.variance_calibration_.cv_nlpd == model.variance_calibration_.cv_nlpd
    # an altered log ratio is refused (the rebuilt likelihood differs)
    with np.load(path) as archive:
        arrays = dict(archive)
    arrays["variance_calibration.t"] = arrays["variance_calibration.t"] + 0.5
    altered = tmp_path / "altered.npz"
    np.savez(altered, **arrays)
    with pytest.raises(InvalidModelFileError, match="variance calibration"):
        sg.load(altered)
    # arrays without the metadata are refused
    plain = {key: value for key, value in arrays.items()}
    import json
    metadata = json.loads(bytes(plain["metadata"]).decode())
    del metadata["front_door"]["variance_calibration"]
    plain["metadata"] = np.frombuffer(json.dumps(metadata).encode(), dtype=np.uint8)
    orphan = tmp_path / "orphan.npz"
    np.savez(orphan, **plain)
    with pytest.raises(InvalidModelFileError, match="without metadata"):
        sg.load(orphan)


def test_command_line_calibrates_by_default_and_says_so(tmp_path, capsys):
    """``scalegp fit`` with auto prints the calibration's note and ``scalegp info`` shows it;
    ``--no-variance-calibration`` keeps the Gaussian, and is refused where auto is not used."""
    from tests.test_cli_inputs import run, write_csv
    X, y, _ = heteroscedastic(200)
    path = write_csv(tmp_path / "d.csv", ["x", "y"], np.column_stack([X, y]))
    out = tmp_path / "m.npz"
    code, printed, err = run(capsys, "fit", path, "--target", "y", "--seed", "0",
                             "--out", out)
    assert code == 0, err
    assert "note: predictive variance calibrated by the inputs" in printed + err
    assert sg.load(out).variance_calibration_ is not None
    code, printed, err = run(capsys, "info", out)
    assert code == 0 and "predictive variance calibrated by the inputs" in printed
    plain = tmp_path / "p.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--seed", "0",
                       "--no-variance-calibration", "--out", plain)
    assert code == 0, err
    assert sg.load(plain).variance_calibration_ is None
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "exact",
                       "--no-variance-calibration", "--out", tmp_path / "e.npz")
    assert code != 0 and "--no-variance-calibration" in err


def test_command_line_writes_the_calibrated_interval(calibrated_model, plain_model, tmp_path,
                                                     capsys):
    """``scalegp predict``: a calibrated model with --include-noise adds its 95 % interval
    (not mean +- 1.96 std); --interval LEVEL adds one for any model; without either an
    uncalibrated model writes mean and std only; a level outside (0, 1) is refused."""
    from tests.test_cli_inputs import run, write_csv
    _, _, model = calibrated_model
    X_test = np.linspace(0, 2, 40)[:, None]
    data = write_csv(tmp_path / "x.csv", ["x"], X_test)
    for name, fitted in (("calibrated", model), ("plain", plain_model)):
        sg.save(fitted, tmp_path / f"{name}.npz")

    def table(*options):
        out = tmp_path / "p.csv"
        code, _, err = run(capsys, "predict", tmp_path / options[0], data, *options[1:],
                           "--out", out)
        assert code == 0, err
        header = out.read_text().splitlines()[0].split(",")
        return header, np.loadtxt(out, delimiter=",", skiprows=1)

    header, values = table("calibrated.npz", "--include-noise")
    assert header == ["mean", "std", "lower_95", "upper_95"]
    lower, upper = model.predict_interval(X_test, 0.95, include_noise=True)
    np.testing.assert_allclose(values[:, 2:], np.column_stack([lower, upper]), rtol=1e-12)
    assert table("calibrated.npz")[0] == ["mean", "std"]       # latent: Gaussian
    assert table("plain.npz", "--include-noise")[0] == ["mean", "std"]
    X, y, _ = calibrated_model
    sg.save(sg.ExactGPRegressor().fit(X, y), tmp_path / "exact.npz")   # no predict_interval
    for name in ("plain.npz", "exact.npz"):
        header, values = table(name, "--interval", "0.9")
        assert header == ["mean", "std", "lower_90", "upper_90"]
        np.testing.assert_allclose(values[:, 3] - values[:, 0],
                                   scipy.stats.norm.ppf(0.95) * values[:, 1], rtol=1e-9)
        np.testing.assert_allclose(values[:, 0] - values[:, 2],
                                   scipy.stats.norm.ppf(0.95) * values[:, 1], rtol=1e-9)
    header, _ = table("calibrated.npz", "--include-noise", "--interval", "0.975")
    assert header[2:] == ["lower_97.5", "upper_97.5"]
    code, _, err = run(capsys, "predict", tmp_path / "plain.npz", data, "--interval", "1.5")
    assert code != 0 and "--interval" in err and "between 0 and 1" in err


def test_the_calibration_is_priced_against_the_seconds_left():
    """auto_calibration.calibrate_validated: priced at the slowest learned exact
    candidate's seconds; over the seconds left it is not learned, and the note says so
    with both numbers."""
    from scalegp.estimators import auto_calibration
    from scalegp.estimators.auto_validation import Scored
    X, y, _ = heteroscedastic(100)
    best = Scored("exact gaussian", "exact", None, None)
    best.cv_errors, best.cv_variances = y - y.mean(), np.full(y.size, y.var())
    best.cv_folds = np.array_split(np.arange(y.size), 5)
    best.first_seconds = 4.0
    calibration, note = auto_calibration.calibrate_validated(X, best, [best], None, left=3.0)
    assert calibration is None and "priced at 4 s with 3 s left" in note
    calibration, note = auto_calibration.calibrate_validated(X, best, [best], np.ones(y.size),
                                                             left=60.0)
    assert calibration is None and "known noise variances" in note
    calibration, note = auto_calibration.calibrate_validated(X, best, [best], None, left=60.0)
    assert note.startswith("predictive variance")


def test_the_pilot_path_calibrates_from_held_back_rows():
    """calibrate_held_out: a Vecchia model of 6,000 heteroscedastic rows, a copy at its
    learned hyperparameters conditioned on 90 % of them, h learned from the 600 held back
    (kept: nested CV NLPD lower), and on 4,000 new points the calibrated 90 % intervals
    cover within 0.06 of 0.9 in each quarter of the domain where the model's own miss by
    more than 0.15 somewhere; the mean, and so the RMSE, is the model's."""
    from scalegp.estimators import auto_calibration
    X, y, _ = heteroscedastic(6000, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.VecchiaGPRegressor(kernel="matern32", n_neighbors=15,
                                      random_state=0).fit(X, y)
    calibration, note = auto_calibration.calibrate_held_out(
        model, X, y, step_seconds=0.01, left=120.0, rng=np.random.default_rng(0))
    assert calibration is not None and calibration.accepted, note
    assert calibration.X.shape == (600, 1) and note.startswith("predictive variance calibrated")
    X_test, y_test, _ = heteroscedastic(4000, seed=7)
    quarters = np.minimum((X_test[:, 0] / 0.5).astype(int), 3)
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    half = {"calibrated": calibration.half_width(X_test, std ** 2, 0.9),
            "plain": scipy.stats.norm.ppf(0.95) * std}
    worst = {}
    for name, q in half.items():
        inside = np.abs(y_test - mean) <= q
        worst[name] = max(abs(inside[quarters == k].mean() - 0.9) for k in range(4))
    assert worst["calibrated"] < 0.06 and worst["plain"] > 0.15, worst
    plain_nlpd = -np.mean(sg.metrics.gaussian_log_density(y_test - mean, std ** 2))
    assert -np.mean(calibration.log_density(X_test, y_test - mean, std ** 2)) < plain_nlpd - 0.2
    # what it does not calibrate, and says so
    calibration, note = auto_calibration.calibrate_held_out(
        model, X, y, step_seconds=10.0, left=60.0, rng=np.random.default_rng(0))
    assert calibration is None and "priced at" in note and "60 s left" in note
    calibration, note = auto_calibration.calibrate_held_out(
        model, X[:150], y[:150], step_seconds=0.01, left=60.0, rng=np.random.default_rng(0))
    assert calibration is None and "15 held-back rows are too few" in note
    # a failing copy or GP of h leaves the model uncalibrated, with the reason
    def fail(*args, **kwargs):
        raise np.linalg.LinAlgError("K is not positive definite")
    from unittest import mock
    from scalegp.estimators import auto_validation
    for target in (auto_validation, "held_out_residuals"), (vc, "learn"):
        with mock.patch.object(*target, fail):
            calibration, note = auto_calibration.calibrate_held_out(
                model, X, y, step_seconds=0.01, left=60.0, rng=np.random.default_rng(0))
        assert calibration is None and "failed: K is not positive definite" in note


def test_the_held_out_copy_is_the_fitted_model():
    """auto_validation.fixed_copy, conditioned on all rows in the standardized units, predicts
    what the fitted model predicts: Vecchia with its prediction neighbours, and Nystrom-VFE
    with the knots it learned (a copy that chose its knots again would be another model),
    so that the held-out calibration's errors are the chosen model's."""
    from scalegp.estimators import auto_calibration, auto_validation
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 3, (800, 3)) * [1, 10, 0.1] + [0, 5, 2]
    y = 5 * np.sin(X[:, 0]) + 0.3 * X[:, 1] + (0.05 + 0.3 * X[:, 0]) * rng.standard_normal(800)
    models = [sg.LowRankGPRegressor(approximation=sg.Nystrom(
                  n_components=30, objective="vfe", knots="random", learn_knots=10),
                  random_state=0),
              sg.VecchiaGPRegressor(kernel="matern32", n_neighbors=10,
                                    n_neighbors_predict="auto", random_state=0)]
    Xs, ys, y_std = auto_validation.standardized(X, y, True, True)
    for model in models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y)
        copy = auto_validation.fixed_copy(model).fit(Xs, ys)
        mean, std = model.predict(X[:50], return_std=True)
        copy_mean, copy_std = copy.predict(Xs[:50], return_std=True)
        np.testing.assert_allclose(copy_mean * y_std + y.mean(), mean, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(copy_std * y_std, std, rtol=1e-10, atol=1e-12)
        calibration, note = auto_calibration.calibrate_held_out(
            model, X, y, step_seconds=0.01, left=60.0, rng=np.random.default_rng(0))
        assert note.startswith("predictive variance") and "80 held-back rows" in note
    # on part of the rows the copy keeps the learned knots, not knots of those rows
    part = auto_validation.fixed_copy(models[0]).fit(Xs[100:], ys[100:])
    np.testing.assert_array_equal(part.feature_map_.knots, models[0].feature_map_.knots)


def test_gp_regressor_calibrates_on_the_pilot_path(monkeypatch, tmp_path):
    """Where the pilot chooses (its validated choice priced out here), the chosen model's
    variance is calibrated from held-back rows: variance_calibration_, the selection's note,
    predict_interval and the model file; not with a tolerance or known noise variances."""
    from scalegp.estimators import auto_validation
    monkeypatch.setattr(auto_validation, "ASSUMED_EVALUATIONS", 10**9)
    monkeypatch.setattr(auto_validation, "VECCHIA_EVALUATIONS", 10**9)
    monkeypatch.setattr(auto_validation, "ONE_SCALE_EVALUATIONS", 10**9)
    X, y, _ = heteroscedastic(2000, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.GPRegressor(random_state=0, time_budget=600).fit(X, y)
    assert model.selection_.pilot is not None
    calibration = model.variance_calibration_
    assert calibration is not None and model.selection_.calibration is calibration
    assert calibration.X.shape == (200, 1)
    assert any(note.startswith("predictive variance calibrated by the inputs")
               for note in model.selection_.notes)
    X_test = np.linspace(0, 2, 30)[:, None]
    mean, std = model.estimator_.predict(X_test, return_std=True, include_noise=True)
    lower, upper = model.predict_interval(X_test, 0.9, include_noise=True)
    np.testing.assert_allclose(upper - mean, calibration.half_width(X_test, std ** 2, 0.9),
                               rtol=1e-12)
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    np.testing.assert_array_equal(loaded.predict_interval(X_test, 0.9, include_noise=True)[1],
                                  upper)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        known = sg.GPRegressor(random_state=0, time_budget=600).fit(
            X, y, sample_noise_variance=np.full(y.size, 1e-4))
        tolerant = sg.GPRegressor(random_state=0, time_budget=600, tolerance=1.1).fit(X, y)
    assert known.variance_calibration_ is None and tolerant.variance_calibration_ is None
    assert any("known noise variances" in note for note in known.selection_.notes)
    assert any("a tolerance relative to the exact GP" in note
               for note in tolerant.selection_.notes)
