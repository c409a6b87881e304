"""scikit-learn model selection with scalegp: clone, nested ``kernel__<name>`` parameters,
GridSearchCV, RandomizedSearchCV, cross_val_score and Pipeline on the README's estimator and
pipeline; parameter validation at fit; the up-front memory check of ``n_components``."""

import time
import tracemalloc

import numpy as np
import pytest
from scipy.stats import loguniform
from sklearn.base import clone
from sklearn.datasets import make_circles
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import GridSearchCV, KFold, RandomizedSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.utils._param_validation import InvalidParameterError

import scalegp as sg
from scalegp.engine.statistics import feature_cache_budget
from scalegp import _memory
from scalegp.errors import InsufficientMemoryError
from scalegp.estimators.configuration import make_approximation

CV = KFold(3, shuffle=True, random_state=0)


def readme_data(n=300):
    """The README's estimator data, smaller."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(len(X))
    return X, y


def readme_model(n_components=512, **params):
    """The README's estimator (n_components=512 there)."""
    kernel = sg.Matern(nu=2.5, length_scale=[1.0, 1.0], length_scale_bounds=(0.05, 20.0),
                       variance_bounds=(1e-2, 1e2))
    settings = dict(approximation=sg.Features("rff", n_components=n_components), kernel=kernel,
                    noise_variance=0.05, random_state=0)
    return sg.LowRankGPRegressor(**{**settings, **params})


def readme_pipeline(n_components=1024):
    """The README's transformer pipeline (n_components=1024 there)."""
    return make_pipeline(sg.FeatureMapTransformer(approximation="orf", n_components=n_components,
                                                  kernel=sg.Gaussian(length_scale=2.0),
                                                  random_state=0),
                         RidgeClassifier())


def circles():
    return make_circles(n_samples=300, noise=0.08, factor=0.5, random_state=0)


# ----------------------------------------------------------------------------- parameters


def test_kernel_get_params_has_the_scikit_learn_signature_and_stays_json_friendly():
    kernel = readme_model().kernel
    expected = {"nu": 2.5, "length_scale": [1.0, 1.0], "variance": 1.0,
                "length_scale_bounds": (0.05, 20.0), "variance_bounds": (0.01, 100.0)}
    assert kernel.get_params() == kernel.get_params(deep=True) == expected
    assert kernel.get_params(deep=False) == expected
    assert sg.kernels.from_params("Matern", kernel.get_params(deep=False)) == kernel


def test_deep_params_list_the_kernel_parameters():
    params = readme_model().get_params(deep=True)
    assert params["kernel__length_scale"] == [1.0, 1.0]
    assert params["kernel__nu"] == 2.5
    assert params["kernel__length_scale_bounds"] == (0.05, 20.0)
    assert params["kernel__variance_bounds"] == (0.01, 100.0)
    assert not any(key.startswith("kernel__")
                   for key in sg.LowRankGPRegressor(kernel="gaussian", normalize_X=False, normalize_y=False).get_params(deep=True))


@pytest.mark.parametrize("make", [readme_model, readme_pipeline,
                                  lambda: sg.ExactGPRegressor(kernel=sg.Cauchy(), normalize_X=False, normalize_y=False),
                                  lambda: sg.LowRankGPRegressor(kernel="matern32", normalize_X=False, normalize_y=False)],
                         ids=["model", "pipeline", "exact", "kernel_name"])
def test_set_params_of_get_params_deep_is_a_round_trip(make):
    estimator = make()
    before = estimator.get_params(deep=True)
    estimator.set_params(**before)
    after = estimator.get_params(deep=True)
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] == value, key     # kernels: an equal copy; steps: the same object


def test_nested_kernel_parameters_replace_the_kernel_by_a_changed_copy():
    model = readme_model()
    original = model.kernel
    model.set_params(kernel__length_scale=[0.5, 3.0], kernel__nu=1.5,
                     approximation__n_components=64)
    assert model.kernel == sg.Matern(nu=1.5, length_scale=[0.5, 3.0],
                                     length_scale_bounds=(0.05, 20.0), variance_bounds=(1e-2, 1e2))
    assert model.approximation.n_components == 64
    assert original.get_params()["length_scale"] == [1.0, 1.0] and original.nu == 2.5
    # a kernel name is resolved first; kernel= is set before kernel__<name>
    named = sg.LowRankGPRegressor(kernel="matern32", normalize_X=False, normalize_y=False).set_params(kernel__length_scale=2.0)
    assert named.kernel == sg.Matern(nu=1.5, length_scale=2.0)
    both = sg.ExactGPRegressor(normalize_X=False, normalize_y=False).set_params(kernel=sg.Laplacian(), kernel__variance=3.0)
    assert both.kernel == sg.Laplacian(variance=3.0)
    boxed = readme_model().set_params(kernel__length_scale_bounds="fixed",
                                      kernel__variance_bounds=(0.5, 2.0))
    assert boxed.kernel.length_scale_bounds == "fixed"
    assert boxed.kernel.variance_bounds == (0.5, 2.0)
    pipe = readme_pipeline().set_params(featuremaptransformer__kernel__length_scale=0.5)
    assert pipe[0].kernel == sg.Gaussian(length_scale=0.5)


def test_nested_kernel_parameter_errors_name_the_parameter():
    with pytest.raises(ValueError, match=r"Invalid parameter 'nu' for kernel Gaussian\(.*\)\. "
                                         r"Valid parameters are: \['length_scale', "):
        sg.LowRankGPRegressor(kernel=sg.Gaussian(), normalize_X=False, normalize_y=False).set_params(kernel__nu=1.5)
    with pytest.raises(ValueError, match=r"length_scale must lie inside its bounds"):
        readme_model().set_params(kernel__length_scale=100.0)
    with pytest.raises(ValueError, match=r"Invalid parameter 'kernal' for estimator"):
        readme_model().set_params(kernal__length_scale=1.0)
    with pytest.raises(TypeError, match=r"kernels are immutable; use kernel\.with_params"):
        sg.Gaussian().set_params(length_scale=2.0)


def test_clone_shares_the_immutable_kernel_and_refits_identically():
    X, y = readme_data(120)
    model = readme_model(n_components=32)
    copy = clone(model)
    assert copy is not model and copy.kernel is model.kernel
    assert copy.get_params(deep=True) == model.get_params(deep=True)
    assert clone(model.kernel) is model.kernel
    np.testing.assert_array_equal(copy.fit(X, y).predict(X[:10]), model.fit(X, y).predict(X[:10]))
    assert not hasattr(clone(model), "kernel_")


# ----------------------------------------------------------------------------- model selection


def test_cross_val_score_on_the_readme_model_and_pipeline():
    X, y = readme_data()
    # noise 0.1 on a signal of variance ~0.25: the best possible R^2 is about 0.96
    scores = cross_val_score(readme_model(n_components=64), X, y, cv=CV)
    assert scores.shape == (3,) and np.all(scores > 0.9)
    X, y = circles()
    accuracy = cross_val_score(readme_pipeline(n_components=64), X, y, cv=CV)
    assert np.all(accuracy > 0.9)           # a linear classifier alone: about 0.5


def test_grid_search_over_fixed_length_scales_picks_the_data_scale():
    """With optimize=False the searched length scale is the model's, so the grid's ends (a
    scale 0.05 far below and 20 far above the signal's ~1) must lose."""
    X, y = readme_data()
    grid = {"kernel__length_scale": [[0.05, 0.05], [1.0, 1.0], [20.0, 20.0]],
            "approximation__n_components": [32, 128], "optimize": [False]}
    search = GridSearchCV(readme_model(), grid, cv=CV).fit(X, y)
    assert search.best_params_["kernel__length_scale"] == [1.0, 1.0]
    assert search.best_score_ > 0.9
    # the grid's order is by sorted names: approximation__n_components outermost
    scores = search.cv_results_["mean_test_score"].reshape(2, 3).T
    assert np.all(scores[1] > scores[0] + 0.5) and np.all(scores[1] > scores[2] + 0.5)
    best = search.best_estimator_
    np.testing.assert_array_equal(best.kernel_.length_scale, [1.0, 1.0])
    assert best.approximation.n_components == search.best_params_["approximation__n_components"]
    assert best.feature_map_.n_components == best.approximation.n_components


def test_grid_search_on_the_readme_model_with_learning_varies_the_kernel():
    X, y = readme_data(200)
    grid = {"kernel__length_scale": [[0.3, 0.3], [3.0, 3.0]], "approximation__n_components": [32, 64]}
    search = GridSearchCV(readme_model(), grid, cv=CV).fit(X, y)
    assert search.best_score_ > 0.9
    assert len(np.unique(search.cv_results_["mean_test_score"])) == 4
    starts = [clone(readme_model()).set_params(**params)
              for params in search.cv_results_["params"]]
    assert len({tuple(model.kernel.length_scale) for model in starts}) == 2
    fitted = [model.fit(X, y).kernel_ for model in starts]
    assert len({tuple(kernel.theta) for kernel in fitted}) == 4      # every fit differs
    for kernel in fitted:
        assert np.all((kernel.length_scale >= 0.05) & (kernel.length_scale <= 20.0))
    best = search.best_estimator_
    assert best.kernel == readme_model().kernel.with_params(
        length_scale=search.best_params_["kernel__length_scale"])


def test_grid_search_on_the_readme_pipeline():
    X, y = circles()
    grid = {"featuremaptransformer__kernel__length_scale": [0.02, 0.5],
            "featuremaptransformer__n_components": [32, 64]}
    search = GridSearchCV(readme_pipeline(), grid, cv=CV).fit(X, y)
    # l = 0.02 makes features of unrelated noise between points (chance, ~0.5)
    assert search.best_params_["featuremaptransformer__kernel__length_scale"] == 0.5
    assert search.best_score_ > 0.95
    scores = search.cv_results_["mean_test_score"].reshape(2, 2)
    assert np.all(scores[0] < 0.7)
    assert search.best_estimator_[0].kernel_ == sg.Gaussian(length_scale=0.5)


def test_randomized_search_samples_kernel_parameters():
    X, y = readme_data(200)
    distributions = {"kernel__length_scale": loguniform(0.3, 3.0),
                     "approximation__n_components": [31, 32]}
    search = RandomizedSearchCV(readme_model(), distributions, n_iter=3, cv=CV,
                                random_state=0).fit(X, y)
    sampled = [params["kernel__length_scale"] for params in search.cv_results_["params"]]
    assert len(set(sampled)) == 3 and all(0.3 <= value <= 3.0 for value in sampled)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    best = search.best_estimator_
    np.testing.assert_array_equal(best.kernel.length_scale,
                                  [search.best_params_["kernel__length_scale"]])
    assert (best.feature_map_.n_components
            == search.best_params_["approximation__n_components"])
    assert search.best_score_ > 0.9


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("make", [readme_model, sg.ExactGPRegressor],
                         ids=["low_rank", "exact"])
@pytest.mark.parametrize("params, received", [
    ({"optimize": "no"}, "'no'"),
    ({"normalize_y": "false"}, "'false'"),
    ({"optimize": 1}, "1"),
    ({"n_restarts": 1.5}, "1.5"),
    ({"random_state": "seed"}, "'seed'"),
])
def test_invalid_parameters_are_refused_at_fit(make, params, received):
    X, y = readme_data(20)
    name = next(iter(params))
    with pytest.raises(InvalidParameterError,
                       match=rf"The '{name}' parameter of \w+ must be .*Got {received} instead"):
        make().set_params(**params).fit(X, y)


def test_negative_n_components_is_refused():
    X, y = readme_data(20)
    with pytest.raises(InvalidParameterError,
                       match=r"The 'n_components' parameter of \w+ must be an int in the range "
                             r"\[1, inf\).*Got -3 instead"):
        sg.FeatureMapTransformer().set_params(n_components=-3).fit(X, y)
    with pytest.raises(ValueError, match=r"n_components must be an integer >= 1 or None, "
                                         r"got -3"):
        readme_model().set_params(approximation__n_components=-3).fit(X, y)


@pytest.mark.parametrize("estimator, name", [(readme_model(), "approximation__n_components"),
                                             (sg.FeatureMapTransformer(), "n_components")],
                         ids=["estimator", "transformer"])
def test_n_components_beyond_memory_is_refused_at_once_with_the_memory_needed(estimator, name):
    X, y = readme_data(20)
    start = time.perf_counter()
    with pytest.raises(InsufficientMemoryError,
                       match=r"n_components=1000000000 needs about [\d.e+]+ TiB of memory .* "
                             r"but only [\d.]+ [KMGT]iB is available"):
        clone(estimator).set_params(**{name: 10**9}).fit(X, y)
    assert time.perf_counter() - start < 2.0    # refused before any work (it ran 74 s)


def test_memory_threshold_is_the_estimate(monkeypatch):
    """Refused one byte below the estimate, fitted at it; the message gives the estimate."""
    X, y = readme_data(50)
    m = 40
    needed = _memory.required_bytes(m, n_matrices=_memory.ENGINE_MATRICES["cholesky"])
    monkeypatch.setattr(_memory, "available_bytes", lambda: needed - 1)
    with pytest.raises(InsufficientMemoryError, match=rf"needs about {needed / 2**20:.3g} MiB"):
        readme_model(n_components=m, optimize=False).fit(X, y)
    monkeypatch.setattr(_memory, "available_bytes", lambda: needed)
    assert readme_model(n_components=m, optimize=False).fit(X, y).feature_map_.n_components == m


def test_available_memory_is_read():
    available = _memory.available_bytes()
    assert available is None or available > 2**20


@pytest.mark.parametrize("approximation, options, kernel, path", [
    ("rff", None, sg.Gaussian(length_scale=[0.8, 1.2]), "cholesky"),
    ("sfs", None, sg.Gaussian(length_scale=[0.8, 1.2]), "positive_part"),
    ("glf", {"n_nodes": [32, 32]},
     sg.Gaussian(length_scale=1.0, length_scale_bounds=(0.5, 2.0), variance_bounds=(0.1, 10.0)),
     "qr"),
])
def test_memory_estimate_bounds_the_traced_peak(approximation, options, kernel, path):
    """The peak of a fit and a gradient evaluation (numpy allocations, tracemalloc) stays below
    the estimate, with full chunks (n above the rows of a chunk)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(9000, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    model = sg.LowRankGPRegressor(
        make_approximation(approximation, n_components=1024, options=options,
                           solver="qr" if path == "qr" else "cholesky"),
        kernel=kernel, noise_variance=0.1, optimize=False, random_state=0, normalize_X=False, normalize_y=False)
    tracemalloc.start()
    try:
        model.fit(X, y)
        theta = np.append(model.kernel_.theta, np.log(model.noise_variance_))
        model.log_marginal_likelihood(theta, eval_gradient=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    m = model.feature_map_.n_components
    assert (model.feature_map_.signs is not None) == (path == "positive_part")
    data = X.nbytes + y.nbytes
    kept = len(y) * m * 8                            # Psi, kept between the two passes
    estimate = (_memory.required_bytes(m, n_matrices=_memory.ENGINE_MATRICES[path])
                + (kept if path == "cholesky" and kept <= feature_cache_budget("float64")
                   else 0))    # an RFF gradient keeps its features
    measured = f"traced peak {(peak - data) / 2**20:.1f} MiB, estimate {estimate / 2**20:.1f} MiB"
    assert peak - data <= estimate, measured
    # an estimate of this fit, not any bound: the estimate keeps room for a map that forms
    # dPsi in its gradient pass; these Fourier maps do not (their gradient is an operator), and
    # the repaired sfs fit peaks at 0.22 of it (0.27 while a float64 pass also allocated the
    # float32 pass's m x m chunk Gram, 0.40 when it formed dPsi)
    assert peak - data >= 0.2 * estimate, measured
