"""Every field of every model file goes through the loader's schema (issue 24, section 6).

One model of each kind is fitted and saved (every feature map, signed and repaired systems,
the exact GP, every local mode, the Gibbs sampler); the fields its file holds (every metadata
entry and every array) are enumerated, and each must have a declaration: a metadata entry of the schema of
:mod:`scalegp.io`, a kernel parameter, a declaration of the component whose section holds it
(a feature map's, a system's, a posterior's, the Gibbs samples', a local kind's ``STORED``,
:mod:`scalegp.stored`), or an estimator parameter with its constraint. The generic rules for
maps and kernels outside the package (finite numbers, JSON scalars) do not count. Then the named corruptions of the issue, one per field type.
"""

import json
import math
import re
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
from scalegp import features
from scalegp.io import schema
from scalegp import local
from scalegp.errors import InvalidModelFileError
from scalegp.stored import Array, Value, declarations

from .test_model_file_fuzz import model_file, with_array, write
from scalegp.estimators.configuration import Clusters, Neighbors, make_approximation


def data(n=30, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)


#: Options that make a map fit these small data (other maps take the defaults).
MAP_OPTIONS = {"glf": dict(kernel=sg.Gaussian(length_scale_bounds=(0.3, 3.0)), n_components=64),
               "glf-semigroup": dict(kernel="reciprocal_semigroup", n_components=16),
               "maclaurin": dict(kernel=sg.Gaussian(), n_components=17,
                                 approximation_options={"sketch": "complex-rademacher"}),
               "random-projection": dict(n_components=30,
                                         approximation_options={"epsilon": 0.05})}

KINDS = {
    **{f"map {name}": (lambda name=name: low_rank(
        name, **{"n_components": 16, **MAP_OPTIONS.get(name, {})},
        optimize=False, random_state=0)) for name in features.names()},
    "maclaurin explicit (1-D)": lambda: sg.LowRankGPRegressor(
        kernel=sg.Gaussian(), optimize=False, approximation=make_approximation("maclaurin", n_components=9), normalize_X=False, normalize_y=False),
    "signed (eigen)": lambda: sg.LowRankGPRegressor(
        noise_variance=0.5, optimize=False,
        random_state=0, approximation=make_approximation("sfs", n_components=32, signed_rule="keep"), normalize_X=False, normalize_y=False),
    "repaired": lambda: sg.LowRankGPRegressor(noise_variance=0.05, optimize=False,
                                              random_state=0, approximation=make_approximation("sfs", n_components=32), normalize_X=False, normalize_y=False),
    "learned (optimization, standardized)": lambda: sg.LowRankGPRegressor(
        normalize_X=True, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_y=False),
    "exact": lambda: sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0]), normalize_X=False, normalize_y=False),
    "clusters": lambda: sg.LowRankGPRegressor(optimize=False,
                                              random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0), normalize_X=False, normalize_y=False),
    "clusters lazy": lambda: sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0, lazy=True), normalize_X=False, normalize_y=False),
    "clusters re-optimized": lambda: sg.LowRankGPRegressor(
        optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0, reoptimize=True), normalize_X=False, normalize_y=False),
    "test-points": lambda: sg.LowRankGPRegressor(local="test-points",
                                                 optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False),
    "neighbors exact": lambda: sg.LowRankGPRegressor(
        approximation="exact", optimize=False, local=Neighbors(n_neighbors=12), normalize_X=False, normalize_y=False),
    "neighbors glf": lambda: sg.LowRankGPRegressor(
        optimize=False, random_state=0, approximation=make_approximation("glf", n_components=16), local=Neighbors(n_neighbors=12), normalize_X=False, normalize_y=False),
    "vecchia": lambda: sg.VecchiaGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0]),
                                             n_neighbors=6, ordering="random", random_state=0),
    "gibbs": lambda: sg.GibbsGPRegressor(theta1_grid=[0.2, 0.5, 1.0],
                                         n_iter=14, burn_in=4, random_state=0, approximation=make_approximation("rff", n_components=8), normalize_X=False),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """kind -> (metadata, arrays) of its saved model (fitted with column names)."""
    folder = tmp_path_factory.mktemp("kinds")
    out = {}
    for name, make in KINDS.items():
        X, y = data(d=1 if "1-D" in name else 2)
        X = np.abs(X) if "semigroup" in name else X       # its inputs are >= 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(X, y)
        path = folder / "model.npz"
        sg.save(model, path, table_columns=sg.io.TableColumns(
            tuple(f"x{j}" for j in range(X.shape[1])), "y"))
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in npz.files if key != "metadata"}
            metadata = json.loads(npz["metadata"].tobytes().decode("utf-8"))
        sg.load(path)                                   # and it loads
        out[name] = metadata, arrays
    return out


def leaves(tree, prefix=()):
    """Every leaf of the metadata (a list of numbers or strings is one leaf)."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from leaves(value, prefix + (key,))
    else:
        yield prefix


def metadata_declaration(metadata, path):
    """The schema's declaration of one metadata leaf, or None."""
    estimator = metadata["estimator"]
    head, rest = path[0], path[1:]
    if head in ("format", "schema_version"):
        return "checked first"
    if not rest:                                          # e.g. an empty object, or null
        entries = [entry for entry in schema.METADATA_ENTRIES
                   if entry.path == head and estimator in entry.estimators]
        return entries[0] if entries else None
    if head == "arrays":                                  # the listing of one array
        return "arrays" if len(path) == 3 and path[2] in ("shape", "dtype") else None
    if head == "params":
        constraints = schema.ESTIMATORS[estimator]._parameter_constraints
        if rest[0] == "kernel" and len(rest) > 1:          # a kernel given as an object
            return (rest[1] == "class" or (rest[1] == "params" and len(rest) == 3
                                           and rest[2] in schema.KERNEL_PARAMS)) or None
        return constraints.get(rest[0])          # e.g. a dict of options: one value
    if head == "kernel" and rest[:1] == ("params",):
        return schema.KERNEL_PARAMS.get(rest[1]) if len(rest) == 2 else None
    if head == "feature_map":
        name = rest[0]
        declared = declarations(features.get(metadata["approximation"])).get(name)
        if isinstance(declared, Value):
            return declared
        # a declared array field stored as null (absent, e.g. a real sketch's imaginary part)
        return ("null array" if isinstance(declared, Array)
                and metadata["feature_map"][name] is None else None)
    if head == "local" and len(rest) == 1:
        kind = local.LOCAL_KINDS[metadata["local"]["kind"]]
        declared = declarations(kind).get(rest[0])
        return "kind" if rest[0] == "kind" else (declared if isinstance(declared, Value)
                                                 else None)
    dotted = ".".join(path)
    entries = [entry for entry in schema.METADATA_ENTRIES
               if entry.path == dotted and estimator in entry.estimators and not entry.open]
    return entries[0] if entries else None


def array_declaration(metadata, key):
    """The schema's declaration of one array (its conditions), or None."""
    if key.startswith(schema.LOCAL_PREFIX):
        kind = local.LOCAL_KINDS[metadata["local"]["kind"]]
        declared = declarations(kind).get(key[len(schema.LOCAL_PREFIX):])
        return isinstance(declared, Array) and declared.conditions
    if key.startswith(schema.MAP_PREFIX):
        declared = declarations(features.get(metadata["approximation"])).get(
            key[len(schema.MAP_PREFIX):])
        return isinstance(declared, Array) and declared.conditions
    fields = [field for field in schema.ARRAY_FIELDS if field.name == key
              and metadata["estimator"] in field.estimators]
    return fields[0].conditions if fields else None


def test_every_field_of_every_kind_has_a_schema_entry(files):
    """Was: maclaurin's sketch, allocation, projections, projections_imag and
    expected_error, random projection's scalars and Nystrom's knots had none."""
    assert len(files) == len(KINDS) >= len(features.names()) + 12
    missing = []
    for name, (metadata, arrays) in files.items():
        for path in leaves(metadata):
            if metadata_declaration(metadata, path) is None:
                missing.append(f"{name}: metadata {'.'.join(map(str, path))}")
        for key in arrays:
            if not array_declaration(metadata, key):
                missing.append(f"{name}: array {key}")
        assert set(arrays) == set(metadata["arrays"])
    assert missing == []


def test_the_enumeration_sees_every_kind_of_field(files):
    """The check above is not vacuous: the files hold these fields."""
    maclaurin = files["map maclaurin"]
    assert {"feature_map.allocation", "feature_map.projections",
            "feature_map.projections_imag"} <= set(maclaurin[1])
    assert ("feature_map", "expected_error") in set(leaves(maclaurin[0]))
    assert "feature_map.knots" in files["map nystrom"][1]
    assert ("feature_map", "certificate") in set(leaves(files["map random-projection"][0]))
    assert ("input_columns",) in set(leaves(files["exact"][0]))
    assert {"local.members", "local.X_train"} <= set(files["neighbors exact"][1])
    assert files["clusters re-optimized"][0]["local"]["reoptimized"]
    assert any(key.startswith("gibbs.") for key in files["gibbs"][1])


# ----------------------------------------------------------------------------- corruptions


class Saved:
    def __init__(self, metadata, arrays):
        self.metadata, self.arrays = metadata, arrays


def load(tmp_path, metadata, arrays):
    return sg.load(write(tmp_path / "m.npz", model_file(Saved(metadata, arrays))))


def edited(metadata, **changes):
    copy = json.loads(json.dumps(metadata))
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        target = copy
        for parent in parents:
            target = target[parent]
        target[key] = value
    return copy


@pytest.mark.parametrize("value", [-1, True, 1e15, 0.5, "text", [1.0], None])
@pytest.mark.parametrize("field", ["projections_imag", "projections"])
def test_maclaurin_projections_stored_as_json_are_refused(files, tmp_path, field, value):
    """Was: a scalar -1, True or 1e15 in place of projections_imag loaded (the generic rule)
    and moved predictions by up to 3e30."""
    metadata, arrays = files["map maclaurin"]
    key = schema.MAP_PREFIX + field
    arrays = {k: v for k, v in arrays.items() if k != key}
    metadata = edited(metadata, feature_map__=None)
    metadata["feature_map"] = {**files["map maclaurin"][0]["feature_map"], field: value}
    del metadata["arrays"][key]
    match = (r"projections_imag must be given exactly for a complex sketch"
             if value is None and field == "projections_imag"      # null: a real sketch's
             else rf"'feature_map\.{field}' = .*expected the array '{key}'")
    with pytest.raises(InvalidModelFileError, match=match):
        load(tmp_path, metadata, arrays)


@pytest.mark.parametrize("change, match", [
    ("projections_imag of a real sketch", r"projections_imag must be given exactly for a "
                                          r"complex sketch"),
    ("allocation past the projections", r"projections must be finite, of shape"),
    ("sketch", r"'feature_map\.sketch' = 'squares', expected one of"),
])
def test_maclaurin_fields_that_disagree_are_refused(files, tmp_path, change, match):
    metadata, arrays = files["map maclaurin"]
    if change == "projections_imag of a real sketch":
        metadata = edited(metadata, feature_map__sketch="rademacher")
    elif change == "sketch":
        metadata = edited(metadata, feature_map__sketch="squares")
    else:
        allocation = arrays["feature_map.allocation"].copy()
        allocation[-1] += 1
        metadata, arrays = with_array(Saved(metadata, arrays), "feature_map.allocation",
                                      allocation)
    with pytest.raises(InvalidModelFileError, match=match):
        load(tmp_path, metadata, arrays)


@pytest.mark.parametrize("value", ["text", [0.1], {}, True, -1.0, math.inf, None])
def test_expected_error_takes_only_its_domain(files, tmp_path, value):
    """Was: any JSON value."""
    metadata, arrays = files["map maclaurin"]
    with pytest.raises(InvalidModelFileError, match=r"'feature_map\.expected_error'"):
        load(tmp_path, edited(metadata, feature_map__expected_error=value), arrays)
    for valid in (math.nan, 0.0, 0.25):                  # NaN: not computed
        load(tmp_path, edited(metadata, feature_map__expected_error=valid), arrays)


@pytest.mark.parametrize("field, value", [("rank", 0), ("rank", 2.0), ("oversampling", -1),
                                          ("reduction", "qr"), ("certificate", "l2"),
                                          ("target_error", -0.1), ("certified_error", "x")])
def test_random_projection_scalars_are_declared(files, tmp_path, field, value):
    metadata, arrays = files["map random-projection"]
    with pytest.raises(InvalidModelFileError, match=rf"'feature_map\.{field}'"):
        load(tmp_path, edited(metadata, **{f"feature_map__{field}": value}), arrays)


@pytest.mark.parametrize("columns, target, match", [
    (["x0", "x0"], "y", r"'input_columns' naming 'x0' twice"),
    (["x0", "y"], "y", r"'target_column' = 'y', which is also one of its 'input_columns'"),
])
def test_input_columns_distinct_and_not_the_target(files, tmp_path, columns, target, match):
    """Was: loaded; predict then read one column twice, or the target as an input."""
    metadata, arrays = files["exact"]
    with pytest.raises(InvalidModelFileError, match=match):
        load(tmp_path, edited(metadata, input_columns=columns, target_column=target), arrays)


@pytest.mark.parametrize("kind", ["map rff", "exact", "clusters", "neighbors exact"])
def test_log_marginal_likelihood_is_finite(files, tmp_path, kind):
    """Was: NaN accepted."""
    metadata, arrays = files[kind]
    for value in (math.nan, math.inf, -math.inf):
        with pytest.raises(InvalidModelFileError, match=r"'log_marginal_likelihood' = .*, "
                                                        r"expected a finite number"):
            load(tmp_path, edited(metadata, log_marginal_likelihood=value), arrays)


@pytest.mark.parametrize("kind", ["clusters lazy", "test-points"])
def test_models_without_a_likelihood_store_nan(files, tmp_path, kind):
    metadata, arrays = files[kind]
    assert math.isnan(metadata["log_marginal_likelihood"])
    with pytest.raises(InvalidModelFileError, match=r"expected NaN: a local model of kind"):
        load(tmp_path, edited(metadata, log_marginal_likelihood=-12.5), arrays)


# ----------------------------------------------------------------------------- bounded cost


def measured_load(path):
    """(the error loading raised, seconds, tracemalloc peak bytes)."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(InvalidModelFileError) as raised:
            sg.load(path)
    finally:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return str(raised.value), seconds, peak


def exact_model_declaring(files, n):
    """An exact GP of n rows whose deflated members are nearly all zeros."""
    metadata, _ = files["exact"]
    arrays = {"X_train": np.zeros((n, 2)), "cholesky_factor": np.eye(n), "alpha": np.zeros(n)}
    metadata = edited(metadata, arrays={key: {"shape": list(a.shape), "dtype": a.dtype.str}
                                        for key, a in arrays.items()})
    return model_file(Saved(metadata, arrays), compression=zipfile.ZIP_DEFLATED)


def test_a_small_deflated_file_cannot_demand_large_arrays(files, tmp_path):
    """Was: an 816 KB exact-GP file (n = 10,000) inflated to 800 MB and 1.05 GB of memory
    (tests the same at n = 1,500: 18 MB from 20 KB; the slow test below at n = 10,000)."""
    path = write(tmp_path / "m.npz", exact_model_declaring(files, 1500))
    assert path.stat().st_size < 40_000
    message, seconds, peak = measured_load(path)
    assert re.search(r"has members inflating to \d+ bytes from a file of \d+, more than 16 "
                     r"times its size", message), message
    assert seconds < 0.5 and peak < 2**20


@pytest.mark.slow
def test_the_issue_s_exact_file_is_refused_cheaply(files, tmp_path):
    path = write(tmp_path / "m.npz", exact_model_declaring(files, 10_000))
    message, seconds, peak = measured_load(path)
    assert "has members inflating to 800" in message
    assert seconds < 0.5 and peak < 2**20


def neighbourhood_file(files, tmp_path, n_centres, *, centres=None, radius=None,
                       n_samples=None, rows=300):
    """The neighbourhood model's file with ``rows`` training rows, every neighbourhood all of
    them, at ``n_centres`` centres (``centres``, default the mean of the rows, repeated),
    deflated."""
    metadata, arrays = files["neighbors exact"]
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(rows, 2))
    scale = arrays["local.scale"]
    reach = np.max(np.linalg.norm((X - X.mean(axis=0)) / scale, axis=1))
    arrays = {**arrays, "local.X_train": X, "local.y_train": np.sin(X).sum(axis=1),
              "local.centres": np.tile(X.mean(axis=0) if centres is None else centres,
                                       (n_centres, 1)),
              "local.blend_radius": np.full(n_centres, 0.5 * reach if radius is None
                                            else radius),
              "local.members": np.tile(np.arange(rows, dtype=float), (n_centres, 1))}
    metadata = edited(metadata, system__n_samples=rows if n_samples is None else n_samples,
                      arrays={key: {"shape": list(a.shape), "dtype": a.dtype.str}
                              for key, a in arrays.items()})
    return write(tmp_path / "n.npz", model_file(Saved(metadata, arrays),
                                                compression=zipfile.ZIP_DEFLATED))


@pytest.mark.parametrize("case, n_centres, options, match", [
    ("one centre repeated", 250, {}, r"centre 1 lies within 0\.75 blend radii of an earlier"),
    ("more centres than rows", 1000, {}, r"1000 centres for 300 training rows"),
    ("radius too small", 250, {"radius": 1e-3}, r"neighbourhood 0 has the blend radius"),
    ("first centre not the mean", 250, {"centres": np.array([5.0, 5.0])},
     r"its first centre is not the mean"),
    ("rows covered", 250, {"n_samples": 299}, r"cover 300 rows, but the file says "
                                              r"n_samples = 299"),
])
def test_a_neighbourhood_file_is_checked_before_it_is_conditioned(files, tmp_path, case,
                                                                  n_centres, options, match):
    """Was: a 40 KB file cost 4.3 s and 700 MB of conditioning (1,000 copies of one
    300-row neighbourhood) before its likelihood refused it; 250 copies here would condition
    250 factors of 300 x 300 (180 MB)."""
    path = neighbourhood_file(files, tmp_path, n_centres, **options)
    assert path.stat().st_size < 40_000
    message, seconds, peak = measured_load(path)
    assert re.search(match, message), message
    assert seconds < 0.5 and peak < 16 * 2**20


def test_local_flags_agree_with_the_parameters(files, tmp_path):
    """Was (found by the full fuzz run): a lazy model with 'local.reoptimized' = true loaded
    as a model with one map per centre, predicting differently."""
    metadata, arrays = files["clusters lazy"]
    with pytest.raises(InvalidModelFileError, match=r"'params\.local\.reoptimize' = False, but "
                                                    r"the fitted model's 'local\.reoptimized' "
                                                    r"is true"):
        load(tmp_path, edited(metadata, local__reoptimized=True), arrays)


def test_every_package_kernel_parameter_is_declared():
    """The kernels of the package (not only those the models above use) store only declared
    parameters; the generic number rule is for kernels registered from outside."""
    from scalegp import kernels
    for name in sorted(kernels.KERNEL_NAMES):
        assert set(kernels.get(name).get_params()) <= set(schema.KERNEL_PARAMS), name


def test_a_gibbs_model_without_a_map_is_refused(files, tmp_path):
    """Was: an unexpected AttributeError (caught by the loader's safety net)."""
    metadata, arrays = files["gibbs"]
    arrays = {key: a for key, a in arrays.items() if not key.startswith(schema.MAP_PREFIX)}
    metadata = edited(metadata, approximation="exact", feature_map={},
                      params__approximation="exact",
                      arrays={key: {"shape": list(a.shape), "dtype": a.dtype.str}
                              for key, a in arrays.items()})
    with pytest.raises(InvalidModelFileError, match=r"uses the approximation 'exact', but a "
                                                    r"Gibbs model samples the weights of a "
                                                    r"feature map"):
        load(tmp_path, metadata, arrays)
