"""Configuration objects (scalegp.estimators.configuration): names as shorthands, nested
parameters, options that a configuration would ignore refused, model files old and new."""

import json

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import scalegp as sg
from scalegp.estimators import configuration
from scalegp.estimators.configuration import (Clusters, Exact, Features, Neighbors, Nystrom,
                                              TestPoints, make_approximation, make_local)


def _data(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("name, expected", [
    ("rff", Features("rff")), ("RFF", Features("rff")), ("nystrom", Nystrom()),
    ("exact", Exact()), ("glf", Features("glf"))])
def test_a_name_is_its_object_with_the_defaults(name, expected):
    assert configuration.as_approximation(name) == expected


@pytest.mark.parametrize("name, expected", [
    (None, None), ("neighbors", Neighbors()), ("clusters", Clusters()),
    ("test-points", TestPoints())])
def test_a_local_name_is_its_object_with_the_defaults(name, expected):
    assert configuration.as_local(name) == expected


def test_the_shorthand_and_the_object_fit_the_same_model():
    X, y = _data()
    by_name = sg.LowRankGPRegressor("nystrom", local="clusters", random_state=0,
                                    optimize=False).fit(X, y)
    by_object = sg.LowRankGPRegressor(Nystrom(), local=Clusters(), random_state=0,
                                      optimize=False).fit(X, y)
    np.testing.assert_array_equal(by_name.predict(X), by_object.predict(X))


def test_nested_parameters_replace_a_name_by_its_object_and_never_touch_the_original():
    shared = Nystrom(n_components=20)
    model = sg.LowRankGPRegressor(shared)
    model.set_params(approximation__n_components=30, approximation__objective="vfe")
    assert model.approximation == Nystrom(n_components=30, objective="vfe")
    assert shared == Nystrom(n_components=20)        # a copy was changed
    named = sg.LowRankGPRegressor("rff", local="neighbors")
    named.set_params(approximation__n_components=16, local__n_neighbors=50)
    assert named.approximation == Features("rff", n_components=16)
    assert named.local == Neighbors(n_neighbors=50)
    with pytest.raises(ValueError, match="local is None"):
        sg.LowRankGPRegressor().set_params(local__n_neighbors=3)
    with pytest.raises(ValueError, match="Invalid parameter 'threshold'"):
        sg.LowRankGPRegressor(local="neighbors").set_params(local__threshold=3)


def test_grid_search_over_nested_options():
    X, y = _data(120)
    grid = {"approximation__n_components": [8, 32]}
    search = GridSearchCV(sg.LowRankGPRegressor("rff", random_state=0, optimize=False), grid,
                          cv=2).fit(X, y)
    assert search.best_estimator_.feature_map_.n_components in (8, 32)
    assert clone(search.best_estimator_).approximation.n_components in (8, 32)
    assert set(sg.LowRankGPRegressor(Nystrom()).get_params()) >= {
        "approximation__knots", "approximation__learn_knots", "approximation__n_components"}


@pytest.mark.parametrize("model, message", [
    (sg.LowRankGPRegressor(Features("rff", signed_rule="keep")),
     "signed_rule='keep' applies to quadrature rules"),
    (sg.LowRankGPRegressor(Features("nystrom")), "use scalegp.Nystrom"),
    (sg.LowRankGPRegressor(Features("rff", objective="vfe")), "the VFE objective needs a map"),
    (sg.LowRankGPRegressor(Features("rff", objective="elbo")), "objective must be one of"),
    (sg.LowRankGPRegressor(Nystrom(learn_knots=5)), "needs objective='vfe'"),
    (sg.LowRankGPRegressor("exact"), "needs local='neighbors'"),
    (sg.LowRankGPRegressor(local=Neighbors(n_neighbors=0)), "n_neighbors must be an integer"),
    (sg.LowRankGPRegressor(local=Clusters(threshold=-1)), "threshold must be a number > 0"),
    (sg.LowRankGPRegressor(local=Clusters(lazy="yes")), "lazy must be True or False"),
    (sg.GibbsGPRegressor(Features("rff", objective="fitc"), n_iter=20, burn_in=5),
     "does not take objective='fitc'"),
    (sg.GibbsGPRegressor(Nystrom(objective="vfe", learn_knots=3), n_iter=20, burn_in=5),
     "does not take objective='vfe', learn_knots=3"),
])
def test_an_option_the_configuration_would_ignore_is_refused(model, message):
    X, y = _data()
    with pytest.raises(ValueError, match=message):
        model.fit(X, y)


def test_make_approximation_and_make_local_refuse_unknown_options():
    assert make_approximation("nystrom", options={"knots": "random"}) == Nystrom(knots="random")
    assert make_approximation("sgq", signed_rule="keep") == Features("sgq", signed_rule="keep")
    with pytest.raises(TypeError, match="has no option learn_knots"):
        make_approximation("rff", learn_knots=3)
    with pytest.raises(TypeError, match="has no option n_neighbors"):
        make_local("clusters", n_neighbors=3)
    with pytest.raises(TypeError, match="takes no options"):
        make_local(None, threshold=1.0)


@pytest.mark.parametrize("approximation, local", [
    (Nystrom(n_components=12, knots="random", objective="vfe"), None),
    (Features("rff", n_components=16, options=None), Clusters(threshold=1.5, lazy=True)),
    (Exact(), Neighbors(n_neighbors=20, learning_centers=None)),
    (Features("maclaurin", n_components=8), TestPoints(threshold=1.0)),
])
def test_configuration_objects_survive_the_model_file(tmp_path, approximation, local):
    X, y = _data()
    model = sg.LowRankGPRegressor(approximation, local=local, optimize=False,
                                  random_state=0).fit(X, y)
    sg.save(model, tmp_path / "model.npz")
    loaded = sg.load(tmp_path / "model.npz")
    assert loaded.approximation == approximation and loaded.local == local
    np.testing.assert_array_equal(loaded.predict(X[:7]), model.predict(X[:7]))


def test_knots_given_as_an_array_survive_the_model_file(tmp_path):
    X, y = _data()
    knots = X[:9].copy()
    model = sg.LowRankGPRegressor(Nystrom(n_components=9, knots=knots), optimize=False).fit(X, y)
    sg.save(model, tmp_path / "model.npz")
    loaded = sg.load(tmp_path / "model.npz")
    np.testing.assert_array_equal(loaded.approximation.knots, knots)
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))


def _rewrite_params(path, params):
    """The model file with its metadata 'params' replaced (as schema 1 wrote them)."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    metadata = json.loads(bytes(arrays["metadata"]).decode())
    metadata["params"] = params
    arrays["metadata"] = np.frombuffer(json.dumps(metadata).encode(), dtype=np.uint8)
    np.savez(path, **arrays)
    return metadata


def test_a_file_with_the_flat_parameters_of_schema_1_still_loads(tmp_path):
    X, y = _data()
    model = sg.LowRankGPRegressor(Nystrom(n_components=10, knots="random", objective="fitc"),
                                  local=None, optimize=False, random_state=0).fit(X, y)
    path = tmp_path / "model.npz"
    sg.save(model, path)
    flat = {name: value for name, value in json.loads(bytes(
        np.load(path)["metadata"]).decode())["params"].items()
        if name not in ("approximation", "local")}
    flat.update(approximation="nystrom", n_components=10, objective="fitc",
                approximation_options={"knots": "random"}, signed_rule="keep",
                solver="cholesky", local=None, local_threshold=2.0, local_lazy=False,
                local_reoptimize=False, local_neighbors=300, local_learning_centres=32,
                learn_knots=0)
    _rewrite_params(path, flat)
    loaded = sg.load(path)
    assert loaded.approximation == Nystrom(n_components=10, knots="random", objective="fitc")
    assert loaded.local is None
    np.testing.assert_array_equal(loaded.predict(X[:5]), model.predict(X[:5]))


def test_a_file_whose_configuration_disagrees_with_its_model_is_refused(tmp_path):
    X, y = _data()
    model = sg.LowRankGPRegressor(Features("rff", n_components=8), optimize=False).fit(X, y)
    path = tmp_path / "model.npz"
    sg.save(model, path)
    metadata = json.loads(bytes(np.load(path)["metadata"]).decode())
    params = dict(metadata["params"], approximation={"class": "Nystrom", "params": {}})
    _rewrite_params(path, params)
    with pytest.raises(sg.InvalidModelFileError, match="approximation"):
        sg.load(path)
