"""FeatureMapTransformer: scikit-learn conformance for every registered map and the kernels it
supports, pipelines, dtypes, feature names, signs and validation."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import make_circles
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

import scalegp as sg
from scalegp import features

from .conftest import (KERNEL_FAMILIES, STATIONARY_MAPS, ONE_COMPONENT_CHECKS, OPTIONS, keeping_n_components,
                             one_component_failures, smallest_n_components, supported_kernels)
from scalegp.estimators.configuration import make_approximation

#: The largest input dimension scikit-learn's checks use.
CHECKS_MAX_DIMS = 10


def transformer(name, kernel, **params):
    """A small transformer for ``name`` that builds on data of up to 10 dimensions."""
    return sg.FeatureMapTransformer(
        approximation=name, kernel=kernel, approximation_options=OPTIONS.get(name),
        n_components=smallest_n_components(name, kernel, CHECKS_MAX_DIMS), **params)


def first_supported_kernel(name):
    return supported_kernels(name)[0]


#: The full scikit-learn suite runs once per map (with its first supported kernel): the API
#: does not depend on the kernel, and a suite fits the map about a hundred times.
#: test_every_supported_kernel covers the other kernel families.
TRANSFORMERS = [transformer(name, first_supported_kernel(name)) for name in STATIONARY_MAPS]
MAP_KERNEL_PAIRS = [(name, kernel) for name in STATIONARY_MAPS
                    for kernel in supported_kernels(name)]


# ----------------------------------------------------------------------------- scikit-learn


@parametrize_with_checks(TRANSFORMERS, expected_failed_checks=one_component_failures,
                         xfail_strict=True)
def test_scikit_learn_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name", STATIONARY_MAPS)
@pytest.mark.parametrize("check_name", ONE_COMPONENT_CHECKS)
def test_checks_that_set_one_component(name, check_name):
    estimator = keeping_n_components(transformer(name, first_supported_kernel(name)))
    getattr(estimator_checks, check_name)("FeatureMapTransformer", estimator)


def test_every_map_has_a_supported_kernel():
    for name in STATIONARY_MAPS:
        assert supported_kernels(name), f"{name} supports none of {KERNEL_FAMILIES}"


@pytest.mark.parametrize("name, kernel", MAP_KERNEL_PAIRS)
def test_every_supported_kernel(name, kernel):
    """What the suite checks, per supported kernel: shapes, dtypes, finiteness,
    determinism under random_state, refitting a clone, and the input-dimension check."""
    rng = np.random.default_rng(6)
    X, X_new = rng.uniform(-1, 1, size=(25, 3)), rng.uniform(-1, 1, size=(7, 3))
    model = transformer(name, kernel, random_state=0)
    Psi = model.fit_transform(X)
    m = model.feature_map_.n_components
    assert Psi.shape == (25, m) and Psi.dtype == np.float64 and np.all(np.isfinite(Psi))
    assert model.transform(X_new.astype(np.float32)).dtype == np.float32
    assert len(model.get_feature_names_out()) == m == len(model.signs_)
    np.testing.assert_array_equal(clone(model).fit(X).transform(X_new), model.transform(X_new))
    with pytest.raises(ValueError, match="X has 2 features"):
        model.transform(X_new[:, :2])


# ----------------------------------------------------------------------------- behaviour


def test_pipeline_with_ridge_classifier_separates_circles():
    """Concentric circles: a linear classifier is at chance, one on random Fourier features
    of a Gaussian kernel separates them."""
    X, y = make_circles(n_samples=300, noise=0.08, factor=0.5, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    linear = RidgeClassifier().fit(X_train, y_train).score(X_test, y_test)
    model = make_pipeline(
        sg.FeatureMapTransformer(approximation="rff", n_components=200,
                                 kernel=sg.Gaussian(length_scale=0.5), random_state=0),
        RidgeClassifier(alpha=1e-3))
    accuracy = model.fit(X_train, y_train).score(X_test, y_test)
    assert linear < 0.7
    assert accuracy > 0.95


@pytest.mark.parametrize("name", STATIONARY_MAPS)
def test_dtype_preserved_and_close(name):
    X = np.random.default_rng(0).uniform(-1, 1, size=(30, 2))
    model = transformer(name, first_supported_kernel(name), random_state=0).fit(X)
    Psi64 = model.transform(X)
    Psi32 = model.transform(X.astype(np.float32))
    assert Psi64.dtype == np.float64 and Psi32.dtype == np.float32
    assert model.transform(np.round(3 * X).astype(np.int64)).dtype == np.float64
    scale = np.max(np.abs(Psi64))
    np.testing.assert_allclose(Psi32, Psi64, atol=1e-5 * scale)


@pytest.mark.parametrize("name", STATIONARY_MAPS)
def test_feature_names_and_signs(name):
    X = np.random.default_rng(1).uniform(-1, 1, size=(25, 3))
    model = transformer(name, first_supported_kernel(name), random_state=0).fit(X)
    m = model.transform(X).shape[1]
    prefix = name.replace("-", "_")
    np.testing.assert_array_equal(model.get_feature_names_out(),
                                  [f"{prefix}{i}" for i in range(m)])
    signs = model.feature_map_.signs
    expected = np.ones(m) if signs is None else signs
    np.testing.assert_array_equal(model.signs_, expected)
    assert set(np.unique(model.signs_)) <= {-1.0, 1.0}


def test_feature_names_with_dataframe():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(2).uniform(size=(10, 2)), columns=["a", "b"])
    model = sg.FeatureMapTransformer(n_components=4, random_state=0).fit(X)
    np.testing.assert_array_equal(model.feature_names_in_, ["a", "b"])
    np.testing.assert_array_equal(model.get_feature_names_out(["a", "b"]),
                                  ["rff0", "rff1", "rff2", "rff3"])
    with pytest.raises(ValueError, match="input_features is not equal to feature_names_in_"):
        model.get_feature_names_out(["a", "c"])
    frame = model.set_output(transform="pandas").transform(X)
    assert list(frame.columns) == ["rff0", "rff1", "rff2", "rff3"]


def test_rff_features_approximate_the_kernel_with_its_hyperparameters():
    """Psi Psi^T estimates K entrywise without bias with variance <= s^2 / S (S = m / 2
    frequencies: each is an average of S terms s cos(.) of variance <= s^2), so the mean
    squared error over the matrix is about s^2 / S; the test allows 3 s^2 / S."""
    X = np.random.default_rng(3).uniform(-1, 1, size=(20, 2))
    kernel = sg.Gaussian(length_scale=[0.5, 1.5], variance=2.0)
    model = sg.FeatureMapTransformer(n_components=2000, kernel=kernel, random_state=0).fit(X)
    Psi = model.transform(X)
    error = np.mean((Psi @ Psi.T - kernel(X)) ** 2)
    assert error < 3 * kernel.variance**2 / 1000


def test_same_map_as_the_estimator_for_the_same_random_state():
    X, y = np.random.default_rng(4).uniform(size=(15, 2)), np.arange(15.0)
    model = sg.FeatureMapTransformer(n_components=10, random_state=7).fit(X)
    estimator = sg.LowRankGPRegressor(optimize=False, random_state=7, approximation=make_approximation("rff", n_components=10), normalize_X=False, normalize_y=False).fit(X, y)
    np.testing.assert_array_equal(model.transform(X),
                                  estimator.feature_map_.features(X, estimator.kernel_))


# ----------------------------------------------------------------------------- validation


def test_transform_before_fit_raises_not_fitted():
    with pytest.raises(NotFittedError):
        sg.FeatureMapTransformer().transform(np.zeros((2, 2)))


def test_bad_inputs_and_parameters_are_named(monkeypatch):
    X = np.random.default_rng(5).uniform(size=(10, 2))
    base = sg.FeatureMapTransformer(n_components=6)
    with pytest.raises(ValueError, match=r"approximation must be one of .*got 'magic'"):
        clone(base).set_params(approximation="magic").fit(X)
    with pytest.raises(TypeError, match=r"'approximation_options' parameter of "
                                        r"FeatureMapTransformer must be an instance of "
                                        r"'collections.abc.Mapping' or None\. Got 'fast'"):
        clone(base).set_params(approximation_options="fast").fit(X)
    with pytest.raises(ValueError, match=r"'n_components' parameter of FeatureMapTransformer "
                                         r"must be an int in the range \[1, inf\)\. Got 0"):
        clone(base).set_params(n_components=0).fit(X)
    with pytest.raises(ValueError, match=r"kernel must be a Kernel or one of .*got 'wiggly'"):
        clone(base).set_params(kernel="wiggly").fit(X)
    model = clone(base).fit(X)
    with pytest.raises(ValueError, match=r"X has 3 features, but FeatureMapTransformer is "
                                         r"expecting 2 features"):
        model.transform(np.zeros((2, 3)))
    bad = X.copy()
    bad[4, 0] = np.inf
    with pytest.raises(ValueError, match=r"X must be finite .*row 4, column 0"):
        model.transform(bad)
    monkeypatch.setattr(features.get("rff"), "supports", classmethod(lambda cls, kernel: False))
    with pytest.raises(ValueError, match=r"approximation 'rff' does not support the kernel "
                                         r"Gaussian\(length_scale=1, variance=1\)"):
        clone(base).fit(X)
