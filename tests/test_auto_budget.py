"""What the time budget cut in an ``approximation="auto"`` fit (scalegp.estimators.auto_budget,
``selection_.time_cuts``): recorded where a step is skipped or shortened for time, an empty
list where every step ran in full, and then the fit repeats itself."""

import numpy as np
import pytest

import scalegp as sg
from scalegp.estimators import auto, auto_budget, hyperparameter_average

from .test_gp_regressor import quiet_fit, smooth


def test_cuts_are_recorded_once_inside_a_recording_only():
    auto_budget.cut("outside")                       # no recording: nothing to append to
    with auto_budget.recording() as outer:
        auto_budget.cut("a")
        with auto_budget.recording() as inner:
            auto_budget.cut("b")
            auto_budget.cut("b")
        auto_budget.cut("c")
    assert outer == ["a", "c"] and inner == ["b"]
    auto_budget.cut("after")
    assert outer == ["a", "c"]


def test_a_fit_the_budget_does_not_cut_repeats_itself():
    """With time to spare every step runs in full (all restarts included, whatever the
    machine's speed): no cut, and a second fit with the same random_state is the same
    model to the last bit."""
    X, y = smooth(60)
    first = quiet_fit(sg.GPRegressor(random_state=3, time_budget=120), X, y)
    second = quiet_fit(sg.GPRegressor(random_state=3, time_budget=120), X, y)
    assert first.selection_.time_cuts == [] and second.selection_.time_cuts == []
    assert first.selection_.table().splitlines()[-1].startswith(
        "time budget: no step was cut")
    assert "8 random restart(s)" in first.selection_.table()
    X_test = np.random.default_rng(1).uniform(-2, 2, (20, 2))
    for a, b in zip(first.predict(X_test, return_std=True),
                    second.predict(X_test, return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_a_step_the_time_left_does_not_fit_is_a_cut(monkeypatch):
    """The average over the hyperparameters priced past the budget is not run: the fit
    records it, and the table's last line names it."""
    monkeypatch.setattr(hyperparameter_average, "timed_price", lambda *args, **kw: 1e9)
    X, y = smooth(60)
    model = quiet_fit(sg.GPRegressor(random_state=3, time_budget=120), X, y)
    assert model.selection_.time_cuts == ["the average over the hyperparameters: not run"]
    last = model.selection_.table().splitlines()[-1]
    assert last.startswith("time budget: it cut the average over the hyperparameters")
    assert "can differ" in last
    assert model.hyperparameter_average_ is None


def test_a_tight_budget_cuts_and_says_so():
    X, y = smooth(150, d=3)
    model = quiet_fit(sg.GPRegressor(random_state=0, time_budget=0.5), X, y)
    assert model.selection_.time_cuts
    assert model.selection_.table().splitlines()[-1].startswith("time budget: it cut ")
    assert np.all(np.isfinite(model.predict(X[:5])))


def test_the_cuts_survive_the_model_files_json_and_older_files_say_nothing():
    X, y = smooth(60)
    selection = quiet_fit(sg.GPRegressor(random_state=0, time_budget=0.5), X, y).selection_
    value = selection.to_json()
    again = auto.Selection.from_json(value)
    assert again.time_cuts == selection.time_cuts and again.table() == selection.table()
    del value["time_cuts"]                     # a file written before the cuts were kept
    older = auto.Selection.from_json(value)
    assert older.time_cuts is None
    assert not older.table().splitlines()[-1].startswith("time budget")
    value["time_cuts"] = "restarts"             # altered: refused, not read letter by letter
    with pytest.raises(ValueError, match="time_cuts must be a list of strings"):
        auto.Selection.from_json(value)
