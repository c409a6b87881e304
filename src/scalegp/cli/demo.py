"""``scalegp demo``: a GP fitted to the embedded East Africa relief map, drawn side by side.

Train on the 82,800-point ETOPO5 crop without its 5,000 test points and without a region
held out whole (:data:`HELD_OUT_REGION`, 2 x 2 degrees around Kilimanjaro and Meru: 576 grid
cells no model sees), or on a random subsample of the rest; learn the hyperparameters of an
anisotropic Matern-5/2 kernel with the library's own rules, test on the held-out grid points,
compare with an exact GP on a smaller subsample, report how the model does in the held-out
region (error, predicted std, coverage of its 95 % interval), then predict the whole grid and
write a PNG with the data, the predicted mean and the predicted standard deviation. The
region is what makes the std panel informative: among the scattered test cells the std
differs little from the noise level, while across the region it grows to the prior's, and
the mean there is the model's smooth guess (the peaks are missing).

Three models, all chosen as the library chooses them for any user, with no hand-set box:

- ``model="vecchia"`` (the default: the most accurate, and the cheapest at full size): the
  Vecchia approximation of the GP on all training points (:mod:`scalegp.cli.demo_vecchia`,
  docs/vecchia.md): each point conditioned on its 30 nearest predecessors, hyperparameters
  learned on nested samples of the conditionals, predictions from the 30 nearest training
  points with variance.
- ``model="neighbors"`` (the default, the most accurate at demo cost): a neighbourhood-local
  model (:mod:`scalegp.local.neighborhoods`) of exact GPs on every training point, one per centre of
  an adaptive cover, each on its ``n_neighbors`` nearest points, blended continuously; the
  shared hyperparameters maximize the composite likelihood of ``LEARNING_CENTRES`` random
  neighbourhoods. A rough field is what global low-rank models resolve worst
  (docs/guide/local.md).
- ``model="global"``: one low-rank GP on ``subsample`` points, Gauss-Legendre features with
  ``n_nodes="auto"`` capped at the budget ``n_components`` (2,048: a fit of about ten seconds
  on two cores); the optimizer searches the part of the bounds that rule resolves
  (:meth:`scalegp.features.FeatureMap.valid_log_bounds`), so the learned kernel is one the
  features reproduce (the captured prior variance is printed). When the learned length scales
  sit on the resolvable bound, the data want shorter ones than the budget resolves; the demo
  says so, with the length scales an exact GP on ``exact_subsample`` of the training points
  learns and the node counts whose rule would resolve them.

Both standardise the inputs (``normalize_X=True``), so the kernel's default length-scale
bounds (:data:`scalegp.kernels.DEFAULT_LENGTH_SCALE_BOUNDS`, meant for unit-variance inputs)
apply.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .._output import PNG_SUFFIXES, check_output_path, write_atomically
from ..datasets import load_east_africa_relief
from ..errors import BoundaryWarning
from ..inference.optimize import BOUNDARY_TOLERANCE
from ..metrics import nlpd, rmse
from ..plot import new_figure
from ..rowwise import one_blas_thread
from ..estimators.configuration import Neighbors, make_approximation

#: The figure written when no path is named: created, never replacing anything there.
DEFAULT_OUT = "scalegp-demo.png"
#: Width and height of the demo figure in pixels.
FIGURE_PIXELS = (1500, 500)
N_TEST = 5000
#: The region held out whole (longitude min, max, latitude min, max, degrees): 2 x 2 degrees
#: around Kilimanjaro (37.35 E, 3.07 S, the map's highest cell, 3,962 m) and Meru; no model
#: trains or tests on its cells, and the demo reports its error and predicted std there.
HELD_OUT_REGION = (36.3, 38.3, -4.1, -2.1)
#: Training points of the exact GP (a subset of the low-rank model's), kept small because its
#: learning (about 17 O(n^3) likelihood-and-gradient evaluations) took 12 to 13 s on the
#: shared 2-core machine when otherwise idle.
EXACT_SUBSAMPLE = 2000
#: Training points of the exact GP beside the Vecchia model, a comparison the 15-second demo
#: can afford: its learning (one BLAS thread) took 0.7 CPU s at 500 points (test RMSE 367 m),
#: 2.7 s at 700 (340 m) and 4.8 s at 1,000 (317 m) on the loaded 2-core machine, and 12 s at
#: 2,000 (253 m) when idle (benchmarks/results/demo-speed.md).
EXACT_SUBSAMPLE_VECCHIA = 500
#: The demo's models (module docstring).
DEMO_MODELS = ("vecchia", "neighbors", "global")
#: Training points per neighbourhood of the default model: on this map k = 200, 300 and 500
#: reached the same test RMSE (50 to 52 m), and 300 needs the least time
#: (docs/guide/local.md; benchmarks/results/local.md).
N_NEIGHBORS = 300
#: Neighbourhoods the default model learns its hyperparameters on.
LEARNING_CENTRES = 32
#: Starting noise variance of learning, in units of the normalised targets' variance.
NOISE_VARIANCE_START = 0.05
#: Warnings of the low-rank fit that the demo's printed explanation states in its own words:
#: the map's build (Theta's ends not reproduced, "auto" stopped at the budget), the narrowed
#: search box (UserWarning) and the optimum on its end (BoundaryWarning). They are printed
#: as notes; every other warning is raised as it is.
EXPLAINED_WARNINGS = (UserWarning, BoundaryWarning)


def run_demo(*, model: str = "vecchia", subsample: int | None = None,
             n_components: int = 2048, approximation: str | None = None,
             kernel: str = "matern52", exact_subsample: int | None = None,
             n_neighbors: int = N_NEIGHBORS, out=None, seed: int = 0,
             log=print) -> dict:
    """Fit, evaluate, compare with the exact GP and draw; returns the printed metrics.

    Parameters
    ----------
    model : {"vecchia", "neighbors", "global"}, default="vecchia"
        The Vecchia approximation, the neighbourhood-local model, or one global low-rank GP
        (module docstring).
    subsample : int or None, default=None
        Training points, drawn from the map without its test points. None: all 77,800 for
        ``"vecchia"`` and ``"neighbors"``, 20,000 for ``"global"``.
    n_components : int, default=2048
        The feature budget of a low-rank model: the cap of ``n_nodes="auto"`` for ``"glf"``,
        m for other maps (unused by exact local GPs).
    approximation : str or None, default=None
        The feature map (:func:`scalegp.features.names`), or ``"exact"`` with
        ``model="neighbors"``. None: ``"exact"`` for ``"neighbors"``, ``"glf"`` for
        ``"global"``; ``"vecchia"`` takes none.
    kernel : str, default="matern52"
        A shift-invariant kernel name (:func:`scalegp.kernels.get`), made anisotropic with
        the default bounds; the exact GP uses the same family.
    exact_subsample : int or None, default=None
        Training points of the exact GP: the first min(exact_subsample, subsample) of the
        model's. None: 500 beside ``"vecchia"`` (:data:`EXACT_SUBSAMPLE_VECCHIA`), 2,000
        beside the others.
    n_neighbors : int, default=N_NEIGHBORS
        Training points per neighbourhood of ``model="neighbors"``.
    out : path or None, default=None
        A ``.png`` file, checked before the fit and written atomically, replacing a file
        there (:mod:`scalegp._output` says what is refused). None: :data:`DEFAULT_OUT` in the
        working folder, created only if nothing is at that path (a file the caller did not
        name is never replaced).
    seed : int, default=0
        Seed of the train / test split and of the map's randomness.
    log : callable, default=print
        Receives each printed line.

    Returns
    -------
    results : dict
        ``n_train``, ``n_test``, ``n_exact``; ``rmse_m`` and ``nlpd_km`` (low-rank model),
        ``exact_rmse_m`` and ``exact_nlpd_km``; ``length_scale_deg`` and
        ``exact_length_scale_deg`` (longitude, latitude); ``on_lower_bound`` and
        ``on_upper_bound`` (per dimension: the learned length scale sits on that end of the
        search box); ``captured_mass`` (GLF only,
        else None); ``fit_seconds``, ``predict_seconds``, ``exact_fit_seconds``;
        ``n_centres`` (``"neighbors"``, else None).
    """
    if model not in DEMO_MODELS:
        raise ValueError(f"model must be one of {DEMO_MODELS}, got {model!r}")
    local, vecchia = model == "neighbors", model == "vecchia"
    if vecchia and approximation is not None:
        raise ValueError("model='vecchia' takes no approximation (it is the Vecchia "
                         f"approximation of the exact GP), got {approximation!r}")
    approximation = approximation or ("exact" if local else "vecchia" if vecchia else "glf")
    if approximation == "exact" and not local:
        raise ValueError("approximation='exact' needs model='neighbors' (the demo's exact GP "
                         "on exact_subsample points is always drawn for comparison)")
    replace = out is not None
    out = DEFAULT_OUT if out is None else out
    check_output_path(out, suffixes=PNG_SUFFIXES, what="out", replace=replace)
    relief = load_east_africa_relief()
    n = len(relief.y)
    region = np.flatnonzero(in_held_out_region(relief.X))
    available = n - region.size - N_TEST
    if subsample is None:
        subsample = available if local or vecchia else 20000
    if not 2 <= subsample <= available:
        raise ValueError(f"subsample must be between 2 and {available}, got {subsample}")
    if exact_subsample is None:
        exact_subsample = EXACT_SUBSAMPLE_VECCHIA if vecchia else EXACT_SUBSAMPLE
    if exact_subsample < 2:
        raise ValueError(f"exact_subsample must be at least 2, got {exact_subsample}")
    train, test = split(relief.X, seed, subsample)
    y_km = relief.y / 1000.0
    start_kernel = _start_kernel(kernel, relief.X.shape[1])

    local_options = ({"local": Neighbors(n_neighbors=n_neighbors,
                                         learning_centers=LEARNING_CENTRES)} if local else {})
    log(f"fitting a neighbourhood-local model ({approximation}) to {len(train)} training "
        "points (about a minute on two cores)..." if local else
        f"fitting the Vecchia approximation to {len(train)} training points..." if vecchia
        else f"fitting {approximation} to {len(train)} training points...")
    if vecchia:
        model, notes, fit_seconds = _fit_vecchia(relief.X[train], y_km[train], start_kernel,
                                                 seed)
    else:
        model, notes, fit_seconds = _fit_low_rank(
            relief.X[train], y_km[train], start_kernel, approximation, n_components, seed,
            **local_options)
    start = time.perf_counter()
    mean, std = model.predict(relief.X[test], return_std=True, include_noise=True)
    predict_seconds = time.perf_counter() - start
    search_box = _search_box(model)

    def standardise(X):
        # the exact GP sees the low-rank model's standardised inputs, so both kernels (and
        # the map's resolvable box) are in the same units
        return (X - model.X_train_mean_) / model.X_train_scale_

    exact_rows = train[:min(exact_subsample, subsample)]
    exact, exact_seconds = _fit_exact(standardise(relief.X[exact_rows]), y_km[exact_rows],
                                      model, seed)
    with one_blas_thread():
        exact_mean, exact_std = exact.predict(standardise(relief.X[test]), return_std=True,
                                              include_noise=True)
    scale = model.X_train_scale_
    results = {
        "n_train": len(train), "n_test": len(test), "n_exact": len(exact_rows),
        "rmse_m": 1000.0 * rmse(y_km[test], mean), "test_mean_std_m": 1000.0 * float(np.mean(std)),
        "nlpd_km": nlpd(y_km[test], mean, std**2),
        "exact_rmse_m": 1000.0 * rmse(y_km[test], exact_mean),
        "exact_nlpd_km": nlpd(y_km[test], exact_mean, exact_std**2),
        "length_scale_deg": _per_dim(model.kernel_.length_scale, scale) * scale,
        "exact_length_scale_deg": _per_dim(exact.kernel_.length_scale, scale) * scale,
        **_on_bounds(model.kernel_, search_box),
        "captured_mass": _captured_mass(model),
        "fit_seconds": fit_seconds, "predict_seconds": predict_seconds,
        "exact_fit_seconds": exact_seconds, "n_centres": model.n_centres_,
        **_region_results(model, relief.X[region], y_km[region]),
    }
    X_train = standardise(relief.X[train])
    for line in _explain(model, exact, results, search_box, notes, n_grid=n, X_train=X_train,
                         kernel_name=kernel, budget=n_components):
        log(line)
    grid_mean, grid_std = model.predict(relief.X, return_std=True)
    _draw(relief, y_km, grid_mean, grid_std, train, out, replace, region=region)
    log(f"wrote {out}")
    return results


def in_held_out_region(X) -> np.ndarray:
    """Whether each (longitude, latitude) lies in :data:`HELD_OUT_REGION`."""
    lon_min, lon_max, lat_min, lat_max = HELD_OUT_REGION
    return ((X[:, 0] >= lon_min) & (X[:, 0] <= lon_max)
            & (X[:, 1] >= lat_min) & (X[:, 1] <= lat_max))


def split(X, seed: int, subsample: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, test rows) of the map: a seeded permutation of the cells outside the
    held-out region; its first :data:`N_TEST` are the test points and the next
    ``subsample`` the training points."""
    rows = np.random.default_rng(seed).permutation(X.shape[0])
    rows = rows[~in_held_out_region(X)[rows]]
    return rows[N_TEST:N_TEST + subsample], rows[:N_TEST]


def _region_results(model, X, y_km) -> dict:
    """The model in the held-out region: RMSE (m), mean predicted std of a new observation
    (m) and the share of the cells inside the central 95 % interval."""
    mean, std = model.predict(X, return_std=True, include_noise=True)
    inside = np.abs(y_km - mean) <= 1.959963984540054 * std
    return {"n_region": int(y_km.size), "region_rmse_m": 1000.0 * rmse(y_km, mean),
            "region_mean_std_m": 1000.0 * float(np.mean(std)),
            "region_coverage_95": float(np.mean(inside))}


def _start_kernel(name: str, n_dims: int):
    """The named kernel, anisotropic (one length scale per input, 1 in standardised units),
    with the library's default bounds."""
    from .. import kernels

    kernel = kernels.get(name)
    if not kernel.shift_invariant:
        raise ValueError(f"kernel must be shift-invariant for the demo's standardised "
                         f"longitude / latitude inputs, got {name!r}")
    return kernel.with_params(length_scale=np.ones(n_dims))


def _fit_low_rank(X, y, kernel, approximation, n_components, seed, **local_options):
    """(model, explained warning texts, fit seconds) of the GP the library chooses (global, or
    local with ``local_options``)."""
    from ..estimators.lowrank import LowRankGPRegressor

    glf = approximation.lower() == "glf"
    config = (make_approximation("exact") if approximation == "exact" else
              make_approximation(approximation, n_components=n_components,
                                 options={"n_nodes": "auto"} if glf else None))
    model = LowRankGPRegressor(
        approximation=config, kernel=kernel, noise_variance=NOISE_VARIANCE_START,
        normalize_X=True, normalize_y=True, random_state=seed, **local_options)
    return _fit_explained(model, X, y, EXPLAINED_WARNINGS)


def _fit_explained(model, X, y, explained):
    """(model, texts of the warnings of the ``explained`` categories, fit seconds): the
    other warnings are passed on."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    seconds = time.perf_counter() - start
    notes = []
    for warning in caught:
        if warning.category in explained:
            notes.append(str(warning.message))
        else:
            warnings.warn(warning.message, warning.category, stacklevel=4)
    return model, list(dict.fromkeys(notes)), seconds


def _fit_vecchia(X, y, kernel, seed):
    """(model, explained warning texts, fit seconds) of the Vecchia model."""
    from .demo_vecchia import VecchiaDemoModel

    model = VecchiaDemoModel(kernel, NOISE_VARIANCE_START, seed=seed)
    return _fit_explained(model, X, y, (BoundaryWarning,))


def _fit_exact(X, y, model, seed):
    """(exact GP, fit seconds) on standardised inputs, learning from the low-rank optimum.

    The same kernel family and bounds; the start only shortens L-BFGS-B's path to the exact
    GP's own optimum. BLAS runs on one thread: for these n <= 2,000 matrices two OpenBLAS
    threads made the learning 20 times slower beside other jobs on the 2-core machine (128
    s against 6.5 s at 1,000 points; benchmarks/results/demo-speed.md), and the Vecchia
    model's arithmetic holds BLAS to one thread as well.
    """
    from ..estimators.exact import ExactGPRegressor

    exact = ExactGPRegressor(kernel=model.kernel_, noise_variance=model.noise_variance_,
                             normalize_y=True, normalize_X=False, random_state=seed)
    start = time.perf_counter()
    with one_blas_thread():
        exact.fit(X, y)
    return exact, time.perf_counter() - start


def _search_box(model) -> np.ndarray:
    """The optimizer's box (log): the kernel's bounds within the map's resolvable box."""
    box = model.kernel_.bounds
    if model.feature_map_ is None:              # exact local GPs hold on all of it
        return box
    valid = model.feature_map_.valid_log_bounds(model.kernel_)
    if valid is None:
        return box
    return np.column_stack([np.maximum(box[:, 0], valid[:, 0]),
                            np.minimum(box[:, 1], valid[:, 1])])


def _on_bounds(kernel, box: np.ndarray) -> dict:
    """Per length scale: whether it sits on the lower / upper end of ``box`` (log), within
    the optimizer's BOUNDARY_TOLERANCE."""
    theta, rows = np.log(kernel.length_scale), box[:kernel.n_params - 1]
    return {"on_lower_bound": theta <= rows[:, 0] + BOUNDARY_TOLERANCE,
            "on_upper_bound": theta >= rows[:, 1] - BOUNDARY_TOLERANCE}


def _per_dim(length_scale, scale) -> np.ndarray:
    return np.broadcast_to(np.asarray(length_scale, dtype=float), np.shape(scale))


def _captured_mass(model):
    """k~(x, x) / k(x, x) at the learned kernel (maps that report it), else None."""
    captured = getattr(model.feature_map_, "captured_mass", None)
    return None if captured is None else captured(model.kernel_)


def _resolving_nodes(model, X, kernel) -> np.ndarray | None:
    """Smallest node counts whose rule's valid box reaches down to ``kernel``'s length scales
    (None: more columns than a rule may have).

    For the demo's anisotropic kernel the valid box of dimension j depends on q_j alone (and
    the data box), so each short dimension gains one node at a time. X: the standardised
    training inputs (they set the rule's box, as in the model's build).
    """
    from ..features import gauss_legendre as gl

    q = model.feature_map_.n_nodes.copy()
    target = np.log(_per_dim(kernel.length_scale, q))
    lower = model.noise_variance_bounds[0]
    while math.prod(q.tolist()) <= gl.MAX_COMPONENTS:
        # probe rules are never fitted: their warnings about Theta's ends do not apply
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = gl.GaussLegendreFeatures.build(X, model.kernel_, None, n_nodes=q,
                                                   noise_variance_lower=lower)
        short = target < probe.valid_log_bounds(model.kernel_)[:q.size, 0]
        if not np.any(short):
            return q
        q = q + short
    return None


def _degrees(values, scale) -> str:
    return " / ".join(f"{v:.3g}" for v in _per_dim(values, scale) * scale)


def _explain(model, exact, results, search_box, notes, *, n_grid, X_train, kernel_name,
             budget) -> list[str]:
    """The printed lines: data, method and why, the box searched, learned values, RMSEs."""
    from ..features.gauss_legendre import GaussLegendreFeatures

    fmap, kernel, scale = model.feature_map_, model.kernel_, model.X_train_scale_
    n_dims = scale.size
    box = np.exp(search_box[:n_dims])
    default = np.exp(kernel.bounds[:n_dims])
    glf = isinstance(fmap, GaussLegendreFeatures)
    lines = [
        f"East Africa relief (ETOPO5, {n_grid} grid points): {results['n_train']} training / "
        f"{results['n_test']} test points, inputs standardised (1 unit = "
        f"{_degrees(1.0, scale)} degrees of longitude / latitude)"]
    if hasattr(model, "describe") and model.local_model_ is None:      # Vecchia
        lines.append(model.describe(kernel_name))
    elif model.local_model_ is not None:
        local_gps = "exact GPs" if fmap is None else f"{fmap.name} GPs ({fmap.description})"
        lines.append(
            f"method: neighbourhood-local {local_gps} with the {kernel_name} kernel, one length "
            f"scale per input, default bounds: {model.local_model_.describe()}; predictions "
            f"blended over the nearest centres; the shared hyperparameters maximize the sum "
            f"of the log marginal likelihoods of {model.local.learning_centers} random "
            "neighbourhoods (docs/local-models.md)")
    else:
        choice = (f"the nodes by n_nodes='auto' within the budget n_components = {budget}, "
                  "the search box by the region the rule resolves" if glf else
                  f"m = {fmap.n_components} features, the kernel's bounds as the search box")
        lines.append(
            f"method: {fmap.name} ({fmap.description}) with the {kernel_name} kernel, one "
            f"length scale per input, default bounds; chosen by the library's rules: {choice}")
    if glf:
        lines.append(f"nodes: {fmap.report()}")
    narrowed = np.any(box != default)
    lines.append(
        "length scales searched in " + " x ".join(
            f"[{lo:.3g}, {hi:.3g}] ({lo * s:.3g} to {hi * s:.3g} deg)"
            for (lo, hi), s in zip(box, scale))
        + (f": the part of the default bounds [{default[0, 0]:.3g}, {default[0, 1]:.3g}] on "
           "which the rule reproduces the prior variance (valid_log_bounds); outside it the "
           "features approximate another kernel" if narrowed else
           ": the kernel's bounds (the " + ("model holds" if fmap is None else
                                              "map holds") + " on all of them)"))
    mass = results["captured_mass"]
    lines.append(
        f"learned: length scales {_degrees(kernel.length_scale, scale)} deg, variance "
        f"{kernel.variance:.4g}, noise variance {model.noise_variance_:.4g} (normalised "
        "units)" + ("" if mass is None else
                    f"; the features reproduce {100 * mass:.1f} % of its prior variance"))
    lines.extend(_bound_lines(model, exact, results, X_train))
    name = ("neighbors" if model.local_model_ is not None else
            "vecchia" if fmap is None else fmap.name)
    lines.append(
        f"{name}: test RMSE {results['rmse_m']:.1f} m, NLPD {results['nlpd_km']:.3f} "
        f"(in km), fit {results['fit_seconds']:.2f} s, predict {results['predict_seconds']:.3f}"
        f" s for {results['n_test']} points")
    lines.append(
        f"exact GP on {results['n_exact']} of the training points (same kernel family, its "
        f"own learned hyperparameters: length scales "
        f"{_degrees(exact.kernel_.length_scale, scale)} deg): test RMSE "
        f"{results['exact_rmse_m']:.1f} m, NLPD {results['exact_nlpd_km']:.3f}, fit "
        f"{results['exact_fit_seconds']:.2f} s")
    lon_min, lon_max, lat_min, lat_max = HELD_OUT_REGION
    lines.append(
        f"held-out region ({lon_min:g} to {lon_max:g} E, {-lat_max:g} to {-lat_min:g} S: "
        f"Kilimanjaro and Meru, {results['n_region']} cells no model saw): RMSE "
        f"{results['region_rmse_m']:.0f} m with a mean predicted std of "
        f"{results['region_mean_std_m']:.0f} m; the 95 % interval holds "
        f"{100 * results['region_coverage_95']:.0f} % of the cells; at the scattered test "
        f"points the mean predicted std is {results['test_mean_std_m']:.0f} m (the std "
        "panel's bright square against its dark field)")
    lines.extend(f"note: {note}" for note in notes)
    return lines


def _bound_lines(model, exact, results, X_train) -> list[str]:
    """What the learned length scales say: inside the searched box, or on one of its ends
    (on the lower: what the exact GP learns, and the node counts that would resolve it)."""
    from ..features.gauss_legendre import GaussLegendreFeatures

    dims = np.array(["longitude", "latitude"])
    lower, upper = results["on_lower_bound"], results["on_upper_bound"]
    if model.local_model_ is not None or model.feature_map_ is None:
        # the kernel's own bounds: no rule narrows them
        ends = [f"the learned {' and '.join(dims[mask])} length {_scales_sit(mask)} on the "
                f"kernel's {end} bound; widen length_scale_bounds"
                for mask, end in ((lower, "lower"), (upper, "upper")) if np.any(mask)]
        return ends or ["the learned length scales lie inside the kernel's bounds: there the "
                        "data put them"]
    lines = []
    if np.any(upper):
        lines.append(f"the learned {' and '.join(dims[upper])} length {_scales_sit(upper)} on "
                     "the resolvable upper bound: longer ones leave the spectral density's "
                     "peak between the nodes")
    if not np.any(lower):
        return lines or ["the learned length scales lie inside the searched box: there the "
                         "data put them"]
    fmap, scale = model.feature_map_, model.X_train_scale_
    exact_scale = _per_dim(exact.kernel_.length_scale, scale)
    line = (f"the data want shorter length scales than {fmap.n_components} features resolve: "
            f"the learned {' and '.join(dims[lower])} length {_scales_sit(lower)} on the "
            f"resolvable lower bound; the exact GP on {results['n_exact']} points learns "
            f"{_degrees(exact_scale, scale)} deg")
    if not isinstance(fmap, GaussLegendreFeatures):
        return lines + [line + "; raise n_components"]
    box = np.exp(_search_box(model)[:scale.size, 0])
    if np.all(exact_scale[lower] >= box[lower]):
        return lines + [line + f", inside the box ({results['n_exact']} points support less "
                        f"detail than {results['n_train']}); raise n_components to learn how "
                        f"short the {results['n_train']} points want them"]
    q = _resolving_nodes(model, X_train, exact.kernel_)
    if q is None:
        return lines + [line + ", which no rule of the map's largest size resolves"]
    return lines + [line + f"; q = {q.tolist()} nodes (n_components = "
                    f"{math.prod(q.tolist())}) would resolve that"]


def _scales_sit(mask) -> str:
    return "scales sit" if np.sum(mask) > 1 else "scale sits"


def _draw(relief, y_km, grid_mean, grid_std, train, out, replace: bool, *,
          region=None) -> None:
    """The data, the predicted mean and the predicted latent std over the grid, with the
    held-out region outlined. The std's colour scale is logarithmic, from its 1st percentile
    to its maximum (in the region): the region's std is ten times the rest, and a linear
    scale would show nothing else."""
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    shape = relief.grid_shape
    lon, lat = relief.X[:, 0], relief.X[:, 1]
    extent = (lon.min(), lon.max(), lat.min(), lat.max())
    dpi = 100
    fig, axes = new_figure(1, 3, figsize=(FIGURE_PIXELS[0] / dpi, FIGURE_PIXELS[1] / dpi),
                           dpi=dpi, layout="constrained")
    limits = dict(vmin=float(y_km.min()), vmax=float(y_km.max()))
    panels = [(y_km, "data: elevation (km)", "terrain", limits),
              (grid_mean, "predicted mean (km)", "terrain", limits),
              (grid_std, "predicted std (km, log scale)", "magma",
               dict(norm=LogNorm(vmin=float(np.percentile(grid_std, 1)),
                                 vmax=float(grid_std.max()))))]
    for axis, (values, title, cmap, scale) in zip(axes, panels):
        image = axis.imshow(values.reshape(shape), origin="lower", extent=extent, cmap=cmap,
                            aspect="auto", **scale)
        axis.set_title(title)
        axis.set_xlabel("longitude (deg E)")
        fig.colorbar(image, ax=axis, shrink=0.85)
        if region is not None and region.size:
            lon_min, lon_max, lat_min, lat_max = HELD_OUT_REGION
            axis.add_patch(Rectangle((lon_min, lat_min), lon_max - lon_min, lat_max - lat_min,
                                     fill=False, edgecolor="c", linewidth=1.0))
    axes[1].set_title("predicted mean (km); cyan: region held out")
    axes[0].set_ylabel("latitude (deg N)")
    axes[0].plot(lon[train[:2000]], lat[train[:2000]], ",", color="k", alpha=0.3)
    write_atomically(out, lambda file: fig.savefig(file, dpi=dpi, format="png"),
                     suffixes=PNG_SUFFIXES, what="out", replace=replace)
