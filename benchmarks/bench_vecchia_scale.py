"""Vecchia at scale: learning and prediction time and memory against N on the ETOPO5 grid, up
to the whole grid (9.3 million points), and the global GLF fit on the same cells (issue 27).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_vecchia_scale.py \\
        [--etopo5 PATH] [--sizes 1e5,3e5,1e6,3e6,full] [--glf] [--n-jobs 2]

The data: every cell of the 4320 x 2160 ETOPO5 relief grid (longitude, latitude in degrees ->
elevation in km; ``etopo5.cdf`` from ``--etopo5``, ``$SCALEGP_ETOPO5`` or the Debian package
ferret-datasets, as :mod:`bench_local` fetches it). One random permutation (seed 0) of the
9,335,520 cells: its first ``--n-test`` (20,000) cells are the held-out set, never in any
training set; the training set of size N is the next N cells of the permutation (nested
subsets; "full" is every cell not held out, 9,315,520). Longitude is taken as a plain
coordinate (no wrap at 0/360), by both models alike.

Per N, in a fresh subprocess (so that its peak resident memory, ``getrusage`` maxrss, is its
own), the model of ``scalegp.cli.demo_vecchia`` at scale: inputs and targets standardized on
the training cells, an anisotropic Matern-5/2 and noise variance 0.05 to start, the length
scales starting at sqrt(m A / (pi N)) (standardized units; A the training cells' bounding
box: the radius of a disc holding m cells on average; the learned length scales track the
sampling density on this relief) and learned in the box [1e-5, 100] (the default's lower
end, 0.01, is 6 to 12 cells of the full grid, above the 0.0057 learned there in longitude; a
first run from length scales 1 in the default box ran off at N = 3e6 to a latitude length
scale of 954 degrees, RMSE 602 m), :class:`scalegp.vecchia.VecchiaGP` with m = 30
neighbours, the
grid-maximin ordering (the demo's: vectorized, O(N log N); exact maximin takes one Python step
per point), one block per point (``grouping=False``: learning reads a sample of the
conditionals, and the greedy grouping is a Python step per point), hyperparameters learned by
L-BFGS-B on nested random samples of the conditionals (``--schedule``, default 2,000 then
20,000: a fixed amount of learning whatever N; the full likelihood with its gradient costs
about 46 us a point, 430 s at 9.3 million, benchmarks/results/vecchia.md), at most 3
structures (scaled Vecchia's rebuilds), and predictions of the held-out cells with variance
from their 30 nearest training cells. Timed: the ordering, the neighbour sets and the blocks
(every structure built, from wrappers around :mod:`scalegp.vecchia.structure`'s calls), the
learning (the fit's wall time less its structures), the prediction (the k-d tree of the N
training cells and the held-out predictions with variance); wall and CPU seconds.

Linearity rule, computed: per training point, the wall seconds of the structures (O(N log N)),
of the fit (structures and learning; the learning is a fixed amount) and of the prediction
(the tree of the N cells, then a fixed test set), and the peak resident memory of the fit and
of the prediction, at the largest N are each within 1.5 times their values at N = 1e6.

``--glf``: in its own subprocess, the global GLF fit of :mod:`bench_etopo5` (Gauss-Legendre
features, s = 32 x 32 = 1024, learned) on the full training set (every cell not held out),
scored on the same held-out cells.

Each run merges its records into ``--out``.json (keyed by N and model) and rewrites ``--out``.md
from all records (default ``benchmarks/results/vecchia-scale``), so the sizes can be run in
several invocations.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

N_TEST = 20_000
M = 30
SCHEDULE = (2000, 20000)
LINEAR_FACTOR = 1.5
#: Length-scale box of learning, in standardized inputs (the default's lower end is 0.01).
LENGTH_SCALE_BOUNDS = (1e-5, 1e2)


def peak_rss_gib() -> float:
    """getrusage's maxrss, GiB: the peak since the start or the last :func:`reset_peak`."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _status(field: str) -> float:
    """A memory line of /proc/self/status, GiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 2**20
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> float:
    """Reset the process's peak resident memory (VmHWM) to its current one (Linux
    clear_refs 5), and return that: a phase's VmHWM afterwards is the phase's own peak."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
        refs.write("5")
    return _status("VmRSS")


def phase_peak() -> float:
    return _status("VmHWM")


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start) -> dict:
    wall, cpu = clocks()
    return {"wall": wall - start[0], "cpu": cpu - start[1]}


def etopo5_split(path, n_test: int):
    """(X, y_km, train pool, test rows): the grid and one permutation (seed 0)."""
    from bench_etopo5 import load_grid

    X, y = load_grid(path)
    rows = np.random.default_rng(0).permutation(len(y))
    return X, y, rows[n_test:], rows[:n_test]


def run_vecchia(args) -> dict:
    import scalegp as sg
    from bench_local import _etopo5_path, scores
    from scalegp.vecchia import VecchiaGP
    from scalegp.vecchia import structure as structure_module

    load = os.getloadavg()[0]
    X, y, pool, test = etopo5_split(_etopo5_path(args.etopo5), args.n_test)
    train = pool if args.n == "full" else pool[:int(float(args.n))]
    X_train, y_train = X[train], y[train]
    X_test, y_test = X[test], y[test]
    del X, y, pool
    x_mean, x_scale = X_train.mean(axis=0), X_train.std(axis=0)
    y_mean, y_scale = float(y_train.mean()), float(y_train.std())
    U_train = (X_train - x_mean) / x_scale
    z_train = (y_train - y_mean) / y_scale
    del X_train, y_train
    rss_data = peak_rss_gib()
    rss_before_fit = reset_peak()

    timers = {"ordering": [], "neighbours": [], "blocks": []}

    def timed(name, function):
        def wrapper(*a, **k):
            start = clocks()
            out = function(*a, **k)
            timers[name].append(since(start))
            return out
        return wrapper

    structure_module.order_points = timed("ordering", structure_module.order_points)
    structure_module.ordered_neighbors = timed("neighbours", structure_module.ordered_neighbors)
    structure_module.singleton_blocks = timed("blocks", structure_module.singleton_blocks)
    structure_module.grouped_blocks = timed("blocks", structure_module.grouped_blocks)

    # the start: the radius of a disc that holds m training cells on average (the cells
    # fill their bounding box): learned length scales track the sampling density here
    area = float(np.prod(U_train.max(axis=0) - U_train.min(axis=0)))
    start_length_scale = float(np.sqrt(M * area / (np.pi * len(z_train))))
    # the default box (length scales of 1 % to 100 times the inputs' std) is too narrow
    # here: the cells of the full grid are 0.08 % (longitude) and 0.16 % of a std apart
    kernel = sg.kernels.get("matern52").with_params(
        length_scale=np.full(2, start_length_scale), length_scale_bounds=LENGTH_SCALE_BOUNDS)
    gp = VecchiaGP(kernel, 0.05, M, m_predict=M, ordering="grid-maximin", grouping=False,
                   schedule=tuple(args.schedule), tolerance=args.tolerance, random_state=0,
                   n_jobs=args.n_jobs)
    start = clocks()
    gp.fit(U_train, z_train)
    fit = since(start)
    rss_fit = phase_peak()
    rss_before_predict = reset_peak()
    start = clocks()
    mean, var = gp.predict((X_test - x_mean) / x_scale, return_var=True, include_noise=True)
    predict = since(start)
    rss_predict = phase_peak()
    mean = y_mean + y_scale * mean
    var = y_scale**2 * var

    def total(name):
        return {clock: sum(t[clock] for t in timers[name]) for clock in ("wall", "cpu")}

    structure = {clock: sum(total(name)[clock] for name in timers) for clock in ("wall", "cpu")}
    n = len(train)
    record = {
        "model": "vecchia", "N": n, "n_test": len(test), "m": M, "m_predict": M,
        "schedule": list(args.schedule), "tolerance": args.tolerance, "n_jobs": args.n_jobs,
        "ordering": "grid-maximin", "grouping": False,
        "start_length_scale_deg": list(start_length_scale * x_scale),
        "n_structures": len(timers["ordering"]),
        "ordering_s": total("ordering"), "neighbours_s": total("neighbours"),
        "blocks_s": total("blocks"), "structures_s": structure,
        "learning_s": {clock: fit[clock] - structure[clock] for clock in fit},
        "fit_s": fit, "predict_s": predict,
        "n_evaluations": sum(r["n_evaluations"] for r in gp.history),
        "stages": [{"n_points": r["n_points"], "n_evaluations": r["n_evaluations"],
                    "shape_factor": r["shape_factor"]} for r in gp.history],
        "length_scale_deg": list(np.asarray(gp.kernel_.length_scale) * x_scale),
        "noise_std_m": 1000.0 * y_scale * float(np.sqrt(gp.noise_variance_)),
        # maxrss of the process (loading the whole grid included); the fit's and the
        # prediction's own peaks (VmHWM reset before each) and the resident memory before
        "peak_rss_gib": {"loading": rss_data, "before_fit": rss_before_fit, "fit": rss_fit,
                         "before_predict": rss_before_predict, "predict": rss_predict,
                         "process": max(rss_data, rss_fit, rss_predict)},
        **scores(y_test, mean, var),
        "load_before_after": [load, os.getloadavg()[0]],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    return record


def run_glf(args) -> dict:
    import scalegp as sg
    from bench_local import _etopo5_path, scores
    from scalegp.estimators.configuration import make_approximation

    load = os.getloadavg()[0]
    X, y, pool, test = etopo5_split(_etopo5_path(args.etopo5), args.n_test)
    train = pool if args.n == "full" else pool[:int(float(args.n))]
    X_train, y_train, X_test, y_test = X[train], y[train], X[test], y[test]
    del X, y, pool
    rss_data = peak_rss_gib()
    rss_before_fit = reset_peak()
    nodes = 32
    kernel = sg.kernels.get("matern52").with_params(length_scale=np.ones(2))
    model = sg.LowRankGPRegressor(
        kernel=kernel, noise_variance=0.05, normalize_X=True, normalize_y=True,
        random_state=0, n_jobs=args.n_jobs,
        approximation=make_approximation("glf", n_components=nodes**2,
                                         options={"n_nodes": [nodes] * 2}))
    start = clocks()
    model.fit(X_train, y_train)
    fit = since(start)
    rss_fit = phase_peak()
    start = clocks()
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    predict = since(start)
    return {
        "model": "glf", "N": len(train), "n_test": len(test), "n_components": nodes**2,
        "n_jobs": args.n_jobs, "fit_s": fit, "predict_s": predict,
        "n_evaluations": model.optimization_result_.n_evaluations,
        "length_scale_deg": list(np.asarray(model.kernel_.length_scale)
                                 * model.X_train_scale_),
        "noise_std_m": 1000.0 * float(np.sqrt(model.noise_variance_)) * model.y_train_std_,
        "peak_rss_gib": {"loading": rss_data, "before_fit": rss_before_fit, "fit": rss_fit,
                         "process": max(rss_data, rss_fit, peak_rss_gib())},
        **scores(y_test, mean, std**2),
        "load_before_after": [load, os.getloadavg()[0]],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


# ----------------------------------------------------------------------------- report
def _key(record) -> str:
    return f"{record['model']}:{record['N']}"


def linearity(records) -> dict | None:
    """The rule of the module docstring on the Vecchia records, or None without both N."""
    by_n = {r["N"]: r for r in records if r["model"] == "vecchia"}
    if 1_000_000 not in by_n or max(by_n) <= 1_000_000:
        return None
    small, large = by_n[1_000_000], by_n[max(by_n)]

    def ratio(value):
        return (value(large) / large["N"]) / (value(small) / small["N"])

    ratios = {"structures": ratio(lambda r: r["structures_s"]["wall"]),
              "fit": ratio(lambda r: r["fit_s"]["wall"]),
              "predict": ratio(lambda r: r["predict_s"]["wall"]),
              "fit_memory": ratio(lambda r: r["peak_rss_gib"]["fit"]),
              "predict_memory": ratio(lambda r: r["peak_rss_gib"]["predict"])}
    return {"N_small": small["N"], "N_large": large["N"], "per_point_ratios": ratios,
            "linear": bool(max(ratios.values()) <= LINEAR_FACTOR)}


def write_report(out: Path, records: list[dict]) -> None:
    commands = sorted({r["command"] for r in records if "command" in r})
    vecchia = sorted((r for r in records if r["model"] == "vecchia"), key=lambda r: r["N"])
    glf = [r for r in records if r["model"] == "glf"]
    lines = ["# Vecchia at scale: the ETOPO5 grid up to 9.3 million points", "",
             "Written by `benchmarks/bench_vecchia_scale.py` (its docstring has the protocol). "
             "Commands:", "", *("    " + c for c in commands), "",
             "Machine: 2 cores shared with two other agents' jobs (wall times are inflated "
             "by them; the 1-minute load average before and after each run is in the "
             "tables; a run at load > 3 is marked *). "
             f"Held-out cells: {N_TEST:,} random grid cells, never trained on; m = {M} "
             "neighbours for the likelihood and for prediction.", "",
             "The model: inputs (longitude, latitude) and elevation standardized on the "
             "training cells; anisotropic Matern-5/2; `scalegp.vecchia.VecchiaGP` with the "
             "grid-maximin ordering (vectorized; the exact maximin takes a Python step per "
             "point), one block per point (no grouping: its greedy pass is a Python step per "
             "point, and learning reads only a sample of the conditionals), hyperparameters "
             "learned by L-BFGS-B (tolerance 0.01, the demo's) on nested random samples of "
             "**2,000 and then 20,000 conditionals**, not on the full likelihood (whose "
             "evaluation with gradient costs about 46 us a point, some 430 s at 9.3 million: "
             "benchmarks/results/vecchia.md), starting at length scales sqrt(m A / (pi N)) "
             "(standardized units) in the box [1e-5, 100], at most 3 structures (scaled "
             "Vecchia's rebuilds). Longitude is a plain coordinate (no wrap at 0/360) for "
             "both models.", ""]
    if vecchia:
        lines += ["## Vecchia: time and memory against N", "",
                  "Seconds are wall (CPU in brackets, all threads). Structure = ordering + "
                  "neighbour sets + blocks, summed over the structures built; learning = "
                  "the L-BFGS-B stages on the sampled conditionals; predict = the k-d tree "
                  "of the training cells and the held-out cells' mean and variance.", "",
                  "| N | ordering s | neighbours s | blocks s | structures | learning s "
                  "(evaluations) | fit s (CPU s) | structures us/point | fit us/point | "
                  "predict s (CPU s) | fit peak GiB (before) | predict peak GiB | process "
                  "peak GiB | RMSE m | NLPD (km) | load before/after |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                  "---:|---|"]
        for r in vecchia:
            load = r["load_before_after"]
            mark = "*" if max(load) > 3 else ""
            rss = r["peak_rss_gib"]
            lines.append(
                f"| {r['N']:,} | {r['ordering_s']['wall']:.1f} | "
                f"{r['neighbours_s']['wall']:.1f} | {r['blocks_s']['wall']:.1f} | "
                f"{r['n_structures']} | {r['learning_s']['wall']:.1f} ({r['n_evaluations']}) "
                f"| {r['fit_s']['wall']:.1f} ({r['fit_s']['cpu']:.1f}) | "
                f"{1e6 * r['structures_s']['wall'] / r['N']:.1f} | "
                f"{1e6 * r['fit_s']['wall'] / r['N']:.1f} | "
                f"{r['predict_s']['wall']:.1f} ({r['predict_s']['cpu']:.1f}) | "
                f"{rss['fit']:.2f} ({rss['before_fit']:.2f}) | {rss['predict']:.2f} | "
                f"{rss['process']:.2f} | {r['rmse_m']:.1f} | {r['nlpd_km']:.3f} | "
                f"{load[0]:.2f} / {load[1]:.2f}{mark} |")
        lines += ["", "Learned hyperparameters (length scales in degrees of longitude, "
                  "latitude; noise sd in m) and the learning stages (conditionals sampled, "
                  "L-BFGS-B evaluations, shape factor of the length scales against the "
                  "structure's):", ""]
        for r in vecchia:
            stages = "; ".join(f"{s['n_points']:,}: {s['n_evaluations']} ev., shape "
                               f"{s['shape_factor']:.2f}" for s in r["stages"])
            lines.append(f"- N = {r['N']:,}: length scales {r['length_scale_deg'][0]:.3f}, "
                         f"{r['length_scale_deg'][1]:.3f} deg, noise sd "
                         f"{r['noise_std_m']:.1f} m; stages {stages}.")
        rule = linearity(records)
        if rule:
            ratios = rule["per_point_ratios"]
            lines += ["", f"**Linearity** (rule: per training point, the wall seconds of the "
                      f"structures, of the fit and of the prediction, and the peak resident "
                      f"memory of the fit and of the prediction, at the largest N within "
                      f"{LINEAR_FACTOR}x of those at N = 1e6): at N = {rule['N_large']:,} "
                      f"against N = {rule['N_small']:,}, "
                      + ", ".join(f"{name.replace('_', ' ')} {value:.2f}x"
                                  for name, value in ratios.items())
                      + ": " + ("**linear**." if rule["linear"] else "**not linear**.")]
        full = max(vecchia, key=lambda r: r["N"])
        lines += ["", f"**Ten minutes**: the fit on N = {full['N']:,} (ordering, neighbour "
                  f"sets, blocks, learning) took {full['fit_s']['wall']:.0f} s wall "
                  f"(limit 600 s; {full['fit_s']['cpu']:.0f} CPU s on {full['n_jobs']} "
                  f"threads): " + ("**met**" if full["fit_s"]["wall"] <= 600
                                   else "**not met**")
                  + f", at load {full['load_before_after'][0]:.2f} before, "
                  f"{full['load_before_after'][1]:.2f} after."]
    if glf:
        lines += ["", "## Against the global GLF fit on the same cells", "",
                  "| model | N | fit s (CPU s) | predict s | peak RSS GiB | RMSE m | NLPD (km) "
                  "| length scales deg | noise sd m | load before/after |",
                  "|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
        rows = glf + [r for r in vecchia if r["N"] in {g["N"] for g in glf}]
        for r in rows:
            name = ("GLF, s = 1024 (32 x 32 nodes), learned" if r["model"] == "glf"
                    else f"Vecchia, m = {M}, learned on {r['schedule'][-1]:,} conditionals")
            load = r["load_before_after"]
            mark = "*" if max(load) > 3 else ""
            lines.append(
                f"| {name} | {r['N']:,} | {r['fit_s']['wall']:.0f} ({r['fit_s']['cpu']:.0f}) | "
                f"{r['predict_s']['wall']:.1f} | {r['peak_rss_gib']['process']:.2f} | "
                f"{r['rmse_m']:.1f} | {r['nlpd_km']:.3f} | "
                f"{r['length_scale_deg'][0]:.3g}, {r['length_scale_deg'][1]:.3g} | "
                f"{r['noise_std_m']:.0f} | {load[0]:.2f} / {load[1]:.2f}{mark} |")
        for g in glf:
            for v in (r for r in vecchia if r["N"] == g["N"]):
                lines += ["", f"On the same {g['N']:,} training cells and {g['n_test']:,} "
                          f"held-out cells, Vecchia's test RMSE is {v['rmse_m']:.1f} m against "
                          f"the global GLF fit's {g['rmse_m']:.1f} m "
                          f"({g['rmse_m'] / v['rmse_m']:.1f} times lower), NLPD "
                          f"{v['nlpd_km']:.3f} against {g['nlpd_km']:.3f}."]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--etopo5", default=None)
    parser.add_argument("--sizes", default="1e5,3e5,1e6,3e6,full",
                        help="training sizes (comma separated; 'full': every cell not held out)")
    parser.add_argument("--glf", action="store_true", help="also the GLF fit on 'full'")
    parser.add_argument("--no-vecchia", action="store_true", help="only the GLF fit")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite the .md from the .json, running nothing")
    parser.add_argument("--n-test", type=int, default=N_TEST)
    parser.add_argument("--schedule", default=",".join(map(str, SCHEDULE)))
    parser.add_argument("--tolerance", type=float, default=0.01,
                        help="VecchiaGP's tolerance (nats per nat per point; the demo's 0.01)")
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/vecchia-scale"))
    parser.add_argument("--child", choices=("vecchia", "glf"), help=argparse.SUPPRESS)
    parser.add_argument("--n", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.schedule = [int(float(s)) for s in args.schedule.split(",")]
    if args.child:
        record = (run_vecchia if args.child == "vecchia" else run_glf)(args)
        print("RECORD " + json.dumps(record), flush=True)
        return
    out = Path(args.out)
    path = out.with_suffix(".json")
    records = {_key(r): r for r in json.loads(path.read_text())} if path.exists() else {}
    jobs = [] if args.no_vecchia or args.report_only else [
        ("vecchia", n) for n in args.sizes.split(",")]
    if args.glf and not args.report_only:
        jobs.append(("glf", "full"))
    command = ("OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vecchia_scale.py "
               + " ".join(a for a in (argv if argv is not None else sys.argv[1:])
                          if not a.startswith("--etopo5")))
    for model, n in jobs:
        child = [sys.executable, __file__, "--child", model, "--n", n,
                 "--n-test", str(args.n_test), "--schedule", ",".join(map(str, args.schedule)),
                 "--tolerance", str(args.tolerance), "--n-jobs", str(args.n_jobs)]
        if args.etopo5:
            child += ["--etopo5", args.etopo5]
        print(f"{model} N = {n} ...", flush=True)
        done = subprocess.run(child, capture_output=True, text=True)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-4000:], flush=True)
            raise SystemExit(f"{model} at N = {n} failed")
        record = json.loads(next(line for line in done.stdout.splitlines()
                                 if line.startswith("RECORD "))[len("RECORD "):])
        record["command"] = command
        records[_key(record)] = record
        print(json.dumps(record), flush=True)
        path.write_text(json.dumps(list(records.values()), indent=1))
        write_report(out, list(records.values()))
    write_report(out, list(records.values()))


if __name__ == "__main__":
    main()
