"""GPRegressor, the front door: ``approximation="auto"`` by default, explicit models delegated
to the estimator that fits them, the choice explained in ``selection_``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone

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


def test_small_data_gets_the_exact_gp_without_a_pilot():
    X, y = smooth(200)
    model = quiet_fit(sg.GPRegressor(), X, y)
    assert isinstance(model.estimator_, sg.ExactGPRegressor)
    assert model.selection_.pilot is None and model.selection_.chosen.name == "exact"
    assert "without a pilot" in model.selection_.table()
    # the same model as the exact estimator with an ARD Gaussian kernel, to the last bit
    reference = quiet_fit(sg.ExactGPRegressor(kernel=sg.Gaussian(length_scale=np.ones(2))),
                          X, y)
    mean, std = model.predict(X[:7], return_std=True)
    expected_mean, expected_std = reference.predict(X[:7], return_std=True)
    np.testing.assert_array_equal(mean, expected_mean)
    np.testing.assert_array_equal(std, expected_std)
    assert model.kernel_ == reference.kernel_
    assert model.noise_variance_ == reference.noise_variance_
    assert model.score(X, y) == reference.score(X, y)


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
    """Above DIRECT_EXACT_ROWS the pilot runs, and estimator_ is the chosen configuration
    (the threshold lowered so that the test stays small)."""
    monkeypatch.setattr(auto, "DIRECT_EXACT_ROWS", 100)
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


def test_clone_and_nested_parameters():
    model = sg.GPRegressor(approximation=sg.Nystrom(n_components=20))
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
    assert "--approximation auto chose exact" in err and "| exact |" in err
    fitted = sg.load(model)
    assert isinstance(fitted, sg.GPRegressor) and fitted.random_state == 0
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert "GPRegressor(approximation='auto') -> ExactGPRegressor" in out
    assert "columns a, b; target y" in out and "| exact |" in out
    # what auto would ignore is refused, never dropped
    for extra, match in [(["--length-scale", "2"], "--length-scale set a kernel start"),
                         (["--no-optimize"], "--no-optimize applies to"),
                         (["--approximation", "rff", "--time-budget", "5"],
                          "--time-budget applies to")]:
        assert main(["fit", str(table), "--target", "y", "--out", str(tmp_path / "x.npz"),
                     *extra]) != 0
        assert match in capsys.readouterr().err
    assert not (tmp_path / "x.npz").exists()
