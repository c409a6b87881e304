"""Speed checks of the engine redesign (issue 10, "Must show"), before and after in one run.

    .venv/bin/python benchmarks/bench_engine.py --baseline f78c18d          # full run
    .venv/bin/python benchmarks/bench_engine.py --quick --baseline f78c18d  # smoke run, prints
    .venv/bin/python benchmarks/bench_engine.py --self-test                 # reference checks

Every library measurement runs in a fresh subprocess whose ``PYTHONPATH`` is the ``src`` of one
side: with ``--baseline REV`` a temporary ``git worktree`` of REV ("before") and this checkout
("after"), interleaved (before, after, before, after, ...); without it, this checkout alone.
The library is reached only through its public estimator API (``LowRankGPRegressor``: ``fit``,
``log_marginal_likelihood(theta, eval_gradient=True)``, ``feature_map_`` with the Fourier
attributes ``omega``, ``frequency_weights``, ``offset``; ``optimization_result_`` when
present), so the same script measures the code before and after the redesign. Each subprocess
gets ``OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = MKL_NUM_THREADS = --threads`` (default 1).
Reported: medians over all timings of a side, and the ratio after / before.

Measurements
------------
1. **Theta-dependent map (RFF) against a plain NumPy reference.** 2-D inputs uniform on
   [-3, 3]^2, y = sin(3 x1) cos(2 x2) + 0.1 eps (seed 0), ARD Gaussian kernel
   s exp(-1/2 sum_j (x_j - z_j)^2 / l_j^2) started at l = (1, 1), s = 1, noise 0.1, m = 256
   random Fourier features (random_state 0), N = ``--n`` (200,000; 20,000 with ``--quick``).
   The reference (:func:`reference_objective`) uses exactly the fitted library map's
   frequencies, weights and offset, so both compute the same objective; it is checked against
   finite differences and against the library (relative 1e-8, on a 2,000-row subsample at
   three thetas) in every subprocess before anything is timed.
   (a) one likelihood-and-gradient evaluation on the training data:
       ``model.log_marginal_likelihood(theta, eval_gradient=True)`` of a model fitted with
       ``optimize=False`` against the reference, alternated, after one untimed call each;
   (b) learning: ``fit`` (L-BFGS-B inside) against L-BFGS-B on the reference from the same
       start, in the same box, with scipy's defaults and ``maxiter=500`` (the library's);
       times and numbers of evaluations. The library's fit also builds the map, conditions
       and checks the result; "learning only" subtracts the time of ``fit(optimize=False)``.
2. **GLF fixed-basis learning steps.** 2-D inputs uniform on [0, 1]^2, y = sin(6 x1)
   cos(4 x2) + 0.1 eps, isotropic Gaussian kernel, length scale in [0.1, 0.4], variance in
   [0.1, 10], noise variance in [1e-4, 1] (bench_glf.py's box), GLF with 32 x 32 nodes
   (s = 1024 real columns), N = ``--glf-n``. Timed: ``fit(optimize=False)`` (build, the
   streaming pass, conditioning); 50 ``log_marginal_likelihood(theta, eval_gradient=True)``
   calls at 50 thetas drawn uniformly in the box (seed 2); ``fit(optimize=True)`` and its
   number of evaluations. The learning step is (fit(optimize=True) - fit(optimize=False)) /
   evaluations: the pass is made once in both fits, so this is the O(s^3) per-step cost
   (bench_glf.py's 50 evaluations after the pass). Before the redesign the public
   ``log_marginal_likelihood(theta)`` rebuilds the objective, i.e. redoes the streaming pass,
   on every call, so the 50 calls measure 50 passes plus 50 steps there.
3. **Gram accumulation.** ``fit(optimize=False)`` with "rff", m = 512, the data of 1 at
   N = ``--n``: the streaming pass (features, Psi^T Psi, Psi^T y) plus building the map,
   conditioning (O(m^3)) and the estimator's checks (64 probe predictions). Its
   GEMM-equivalent rate is 2 N m^2 / time (the flops of the full product Psi^T Psi; the
   engine's syrk computes one triangle, so the flops done are half and a share above 100 % is
   possible), over the best rate of a square n x n float64 ``A @ B`` (2 n^3 flops; n = 4096,
   2048 with ``--quick``) measured in the same subprocesses, interleaved with the fits; the
   peak is the best over the whole run (as in bench_accumulate.py).

Timings on a shared machine are noisy: the load average is recorded before and after each
subprocess. Writes ``benchmarks/results/engine.md`` and ``engine.json`` (``--out``; a quick run
only prints unless ``--out`` is given). No pickle: the subprocesses return JSON.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg
import scipy.optimize

from machine import gemm_rate  # the benchmarks' directory is the script's
from scalegp.estimators.configuration import make_approximation

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: Columns of the RFF map (measurement 1) and of the Gram measurement (3).
RFF_COMPONENTS = 256
GRAM_COMPONENTS = 512
#: GLF nodes per dimension (32 x 32 = 1024 real columns) and the evaluations of measurement 2.
GLF_NODES = [32, 32]
GLF_EVALUATIONS = 50
#: Starting point and box of measurement 1 (ARD Gaussian kernel; the library's defaults).
RFF_START = dict(length_scale=[1.0, 1.0], variance=1.0, noise_variance=0.1)
RFF_LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
RFF_VARIANCE_BOUNDS = (1e-5, 1e5)
RFF_NOISE_BOUNDS = (1e-6, 1e5)
#: Box of measurement 2 (bench_glf.py's).
GLF_LENGTH_SCALE_BOUNDS = (0.1, 0.4)
GLF_VARIANCE_BOUNDS = (0.1, 10.0)
GLF_NOISE_BOUNDS = (1e-4, 1.0)
#: L-BFGS-B iteration limit (scalegp.inference.optimize.maximize_likelihood's).
MAX_ITER = 500
#: Agreement required between the reference and the library (relative).
AGREEMENT = 1e-8
#: Rows of the subsample on which the reference is checked against the library.
CHECK_ROWS = 2_000
#: log-parameters [log l1, log l2, log s, log s2] at which the reference is checked.
CHECK_THETAS = np.log([[1.0, 1.0, 1.0, 0.1], [0.5, 2.0, 1.5, 0.05], [2.0, 0.7, 0.3, 0.01]])
#: Rows per block of the reference's second sweep over the stored features.
REFERENCE_BLOCK = 8192


# =========================================================================== data
def rff_data(n_samples: int, seed: int = 0):
    """x uniform on [-3, 3]^2, y = sin(3 x1) cos(2 x2) + 0.1 eps."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3.0, 3.0, size=(n_samples, 2))
    y = np.sin(3 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(n_samples)
    return X, y


def glf_data(n_samples: int, seed: int = 0):
    """x uniform on [0, 1]^2, y = sin(6 x1) cos(4 x2) + 0.1 eps."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 1.0, size=(n_samples, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(n_samples)
    return X, y


def rff_start_theta() -> np.ndarray:
    """[log l1, log l2, log s, log s2] of the starting point."""
    return np.log([*RFF_START["length_scale"], RFF_START["variance"],
                   RFF_START["noise_variance"]])


def rff_log_bounds(n_dims: int) -> np.ndarray:
    """The learning box in log-parameters, rows in theta's order."""
    rows = [RFF_LENGTH_SCALE_BOUNDS] * n_dims + [RFF_VARIANCE_BOUNDS, RFF_NOISE_BOUNDS]
    return np.log(np.array(rows, dtype=float))


# =========================================================================== reference
def reference_features(omega, weights, offset, X, theta) -> np.ndarray:
    """Psi = [sqrt(s a_l) cos(z_l), sqrt(s a_l) sin(z_l)]_l, z = omega^T (x - c) / l (N x 2S).

    The map of ``scalegp.features.random_fourier`` (even m: pairs only, no signs).
    """
    n_dims = X.shape[1]
    U = (X - offset) / np.exp(theta[:n_dims])
    Z = U @ omega.T
    S = omega.shape[0]
    amplitude = np.sqrt(np.exp(theta[n_dims]) * weights)
    Psi = np.empty((X.shape[0], 2 * S))
    np.cos(Z, out=Psi[:, :S])
    np.sin(Z, out=Psi[:, S:])
    Psi *= np.concatenate([amplitude, amplitude])
    return Psi


def reference_objective(omega, weights, offset, X, y, theta):
    """log p(y | theta) and its gradient for RFF in weight space, features computed once.

    theta = [log l_1 .. log l_d, log s, log s2] (ARD Gaussian kernel). With Psi (N x m,
    m = 2S, from :func:`reference_features`), G = Psi^T Psi, b = Psi^T y,
    M = G + s2 I = L L^T, beta = M^{-1} b:

        log p = -1/2 [ (y^T y - b^T beta) / s2 + (n - m) log s2 + log det M + n log 2 pi ].

    Gradient. K = Psi Psi^T + s2 I, alpha = K^{-1} y = (y - Psi beta) / s2 and
    Psi^T alpha = beta, Psi^T K^{-1} = M^{-1} Psi^T (Woodbury). For a parameter with
    dK = dPsi Psi^T + Psi dPsi^T, C = Psi^T dPsi and db = dPsi^T y,

        d log p = 1/2 alpha^T dK alpha - 1/2 tr(K^{-1} dK)
                = beta^T (db - C^T beta) / s2 - tr(M^{-1} C)
                = alpha^T dPsi beta - sum(W o dPsi),      W = Psi M^{-1}.

    Length scales: with u = (x - c) / l, dz_l / d log l_j = -u_j omega_lj, so
    dPsi_j = diag(u_j) R diag(omega~_j), R = [Psi_sin, -Psi_cos] (the cos and sin blocks
    swapped, one negated) and omega~_j = [omega_:j; omega_:j] (the frequency of each column):

        d log p / d log l_j = sum_n u_nj [ alpha_n (R (omega~_j o beta))_n
                                           - ((W o R) omega~_j)_n ].

    Variance: dPsi = Psi / 2, so b - G beta = s2 beta gives
    d log p / d log s = 1/2 [ beta^T beta - m + s2 tr(M^{-1}) ].
    Noise: dK = s2 I, tr(K^{-1}) = (n - m) / s2 + tr(M^{-1}), so
    d log p / d log s2 = 1/2 [ |y - Psi beta|^2 / s2 - (n - m) - s2 tr(M^{-1}) ].

    Cost: the features once (cos and sin of N x S phases), G by syrk (N m^2 flops), then one
    sweep over the stored Psi in blocks of rows for W (2 N m^2 flops) and O(N m d) more.
    """
    theta = np.asarray(theta, dtype=float)
    n, n_dims = X.shape
    if theta.shape != (n_dims + 2,):
        raise ValueError(f"theta must have {n_dims + 2} entries (ARD), got {theta.shape}")
    s2 = math.exp(theta[n_dims + 1])
    Psi = reference_features(omega, weights, offset, X, theta)
    m, S = Psi.shape[1], omega.shape[0]
    G = Psi.T @ Psi
    b = Psi.T @ y
    M = G + s2 * np.eye(m)
    L = scipy.linalg.cholesky(M, lower=True)
    beta = scipy.linalg.cho_solve((L, True), b)
    M_inverse = scipy.linalg.cho_solve((L, True), np.eye(m))
    value = -0.5 * ((y @ y - b @ beta) / s2 + (n - m) * math.log(s2)
                    + 2 * np.sum(np.log(np.diag(L))) + n * math.log(2 * math.pi))
    omega_beta = omega * beta[:S, None], omega * beta[S:, None]
    length_grad = np.zeros(n_dims)
    residual2 = 0.0
    for start in range(0, n, REFERENCE_BLOCK):
        rows = slice(start, start + REFERENCE_BLOCK)
        P = Psi[rows]
        cos, sin = P[:, :S], P[:, S:]
        U = (X[rows] - offset) / np.exp(theta[:n_dims])
        residual = y[rows] - P @ beta
        residual2 += residual @ residual
        R_beta = sin @ omega_beta[0] - cos @ omega_beta[1]          # R (omega~ o beta)
        W = P @ M_inverse
        WR_omega = (W[:, :S] * sin) @ omega - (W[:, S:] * cos) @ omega  # (W o R) omega~
        length_grad += np.einsum("nj,nj->j", U, (residual / s2)[:, None] * R_beta - WR_omega)
    trace_inverse = np.trace(M_inverse)
    variance_grad = 0.5 * (beta @ beta - m + s2 * trace_inverse)
    noise_grad = 0.5 * (residual2 / s2 - (n - m) - s2 * trace_inverse)
    return float(value), np.concatenate([length_grad, [variance_grad, noise_grad]])


def reference_learning(omega, weights, offset, X, y, theta0, bounds):
    """L-BFGS-B on -log p from theta0 in bounds, as ``scalegp.inference.optimize.maximize_likelihood``
    (scipy defaults, maxiter 500, +inf and a zero gradient at a non-finite value)."""
    def negative(theta):
        value, gradient = reference_objective(omega, weights, offset, X, y, theta)
        if not np.isfinite(value):
            return np.inf, np.zeros(theta.size)
        return -value, -gradient

    result = scipy.optimize.minimize(negative, np.clip(theta0, bounds[:, 0], bounds[:, 1]),
                                     jac=True, method="L-BFGS-B", bounds=bounds,
                                     options={"maxiter": MAX_ITER})
    return result


def finite_difference_check(step: float = 1e-5) -> float:
    """Max relative error of the reference gradient against central differences (small
    problem, frequencies drawn here: no library involved)."""
    rng = np.random.default_rng(5)
    X, y = rff_data(400, seed=5)
    omega = rng.standard_normal((24, 2))
    weights, offset = np.full(24, 1 / 24), np.array([0.1, -0.2])
    worst = 0.0
    for theta in CHECK_THETAS:
        _, gradient = reference_objective(omega, weights, offset, X, y, theta)
        numeric = np.empty_like(gradient)
        for i in range(theta.size):
            e = np.zeros_like(theta)
            e[i] = step
            numeric[i] = (reference_objective(omega, weights, offset, X, y, theta + e)[0]
                          - reference_objective(omega, weights, offset, X, y, theta - e)[0]
                          ) / (2 * step)
        worst = max(worst, float(np.max(np.abs(numeric - gradient))
                                 / max(np.max(np.abs(gradient)), 1.0)))
    return worst


# =========================================================================== library side
def quiet_fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.fit(X, y)


def rff_model(n_components: int, optimize: bool):
    import scalegp
    kernel = scalegp.kernels.Gaussian(length_scale=RFF_START["length_scale"],
                                      variance=RFF_START["variance"],
                                      length_scale_bounds=RFF_LENGTH_SCALE_BOUNDS,
                                      variance_bounds=RFF_VARIANCE_BOUNDS)
    return scalegp.LowRankGPRegressor(kernel=kernel,
                                      noise_variance=RFF_START["noise_variance"],
                                      noise_variance_bounds=RFF_NOISE_BOUNDS, optimize=optimize,
                                      random_state=0, approximation=make_approximation("rff", n_components=n_components))


def map_arrays(model, n_components=RFF_COMPONENTS):
    """(omega, frequency_weights, offset) of a fitted RFF model, checked to be a plain map."""
    fmap = model.feature_map_
    for name in ("frequency_signs", "phase_shifts"):
        if getattr(fmap, name, None) is not None:
            raise RuntimeError(f"the reference needs an RFF map without {name}")
    omega = np.asarray(fmap.omega, dtype=float)
    if 2 * omega.shape[0] != n_components:
        raise RuntimeError(f"expected {n_components // 2} frequencies (cos/sin pairs), got "
                           f"{omega.shape[0]}")
    return (omega, np.asarray(fmap.frequency_weights, dtype=float),
            np.asarray(fmap.offset, dtype=float))


def relative_differences(reference, library):
    """(|dv| / |v|, max|dg| / max|g|) between (value, gradient) pairs."""
    (v_ref, g_ref), (v_lib, g_lib) = reference, library
    g_lib = np.asarray(g_lib, dtype=float)
    return (abs(v_ref - v_lib) / abs(v_lib),
            float(np.max(np.abs(g_ref - g_lib)) / np.max(np.abs(g_lib))))


def library_check(X, y) -> list:
    """The reference against the library on the first CHECK_ROWS rows; raises beyond 1e-8."""
    Xs, ys = X[:CHECK_ROWS], y[:CHECK_ROWS]
    model = quiet_fit(rff_model(RFF_COMPONENTS, optimize=False), Xs, ys)
    arrays = map_arrays(model)
    rows = []
    for theta in CHECK_THETAS:
        library = model.log_marginal_likelihood(theta, eval_gradient=True)
        reference = reference_objective(*arrays, Xs, ys, theta)
        value_diff, grad_diff = relative_differences(reference, library)
        rows.append(dict(theta=theta.tolist(), value=float(library[0]), value_diff=value_diff,
                         grad_diff=grad_diff))
        if value_diff > AGREEMENT or grad_diff > AGREEMENT:
            raise AssertionError(
                f"reference and library disagree at theta = {theta}: relative differences "
                f"{value_diff:.2e} (value), {grad_diff:.2e} (gradient) > {AGREEMENT}")
    return rows


def timed(function, *args):
    start = time.perf_counter()
    out = function(*args)
    return time.perf_counter() - start, out


def n_evaluations(model):
    """Evaluations of the fit's optimizer (None where the estimator does not say)."""
    result = getattr(model, "optimization_result_", None)
    count = getattr(result, "n_evaluations", None)
    return None if count is None else int(count)


def learned_theta(model):
    """[log l..., log s, log s2] of a fitted model (None where the kernel does not say)."""
    try:
        kernel = model.kernel_
        return [*np.log(np.atleast_1d(kernel.length_scale)).tolist(),
                math.log(kernel.variance), math.log(model.noise_variance_)]
    except (AttributeError, TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- worker tasks
def task_check(config) -> dict:
    """The reference's finite-difference check and its agreement with the library."""
    X, y = rff_data(config["n"])
    out = dict(fd_error=finite_difference_check(), agreement=library_check(X, y))
    try:
        from threadpoolctl import threadpool_info
        out["blas"] = [f"{i.get('internal_api')} {i.get('version')}, "
                       f"{i.get('num_threads')} threads, architecture {i.get('architecture')}"
                       for i in threadpool_info()]
    except ImportError:
        out["blas"] = ["threadpoolctl not installed"]
    return out


def task_rff_eval(config) -> dict:
    """(1a) one evaluation, library against reference, alternated, after a warm-up each."""
    X, y = rff_data(config["n"])
    library_check(X, y)
    fit_seconds, model = timed(quiet_fit, rff_model(RFF_COMPONENTS, optimize=False), X, y)
    arrays = map_arrays(model)
    theta = rff_start_theta()
    library = model.log_marginal_likelihood(theta, eval_gradient=True)
    reference = reference_objective(*arrays, X, y, theta)
    value_diff, grad_diff = relative_differences(reference, library)
    library_times, reference_times = [], []
    for _ in range(config["evaluations"]):
        library_times.append(timed(model.log_marginal_likelihood, theta, True)[0])
        reference_times.append(timed(reference_objective, *arrays, X, y, theta)[0])
    return dict(fit_seconds=fit_seconds, library=library_times, reference=reference_times,
                value=float(library[0]), value_diff=value_diff, grad_diff=grad_diff)


def task_rff_learn(config) -> dict:
    """(1b) learning: the library's fit against L-BFGS-B on the reference."""
    X, y = rff_data(config["n"])
    library_check(X, y)
    plain_seconds, plain = timed(quiet_fit, rff_model(RFF_COMPONENTS, optimize=False), X, y)
    fit_seconds, model = timed(quiet_fit, rff_model(RFF_COMPONENTS, optimize=True), X, y)
    arrays = map_arrays(model)
    if not all(np.array_equal(a, b) for a, b in zip(arrays, map_arrays(plain))):
        raise AssertionError("the two fits drew different frequencies")
    theta0, bounds = rff_start_theta(), rff_log_bounds(X.shape[1])
    reference_seconds, result = timed(reference_learning, *arrays, X, y, theta0, bounds)
    return dict(plain_fit_seconds=plain_seconds, fit_seconds=fit_seconds,
                evaluations=n_evaluations(model),
                log_marginal_likelihood=float(model.log_marginal_likelihood()),
                theta=learned_theta(model), reference_seconds=reference_seconds,
                reference_evaluations=int(result.nfev),
                reference_log_marginal_likelihood=float(-result.fun),
                reference_theta=result.x.tolist(), reference_message=str(result.message))


def glf_model(optimize: bool):
    import scalegp
    kernel = scalegp.kernels.Gaussian(length_scale=0.2,
                                      length_scale_bounds=GLF_LENGTH_SCALE_BOUNDS,
                                      variance_bounds=GLF_VARIANCE_BOUNDS)
    return scalegp.LowRankGPRegressor(kernel=kernel, noise_variance=0.1,
                                      noise_variance_bounds=GLF_NOISE_BOUNDS, optimize=optimize,
                                      random_state=0, approximation=make_approximation("glf", options={"n_nodes": GLF_NODES}))


def glf_thetas() -> np.ndarray:
    bounds = np.log([GLF_LENGTH_SCALE_BOUNDS, GLF_VARIANCE_BOUNDS, GLF_NOISE_BOUNDS])
    return np.random.default_rng(2).uniform(bounds[:, 0], bounds[:, 1],
                                            size=(GLF_EVALUATIONS, 3))


def task_glf(config) -> dict:
    """(2) GLF: fit without learning, 50 public evaluations, fit with learning."""
    X, y = glf_data(config["glf_n"])
    quiet_fit(glf_model(optimize=False), X[:500], y[:500])        # warm-up, untimed
    plain_seconds, model = timed(quiet_fit, glf_model(optimize=False), X, y)
    thetas = glf_thetas()
    start = time.perf_counter()
    values = [model.log_marginal_likelihood(theta, eval_gradient=True)[0] for theta in thetas]
    calls_seconds = time.perf_counter() - start
    fit_seconds, learned = timed(quiet_fit, glf_model(optimize=True), X, y)
    s = getattr(model.feature_map_, "n_components", None)
    return dict(n=X.shape[0], s=None if s is None else int(s),
                plain_fit_seconds=plain_seconds, calls_seconds=calls_seconds,
                values_sum=float(np.sum(values)), fit_seconds=fit_seconds,
                evaluations=n_evaluations(learned),
                log_marginal_likelihood=float(learned.log_marginal_likelihood()))


def task_gram(config) -> dict:
    """(3) the streaming fit at fixed hyperparameters, rff, m = 512, interleaved with GEMM."""
    X, y = rff_data(config["n"])
    quiet_fit(rff_model(GRAM_COMPONENTS, optimize=False), X[:5000], y[:5000])  # warm-up
    fits, peaks = [], []
    for _ in range(config["gram_inner"]):
        peaks.append(gemm_rate(config["gemm_n"]))
        fits.append(timed(quiet_fit, rff_model(GRAM_COMPONENTS, optimize=False), X, y)[0])
    peaks.append(gemm_rate(config["gemm_n"]))
    return dict(n=X.shape[0], m=GRAM_COMPONENTS, fits=fits, peaks=peaks)


TASKS = {"check": task_check, "rff_eval": task_rff_eval, "rff_learn": task_rff_learn,
         "glf": task_glf, "gram": task_gram}


def worker(task: str, config: dict) -> None:
    import scalegp
    source = Path(scalegp.__file__).resolve().parents[1]
    if source != Path(config["src"]).resolve():
        raise RuntimeError(f"scalegp imported from {source}, expected {config['src']}")
    out = TASKS[task](config)
    out["scalegp"] = str(source)
    print("RESULT " + json.dumps(out))


# =========================================================================== parent
def git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def run_worker(task, side, config, threads) -> dict:
    env = dict(os.environ, PYTHONPATH=str(side["src"]))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--worker", task, "--config",
                           json.dumps({**config, "src": str(side["src"])})],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise RuntimeError(f"worker {task} ({side['name']}) failed")
    line = [row for row in done.stdout.splitlines() if row.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT "):])
    out.update(side=side["name"], load_before=load_before, load_after=os.getloadavg()[0],
               wall_seconds=time.perf_counter() - start)
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def summarize(runs, sides, config) -> dict:
    """Medians per side over every timing of that side (all subprocesses pooled)."""
    by = {side: {task: [r for r in runs[task] if r["side"] == side] for task in runs}
          for side in sides}
    peak = max(p for r in runs["gram"] for p in r["peaks"])
    out = {}
    for side in sides:
        ev, le, gl, gr = (by[side][t] for t in ("rff_eval", "rff_learn", "glf", "gram"))
        library_eval = median([t for r in ev for t in r["library"]])
        reference_eval = median([t for r in ev for t in r["reference"]])
        fit = median([r["fit_seconds"] for r in le])
        plain = median([r["plain_fit_seconds"] for r in le])
        reference_learn = median([r["reference_seconds"] for r in le])
        glf_plain = median([r["plain_fit_seconds"] for r in gl])
        glf_fit = median([r["fit_seconds"] for r in gl])
        glf_evals = median([r["evaluations"] for r in gl])
        gram_fit = median([t for r in gr for t in r["fits"]])
        rate = 2 * config["n"] * GRAM_COMPONENTS**2 / gram_fit / 1e9
        out[side] = dict(
            library_eval=library_eval, reference_eval=reference_eval,
            eval_ratio=reference_eval / library_eval,
            value_diff=max(r["value_diff"] for r in ev), grad_diff=max(r["grad_diff"] for r in ev),
            fit=fit, plain_fit=plain, learning=fit - plain, reference_learn=reference_learn,
            learn_ratio=reference_learn / fit, learning_ratio=reference_learn / (fit - plain),
            evaluations=median([r["evaluations"] for r in le]),
            reference_evaluations=median([r["reference_evaluations"] for r in le]),
            log_p=median([r["log_marginal_likelihood"] for r in le]),
            reference_log_p=median([r["reference_log_marginal_likelihood"] for r in le]),
            glf_plain=glf_plain, glf_calls=median([r["calls_seconds"] for r in gl]),
            glf_fit=glf_fit, glf_evals=glf_evals, glf_step=(glf_fit - glf_plain) / glf_evals,
            glf_log_p=median([r["log_marginal_likelihood"] for r in gl]),
            gram_fit=gram_fit, gram_rate=rate, gram_share=rate / peak, gemm_peak=peak)
    return out


def fmt_ratio(after, before):
    return f"{after / before:.2f}" if before and np.isfinite(before) else "n/a"


def report(args, config, sides, runs, summary, header) -> str:
    names = list(sides)
    lines = ["# Engine redesign: speed checks (issue 10)", "",
             f"Command: `{header['command']}`", "",
             f"Date: {header['date']}; machine: {header['machine']}; load average (1 min) "
             f"before {header['load_before']:.2f}, after {header['load_after']:.2f}, over the "
             f"subprocesses {header['load_min']:.2f} to {header['load_max']:.2f}; numpy "
             f"{np.__version__}, scipy {scipy.__version__}; {args.threads} BLAS thread(s) per "
             "subprocess (OPENBLAS/OMP/MKL_NUM_THREADS).", ""]
    for name in names:
        lines.append(f"- {name}: `{sides[name]['label']}`")
    lines += [f"- BLAS: {b}" for b in header["blas"]]
    lines += ["", "Medians over all timings of a side; subprocesses alternate between the sides "
              f"({config['repeats']} per side and measurement, {config['learn_repeats']} for "
              "learning).", ""]
    if len(names) == 2:
        b, a = (summary[n] for n in names)
        lines += ["## Summary: after / before (below 1: faster after)", "",
                  "| measurement | before | after | after / before |", "|---|---|---|---|",
                  f"| 1a. RFF evaluation, library (s) | {b['library_eval']:.3f} | "
                  f"{a['library_eval']:.3f} | {fmt_ratio(a['library_eval'], b['library_eval'])} |",
                  f"| 1b. RFF learning, library fit (s) | {b['fit']:.2f} | {a['fit']:.2f} | "
                  f"{fmt_ratio(a['fit'], b['fit'])} |",
                  f"| 1a. reference / library, one evaluation | {b['eval_ratio']:.2f} | "
                  f"{a['eval_ratio']:.2f} | |",
                  f"| 1b. reference / library, learning (fit) | {b['learn_ratio']:.2f} | "
                  f"{a['learn_ratio']:.2f} | |",
                  f"| 2. GLF learning step (s) | {b['glf_step']:.4f} | {a['glf_step']:.4f} | "
                  f"{fmt_ratio(a['glf_step'], b['glf_step'])} |",
                  f"| 2. GLF {GLF_EVALUATIONS} public evaluations (s) | {b['glf_calls']:.2f} | "
                  f"{a['glf_calls']:.2f} | {fmt_ratio(a['glf_calls'], b['glf_calls'])} |",
                  f"| 3. Gram: rff fit, m = {GRAM_COMPONENTS} (s) | {b['gram_fit']:.2f} | "
                  f"{a['gram_fit']:.2f} | {fmt_ratio(a['gram_fit'], b['gram_fit'])} |", ""]
    checks = runs["check"]
    check_thetas = ", ".join(str(np.round(np.exp(t), 3).tolist()) for t in CHECK_THETAS)
    lines += ["## Reference checks", "",
              "Reference gradient against central differences (step 1e-5, 400 rows, 24 "
              "frequencies, three thetas): max relative error "
              + ", ".join(f"{r['fd_error']:.1e} ({r['side']})" for r in checks) + ".", "",
              f"Reference against the library on {CHECK_ROWS:,} rows (the library's own "
              f"map), max over the thetas {check_thetas} "
              "(l1, l2, s, s2), relative; required <= 1e-8:", "",
              "| side | value | gradient (max abs diff / max abs) |", "|---|---|---|"]
    for r in checks:
        lines.append(f"| {r['side']} | {max(a['value_diff'] for a in r['agreement']):.1e} | "
                     f"{max(a['grad_diff'] for a in r['agreement']):.1e} |")
    lines += ["", f"## 1. RFF (theta-dependent map) against the NumPy reference, N = "
              f"{config['n']:,}, m = {RFF_COMPONENTS}", "",
              "2-D, x uniform on [-3, 3]^2, y = sin(3 x1) cos(2 x2) + 0.1 eps; ARD Gaussian "
              "kernel (two length scales, variance) and noise: 4 log-parameters, start "
              "l = (1, 1), s = 1, s2 = 0.1. Reference: plain NumPy/scipy weight-space RFF with "
              "analytic gradients, features computed once per evaluation, the library map's "
              "frequencies.", "",
              "### (a) One likelihood-and-gradient evaluation at the start", "",
              "| side | library (s) | reference (s) | reference / library | log p rel. diff | "
              "gradient rel. diff |", "|---|---|---|---|---|---|"]
    for name in names:
        s = summary[name]
        lines.append(f"| {name} | {s['library_eval']:.3f} | {s['reference_eval']:.3f} | "
                     f"**{s['eval_ratio']:.2f}** | {s['value_diff']:.1e} | "
                     f"{s['grad_diff']:.1e} |")
    lines += ["", "### (b) Learning (L-BFGS-B, same start, same box)", "",
              "| side | library fit (s) | fit(optimize=False) (s) | library learning only (s) "
              "| evaluations | log p | reference (s) | evaluations | log p | reference / fit | "
              "reference / learning only |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        s = summary[name]
        lines.append(f"| {name} | {s['fit']:.2f} | {s['plain_fit']:.2f} | {s['learning']:.2f} | "
                     f"{s['evaluations']:.0f} | {s['log_p']:.3f} | {s['reference_learn']:.2f} | "
                     f"{s['reference_evaluations']:.0f} | {s['reference_log_p']:.3f} | "
                     f"**{s['learn_ratio']:.2f}** | {s['learning_ratio']:.2f} |")
    lines += ["", "Target: reference / library >= 1 (the library no slower). The library fit "
              "also builds the map, conditions at the optimum (one more pass) and checks the "
              "result; 'learning only' subtracts the fit(optimize=False) time.", "",
              f"## 2. GLF fixed-basis learning steps, s = {GLF_NODES[0]} x {GLF_NODES[1]}", "",
              "x uniform on [0, 1]^2, y = sin(6 x1) cos(4 x2) + 0.1 eps; isotropic Gaussian, "
              "length scale in [0.1, 0.4], variance in [0.1, 10], noise in [1e-4, 1].", "",
              f"| side | N | s | fit(optimize=False) (s) | {GLF_EVALUATIONS} public evaluations "
              "(s) | fit(optimize=True) (s) | evaluations | learning step (s) | log p |",
              "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        s, r = summary[name], [r for r in runs["glf"] if r["side"] == name][0]
        lines.append(f"| {name} | {r['n']:,} | {r['s']} | {s['glf_plain']:.3f} | "
                     f"{s['glf_calls']:.2f} | {s['glf_fit']:.2f} | {s['glf_evals']:.0f} | "
                     f"**{s['glf_step']:.4f}** | {s['glf_log_p']:.3f} |")
    lines += ["", "Learning step = (fit(optimize=True) - fit(optimize=False)) / evaluations: "
              "both fits make the one streaming pass, so this is the per-step O(s^3) cost. "
              f"The {GLF_EVALUATIONS} public evaluations are "
              "`log_marginal_likelihood(theta, eval_gradient=True)` at "
              f"{GLF_EVALUATIONS} thetas drawn in the box; where that call rebuilds the "
              "objective (before the redesign) each includes a streaming pass.", "",
              f"## 3. Gram accumulation: rff fit(optimize=False), N = {config['n']:,}, "
              f"m = {GRAM_COMPONENTS}", "",
              "| side | fit (s) | rate 2 N m^2 / time (GFLOP/s) | GEMM peak (GFLOP/s) | share |",
              "|---|---|---|---|---|"]
    for name in names:
        s = summary[name]
        lines.append(f"| {name} | {s['gram_fit']:.3f} | {s['gram_rate']:.1f} | "
                     f"{s['gemm_peak']:.1f} | **{s['gram_share']:.0%}** |")
    lines += ["", f"Flops counted: 2 N m^2 = {2 * config['n'] * GRAM_COMPONENTS**2:.3g} (the "
              "full product Psi^T Psi; syrk does half). GEMM peak: best rate of a "
              f"{config['gemm_n']} x {config['gemm_n']} float64 `A @ B` (2 n^3 flops) over the "
              "whole run, measured in the same subprocesses, interleaved with the fits. The "
              "fit includes the features, Psi^T y, the m^3 conditioning and the estimator's "
              "checks, not only the Gram.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="N = 20,000, GLF N = 5,000, fewer repeats; prints only")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also measure revision REV (a temporary git worktree), "
                             "interleaved with this checkout")
    parser.add_argument("--n", type=int, default=None,
                        help="rows of measurements 1 and 3 (default 200,000)")
    parser.add_argument("--glf-n", type=int, default=None,
                        help="rows of measurement 2 (default 10,000)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="subprocesses per side for 1a, 2, 3 (default 3, quick 2)")
    parser.add_argument("--learn-repeats", type=int, default=1,
                        help="subprocesses per side for 1b (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="markdown output (JSON next to it); default results/engine.md "
                             "for a full run, none for --quick")
    parser.add_argument("--self-test", action="store_true",
                        help="check the reference against finite differences and the "
                             "library of this checkout, then exit")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, json.loads(args.config))
        return
    if args.self_test:
        side = dict(name="current", src=ROOT / "src", label="")
        out = run_worker("check", side, dict(n=CHECK_ROWS), args.threads)
        print(f"finite differences: max relative error {out['fd_error']:.2e}")
        for row in out["agreement"]:
            print(f"theta {np.round(row['theta'], 3)}: log p {row['value']:.6f}, relative "
                  f"differences {row['value_diff']:.1e} (value), {row['grad_diff']:.1e} "
                  "(gradient)")
        if out["fd_error"] > 1e-6:
            raise SystemExit("the reference gradient disagrees with finite differences")
        print("self-test passed")
        return

    quick = args.quick
    config = dict(n=args.n or (20_000 if quick else 200_000),
                  glf_n=args.glf_n or (5_000 if quick else 10_000),
                  evaluations=3 if quick else 5, gram_inner=2,
                  gemm_n=2048 if quick else 4096,
                  repeats=args.repeats or (2 if quick else 3), learn_repeats=args.learn_repeats)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python",
                                                           "benchmarks/bench_engine.py",
                                                           *sys.argv[1:]])
    head = git("rev-parse", "--short", "HEAD")
    dirty = " + uncommitted changes" if git("status", "--porcelain", "--", "src") else ""
    sides = {}
    tmp = None
    load_before = os.getloadavg()[0]
    try:
        if args.baseline:
            revision = git("rev-parse", "--short", args.baseline + "^{commit}")
            tmp = Path(tempfile.mkdtemp(prefix="bench-engine-"))
            git("worktree", "add", "--detach", str(tmp / "baseline"), revision)
            sides["before"] = dict(name="before", src=tmp / "baseline" / "src",
                                   label=f"{revision} (--baseline {args.baseline}), temporary "
                                         "worktree")
            sides["after"] = dict(name="after", src=ROOT / "src",
                                  label=f"{head}{dirty}, this checkout")
        else:
            sides["current"] = dict(name="current", src=ROOT / "src",
                                    label=f"{head}{dirty}, this checkout")
        plan = [("check", 1), ("glf", config["repeats"]), ("gram", config["repeats"]),
                ("rff_eval", config["repeats"]), ("rff_learn", config["learn_repeats"])]
        runs = {task: [] for task, _ in plan}
        for task, repeats in plan:
            for repeat in range(repeats):
                for side in sides.values():
                    out = run_worker(task, side, config, args.threads)
                    runs[task].append(out)
                    print(f"{task} [{side['name']} {repeat + 1}/{repeats}]: "
                          f"{out['wall_seconds']:.1f} s wall, load {out['load_after']:.2f}",
                          flush=True)
    finally:
        if tmp is not None:
            try:
                git("worktree", "remove", "--force", str(tmp / "baseline"))
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    loads = [r[k] for rs in runs.values() for r in rs for k in ("load_before", "load_after")]
    header = dict(command=command, date=date,
                  machine=f"{platform.processor() or platform.machine()}, "
                          f"{os.cpu_count()} CPUs",
                  load_before=load_before, load_after=os.getloadavg()[0],
                  load_min=min(loads), load_max=max(loads), blas=runs["check"][0]["blas"])
    summary = summarize(runs, list(sides), config)
    text = report(args, config, sides, runs, summary, header)
    print(text)
    out = args.out or (None if quick else RESULTS / "engine.md")
    if out is not None:
        out.write_text(text)
        sides_json = {k: {**v, "src": str(v["src"])} for k, v in sides.items()}
        out.with_suffix(".json").write_text(json.dumps(
            dict(header=header, config=config, sides=sides_json, summary=summary, runs=runs),
            indent=1) + "\n")
        print(f"wrote {out} and {out.with_suffix('.json')}")


if __name__ == "__main__":
    main()
