"""Defaults that give the model the docs promise (issue 9, section 7).

The n_nodes="auto" budget derived from the problem, the box a Gauss-Legendre rule resolves
(``valid_log_bounds``) and the estimator searching only that box.
"""

import math
import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp.datasets import load_east_africa_relief
from scalegp.estimators.exact import ExactGPRegressor
from scalegp.estimators.lowrank import LowRankGPRegressor
from scalegp.features.base import DEFAULT_N_COMPONENTS
from scalegp.features.gauss_legendre import VALID_MASS_TOLERANCE, GaussLegendreFeatures
from scalegp.inference.glf_selection import auto_budget, search_node_counts
from scalegp.estimators.configuration import as_approximation, make_approximation


def test_auto_budget_is_the_exact_gp_break_even_capped_by_memory_and_floored():
    budget, reason = auto_budget(3000, 2)
    assert budget == math.floor(3000 / math.sqrt(3)) == 1732
    assert "n / sqrt(3) = 1732" in reason and "n = 3000" in reason
    # 6 s x s float64 matrices in 1 GiB: s <= isqrt(2^30 / 48)
    assert auto_budget(10**6, 2)[0] == math.isqrt(2**30 // 48) == 4729
    assert auto_budget(5, 2)[0] == 16                  # auto's first rule, 4^d
    with pytest.raises(ValueError, match="n_samples"):
        auto_budget(0, 2)


def test_estimator_default_n_components_is_the_maps_default():
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, (200, 2)), rng.standard_normal(200)
    assert as_approximation(LowRankGPRegressor(normalize_X=False, normalize_y=False).approximation).n_components is None
    model = LowRankGPRegressor(approximation="rff", optimize=False, random_state=0, normalize_X=False, normalize_y=False).fit(X, y)
    assert model.feature_map_.n_components == DEFAULT_N_COMPONENTS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        glf = LowRankGPRegressor(approximation="glf", optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    assert glf.feature_map_.n_components <= DEFAULT_N_COMPONENTS   # the budget split


def test_auto_without_n_components_grows_to_the_derived_budget_and_says_so():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1.7, 1.7, (120, 2))
    y = np.sin(8 * X[:, 0]) + 0.1 * rng.standard_normal(120)
    kernel = sg.Gaussian(length_scale=0.1)
    with pytest.warns(UserWarning, match=r"stopped at the derived budget s <= 69"):
        fmap = GaussLegendreFeatures.build(X, kernel, None, rng, n_nodes="auto", y=y, node_search=search_node_counts,
                                           noise_variance=0.01)
    assert fmap.n_components <= 69 and fmap.n_components > 16
    assert "derived budget s <= 69" in fmap.selection
    with pytest.warns(UserWarning, match="stopped at the budget n_components = 30"):
        capped = GaussLegendreFeatures.build(X, kernel, 30, rng, n_nodes="auto", y=y, node_search=search_node_counts,
                                             noise_variance=0.01)
    assert capped.n_components <= 30                   # an explicit n_components is a cap


def test_valid_log_bounds_end_where_the_rule_stops_reproducing_the_prior_variance():
    X = np.random.default_rng(2).uniform(0, 1, (500, 2))
    kernel = sg.Gaussian(length_scale=0.3)
    fmap = GaussLegendreFeatures.build(X, kernel, None, None, n_nodes=[20, 20])
    bounds = fmap.valid_log_bounds(kernel)
    np.testing.assert_array_equal(bounds[1], kernel.bounds[1])       # variance row kept
    low, high = np.exp(bounds[0])
    assert kernel.length_scale_bounds[0] < low < high < kernel.length_scale_bounds[1]
    # Gaussian kernel: separable, so the product of 1-D masses is captured_mass itself
    for scale in (low, high):
        assert abs(fmap.captured_mass(kernel.with_params(length_scale=scale)) - 1) \
            <= VALID_MASS_TOLERANCE
    for scale in (low / 1.1, high * 1.1):
        assert abs(fmap.captured_mass(kernel.with_params(length_scale=scale)) - 1) \
            > VALID_MASS_TOLERANCE
    # nothing resolved to 1 %: the 10 % run of build's warning; nothing to 10 %: kept whole
    loose = kernel.with_params(length_scale=0.1, length_scale_bounds=(0.05, 0.1))
    low, high = np.exp(fmap.valid_log_bounds(loose)[0])
    assert 0.05 < low < 0.1 and high == pytest.approx(0.1)
    assert abs(fmap.captured_mass(loose.with_params(length_scale=low)) - 1) <= 0.1
    assert abs(fmap.captured_mass(loose.with_params(length_scale=low / 1.1)) - 1) > 0.1
    unresolved = kernel.with_params(length_scale=0.015, length_scale_bounds=(0.01, 0.02))
    np.testing.assert_array_equal(fmap.valid_log_bounds(unresolved), unresolved.bounds)


def _gp_draw_2d(n, length_scale, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 2))
    K = sg.Gaussian(length_scale=length_scale)(X)
    y = np.linalg.cholesky(K + 1e-8 * np.eye(n)) @ rng.standard_normal(n)
    return X, y + 0.1 * rng.standard_normal(n)


def test_learned_length_scale_stays_in_the_box_the_rule_was_built_for():
    # the issue's workload at N = 800: a GP draw with length scale 0.12 on [0, 1]^2; with
    # the old wide box GLF "learned" 0.0009, outside every length scale its nodes resolve.
    # With the default bounds the fit learns in the box the rule resolves (the fixed point
    # of gauss_legendre.resolved_box), silently; only s >= n is advice worth a warning.
    X, y = _gp_draw_2d(800, 0.12)
    model = LowRankGPRegressor(make_approximation("glf", options={"n_nodes": [32, 32]}),
                               random_state=0, normalize_X=False, normalize_y=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    assert [str(w.message)[:40] for w in caught] == [
        "Gauss-Legendre features have s = 1024 co"]
    low, high = model.kernel_.length_scale_bounds
    assert 0.01 < low < 0.12 < high < 100
    np.testing.assert_allclose(
        np.exp(model.feature_map_.valid_log_bounds(model.kernel_)[0]), (low, high))
    learned = model.kernel_.length_scale[0]
    assert learned == pytest.approx(0.12, rel=0.05)    # measured 0.118 (seeds 0-2: 0.118-0.125)


def test_bounds_the_user_sets_are_kept_and_narrowed_with_a_warning():
    X, y = _gp_draw_2d(800, 0.12)
    kernel = sg.Gaussian(length_scale_bounds=(0.005, 50.0))
    model = LowRankGPRegressor(make_approximation("glf", options={"n_nodes": [32, 32]}),
                               kernel=kernel, random_state=0, normalize_X=False,
                               normalize_y=False)
    with pytest.warns(UserWarning, match=r"searching length_scale in \[0.06\d+, 0.4\d+\] \(the "
                                         r"box the feature map's rule resolves\) instead of "
                                         r"\[0.005, 50\]"):
        model.fit(X, y)
    assert model.kernel_.length_scale_bounds == (0.005, 50.0)
    assert model.kernel_.length_scale[0] == pytest.approx(0.12, rel=0.05)


def test_default_glf_fits_on_low_dimensional_data_raise_no_warning():
    # issue 28: no warnings from the default configuration of an approximation, here on
    # small data (s = 256 >= n) in 1-D and 2-D, standardized by default
    rng = np.random.default_rng(1)
    for d in (1, 2):
        X = rng.uniform(0, 1, (200, d))
        y = np.sin(6 * X).sum(1) + 0.1 * rng.standard_normal(200)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = LowRankGPRegressor(approximation="glf").fit(X, y)
        assert model.score(X, y) > 0.97               # measured 0.986 (d = 1), 0.991 (d = 2)


@pytest.mark.slow
def test_default_auto_on_terrain_data_approaches_the_exact_gp():
    # East Africa relief, standardised inputs, n = 3,000, at the exact GP's learned
    # hyperparameters (learned with ExactGPRegressor, normalize_y, from length scale 0.2)
    relief = load_east_africa_relief(subsample=3000, random_state=0)
    X = (relief.X - relief.X.mean(axis=0)) / relief.X.std(axis=0)
    y = relief.y / 1000.0
    kernel = sg.Gaussian(length_scale=0.1506, variance=0.3975)
    settings = dict(kernel=kernel, noise_variance=0.007535, normalize_y=True, optimize=False)
    exact = ExactGPRegressor(**settings).fit(X, y).predict(X)

    def error(n_components):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = LowRankGPRegressor(random_state=0, **settings, approximation=make_approximation("glf", n_components=n_components, options={"n_nodes": "auto"})).fit(X, y)
        return np.linalg.norm(model.predict(X) - exact) / np.linalg.norm(exact)

    assert error(256) > 0.12                           # measured 0.126: the old default
    assert error(None) < 0.05                          # measured 0.045 (q = [42, 41])
