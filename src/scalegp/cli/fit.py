"""``scalegp fit``: the estimator from the command line's options, fitted in memory, streamed from a
file or on a Dask cluster, and saved as a model file.
"""

from __future__ import annotations

import time

from .. import features, kernels
from .._memory import peak_resident_bytes
from .._output import MODEL_SUFFIXES, check_output_path
from ..data.readers import STDIN
from ..data.sources import PassReporter, open_source, to_arrays
from ..estimators.base import fits_data_sources
from ..estimators.configuration import make_approximation, make_local, resolve
from ..estimators.exact import ExactGPRegressor
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.gp_regressor import GPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..estimators.vecchia import VecchiaGPRegressor
from ..parallel import resolve_n_jobs
from . import options
from .common import CommandError, _describe_header, _log, _progress


#: --dtype auto picks float32 when the fit's Gram work N m^2 is at least this (a float64 fit
#: of 10 s or more on one core, where float32's 1.5-3.7x speed-up pays) ...
FLOAT32_MIN_WORK = 2e10


#: ... and the noise variance (of the normalized target) cannot fall below this: the float32
#: Gram's error reaches the solution divided by s2, and the log-likelihood error grew from
#: 0.4 (s2 = 1e-2) to 7, 150 and 3e7 (s2 = 1e-3, 1e-4, 1e-5) at N = 2e4
#: (benchmarks/results/float32-noise.md; docs/float32.md).
FLOAT32_MIN_NOISE_VARIANCE = 1e-2


def _training_source(args, progress, dtype=None):
    """The training file as a streaming source, after its summary pass (which checks every
    row by the rules of :mod:`scalegp.data.sources` and counts the dropped ones). DATA ``-``
    is CSV on standard input, read once into memory, where every pass parses it
    (:func:`scalegp.data.readers.read_standard_input`)."""
    source = open_source(args.data, args.target,
                         noise_variance_column=getattr(args, "noise_variance_column", None),
                         header=args.header, drop_missing=args.drop_missing, dtype=dtype)
    name = source.reader.path
    if not source.reader.has_header:       # the rule decided: say how the first line was read
        _log(args, f"{name}: {_describe_header(source.reader)}")
    summary = (source if progress is None else PassReporter(source, progress)).summary()
    if source.n_dropped:
        _log(args, f"dropped {source.n_dropped} row(s) with missing values")
    if summary.n_samples < 2:
        raise CommandError(f"{name}: need at least 2 complete rows, got {summary.n_samples}")
    return source


def _inputs(args) -> tuple:
    """The files the command reads, which its outputs must not be (standard input is none)."""
    return () if args.data == STDIN else (args.data,)


def _table_columns(source):
    """The table's columns, stored with the model so that ``predict`` finds the inputs by
    name; None for a table without a header (matched by position)."""
    from ..io import TableColumns
    if not source.reader.has_header:
        return None
    return TableColumns(tuple(source.input_columns), source.target_column)


def _dtype(args, n_samples: int, n_components: int | None) -> str:
    """``--dtype``, with "auto" resolved by :data:`DTYPE_RULE` (and said in the log)."""
    if args.dtype not in (None, "auto"):
        return args.dtype
    bounds = options.noise_variance_bounds(args)
    lowest = options.noise_variance_start(args) if args.no_optimize else bounds[0]
    if options.approximation_name(args.approximation) == "exact":
        return "float64"                  # exact local GPs: no features to compute in float32
    if n_components is None:
        n_components = features.get(args.approximation).default_n_components or 256
    work = float(n_samples) * n_components**2
    single = (work >= FLOAT32_MIN_WORK and lowest >= FLOAT32_MIN_NOISE_VARIANCE
              and args.solver in (None, "cholesky") and args.local is None)
    _log(args, f"--dtype auto: {'float32' if single else 'float64'} (N m^2 = {work:.2g}, "
               f"float32 from {FLOAT32_MIN_WORK:.0g}; smallest noise variance {lowest:.2g}, "
               f"float32 from {FLOAT32_MIN_NOISE_VARIANCE:g}; docs/float32.md)")
    return "float32" if single else "float64"


def _make_estimator(args, n_dims: int, n_samples: int):
    """The estimator the flags declare (:mod:`scalegp.cli.options`): its class, its
    configuration objects and their options, the kernel; a flag that the chosen
    configuration would ignore is refused."""
    options.fill_approximation(args)
    estimator, params, approximation_options, local_options = options.model_arguments(args)
    name = options.approximation_name(args.approximation)
    kernel = options.kernel_from_args(args, n_dims)
    if estimator is GibbsGPRegressor:
        for given, flag in ((name in options.NOT_FEATURE_MAPS, f"--approximation {name}"),
                            (args.ard, "--ard"),
                            (args.noise_variance_column is not None,
                             "--noise-variance-column")):
            if given:
                raise CommandError(f"--sampler gibbs does not take {flag} (one length scale "
                                   "theta1, homoscedastic noise, a global low-rank map)")
        return GibbsGPRegressor(approximation=make_approximation(name, **approximation_options),
                                kernel=kernels.get(options.kernel_name(args)), **params)
    if estimator is GPRegressor:
        return _auto_estimator(args, params)
    params.update(kernel=kernel, noise_variance=options.noise_variance_start(args),
                  noise_variance_bounds=options.noise_variance_bounds(args))
    if estimator is ExactGPRegressor:
        return ExactGPRegressor(**params)
    if estimator is VecchiaGPRegressor:
        return VecchiaGPRegressor(**params)
    if params.get("dtype") == "auto":
        params["dtype"] = _dtype(args, n_samples, approximation_options.get("n_components"))
    params["local"] = make_local(params.get("local"), **local_options)
    return LowRankGPRegressor(approximation=make_approximation(name, **approximation_options),
                              **params)


def _auto_estimator(args, params):
    """GPRegressor with approximation="auto": the kernel family by name (the pilot starts
    it, one length scale per input); a fixed kernel start is refused rather than ignored."""
    fixed = [flag for flag, value in (("--length-scale", args.length_scale),
                                      ("--variance", args.variance),
                                      ("--length-scale-bounds", args.length_scale_bounds),
                                      ("--variance-bounds", args.variance_bounds),
                                      ("--ard", args.ard or None)) if value is not None]
    if fixed:
        raise CommandError(f"{', '.join(fixed)} set a kernel start, which --approximation "
                           "auto would ignore (its pilot starts the kernel, one length scale "
                           "per input); give --approximation NAME to fit a model of your own")
    return GPRegressor(kernel=args.kernel, **params)


def _describe_gibbs(estimator) -> str:
    means, ess = estimator.posterior_means_, estimator.effective_sample_sizes_
    return (f"Gibbs sampler ({estimator.cost_model_} cost model"
            f"{', collapsed theta1' if estimator.collapsed else ''}): "
            f"{estimator.samples_.n_draws} draws; posterior means: noise_variance "
            f"{means['noise_variance']:.4g}, variance {means['variance']:.4g}, length_scale "
            f"{means['length_scale']:.4g} (normalized units); ESS "
            + ", ".join(f"{name} {value:.0f}" for name, value in ess.items()))


def _memory_report(estimator) -> str:
    """The working memory of a streamed fit: its O(chunk m + m^2) estimate and the measured
    peak resident set."""
    from .._memory import ENGINE_MATRICES, default_chunk_size, required_bytes
    from ..parallel import threaded_pass_buffers
    m = estimator.feature_map_.n_components
    itemsize = estimator.dtype_.itemsize
    threads = resolve_n_jobs(getattr(estimator, "n_jobs", None))
    extra, chunks = threaded_pass_buffers(threads)
    estimate = required_bytes(m, n_matrices=ENGINE_MATRICES[resolve(estimator.approximation, estimator.local).solver] + extra,
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
    check_output_path(args.out, inputs=_inputs(args), suffixes=MODEL_SUFFIXES)
    options.fill_approximation(args)
    if args.dask_scheduler is not None:
        _fit_on_dask(args)
        return
    gibbs = args.sampler == "gibbs"
    with _progress(args) as progress:
        source = _training_source(args, progress)
        estimator = _make_estimator(args, source.n_dims, source.n_samples)
        streamed = not gibbs and fits_data_sources(estimator)
        start = time.perf_counter()
        if streamed:
            estimator.fit(source, progress=progress)
        else:                               # exact, local and Gibbs models hold the rows
            reading = source if progress is None else PassReporter(source, progress)
            if progress is not None:
                reading.stage = "reading the rows into memory (the model holds them)"
            X, y, variances = to_arrays(reading)
            if gibbs:
                estimator.fit(X, y, progress=progress)
            elif isinstance(estimator, GPRegressor):   # auto: a bar of its budget's seconds
                estimator.fit(X, y, sample_noise_variance=variances, progress=progress)
            else:
                estimator.fit(X, y, sample_noise_variance=variances)
        elapsed = time.perf_counter() - start
    save(estimator, args.out, table_columns=_table_columns(source))
    if gibbs:
        _log(args, f"fitted {estimator.feature_map_.name} on {len(y)} rows x {source.n_dims} "
                   f"inputs in {elapsed:.2f} s; {_describe_gibbs(estimator)}; model written "
                   f"to {args.out}")
        return
    name = options.approximation_name(args.approximation)
    if isinstance(estimator, GPRegressor):
        _log(args, f"--approximation auto chose {estimator.selection_.chosen.name} "
                   f"({estimator.selection_.reason}):\n{estimator.selection_.table()}")
        name = f"auto -> {estimator.selection_.chosen.name}"
        estimator_ = estimator.estimator_
    else:
        estimator_ = estimator
    if getattr(estimator_, "local_model_", None) is not None:
        _log(args, estimator_.local_model_.describe())
    report = getattr(estimator_, "approximation_diagnostics_", None)
    if report:
        _log(args, "approximation: " + ", ".join(f"{key} {value:.4g}" if isinstance(
            value, float) else f"{key} {value}" for key, value in report.items()))
    grouped = getattr(estimator, "replicates_", None)     # learned on the group means
    of_means = "" if grouped is None else f" (of the {len(grouped.inputs)} inputs' means)"
    _log(args, f"fitted {name} on {source.n_samples} rows x "
               f"{source.n_dims} inputs in "
               f"{elapsed:.2f} s; log marginal likelihood{of_means} "
               f"{estimator.log_marginal_likelihood_value_:.4f}; kernel {estimator.kernel_}, "
               f"noise_variance {estimator.noise_variance_:.4g}; "
               f"{_describe_scaling(args, estimator.kernel_)}; "
               f"model written to {args.out}")
    if streamed:
        _log(args, _memory_report(estimator))


def _refuse_on_dask(args) -> None:
    """--dask-scheduler fits low-rank models whose passes are sums over rows; the models that
    hold their rows (exact, local, Gibbs) and maps built from the rows are refused."""
    if args.data == STDIN:
        raise CommandError("--dask-scheduler does not take DATA - (standard input): the "
                           "workers read the file themselves, at its path, in blocks by "
                           "byte offset; write the data to a file they can read and name it")
    if options.approximation_name(args.approximation) == "vecchia":
        raise CommandError("--dask-scheduler does not take --approximation vecchia: the "
                           "Vecchia model holds its training rows, and its Dask path is the "
                           "likelihood over row blocks only (scalegp.vecchia.distributed, "
                           "docs/vecchia.md); fit it without --dask-scheduler")
    if options.approximation_name(args.approximation) == "auto":
        streaming = [name for name in features.names()
                     if features.get(name).builds_from_bounding_box]
        raise CommandError("--dask-scheduler needs an explicit --approximation: auto's pilot "
                           "and its candidates read rows into memory; the maps that stream: "
                           f"{', '.join(streaming)}")
    held = [flag for given, flag in (
        (args.sampler == "gibbs", "--sampler gibbs"),
        (options.approximation_name(args.approximation) == "exact", "--approximation exact"),
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
            args.data, args.target, noise_variance_column=args.noise_variance_column,
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
            source = type(source)(source.X, source.y, source.sample_noise_variance,
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
    save(estimator, args.out, table_columns=_table_columns(file_source))
    _log(args, f"fitted {options.approximation_name(args.approximation)} on {source.n_samples} rows x "
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
