"""``scalegp predict`` and ``scalegp evaluate``: a saved model's predictions for a table, and the
scores of approximations against the exact GP on a train/test split.
"""

from __future__ import annotations

import math
import os
import sys
import time

import numpy as np

from .._output import CSV_SUFFIXES, PNG_SUFFIXES, check_output_path
from ..data.readers import STDIN, open_reader, read_standard_input, select_columns
from ..data.sources import checked_blocks, gather_rows
from ..data.tables import write_csv_blocks, write_csv_rows
from ..engine.noise import power_of_two_scale
from ..errors import NonFiniteResultError
from ..estimators.configuration import make_approximation
from ..estimators.gibbs import GibbsGPRegressor
from ..metrics import central_interval
from . import options
from .common import (CommandError, _describe_header, _log, _parse_options, _progress,
                     require_matplotlib)
from .fit import _training_source


def command_predict(args) -> None:
    from ..io import load, load_table_columns
    to_stdout = args.out == "-"
    from_stdin = args.data == STDIN
    inputs = (args.model,) + (() if from_stdin else (args.data,))
    if not to_stdout:
        check_output_path(args.out, inputs=inputs, suffixes=CSV_SUFFIXES)
    if args.plot is not None:
        check_output_path(args.plot, inputs=inputs, suffixes=PNG_SUFFIXES, what="--plot")
        require_matplotlib("--plot")
    model = load(args.model)
    variance = _variance_option(args, model)
    content = read_standard_input() if from_stdin else None     # read once, parsed twice
    reader, columns = _prediction_columns(args, model, load_table_columns(args.model), content)
    level = _interval_level(args, model)
    names = ["mean", "std"]
    if level is not None:
        names += [f"lower_{100 * level:g}", f"upper_{100 * level:g}"]
    with _progress(args) as progress:
        if progress is not None:
            progress.start_pass("prediction pass", reader.n_rows)

        def predictions():
            for start, X in checked_blocks(reader, columns):
                try:
                    mean, std = model.predict(X, return_std=True,
                                              include_noise=args.include_noise, **variance)
                    values = [mean, std]
                    if level is not None:
                        values += _interval(model, X, level, args.include_noise, mean, std)
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
    if args.plot is not None:
        _plot(args, model, reader, columns, variance, inputs, written)


def _plot(args, model, reader, columns, variance, inputs, n_rows) -> None:
    """Draw the figure of :mod:`scalegp.cli.predict_plot` and write it to ``--plot``."""
    from . import predict_plot
    target = getattr(model, "target_column_", None)
    X, y = predict_plot.plot_rows(reader, columns, target, n_rows)
    names = [reader.columns[j] for j in columns]
    fig, kind = predict_plot.draw(model, X, y, include_noise=args.include_noise,
                                  input_names=names, target_name=target or "prediction",
                                  variance=variance)
    predict_plot.write_figure(fig, args.plot, inputs)
    targets = "with the target column" if y is not None else "no target column"
    _log(args, f"drew {kind} of {X.shape[0]} row(s) ({targets}) to {args.plot}")


def _interval_level(args, model) -> float | None:
    """The level of the interval columns: ``--interval``, else 0.95 where the predictive
    distribution is not the Gaussian of the mean and std columns (a Gibbs model's mixture
    over draws; a calibrated predictive variance's scale mixture, with --include-noise),
    else none."""
    if args.interval is not None:
        return args.interval
    calibrated = getattr(model, "variance_calibration_", None) is not None
    if isinstance(model, GibbsGPRegressor) or (calibrated and args.include_noise):
        return 0.95
    return None


def _interval(model, X, level: float, include_noise: bool, mean, std) -> list:
    """[lower, upper] of the central ``level`` interval: the model's own
    ``predict_interval`` where it has one, else mean +- z_{(1+p)/2} std."""
    if hasattr(model, "predict_interval"):
        return list(model.predict_interval(X, level, include_noise=include_noise))
    return list(central_interval(mean, std, level))


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


def _prediction_columns(args, model, table_columns=None, content=None):
    """(reader of ``args.data``, the indices of the model's input columns), by the rule
    :data:`COLUMN_RULE`; ``table_columns``: the columns stored with the model
    (:func:`scalegp.io.load_table_columns`); ``content``: the bytes of standard input
    (``args.data`` ``-``)."""
    columns = None if table_columns is None else list(table_columns.inputs)
    reader = open_reader(args.data, header=args.header, content=content)
    if (columns and not reader.has_header and args.header == "auto"
            and all(_is_number(name) for name in columns)):
        named = open_reader(args.data, header="yes", content=content)
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
    names = [options.approximation_name(name) for name in args.approximations.split(",")]
    if args.option and len(names) > 1:
        raise CommandError(f"--option sets an option of one map's build; --approximations "
                           f"lists {len(names)} ({', '.join(names)}): compare one at a time")
    map_options = _parse_options(args.option) or None
    kernel = options.kernel_from_args(args, X.shape[1])
    noise_variance = options.noise_variance_start(args)
    noise_bounds = options.noise_variance_bounds(args)
    normalize_y, normalize_X = not args.no_normalize_y, not args.no_standardize
    start = time.perf_counter()
    exact = ExactGPRegressor(kernel=kernel, noise_variance=noise_variance,
                             noise_variance_bounds=noise_bounds,
                             optimize=not args.no_optimize, n_restarts=args.n_restarts or 0,
                             normalize_y=normalize_y, normalize_X=normalize_X,
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
        if name in options.NOT_FEATURE_MAPS:
            raise CommandError("--approximations lists the low-rank maps compared against the "
                               "exact GP; 'exact' is always the first row (for vecchia: "
                               "scalegp fit --approximation vecchia)")
        start = time.perf_counter()
        approx = LowRankGPRegressor(
            approximation=make_approximation(name, n_components=args.n_components,
                                             options=map_options),
            kernel=exact.kernel_ if not args.learn else kernel,
            noise_variance=exact.noise_variance_ if not args.learn else noise_variance,
            noise_variance_bounds=noise_bounds, optimize=args.learn,
            n_restarts=args.n_restarts or 0, normalize_y=normalize_y,
            normalize_X=normalize_X, random_state=args.seed).fit(X[train], y[train])
        elapsed = time.perf_counter() - start
        mean, std = approx.predict(X[test], return_std=True, include_noise=True)
        kl = kl_divergence_factorized(mean / s, (std / s) ** 2, exact_mean / s,
                                      (exact_std / s) ** 2) / len(test)
        results.append((name, *scores(mean, std), kl, elapsed))
    mode = "own learned" if args.learn else "the exact GP's learned"
    size = "the map's own" if args.n_components is None else args.n_components
    print(f"{len(train)} training / {len(test)} test rows; approximations at {mode} "
          f"hyperparameters; n_components = {size}")
    print("| method | RMSE | NLPD | KL to exact (per test point) | fit time (s) |")
    print("|---|---|---|---|---|")
    for name, error, loss, kl, seconds in results:
        error, loss = (f"{v:.4f}" if abs(v) < 1e9 else f"{v:.4e}" for v in (error, loss))
        print(f"| {name} | {error} | {loss} | {kl:.3e} | {seconds:.2f} |")
