"""GPRegressor, the front door: ``approximation="auto"`` by default, explicit models delegated
to the estimator that fits them, the choice explained in ``selection_``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from scalegp.errors import ConvergenceWarning

import scalegp as sg
from scalegp.estimators import auto


def smooth(n, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X[:, 0]) + 0.5 * np.cos(X[:, -1]) + 0.1 * rng.standard_normal(n)


def quiet_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y)


def test_small_data_get_the_validated_choice_learned_on_all_rows():
    """Where the budget allows, every cheap model is learned on all rows and the lowest
    cross-validated NLPD is kept; estimator_ is that model, not refitted."""
    from scalegp.estimators import auto_validation
    X, y = smooth(auto_validation.VECCHIA_MIN_ROWS)
    model = quiet_fit(sg.GPRegressor(random_state=0), X, y)
    selection = model.selection_
    assert selection.pilot is None
    names = [c.name for c in selection.candidates]
    families = auto_validation.KERNEL_FAMILIES
    assert set(names) == {f"{kind} {family}" for kind in ("exact", "vecchia m=30")
                          for family in families}
    scored = [c for c in selection.candidates if c.cv_nlpd is not None]
    assert len(scored) == 2 * len(families)
    assert selection.chosen.cv_nlpd == min(c.cv_nlpd for c in scored)
    assert "CV NLPD" in selection.table() and "cross-validated NLPD" in selection.reason
    # the same model as its explicit estimator with the same parameters, to the last bit
    reference = quiet_fit(clone(model.estimator_), X, y)
    mean, std = model.predict(X[:7], return_std=True)
    expected_mean, expected_std = reference.predict(X[:7], return_std=True)
    np.testing.assert_array_equal(mean, expected_mean)
    np.testing.assert_array_equal(std, expected_std)
    assert model.kernel_ == reference.kernel_
    assert model.noise_variance_ == reference.noise_variance_


def test_cross_validation_of_the_exact_gp_is_its_leave_one_out_formula(monkeypatch):
    """With as many folds as rows, the validated choice's score of an exact GP is the
    closed-form leave-one-out predictive density (Rasmussen & Williams 2006, eqs. 5.10-5.12):
    mu_i = y_i - [K^-1 y]_i / [K^-1]_ii, v_i = 1 / [K^-1]_ii, K = k(X, X) + s2 I."""
    from scalegp.estimators import auto_validation
    X, y = smooth(40)
    model = quiet_fit(sg.ExactGPRegressor(kernel=sg.Matern(nu=2.5, length_scale=[1.0, 1.0]),
                                          normalize_X=False, normalize_y=False), X, y)
    candidate = auto_validation.Scored("exact", "exact", model, None)
    folds = [np.array([i]) for i in range(y.size)]
    auto_validation.cross_validate(candidate, X, y, folds)
    K = model.kernel_(X, X) + model.noise_variance_ * np.eye(y.size)
    inverse = np.linalg.inv(K)
    var = 1.0 / np.diag(inverse)
    mean = y - inverse @ y * var
    nlpd = np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var)
    assert candidate.cv_nlpd == pytest.approx(nlpd, rel=1e-9)
    assert candidate.cv_rmse == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-9)


@pytest.mark.parametrize("approximation, cls", [
    ("exact", sg.ExactGPRegressor), (sg.Exact(), sg.ExactGPRegressor),
    ("vecchia", sg.VecchiaGPRegressor), (sg.Vecchia(n_neighbors=10), sg.VecchiaGPRegressor),
    ("rff", sg.LowRankGPRegressor), (sg.Nystrom(n_components=30), sg.LowRankGPRegressor),
])
def test_an_explicit_approximation_is_fitted_by_its_estimator(approximation, cls):
    X, y = smooth(120)
    model = quiet_fit(sg.GPRegressor(approximation=approximation, random_state=0), X, y)
    assert type(model.estimator_) is cls and model.selection_ is None
    # the same numbers as the explicit estimator with the same parameters
    params = model.estimator_.get_params(deep=False)
    reference = quiet_fit(cls(**params), X, y)
    np.testing.assert_array_equal(model.predict(X[:5]), reference.predict(X[:5]))


def test_local_models_go_through_an_explicit_approximation():
    X, y = smooth(300)
    model = quiet_fit(sg.GPRegressor(approximation="exact",
                                     local=sg.Neighbors(n_neighbors=50, learning_centers=4),
                                     random_state=0), X, y)
    assert isinstance(model.estimator_, sg.LowRankGPRegressor)
    assert model.estimator_.local == sg.Neighbors(n_neighbors=50, learning_centers=4)


@pytest.mark.parametrize("params, match", [
    ({"approximation": "rff", "time_budget": 5.0}, "time_budget only apply to"),
    ({"approximation": "exact", "tolerance": 1.1}, "tolerance only apply to"),
    ({"local": "neighbors"}, "chooses neighbourhood models itself"),
    ({"approximation": "vecchia", "local": "neighbors"}, "local= does not apply to Vecchia"),
    ({"time_budget": -1.0}, "time_budget"),
    ({"tolerance": 0.5}, "tolerance"),
])
def test_parameters_the_choice_would_ignore_are_refused(params, match):
    X, y = smooth(50)
    with pytest.raises(ValueError, match=match):
        sg.GPRegressor(**params).fit(X, y)


def test_auto_with_a_pilot_fits_what_it_chose(monkeypatch):
    """Where the validated choice does not fit the budget the pilot runs, and estimator_ is
    the chosen configuration (its cost raised here so that the test stays small)."""
    from scalegp.estimators import auto_validation
    monkeypatch.setattr(auto_validation, "ASSUMED_EVALUATIONS", 10**9)
    monkeypatch.setattr(auto_validation, "VECCHIA_EVALUATIONS", 10**9)
    X, y = smooth(400, d=5, seed=1)
    model = quiet_fit(sg.GPRegressor(random_state=0, time_budget=600), X, y)
    selection = model.selection_
    assert selection.pilot is not None and len(selection.candidates) > 1
    chosen = selection.configuration
    assert type(model.estimator_).__name__ == chosen["estimator"]
    # started where the pilot ended (inside the default box)
    assert np.all(np.isfinite(model.kernel_.length_scale))
    assert model.score(X, y) > 0.9
    # the table survives the model file's JSON round trip
    again = auto.Selection.from_json(selection.to_json())
    assert again.table() == selection.table()


def test_the_pilot_paths_final_fit_stops_learning_at_the_budget(monkeypatch):
    """The chosen configuration learns under a soft deadline (the budget less its finishing
    steps): a fit that outlasts its price stops at its best point, says so in the
    selection's notes and warns that it did not converge; it still predicts."""
    from scalegp.estimators import auto_validation, gp_regressor
    monkeypatch.setattr(auto_validation, "ASSUMED_EVALUATIONS", 10**9)
    monkeypatch.setattr(auto_validation, "VECCHIA_EVALUATIONS", 10**9)
    X, y = smooth(400, d=5, seed=1)
    model = quiet_fit(sg.GPRegressor(random_state=0, time_budget=600), X, y)
    assert not any("stopped at the time budget" in note for note in model.selection_.notes)
    monkeypatch.setattr(gp_regressor, "FINISH_STEPS", 10**12)     # the deadline has passed
    with pytest.warns(ConvergenceWarning, match="reached the time budget"):
        late = sg.GPRegressor(random_state=0, time_budget=600).fit(X, y)
    assert late.selection_.chosen.name == model.selection_.chosen.name
    assert any("stopped at the time budget" in note for note in late.selection_.notes)
    assert "a learning stopped at its deadline before it converged" in \
        late.selection_.time_cuts
    assert np.all(np.isfinite(late.predict(X)))


def test_clone_and_nested_parameters():
    model = sg.GPRegressor(approximation=sg.Nystrom(n_components=20), kernel=sg.Gaussian())
    model.set_params(approximation__n_components=40, kernel__length_scale=0.5)
    assert model.approximation.n_components == 40 and model.kernel.length_scale == 0.5
    assert clone(model).get_params()["approximation"] == sg.Nystrom(n_components=40)


@pytest.mark.parametrize("approximation", ["auto", sg.Nystrom(n_components=20), "vecchia"])
def test_model_files_keep_the_front_door_and_its_selection(tmp_path, approximation):
    X, y = smooth(80)
    model = quiet_fit(sg.GPRegressor(approximation=approximation, random_state=0), X, y)
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    assert type(loaded) is sg.GPRegressor
    assert type(loaded.estimator_) is type(model.estimator_)
    assert loaded.get_params()["approximation"] == model.get_params()["approximation"]
    np.testing.assert_array_equal(loaded.predict(X[:6], return_std=True)[1],
                                  model.predict(X[:6], return_std=True)[1])
    if model.selection_ is None:
        assert loaded.selection_ is None
    else:
        assert loaded.selection_.table() == model.selection_.table()


def test_the_command_line_fits_auto_by_default_and_info_shows_the_choice(tmp_path, capsys):
    from scalegp.cli import main
    X, y = smooth(150)
    table = tmp_path / "d.csv"
    np.savetxt(table, np.column_stack([X, y]), delimiter=",", header="a,b,y", comments="")
    model = tmp_path / "m.npz"
    assert main(["fit", str(table), "--target", "y", "--out", str(model)]) == 0
    err = capsys.readouterr().err
    assert "--approximation auto chose " in err and "| CV NLPD |" in err
    fitted = sg.load(model)
    assert isinstance(fitted, sg.GPRegressor) and fitted.random_state == 0
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert f"GPRegressor(approximation='auto') -> {type(fitted.estimator_).__name__}" in out
    assert "columns a, b; target y" in out and "| CV NLPD |" in out
    # what auto would ignore is refused, never dropped
    for extra, match in [(["--length-scale", "2"], "--length-scale set a kernel start"),
                         (["--no-optimize"], "--no-optimize applies to"),
                         (["--approximation", "rff", "--time-budget", "5"],
                          "--time-budget applies to")]:
        assert main(["fit", str(table), "--target", "y", "--out", str(tmp_path / "x.npz"),
                     *extra]) != 0
        assert match in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()


def test_an_exact_gp_the_pilot_chose_keeps_the_better_of_two_starts():
    """The tolerance mode skips the validated choice; where it chooses the exact GP that GP
    learns from the pilot's values and from the default start, and keeps the higher log
    likelihood (it is at least the default start's fit), and the selection's notes say so."""
    X, y = smooth(120, d=3, seed=2)
    model = quiet_fit(sg.GPRegressor(random_state=0, tolerance=1.0, time_budget=600), X, y)
    assert model.selection_.chosen.name == "exact"
    family = model.selection_.pilot.family
    default = quiet_fit(sg.ExactGPRegressor(kernel=auto.pilot_kernel(family, 3),
                                            noise_variance=0.1), X, y)
    assert (model.estimator_.log_marginal_likelihood_value_
            >= default.log_marginal_likelihood_value_ - 1e-9)
    notes = [note for note in model.selection_.notes if note.startswith("the exact GP learned")]
    assert len(notes) == 1
    if model.estimator_.kernel.length_scale.tolist() == [1.0, 1.0, 1.0]:
        assert "from the default start" in notes[0]
    else:
        assert "from the pilot's values" in notes[0]
