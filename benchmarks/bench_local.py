"""Neighbourhood-local GPs on rough 2-D relief maps, against the two baselines of issue 11.

For each map (the embedded East Africa relief, and ETOPO5 crops of the same size read from
the Debian package ``ferret-datasets``: the Himalaya and Tibet, the Alps and the western
Mediterranean, the central Andes and the Peru-Chile trench: ``CROPS``), with the demo's split
(a permutation of the grid with seed 0: its first 5,000 points are the test set, all others
train):

1. **exact GP on 5,000 points**: ``ExactGPRegressor`` (anisotropic Matern-5/2, standardised
   inputs and targets) learned on the first 5,000 training points;
2. **exact tiles**: plain exact GPs on 2 x 2 degree tiles, each trained on the training points
   of the tile and a 1-degree margin around it, at the hyperparameters the 5,000-point exact GP
   learned; each test point predicted by its tile's GP (the hand-made baseline of the issue);
3. **neighbourhood-local models** (``LowRankGPRegressor(local="neighbors")``) fitted on all
   training points, learning their own hyperparameters, timed including learning.

4. **Vecchia** (``VecchiaGPRegressor``: 30 neighbours in a grid-maximin ordering, learned on
   the schedule (1,000, 5,000) of sampled conditionals at the stage tolerance 0.01, each test
   point conditioned on its 30 nearest training points: the configuration of ``scalegp
   demo``), fitted on all training points;
5. **auto** (``--methods ...,auto``): ``sg.GPRegressor()`` with its defaults (issue 26's panel);
6. **peers** (``--methods ...,peer-nystroem,peer-sgpr``): scikit-learn's ``Nystroem`` (500
   components) + ``BayesianRidge`` and GPyTorch's SGPR (256 inducing points, RBF, 200 Adam
   steps at 0.1), both as :mod:`bench_auto`'s panel runs them, on inputs and targets
   standardized with the training part's mean and std (issue 26's peer rule).

Test RMSE (metres), NLPD (of the elevation in km, with noise), fit seconds (learning
included), the seconds predicting the 5,000 test points with their std and the peak resident
memory of the process are written as JSON and markdown. Each method runs in its own forked
process (``--isolate``, the default), so that its peak memory is its own (the process's
baseline of imports and the map included); the tiles' process receives the 5,000-point GP's
hyperparameters as numbers. Run from the repository root:

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_local.py [--maps east-africa,himalaya]

``--no-exact`` leaves out the 5,000-point exact GP (not with ``tiles``, which take its
hyperparameters). ``--verdicts`` applies issue 26's rule (:func:`bench_auto.verdict`: the
oracle is the best row that is neither auto nor a peer) to each map's rows.

The ETOPO5 crops need ``etopo5.cdf``: ``--etopo5 PATH``, or ``$SCALEGP_ETOPO5``, or the
script fetches ``ferret-datasets`` with ``apt-get download`` into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import scalegp as sg  # noqa: E402
from scalegp.datasets import load_east_africa_relief  # noqa: E402
from scalegp.metrics import nlpd, rmse  # noqa: E402
from scalegp.estimators.configuration import make_approximation  # noqa: E402

N_TEST = 5000
N_EXACT = 5000
TILE_DEG, MARGIN_DEG = 2.0, 1.0
#: (lon range, lat range) in degrees east and north of the ETOPO5 crops: 276 x 300 grid points
#: at 5', like East Africa's.
CROPS = {"himalaya": ((75.0, 98.0), (20.0, 45.0)),
         "alps": ((0.0, 23.0), (35.0, 60.0)),
         "andes": ((280.0, 303.0), (-35.0, -10.0))}


def load_map(name: str, etopo5: str | None):
    """(X in degrees (lon, lat), elevation in metres) of a map."""
    if name == "east-africa":
        relief = load_east_africa_relief()
        return relief.X, relief.y
    if name in CROPS:
        return _etopo5_crop(_etopo5_path(etopo5), *CROPS[name])
    raise ValueError(f"unknown map {name!r}: east-africa or one of {', '.join(CROPS)}")


def _etopo5_path(given: str | None) -> Path:
    given = given or os.environ.get("SCALEGP_ETOPO5")
    if given:
        return Path(given)
    workdir = Path(tempfile.mkdtemp(prefix="etopo5-"))
    subprocess.run(["apt-get", "download", "ferret-datasets"], cwd=workdir, check=True)
    (deb,) = workdir.glob("ferret-datasets_*.deb")
    subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / "root")], check=True)
    return workdir / "root/usr/share/ferret-vis/data/etopo5.cdf"


def _etopo5_crop(path: Path, lon_range, lat_range):
    from scipy.io import netcdf_file

    with netcdf_file(path, mmap=False) as source:
        lon = source.variables["ETOPO05_X"].data.astype(np.float64)
        lat = source.variables["ETOPO05_Y"].data.astype(np.float64)
        rose = source.variables["ROSE"].data
    cols = np.flatnonzero((lon >= lon_range[0]) & (lon < lon_range[1]))
    rows = np.flatnonzero((lat >= lat_range[0]) & (lat < lat_range[1]))
    elevation = rose[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].astype(np.float64)
    grid_lat, grid_lon = np.meshgrid(lat[rows], lon[cols], indexing="ij")
    return np.column_stack([grid_lon.ravel(), grid_lat.ravel()]), elevation.ravel()


def split(n: int):
    rows = np.random.default_rng(0).permutation(n)
    return rows[N_TEST:], rows[:N_TEST]


def scores(y_km, mean, var):
    return {"rmse_m": 1000.0 * rmse(y_km, mean), "nlpd_km": nlpd(y_km, mean, var)}


def start_kernel():
    return sg.kernels.get("matern52").with_params(length_scale=np.ones(2))


def _predicted(model, X, y_km, test) -> dict:
    """Scores and seconds of predicting the test points with their std (noise included)."""
    start = time.perf_counter()
    mean, std = model.predict(X[test], return_std=True, include_noise=True)
    return {"predict_seconds": time.perf_counter() - start, **scores(y_km[test], mean, std**2)}


def exact_subset(X, y_km, train, test):
    rows = train[:N_EXACT]
    start = time.perf_counter()
    model = sg.ExactGPRegressor(kernel=start_kernel(), noise_variance=0.05, normalize_X=True,
                                normalize_y=True, random_state=0).fit(X[rows], y_km[rows])
    seconds = time.perf_counter() - start
    return {"method": f"exact GP, {N_EXACT:,} points", "seconds": seconds,
                   **_predicted(model, X, y_km, test), **_hyperparameters(model),
                   "reference": _reference(model)}


def _reference(model) -> dict:
    """The hyperparameters and standardisation the tiles reuse, as numbers."""
    return {"theta": model.kernel_.theta.tolist(), "noise_variance": model.noise_variance_,
            "X_mean": model.X_train_mean_.tolist(), "X_scale": model.X_train_scale_.tolist(),
            "y_mean": model.y_train_mean_, "y_std": model.y_train_std_}


def vecchia_model(X, y_km, train, test):
    """VecchiaGPRegressor in the configuration of ``scalegp demo`` (module docstring)."""
    start = time.perf_counter()
    model = sg.VecchiaGPRegressor(kernel=start_kernel(), noise_variance=0.01, n_neighbors=30,
                                  ordering="grid-maximin", learning_schedule=(1000, 5000),
                                  learning_tolerance=0.01, random_state=0,
                                  n_jobs=-1).fit(X[train], y_km[train])
    seconds = time.perf_counter() - start
    stages = ", ".join(f"{h['n_points']:,}: {h['n_evaluations']}"
                       for h in model.learning_history_)
    return {"method": "Vecchia, 30 neighbours, learned on 1,000 then 5,000 sampled "
                      "conditionals (the demo's configuration)", "seconds": seconds,
            "stages": stages, **_predicted(model, X, y_km, test), **_hyperparameters(model)}


def exact_tiles(X, y_km, train, test, numbers):
    """Exact GPs on 2 x 2 degree tiles with 1-degree margins at the hyperparameters and
    standardisation of the 5,000-point GP (``numbers``: :func:`_reference`)."""
    from types import SimpleNamespace
    reference = SimpleNamespace(
        kernel_=start_kernel().with_theta(np.asarray(numbers["theta"])),
        noise_variance_=numbers["noise_variance"],
        X_train_mean_=np.asarray(numbers["X_mean"]), X_train_scale_=np.asarray(numbers["X_scale"]),
        y_train_mean_=numbers["y_mean"], y_train_std_=numbers["y_std"])
    start = time.perf_counter()
    mean = np.empty(len(test))
    var = np.empty(len(test))
    lon0, lat0 = X[:, 0].min(), X[:, 1].min()
    tile_of = np.floor((X - [lon0, lat0]) / TILE_DEG).astype(int)
    sizes = []
    for tile in np.unique(tile_of[test], axis=0):
        low = np.array([lon0, lat0]) + tile * TILE_DEG
        in_tile = np.all(tile_of[test] == tile, axis=1)
        near = np.all((X[train] >= low - MARGIN_DEG) & (X[train] < low + TILE_DEG + MARGIN_DEG),
                      axis=1)
        rows = train[near]
        sizes.append(len(rows))
        # in the 5,000-point GP's standardisation, not the tile's own (the estimators'
        # default standardizes each tile again, which shortens the length scales 6-fold)
        fixed = sg.ExactGPRegressor(kernel=reference.kernel_,
                                    noise_variance=reference.noise_variance_, optimize=False,
                                    normalize_X=False, normalize_y=False)
        Xs = (X[rows] - reference.X_train_mean_) / reference.X_train_scale_
        ys = (y_km[rows] - reference.y_train_mean_) / reference.y_train_std_
        fixed.fit(Xs, ys)
        Xt = (X[test[in_tile]] - reference.X_train_mean_) / reference.X_train_scale_
        tile_mean, tile_std = fixed.predict(Xt, return_std=True, include_noise=True)
        mean[in_tile] = tile_mean * reference.y_train_std_ + reference.y_train_mean_
        var[in_tile] = (tile_std * reference.y_train_std_) ** 2
    seconds = time.perf_counter() - start       # each tile fitted and predicted in turn
    return {"method": f"exact tiles ({TILE_DEG:g} deg, {MARGIN_DEG:g}-deg margins), fixed "
                      "hyperparameters of the 5,000-point GP",
            "seconds": seconds, "predict_seconds": None, "n_tiles": len(sizes),
            "tile_points_max": int(max(sizes)), **scores(y_km[test], mean, var)}


def neighborhood_model(X, y_km, train, test, approximation, n_neighbors, n_components=None,
                       learning_centres=None):
    local = sg.Neighbors(n_neighbors=n_neighbors, **(
        {} if learning_centres is None else {"learning_centers": learning_centres}))
    start = time.perf_counter()
    model = sg.LowRankGPRegressor(kernel=start_kernel().with_params(
                                      length_scale=np.full(2, 0.1)),
                                  noise_variance=0.01, normalize_X=True, normalize_y=True,
                                  random_state=0, local=local,
                                  approximation=make_approximation(
                                      approximation, **({} if n_components is None else
                                                        {"n_components": n_components}))
                                  ).fit(X[train], y_km[train])
    seconds = time.perf_counter() - start
    predicted = _predicted(model, X, y_km, test)
    label = (f"neighbourhood-local {approximation}"
             + (f" ({n_components} columns)" if n_components else "")
             + f", {n_neighbors} points per neighbourhood"
             + (f", learned on {learning_centres} neighbourhoods" if learning_centres else ""))
    return {"method": label, "seconds": seconds, "n_centres": int(model.n_centres_),
            "memory_mib": model.local_memory_bytes_ / 2**20,
            **predicted, **_hyperparameters(model)}


def _hyperparameters(model):
    return {"length_scale_deg": list(model.kernel_.length_scale * model.X_train_scale_),
            "noise_std_m": 1000.0 * float(np.sqrt(model.noise_variance_)) * model.y_train_std_}


#: (local approximation, points per neighbourhood, columns, neighbourhoods learned on)
MODELS = (("exact", 300, None, 32), ("exact", 500, None, 32), ("glf", 500, 400, 32))


def auto_model(X, y_km, train, test):
    """``sg.GPRegressor(random_state=0)`` with its defaults (``approximation="auto"``, 60 s
    budget): the choice and the fit timed together."""
    start = time.perf_counter()
    model = sg.GPRegressor(random_state=0).fit(X[train], y_km[train])
    seconds = time.perf_counter() - start
    calibrated = " (variance calibrated)" if model.variance_calibration_ is not None else ""
    # the NLPD of auto's own predictive distribution (a scale mixture where it calibrated
    # the variance: scalegp.estimators.variance_calibration), not a Gaussian of its std
    own = -float(np.mean(model.log_predictive_density(X[test], y_km[test])))
    return {"method": f"auto (sg.GPRegressor()) -> {model.selection_.chosen.name}{calibrated}",
            "seconds": seconds, "reason": "; ".join([model.selection_.reason] + [
                note for note in model.selection_.notes
                if note.startswith("predictive variance")]),
            **_predicted(model, X, y_km, test), "nlpd_km": own}


def peer_model(X, y_km, train, test, which: str):
    """A peer of issue 26's panel (module docstring, 6; ``bench_auto``'s peers) on
    standardized inputs and targets; its predictions taken back to km."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_auto
    import peers
    x_mean, x_std = X[train].mean(axis=0), X[train].std(axis=0)
    y_mean, y_std = y_km[train].mean(), y_km[train].std()
    Xs, Xt = (X[train] - x_mean) / x_std, (X[test] - x_mean) / x_std
    ys = (y_km[train] - y_mean) / y_std
    if which == "peer-nystroem":
        mean, var, seconds, predict = bench_auto.nystroem_ridge(Xs, ys, Xt)
        label = bench_auto.NYSTROEM_LABEL
    elif which == "peer-sgpr":
        if not peers.gpytorch_available():
            raise RuntimeError("peer-sgpr needs torch and gpytorch (pip install torch==2.13.0 "
                               "gpytorch)")
        mean, var, seconds = bench_auto.sgpr(Xs, ys, Xt)     # its seconds include predicting
        predict, label = None, bench_auto.SGPR_LABEL + " (200 Adam steps at 0.1)"
    else:
        raise ValueError(f"unknown peer {which!r}")
    return {"method": label, "seconds": seconds, "predict_seconds": predict,
            **scores(y_km[test], y_mean + y_std * np.asarray(mean),
                     y_std ** 2 * np.asarray(var))}


def _in_own_process(function, *args):
    """``function(*args)`` (a row) in a forked process, with that process's peak resident
    memory (``peak_mb``); the row comes back as JSON-able numbers and strings."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def child():
        row = function(*args)
        row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        send.send(json.dumps(row))

    process = context.Process(target=child)
    process.start()
    send.close()                 # the child's end only: a child that fails ends the pipe
    try:
        row = json.loads(receive.recv())
    except EOFError:
        process.join()
        raise RuntimeError(f"{function.__name__} failed in its process (exit code "
                           f"{process.exitcode}; its traceback is above)") from None
    process.join()
    return row


def run(maps, etopo5, methods, isolate: bool = True, reuse: dict | None = None,
        exact: bool = True):
    if "tiles" in methods and not exact:
        raise ValueError("the tiles take the 5,000-point exact GP's hyperparameters: "
                         "--no-exact leaves it out")
    results = {}
    call = _in_own_process if isolate else (lambda function, *args: function(*args))
    for name in maps:
        X, y = load_map(name, etopo5)
        y_km = y / 1000.0
        train, test = split(len(y))
        print(f"{name}: {len(train):,} training points, {len(test):,} test points", flush=True)
        if not exact:
            rows = []
        elif reuse is not None:    # the 5,000-point GP of an earlier run of this script
            rows = [dict(reuse[name]["rows"][0], reused=True)]
        else:
            rows = [call(exact_subset, X, y_km, train, test)]
        if "tiles" in methods:
            rows.append(call(exact_tiles, X, y_km, train, test, rows[0]["reference"]))
        for approximation, k, m, learning in MODELS:
            if f"{approximation}-{k}" in methods:
                rows.append(call(neighborhood_model, X, y_km, train, test, approximation, k, m,
                                 learning))
        if "vecchia" in methods:
            rows.append(call(vecchia_model, X, y_km, train, test))
        if "auto" in methods:
            rows.append(call(auto_model, X, y_km, train, test))
        for peer in ("peer-nystroem", "peer-sgpr"):
            if peer in methods:
                rows.append(call(peer_model, X, y_km, train, test, peer))
        for row in rows:
            print(f"  {row['method']}: RMSE {row['rmse_m']:.1f} m, NLPD {row['nlpd_km']:.3f}, "
                  f"{row['seconds']:.1f} s, peak {row.get('peak_mb', float('nan')):.0f} MB"
                  + (f"; {row['reason']}" if "reason" in row else ""), flush=True)
        results[name] = {"n_train": len(train), "n_test": len(test), "rows": rows}
    return results


def markdown(results, command):
    lines = ["# Neighbourhood-local GPs on relief maps", "",
             f"`{command}` on {time.strftime('%Y-%m-%d')}, {platform.processor() or 'cpu'}, "
             f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}.", ""]
    for name, result in results.items():
        lines += [f"## {name} ({result['n_train']:,} training, {result['n_test']:,} test points)",
                  "", "| method | test RMSE (m) | NLPD (km) | fit s | predict s (5,000 points) "
                  "| peak MB |", "|---|---:|---:|---:|---:|---:|"]
        for row in result["rows"]:
            if row.get("reused"):
                row = dict(row, method=row["method"] + " (an earlier run's row)")
            predict = row.get("predict_seconds")
            peak = row.get("peak_mb")
            lines.append(f"| {row['method']} | {row['rmse_m']:.1f} | {row['nlpd_km']:.3f} | "
                         f"{row['seconds']:.1f} | "
                         f"{'in the fit' if predict is None else format(predict, '.1f')} | "
                         f"{'-' if peak is None else format(peak, '.0f')} |")
        lines.append("")
    return "\n".join(lines)


def verdicts(results) -> str:
    """Issue 26's rule (``bench_auto.verdict``) on each map's rows: RMSE in metres, NLPD in
    km (the rule's NLPD difference is the same in any units of the elevation)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_auto import verdict
    lines = ["| map | numbers (RMSE m / NLPD) | verdict |", "|---|---|---|"]
    for name, result in results.items():
        rows = [(name, row["method"], row["rmse_m"], row["nlpd_km"], row["seconds"], "")
                for row in result["rows"]]
        lines.append(verdict(name, rows))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", default="east-africa,himalaya")
    parser.add_argument("--etopo5", default=None)
    parser.add_argument("--methods", default="tiles,exact-300,exact-500,glf-500,vecchia",
                        help="besides the 5,000-point exact GP: tiles, exact-300, exact-500, "
                             "glf-500 (neighbourhood-local models), vecchia, auto "
                             "(sg.GPRegressor() with its defaults), peer-nystroem, peer-sgpr "
                             "(issue 26's peers)")
    parser.add_argument("--reuse-exact", type=Path, metavar="JSON",
                        help="take the 5,000-point exact GP's row and hyperparameters from "
                             "this script's JSON of an earlier run instead of fitting it")
    parser.add_argument("--no-exact", action="store_true",
                        help="leave out the 5,000-point exact GP (not with tiles)")
    parser.add_argument("--verdicts", action="store_true",
                        help="append issue 26's verdicts (bench_auto.verdict) to the markdown")
    parser.add_argument("--no-isolate", action="store_true",
                        help="run every method in this process (no per-method peak memory)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/local"))
    args = parser.parse_args(argv)
    reuse = None if args.reuse_exact is None else json.loads(args.reuse_exact.read_text())
    results = run(args.maps.split(","), args.etopo5, args.methods.split(","),
                  isolate=not args.no_isolate, reuse=reuse, exact=not args.no_exact)
    command = "python benchmarks/bench_local.py " + " ".join(argv or sys.argv[1:])
    text = markdown(results, command.strip())
    if args.verdicts:
        text += "\nVerdicts (issue 26's rule, bench_auto.verdict):\n\n" + verdicts(results) + "\n"
        print(verdicts(results))
    Path(args.out + ".json").write_text(json.dumps(results, indent=2))
    Path(args.out + ".md").write_text(text)
    print(f"wrote {args.out}.json and {args.out}.md")


if __name__ == "__main__":
    main()
