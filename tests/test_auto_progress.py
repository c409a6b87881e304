"""The progress bar of ``approximation="auto"``: seconds spent against the budget, one bar
per stage of the choice (scalegp.estimators.auto_progress)."""

import threading
import time
import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.data.sources import ProgressBars
from scalegp.estimators import auto_progress


class Recorder:
    """The package's progress protocol, recorded."""

    def __init__(self):
        self.stages, self.done = [], []

    def start_pass(self, name, total, unit="rows", initial=0):
        self.stages.append((name, total, unit, initial))

    def __call__(self, done):
        self.done.append(done)


def data(n=80):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (n, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_auto_reports_each_stage_against_its_budget():
    X, y = data()
    recorder, threads = Recorder(), threading.active_count()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sg.GPRegressor(time_budget=30, random_state=0).fit(X, y, progress=recorder)
    names = [stage[0] for stage in recorder.stages]
    assert names[:3] == [f"auto: learning and scoring exact {family} ({k} of 3)"
                         for k, family in enumerate(("gaussian", "matern52", "matern32"), 1)]
    assert names[3] == "auto: restarting the 2 best from random starts"
    assert all(total == 30 and unit == "s" for _, total, unit, _ in recorder.stages)
    initial = [stage[3] for stage in recorder.stages]
    assert initial == sorted(initial) and recorder.done == sorted(recorder.done)
    # the ticker ends with the fit: nothing is reported after it returns
    calls = len(recorder.done)
    time.sleep(3 * auto_progress.TICK)
    assert len(recorder.done) == calls and threading.active_count() == threads


def test_the_bar_moves_while_a_stage_runs_and_nothing_runs_without_one(monkeypatch):
    monkeypatch.setattr(auto_progress, "TICK", 0.01)
    recorder = Recorder()
    auto_progress.stage("outside")                    # no reporting: a no-op
    with auto_progress.reporting(recorder, 5.0):
        auto_progress.stage("a long stage")
        time.sleep(0.2)
    assert recorder.stages == [("auto: a long stage", 5.0, "s", recorder.stages[0][3])]
    assert len(recorder.done) >= 5 and recorder.done[-1] >= 0.1
    threads = threading.active_count()
    with auto_progress.reporting(None, 5.0):
        assert threading.active_count() == threads   # no thread without a progress


def test_the_pilot_path_reports_its_stages_and_the_final_fit(monkeypatch):
    from scalegp.estimators import auto_validation
    monkeypatch.setattr(auto_validation, "ASSUMED_EVALUATIONS", 10**9)
    monkeypatch.setattr(auto_validation, "VECCHIA_EVALUATIONS", 10**9)
    X, y = data(400)
    recorder = Recorder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.GPRegressor(time_budget=600, random_state=0).fit(X, y, progress=recorder)
    names = [stage[0] for stage in recorder.stages]
    assert names[0].startswith("auto: pilot")
    final = names.index(f"auto: fitting {model.selection_.chosen.name} on all rows")
    # then the variance calibration from held-back rows: its copy, then h's learning
    assert names[final + 1:] == ["auto: calibrating the predictive variance on held-back rows",
                                 "auto: calibrating the predictive variance by the inputs"]


def test_progress_bars_start_at_the_count_given():
    bars = ProgressBars()
    bars.start_pass("seconds", 10, unit="s", initial=3.5)
    assert bars.bar.n == 3.5 and bars.bar.total == 10
    bars(4.0)
    assert bars.bar.n == 4.0
    bars.close()


@pytest.mark.parametrize("approximation", ["exact", "vecchia", sg.Nystrom(n_components=20)])
def test_an_explicit_approximation_takes_the_progress_bars(approximation):
    """GPRegressor passes ``progress`` to the chosen estimator, whose in-memory passes call
    it without announcing a pass first."""
    X, y = data(100)
    bars = ProgressBars()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.GPRegressor(approximation=approximation).fit(X, y, progress=bars)
    bars.close()
    assert np.all(np.isfinite(model.predict(X)))
