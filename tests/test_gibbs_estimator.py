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
    model = sg.GibbsGPRegressor(approximation=approximation, diag_correction=diag,
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
        sg.GibbsGPRegressor(**{**FAST, "collapsed": False}).fit(X, y)


def test_diag_correction_recomputes_beyond_the_cache():
    X, y = data()
    model = sg.GibbsGPRegressor(diag_correction=True, feature_cache_bytes=0, **FAST).fit(X, y)
    assert model.cost_model_ == "rows-recomputed"


def test_scikit_learn_conventions():
    """clone, get_params / set_params (nested kernel__), GridSearchCV."""
    X, y = data()
    model = sg.GibbsGPRegressor(**FAST)
    assert clone(model).get_params() == model.get_params()
    model.set_params(kernel="matern52", kernel__nu=1.5)
    assert model.get_params()["kernel"].nu == 1.5
    search = GridSearchCV(sg.GibbsGPRegressor(**FAST), {"n_components": [6, 12]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["n_components"] in (6, 12)


def test_same_seed_same_draws():
    X, y = data()
    a = sg.GibbsGPRegressor(**FAST).fit(X, y).samples_
    b = sg.GibbsGPRegressor(**FAST).fit(X, y).samples_
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.theta1_index, b.theta1_index)


@pytest.mark.parametrize("options", [
    {"tau_prior": (0.0, 1.0)}, {"theta2_prior": (1.0, -1.0)}, {"theta1_grid": []},
    {"theta1_grid": [0.0, 1.0]}, {"burn_in": 60}])
def test_bad_settings_are_clear_errors(options):
    X, y = data()
    with pytest.raises(ValueError):
        sg.GibbsGPRegressor(**{**FAST, **options}).fit(X, y)


@pytest.mark.parametrize("diag", [False, True])
def test_model_file_keeps_the_draws(tmp_path, diag):
    """Predictions (mean, std, interval) of the loaded model equal those before saving, bit
    for bit; the draws are .npy members, not pickle."""
    X, y = data(d=2)
    model = sg.GibbsGPRegressor(diag_correction=diag, normalize_X=True, thin=2,
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
    sg.save(sg.GibbsGPRegressor(**FAST).fit(X, y), path)
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
                 "--theta2-prior", "1", "1", "--collapsed", "--diag-correction",
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
