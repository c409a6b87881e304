"""Model files: bit-identical round trips for both estimators and every approximation, the
metadata that is promised, specific errors for damaged or foreign files, atomic writes."""

import json
import os
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import scalegp as sg
from scalegp import features
from scalegp.io import reader
from scalegp.errors import InvalidModelFileError

from .conftest import STATIONARY_MAPS, OPTIONS, smallest_n_components, supported_kernels
from scalegp.estimators.configuration import make_approximation

# ----------------------------------------------------------------------------- helpers


def data(seed=0, n=30, n_dims=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, n_dims))
    y = np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)
    return X, y


def assert_bit_identical(model, loaded, X):
    mean, std = model.predict(X, return_std=True)
    mean2, std2 = loaded.predict(X, return_std=True)
    np.testing.assert_array_equal(mean2, mean)
    np.testing.assert_array_equal(std2, std)
    np.testing.assert_array_equal(loaded.predict(X, return_cov=True)[1],
                                  model.predict(X, return_cov=True)[1])


def read_raw(path):
    """The file's arrays and its decoded metadata (to build damaged variants)."""
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    return arrays, json.loads(arrays.pop("metadata").tobytes().decode("utf-8"))


def write_raw(path, arrays, metadata):
    text = json.dumps(metadata).encode("utf-8")
    np.savez(path, metadata=np.frombuffer(text, dtype=np.uint8), **arrays)


def temporary_files(folder):
    return [name for name in os.listdir(folder) if name.endswith(".tmp")]


@pytest.fixture(scope="module")
def low_rank():
    X, y = data(0)
    return sg.LowRankGPRegressor(normalize_y=True, random_state=0, approximation=make_approximation("rff", n_components=20), normalize_X=False).fit(X, y)


@pytest.fixture(scope="module")
def exact_model():
    X, y = data(1)
    return sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0]),
                               normalize_y=True, n_restarts=1, random_state=0, normalize_X=False).fit(X, y)


@pytest.fixture
def saved(tmp_path, low_rank):
    path = tmp_path / "model.npz"
    sg.save(low_rank, path)
    return path


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("which", ["low_rank", "exact_model"])
def test_round_trip_is_bit_identical(which, request, tmp_path):
    model = request.getfixturevalue(which)
    path = tmp_path / "model.npz"
    sg.save(model, path)
    loaded = sg.load(str(path))
    assert type(loaded) is type(model)
    assert_bit_identical(model, loaded, data(2, n=11)[0])
    assert loaded.get_params() == model.get_params()
    assert loaded.kernel_ == model.kernel_
    for name in ("noise_variance_", "log_marginal_likelihood_value_", "y_train_mean_",
                 "y_train_std_", "n_features_in_"):
        assert getattr(loaded, name) == getattr(model, name), name
    result, loaded_result = model.optimization_result_, loaded.optimization_result_
    np.testing.assert_array_equal(loaded_result.theta, result.theta)
    assert loaded_result.n_starts == result.n_starts
    assert loaded_result.message == result.message
    assert temporary_files(tmp_path) == []


@pytest.mark.parametrize("name", STATIONARY_MAPS)
def test_round_trip_every_approximation(name, tmp_path):
    """Every map's state survives; signed maps exercise the repaired (positive part) and the
    eigen-factorized (signed_rule="keep") systems."""
    X, y = data(3, n=25)
    kernel = supported_kernels(name)[0]
    # 64 is enough for every signed rule to give a positive definite covariance in 2-D.
    n_components = max(64, smallest_n_components(name, kernel, X.shape[1]))
    signed_rules = (("repair", "keep") if features.get(name).may_have_negative_weights
                    else ("repair",))
    for signed_rule in signed_rules:
        rule = {"signed_rule": signed_rule} if name != "nystrom" else {}
        model = sg.LowRankGPRegressor(
            make_approximation(name, n_components=n_components, options=OPTIONS.get(name),
                               **rule),
            kernel=kernel, optimize=False, random_state=0, normalize_X=False,
            normalize_y=False).fit(X, y)
        sg.save(model, tmp_path / "model.npz")
        loaded = sg.load(tmp_path / "model.npz")
        assert type(loaded.feature_map_) is type(model.feature_map_)
        signed = model.feature_map_.signs is not None
        expected = ({"repair": "repaired", "keep": "eigen"}[signed_rule] if signed
                    else "cholesky")
        assert read_raw(tmp_path / "model.npz")[1]["system"]["factorization"] == expected
        assert_bit_identical(model, loaded, data(4, n=9)[0])


def test_round_trip_float32_without_optimization(tmp_path):
    X, y = data(5)
    model = sg.LowRankGPRegressor(dtype="float32", optimize=False,
                                  noise_variance_bounds="fixed", random_state=1, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False).fit(X, y)
    sg.save(model, tmp_path / "model.npz")
    loaded = sg.load(tmp_path / "model.npz")
    assert loaded.optimization_result_ is None
    assert loaded.get_params()["noise_variance_bounds"] == "fixed"
    assert_bit_identical(model, loaded, data(6, n=7)[0])


def test_round_trip_keeps_feature_names(tmp_path):
    pd = pytest.importorskip("pandas")
    X, y = data(7)
    frame = pd.DataFrame(X, columns=["height", "width"])
    model = sg.ExactGPRegressor(optimize=False, normalize_X=False, normalize_y=False).fit(frame, y)
    sg.save(model, tmp_path / "model.npz")
    loaded = sg.load(tmp_path / "model.npz")
    np.testing.assert_array_equal(loaded.feature_names_in_, ["height", "width"])
    np.testing.assert_array_equal(loaded.predict(frame), model.predict(frame))


def test_loaded_model_refuses_theta_without_training_data(saved, low_rank):
    loaded = sg.load(saved)
    assert loaded.log_marginal_likelihood() == low_rank.log_marginal_likelihood_value_
    with pytest.raises(ValueError, match="needs the training data, which model files do not"):
        loaded.log_marginal_likelihood(np.zeros(3))


def test_metadata_content(saved, low_rank):
    """The file holds plain numeric arrays and the promised JSON metadata."""
    with np.load(saved, allow_pickle=False) as npz:
        assert npz["metadata"].dtype == np.uint8
        assert all(npz[key].dtype != object for key in npz.files)
    arrays, metadata = read_raw(saved)
    assert metadata["format"] == "scalegp-model"
    assert metadata["schema_version"] == 1
    assert metadata["scalegp_version"] == sg.__version__
    assert metadata["estimator"] == "LowRankGPRegressor"
    assert metadata["params"]["approximation"]["params"]["n_components"] == 20 and metadata["params"]["kernel"] == "gaussian"
    assert metadata["approximation"] == "rff"
    assert metadata["feature_map"] == {"n_dims": 2, "frequency_signs": None,
                                       "phase_shifts": None}
    assert metadata["kernel"]["class"] == "Gaussian"
    assert metadata["noise_variance"] == low_rank.noise_variance_
    assert metadata["y_train_std"] == low_rank.y_train_std_
    assert metadata["dtype"] == "float64"
    assert set(metadata["arrays"]) == set(arrays)
    assert {"beta", "cholesky_factor", "feature_map.omega"} <= set(arrays)
    for key, spec in metadata["arrays"].items():
        assert spec == {"shape": list(arrays[key].shape), "dtype": arrays[key].dtype.str}


# ----------------------------------------------------------------------------- atomic writes


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()],
                         ids=["error", "interrupt"])
def test_failed_save_leaves_existing_file_intact(saved, exact_model, monkeypatch, failure):
    before = saved.read_bytes()
    real_savez = np.savez

    def savez_then_fail(file, **arrays):
        real_savez(file, **arrays)
        file.seek(file.tell() // 2)
        file.truncate()
        raise failure

    monkeypatch.setattr(np, "savez", savez_then_fail)
    with pytest.raises(type(failure)):
        sg.save(exact_model, saved)
    monkeypatch.undo()
    assert saved.read_bytes() == before
    assert isinstance(sg.load(saved), sg.LowRankGPRegressor)
    assert temporary_files(saved.parent) == []


def test_save_replaces_an_existing_file(saved, exact_model):
    sg.save(exact_model, saved)
    assert isinstance(sg.load(saved), sg.ExactGPRegressor)
    assert temporary_files(saved.parent) == []


def test_save_refuses_what_it_cannot_store(tmp_path):
    with pytest.raises(NotFittedError):
        sg.save(sg.ExactGPRegressor(normalize_X=False, normalize_y=False), tmp_path / "model.npz")
    with pytest.raises(TypeError, match="model must be a fitted LowRankGPRegressor, "
                                        "ExactGPRegressor, GibbsGPRegressor or "
                                        "VecchiaGPRegressor, got FeatureMapTransformer"):
        sg.save(sg.FeatureMapTransformer(), tmp_path / "model.npz")
    X, y = data(8, n=10)
    model = sg.LowRankGPRegressor(optimize=False, approximation=make_approximation("rff", n_components=4, options={}), normalize_X=False, normalize_y=False).fit(X, y)
    model.approximation = sg.Features("rff", n_components=4, options={"weights": np.ones(2)})
    with pytest.raises(TypeError, match="cannot store parameter 'approximation'"):
        sg.save(model, tmp_path / "model.npz")
    assert os.listdir(tmp_path) == []


# ----------------------------------------------------------------------------- invalid files


def test_missing_file(tmp_path):
    with pytest.raises(InvalidModelFileError, match=r"not a scalegp model file: .*does not exist"):
        sg.load(tmp_path / "absent.npz")


def test_truncated_file(saved):
    content = saved.read_bytes()
    saved.write_bytes(content[: len(content) // 2])
    with pytest.raises(InvalidModelFileError, match=r"is truncated or damaged: it starts like "
                                                    r"an \.npz \(zip\) archive"):
        sg.load(saved)


def test_damaged_member(saved):
    """Flipping bytes inside the stored arrays breaks the zip CRC."""
    content = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("beta.npy")
    middle = info.header_offset + 30 + len(info.filename) + info.file_size // 2
    content[middle:middle + 8] = b"\xff" * 8
    saved.write_bytes(bytes(content))
    with pytest.raises(InvalidModelFileError, match=r"is truncated or damaged \(.*CRC"):
        sg.load(saved)


@pytest.mark.parametrize("content, match", [
    (b"x,y\n1,2\n", r"not a scalegp model file: .* is not an \.npz \(zip\) archive"),
    (None, r"not a scalegp model file: .* is not an \.npz \(zip\) archive"),
])
def test_not_an_archive(tmp_path, content, match):
    path = tmp_path / "model.npz"
    if content is None:
        with open(path, "wb") as file:             # a plain .npy under an .npz name
            np.save(file, np.arange(3.0))
    else:
        path.write_bytes(content)
    with pytest.raises(InvalidModelFileError, match=match):
        sg.load(path)


def test_npz_that_is_not_a_model(tmp_path):
    path = tmp_path / "data.npz"
    np.savez(path, X=np.ones((3, 2)))
    with pytest.raises(InvalidModelFileError, match=r"not a scalegp model file: .* has no "
                                                    r"'metadata' array"):
        sg.load(path)
    write_raw(path, {}, {"format": "someone-elses-model", "schema_version": 1})
    with pytest.raises(InvalidModelFileError, match=r"not a scalegp model file: .* has format "
                                                    r"'someone-elses-model', expected "
                                                    r"'scalegp-model'"):
        sg.load(path)
    np.savez(path, metadata=np.frombuffer(b"{not json", dtype=np.uint8))
    with pytest.raises(InvalidModelFileError, match=r"has unreadable metadata \(not UTF-8 JSON"):
        sg.load(path)


def test_object_array(saved):
    arrays, metadata = read_raw(saved)
    # a listed array (an unlisted member is refused unread)
    arrays["beta"] = np.array([{"payload": 1}], dtype=object)
    metadata["arrays"]["beta"] = {"shape": [1], "dtype": "|O"}
    text = json.dumps(metadata).encode("utf-8")
    np.savez(saved, metadata=np.frombuffer(text, dtype=np.uint8), **arrays)
    with pytest.raises(InvalidModelFileError, match=r"holds an object array 'beta' \(pickled "
                                                    r"Python objects\)"):
        sg.load(saved)


def test_wrong_schema_version(saved):
    arrays, metadata = read_raw(saved)
    write_raw(saved, arrays, {**metadata, "schema_version": 2})
    with pytest.raises(InvalidModelFileError, match=r"model file schema version 2 is not "
                                                    r"supported \(this scalegp reads version 1\)"):
        sg.load(saved)


@pytest.mark.parametrize("path_to_key", [
    ("noise_variance",), ("schema_version",), ("system", "jitter"), ("kernel", "params"),
    ("feature_map", "n_dims"), ("arrays", "beta"),
], ids=lambda keys: ".".join(keys))
def test_missing_metadata_key(saved, path_to_key):
    arrays, metadata = read_raw(saved)
    entry = metadata
    for key in path_to_key[:-1]:
        entry = entry[key]
    del entry[path_to_key[-1]]
    write_raw(saved, arrays, metadata)
    if path_to_key == ("feature_map", "n_dims"):
        match = r"is missing the feature-map field 'n_dims' of 'rff'"
    elif path_to_key[0] == "arrays":
        match = r"is missing the array 'beta'"
    else:
        match = rf"is missing the metadata key '{'.'.join(path_to_key)}'"
    with pytest.raises(InvalidModelFileError, match=match):
        sg.load(saved)


def test_missing_array(saved):
    arrays, metadata = read_raw(saved)
    del arrays["cholesky_factor"]
    write_raw(saved, arrays, metadata)
    with pytest.raises(InvalidModelFileError, match=r"is missing the array 'cholesky_factor'"):
        sg.load(saved)


def test_array_disagreeing_with_metadata(saved):
    arrays, metadata = read_raw(saved)
    arrays["beta"] = arrays["beta"][:-1]
    write_raw(saved, arrays, metadata)
    with pytest.raises(InvalidModelFileError, match=r"has array 'beta' of shape \(19,\) and "
                                                    r"dtype <f8, but its metadata says shape "
                                                    r"\(20,\) and dtype <f8"):
        sg.load(saved)


def test_array_of_the_wrong_size_for_the_model(saved):
    arrays, metadata = read_raw(saved)
    arrays["beta"] = arrays["beta"][:-1]
    metadata["arrays"]["beta"]["shape"] = [19]
    write_raw(saved, arrays, metadata)
    with pytest.raises(InvalidModelFileError, match=r"has array 'beta' of shape \(19,\), "
                                                    r"expected \(20,\)"):
        sg.load(saved)


def test_unknown_estimator_and_approximation(saved):
    arrays, metadata = read_raw(saved)
    write_raw(saved, arrays, {**metadata, "estimator": "SVR"})
    with pytest.raises(InvalidModelFileError, match=r"holds an estimator of class 'SVR'"):
        sg.load(saved)
    write_raw(saved, arrays, {**metadata, "approximation": "future-map"})
    with pytest.raises(InvalidModelFileError, match=r"uses the approximation 'future-map', "
                                                    r"which this scalegp does not have"):
        sg.load(saved)


def test_invalid_values_are_reported_as_invalid_file(saved):
    arrays, metadata = read_raw(saved)
    metadata["kernel"]["params"]["variance"] = -1.0
    write_raw(saved, arrays, metadata)
    with pytest.raises(InvalidModelFileError, match=r"could not be rebuilt: variance must be a "
                                                    r"finite positive number, got -1\.0"):
        sg.load(saved)


def test_reader_never_unpickles(monkeypatch, saved):
    """load reads with allow_pickle=False whatever numpy's default is."""
    calls = []
    real_load = np.load

    def recording_load(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(reader.np, "load", recording_load)
    sg.load(saved)
    assert calls == [False]


def test_table_columns_are_stored_with_the_model_not_on_it(tmp_path):
    """The CLI's table columns go through ``save(table_columns=)`` and come back from
    ``load_table_columns``; the estimator carries no attribute for them."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    model = sg.ExactGPRegressor(optimize=False).fit(X, y)
    sg.save(model, tmp_path / "plain.npz")
    assert sg.io.load_table_columns(tmp_path / "plain.npz") is None
    columns = sg.io.TableColumns(("a", "b"), "y")
    sg.save(model, tmp_path / "named.npz", table_columns=columns)
    assert sg.io.load_table_columns(tmp_path / "named.npz") == columns
    assert not hasattr(sg.load(tmp_path / "named.npz"), "input_columns_")
    for bad, match in [(sg.io.TableColumns(("a",), "y"), "name the model's 2 inputs"),
                       (sg.io.TableColumns(("a", "a"), "y"), "name the model's 2 inputs"),
                       (sg.io.TableColumns(("a", "y"), "y"), "is one of the inputs")]:
        with pytest.raises(ValueError, match=match):
            sg.save(model, tmp_path / "bad.npz", table_columns=bad)
    assert not (tmp_path / "bad.npz").exists()
