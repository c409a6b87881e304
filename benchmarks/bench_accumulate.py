"""Benchmark of ``Statistics.accumulate`` against the machine's GEMM rate, and of the peak
memory of a streamed fit.

    .venv/bin/python benchmarks/bench_accumulate.py           # full run (~5-10 min on 2 cores)
    .venv/bin/python benchmarks/bench_accumulate.py --quick   # smoke run (small N, < 1 min)

The full run writes ``benchmarks/results/accumulate.md`` (``--out`` to change; a quick run only
prints unless ``--out`` is given). What is measured, per (m, dtype):

* GEMM peak: a square n x n matrix product (n = 4096), 2 n^3 flops, best of all repetitions,
  the larger of numpy's and scipy's BLAS (they may be two different OpenBLAS builds).
* bare Psi^T Psi: ``Psi.T @ Psi`` on the whole precomputed N x m matrix Psi (numpy calls syrk
  for a product of a matrix with its own transpose, then mirrors the triangle).
* accumulate, Gram only: ``Statistics.accumulate`` with a trivial feature map that returns
  stored rows of the same Psi (views, no copy), so only the streamed Psi^T Psi, Psi^T y, y^T y
  are timed, with the default chunk size.
* accumulate, RFF: ``Statistics.accumulate`` with random Fourier features of a Gaussian kernel
  (d = 2) computed on the fly; Psi above is exactly these features, so all rows are comparable.
  The feature time alone (the same calls on the same chunks, without the Gram) gives the split.

Rates are GEMM-equivalent: 2 N m^2 / time, the flops of the full product Psi^T Psi, even though
syrk computes only one triangle (half of them); "share" is that rate over the GEMM peak of the
same dtype. A share above 100 % is possible with syrk. Times are the best of several
repetitions, interleaved with the GEMM peak measurement so that all see the same machine load
(the machines are shared; the load average is recorded).

The streamed-fit memory is measured in a fresh subprocess, before anything large is allocated
here: ``Posterior.fit`` with "rff" on a Gaussian kernel, N = 2e6 1-D points, m = 256, float64.
Reported: the peak resident set size during the fit (VmHWM of /proc/self/status, reset through
/proc/self/clear_refs just before the fit; also ``resource.getrusage(RUSAGE_SELF).ru_maxrss``)
minus the RSS (/proc/self/statm) just before the fit, with scalegp imported and the data loaded,
and, in a second subprocess, the peak of ``tracemalloc`` during the fit (numpy reports its
buffers to tracemalloc).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics as stats
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "src" / "scalegp").is_dir():
    sys.path.insert(0, str(ROOT / "src"))

import scipy  # noqa: E402
import scipy.linalg.blas as blas  # noqa: E402

import scalegp  # noqa: E402
from scalegp import _memory  # noqa: E402
from scalegp import engine  # noqa: E402
from scalegp.features.base import FeatureMap  # noqa: E402
from scalegp.features.random_fourier import RandomFourierFeatures  # noqa: E402
from scalegp.kernels import Gaussian  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "accumulate.md"
MEMORY_LIMIT_MB = 300.0
SHARE_TARGET = 0.70


# --------------------------------------------------------------------------- feature maps
@dataclass(frozen=True, eq=False)
class StoredRows(FeatureMap):
    """Rows of a precomputed Psi; X holds the row index in its only column.

    Defined without ``name=`` so it stays out of the feature-map registry.
    """

    Psi: np.ndarray

    @classmethod
    def build(cls, X, kernel, n_components, rng=None, **options):
        raise NotImplementedError("StoredRows is constructed directly")

    @property
    def n_components(self) -> int:
        return self.Psi.shape[1]

    def features(self, X, kernel) -> np.ndarray:
        # consecutive rows (the engine streams contiguous chunks): a view, no copy
        start = int(X[0, 0])
        return self.Psi[start:start + X.shape[0]]


# --------------------------------------------------------------------------- machine
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def machine_busy_seconds() -> float | None:
    """CPU seconds all processes have been busy since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def blas_info() -> list[dict]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return [{"note": "threadpoolctl not installed (pip install threadpoolctl)"}]
    return [info for info in threadpool_info() if info.get("user_api") == "blas"]


def machine_info() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "scalegp": f"{getattr(scalegp, '__version__', '?')} from {Path(scalegp.__file__).parent}",
        "blas": blas_info(),
        "env": {name: os.environ.get(name, "(unset)")
                for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
                             "OMP_NUM_THREADS")},
    }


# --------------------------------------------------------------------------- timing
#: The clock of every timing: wall time by default; ``--clock cpu`` (with ``--threads 1``)
#: uses this process's CPU time, which other processes on a busy machine disturb far less.
CLOCK = time.perf_counter


class Timer:
    """Collects times per label; reports the best (minimum) and the median."""

    def __init__(self):
        self.times: dict[str, list[float]] = {}

    def run(self, label: str, fn):
        t0 = CLOCK()
        result = fn()
        self.times.setdefault(label, []).append(CLOCK() - t0)
        return result

    def best(self, label: str) -> float:
        return min(self.times[label])

    def median(self, label: str) -> float:
        return stats.median(self.times[label])


class GemmPeak:
    """Square GEMM rate per dtype, the best over every measurement of the run."""

    def __init__(self, size: int, rng: np.random.Generator):
        self.size = size
        self.matrices = {}
        for dtype in (np.float64, np.float32):
            A = rng.random((size, size), dtype=dtype)
            B = rng.random((size, size), dtype=dtype)
            self.matrices[np.dtype(dtype)] = (A, B, np.asfortranarray(A), np.asfortranarray(B))
        self.rates: dict[tuple[str, str], list[float]] = {}
        for dtype in self.matrices:          # warm up both BLAS libraries and their threads
            self.measure(dtype)

    def measure(self, dtype) -> None:
        dtype = np.dtype(dtype)
        A, B, Af, Bf = self.matrices[dtype]
        gemm = blas.sgemm if dtype == np.float32 else blas.dgemm
        flops = 2.0 * self.size**3
        for library, fn in (("numpy", lambda: A @ B), ("scipy", lambda: gemm(1.0, Af, Bf))):
            t0 = CLOCK()
            fn()
            rate = flops / (CLOCK() - t0)
            self.rates.setdefault((dtype.name, library), []).append(rate)

    def peak(self, dtype) -> float:
        name = np.dtype(dtype).name
        return max(max(r) for (d, _), r in self.rates.items() if d == name)

    def best(self, dtype, library) -> float:
        return max(self.rates[(np.dtype(dtype).name, library)])


# --------------------------------------------------------------------------- accumulate
def fill_features(feature_map, kernel, X, dtype, chunk_size) -> np.ndarray:
    Psi = np.empty((X.shape[0], feature_map.n_components), dtype=dtype)
    for start, stop in engine._chunks(X.shape[0], chunk_size):
        Psi[start:stop] = feature_map.features(X[start:stop], kernel)
    return Psi


def rows_that_fit(n_samples: int, m: int, dtype) -> int:
    """N, halved until Psi (N x m) takes at most half the available memory."""
    available = mem_available_bytes()
    if available is None:
        return n_samples
    itemsize = np.dtype(dtype).itemsize
    while n_samples * m * itemsize > 0.5 * available and n_samples > 1024:
        n_samples //= 2
    return n_samples


def bench_accumulate(m: int, dtype, n_samples: int, repeats: int, peak: GemmPeak,
                     rng: np.random.Generator, log) -> dict:
    dtype = np.dtype(dtype)
    n_requested = n_samples
    n_samples = rows_that_fit(n_samples, m, dtype)
    kernel = Gaussian(length_scale=0.5)
    X = rng.uniform(-3.0, 3.0, size=(n_samples, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n_samples)
    rff = RandomFourierFeatures.build(X, kernel, m, rng)
    Xd = X.astype(dtype)                      # what accumulate works on for this dtype
    chunk_size = _memory.default_chunk_size(m, dtype.itemsize)

    gib = n_samples * m * dtype.itemsize / 2**30
    log(f"  m={m} {dtype.name} N={n_samples}: computing Psi ({gib:.1f} GiB)")
    Psi = fill_features(rff, kernel, Xd, dtype, chunk_size)
    stored = StoredRows(n_dims=1, Psi=Psi)
    X_index = np.arange(n_samples, dtype=np.float64)[:, None]

    def features_only():
        for start in range(0, n_samples, chunk_size):
            rff.features(Xd[start:start + chunk_size], kernel)

    timer = Timer()
    G_bare = G_gram = G_rff = None
    for _ in range(repeats):
        peak.measure(dtype)
        G_bare = timer.run("bare", lambda: Psi.T @ Psi)
        G_gram = timer.run("gram", lambda: engine.Statistics.accumulate(
            stored, kernel, X_index, y, dtype=dtype)).gram
        G_rff = timer.run("rff", lambda: engine.Statistics.accumulate(
            rff, kernel, X, y, dtype=dtype)).gram
        timer.run("features", features_only)
        log(f"    bare {timer.times['bare'][-1]:.2f}s  gram {timer.times['gram'][-1]:.2f}s  "
            f"rff {timer.times['rff'][-1]:.2f}s  features {timer.times['features'][-1]:.2f}s")
    Psi = stored = None             # free the stored features before the next setting

    G_bare = np.asarray(G_bare, dtype=np.float64)
    scale = np.max(np.abs(G_bare))
    flops = 2.0 * n_samples * m**2
    return {
        "m": m, "dtype": dtype.name, "n_samples": n_samples, "n_requested": n_requested,
        "chunk_size": chunk_size, "repeats": repeats, "flops": flops,
        "bare": timer.best("bare"), "gram": timer.best("gram"), "rff": timer.best("rff"),
        "features": timer.best("features"),
        "median": {k: timer.median(k) for k in timer.times},
        "diff_gram": float(np.max(np.abs(G_gram - G_bare)) / scale),
        "diff_rff": float(np.max(np.abs(G_rff - G_bare)) / scale),
    }


# --------------------------------------------------------------------------- memory
MEMORY_SCRIPT = r"""
import json, os, resource, sys, time
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
def hwm():
    # VmHWM: peak RSS of this process's own address space (ru_maxrss may also hold the
    # parent's RSS at fork time, which Linux carries across exec)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
def maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
mode, n_samples, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import numpy as np
from scalegp.engine import Posterior
from scalegp.kernels import Gaussian
from scalegp.features.random_fourier import RandomFourierFeatures
rss_imported = rss()
rng = np.random.default_rng(0)
X = rng.uniform(0.0, 10.0, size=(n_samples, 1))
y = np.sin(X[:, 0])
y += 0.1 * rng.standard_normal(n_samples)
kernel = Gaussian(length_scale=0.5)
feature_map = RandomFourierFeatures.build(X, kernel, m, rng)
hwm_reset = reset_hwm()
rss_before, hwm_before, maxrss_before = rss(), hwm(), maxrss()
if mode == "tracemalloc":
    import tracemalloc
    tracemalloc.start()
t0 = time.perf_counter()
posterior = Posterior.fit(feature_map, kernel, 0.01, X, y)
seconds = time.perf_counter() - t0
out = {"rss_imported": rss_imported, "rss_before": rss_before, "hwm_before": hwm_before,
       "hwm_reset": hwm_reset, "hwm_after": hwm(), "maxrss_before": maxrss_before,
       "maxrss_after": maxrss(), "seconds": seconds, "data_bytes": X.nbytes + y.nbytes,
       "lml": posterior.log_marginal_likelihood}
if mode == "tracemalloc":
    out["traced_peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(out))
"""


def bench_memory(n_samples: int, m: int) -> dict:
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    results = {}
    for mode in ("rss", "tracemalloc"):
        done = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, mode, str(n_samples), str(m)],
                              env=env, capture_output=True, text=True, check=True)
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


# --------------------------------------------------------------------------- report
def fmt_blas(info: dict) -> str:
    if "note" in info:
        return info["note"]
    return (f"{info.get('internal_api')} {info.get('version')} ({info.get('architecture')} "
            f"kernels, {info.get('num_threads')} threads) `{Path(info.get('filepath', '')).name}`")


def report(machine: dict, peak: GemmPeak, rows: list[dict], memory: dict, command: str,
           quick: bool, load: tuple[str, str], total_seconds: float) -> str:
    MB = 2**20
    lines = [f"# `Statistics.accumulate` vs GEMM{' (quick run)' if quick else ''}", ""]
    lines += ["## Machine", "",
              f"- CPU: {machine['cpu']}, {machine['cores']} cores",
              f"- Python {machine['python']}, numpy {machine['numpy']}, scipy {machine['scipy']}, "
              f"scalegp {machine['scalegp']}"]
    for info in machine["blas"]:
        lines.append(f"- BLAS: {fmt_blas(info)}")
    lines.append("- environment: " + ", ".join(f"{k}={v}" for k, v in machine["env"].items()))
    lines.append(f"- load average (1, 5, 15 min) before: {load[0]}; after: {load[1]}")
    if machine.get("others_share") is not None:
        lines.append(f"- other processes used {100 * machine['others_share']:.0f} % of the "
                     "machine's CPU time during the run (/proc/stat busy time minus this "
                     "benchmark's; near 0 for trustworthy wall times)")
    lines.append(f"- clock: {machine['clock']}")
    lines += ["", f"Command: `{command}` ({total_seconds / 60:.1f} min)", ""]

    lines += ["## GEMM peak", "",
              f"Square {peak.size} x {peak.size} product, 2 n^3 flops, best of "
              f"{len(next(iter(peak.rates.values())))} runs.", "",
              "| dtype | numpy (GFLOP/s) | scipy (GFLOP/s) | peak used (GFLOP/s) |",
              "|---|---:|---:|---:|"]
    for dtype in ("float64", "float32"):
        lines.append(f"| {dtype} | {peak.best(dtype, 'numpy') / 1e9:.1f} | "
                     f"{peak.best(dtype, 'scipy') / 1e9:.1f} | {peak.peak(dtype) / 1e9:.1f} |")

    def rate(row, key):
        r = row["flops"] / row[key]
        return f"{r / 1e9:.1f}", f"{100 * r / peak.peak(row['dtype']):.0f} %"

    lines += ["", "## Gram accumulation (precomputed Psi)", "",
              "GEMM-equivalent rate = 2 N m^2 / time; share = rate / GEMM peak of the dtype "
              f"(target: accumulate >= {100 * SHARE_TARGET:.0f} %). Best of the repetitions.", "",
              "| m | dtype | N | chunk rows | bare Psi^T Psi (s) | bare rate (GFLOP/s) | "
              "bare share | accumulate (s) | accumulate rate (GFLOP/s) | accumulate share | "
              "max rel. diff vs bare |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        br, bs = rate(row, "bare")
        gr, gs = rate(row, "gram")
        lines.append(f"| {row['m']} | {row['dtype']} | {row['n_samples']:.0e} | "
                     f"{row['chunk_size']} | {row['bare']:.2f} | {br} | {bs} | "
                     f"{row['gram']:.2f} | "
                     f"{gr} | {gs} | {row['diff_gram']:.1e} |")

    lines += ["", "## Full accumulate with RFF features (Gaussian kernel, d = 2)", "",
              "features = the same `features` calls on the same chunks without the Gram; "
              "features % = features / accumulate; Gram % = Gram-only accumulate (table above) "
              "/ accumulate.", "",
              "| m | dtype | N | accumulate (s) | rate (GFLOP/s) | share of GEMM peak | "
              "features (s) | features % | Gram % | max rel. diff vs bare |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        rr, rs = rate(row, "rff")
        lines.append(f"| {row['m']} | {row['dtype']} | {row['n_samples']:.0e} | "
                     f"{row['rff']:.2f} | "
                     f"{rr} | {rs} | {row['features']:.2f} | "
                     f"{100 * row['features'] / row['rff']:.0f} % | "
                     f"{100 * row['gram'] / row['rff']:.0f} % | {row['diff_rff']:.1e} |")
    notes = [f"N = {row['n_samples']} instead of {row['n_requested']} for m={row['m']} "
             f"{row['dtype']} (Psi must fit in half the available memory)"
             for row in rows if row["n_samples"] != row["n_requested"]]
    lines += [""] + [f"Note: {note}." for note in notes] + ([""] if notes else [])
    lines += ["Medians of the repetitions (s): " + "; ".join(
        f"m={row['m']} {row['dtype']}: "
        + ", ".join(f"{k} {v:.2f}" for k, v in row["median"].items())
        for row in rows), ""]

    r, t = memory["rss"], memory["tracemalloc"]
    hwm_delta = (r["hwm_after"] - r["rss_before"]) / MB
    maxrss_delta = (r["maxrss_after"] - r["rss_before"]) / MB
    imported_delta = (r["hwm_after"] - r["rss_imported"]) / MB
    traced = t["traced_peak"] / MB
    lines += ["## Peak memory of a streamed fit", "",
              f"`Posterior.fit` with \"rff\", Gaussian kernel, N = {memory['n_samples']:.0e} 1-D "
              f"points, m = {memory['m']}, float64, default chunk size "
              f"({_memory.default_chunk_size(memory['m'])} rows), each measure in a fresh subprocess "
              "started before the benchmark allocates anything large. Baseline: the RSS "
              "(/proc/self/statm) just before the fit, with scalegp imported, X and y "
              f"({r['data_bytes'] / MB:.0f} MB) and the feature map built. "
              f"Limit: {MEMORY_LIMIT_MB:.0f} MB above the baseline.", "",
              "| measure | MB |", "|---|---:|",
              f"| peak RSS during the fit - baseline (VmHWM, reset before the fit"
              f"{'' if r['hwm_reset'] else ' (reset failed)'}) | {hwm_delta:.0f} |",
              f"| ru_maxrss after the fit - baseline (getrusage) | {maxrss_delta:.0f} |",
              f"| peak RSS during the fit - RSS after the imports, before the data | "
              f"{imported_delta:.0f} |",
              f"| tracemalloc peak during the fit (numpy buffers and Python objects) | "
              f"{traced:.0f} |",
              f"| baseline RSS (absolute) | {r['rss_before'] / MB:.0f} |",
              f"| fit time (s) | {r['seconds']:.1f} |", "",
              f"Within the {MEMORY_LIMIT_MB:.0f} MB limit: "
              f"{'yes' if max(hwm_delta, maxrss_delta, traced) < MEMORY_LIMIT_MB else 'NO'}. "
              "(ru_maxrss is also inherited from the parent's RSS at fork, which Linux carries "
              "across exec; VmHWM is the child's own peak.)", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small N: a smoke run")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"markdown output (default {DEFAULT_OUT.relative_to(ROOT)} for a "
                             "full run; a quick run only prints)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="repetitions per measurement (default 3; 2 for m=1024; 2 if --quick)")
    parser.add_argument("--threads", type=int, default=None,
                        help="BLAS threads (threadpoolctl; default: the BLAS default)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall time (default) or this process's CPU time (only with "
                             "--threads 1: robust on a busy machine)")
    parser.add_argument("--n-samples", type=int, default=None,
                        help="N of the accumulate runs (default 1e6; 1e5 if --quick)")
    args = parser.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu needs --threads 1 (CPU time of several threads adds up)")
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter

    command = " ".join([Path(sys.executable).relative_to(ROOT).as_posix()
                        if Path(sys.executable).is_relative_to(ROOT) else sys.executable,
                        Path(__file__).resolve().relative_to(ROOT).as_posix()]
                       + [shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])])
    quick = args.quick
    n_samples = args.n_samples or (10**5 if quick else 10**6)
    fit_samples = 2 * 10**5 if quick else 2 * 10**6
    gemm_size = 2048 if quick else 4096

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    t_start = time.perf_counter()
    load_before = loadavg()
    busy_start, own_start = machine_busy_seconds(), own_cpu_seconds()
    machine = machine_info()
    # first, while this process is small (a child's ru_maxrss starts at the parent's RSS)
    log(f"streamed fit memory (N={fit_samples}, m=256)")
    memory = bench_memory(fit_samples, 256)
    memory.update(n_samples=fit_samples, m=256)
    rng = np.random.default_rng(20240601)
    limits = None
    if args.threads is not None:
        from threadpoolctl import threadpool_limits
        limits = threadpool_limits(args.threads, user_api="blas")
        machine["blas"] = blas_info()
    machine["clock"] = ("CPU time of this process (time.process_time)" if args.clock == "cpu"
                        else "wall time (time.perf_counter)")
    log(f"GEMM peak ({gemm_size}^2)")
    peak = GemmPeak(gemm_size, rng)
    rows = []
    for m in (256, 1024):
        repeats = args.repeats or (2 if quick or m >= 1024 else 3)
        for dtype in (np.float64, np.float32):
            rows.append(bench_accumulate(m, dtype, n_samples, repeats, peak, rng, log))
    if limits is not None:
        limits.restore_original_limits()
    if busy_start is not None:
        others = (machine_busy_seconds() - busy_start) - (own_cpu_seconds() - own_start)
        capacity = (time.perf_counter() - t_start) * (os.cpu_count() or 1)
        machine["others_share"] = max(others, 0.0) / capacity
    text = report(machine, peak, rows, memory, command, quick, (load_before, loadavg()),
                  time.perf_counter() - t_start)
    print(text)
    out = args.out or (None if quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        log(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
