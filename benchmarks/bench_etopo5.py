"""A GLF fit, hyperparameter learning included, on the full ETOPO5 grid (9.3 million points).

    .venv/bin/python benchmarks/bench_etopo5.py [--etopo5 PATH] [--nodes 32] [--n-jobs P] [--grid]

Reads the 4320 x 2160 relief grid (5-minute resolution, longitude 0 to 360, latitude -90 to 90)
from ``etopo5.cdf`` (``--etopo5``, ``$SCALEGP_ETOPO5``, or the Debian package
``ferret-datasets`` fetched as :mod:`bench_local` does), and fits an anisotropic Matern-5/2 GP
with Gauss-Legendre features of q x q nodes (s = q^2 columns) on every grid point, inputs and
targets standardised, learning the hyperparameters (one pass for the basis statistics
Phi^T Phi, then O(s^3) steps), with ``n_jobs = P`` threads over chunks (default: every core;
docs/engine.md, "Threads over chunks"). Reported, from this run:

* the fit's wall seconds (learning and conditioning) and those of the one pass, and the
  process's CPU seconds (all threads);
* the floor N s^2 / R: the flops of the pass's symmetric rank-k update Phi^T Phi (N s^2,
  multiply-adds of one triangle counted as two flops each, plus the s^2 / 2 of its diagonal
  block: N s^2 to within 1/s), at the machine's GEMM rate R (2 n^3 flops per n x n product,
  n = 4096, with P BLAS threads, the best of three products just before the fit and three just
  after), against the wall time; and per core: the CPU seconds against N s^2 / R_1, R_1 the
  one-thread rate on the CPU clock (what the pass costs a core, whatever the threads);
* the peak resident memory of the process (VmHWM), which includes the 9.3-million-point grid
  itself (X and y in float64: 224 MB) and the estimator's standardised copy;
* the 1-minute load average before and after;
* the symmetric rank-k update alone on one chunk (one thread), as a multiple of its floor.

With ``--grid`` the relief is given as what it is, a raster (:class:`scalegp.data.grid.GridSource`,
axes longitude and latitude): the summary and the basis statistics then come from the axes and
the values (docs/gauss-legendre.md, section 2, "Statistics on a tensor grid") instead of passes
over the 9.3 million rows; the same model, measured against the same floor of the row pass.

Writes ``benchmarks/results/etopo5.md`` and ``.json`` (``etopo5-grid.*`` with ``--grid``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scalegp as sg  # noqa: E402
from bench_local import _etopo5_path  # noqa: E402
from machine import gemm_rate  # noqa: E402
from scalegp.parallel import available_cores, resolve_n_jobs  # noqa: E402
from scalegp.estimators.configuration import make_approximation  # noqa: E402


def peak_rss_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def load_grid(path: Path):
    """(X (lon, lat) in degrees, elevation in km) of every grid point."""
    from scipy.io import netcdf_file

    with netcdf_file(path, mmap=False) as source:
        lon = source.variables["ETOPO05_X"].data.astype(np.float64)
        lat = source.variables["ETOPO05_Y"].data.astype(np.float64)
        elevation = source.variables["ROSE"].data.astype(np.float64).ravel() / 1000.0
    X = np.empty((lat.size * lon.size, 2))
    X[:, 0] = np.tile(lon, lat.size)
    X[:, 1] = np.repeat(lat, lon.size)
    return X, elevation


def load_raster(path: Path):
    """The same relief as :func:`load_grid`, as a grid source over (longitude, latitude)."""
    from scipy.io import netcdf_file

    from scalegp.data.grid import GridSource

    with netcdf_file(path, mmap=False) as source:
        lon = source.variables["ETOPO05_X"].data.astype(np.float64)
        lat = source.variables["ETOPO05_Y"].data.astype(np.float64)
        elevation = source.variables["ROSE"].data.astype(np.float64) / 1000.0   # (lat, lon)
    return GridSource([lon, lat], elevation.T)


def rank_k_update_over_floor(s: int, rate: float, repeats: int = 5) -> float:
    """Seconds of one chunk's symmetric rank-k update (the pass's layout: a Fortran-ordered
    chunk x s Phi, chunk rows as the engine picks them), best of ``repeats`` in CPU time, over
    its floor chunk s^2 / rate: what OpenBLAS's dsyrk alone leaves of the gap to the floor."""
    from scalegp import linalg
    from scalegp._memory import default_chunk_size

    rows = default_chunk_size(s)
    Phi = np.asfortranarray(np.random.default_rng(2).standard_normal((rows, s)))
    G = np.zeros((s, s), order="F")
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        linalg.symmetric_rank_k_update(G, Phi)
        best = min(best, time.process_time() - start)
    return best / (rows * s**2 / rate)


def _rates(n_jobs: int) -> dict:
    """GEMM rates in GFLOP/s: P threads on the wall clock, one thread on the CPU clock."""
    with threadpool_limits(limits=n_jobs, user_api="blas"):
        wall = gemm_rate(4096)
    with threadpool_limits(limits=1, user_api="blas"):
        cpu = gemm_rate(4096, clock=time.process_time)
    return {"wall": wall, "cpu": cpu}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--etopo5", default=None)
    parser.add_argument("--nodes", type=int, default=32, help="q per dimension (s = q^2)")
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="threads over chunks (default -1: every core)")
    parser.add_argument("--grid", action="store_true",
                        help="fit the raster as a grid source (statistics from the axes)")
    parser.add_argument("--out", default=None,
                        help="output stem (default benchmarks/results/etopo5[-grid])")
    args = parser.parse_args(argv)
    out = args.out or str(ROOT / "benchmarks/results" / ("etopo5-grid" if args.grid
                                                         else "etopo5"))
    n_jobs = resolve_n_jobs(args.n_jobs)
    if args.grid:
        data = (load_raster(_etopo5_path(args.etopo5)),)
        n = data[0].n_samples
    else:
        data = load_grid(_etopo5_path(args.etopo5))
        n = len(data[1])
    s = args.nodes**2
    kernel = sg.kernels.get("matern52").with_params(length_scale=np.ones(2))
    model = sg.LowRankGPRegressor(kernel=kernel,
                                  noise_variance=0.05, normalize_X=True, normalize_y=True,
                                  random_state=0, n_jobs=n_jobs, approximation=make_approximation("glf", n_components=s, options={"n_nodes": [args.nodes] * 2}))
    passes = []

    def progress(rows):
        if rows >= n:
            passes.append((time.process_time(), time.perf_counter()))

    load_before = os.getloadavg()[0]
    rates_before = _rates(n_jobs)
    start = time.process_time(), time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(*data, progress=progress)
    stop = time.process_time(), time.perf_counter()
    rates_after = _rates(n_jobs)
    figures = {}
    for k, clock in enumerate(("cpu", "wall")):
        rate = max(rates_before[clock], rates_after[clock]) * 1e9
        figures[clock] = {
            "fit_seconds": stop[k] - start[k],
            # the grid path makes no statistics pass (its one pass gathers the probe rows)
            "first_pass_seconds": None if args.grid else passes[0][k] - start[k],
            "gemm_gflops": rate / 1e9,
            "gemm_gflops_before_after": [rates_before[clock], rates_after[clock]],
            "gemm_threads": 1 if clock == "cpu" else n_jobs,
            "floor_seconds": n * s**2 / rate,
            "fit_over_floor": (stop[k] - start[k]) / (n * s**2 / rate)}
    with threadpool_limits(limits=1, user_api="blas"):
        syrk_alone = rank_k_update_over_floor(s, figures["cpu"]["gemm_gflops"] * 1e9)
    result = {
        "n_samples": n, "n_components": s, "n_jobs": n_jobs, "grid": args.grid, **figures,
        "rank_k_update_alone_over_floor": syrk_alone,
        "peak_rss_gib": peak_rss_bytes() / 2**30,
        "n_evaluations": model.optimization_result_.n_evaluations,
        "length_scale_deg": list(model.kernel_.length_scale * model.X_train_scale_),
        "noise_std_m": 1000 * float(np.sqrt(model.noise_variance_)) * model.y_train_std_,
        "warnings": sorted({str(w.message)[:160] for w in caught}),
        "load_average_before_after": [load_before, os.getloadavg()[0]],
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print(json.dumps(result, indent=2))
    Path(out + ".json").write_text(json.dumps(result, indent=2))
    labels = {"wall": f"wall, {n_jobs} thread(s)", "cpu": "CPU (all threads), per core"}
    rows = "".join(
        f"| {labels[clock]} | {n:,} | {s} | {f['fit_seconds']:.0f} s | "
        + ("none (grid) | " if f["first_pass_seconds"] is None
           else f"{f['first_pass_seconds']:.0f} s | ")
        + f"{f['floor_seconds']:.0f} s | "
        f"{f['fit_over_floor']:.2f} | {f['gemm_gflops']:.1f} GFLOP/s ({f['gemm_threads']}) | "
        f"{result['peak_rss_gib']:.2f} GiB |\n" for clock, f in (("wall", figures["wall"]),
                                                                ("cpu", figures["cpu"])))
    Path(out + ".md").write_text(
        "# GLF on the full ETOPO5 grid" + (", as a grid source" if args.grid else "") + "\n\n"
        f"`python benchmarks/bench_etopo5.py --nodes {args.nodes} --n-jobs {args.n_jobs}"
        + (" --grid" if args.grid else "") + "` on "
        f"{result['date']}; {n_jobs} thread(s) over chunks, one BLAS thread each; 1-minute "
        f"load average {load_before:.2f} before, {result['load_average_before_after'][1]:.2f} "
        f"after ({available_cores()} cores). Wall: elapsed time against the floor at the "
        f"machine's GEMM rate with {n_jobs} BLAS thread(s), wall clock. Per core: the "
        "process's CPU time over all threads against the floor at the one-thread GEMM rate, "
        "CPU clock.\n\n"
        "| clock | N | s | fit incl. learning | first pass | floor N s^2 / GEMM rate | "
        "fit / floor | GEMM rate (threads) | peak RSS |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        + rows + f"\n{result['n_evaluations']} likelihood evaluations; learned length scales "
        f"{', '.join(f'{v:.3g}' for v in result['length_scale_deg'])} degrees, noise sd "
        f"{result['noise_std_m']:.0f} m. "
        + ("The statistics come from the raster's axes (no rank-k update, no pass over the "
           "rows); the floor is that of the row pass they replace.\n" if args.grid else
           f"The rank-k update alone (one chunk, one thread, CPU clock, best of 5) takes "
           f"{syrk_alone:.2f} times its floor: that much of the per-core gap is OpenBLAS's "
           "dsyrk against its dgemm; the rest is the features and the reading.\n"))


if __name__ == "__main__":
    main()
