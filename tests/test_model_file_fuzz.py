"""Corrupted model files: a generator mutates every field of saved models; each mutant either
loads to bit-identical predictions or raises InvalidModelFileError, nothing else.

The generator knows the documented domain of every field (this file's ``metadata_verdict``
and ``ARRAY_DOMAINS``, written from the model-file contract, not from the loader): a value
outside it must be refused; a value inside it that cannot change predictions (an estimator
parameter, a reported log likelihood, an optimizer counter) may load, and must then predict
identically; a value inside it that changes predictions (another length scale) is not a
corruption the loader could see, and is not generated.
"""

import io
import json
import math
import warnings
import zipfile

import numpy as np
import pytest

import scalegp as sg
from scalegp.io import safety
from scalegp import local
from scalegp.errors import InvalidModelFileError
from scalegp.estimators.configuration import Clusters, Neighbors, make_approximation

MUST_FAIL, MAY_LOAD = "must fail", "may load"
#: Mutants run by the default suite: every field and every kind of mutation of each model at
#: least once, the rest a deterministic sample (``-m slow`` runs all, about 7,000).
BUDGET = 900
#: JSON values put in place of every metadata entry.
BAD_VALUES = (None, True, "text", [], {}, [1.0, 2.0], math.nan, math.inf, -math.inf, -1, 0,
              0.5, 1, 10**400, 1e300)


def deep_list(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


# ----------------------------------------------------------------------------- models


def data(seed=0, n=30):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.standard_normal(n)


MODELS = {
    "rff": lambda: sg.LowRankGPRegressor(normalize_y=True, normalize_X=True,
                                         random_state=0, approximation=make_approximation("rff", n_components=16)),
    "glf": lambda: sg.LowRankGPRegressor(
        kernel=sg.Gaussian(length_scale_bounds=(0.3, 3.0)),
        random_state=0, approximation=make_approximation("glf", n_components=64), normalize_X=False, normalize_y=False),
    # sfs has negative weights in 2-D; a large noise variance keeps Psi S Psi^T + s2 I
    # positive definite, so the signed (eigen-factorized) system is stored as it is
    "signed": lambda: sg.LowRankGPRegressor(noise_variance=0.5, optimize=False,
                                            random_state=0, approximation=make_approximation("sfs", n_components=32, signed_rule="keep"), normalize_X=False, normalize_y=False),
    # the default signed_rule="repair" stores the positive part's Cholesky system
    "repaired": lambda: sg.LowRankGPRegressor(noise_variance=0.05, optimize=False,
                                              random_state=0, approximation=make_approximation("sfs", n_components=32), normalize_X=False, normalize_y=False),
    "exact": lambda: sg.ExactGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0]),
                                         normalize_y=True, normalize_X=False),
    # local models (scalegp.local.centered): stacked per-centre systems, or the training rows
    "clusters": lambda: sg.LowRankGPRegressor(normalize_y=True,
                                              random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0), normalize_X=False),
    "lazy": lambda: sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0, lazy=True), normalize_X=False, normalize_y=False),
    "test-points": lambda: sg.LowRankGPRegressor(local="test-points",
                                                 optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False),
    # neighbourhood-local models: the training rows and the cover, conditioned on loading
    "neighbors": lambda: sg.LowRankGPRegressor(approximation="exact", normalize_y=True, random_state=0, local=Neighbors(n_neighbors=12, learning_centers=4), normalize_X=False),
    "neighbors-glf": lambda: sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("glf", n_components=16), local=Neighbors(n_neighbors=12), normalize_X=False, normalize_y=False),
    # the training inputs and the probes are stored; the projection is recomputed on load
    "random-projection": lambda: sg.LowRankGPRegressor(
        optimize=False, random_state=0, approximation=make_approximation("random-projection", n_components=30, options={"epsilon": 0.05}), normalize_X=False, normalize_y=False),
    # a complex sketch: the real and imaginary parts of the projections, the allocation
    "maclaurin": lambda: sg.LowRankGPRegressor(
        kernel=sg.Gaussian(), optimize=False,
        random_state=0, approximation=make_approximation("maclaurin", n_components=17, options={"sketch": "complex-rademacher"}), normalize_X=False, normalize_y=False),
    # the knots
    "nystrom": lambda: sg.LowRankGPRegressor(optimize=False, random_state=0, approximation=make_approximation("nystrom", n_components=8), normalize_X=False, normalize_y=False),
    # the Vecchia model: the training inputs, the standardized targets and m
    "vecchia": lambda: sg.VecchiaGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 2.0]),
                                             n_neighbors=6, n_neighbors_predict=9,
                                             random_state=0),
    # the draws of the Gibbs sampler (scalegp.inference.gibbs), with the FITC-style diagonal
    "gibbs": lambda: sg.GibbsGPRegressor(theta1_grid=[0.2, 0.5, 1.0, 2.0],
                                         n_iter=30, burn_in=10, thin=2, collapsed=True,
                                         diag_correction=True, normalize_X=True,
                                         random_state=0, approximation=make_approximation("rff", n_components=8)),
}
X_TEST = data(1, n=9)[0]


def predictions(model):
    return model.predict(X_TEST, return_std=True)


class Saved:
    """A saved model: its members as .npy bytes, its metadata, its predictions."""

    def __init__(self, model, path):
        sg.save(model, path)
        with np.load(path, allow_pickle=False) as npz:
            self.arrays = {key: npz[key] for key in npz.files if key != "metadata"}
            self.metadata = json.loads(npz["metadata"].tobytes().decode("utf-8"))
        self.predictions = predictions(model)
        self.signed = self.metadata.get("system", {}).get("signed", False)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    X, y = data(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: Saved(make().fit(X, y), folder / f"{name}.npz")
                for name, make in MODELS.items()}


# ----------------------------------------------------------------------------- writing files


def npy_bytes(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asanyarray(array), allow_pickle=False)
    return buffer.getvalue()


def npy_with_header(array, shape):
    """An .npy member whose header declares ``shape`` over the data of ``array``."""
    buffer = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": False,
              "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + np.ascontiguousarray(array).tobytes()


def metadata_bytes(metadata):
    return npy_bytes(np.frombuffer(json.dumps(metadata).encode("utf-8"), dtype=np.uint8))


def archive(members, compression=zipfile.ZIP_STORED):
    """A zip file of (name, bytes) pairs, in order (a repeated name is written twice)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # zipfile warns on duplicate names
        with zipfile.ZipFile(buffer, "w", compression) as zf:
            for name, content in members:
                zf.writestr(name, content)
    return buffer.getvalue()


def model_file(saved, metadata=None, arrays=None, extra=(), compression=zipfile.ZIP_STORED):
    """The file of ``saved`` with its metadata and arrays replaced (raw member bytes allowed)."""
    metadata = saved.metadata if metadata is None else metadata
    arrays = saved.arrays if arrays is None else arrays
    members = [("metadata.npy", metadata if isinstance(metadata, bytes)
                else metadata_bytes(metadata))]
    members += [(key + ".npy", value if isinstance(value, bytes) else npy_bytes(value))
                for key, value in arrays.items()]
    return archive(members + list(extra), compression)


def with_array(saved, key, array, update_listing=True):
    """(metadata, arrays) with one array replaced, its listing updated to match or not."""
    metadata = json.loads(json.dumps(saved.metadata))
    if update_listing:
        metadata["arrays"][key] = {"shape": list(array.shape), "dtype": array.dtype.str}
    return metadata, {**saved.arrays, key: array}


# ----------------------------------------------------------------------------- the domains


def is_number(value):
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and not (isinstance(value, int) and len(str(abs(value))) > 20))


def is_finite(value):
    return is_number(value) and math.isfinite(value)


def is_count(value, minimum):
    return is_number(value) and isinstance(value, int) and value >= minimum


def positive_vector(value, size):
    values = value if isinstance(value, list) else [value]
    return (len(values) in (1, size) and all(is_finite(v) and v > 0 for v in values))


def inside(values, bounds):
    values = values if isinstance(values, list) else [values]
    return bounds == "fixed" or all(bounds[0] * (1 - 1e-12) <= v <= bounds[1] * (1 + 1e-12)
                                    for v in values)


def valid_bounds(bounds):
    return bounds == "fixed" or (isinstance(bounds, list) and len(bounds) == 2
                                 and all(is_finite(b) for b in bounds)
                                 and 0 < bounds[0] < bounds[1])


def kernel_verdict(params, original, n_dims):
    """MUST_FAIL, MAY_LOAD or None (a valid kernel that predicts differently)."""
    known = {"length_scale", "variance", "length_scale_bounds", "variance_bounds", "nu"}
    if not isinstance(params, dict) or set(params) - known or set(original) - set(params):
        return MUST_FAIL
    if "nu" in params and (not is_number(params["nu"]) or params["nu"] not in (0.5, 1.5, 2.5)):
        return MUST_FAIL
    if not (positive_vector(params["length_scale"], n_dims) and is_finite(params["variance"])
            and params["variance"] > 0 and valid_bounds(params["length_scale_bounds"])
            and valid_bounds(params["variance_bounds"])
            and inside(params["length_scale"], params["length_scale_bounds"])
            and inside(params["variance"], params["variance_bounds"])):
        return MUST_FAIL
    same = {key: params[key] for key in ("length_scale", "variance", "nu") if key in params}
    return MAY_LOAD if same == {key: original[key] for key in same} else None


#: Entries that change nothing a prediction uses: (path prefix, domain of the value).
INERT = {
    ("scalegp_version",): lambda v: isinstance(v, str),
    ("system", "jitter"): lambda v: is_finite(v) and v >= 0,
    ("system", "n_samples"): lambda v: is_count(v, 1),
    ("optimization", "log_marginal_likelihood"): lambda v: is_number(v) and v < math.inf,
    ("optimization", "n_evaluations"): lambda v: is_count(v, 0),
    ("optimization", "n_starts"): lambda v: is_count(v, 0),
    ("optimization", "converged"): lambda v: isinstance(v, bool),
    ("optimization", "message"): lambda v: isinstance(v, str),
    ("feature_map", "selection"): lambda v: isinstance(v, str),
    ("feature_map", "epsilon"): lambda v: is_finite(v) and v > 0,
    ("feature_map", "target_error"): lambda v: is_finite(v) and v > 0,
    ("feature_map", "certified_error"): lambda v: is_finite(v) and v >= 0,
    ("feature_map", "certificate"): lambda v: v in ("frobenius", "trace"),
    ("feature_map", "expected_error"): lambda v: is_number(v) and (math.isnan(v)
                                                                  or 0 <= v < math.inf),
    ("gibbs", "collapsed"): lambda v: isinstance(v, bool),
    ("gibbs", "n_floored"): lambda v: is_count(v, 0),
}
#: Entries whose valid values change predictions: (path, domain).
PREDICTIVE = {
    ("noise_variance",): lambda v: is_finite(v) and v > 0,
    ("y_train_std",): lambda v: is_finite(v) and v > 0,
    ("y_train_mean",): is_finite,
    ("gibbs", "diag_correction"): lambda v: isinstance(v, bool),
    ("system", "n_neighbors"): lambda v: is_count(v, 1),
}


#: Local metadata that files written before it existed lack (read with these values).
LOCAL_DEFAULTS = local.ClusterLocalModel.MODEL_FILE_DEFAULTS


def get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def metadata_verdict(path, mutated, original):
    """MUST_FAIL, MAY_LOAD, or None when the mutant is a valid model of other predictions."""
    if path == ("local", "threshold"):
        # a lazy model's centres are recomputed from it; the others only report it
        value = mutated["local"].get("threshold")
        valid = is_finite(value) and value > 0
        if not valid:
            return MUST_FAIL
        return MAY_LOAD if not original["local"].get("lazy") or value == get(original,
                                                                              path) else None
    if path and path[0] == "params":
        return MAY_LOAD                 # checked by the estimator; predictions never change
    if path == ("log_marginal_likelihood",):
        # reported only; NaN exactly for the local models that have no likelihood
        value = mutated.get("log_marginal_likelihood", "deleted")
        entry = original.get("local", {})
        if entry.get("kind") == "test-points" or entry.get("lazy"):
            return MAY_LOAD if is_number(value) and math.isnan(value) else MUST_FAIL
        return MAY_LOAD if is_finite(value) else MUST_FAIL
    if len(path) == 2 and path[0] == "local" and "local" in mutated \
            and path[1] in LOCAL_DEFAULTS and path[1] in original["local"] \
            and path[1] not in mutated["local"]:
        # deleted: a file written before the key existed, read with its default
        return MAY_LOAD if LOCAL_DEFAULTS[path[1]] == get(original, path) else MUST_FAIL
    if path[:2] == ("kernel", "params"):
        if not isinstance(get(mutated, ("kernel",)), dict):
            return MUST_FAIL
        params = mutated["kernel"].get("params")
        return kernel_verdict(params, original["kernel"]["params"], original["n_features_in"])
    if path == ("optimization",):
        return MAY_LOAD if mutated.get("optimization", "absent") is None else MUST_FAIL
    if path[:2] == ("optimization", "theta"):
        theta = mutated["optimization"].get("theta")
        return (MAY_LOAD if isinstance(theta, list)
                and len(theta) == len(original["optimization"]["theta"])
                and all(map(is_finite, theta)) else MUST_FAIL)
    try:
        value = get(mutated, path)
    except (KeyError, IndexError, TypeError):
        return MUST_FAIL                # deleted (every entry but the parameters is required)
    if path in INERT:
        return MAY_LOAD if INERT[path](value) else MUST_FAIL
    if path in PREDICTIVE:
        if value == get(original, path) and type(value) is type(get(original, path)):
            return MAY_LOAD
        return None if PREDICTIVE[path](value) else MUST_FAIL
    same = value == get(original, path) and type(value) is type(get(original, path))
    return MAY_LOAD if same else MUST_FAIL


#: The documented domain of every array (by name; feature-map fields as stored).
ARRAY_DOMAINS = {
    "beta": "finite", "alpha": "finite", "X_train": "finite", "X_train_mean": "finite",
    "eigenvectors": "finite", "feature_map.omega": "finite", "feature_map.offset": "finite",
    "feature_map.row_scales": "finite", "feature_map.phase_shifts": "finite",
    "X_train_scale": "positive", "feature_map.half_width": "positive",
    "feature_map.frequency_weights": "nonnegative",
    "signs": "sign", "feature_map.frequency_signs": "sign",
    "feature_map.sign_diagonals": "sign",
    "cholesky_factor": "cholesky", "eigenvalues": "eigenvalues",
    "positive_part.transform": "finite", "positive_part.eigenvalues": "spectrum",
    "feature_map.n_nodes": "count", "feature_map.panels": "panels",
    "local.centres": "finite", "local.beta": "finite", "local.cholesky_factor": "choleskies",
    "local.X_train": "finite", "local.y_train": "finite", "y_train": "finite",
    "local.blend_radius": "positive", "local.scale": "positive", "local.members": "indices",
    "feature_map.truncation_bound": "reported", "feature_map.theoretical_n_nodes": "reported",
    "feature_map.inputs": "finite", "feature_map.probes": "finite",
    "feature_map.knots": "finite", "feature_map.allocation": "count",
    "feature_map.projections": "finite", "feature_map.projections_imag": "finite",
    "gibbs.theta1_grid": "grid", "gibbs.tau": "positive", "gibbs.theta2": "positive",
    "gibbs.theta1_index": "index", "gibbs.weights": "finite",
}


def set_entry(array, index, value):
    out = array.copy()
    out[index] = value
    return out


def value_mutants(key, array):
    """(name, mutated array, verdict) for values outside (or inside) the array's domain."""
    domain = ARRAY_DOMAINS[key]
    first = (0,) * array.ndim
    out = []
    if array.dtype.kind == "f":
        out += [(f"{v}", set_entry(array, first, v), MUST_FAIL) for v in (np.nan, -np.inf)]
        out.append(("inf", set_entry(array, first, np.inf),
                    MAY_LOAD if domain == "reported" else MUST_FAIL))
    if domain in ("positive", "count", "grid"):
        out += [(f"{v}", set_entry(array, first, v), MUST_FAIL) for v in (0, -1)]
    if domain in ("nonnegative", "reported"):
        out.append(("negative", set_entry(array, first, -1.0), MUST_FAIL))
    if domain == "sign":
        out += [(f"{v}", set_entry(array, first, v), MUST_FAIL) for v in (0.0, 0.5, 2.0)]
        if key != "feature_map.sign_diagonals":     # they disagree with the other signs
            out.append(("flipped", set_entry(array, first, -array[first]), MUST_FAIL))
    if domain == "indices":      # sorted training-row indices, one row per neighbourhood
        out += [(f"{v}", set_entry(array, first, v), MUST_FAIL) for v in (-1.0, 0.5)]
        out.append(("past the rows", set_entry(array, (0, array.shape[1] - 1), 1e6), MUST_FAIL))
        out.append(("unsorted", set_entry(array, (0, 0), array[0, 1]), MUST_FAIL))
    if domain == "grid":         # distinct atoms
        out.append(("repeated atom", set_entry(array, (1,), array[0]), MUST_FAIL))
    if domain == "index":        # an atom of the grid
        out += [("negative", set_entry(array, first, -1), MUST_FAIL),
                ("past the grid", set_entry(array, first, 10**6), MUST_FAIL)]
    if domain == "panels":
        out += [(f"{v}", set_entry(array, first, v), MUST_FAIL) for v in (0, 3)]
    if domain == "cholesky":
        out += [("upper entry", set_entry(array, (0, array.shape[1] - 1), 0.25), MUST_FAIL),
                ("zero diagonal", set_entry(array, (1, 1), 0.0), MUST_FAIL),
                ("negative diagonal", set_entry(array, (0, 0), -array[0, 0]), MUST_FAIL)]
    if domain == "choleskies":   # a stack of factors, one per centre
        out += [("upper entry", set_entry(array, (0, 0, array.shape[2] - 1), 0.25), MUST_FAIL),
                ("zero diagonal", set_entry(array, (-1, 1, 1), 0.0), MUST_FAIL),
                ("negative diagonal", set_entry(array, (0, 0, 0), -array[0, 0, 0]),
                 MUST_FAIL)]
    if domain == "spectrum":     # exactly one positive eigenvalue per repaired feature
        largest = int(np.argmax(array))
        out += [("zero", set_entry(array, (largest,), 0.0), MUST_FAIL),
                ("sign flipped", set_entry(array, (largest,), -array[largest]), MUST_FAIL)]
    if domain == "eigenvalues":
        largest = int(np.argmax(array))
        out += [("zero", set_entry(array, (largest,), 0.0), MUST_FAIL),
                ("inertia", set_entry(array, (largest,), -array[largest]), MUST_FAIL)]
    return out


def dtype_mutants(array):
    """(name, mutated array, verdict): other dtypes holding (about) the same values."""
    if array.dtype.kind in "iu":
        return [("int32", array.astype(np.int32), MAY_LOAD),
                ("big-endian", array.astype(">i8"), MAY_LOAD),
                ("float64", array.astype(np.float64), MUST_FAIL),
                ("bool", array.astype(bool), MUST_FAIL),
                ("str", array.astype(str), MUST_FAIL)]
    return [("complex", array.astype(np.complex128), MUST_FAIL),
            ("float32", array.astype(np.float32), MUST_FAIL),
            ("float16", array.astype(np.float16), MUST_FAIL),
            ("int64", np.round(array).astype(np.int64), MUST_FAIL),
            ("bool", array != 0, MUST_FAIL),
            ("str", array.astype(str), MUST_FAIL),
            ("bytes", array.astype("S32"), MUST_FAIL),
            ("big-endian", array.astype(">f8"), MAY_LOAD)]


def shape_mutants(array):
    out = [("one fewer", array[..., :-1]), ("one more", np.concatenate([array, array[..., :1]],
                                                                       axis=-1)),
           ("extra axis", array[None]), ("empty", array[..., :0])]
    if array.ndim == 2:
        out += [("flattened", array.ravel()), ("one fewer row", array[:-1])]
        if array.shape[0] != array.shape[1]:
            out.append(("transposed", np.ascontiguousarray(array.T)))
    return out


# ----------------------------------------------------------------------------- the generator


def metadata_paths(tree, prefix=()):
    """Every entry of the metadata: dict keys and list items, depth first."""
    items = (tree.items() if isinstance(tree, dict)
             else enumerate(tree) if isinstance(tree, list) else ())
    for key, value in items:
        yield prefix + (key,)
        yield from metadata_paths(value, prefix + (key,))


def mutated_metadata(metadata, path, value=None, delete=False):
    mutated = json.loads(json.dumps(metadata))
    parent = get(mutated, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return mutated


def metadata_mutants(saved):
    for path in metadata_paths(saved.metadata):
        name = ".".join(map(str, path))
        mutated = mutated_metadata(saved.metadata, path, delete=True)
        verdict = metadata_verdict(path, mutated, saved.metadata)
        if not isinstance(path[-1], int) and verdict is not None:   # list items are kept
            yield f"metadata {name} deleted", name, (lambda m=mutated: model_file(saved, m)), \
                verdict
        for value in (*BAD_VALUES, deep_list(200)):
            if value == get(saved.metadata, path) and type(value) is type(get(saved.metadata,
                                                                             path)):
                continue
            mutated = mutated_metadata(saved.metadata, path, value)
            verdict = (MUST_FAIL if isinstance(value, list) and value and value[0] == []
                       else metadata_verdict(path, mutated, saved.metadata))
            if verdict is not None:
                yield (f"metadata {name} = {str(value)[:20]}", name,
                       (lambda m=mutated: model_file(saved, m)), verdict)


def array_mutants(saved):
    for key, array in saved.arrays.items():
        for label, mutated, verdict in value_mutants(key, array) + dtype_mutants(array):
            metadata, arrays = with_array(saved, key, mutated)
            yield (f"array {key} {label}", key,
                   (lambda m=metadata, a=arrays: model_file(saved, m, a)), verdict)
        for label, mutated in shape_mutants(array):
            metadata, arrays = with_array(saved, key, mutated)
            yield (f"array {key} {label}", key,
                   (lambda m=metadata, a=arrays: model_file(saved, m, a)), MUST_FAIL)
        # the listing not updated: the member disagrees with the metadata
        metadata, arrays = with_array(saved, key, array.astype(np.complex128), False)
        yield (f"array {key} unlisted dtype", key,
               (lambda m=metadata, a=arrays: model_file(saved, m, a)), MUST_FAIL)
        for label, shape in (("huge", (2**40,) + array.shape), ("smaller", array.shape[:-1]),
                             ("larger", array.shape[:-1] + (array.shape[-1] + 1,))):
            lie = {**saved.arrays, key: npy_with_header(array, shape)}
            yield (f"array {key} header declares {label} shape", key,
                   (lambda a=lie: model_file(saved, arrays=a)), MUST_FAIL)
        listed = {**saved.metadata["arrays"], key: {"shape": [2**40, 2**40],
                                                     "dtype": array.dtype.str}}
        lie = {**saved.arrays, key: npy_with_header(array, (2**40, 2**40))}
        yield (f"array {key} header and listing declare 2^80 entries", key,
               (lambda m={**saved.metadata, "arrays": listed}, a=lie: model_file(saved, m, a)),
               MUST_FAIL)
        missing = {k: v for k, v in saved.arrays.items() if k != key}
        yield (f"array {key} missing", key, (lambda a=missing: model_file(saved, arrays=a)),
               MUST_FAIL)
        yield (f"array {key} twice", key,
               (lambda: model_file(saved, extra=[(key + ".npy", npy_bytes(array))])),
               MUST_FAIL)
        yield (f"array {key} as a non-.npy member", key,
               (lambda a=missing: model_file(saved, arrays=a,
                                             extra=[(key, npy_bytes(array))])), MUST_FAIL)


def archive_mutants(saved):
    content = model_file(saved)
    for fraction in (0.05, 0.5, 0.9, 0.99):
        yield (f"truncated to {fraction:.0%}", "file",
               (lambda n=int(len(content) * fraction): content[:n]), MUST_FAIL)
    yield "one byte short", "file", (lambda: content[:-1]), MUST_FAIL
    with zipfile.ZipFile(io.BytesIO(content)) as zf:
        for info in zf.infolist():
            start = info.header_offset + 30 + len(info.filename)
            middle = start + info.file_size - 4           # inside the data, past the header
            flipped = content[:middle] + bytes(b ^ 0xFF for b in content[middle:middle + 4]) \
                + content[middle + 4:]
            yield f"flipped bytes in {info.filename}", "file", (lambda f=flipped: f), MUST_FAIL
    extra = np.arange(3.0)
    yield ("unlisted member", "file",
           (lambda: model_file(saved, extra=[("extra.npy", npy_bytes(extra))])), MUST_FAIL)
    yield ("unlisted member that is not an array", "file",
           (lambda: model_file(saved, extra=[("extra.npy", b"\x80\x04 pickle")])), MUST_FAIL)
    listed = {**saved.metadata["arrays"], "extra": {"shape": [3], "dtype": extra.dtype.str}}
    yield ("listed unknown array", "file",
           (lambda: model_file(saved, {**saved.metadata, "arrays": listed},
                               {**saved.arrays, "extra": extra})), MUST_FAIL)
    yield ("metadata twice", "file",
           (lambda: model_file(saved, extra=[("metadata.npy", metadata_bytes(saved.metadata))])),
           MUST_FAIL)
    yield ("metadata missing", "file",
           (lambda: archive([(k + ".npy", npy_bytes(v)) for k, v in saved.arrays.items()])),
           MUST_FAIL)
    yield ("metadata as floats", "file",
           (lambda: model_file(saved, npy_bytes(np.arange(4.0)))), MUST_FAIL)
    text = json.dumps(saved.metadata)
    yield ("metadata not an object", "file",
           (lambda: model_file(saved, metadata_bytes([saved.metadata]))), MUST_FAIL)
    duplicated = '{"noise_variance": 1.0, ' + text[1:]
    yield ("metadata with a key twice", "file",
           (lambda: model_file(saved, npy_bytes(np.frombuffer(duplicated.encode(), np.uint8)))),
           MUST_FAIL)
    padded = text + " " * safety.MAX_METADATA_BYTES
    yield ("metadata longer than the limit", "file",
           (lambda: model_file(saved, npy_bytes(np.frombuffer(padded.encode(), np.uint8)))),
           MUST_FAIL)
    yield ("deflated archive", "file",
           (lambda: model_file(saved, compression=zipfile.ZIP_DEFLATED)), MAY_LOAD)


def all_mutants(saved):
    """(model, description, field, build, verdict) for every mutant of every model."""
    for model, entry in saved.items():
        for generator in (metadata_mutants, array_mutants, archive_mutants):
            for description, field, build, verdict in generator(entry):
                yield model, description, (model, field), build, verdict


def mutation_kind(mutant):
    """(model, the description without the field): e.g. ("rff", "metadata {} = -1")."""
    model, description, (_, field), _, _ = mutant
    return model, description.replace(field, "{}", 1)


def sample(mutants, budget, rng):
    """At least one mutant per (model, field) and per mutation kind, the rest drawn without
    replacement."""
    first = {}
    for index, mutant in enumerate(mutants):
        first.setdefault(mutant[2], index)
        first.setdefault(mutation_kind(mutant), index)
    chosen = set(first.values())
    rest = [i for i in range(len(mutants)) if i not in chosen]
    extra = max(0, budget - len(chosen))
    chosen |= set(rng.choice(rest, size=min(extra, len(rest)), replace=False).tolist())
    return [mutants[i] for i in sorted(chosen)]


# ----------------------------------------------------------------------------- the fuzz test


def check_mutant(path, saved_model, description, build, verdict):
    """None if the mutant behaves, else what went wrong."""
    path.write_bytes(build())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = sg.load(path)
            mean, std = predictions(loaded)
    except InvalidModelFileError as error:
        if "unexpected" in str(error):
            return f"{description}: only the loader's safety net caught it: {error}"
        return None
    except Exception as error:  # noqa: BLE001 -- any other exception is the failure sought
        return f"{description}: {type(error).__name__}: {error}"
    if verdict == MUST_FAIL:
        return f"{description}: loaded, but the file is invalid"
    expected_mean, expected_std = saved_model.predictions
    if not (np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)):
        return f"{description}: loaded with different predictions"
    return None


@pytest.fixture(scope="module")
def mutants(saved):
    return list(all_mutants(saved))


def test_every_mutant_loads_identically_or_is_refused(saved, mutants, tmp_path):
    chosen = sample(mutants, BUDGET, np.random.default_rng(20240901))
    assert len(chosen) >= 500
    assert {m[2] for m in chosen} == {m[2] for m in mutants}     # every field of every model
    assert {mutation_kind(m) for m in chosen} == {mutation_kind(m) for m in mutants}
    for name in MODELS:                                          # every kind of mutation
        assert {m[1].split()[0] for m in chosen if m[0] == name} >= {"metadata", "array"}
    path = tmp_path / "mutant.npz"
    problems = [problem for model, description, _, build, verdict in chosen
                if (problem := check_mutant(path, saved[model], f"{model}: {description}",
                                            build, verdict)) is not None]
    assert problems == [], f"{len(problems)} of {len(chosen)} mutants:\n" + "\n".join(problems)


@pytest.mark.slow
def test_every_mutant_of_the_generator(saved, mutants, tmp_path):
    """All mutants, not a sample (about 7,000: a minute)."""
    path = tmp_path / "mutant.npz"
    problems = [problem for model, description, _, build, verdict in mutants
                if (problem := check_mutant(path, saved[model], f"{model}: {description}",
                                            build, verdict)) is not None]
    assert problems == [], f"{len(problems)} of {len(mutants)} mutants:\n" + "\n".join(problems)


def test_generator_covers_every_field(saved, mutants):
    """Every metadata entry and every array of each model has mutants, of each class."""
    for name, entry in saved.items():
        fields = {m[2][1] for m in mutants if m[0] == name}
        assert {".".join(map(str, p)) for p in metadata_paths(entry.metadata)} <= fields
        assert set(entry.arrays) <= fields
        assert sum(m[4] == MUST_FAIL for m in mutants if m[0] == name) > 100
    assert saved["signed"].signed and "eigenvalues" in saved["signed"].arrays
    assert "feature_map.n_nodes" in saved["glf"].arrays
    assert "X_train_mean" in saved["rff"].arrays
    assert "positive_part.transform" in saved["repaired"].arrays
    assert saved["clusters"].arrays["local.cholesky_factor"].shape[0] > 1
    assert {"local.X_train", "local.y_train"} <= set(saved["lazy"].arrays)
    assert {"local.X_train", "local.y_train"} <= set(saved["test-points"].arrays)
    assert saved["neighbors"].metadata["approximation"] == "exact"
    assert not any(key.startswith("feature_map.") for key in saved["neighbors"].arrays)
    assert saved["neighbors-glf"].arrays["local.members"].shape[0] > 1


def test_unmutated_files_load_identically(saved, tmp_path):
    """The generator's own writer gives loadable files (so refusals are the mutations')."""
    for name, entry in saved.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(model_file(entry))
        mean, std = predictions(sg.load(path))
        np.testing.assert_array_equal(mean, entry.predictions[0])
        np.testing.assert_array_equal(std, entry.predictions[1])


# ----------------------------------------------------------------------------- the named cases


def write(path, content):
    path.write_bytes(content)
    return path


def test_negative_y_train_std_is_refused(saved, tmp_path):
    """Was: loaded, with every prediction silently negated."""
    metadata = {**saved["rff"].metadata, "y_train_std": -5.0}
    with pytest.raises(InvalidModelFileError,
                       match=r"metadata 'y_train_std' = -5\.0, expected a number finite and > 0"):
        sg.load(write(tmp_path / "m.npz", model_file(saved["rff"], metadata)))


def test_deep_json_is_refused_before_parsing(saved, tmp_path):
    """Was: RecursionError from json.loads."""
    text = json.dumps({**saved["rff"].metadata, "scalegp_version": "VERSION"})
    text = text.replace('"VERSION"', "[" * 100_000 + "]" * 100_000)
    metadata = npy_bytes(np.frombuffer(text.encode("utf-8"), dtype=np.uint8))
    with pytest.raises(InvalidModelFileError, match=r"has metadata nested 100001 levels deep, "
                                                    r"more than the 32"):
        sg.load(write(tmp_path / "m.npz", model_file(saved["rff"], metadata)))


def test_huge_declared_shape_is_refused_before_inflating(saved, tmp_path):
    """Was: MemoryError (numpy allocates what the header declares)."""
    entry = saved["exact"]
    shape = (2**31, 2**31)
    arrays = {**entry.arrays, "cholesky_factor": npy_with_header(entry.arrays["cholesky_factor"],
                                                                 shape)}
    metadata = json.loads(json.dumps(entry.metadata))
    metadata["arrays"]["cholesky_factor"]["shape"] = list(shape)
    with pytest.raises(InvalidModelFileError,
                       match=r"has array 'cholesky_factor' whose header declares shape "
                             r"\(2147483648, 2147483648\) of dtype <f8 \(36893488147419103232 "
                             r"bytes\), but the member holds \d+ bytes of data"):
        sg.load(write(tmp_path / "m.npz", model_file(entry, metadata, arrays)))


@pytest.mark.parametrize("model", ["rff", "exact"])
def test_singular_cholesky_factor_is_refused(saved, tmp_path, model):
    """Was: LinAlgError (singular matrix) at the first prediction."""
    entry = saved[model]
    factor = set_entry(entry.arrays["cholesky_factor"], (2, 2), 0.0)
    with pytest.raises(InvalidModelFileError,
                       match=r"has array 'cholesky_factor' whose values must be finite and > 0 "
                             r"on the diagonal; diagonal entry 2 is 0\.0"):
        sg.load(write(tmp_path / "m.npz", model_file(entry, *with_array(entry,
                                                                         "cholesky_factor",
                                                                         factor))))


def test_duplicate_json_key_is_refused(saved, tmp_path):
    """json.loads would keep the last of two values; the loader refuses the file."""
    text = '{"y_train_std": -5.0, ' + json.dumps(saved["rff"].metadata)[1:]
    metadata = npy_bytes(np.frombuffer(text.encode("utf-8"), dtype=np.uint8))
    with pytest.raises(InvalidModelFileError, match=r"has metadata with the key 'y_train_std' "
                                                    r"twice in one object"):
        sg.load(write(tmp_path / "m.npz", model_file(saved["rff"], metadata)))


def test_unlisted_member_is_refused_unread(saved, tmp_path):
    """A member the metadata does not list is refused by name, whatever it holds."""
    content = model_file(saved["rff"], extra=[("payload.npy", b"not an array at all")])
    with pytest.raises(InvalidModelFileError, match=r"holds the member 'payload\.npy', which "
                                                    r"its metadata does not list \(not read\)"):
        sg.load(write(tmp_path / "m.npz", content))


def test_signs_disagreeing_with_the_feature_map_are_refused(saved, tmp_path):
    entry = saved["signed"]
    signs = -entry.arrays["signs"]
    with pytest.raises(InvalidModelFileError, match=r"has a Posterior .* could not be rebuilt: "
                                                    r"array 'signs' differs from its feature "
                                                    r"map's signs"):
        sg.load(write(tmp_path / "m.npz", model_file(entry, *with_array(entry, "signs",
                                                                         signs))))


@pytest.mark.parametrize("name, value, match", [
    ("approximation", {"class": "Features", "params": {"name": "rff", "n_components": -1}},
     r"n_components must be an integer >= 1 or None, got -1"),
    ("n_components", -1, r"approximation n_components must be an integer >= 1"),
    ("optimize", "no", r"The 'optimize' parameter of LowRankGPRegressor must be"),
    ("dtype", "float32", r"metadata 'params\.dtype' = 'float32', but the fitted model's "
                         r"'dtype' is 'float64'"),
    ("kernel", "matern32", r"metadata 'params\.kernel' of class Matern, but its fitted kernel"),
    ("colour", "red", r"unknown metadata key 'params\.colour'"),
])
def test_estimator_parameters_are_validated(saved, tmp_path, name, value, match):
    entry = saved["rff"]
    metadata = {**entry.metadata, "params": {**entry.metadata["params"], name: value}}
    with pytest.raises(InvalidModelFileError, match=match):
        sg.load(write(tmp_path / "m.npz", model_file(entry, metadata)))


def test_inconsistent_shapes_name_the_array(saved, tmp_path):
    """n_features_in, the map's offset and the kernel's ARD length must agree."""
    entry = saved["exact"]
    with pytest.raises(InvalidModelFileError, match=r"has array 'X_train' of shape \(30, 3\), "
                                                    r"expected \(30, 2\)"):
        X_train = np.hstack([entry.arrays["X_train"], entry.arrays["X_train"][:, :1]])
        sg.load(write(tmp_path / "m.npz", model_file(entry, *with_array(entry, "X_train",
                                                                         X_train))))
    metadata = json.loads(json.dumps(entry.metadata))
    metadata["kernel"]["params"]["length_scale"] += [1.0]
    with pytest.raises(InvalidModelFileError, match=r"has a kernel \('kernel\.params\."
                                                    r"length_scale'\) that does not fit "
                                                    r"n_features_in = 2"):
        sg.load(write(tmp_path / "m.npz", model_file(entry, metadata)))


def test_input_standardization_round_trips(saved, tmp_path):
    entry = saved["rff"]
    loaded = sg.load(write(tmp_path / "m.npz", model_file(entry)))
    np.testing.assert_array_equal(loaded.X_train_mean_, entry.arrays["X_train_mean"])
    np.testing.assert_array_equal(loaded.X_train_scale_, entry.arrays["X_train_scale"])
    assert np.all(entry.arrays["X_train_scale"] != 1.0)      # the test standardizes for real
    metadata = {**entry.metadata, "params": {**entry.metadata["params"], "normalize_X": False}}
    with pytest.raises(InvalidModelFileError, match=r"has array 'X_train_mean' that is not all "
                                                    r"0\.0, but metadata 'params\.normalize_X' "
                                                    r"is false"):
        sg.load(write(tmp_path / "m.npz", model_file(entry, metadata)))
