"""GibbsGPRegressor: scikit-learn conventions, the cost model it reports, model files that
keep the draws (predictions after loading equal those before saving) and the command line
(``scalegp fit --sampler gibbs``)."""

import json
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import scalegp as sg
from tests.conftest import gibbs
from scalegp.cli import main
from scalegp.errors import InvalidModelFileError

FAST = dict(n_components=12, theta1_grid=[0.1, 0.3, 1.0, 3.0], n_iter=60, burn_in=20,
            collapsed=True, random_state=0)


def data(seed=0, n=60, d=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(2 * X).sum(axis=1) + 0.1 * rng.standard_normal(n)


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # GLF's coverage-of-Theta notes
        yield


@pytest.mark.parametrize("approximation, diag, cost_model", [
    ("rff", False, "statistics"), ("glf", False, "statistics"),
    ("rff", True, "rows-cached"), ("glf", True, "rows-cached")])
def test_fit_reports_the_cost_model_and_predicts(approximation, diag, cost_model):
    """Fixed-basis (glf) and random (rff) maps, with and without the diagonal; the fit of a
    smooth function on 60 points has rms error well below the noise level 0.1."""
    X, y = data()
    model = gibbs(approximation=approximation, diag_correction=diag,
                                **{**FAST, "n_iter": 200, "n_components": 24}).fit(X, y)
    assert model.cost_model_ == cost_model
    X_test = np.linspace(-1.8, 1.8, 25)[:, None]
    mean, std = model.predict(X_test, return_std=True)
    assert np.sqrt(np.mean((mean - np.sin(2 * X_test[:, 0])) ** 2)) < 0.1
    # the 95 % predictive interval covers fresh noisy observations at 95 %: over 400 new
    # points within 4 binomial standard errors (measured 0.9375-0.95; the interval of f
    # alone, without the noise, covers 0.43-0.50)
    X_new = np.random.default_rng(1).uniform(-1.8, 1.8, (400, 1))
    y_new = np.sin(2 * X_new[:, 0]) + 0.1 * np.random.default_rng(2).standard_normal(400)
    lo, hi = model.predict_interval(X_new, 0.95, include_noise=True)
    coverage = np.mean((lo <= y_new) & (y_new <= hi))
    assert abs(coverage - 0.95) <= 4 * np.sqrt(0.95 * 0.05 / 400), coverage
    assert set(model.effective_sample_sizes_) == {"tau", "theta2", "theta1"}
    assert model.samples_.n_draws == 180


def test_a_theta1_chain_stuck_on_one_atom_warns():
    """Uncollapsed weight-space chains rarely leave their atom (docs/gibbs.md, "The sweep")."""
    X, y = data(n=200)
    with pytest.warns(sg.ConvergenceWarning, match="collapsed=True"):
        gibbs(**{**FAST, "collapsed": False}).fit(X, y)


def test_diag_correction_recomputes_beyond_the_cache():
    X, y = data()
    model = gibbs(diag_correction=True, feature_cache_bytes=0, **FAST).fit(X, y)
    assert model.cost_model_ == "rows-recomputed"


def test_scikit_learn_conventions():
    """clone, get_params / set_params (nested kernel__), GridSearchCV."""
    X, y = data()
    model = gibbs(**FAST)
    assert clone(model).get_params() == model.get_params()
    model.set_params(kernel="matern52", kernel__nu=1.5)
    assert model.get_params()["kernel"].nu == 1.5
    search = GridSearchCV(gibbs(**FAST), {"approximation__n_components": [6, 12]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["approximation__n_components"] in (6, 12)


def test_same_seed_same_draws():
    X, y = data()
    a = gibbs(**FAST).fit(X, y).samples_
    b = gibbs(**FAST).fit(X, y).samples_
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.theta1_index, b.theta1_index)


@pytest.mark.parametrize("options", [
    {"tau_prior": (0.0, 1.0)}, {"theta2_prior": (1.0, -1.0)}, {"theta1_grid": []},
    {"theta1_grid": [0.0, 1.0]}, {"burn_in": 60}])
def test_bad_settings_are_clear_errors(options):
    X, y = data()
    with pytest.raises(ValueError):
        gibbs(**{**FAST, **options}).fit(X, y)


@pytest.mark.parametrize("diag", [False, True])
def test_model_file_keeps_the_draws(tmp_path, diag):
    """Predictions (mean, std, interval) of the loaded model equal those before saving, bit
    for bit; the draws are .npy members, not pickle."""
    X, y = data(d=2)
    model = gibbs(diag_correction=diag, normalize_X=True, thin=2,
                                **FAST).fit(X, y)
    path = tmp_path / "gibbs.npz"
    sg.save(model, path)
    loaded = sg.load(path)
    X_test = data(5, n=9, d=2)[0]
    for before, after in ((model.predict(X_test, return_std=True),
                           loaded.predict(X_test, return_std=True)),
                          (model.predict_interval(X_test), loaded.predict_interval(X_test))):
        for b, a in zip(before, after):
            np.testing.assert_array_equal(a, b)
    assert loaded.cost_model_ == model.cost_model_
    np.testing.assert_array_equal(loaded.samples_.tau, model.samples_.tau)
    with np.load(path, allow_pickle=False) as npz:
        assert {"gibbs.tau", "gibbs.theta2", "gibbs.theta1_index", "gibbs.weights",
                "gibbs.theta1_grid"} <= set(npz.files)


def test_model_file_with_inconsistent_chain_is_refused(tmp_path):
    X, y = data()
    path = tmp_path / "gibbs.npz"
    sg.save(gibbs(**FAST).fit(X, y), path)
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    metadata = json.loads(arrays.pop("metadata").tobytes())
    metadata["gibbs"]["n_iter"] = 61
    bad = tmp_path / "bad.npz"
    np.savez(bad, metadata=np.frombuffer(json.dumps(metadata).encode(), np.uint8), **arrays)
    with pytest.raises(InvalidModelFileError, match="draws"):
        sg.load(bad)


def test_command_line_fit_and_predict(tmp_path):
    X, y = data(n=80)
    table = tmp_path / "train.csv"
    np.savetxt(table, np.column_stack([X, y]), delimiter=",", header="x,y", comments="")
    model_path = tmp_path / "model.npz"
    assert main(["fit", str(table), "--target", "y", "--sampler", "gibbs", "--kernel",
                 "gaussian", "--n-components", "12", "--n-iter", "80", "--burn-in", "20",
                 "--theta1-grid", "0.1", "3", "8", "--tau-prior", "1", "0.1",
                 "--theta2-prior", "1", "1", "--diag-correction",
                 "--out", str(model_path), "--quiet"]) == 0
    model = sg.load(model_path)
    assert isinstance(model, sg.GibbsGPRegressor)
    assert model.cost_model_ == "rows-cached" and model.samples_.n_draws == 60
    np.testing.assert_allclose(model.theta1_grid_, np.linspace(0.1, 3, 8))
    out = tmp_path / "pred.csv"
    assert main(["predict", str(model_path), str(table), "--out", str(out), "--quiet"]) == 0
    header = out.read_text().splitlines()[0].split(",")
    assert header[-4:] == ["mean", "std", "lower_95", "upper_95"]
    values = np.loadtxt(out, delimiter=",", skiprows=1)
    mean, std = model.predict(X, return_std=True)
    np.testing.assert_allclose(values[:, -4], mean, rtol=1e-12)
    np.testing.assert_allclose(values[:, -3], std, rtol=1e-12)


# ------------------------------------------------------- too few kept draws (issue 24, 2b)
def test_the_minimum_of_kept_draws_is_the_derived_one():
    """MIN_PREDICTIVE_DRAWS is the smallest S for which the sample std of S independent
    draws falls below half the true one with probability below 2.5 %:
    P(chi2_{S-1} < (S-1)/4) < 0.025."""
    from scipy import stats
    from scalegp.inference.gibbs import MIN_PREDICTIVE_DRAWS
    smallest = next(S for S in range(2, 100) if stats.chi2.cdf((S - 1) / 4, S - 1) < 0.025)
    assert MIN_PREDICTIVE_DRAWS == smallest == 9


@pytest.mark.parametrize("n_iter, burn_in, thin", [
    (21, 20, 1),            # the case: one kept draw, which predicted std 0
    (22, 20, 1), (28, 20, 1), (60, 20, 5), (60, 0, 8), (100, 40, 10)])
def test_fewer_kept_draws_than_a_prediction_needs_are_refused_before_any_work(
        n_iter, burn_in, thin, monkeypatch):
    from scalegp.estimators import gibbs as gibbs_estimator
    kept = len(range(burn_in, n_iter, thin))
    assert kept < 9
    monkeypatch.setattr(gibbs_estimator, "_build_feature_map",
                        lambda *a, **k: pytest.fail("a map was built"))
    X, y = data()
    with pytest.raises(ValueError, match=rf"keep {kept} draw\(s\); a prediction needs at "
                                         r"least 9: its std is the spread"):
        gibbs(**{**FAST, "n_iter": n_iter, "burn_in": burn_in,
                               "thin": thin}).fit(X, y)


@pytest.mark.parametrize("diag", [False, True])
def test_nine_kept_draws_predict_a_positive_spread(diag):
    """At the minimum the std is the draws' spread, positive at every test point (with the
    diagonal also far from the data)."""
    X, y = data()
    model = gibbs(**{**FAST, "n_iter": 29, "burn_in": 20,
                                   "diag_correction": diag}).fit(X, y)
    assert model.samples_.n_draws == 9
    _, std = model.predict(np.linspace(-4, 4, 17)[:, None], return_std=True)
    assert np.all(std > 0)


def test_a_chain_with_too_few_draws_does_not_predict():
    """sample_posterior itself may keep few draws (timing a sweep), but its predictive,
    interval and prediction ESS refuse them: one draw has no spread."""
    from scalegp.inference.gibbs import sample_posterior
    from scalegp.estimators.transformers import _build_feature_map
    X, y = data()
    kernel = sg.Gaussian()
    fmap = _build_feature_map("rff", X, kernel, 8, None, np.random.default_rng(0))
    samples = sample_posterior(fmap, kernel, X, y, theta1_grid=[0.3, 1.0], n_iter=3,
                               burn_in=2, rng=0)
    assert samples.n_draws == 1
    for call in (lambda: samples.predict(X, return_var=True),
                 lambda: samples.interval(X, 0.95),
                 lambda: samples.prediction_effective_sample_sizes(X)):
        with pytest.raises(ValueError, match="n_iter=3, burn_in=2, thin=1 keep 1 draw"):
            call()


def test_command_line_refuses_too_few_kept_draws(tmp_path, capsys):
    X, y = data()
    table = tmp_path / "train.csv"
    np.savetxt(table, np.column_stack([X, y]), delimiter=",", header="x,y", comments="")
    out = tmp_path / "model.npz"
    code = main(["fit", str(table), "--target", "y", "--sampler", "gibbs", "--kernel",
                 "gaussian", "--n-iter", "21", "--burn-in", "20", "--out", str(out)])
    assert code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "keep 1 draw(s); a prediction needs at least 9" in error[0]
    assert not out.exists()


@pytest.mark.parametrize("approximation, map_per_atom", [
    ("nystrom", False), ("random-projection", False), ("random-projection", True)])
def test_nystrom_type_maps_predict_the_prior_spread_far_from_the_data(approximation,
                                                                      map_per_atom):
    """Without the diagonal the chain's f = psi^T w has variance q(x, x) / theta2, 0 away
    from the knots (measured: std 0.000 at (50, 50) with 40 knots); the predictive adds
    eps(x*) ~ N(0, c(x*) / theta2) at test points, so far from the data the std is the
    prior's sqrt(avg_s 1 / theta2_s) y_std (k(x*, X) ~ exp(-2500) there: exact in floats)."""
    X, y = data(n=80, d=2)
    model = gibbs(approximation, **{**FAST, "n_components": 20,
                                                  "map_per_atom": map_per_atom}).fit(X, y)
    assert model.samples_.corrects_test_points and not model.diag_correction
    _, std = model.predict(np.array([[50.0, 50.0], [-40.0, 60.0]]), return_std=True)
    prior = np.sqrt(model.samples_.variance.mean()) * model.y_train_std_
    np.testing.assert_allclose(std, prior, rtol=1e-12)


def test_other_maps_predict_the_chain_spread_only():
    """A Fourier map's f = psi^T w is the chain's whole model: no eps is added at test
    points (V = 0), as before."""
    X, y = data()
    model = gibbs(**FAST).fit(X, y)
    assert not model.samples_.corrects_test_points
    F, V = model.samples_.latent_draws(np.array([[0.3], [9.0]]))
    assert np.all(V == 0)


def test_predict_before_fit_raises_not_fitted():
    # scikit-learn's check_estimators_unfitted: NotFittedError, not AttributeError
    from sklearn.exceptions import NotFittedError
    model = gibbs()
    with pytest.raises(NotFittedError):
        model.predict(np.zeros((2, 2)))
    with pytest.raises(NotFittedError):
        model.predict_interval(np.zeros((2, 2)))


def test_a_chain_on_the_grids_end_atom_says_the_posterior_may_lie_beyond_it():
    # a linear trend in 10-D: the length scale wants to exceed the grid's longest (theta1 =
    # 0.02, l = 5 in the standardized inputs), and the collapsed chain stays on that atom
    from sklearn.datasets import make_regression
    X, y = make_regression(200, 10, random_state=0)
    with pytest.warns(sg.errors.ConvergenceWarning, match=r"grid's smallest atom, so theta1's posterior "
                                                r"may lie beyond the grid .* above 5 in the "
                                                r"standardized inputs"):
        sg.GibbsGPRegressor(random_state=0).fit(X, y)
