"""The ``scalegp`` command line: fit, predict, evaluate, list, demo, experiment.

Errors are one line on stderr and exit code 2 (``--debug`` shows the traceback). Progress
bars (tqdm) appear on long work when stderr is a terminal, unless ``--quiet``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager

import numpy as np

from . import __version__, experiments, features, kernels
from .tables import TableError, missing_rows, read_table, write_csv

EXIT_USAGE = 2


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2."""


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


@contextmanager
def _progress(args, total: int, description: str):
    """A tqdm bar as a ``progress(rows_done)`` callback, or None when quiet / not a terminal."""
    if args.quiet or not sys.stderr.isatty():
        yield None
        return
    from tqdm import tqdm
    with tqdm(total=total, desc=description, unit="rows", file=sys.stderr, leave=False) as bar:
        def update(rows_done):
            if rows_done < bar.n:          # a new pass over the data
                bar.reset()
            bar.update(rows_done - bar.n)
        yield update


def _load_training_data(args):
    table = read_table(args.data)
    X, y, names = table.split_target(args.target)
    values = np.column_stack([X, y])
    bad = missing_rows(values)
    if bad.size:
        if not args.drop_missing:
            raise CommandError(
                f"{args.data}: data row {bad[0] + 1} has a missing or non-finite value "
                f"({bad.size} such row(s)); fix the data or pass --drop-missing"
            )
        _log(args, f"dropped {bad.size} row(s) with missing values")
        keep = np.setdiff1d(np.arange(len(y)), bad)
        X, y = X[keep], y[keep]
    if len(y) < 2:
        raise CommandError(f"{args.data}: need at least 2 complete rows, got {len(y)}")
    return X, y, names, table.columns[table.column_index(args.target)]


def _kernel_from_args(args, n_dims: int):
    scale = np.ones(n_dims) if args.ard else 1.0
    bounds = tuple(args.length_scale_bounds)
    return kernels.get(args.kernel, length_scale=scale, length_scale_bounds=bounds,
                       variance_bounds=tuple(args.variance_bounds))


def _make_estimator(args, n_dims: int):
    from .estimator import ExactGPRegressor, LowRankGPRegressor
    kernel = _kernel_from_args(args, n_dims)
    common = dict(kernel=kernel, noise_variance=args.noise_variance,
                  noise_variance_bounds=tuple(args.noise_variance_bounds),
                  optimize=not args.no_optimize,
                  n_restarts=args.n_restarts, normalize_y=not args.no_normalize_y,
                  random_state=args.seed)
    if args.approximation == "exact":
        return ExactGPRegressor(**common)
    features.get(args.approximation)       # clear error for an unknown name
    return LowRankGPRegressor(approximation=args.approximation, n_components=args.n_components,
                              approximation_options=_parse_options(args.option),
                              dtype=args.dtype, **common)


def _fit(args, estimator, X, y):
    with _progress(args, len(y), "accumulating") as progress:
        estimator.fit(X, y, progress=progress)
    return estimator


# --------------------------------------------------------------------------- commands
def command_fit(args) -> None:
    from .io import save
    X, y, names, target = _load_training_data(args)
    estimator = _make_estimator(args, X.shape[1])
    start = time.perf_counter()
    _fit(args, estimator, X, y)
    elapsed = time.perf_counter() - start
    estimator.input_columns_ = list(names)
    estimator.target_column_ = target
    save(estimator, args.out)
    _log(args, f"fitted {args.approximation} on {len(y)} rows x {X.shape[1]} inputs in "
               f"{elapsed:.2f} s; log marginal likelihood "
               f"{estimator.log_marginal_likelihood_value_:.4f}; kernel {estimator.kernel_}, "
               f"noise_variance {estimator.noise_variance_:.4g}; model written to {args.out}")


def command_predict(args) -> None:
    from .io import load
    model = load(args.model)
    table = read_table(args.data)
    columns = getattr(model, "input_columns_", None)
    if columns and all(name in table.columns for name in columns):
        X = table.select(columns)
    elif table.values.shape[1] == model.n_features_in_:
        X = table.values
    else:
        raise CommandError(
            f"{args.data}: expected the model's {model.n_features_in_} input column(s) "
            f"{', '.join(columns or [])}, found {', '.join(table.columns)}"
        )
    bad = missing_rows(X)
    if bad.size:
        raise CommandError(f"{args.data}: data row {bad[0] + 1} has a missing or non-finite "
                           f"value ({bad.size} such row(s))")
    mean, std = model.predict(X, return_std=True, include_noise=args.include_noise)
    write_csv(args.out, ["mean", "std"], np.column_stack([mean, std]))
    _log(args, f"wrote {len(mean)} predictions (mean, std) to {args.out}")


def command_evaluate(args) -> None:
    from .estimator import ExactGPRegressor, LowRankGPRegressor
    from .metrics import kl_divergence_factorized, nlpd, rmse
    X, y, _, _ = _load_training_data(args)
    rng = np.random.default_rng(args.seed)
    n = min(args.subsample, len(y))
    rows = rng.permutation(len(y))[:n]
    n_test = max(1, int(round(args.test_fraction * n)))
    test, train = rows[:n_test], rows[n_test:]
    kernel = _kernel_from_args(args, X.shape[1])
    start = time.perf_counter()
    noise_bounds = tuple(args.noise_variance_bounds)
    exact = ExactGPRegressor(kernel=kernel, noise_variance=args.noise_variance,
                             noise_variance_bounds=noise_bounds,
                             optimize=not args.no_optimize, normalize_y=True,
                             random_state=args.seed).fit(X[train], y[train])
    exact_time = time.perf_counter() - start
    exact_mean, exact_std = exact.predict(X[test], return_std=True, include_noise=True)
    results = [("exact", rmse(y[test], exact_mean), nlpd(y[test], exact_mean, exact_std**2),
                0.0, exact_time)]
    for name in args.approximations.split(","):
        features.get(name)
        options = _parse_options(args.option) if len(args.approximations.split(",")) == 1 else {}
        start = time.perf_counter()
        approx = LowRankGPRegressor(
            approximation=name, n_components=args.n_components,
            kernel=exact.kernel_ if not args.learn else kernel,
            noise_variance=exact.noise_variance_ if not args.learn else args.noise_variance,
            noise_variance_bounds=noise_bounds, optimize=args.learn, normalize_y=True, approximation_options=options,
            random_state=args.seed).fit(X[train], y[train])
        elapsed = time.perf_counter() - start
        mean, std = approx.predict(X[test], return_std=True, include_noise=True)
        kl = kl_divergence_factorized(mean, std**2, exact_mean, exact_std**2) / len(test)
        results.append((name, rmse(y[test], mean), nlpd(y[test], mean, std**2), kl, elapsed))
    mode = "own learned" if args.learn else "the exact GP's learned"
    print(f"{len(train)} training / {len(test)} test rows; approximations at {mode} "
          f"hyperparameters; n_components = {args.n_components}")
    print("| method | RMSE | NLPD | KL to exact (per test point) | fit time (s) |")
    print("|---|---|---|---|---|")
    for name, error, loss, kl, seconds in results:
        print(f"| {name} | {error:.4f} | {loss:.4f} | {kl:.3e} | {seconds:.2f} |")


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
    from .demo import run_demo
    run_demo(subsample=args.subsample, n_components=args.n_components,
             approximation=args.approximation, out=args.out, seed=args.seed,
             log=lambda message: _log(args, message) if not args.quiet else None)


def command_experiment(args) -> None:
    written = experiments.run(args.name, args.out_dir, quick=args.quick)
    for path in written:
        print(path)


# --------------------------------------------------------------------------- parser
def _add_model_options(parser, *, approximation_default="rff") -> None:
    parser.add_argument("--kernel", default="matern52",
                        help="gaussian, matern12, matern32, matern52, cauchy, laplacian or "
                             "reciprocal_semigroup (see `scalegp list`)")
    parser.add_argument("--ard", action="store_true", help="one length scale per input")
    parser.add_argument("--noise-variance", type=float, default=0.1,
                        help="initial noise variance (of the standardized target)")
    parser.add_argument("--length-scale-bounds", type=float, nargs=2, default=(1e-2, 1e3),
                        metavar=("LOW", "HIGH"))
    parser.add_argument("--variance-bounds", type=float, nargs=2, default=(1e-3, 1e3),
                        metavar=("LOW", "HIGH"))
    parser.add_argument("--noise-variance-bounds", type=float, nargs=2, default=(1e-6, 1e5),
                        metavar=("LOW", "HIGH"),
                        help="box of the noise variance (its lower end also sets the "
                             "truncation of glf)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="keep the initial hyperparameters")
    parser.add_argument("--n-restarts", type=int, default=0)
    parser.add_argument("--no-normalize-y", action="store_true")
    parser.add_argument("--option", action="append", metavar="KEY=VALUE",
                        help="approximation option (repeatable), e.g. --option n_nodes=auto")


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
    fit.add_argument("--approximation", default="rff", help="see `scalegp list`; or exact")
    fit.add_argument("--n-components", type=int, default=256)
    fit.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    fit.add_argument("--drop-missing", action="store_true",
                     help="drop rows with missing values instead of failing")
    fit.add_argument("--out", default="model.npz", help="model file to write")
    _add_model_options(fit)
    fit.set_defaults(handler=command_fit)

    predict = sub.add_parser("predict", parents=[common], help="predict with a saved model")
    predict.add_argument("model")
    predict.add_argument("data")
    predict.add_argument("--out", default="predictions.csv")
    predict.add_argument("--include-noise", action="store_true",
                         help="std of a new noisy observation instead of the latent function")
    predict.set_defaults(handler=command_predict)

    evaluate = sub.add_parser("evaluate", parents=[common],
                              help="compare approximations against the exact GP on a subsample")
    evaluate.add_argument("data")
    evaluate.add_argument("--target", required=True)
    evaluate.add_argument("--approximations", default="rff",
                          help="comma-separated names, e.g. rff,glf")
    evaluate.add_argument("--n-components", type=int, default=256)
    evaluate.add_argument("--subsample", type=int, default=2000)
    evaluate.add_argument("--test-fraction", type=float, default=0.2)
    evaluate.add_argument("--learn", action="store_true",
                          help="each approximation learns its own hyperparameters")
    evaluate.add_argument("--drop-missing", action="store_true")
    _add_model_options(evaluate)
    evaluate.set_defaults(handler=command_evaluate)

    listing = sub.add_parser("list", parents=[common], help="list approximations and kernels")
    listing.set_defaults(handler=command_list)

    demo = sub.add_parser("demo", parents=[common],
                          help="fit the embedded East Africa relief map and draw it")
    demo.add_argument("--subsample", type=int, default=20000,
                      help="training points drawn from the 82,800-point map")
    demo.add_argument("--n-components", type=int, default=2048)
    demo.add_argument("--approximation", default="glf")
    demo.add_argument("--out", default="scalegp-demo.png")
    demo.set_defaults(handler=command_demo)

    experiment = sub.add_parser("experiment", parents=[common],
                                help="regenerate a paper's figures and tables")
    experiment.add_argument("name", help="see `scalegp list`")
    experiment.add_argument("--out-dir", default="experiment-output")
    experiment.add_argument("--quick", action="store_true", help="reduced sizes")
    experiment.set_defaults(handler=command_experiment)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.handler(args)
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
