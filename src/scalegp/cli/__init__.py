"""The ``scalegp`` command line: fit, predict, evaluate, list, demo, experiment.

Exit codes: 0 on success; 1 when the computation ran but its result is not finite (a fit
or prediction that overflowed, :class:`~scalegp.errors.NonFiniteResultError`; nothing is
written); 2 for every other error, printed as one line on stderr (``--debug`` shows the
traceback); 130 when interrupted. Warnings (e.g. the fit diagnostics: optimizer not
converged, worse than a noise-only model) are printed as ``scalegp COMMAND: warning: ...``
lines, each text once. Progress bars (tqdm) appear on long work when stderr is a terminal,
unless ``--quiet``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np

from .. import experiments, features, kernels
from .._version import __version__
from ..local import centered as local
from . import demo as demo_module
from .._output import (CSV_SUFFIXES, MODEL_SUFFIXES, PNG_SUFFIXES, check_output_dir,
                       check_output_path)
from ..errors import NonFiniteResultError
from .._limits import MAX_GIBBS_SWEEPS, MAX_RESTARTS, MAX_THETA1_ATOMS
from .._memory import peak_resident_bytes
from ..engine.noise import power_of_two_scale
from ..parallel import resolve_n_jobs
from ..data.readers import HEADER_MODES, HEADER_RULE, TableError, open_reader, select_columns
from ..data.sources import PassReporter, checked_blocks, gather_rows, open_source, to_arrays
from ..data.tables import write_csv_blocks, write_csv_rows

EXIT_NON_FINITE = 1
EXIT_USAGE = 2
#: How predict finds the model's input columns in its table (the help text of predict).
COLUMN_RULE = ("The model's input columns are found by name when the model and the table both "
               "have column names (other columns, e.g. the target, are ignored; a missing one "
               "is an error), otherwise by position (the table must have exactly the model's "
               "number of columns). With --header auto, a numeric first line that holds the "
               "model's (numeric) column names is read as the header.")
#: --dtype auto picks float32 when the fit's Gram work N m^2 is at least this (a float64 fit
#: of 10 s or more on one core, where float32's 1.5-3.7x speed-up pays) ...
FLOAT32_MIN_WORK = 2e10
#: ... and the noise variance (of the normalized target) cannot fall below this: the float32
#: Gram's error reaches the solution divided by s2, and the log-likelihood error grew from
#: 0.4 (s2 = 1e-2) to 7, 150 and 3e7 (s2 = 1e-3, 1e-4, 1e-5) at N = 2e4
#: (benchmarks/results/float32-noise.md; docs/float32.md).
FLOAT32_MIN_NOISE_VARIANCE = 1e-2
DTYPE_RULE = ("auto (default): float32 when N m^2 >= 2e10 (N rows, m = --n-components) and "
              "the noise variance cannot fall below 1e-2 (the lower end of "
              "--noise-variance-bounds, or --noise-variance with --no-optimize), for a global "
              "model with --solver cholesky; float64 otherwise (docs/float32.md). float32 "
              "computes the features and each chunk's Gram in float32, sums chunks and "
              "factorizes in float64.")
#: How every output path is treated (the help text of --out).
OUT_RULES = ("Only a regular file is replaced (atomically, keeping its permission bits) or a "
             "missing one created; a folder, device, FIFO, socket, symbolic link or read-only "
             "file is refused before any work, and so is an output that is an input file.")


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2."""


# --------------------------------------------------------------------------- argument types
def _int_at_least(minimum: int):
    """An argparse type: an integer >= minimum."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value
    return parse


def _thread_count(text: str) -> int:
    """An argparse type: n_jobs, a nonzero integer (-1: every core)."""
    try:
        return resolve_n_jobs(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a nonzero integer (-1: every core), got {text!r}") from None


def _positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _open_fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(
            f"must lie strictly between 0 and 1 (a share of the rows), got {text!r}")
    return value


# --------------------------------------------------------------------------- helpers
def _parse_options(pairs) -> dict:
    """``--option key=value`` pairs; values are parsed as JSON when possible."""
    options = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise CommandError(f"--option must look like key=value, got {pair!r}")
        key, text = pair.split("=", 1)
        try:
            options[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            options[key.strip()] = text
    return options


def _log(args, message: str) -> None:
    if not args.quiet:
        print(message, file=sys.stderr)


class _PassBars:
    """Progress of streaming passes as tqdm bars: ``start_pass(name, total)`` opens a bar
    named after the pass (rows done, rows per second and, with a known total, time left),
    and ``self(rows_done)`` advances it (:class:`scalegp.data.sources.PassReporter`)."""

    def __init__(self):
        self.bar = None

    def start_pass(self, name: str, total) -> None:
        from tqdm import tqdm
        self.close()
        self.bar = tqdm(total=total, desc=name, unit="rows", unit_scale=True,
                        file=sys.stderr, leave=False)

    def __call__(self, rows_done: int) -> None:
        self.bar.update(rows_done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@contextmanager
def _progress(args):
    """A :class:`_PassBars`, or None when quiet or stderr is not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        yield None
        return
    bars = _PassBars()
    try:
        yield bars
    finally:
        bars.close()


@contextmanager
def _warnings_as_lines(args):
    """Print every warning raised inside as one ``scalegp COMMAND: warning: TEXT`` line,
    each distinct text once."""
    seen = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        if text not in seen:
            seen.add(text)
            print(f"scalegp {args.command}: warning: {text}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def _describe_header(reader) -> str:
    if reader.has_header:
        return f"columns {', '.join(reader.columns)}"
    return ("no header row (the first line is data: all its cells are numbers; pass --header "
            "yes if it holds column names)")


def _training_source(args, progress, dtype=None):
    """The training file as a streaming source, after its summary pass (which checks every
    row by the rules of :mod:`scalegp.data.sources` and counts the dropped ones)."""
    source = open_source(args.data, args.target,
                         noise_variance=getattr(args, "noise_variance_column", None),
                         header=args.header, drop_missing=args.drop_missing, dtype=dtype)
    if not source.reader.has_header:       # the rule decided: say how the first line was read
        _log(args, f"{args.data}: {_describe_header(source.reader)}")
    summary = (source if progress is None else PassReporter(source, progress)).summary()
    if source.n_dropped:
        _log(args, f"dropped {source.n_dropped} row(s) with missing values")
    if summary.n_samples < 2:
        raise CommandError(f"{args.data}: need at least 2 complete rows, got "
                           f"{summary.n_samples}")
    return source


def _start(given, default: float, bounds, flag: str, bounds_flag: str):
    """The starting value(s) of one hyperparameter: ``given`` (each checked inside the
    bounds), else ``default`` when inside them, else their geometric mean."""
    lower, upper = bounds
    if not 0 < lower < upper:
        return default if given is None else given     # the kernel reports the bounds
    if given is None:
        return default if lower <= default <= upper else math.sqrt(lower * upper)
    outside = [value for value in np.atleast_1d(given) if not lower <= value <= upper]
    if outside:
        raise CommandError(
            f"{flag} {outside[0]:g} lies outside {bounds_flag} [{lower:g}, {upper:g}]; give a "
            f"start inside the bounds, or omit {flag} (the default start is then inside them)"
        )
    return given


def _length_scale_start(args, n_dims: int):
    given = args.length_scale
    if given is not None and len(given) > 1 and not args.ard:
        raise CommandError(f"--length-scale got {len(given)} values: give one, or one per "
                           f"input ({n_dims}) with --ard")
    if given is not None and len(given) not in (1, n_dims):
        raise CommandError(f"--length-scale got {len(given)} values for {n_dims} input(s): "
                           "give one, or one per input with --ard")
    given = None if given is None else np.asarray(given, dtype=float)
    start = _start(given, 1.0, args.length_scale_bounds, "--length-scale",
                   "--length-scale-bounds")
    start = np.broadcast_to(start, (n_dims,)).copy() if args.ard else float(np.ravel(start)[0])
    return start


def _noise_variance_start(args) -> float:
    return _start(args.noise_variance, 0.1, args.noise_variance_bounds, "--noise-variance",
                  "--noise-variance-bounds")


def _kernel_from_args(args, n_dims: int):
    variance = _start(args.variance, 1.0, args.variance_bounds, "--variance",
                      "--variance-bounds")
    return kernels.get(args.kernel, length_scale=_length_scale_start(args, n_dims),
                       variance=variance,
                       length_scale_bounds=tuple(args.length_scale_bounds),
                       variance_bounds=tuple(args.variance_bounds))


def _approximation_name(text: str) -> str:
    """The registered name of an approximation (case-insensitive), or "exact"."""
    return "exact" if text.lower() == "exact" else features.get(text).name


def _dtype(args, n_samples: int) -> str:
    """``--dtype``, with "auto" resolved by :data:`DTYPE_RULE` (and said in the log)."""
    if args.dtype != "auto":
        return args.dtype
    lowest = (_noise_variance_start(args) if args.no_optimize
              else args.noise_variance_bounds[0])
    work = float(n_samples) * args.n_components**2
    single = (work >= FLOAT32_MIN_WORK and lowest >= FLOAT32_MIN_NOISE_VARIANCE
              and getattr(args, "solver", "cholesky") == "cholesky"
              and getattr(args, "local", None) is None)
    _log(args, f"--dtype auto: {'float32' if single else 'float64'} (N m^2 = {work:.2g}, "
               f"float32 from {FLOAT32_MIN_WORK:.0g}; smallest noise variance {lowest:.2g}, "
               f"float32 from {FLOAT32_MIN_NOISE_VARIANCE:g}; docs/float32.md)")
    return "float32" if single else "float64"


def _make_estimator(args, n_dims: int, n_samples: int):
    from ..estimators.exact import ExactGPRegressor
    from ..estimators.lowrank import LowRankGPRegressor
    kernel = _kernel_from_args(args, n_dims)
    common = dict(kernel=kernel, noise_variance=_noise_variance_start(args),
                  noise_variance_bounds=tuple(args.noise_variance_bounds),
                  optimize=not args.no_optimize,
                  n_restarts=args.n_restarts, normalize_y=not args.no_normalize_y,
                  normalize_X=not args.no_standardize, random_state=args.seed)
    approximation = _approximation_name(args.approximation)
    kind = getattr(args, "local", None)
    if approximation == "exact" and kind != "neighbors":
        if kind is not None:
            raise CommandError(f"--approximation exact takes --local neighbors (an exact GP "
                               f"per neighbourhood), not --local {kind}")
        return ExactGPRegressor(**common)
    for flag in ("local_lazy", "local_reoptimize"):
        if kind != "clusters" and getattr(args, flag, False):
            raise CommandError(f"--{flag.replace('_', '-')} needs --local clusters")
    return LowRankGPRegressor(approximation=approximation, n_components=args.n_components,
                              approximation_options=_parse_options(args.option),
                              dtype=_dtype(args, n_samples), solver=getattr(args, "solver", "cholesky"),
                              objective=getattr(args, "objective", "dtc"), local=kind,
                              signed_rule=getattr(args, "signed_rule", "repair"),
                              local_threshold=getattr(args, "local_threshold", 2.0),
                              local_lazy=getattr(args, "local_lazy", False),
                              local_reoptimize=getattr(args, "local_reoptimize", False),
                              local_neighbors=getattr(args, "local_neighbors", 300),
                              local_learning_centres=getattr(args, "local_learning_centres", 32),
                              n_jobs=getattr(args, "n_jobs", None), **common)


def _gibbs_estimator(args, n_dims: int):
    """``--sampler gibbs``: a GibbsGPRegressor (docs/gibbs.md, "The estimator")."""
    from ..estimators.gibbs import GibbsGPRegressor
    approximation = _approximation_name(args.approximation)
    for given, flag in ((approximation == "exact", "--approximation exact"),
                        (args.local is not None, "--local"), (args.ard, "--ard"),
                        (args.noise_variance_column is not None, "--noise-variance-column")):
        if given:
            raise CommandError(f"--sampler gibbs does not take {flag} (one length scale "
                               "theta1, homoscedastic noise, a global low-rank map)")
    grid = None
    if args.theta1_grid is not None:
        start, stop, count = args.theta1_grid
        if not (count >= 1 and count == int(count)):
            raise CommandError(f"--theta1-grid COUNT must be a positive integer, got {count!r}")
        if count > MAX_THETA1_ATOMS:                     # before linspace allocates it
            raise CommandError(f"--theta1-grid COUNT={count:.0f} is above its limit of "
                               f"{MAX_THETA1_ATOMS:,} atoms (one feature map and one m x m "
                               "factor per atom)")
        grid = np.linspace(start, stop, int(count))
    return GibbsGPRegressor(
        approximation=approximation, n_components=args.n_components,
        kernel=kernels.get(args.kernel), theta1_grid=grid, tau_prior=tuple(args.tau_prior),
        theta2_prior=tuple(args.theta2_prior), n_iter=args.n_iter, burn_in=args.burn_in,
        thin=args.thin, collapsed=args.collapsed, diag_correction=args.diag_correction,
        approximation_options=_parse_options(args.option),
        normalize_y=not args.no_normalize_y, normalize_X=not args.no_standardize,
        verbose=not args.quiet and sys.stderr.isatty(), random_state=args.seed)


def _describe_gibbs(estimator) -> str:
    means, ess = estimator.posterior_means_, estimator.effective_sample_sizes_
    return (f"Gibbs sampler ({estimator.cost_model_} cost model"
            f"{', collapsed theta1' if estimator.collapsed else ''}): "
            f"{estimator.samples_.n_draws} draws; posterior means: noise_variance "
            f"{means['noise_variance']:.4g}, variance {means['variance']:.4g}, length_scale "
            f"{means['length_scale']:.4g} (normalized units); ESS "
            + ", ".join(f"{name} {value:.0f}" for name, value in ess.items()))


def _streams(estimator) -> bool:
    """Whether the estimator fits from a streaming source (not exact, local or a map built
    from the rows themselves, which need the rows in memory)."""
    try:
        estimator._check_streaming()
    except ValueError:
        return False
    return True


def _memory_report(estimator) -> str:
    """The working memory of a streamed fit: its O(chunk m + m^2) estimate and the measured
    peak resident set."""
    from .._memory import ENGINE_MATRICES, default_chunk_size, required_bytes
    from ..parallel import threaded_pass_buffers
    m = estimator.feature_map_.n_components
    itemsize = estimator.dtype_.itemsize
    threads = resolve_n_jobs(getattr(estimator, "n_jobs", None))
    extra, chunks = threaded_pass_buffers(threads)
    estimate = required_bytes(m, n_matrices=ENGINE_MATRICES[estimator.solver] + extra,
                              n_chunks=chunks, itemsize=itemsize)
    peak = peak_resident_bytes()
    measured = "" if peak is None else f"; peak resident memory {peak / 2**20:.0f} MiB"
    on_threads = f" on {threads} threads" if threads > 1 else ""
    return (f"streamed in chunks of {default_chunk_size(m, itemsize)} rows{on_threads}: "
            f"working memory O(chunk m + m^2), about {estimate / 2**20:.0f} MiB for m = {m}"
            f"{measured}")


# --------------------------------------------------------------------------- commands
def command_fit(args) -> None:
    from ..io import save
    check_output_path(args.out, inputs=(args.data,), suffixes=MODEL_SUFFIXES)
    if args.dask_scheduler is not None:
        _fit_on_dask(args)
        return
    gibbs = args.sampler == "gibbs"
    with _progress(args) as progress:
        source = _training_source(args, progress)
        estimator = (_gibbs_estimator(args, source.n_dims) if gibbs
                     else _make_estimator(args, source.n_dims, source.n_samples))
        streamed = not gibbs and _streams(estimator)
        start = time.perf_counter()
        if streamed:
            estimator.fit(source, progress=progress)
        else:                               # exact, local and Gibbs models hold the rows
            reading = source if progress is None else PassReporter(source, progress)
            if progress is not None:
                reading.stage = "reading the rows into memory (the model holds them)"
            X, y, variances = to_arrays(reading)
            if gibbs:
                estimator.fit(X, y)
            else:
                estimator.fit(X, y, sample_noise_variance=variances)
        elapsed = time.perf_counter() - start
    if source.reader.has_header:           # a table without a header is matched by position
        estimator.input_columns_ = list(source.input_columns)
    estimator.target_column_ = source.target_column
    save(estimator, args.out)
    if gibbs:
        _log(args, f"fitted {estimator.feature_map_.name} on {len(y)} rows x {source.n_dims} "
                   f"inputs in {elapsed:.2f} s; {_describe_gibbs(estimator)}; model written "
                   f"to {args.out}")
        return
    if getattr(estimator, "local_model_", None) is not None:
        _log(args, estimator.local_model_.describe())
    report = getattr(estimator, "approximation_diagnostics_", None)
    if report:
        _log(args, "approximation: " + ", ".join(f"{key} {value:.4g}" if isinstance(
            value, float) else f"{key} {value}" for key, value in report.items()))
    _log(args, f"fitted {_approximation_name(args.approximation)} on {source.n_samples} rows x "
               f"{source.n_dims} inputs in "
               f"{elapsed:.2f} s; log marginal likelihood "
               f"{estimator.log_marginal_likelihood_value_:.4f}; kernel {estimator.kernel_}, "
               f"noise_variance {estimator.noise_variance_:.4g}; "
               f"{_describe_scaling(args, estimator.kernel_)}; "
               f"model written to {args.out}")
    if streamed:
        _log(args, _memory_report(estimator))


def _refuse_on_dask(args) -> None:
    """--dask-scheduler fits low-rank models whose passes are sums over rows; the models that
    hold their rows (exact, local, Gibbs) and maps built from the rows are refused."""
    held = [flag for given, flag in (
        (args.sampler == "gibbs", "--sampler gibbs"),
        (_approximation_name(args.approximation) == "exact", "--approximation exact"),
        (args.local is not None, f"--local {args.local}")) if given]
    if held:
        raise CommandError(f"--dask-scheduler does not take {held[0]}: that model holds its "
                           "training rows in memory, which stay on the workers here; fit it "
                           "without --dask-scheduler, or fit a global low-rank model "
                           "(docs/distributed.md)")
    if not features.get(args.approximation).builds_from_bounding_box:
        streaming = [name for name in features.names()
                     if features.get(name).builds_from_bounding_box]
        raise CommandError(f"--dask-scheduler does not take --approximation "
                           f"{args.approximation}: it builds its map from the training rows "
                           f"themselves; the maps that stream: {', '.join(streaming)}")


def _dask_client(args):
    """A ``distributed.Client`` of ``--dask-scheduler``, or a CommandError that says why not."""
    try:
        from distributed import Client

        from ..data.distributed import check_scheduler_address
    except ImportError:
        raise CommandError("--dask-scheduler needs Dask's distributed scheduler: pip install "
                           "'scalegp[dask]'") from None
    try:
        # a malformed address is refused before a Client exists: a Client that failed on
        # one still closes at exit, with a 20 s timeout and a traceback (issue 24)
        check_scheduler_address(args.dask_scheduler)
        client = Client(args.dask_scheduler, timeout=args.dask_timeout, set_as_default=False)
    except ValueError as error:                    # a malformed address
        raise CommandError(f"--dask-scheduler {args.dask_scheduler}: not a scheduler address "
                           f"({' '.join(str(error).split())}); e.g. tcp://HOST:8786") from None
    except (OSError, TimeoutError, TypeError) as error:
        text = " ".join(str(error).split()) or type(error).__name__
        raise CommandError(f"--dask-scheduler {args.dask_scheduler}: cannot reach the "
                           f"scheduler within {args.dask_timeout:g} s ({text}); start one "
                           "(`dask scheduler`) or check the address, e.g. "
                           "tcp://HOST:8786") from None
    if not client.scheduler_info().get("workers"):
        try:
            client.wait_for_workers(1, timeout=args.dask_timeout)
        except TimeoutError:
            client.close()
            raise CommandError(f"--dask-scheduler {args.dask_scheduler}: the scheduler has "
                               f"no workers (waited {args.dask_timeout:g} s); start some "
                               "(`dask worker ADDRESS`)") from None
    return client


def _fit_on_dask(args) -> None:
    """``fit --dask-scheduler``: the workers read the file and every pass runs on them
    (docs/distributed.md, "From the command line")."""
    from ..data.distributed import dask_file_source, lost_cluster_errors
    from ..io import save
    _refuse_on_dask(args)
    client = _dask_client(args)
    try:
        start = time.perf_counter()
        source, file_source, info = dask_file_source(
            args.data, args.target, noise_variance=args.noise_variance_column,
            header=args.header, drop_missing=args.drop_missing, client=client,
            block_rows=args.dask_block_rows)
        if not file_source.reader.has_header:
            _log(args, f"{args.data}: {_describe_header(file_source.reader)}")
        if info["n_dropped"]:
            _log(args, f"dropped {info['n_dropped']} row(s) with missing values")
        if source.n_samples < 2:
            raise CommandError(f"{args.data}: need at least 2 complete rows, got "
                               f"{source.n_samples}")
        estimator = _make_estimator(args, source.n_dims, source.n_samples)
        if estimator.dtype != "float64":
            source = type(source)(source.X, source.y, source.noise_variance,
                                  dtype=estimator.dtype, client=client)
        n_workers = len(client.scheduler_info().get("workers", {}))
        _log(args, f"Dask scheduler {client.scheduler.address} ({n_workers} worker(s)): "
                   f"{info['n_rows']} rows of {args.data} in {source.n_blocks} block(s), "
                   "read by the workers")
        estimator.fit(source)
        elapsed = time.perf_counter() - start
    except lost_cluster_errors() as error:
        text = " ".join(str(error).split()) or "no detail"
        raise CommandError(f"--dask-scheduler {args.dask_scheduler}: the scheduler or its "
                           f"workers went away during the fit ({type(error).__name__}: "
                           f"{text}); nothing was written") from None
    finally:
        client.close(timeout=args.dask_timeout)
    if file_source.reader.has_header:
        estimator.input_columns_ = list(file_source.input_columns)
    estimator.target_column_ = file_source.target_column
    save(estimator, args.out)
    _log(args, f"fitted {_approximation_name(args.approximation)} on {source.n_samples} rows x "
               f"{source.n_dims} inputs in {elapsed:.2f} s on the Dask scheduler "
               f"{args.dask_scheduler} ({source.n_blocks} block(s)); log marginal likelihood "
               f"{estimator.log_marginal_likelihood_value_:.4f}; kernel {estimator.kernel_}, "
               f"noise_variance {estimator.noise_variance_:.4g}; "
               f"{_describe_scaling(args, estimator.kernel_)}; model written to {args.out}")


def _describe_scaling(args, kernel) -> str:
    if args.no_standardize:
        return "inputs not standardized (--no-standardize): length scales in data units"
    transform = "(x - mean) / std" if kernel.shift_invariant else "x / std (inputs stay >= 0)"
    return (f"inputs standardized per column, {transform}: length scales and their bounds "
            "in standard deviations")


def command_predict(args) -> None:
    from ..io import load
    to_stdout = args.out == "-"
    if not to_stdout:
        check_output_path(args.out, inputs=(args.model, args.data), suffixes=CSV_SUFFIXES)
    model = load(args.model)
    variance = _variance_option(args, model)
    reader, columns = _prediction_columns(args, model)
    names = ["mean", "std"]
    if hasattr(model, "predict_interval"):          # a Gibbs model: its 95 % interval too
        names += ["lower_95", "upper_95"]
    with _progress(args) as progress:
        if progress is not None:
            progress.start_pass("prediction pass", reader.n_rows)

        def predictions():
            for start, X in checked_blocks(reader, columns):
                try:
                    mean, std = model.predict(X, return_std=True,
                                              include_noise=args.include_noise, **variance)
                    values = [mean, std]
                    if len(names) > 2:
                        values += model.predict_interval(X, 0.95,
                                                         include_noise=args.include_noise)
                except NonFiniteResultError as error:     # name the file's row, 1-based
                    if error.rows is None:
                        raise
                    raise NonFiniteResultError(
                        f"{args.data}: data row {start + error.rows[0] + 1} "
                        f"({error.rows.size} row(s) of data rows {start + 1}-{start + len(X)}): "
                        f"{error.reason}", rows=error.rows + start,
                        reason=error.reason) from None
                if progress is not None:
                    progress(start + len(X))
                yield np.column_stack(values)

        if to_stdout:
            try:
                written = write_csv_rows(sys.stdout, names, predictions(), lineterminator="\n")
                sys.stdout.flush()
            except BrokenPipeError:
                # the reader stopped (e.g. `| head`): nothing more can be written there
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise CommandError("standard output was closed before all predictions were "
                                   "written (the output is incomplete)") from None
        else:
            written = write_csv_blocks(args.out, names, predictions(),
                                       inputs=(args.model, args.data))
    where = "standard output" if to_stdout else args.out
    _log(args, f"wrote {written} predictions ({', '.join(names)}) to {where}")


def _variance_option(args, model) -> dict:
    """``predict``'s keyword for ``--[no-]diag-correction`` (none: the model's default), refused
    up front for a model without the choice (exact, Gibbs, local)."""
    if args.diag_correction is None:
        return {}
    if getattr(model, "local_model_", True) is not None:
        flag = "--diag-correction" if args.diag_correction else "--no-diag-correction"
        raise CommandError(f"{flag} chooses the variance of a global low-rank model; "
                           f"{args.model} is {type(model).__name__}"
                           + (" with a local model" if getattr(model, "local_model_", None)
                              is not None else ""))
    return {"diag_correction": args.diag_correction}


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _prediction_columns(args, model):
    """(reader of ``args.data``, the indices of the model's input columns), by the rule
    :data:`COLUMN_RULE`."""
    columns = getattr(model, "input_columns_", None)
    reader = open_reader(args.data, header=args.header)
    if (columns and not reader.has_header and args.header == "auto"
            and all(_is_number(name) for name in columns)):
        named = open_reader(args.data, header="yes")
        if set(columns) <= set(named.columns):
            reader = named
    if columns and reader.has_header:
        indices = select_columns(reader.columns, columns, str(reader.path))
        _log(args, f"input columns by name: {', '.join(columns)}")
        return reader, indices
    if len(reader.columns) != model.n_features_in_:
        names = f" ({', '.join(columns)})" if columns else ""
        raise CommandError(
            f"{args.data}: without column names the inputs are matched by position, so the "
            f"table must have the model's {model.n_features_in_} column(s){names}; found "
            f"{len(reader.columns)} ({_describe_header(reader)})"
        )
    _log(args, f"input columns by position ({_describe_header(reader)})")
    return reader, list(range(len(reader.columns)))


def command_evaluate(args) -> None:
    from ..estimators.exact import ExactGPRegressor
    from ..estimators.lowrank import LowRankGPRegressor
    from ..metrics import kl_divergence_factorized, nlpd, rmse
    with _progress(args) as progress:
        source = _training_source(args, progress)
        rng = np.random.default_rng(args.seed)
        n = min(args.subsample, source.n_samples)
        rows = rng.permutation(source.n_samples)[:n]
        if progress is not None:
            progress.start_pass("subsample pass", source.n_samples)
        X, y = gather_rows(source, rows, progress)
    # the subsample, in the order drawn: its first n_test rows are the test set
    n_test = min(n - 1, max(1, int(round(args.test_fraction * n))))
    test, train = np.arange(n_test), np.arange(n_test, n)
    names = [_approximation_name(name) for name in args.approximations.split(",")]
    kernel = _kernel_from_args(args, X.shape[1])
    noise_variance = _noise_variance_start(args)
    start = time.perf_counter()
    noise_bounds = tuple(args.noise_variance_bounds)
    exact = ExactGPRegressor(kernel=kernel, noise_variance=noise_variance,
                             noise_variance_bounds=noise_bounds,
                             optimize=not args.no_optimize, normalize_y=True,
                             normalize_X=not args.no_standardize,
                             random_state=args.seed).fit(X[train], y[train])
    exact_time = time.perf_counter() - start
    exact_mean, exact_std = exact.predict(X[test], return_std=True, include_noise=True)
    # scores of y / s, s a power of two (exact), so that no square overflows (y near 1e300):
    # RMSE scales by s, NLPD shifts by log s, the KL divergence does not change
    s = float(power_of_two_scale(np.concatenate([y[test], exact_mean, exact_std])))

    def scores(mean, std):
        return (s * rmse(y[test] / s, mean / s),
                nlpd(y[test] / s, mean / s, (std / s) ** 2) + math.log(s))

    results = [("exact", *scores(exact_mean, exact_std), 0.0, exact_time)]
    for name in names:
        if name == "exact":
            raise CommandError("--approximations lists the low-rank maps compared against the "
                               "exact GP; 'exact' is always the first row")
        options = _parse_options(args.option) if len(names) == 1 else {}
        start = time.perf_counter()
        approx = LowRankGPRegressor(
            approximation=name, n_components=args.n_components,
            kernel=exact.kernel_ if not args.learn else kernel,
            noise_variance=exact.noise_variance_ if not args.learn else noise_variance,
            noise_variance_bounds=noise_bounds, optimize=args.learn, normalize_y=True,
            normalize_X=not args.no_standardize, approximation_options=options,
            random_state=args.seed).fit(X[train], y[train])
        elapsed = time.perf_counter() - start
        mean, std = approx.predict(X[test], return_std=True, include_noise=True)
        kl = kl_divergence_factorized(mean / s, (std / s) ** 2, exact_mean / s,
                                      (exact_std / s) ** 2) / len(test)
        results.append((name, *scores(mean, std), kl, elapsed))
    mode = "own learned" if args.learn else "the exact GP's learned"
    print(f"{len(train)} training / {len(test)} test rows; approximations at {mode} "
          f"hyperparameters; n_components = {args.n_components}")
    print("| method | RMSE | NLPD | KL to exact (per test point) | fit time (s) |")
    print("|---|---|---|---|---|")
    for name, error, loss, kl, seconds in results:
        error, loss = (f"{v:.4f}" if abs(v) < 1e9 else f"{v:.4e}" for v in (error, loss))
        print(f"| {name} | {error} | {loss} | {kl:.3e} | {seconds:.2f} |")


def command_list(args) -> None:
    print("approximations (use with --approximation NAME):")
    for name, text in features.describe().items():
        print(f"  {name:<18} {text}")
    print("  exact              the dense exact GP (reference; small data only)")
    print("kernels (use with --kernel NAME):")
    print("  " + ", ".join(sorted(kernels.KERNEL_NAMES)))
    names = experiments.describe()
    if names:
        print("experiments (use with: scalegp experiment NAME):")
        for name, text in names.items():
            print(f"  {name:<26} {text}")


def command_demo(args) -> None:
    named = args.out is not None
    check_output_path(args.out if named else demo_module.DEFAULT_OUT, suffixes=PNG_SUFFIXES,
                      replace=named)
    demo_module.run_demo(
        model=args.model, subsample=args.subsample, n_components=args.n_components,
        approximation=args.approximation, n_neighbors=args.local_neighbors, out=args.out,
        seed=args.seed, log=lambda message: _log(args, message) if not args.quiet else None)


def command_experiment(args) -> None:
    named = args.out_dir is not None
    folder = args.out_dir if named else experiments.DEFAULT_OUTPUT_DIR
    check_output_dir(folder)
    written = experiments.run(args.name, folder, quick=args.quick, replace=named)
    for path in written:
        print(path)


# --------------------------------------------------------------------------- parser
def _add_model_options(parser, *, approximation_default="rff") -> None:
    parser.add_argument("--kernel", default="matern52",
                        help="gaussian, matern12, matern32, matern52, cauchy, laplacian or "
                             "reciprocal_semigroup (see `scalegp list`)")
    parser.add_argument("--ard", action="store_true", help="one length scale per input")
    parser.add_argument("--length-scale", type=_positive_float, nargs="+", metavar="L",
                        help="starting length scale: one value, or one per input with --ard "
                             "(default 1 if inside --length-scale-bounds, else the geometric "
                             "mean of the bounds); a start outside the bounds is an error")
    parser.add_argument("--variance", type=_positive_float,
                        help="starting signal variance (default 1 if inside --variance-bounds, "
                             "else the geometric mean of the bounds)")
    parser.add_argument("--noise-variance", type=_positive_float,
                        help="starting noise variance, of the normalized target (default 0.1 "
                             "if inside --noise-variance-bounds, else the geometric mean of "
                             "the bounds)")
    parser.add_argument("--length-scale-bounds", type=float, nargs=2, default=(1e-2, 1e3),
                        metavar=("LOW", "HIGH"),
                        help="box of the length scales (in standard deviations of each input "
                             "unless --no-standardize)")
    parser.add_argument("--variance-bounds", type=float, nargs=2, default=(1e-3, 1e3),
                        metavar=("LOW", "HIGH"))
    parser.add_argument("--noise-variance-bounds", type=float, nargs=2, default=(1e-6, 1e5),
                        metavar=("LOW", "HIGH"),
                        help="box of the noise variance (its lower end also sets the "
                             "truncation of glf)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="keep the initial hyperparameters")
    parser.add_argument("--n-restarts", type=_int_at_least(0), default=0,
                        help=f"extra optimizer starts drawn in the box (at most "
                             f"{MAX_RESTARTS:,})")
    parser.add_argument("--no-normalize-y", action="store_true")
    parser.add_argument("--no-standardize", action="store_true",
                        help="use the inputs as they are; by default each input column is "
                             "standardized, (x - mean) / std with the training mean and std "
                             "(only / std for reciprocal_semigroup, whose inputs must stay >= "
                             "0), so the length scales and their bounds are in standard "
                             "deviations and predict applies the same transform")
    _add_header_option(parser)
    parser.add_argument("--option", action="append", metavar="KEY=VALUE",
                        help="approximation option (repeatable), e.g. --option n_nodes=auto")


def _add_gibbs_options(parser) -> None:
    """``--sampler gibbs`` and its settings (docs/gibbs.md, "The estimator")."""
    parser.add_argument("--sampler", choices=["optimize", "gibbs"], default="optimize",
                        help="optimize: learn the hyperparameters by maximum likelihood; "
                             "gibbs: sample them (tau, theta2, theta1 on a grid) by the Gibbs "
                             "sampler of Banerjee, Dunson & Tokdar (docs/gibbs.md)")
    parser.add_argument("--n-iter", type=_int_at_least(1), default=2000,
                        help=f"gibbs: sweeps in all (at most {MAX_GIBBS_SWEEPS:,})")
    parser.add_argument("--burn-in", type=_int_at_least(0), default=500,
                        help="gibbs: sweeps discarded first")
    parser.add_argument("--thin", type=_int_at_least(1), default=1, help="gibbs: thinning")
    parser.add_argument("--theta1-grid", type=float, nargs=3, metavar=("START", "STOP", "COUNT"),
                        help="gibbs: theta1 = 1 / (2 l^2) on linspace(START, STOP, COUNT), all "
                             f"> 0 (default 100 atoms in (0, 2]; COUNT at most "
                             f"{MAX_THETA1_ATOMS:,})")
    parser.add_argument("--tau-prior", type=_positive_float, nargs=2, default=(1.0, 0.1),
                        metavar=("A1", "B1"), help="gibbs: Ga(shape, rate) prior of the noise "
                                                  "precision (normalized targets)")
    parser.add_argument("--theta2-prior", type=_positive_float, nargs=2, default=(1.0, 1.0),
                        metavar=("A2", "B2"), help="gibbs: Ga(shape, rate) prior of the "
                                                  "inverse kernel variance")
    parser.add_argument("--collapsed", action="store_true",
                        help="gibbs: draw theta1 with the latent field integrated out")
    parser.add_argument("--diag-correction", action="store_true",
                        help="gibbs: the FITC-style diagonal (O(n m^2) per sweep)")


def _add_header_option(parser) -> None:
    parser.add_argument("--header", choices=HEADER_MODES, default="auto", help=HEADER_RULE)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalegp", description="Gaussian process regression at scale.")
    parser.add_argument("--version", action="version", version=f"scalegp {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true", help="no progress output")
    common.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    common.add_argument("--seed", type=int, default=0, help="random seed")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", parents=[common], help="fit a model to a table")
    fit.add_argument("data", help="CSV, .npy, .npz or Parquet file")
    fit.add_argument("--target", required=True, help="target column: name or 0-based index")
    fit.add_argument("--approximation", default="rff",
                     help="see `scalegp list`; or exact (case-insensitive)")
    fit.add_argument("--n-components", type=_int_at_least(1), default=256)
    fit.add_argument("--dtype", default="auto", choices=["auto", "float64", "float32"],
                     help=DTYPE_RULE)
    fit.add_argument("--solver", default="cholesky", choices=["cholesky", "qr"],
                     help="normal equations, or the QR variant that never forms Phi^T Phi "
                          "(fixed-basis maps such as glf, float64)")
    fit.add_argument("--signed-rule", default="repair", choices=["repair", "keep"],
                     help="a quadrature rule with negative weights (sgq, ...): repair uses the "
                          "positive part of its approximation, keep the indefinite rule as it "
                          "is (needed with --noise-variance-column or --objective fitc); "
                          "docs/positive-part.md")
    fit.add_argument("--n-jobs", type=_thread_count, default=None,
                     help="threads sharing each pass's chunks, one BLAS thread each (-1: every "
                          "core; default: one thread, BLAS's own threading); global models "
                          "with --solver cholesky (docs/engine.md, \"Threads over chunks\")")
    fit.add_argument("--objective", default="dtc", choices=["dtc", "fitc", "vfe"],
                     help="what learning maximizes (docs/nystrom.md): the DTC / subset-of-"
                          "regressors likelihood, the FITC-style corrected one, or Titsias' "
                          "VFE bound (nystrom only); predictions of fitc and vfe models, and "
                          "of nystrom and random-projection under any objective, add the "
                          "diagonal correction to the variance (predict --diag-correction)")
    fit.add_argument("--local", choices=sorted(local.LOCAL_KINDS),
                     help="a local (centred) model around the approximation "
                          "(docs/local-models.md): test-points centres every test point on "
                          "itself (the model file keeps the training data; each prediction "
                          "costs a pass over it), clusters keeps one posterior per "
                          "farthest-point centre and routes each test point to the nearest; "
                          "learning maximizes the mean of the cluster centres' log marginal "
                          "likelihoods; neighbors trains one GP per centre on its nearest "
                          "training points (any approximation, or exact) and blends the "
                          "nearest centres' predictions, learning on the sum of the local log "
                          "marginal likelihoods")
    fit.add_argument("--local-threshold", type=_positive_float, default=2.0, metavar="T",
                     help="clustering threshold of --local, in length scales: every training "
                          "input lies within T of a centre (default 2)")
    fit.add_argument("--local-neighbors", type=_int_at_least(1), default=300, metavar="K",
                     help="with --local neighbors: training points per neighbourhood "
                          "(default 300)")
    fit.add_argument("--local-learning-centres", type=_int_at_least(1), default=32,
                     metavar="J", help="with --local neighbors: neighbourhoods drawn at random "
                                       "to learn the hyperparameters on (default 32)")
    fit.add_argument("--local-lazy", action="store_true",
                     help="with --local clusters: keep only the centres test points need, "
                          "conditioned at prediction (the model file keeps the training data)")
    fit.add_argument("--local-reoptimize", action="store_true",
                     help="with --local clusters: one feature map per centre, built on the "
                          "training rows routed to it (the model file keeps the training data "
                          "and rebuilds the maps)")
    fit.add_argument("--noise-variance-column", metavar="COLUMN",
                     help="a column of known per-row noise variances (measurement errors, >= 0, "
                          "in target units squared), added to the learned noise variance; not "
                          "an input (name or 0-based index)")
    fit.add_argument("--drop-missing", action="store_true",
                     help="drop rows with missing values instead of failing")
    fit.add_argument("--out", required=True, metavar="MODEL.npz",
                     help="model file to write (.npz; required: scalegp writes no file you "
                          "did not name); checked before the fit. " + OUT_RULES)
    fit.add_argument("--dask-scheduler", metavar="ADDRESS",
                     help="fit on a Dask cluster (e.g. tcp://HOST:8786; needs pip install "
                          "'scalegp[dask]'): the workers read DATA (CSV, .npy or Parquet) "
                          "at the same path, so it must be readable there, and every pass "
                          "runs on them; global low-rank models with a map built from the "
                          "bounding box only (docs/distributed.md)")
    fit.add_argument("--dask-block-rows", type=_int_at_least(1), default=1_000_000,
                     metavar="ROWS", help="with --dask-scheduler: rows per block (task) read "
                                          "by a worker (default 1000000; a CSV block is "
                                          "about this many rows, by bytes)")
    fit.add_argument("--dask-timeout", type=_positive_float, default=10.0, metavar="SECONDS",
                     help="with --dask-scheduler: how long to wait for the scheduler "
                          "(default 10)")
    _add_gibbs_options(fit)
    _add_model_options(fit)
    fit.set_defaults(handler=command_fit)

    predict = sub.add_parser("predict", parents=[common], help="predict with a saved model",
                             description=COLUMN_RULE)
    predict.add_argument("model")
    predict.add_argument("data")
    predict.add_argument("--out", default="-", metavar="FILE.csv",
                         help="predictions to write (.csv, columns mean and std); must not be "
                              "the model or the data. Without --out, or with --out -, the CSV "
                              "goes to standard output (nothing else does: messages go to "
                              "stderr; after an error, exit code not 0, the rows written so "
                              "far may be incomplete). " + OUT_RULES)
    predict.add_argument("--include-noise", action="store_true",
                         help="std of a new noisy observation instead of the latent function")
    predict.add_argument("--diag-correction", action=argparse.BooleanOptionalAction,
                         default=None,
                         help="global low-rank models (predict's diag_correction): add the "
                              "prior variance the model misses, max(k(x, x) - q(x, x), 0), "
                              "to the std (the DTC / FITC / SGPR predictive), or not (the "
                              "subset-of-regressors std, which vanishes away from Nystrom "
                              "knots); default: the model's own, on for nystrom and "
                              "random-projection and for the fitc and vfe objectives")
    _add_header_option(predict)
    predict.set_defaults(handler=command_predict)

    evaluate = sub.add_parser("evaluate", parents=[common],
                              help="compare approximations against the exact GP on a subsample")
    evaluate.add_argument("data")
    evaluate.add_argument("--target", required=True)
    evaluate.add_argument("--approximations", default="rff",
                          help="comma-separated names, e.g. rff,glf")
    evaluate.add_argument("--n-components", type=_int_at_least(1), default=256)
    evaluate.add_argument("--subsample", type=_int_at_least(2), default=2000,
                          help="rows drawn for the comparison (at least 2: one to train, one "
                               "to test)")
    evaluate.add_argument("--test-fraction", type=_open_fraction, default=0.2,
                          help="share of the subsample held out, strictly between 0 and 1 "
                               "(at least one row each for training and testing)")
    evaluate.add_argument("--learn", action="store_true",
                          help="each approximation learns its own hyperparameters")
    evaluate.add_argument("--drop-missing", action="store_true")
    _add_model_options(evaluate)
    evaluate.set_defaults(handler=command_evaluate)

    listing = sub.add_parser("list", parents=[common], help="list approximations and kernels")
    listing.set_defaults(handler=command_list)

    demo = sub.add_parser("demo", parents=[common],
                          help="fit the embedded East Africa relief map and draw it")
    demo.add_argument("--model", choices=["neighbors", "global"], default="neighbors",
                      help="neighbors (default): exact GPs on the neighbourhoods of every "
                           "training point, blended; global: one low-rank GP (Gauss-Legendre "
                           "features by default) on --subsample points")
    demo.add_argument("--subsample", type=int, default=None,
                      help="training points drawn from the 82,800-point map without its "
                           "5,000 test points (default: all 77,800 for neighbors, 20,000 "
                           "for global)")
    demo.add_argument("--n-components", type=_int_at_least(1), default=2048,
                      help="feature budget of a low-rank model")
    demo.add_argument("--approximation", default=None,
                      help="the map (default: exact local GPs for neighbors, glf for global)")
    demo.add_argument("--local-neighbors", type=_int_at_least(1), default=300, metavar="K",
                      help="training points per neighbourhood of --model neighbors")
    demo.add_argument("--out", metavar="FILE.png",
                      help=f"figure to write (.png; default {demo_module.DEFAULT_OUT}, "
                           "created only if nothing is there: a file you did not name is "
                           "never replaced); checked before the fit. " + OUT_RULES)
    demo.set_defaults(handler=command_demo)

    experiment = sub.add_parser("experiment", parents=[common],
                                help="regenerate a paper's figures and tables")
    experiment.add_argument("name", help="see `scalegp list`")
    experiment.add_argument("--out-dir", metavar="FOLDER",
                            help=f"folder for the figures and tables (created if missing; "
                                 f"default {experiments.DEFAULT_OUTPUT_DIR}, where no existing "
                                 "file is replaced: name the folder to replace its files); "
                                 "each file in it follows the rules of --out: " + OUT_RULES)
    experiment.add_argument("--quick", action="store_true", help="reduced sizes")
    experiment.set_defaults(handler=command_experiment)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with _warnings_as_lines(args):
            args.handler(args)
    except NonFiniteResultError as error:
        if args.debug:
            raise
        print(f"scalegp {args.command}: error: {error}", file=sys.stderr)
        return EXIT_NON_FINITE
    except KeyboardInterrupt:
        print(f"scalegp {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:           # every failure is one line unless --debug
        if args.debug:
            raise
        text = str(error).strip()
        message = text.splitlines()[0] if text else type(error).__name__
        expected = (CommandError, TableError, ValueError, TypeError, OSError, NotImplementedError)
        if not isinstance(error, expected):
            message = f"internal error ({type(error).__name__}): {message} (rerun with --debug)"
        print(f"scalegp {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
