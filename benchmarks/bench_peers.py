"""scalegp against its peers, side by side in one run: scikit-learn (GaussianProcessRegressor,
RBFSampler + BayesianRidge, Nystroem + Ridge) and GPyTorch (exact GP, SGPR, RFFKernel, SVGP)
on synthetic 1-D, 2-D and 8-D data of growing N, the ETOPO5 relief at growing resolution (up
to all 9.3 million grid points) and the 3 million US flights of 2001.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_peers.py           # ~40 min
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_peers.py --quick   # ~3 min

Every method learns a zero-mean GP with an isotropic Gaussian (RBF) kernel on inputs and
targets standardised with the training part's mean and std, from the same start (length scale
``0.5 sqrt(d)``, signal variance 1, noise variance 0.1), with ``--m`` columns (256: features,
inducing points or nodes) for every low-rank method. Each method runs in its own subprocess,
which imports its libraries once and then takes the workloads one by one; the peak resident
memory of that process while it ran one workload (VmHWM, reset before the data are loaded:
the interpreter, the imports and the loaded data included) is reported. (``ru_maxrss`` of a
child would count the parent's resident memory at the spawn, measured: the same 289 MiB for
every method.) A run is killed at ``--limit`` seconds (its subprocess restarts for the next
one); the import time is not counted. GPyTorch stops learning itself at ``LEARNING_SHARE``
of the limit and then predicts; SVGP's steps are bounded (``peers.SVGP_STEPS``), so it is
the one peer that runs at every N. A method is not started where it cannot fit: more dimensions than its rule
supports, an N x N matrix over ``EXACT_MEMORY_BYTES``, a time predicted over the limit from its
time at the family's previous N and its cost exponent in N, or a run at a smaller N of the
family that hit the limit; the table says which.

Reported per method and workload: fit time (learning included), learning time, predict time
(``TEST_ROWS`` held-out points), test RMSE (standardised target units; times the table's
target std for the workload's units) and NLPD (mean negative log density of a new observation,
standardised units; nan for methods without a predictive variance), peak memory, and the fit
time, RMSE and memory as ratios to the best peer (the best non-scalegp method on that workload;
NLPD as the difference). For scalegp, the first pass over the data (features and the Gram
accumulation Psi^T Psi) against the floor N m^2 / R: the flops of a symmetric rank-m update
(syrk: N m^2, one triangle of m^2 / 2 entries at 2 flops per multiply-add), at the GEMM rate R
(2 n^3 flops for an n x n product, n = 2048, best of three) measured in the same subprocess
just before the fit.

Data: ETOPO5 from ``--etopo5``, ``$SCALEGP_ETOPO5`` or the Debian package (as
:mod:`bench_local`); flights from npm ``vega-datasets@3.2.1`` (``flights-3m.parquet`` and
``airports.csv``), fetched once into ``--cache-dir``. Writes ``benchmarks/results/peers.json``,
``.md`` and ``.png`` (``--out``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import select
import shlex
import subprocess
import sys
import tarfile
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scalegp.estimators.configuration import make_approximation

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import peers  # noqa: E402
from bench_local import _etopo5_path  # noqa: E402
from machine import gemm_rate  # noqa: E402

#: Held-out test points of every workload.
TEST_ROWS = 10_000
#: Share of the time limit after which GPyTorch stops learning (then it predicts).
LEARNING_SHARE = 0.7
#: Largest N x N float64 matrix an exact method may need (the machine has 24 GiB, shared).
EXACT_MEMORY_BYTES = 4 * 2**30
#: The flights tarball (npm registry) and the files used from it.
FLIGHTS_URL = "https://registry.npmjs.org/vega-datasets/-/vega-datasets-3.2.1.tgz"
FLIGHTS_FILES = ("package/data/flights-3m.parquet", "package/data/airports.csv")
#: Workload families: training sizes of the default run and of --quick.
SIZES = {
    "synthetic-1d": ([1_000, 10_000, 100_000, 1_000_000], [500, 5_000]),
    "synthetic-2d": ([1_000, 10_000, 100_000, 1_000_000], [500, 5_000]),
    "synthetic-8d": ([1_000, 10_000, 100_000, 1_000_000], [500, 5_000]),
    # ETOPO5 grid strides: 16,200 / 145,800 / 583,200 / 2.33 million / all 9.3 million points
    "etopo5": ([24, 8, 4, 2, 1], [24]),
    "flights": ([10_000, 100_000, 1_000_000, 3_000_000], [10_000]),
}
Y_UNITS = {"etopo5": "m", "flights": "min"}


# ------------------------------------------------------------------------------ workloads
def synthetic(n_dims: int, n: int, seed: int):
    """x ~ U(-2, 2)^d, y = sum_j sin(2 x_j + j) / sqrt(d) + 0.1 eps, eps ~ N(0, 1)."""
    rng = np.random.default_rng([seed, n_dims, n])
    X = rng.uniform(-2.0, 2.0, size=(n, n_dims))
    f = np.sin(2.0 * X + np.arange(n_dims)).sum(axis=1) / np.sqrt(n_dims)
    return X, f + 0.1 * rng.standard_normal(n)


def etopo5_grid(path: Path):
    """(lon, lat) in degrees, elevation in metres, as 2160 x 4320 grids."""
    from scipy.io import netcdf_file

    with netcdf_file(path, mmap=False) as source:
        lon = source.variables["ETOPO05_X"].data.astype(np.float64)
        lat = source.variables["ETOPO05_Y"].data.astype(np.float64)
        elevation = source.variables["ROSE"].data.astype(np.float64)
    grid_lat, grid_lon = np.meshgrid(lat, lon, indexing="ij")
    return grid_lon, grid_lat, elevation


def flights_table(cache_dir: Path):
    """(X, y) of the 3 million flights: origin latitude / longitude, destination latitude /
    longitude (airports.csv), distance (miles), departure time of day (hours); y the
    ``delay`` column (arrival delay, minutes). Flights with an airport not in airports.csv
    are dropped."""
    import pyarrow.parquet as pq

    folder = cache_dir / "vega-datasets-3.2.1"
    if not all((folder / name).exists() for name in FLIGHTS_FILES):
        folder.mkdir(parents=True, exist_ok=True)
        tarball = folder / "vega-datasets-3.2.1.tgz"
        subprocess.run(["curl", "-sSfL", "-o", str(tarball), FLIGHTS_URL], check=True)
        with tarfile.open(tarball) as archive:
            for name in FLIGHTS_FILES:
                archive.extract(name, folder, filter="data")
    with open(folder / FLIGHTS_FILES[1], newline="", encoding="utf-8") as handle:
        where = {row["iata"]: (float(row["latitude"]), float(row["longitude"]))
                 for row in csv.DictReader(handle)}
    table = pq.read_table(folder / FLIGHTS_FILES[0])
    codes = sorted(where)
    index = {code: k for k, code in enumerate(codes)}
    places = np.array([where[code] for code in codes] + [(np.nan, np.nan)])
    columns = {}
    for column in ("origin", "destination"):
        names = table.column(column).to_pylist()
        columns[column] = places[[index.get(name, len(codes)) for name in names]]
    date = table.column("date").to_numpy().astype("datetime64[m]").astype(np.int64)
    X = np.column_stack([columns["origin"], columns["destination"],
                         table.column("distance").to_numpy().astype(np.float64),
                         (date % (24 * 60)) / 60.0])
    y = table.column("delay").to_numpy().astype(np.float64)
    keep = np.isfinite(X).all(axis=1)
    return X[keep], y[keep]


@dataclass
class Workload:
    family: str
    name: str
    n_train: int
    n_dims: int
    y_std: float
    y_unit: str
    folder: str
    note: str = ""


def _save(folder: Path, X, y, X_test, y_test, workload: Workload) -> Workload:
    """Standardise with the training part and write the four arrays and the description."""
    mean, std = X.mean(axis=0), X.std(axis=0)
    std[std == 0] = 1.0
    y_mean, y_std = float(y.mean()), float(y.std())
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in (("X_train", (X - mean) / std), ("y_train", (y - y_mean) / y_std),
                        ("X_test", (X_test - mean) / std), ("y_test", (y_test - y_mean) / y_std)):
        np.save(folder / f"{name}.npy", np.ascontiguousarray(array))
    workload.y_std = y_std
    (folder / "workload.json").write_text(json.dumps(asdict(workload)))
    return workload


def workloads(family: str, sizes, cache_dir: Path, etopo5: str | None, seed: int):
    """The family's workloads, written to (or read back from) ``cache_dir``."""
    out = []
    pending = []
    for size in sizes:
        name = (f"{family}-stride{size}" if family == "etopo5" else f"{family}-{size}")
        folder = cache_dir / f"{name}-seed{seed}"
        if (folder / "workload.json").exists():
            out.append(Workload(**json.loads((folder / "workload.json").read_text())))
        else:
            pending.append((size, name, folder))
            out.append(None)
    if not pending:
        return out
    made = {}
    if family.startswith("synthetic"):
        n_dims = int(family.split("-")[1][:-1])
        X_test, y_test = synthetic(n_dims, TEST_ROWS, seed + 1)
        for size, name, folder in pending:
            X, y = synthetic(n_dims, size, seed)
            made[name] = _save(folder, X, y, X_test, y_test,
                               Workload(family, name, size, n_dims, 0.0, "", str(folder)))
    elif family == "etopo5":
        grid_lon, grid_lat, elevation = etopo5_grid(_etopo5_path(etopo5))
        test = np.zeros(elevation.shape, bool)
        test.flat[np.random.default_rng(seed).choice(test.size, TEST_ROWS, replace=False)] = True
        points = np.column_stack([grid_lon.ravel(), grid_lat.ravel()])
        X_test, y_test = points[test.ravel()], elevation.ravel()[test.ravel()]
        for stride, name, folder in pending:
            train = np.zeros(elevation.shape, bool)
            train[::stride, ::stride] = True
            train &= ~test
            X, y = points[train.ravel()], elevation.ravel()[train.ravel()]
            made[name] = _save(folder, X, y, X_test, y_test, Workload(
                family, name, len(y), 2, 0.0, "m", str(folder),
                f"every {stride}th grid point in longitude and latitude"))
    elif family == "flights":
        X_all, y_all = flights_table(cache_dir)
        order = np.random.default_rng(seed).permutation(len(y_all))
        test, rest = order[:TEST_ROWS], order[TEST_ROWS:]
        for size, name, folder in pending:
            rows = np.sort(rest[:size])
            made[name] = _save(folder, X_all[rows], y_all[rows], X_all[test], y_all[test],
                               Workload(family, name, len(rows), X_all.shape[1], 0.0, "min",
                                        str(folder), "random flights"))
    else:
        raise ValueError(f"unknown workload family {family!r}")
    return [made[f"{family}-stride{size}" if family == "etopo5" else f"{family}-{size}"]
            if w is None else w for w, size in zip(out, sizes)]


# -------------------------------------------------------------------------------- methods
def scores(mean, var, y):
    """(RMSE, mean Gaussian negative log predictive density; nan without a variance)."""
    rmse = float(np.sqrt(np.mean((mean - y) ** 2)))
    if var is None:
        return rmse, float("nan")
    return rmse, float(np.mean(0.5 * np.log(2 * np.pi * var) + 0.5 * (y - mean) ** 2 / var))


def start_length_scale(n_dims: int) -> float:
    return 0.5 * math.sqrt(n_dims)


def reported_pass_seconds(calls, n: int, start: float):
    """Seconds of the first pass that ``fit`` reported through ``progress`` (``calls``: its
    (time, rows done) pairs): for GLF the statistics pass, which starts with the fit; for a
    map whose features depend on theta the conditioning pass (the learning evaluations'
    passes are not reported), timed from its first chunk and scaled by n / (n - rows of that
    chunk). None when that pass was a single chunk of a data-dependent map (it cannot be told
    apart from the learning)."""
    first = [0]
    for k in range(1, len(calls)):
        if calls[k][1] <= calls[k - 1][1]:
            first.append(k)
    (t0, r0) = calls[first[0]]
    end = next(k for k in range(len(calls)) if calls[k][1] >= n)
    return (calls[end][0] - t0) * n / (n - r0) if r0 < n else None


def _scalegp(approximation):
    def run(X, y, X_test, m, limit):
        import scalegp as sg

        d = X.shape[1]
        options = {}
        if approximation == "glf":
            q = round(m ** (1 / d))
            options = {"n_nodes": [q] * d}
            m = q**d
        kernel = sg.Gaussian(length_scale=start_length_scale(d),
                             length_scale_bounds=(1e-2, 1e2), variance_bounds=(1e-2, 1e2))
        model = sg.LowRankGPRegressor(kernel=kernel,
                                      noise_variance=0.1, noise_variance_bounds=(1e-4, 10.0),
                                      random_state=0, approximation=make_approximation(approximation, n_components=m, options=options))
        rate = gemm_rate(2048)
        calls = []

        def progress(rows):
            calls.append((time.perf_counter(), rows))

        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(X, y, progress=progress)
        fitted = time.perf_counter()
        mean, std = model.predict(X_test, return_std=True, include_noise=True)
        predicted = time.perf_counter()
        columns = model.feature_map_.n_components
        floor = len(y) * columns**2 / (rate * 1e9)
        first_pass = reported_pass_seconds(calls, len(y), start)
        if approximation == "glf":          # the statistics pass starts with the fit
            first_pass = next(t for t, rows in calls if rows >= len(y)) - start
        return {
            "fit_s": fitted - start,
            "learn_s": None if first_pass is None else fitted - start - first_pass,
            "predict_s": predicted - fitted, "mean": mean, "var": std**2,
            "steps": model.optimization_result_.n_evaluations, "columns": columns,
            "pass_s": first_pass, "floor_s": floor,
            "pass_over_floor": None if first_pass is None else first_pass / floor,
            "gemm_gflops": rate, "pass_kind": "statistics" if approximation == "glf"
            else "conditioning",
            "note": (f"L-BFGS-B, {model.optimization_result_.n_evaluations} evaluations; "
                     f"l {float(np.ravel(model.kernel_.length_scale)[0]):.3g}, "
                     f"s2 {model.noise_variance_:.3g}; {len(caught)} warning(s)")}
    return run


def _sklearn_exact(X, y, X_test, m, limit):
    start = time.perf_counter()
    model, evaluations = peers.sklearn_exact_fit(
        X, y, length_scale=start_length_scale(X.shape[1]), length_scale_bounds=(1e-2, 1e2),
        variance_bounds=(1e-2, 1e2), noise_variance=0.1, noise_bounds=(1e-4, 10.0))
    fitted = time.perf_counter()
    mean, std = model.predict(X_test, return_std=True)
    return {"fit_s": fitted - start, "learn_s": fitted - start,
            "predict_s": time.perf_counter() - fitted, "mean": mean, "var": std**2,
            "steps": evaluations, "columns": len(y),
            "note": f"L-BFGS-B, {evaluations} evaluations; {model.kernel_}"}


def _sklearn_features(kind):
    def run(X, y, X_test, m, limit):
        from sklearn.kernel_approximation import Nystroem, RBFSampler
        from sklearn.linear_model import BayesianRidge, Ridge

        gamma = 1.0 / (2.0 * start_length_scale(X.shape[1]) ** 2)
        start = time.perf_counter()
        if kind == "rff":
            features = RBFSampler(gamma=gamma, n_components=m, random_state=0)
            regressor = BayesianRidge(fit_intercept=False)
        else:
            features = Nystroem(gamma=gamma, n_components=m, random_state=0)
            regressor = Ridge(alpha=0.1, fit_intercept=False)
        regressor.fit(features.fit_transform(X), y)
        fitted = time.perf_counter()
        Z = features.transform(X_test)
        if kind == "rff":
            mean, std = regressor.predict(Z, return_std=True)
            var = std**2
            learned = (f"noise variance {1 / regressor.alpha_:.3g}, weight variance "
                       f"{1 / regressor.lambda_:.3g} learned by evidence maximisation "
                       f"({regressor.n_iter_} iterations)")
        else:
            mean, var = regressor.predict(Z), None
            learned = "ridge alpha 0.1 fixed; no predictive variance"
        return {"fit_s": fitted - start, "learn_s": fitted - start if kind == "rff" else 0.0,
                "predict_s": time.perf_counter() - fitted, "mean": mean, "var": var,
                "steps": regressor.n_iter_ if kind == "rff" else 0, "columns": m,
                "note": f"length scale fixed at the start {start_length_scale(X.shape[1]):.3g}; "
                        + learned}
    return run


def _gpytorch(method):
    def run(X, y, X_test, m, limit):
        import torch

        torch.manual_seed(0)
        start = time.perf_counter()
        budget = LEARNING_SHARE * limit
        if method == "svgp":
            model, likelihood, steps, finished = peers.gpytorch_svgp(
                X, y, m, length_scale=start_length_scale(X.shape[1]), noise_variance=0.1,
                time_limit=budget)
            plan = (f"Adam {peers.SVGP_RATE}, batches of {min(peers.SVGP_BATCH, len(y))}, "
                    f"{steps} steps ({steps * min(peers.SVGP_BATCH, len(y)) / len(y):.3g} "
                    "epochs)")
            note = ""
        else:
            model, likelihood, train_x, train_y = peers.gpytorch_model(
                X, y, method, len(y) if method == "exact" else m,
                length_scale=start_length_scale(X.shape[1]), noise_variance=0.1)
            steps, _, finished = peers.gpytorch_adam(
                model, likelihood, train_x, train_y,
                time_limit=budget - (time.perf_counter() - start))
            plan = f"Adam {peers.ADAM_RATE}, {steps} steps"
            note = "" if finished else f" (of {peers.ADAM_STEPS})"
        fitted = time.perf_counter()
        mean, var = peers.gpytorch_predict(model, likelihood, X_test)
        note = plan + note + ("" if finished else f", stopped at {budget:.0f} s")
        return {"fit_s": fitted - start, "learn_s": fitted - start,
                "predict_s": time.perf_counter() - fitted, "mean": mean, "var": var,
                "steps": steps, "columns": len(y) if method == "exact" else m,
                "stopped": not finished, "note": note}
    return run


@dataclass(frozen=True)
class Method:
    runner: object
    #: cost of the fit in N: time(N) ~ N^exponent (predicts the next size's time)
    exponent: float
    library: str
    max_dims: int | None = None
    #: whether the method needs an N x N matrix
    exact: bool = False
    gpytorch: bool = False
    #: whether learning has a fixed budget of steps (stopping is no reason to skip larger N)
    budgeted: bool = False
    #: smallest N it runs at outside --quick (SVGP is the peer for the largest sets)
    min_n: int = 0


PEER_METHODS = {
    "scalegp GLF": Method(_scalegp("glf"), 1, "scalegp", max_dims=2),
    "scalegp RFF": Method(_scalegp("rff"), 1, "scalegp"),
    "sklearn exact GP": Method(_sklearn_exact, 3, "scikit-learn", exact=True),
    "sklearn RBFSampler + BayesianRidge": Method(_sklearn_features("rff"), 1, "scikit-learn"),
    "sklearn Nystroem + Ridge": Method(_sklearn_features("nystroem"), 1, "scikit-learn"),
    "GPyTorch exact GP": Method(_gpytorch("exact"), 2, "GPyTorch", exact=True, gpytorch=True),
    "GPyTorch SGPR": Method(_gpytorch("sgpr"), 1, "GPyTorch", gpytorch=True),
    "GPyTorch RFF": Method(_gpytorch("rff"), 1, "GPyTorch", gpytorch=True),
    "GPyTorch SVGP": Method(_gpytorch("svgp"), 0, "GPyTorch", gpytorch=True, budgeted=True,
                            min_n=50_000),
}


def peak_rss_mib() -> float:
    """This process's peak resident memory since :func:`reset_peak_rss` (VmHWM)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak_rss() -> None:
    """Reset VmHWM to the current resident memory (Linux >= 4.0: ``5 > clear_refs``)."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
        clear.write("5")


def worker(method: str, folder: Path, m: int, limit: float) -> dict:
    """Run one method on one workload in this process: the scores, times and the peak
    resident memory of the process while it ran (data loading included)."""
    reset_peak_rss()
    baseline = peak_rss_mib()
    data = {name: np.load(folder / f"{name}.npy")
            for name in ("X_train", "y_train", "X_test", "y_test")}
    out = PEER_METHODS[method].runner(data["X_train"], data["y_train"], data["X_test"], m, limit)
    out["rmse"], out["nlpd"] = scores(out.pop("mean"), out.pop("var"), data["y_test"])
    out["peak_mib"], out["baseline_mib"] = peak_rss_mib(), baseline
    return out


def serve(method: str, m: int, limit: float) -> None:
    """The subprocess of one method: import its library, say ``ready``, then answer each
    workload folder read from stdin with one JSON line."""
    import scalegp  # noqa: F401
    import sklearn.gaussian_process  # noqa: F401
    import sklearn.kernel_approximation  # noqa: F401
    import sklearn.linear_model  # noqa: F401

    if PEER_METHODS[method].gpytorch:
        import gpytorch  # noqa: F401
        import torch  # noqa: F401
    print("ready", flush=True)
    for line in sys.stdin:
        try:
            answer = worker(method, Path(line.strip()), m, limit)
        except Exception as error:  # reported in the table; the harness goes on
            answer = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
        print(json.dumps(answer), flush=True)


# -------------------------------------------------------------------------------- harness
def skip_reason(name: str, workload: Workload, earlier: list, limit: float,
                quick: bool = False) -> str | None:
    """Why ``name`` is not run on ``workload`` (None: it runs); ``earlier`` are its rows on
    the family's smaller workloads, in order of N."""
    method = PEER_METHODS[name]
    if method.gpytorch and not peers.gpytorch_available():
        return peers.NOT_INSTALLED
    if workload.n_train < method.min_n and not quick:
        return f"run for N >= {method.min_n:,} only (the minibatch method for large sets)"
    if method.max_dims is not None and workload.n_dims > method.max_dims:
        return (f"d = {workload.n_dims}: the tensor rule has q^d columns "
                f"(only d <= {method.max_dims} here)")
    if method.exact and 8 * workload.n_train**2 > EXACT_MEMORY_BYTES:
        return (f"the N x N matrix needs {8 * workload.n_train**2 / 2**30:.0f} GiB "
                f"(limit {EXACT_MEMORY_BYTES / 2**30:.0f} GiB)")
    for row in earlier:
        if row.get("skipped"):
            continue
        if row.get("error") or (row.get("stopped") and not method.budgeted):
            why = "hit the time limit" if row.get("stopped") or row.get("killed") else "failed"
            return f"{why} at N = {row['n_train']:,}"
    done = [row for row in earlier if "fit_s" in row]
    if done:
        last = done[-1]
        predicted = last["fit_s"] * (workload.n_train / last["n_train"]) ** method.exponent
        if predicted > limit:
            return (f"predicted {predicted:.0f} s (N^{method.exponent:g} from "
                    f"{last['fit_s']:.1f} s at N = {last['n_train']:,}) > the {limit:.0f} s limit")
    return None


class Server:
    """One method's subprocess (:func:`serve`); a run past the limit kills it, and the next
    request starts a new one."""

    #: seconds a subprocess may take to import its libraries
    STARTUP_S = 300.0

    def __init__(self, method: str, m: int, limit: float):
        self.command = [sys.executable, str(Path(__file__).resolve()), "--serve", method,
                        "--m", str(m), "--limit", str(limit)]
        self.limit = limit
        self.child = None

    def _line(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.child.stdout], [], [], timeout)
        return self.child.stdout.readline() if ready else None

    def _start(self) -> None:
        self.child = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True, bufsize=1)
        if self._line(self.STARTUP_S) != "ready\n":
            self.close()
            raise RuntimeError(f"{self.command} did not start")

    def run(self, workload: Workload) -> dict:
        """The method on the workload: its result, or why there is none; with the 1-minute
        load average before it and its wall time."""
        if self.child is None:
            self._start()
        load, start = os.getloadavg()[0], time.perf_counter()
        self.child.stdin.write(workload.folder + "\n")
        self.child.stdin.flush()
        line = self._line(self.limit)
        row = {"load_before": load, "wall_s": time.perf_counter() - start}
        if line is None:
            self.close()
            row.update(killed=True, stopped=True, error=f"killed at the {self.limit:.0f} s limit")
        elif not line:
            code = self.child.wait()
            self.child = None
            row["error"] = f"the subprocess died (exit code {code}; out of memory?)"
        else:
            row.update(json.loads(line))
        return row

    def close(self) -> None:
        if self.child is not None:
            self.child.kill()
            self.child.wait()
            self.child = None


def add_ratios(rows: list) -> None:
    """Ratios of fit time, predict time, RMSE and peak memory to the best peer (the lowest
    non-scalegp value on the same workload), and NLPD minus the best peer's."""
    for workload in {row["workload"] for row in rows}:
        group = [row for row in rows if row["workload"] == workload and "rmse" in row]
        peer_rows = [row for row in group if row["library"] != "scalegp"]
        for key in ("fit_s", "predict_s", "rmse", "peak_mib", "nlpd"):
            values = [row[key] for row in peer_rows
                      if row.get(key) is not None and np.isfinite(row[key])]
            if not values:
                continue
            best = min(values)
            for row in group:
                if row.get(key) is None or not np.isfinite(row[key]):
                    continue
                if key == "nlpd":
                    row["nlpd_minus_best_peer"] = row[key] - best
                else:
                    row[f"{key}_over_best_peer"] = row[key] / best if best > 0 else None


def _fmt(value, spec=".3g", suffix=""):
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


def markdown(result: dict) -> str:
    rows, meta = result["rows"], result["meta"]
    head = [
        "# scalegp against its peers", "",
        f"`{meta['command']}` on {meta['date']} UTC; {meta['wall_minutes']:.0f} min in all; "
        f"1-minute load average {meta['load_before']:.2f} before, {meta['load_after']:.2f} after "
        f"(2 cores, shared with other jobs); GEMM rate at the start {meta['gemm_gflops']:.1f} "
        f"GFLOP/s (n = 2048, one thread); per-method limit {meta['limit_s']:.0f} s; m = "
        f"{meta['m']}; {meta['versions']}.", "",
        "## For the README (Performance)", "", readme_section(result), "",
        "## All runs", "",
        "Times in seconds (wall), fit including learning; RMSE and NLPD in standardised target "
        "units on the held-out points (RMSE times 'y std' gives the workload's units); NLPD of a "
        "new observation; peak = VmHWM of the method's own process during the run (interpreter, "
        "imports and data included). 'x best peer' divides by the best non-scalegp value on that workload; "
        "'NLPD - best' subtracts. 'load' is the 1-minute load average when the run started.", ""]
    table = ["| workload | N | d | y std | method | fit | learn | predict | RMSE | NLPD | peak "
             "MiB | fit x best peer | RMSE x best | NLPD - best | peak x best | load | note |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        common = (f"| {row['workload']} | {row['n_train']:,} | {row['n_dims']} | "
                  f"{row['y_std']:.3g} {row['y_unit']} | {row['method']} |")
        if row.get("skipped"):
            table.append(common + " - " * 12 + f"| not run: {row['skipped']} |")
            continue
        if "rmse" not in row:
            table.append(common + " - | - | - | - | - | "
                         f"{_fmt(row.get('peak_mib'), '.0f')} | - | - | - | - | "
                         f"{row['load_before']:.1f} | {row['error']} |")
            continue
        table.append(
            common + f" {_fmt(row['fit_s'])} | {_fmt(row['learn_s'])} | "
            f"{_fmt(row['predict_s'])} | {_fmt(row['rmse'], '.4f')} | {_fmt(row['nlpd'], '.3f')} | "
            f"{row['peak_mib']:.0f} | {_fmt(row.get('fit_s_over_best_peer'), '.2f')} | "
            f"{_fmt(row.get('rmse_over_best_peer'), '.2f')} | "
            f"{_fmt(row.get('nlpd_minus_best_peer'), '+.3f')} | "
            f"{_fmt(row.get('peak_mib_over_best_peer'), '.2f')} | {row['load_before']:.1f} | "
            f"{row['note']} |")
    gram = ["", "## scalegp: one pass against the floor", "",
            "A pass computes the features and accumulates Psi^T Psi (GLF: the one statistics "
            "pass; RFF: the conditioning pass at the learned hyperparameters, from its first "
            "chunk, scaled by N / (N - rows of that chunk); '-' when it was one chunk). "
            "Learning time = fit - this pass. Floor = N m^2 / R, "
            "the flops of the symmetric rank-m update (syrk, N m^2) at the GEMM rate R measured "
            "in the same process just before the fit.", "",
            "| workload | N | method | m | pass s | floor s | pass / floor | R GFLOP/s | "
            "pass | load |", "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if row["library"] == "scalegp" and "pass_s" in row:
            gram.append(f"| {row['workload']} | {row['n_train']:,} | {row['method']} | "
                        f"{row['columns']} | {_fmt(row['pass_s'])} | {row['floor_s']:.3g} | "
                        f"{_fmt(row['pass_over_floor'], '.2f')} | {row['gemm_gflops']:.1f} | "
                        f"{row['pass_kind']} | {row['load_before']:.1f} |")
    return "\n".join(head + table + gram) + "\n"


def readme_section(result: dict) -> str:
    """The short table: per family, the largest workload scalegp ran, its best scalegp row
    against the best peer there (fastest fit among those within 10 % of the best RMSE)."""
    rows, meta = result["rows"], result["meta"]
    lines = [f"**Against scikit-learn and GPyTorch** (`{meta['command']}`, {meta['date'][:10]}, "
             f"one BLAS thread, machine shared, load {meta['load_before']:.1f}; "
             "`benchmarks/results/peers.md`): isotropic Gaussian kernel learned from one start, "
             f"m = {meta['m']} columns for every low-rank method, limit {meta['limit_s']:.0f} s "
             "per method; RMSE in target units on held-out points.", "",
             "| workload | N | scalegp: method, fit, RMSE | best peer: method, fit, RMSE | "
             "peers not run |", "|---|---:|---|---|---|"]
    for family in dict.fromkeys(row["family"] for row in rows):
        ours = [row for row in rows if row["family"] == family and row["library"] == "scalegp"
                and "rmse" in row]
        if not ours:
            continue
        n_max = max(row["n_train"] for row in ours)
        here = [row for row in rows if row["family"] == family and row["n_train"] == n_max]
        best_ours = min((row for row in here if row in ours), key=lambda row: row["rmse"])
        theirs = [row for row in here if row["library"] != "scalegp" and "rmse" in row]
        unit = best_ours["y_std"]

        def cell(row):
            return (f"{row['method']}, {row['fit_s']:.3g} s, "
                    f"{row['rmse'] * unit:.3g} {row['y_unit']}".rstrip())
        if theirs:
            good = min(row["rmse"] for row in theirs)
            peer = min((row for row in theirs if row["rmse"] <= 1.1 * good),
                       key=lambda row: row["fit_s"])
            peer_cell = cell(peer)
        else:
            peer_cell = "none ran"
        missing = len([row for row in here if "rmse" not in row])
        lines.append(f"| {best_ours['workload']} | {n_max:,} | {cell(best_ours)} | "
                     f"{peer_cell} | {missing} |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    families = list(dict.fromkeys(row["family"] for row in rows))
    figure, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4.0),
                                squeeze=False)
    for axis, family in zip(axes[0], families):
        for k, name in enumerate(PEER_METHODS):
            points = sorted((row["n_train"], row["fit_s"]) for row in rows
                            if row["family"] == family and row["method"] == name
                            and "fit_s" in row)
            if points:
                n, seconds = zip(*points)
                axis.loglog(n, seconds, marker="o", label=name,
                            linestyle="-" if name.startswith("scalegp") else "--",
                            color=plt.cm.tab10(k))
        axis.axhline(result["meta"]["limit_s"], color="grey", linewidth=0.8)
        axis.set_title(family)
        axis.set_xlabel("N (training points)")
        axis.set_ylabel("fit time incl. learning (s)")
    axes[0][0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def shown_arguments(argv) -> list:
    """The arguments without --out and --cache-dir (paths of this machine) and their values."""
    shown, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--out", "--cache-dir"):
            skip = True
        elif not arg.startswith(("--out=", "--cache-dir=")):
            shown.append(arg)
    return shown


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("scalegp", "numpy", "scikit-learn", "torch", "gpytorch"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} not installed")
    return ", ".join(found)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: the small sizes, a 20 s limit (about 3 minutes)")
    parser.add_argument("--families", default=",".join(SIZES),
                        help="comma-separated subset of " + ", ".join(SIZES))
    parser.add_argument("--methods", default=",".join(PEER_METHODS),
                        help="comma-separated subset of the method names")
    parser.add_argument("--sizes", default=None,
                        help="comma-separated training sizes (ETOPO5: grid strides) for every "
                             "family, instead of the defaults")
    parser.add_argument("--m", type=int, default=256, help="columns of every low-rank method")
    parser.add_argument("--limit", type=float, default=None,
                        help="seconds per method and workload (default 120; --quick: 20)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--etopo5", default=None)
    parser.add_argument("--cache-dir", type=Path,
                        default=Path.home() / ".cache" / "scalegp-bench")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/peers",
                        help="writes OUT.json, OUT.md and OUT.png")
    parser.add_argument("--serve", metavar="METHOD", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    limit = args.limit if args.limit is not None else (20.0 if args.quick else 120.0)
    if args.serve:
        serve(args.serve, args.m, limit)
        return {}
    families = args.families.split(",")
    names = args.methods.split(",")
    for name in names:
        if name not in PEER_METHODS:
            parser.error(f"unknown method {name!r} (one of {', '.join(PEER_METHODS)})")
    for family in families:
        if family not in SIZES:
            parser.error(f"unknown family {family!r} (one of {', '.join(SIZES)})")
    begin = time.perf_counter()
    load_before = os.getloadavg()[0]
    rate = gemm_rate(2048)
    rows = []
    servers = {name: Server(name, args.m, limit) for name in names}
    for family in families:
        sizes = ([int(v) for v in args.sizes.split(",")] if args.sizes
                 else SIZES[family][1 if args.quick else 0])
        for workload in workloads(family, sizes, args.cache_dir, args.etopo5, args.seed):
            for name in names:
                earlier = [row for row in rows
                           if row["family"] == family and row["method"] == name]
                row = {"family": family, "workload": workload.name, "method": name,
                       "library": PEER_METHODS[name].library, "n_train": workload.n_train,
                       "n_dims": workload.n_dims, "y_std": workload.y_std,
                       "y_unit": workload.y_unit}
                reason = skip_reason(name, workload, earlier, limit, args.quick)
                if reason:
                    row["skipped"] = reason
                else:
                    row.update(servers[name].run(workload))
                rows.append(row)
                print(json.dumps({key: value for key, value in row.items()
                                  if key != "note"}), flush=True)
        write(rows, args, argv, begin, load_before, rate, limit)   # kept if a later one fails
    for server in servers.values():
        server.close()
    return write(rows, args, argv, begin, load_before, rate, limit)


def write(rows, args, argv, begin, load_before, rate, limit) -> dict:
    """Ratios, then OUT.json, OUT.md and OUT.png of the rows so far."""
    add_ratios(rows)
    script = "benchmarks/bench_peers.py"
    shown = shown_arguments(argv if argv is not None else sys.argv[1:])
    meta = {"command": f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')} "
                       f"python {script} {shlex.join(shown)}".rstrip(),
            "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            "wall_minutes": (time.perf_counter() - begin) / 60, "load_before": load_before,
            "load_after": os.getloadavg()[0], "gemm_gflops": rate, "limit_s": limit,
            "m": args.m, "versions": versions(),
            "peak_note": "VmHWM of each method's subprocess, reset before each workload",
            "harness_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    result = {"meta": meta, "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(result, indent=1))
    Path(f"{args.out}.md").write_text(markdown(result))
    plot(result, Path(f"{args.out}.png"))
    return result


if __name__ == "__main__":
    main()
