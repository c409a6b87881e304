"""The chosen model scored on rows its hyperparameters never saw
(scalegp.estimators.auto_nested)."""

import time
import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.estimators import auto_nested, auto_validation
from scalegp.estimators.auto_validation import Scored, standardized


def _scored(X, y):
    estimator = sg.ExactGPRegressor(
        kernel=sg.kernels.get("matern52").with_params(length_scale=np.ones(X.shape[1])),
        noise_variance=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X, y)
    scored = Scored("exact matern52", "exact", estimator, None)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    began = time.perf_counter()
    auto_validation.cross_validate(scored, X, y, folds)
    scored.first_seconds = time.perf_counter() - began
    return scored


def _smooth(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 2))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * rng.standard_normal(n)


def test_nested_scores_are_each_folds_relearned_model_and_the_means():
    """The nested RMSE and NLPD are those of exact GPs learned from the optimum on each
    fold's other rows (computed here by hand), the baseline that of each fold's mean."""
    X, y = _smooth()
    scored = _scored(X, y)
    rmse, nlpd, baseline = auto_nested.nested_cross_validation(scored, X, y)
    Xs, ys, _ = standardized(X, y, True, True)
    errors, variances, mean_errors = np.empty(len(y)), np.empty(len(y)), np.empty(len(y))
    fitted = scored.estimator
    for held in scored.cv_folds:
        train = np.setdiff1d(np.arange(len(y)), held)
        model = sg.ExactGPRegressor(kernel=fitted.kernel_, noise_variance=fitted.noise_variance_,
                                    normalize_X=False, normalize_y=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(Xs[train], ys[train])
        mean, std = model.predict(Xs[held], return_std=True, include_noise=True)
        errors[held], variances[held] = ys[held] - mean, std ** 2
        mean_errors[held] = ys[held] - ys[train].mean()
    assert rmse == pytest.approx(np.sqrt(np.mean(errors ** 2)), rel=1e-9)
    assert nlpd == pytest.approx(np.mean(0.5 * np.log(2 * np.pi * variances)
                                         + errors ** 2 / (2 * variances)), rel=1e-9)
    assert baseline == pytest.approx(np.sqrt(np.mean(mean_errors ** 2)), rel=1e-12)
    # a smooth signal: far better than the mean; each fold learned again, not fixed
    assert rmse < 0.3 * baseline and rmse != pytest.approx(scored.cv_rmse, rel=1e-6)


def test_the_note_reports_both_scores_and_warns_where_no_better_than_the_mean(monkeypatch):
    X, y = _smooth()
    scored = _scored(X, y)
    note, found = auto_nested.nested_score(scored, X, y, end=time.perf_counter() + 600)
    assert note.startswith("nested cross-validation (exact matern52 learned again")
    assert f"against {scored.cv_rmse:.4g}" in note and not found
    # residuals twice the mean's: the warning, naming both numbers
    monkeypatch.setattr(auto_nested, "conditioned_residuals",
                        lambda learner, Xs, ys, held, noise: (2 * (ys[held] - ys.mean()),
                                                              np.ones(len(held))))
    note, found = auto_nested.nested_score(scored, X, y, end=time.perf_counter() + 600)
    assert len(found) == 1 and found[0][1] is sg.FitQualityWarning
    assert "no better than the mean of the other rows" in found[0][0]


def test_the_nested_score_is_priced_and_stops_at_the_budget(monkeypatch):
    X, y = _smooth()
    scored = _scored(X, y)
    note, found = auto_nested.nested_score(scored, X, y, end=time.perf_counter() - 1.0)
    assert note.startswith("nested cross-validation not measured") and not found
    assert "(optimistic)" in note
    with pytest.raises(sg.errors.TimeBudgetExceeded):
        auto_nested.nested_cross_validation(scored, X, y, end=time.perf_counter() - 1.0)
    # the folds left, at the longest fold's seconds, must fit: here the first runs alone
    def slow(learner, Xs, ys, held, noise):
        time.sleep(0.05)
        return ys[held], np.ones(len(held))

    monkeypatch.setattr(auto_nested, "conditioned_residuals", slow)
    scored.first_seconds = 0.01
    note, found = auto_nested.nested_score(scored, X, y, end=time.perf_counter() + 0.12)
    assert note.startswith("nested cross-validation stopped") and "1 of 5 folds done" in note
    assert "4 left" in note and not found
    note, _ = auto_nested.nested_score(scored, X, y, end=time.perf_counter() + 60)
    assert note.startswith("nested cross-validation (")
    unscored = Scored("exact", "exact", scored.estimator, None)
    assert auto_nested.nested_score(unscored, X, y, end=time.perf_counter() + 60) == ("", [])


def test_gpregressor_reports_the_nested_score_in_its_selection():
    X, y = _smooth(60, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sg.GPRegressor(random_state=0).fit(X, y)
    assert any(note.startswith("nested cross-validation (")
               for note in model.selection_.notes)
