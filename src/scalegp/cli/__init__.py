"""The ``scalegp`` command line: fit, predict, evaluate, list, demo, experiment.

Exit codes (docs/guide/cli.md, "Exit codes"): 0 on success; 1 when the computation ran but
its result is not finite (a fit or prediction that overflowed,
:class:`~scalegp.errors.NonFiniteResultError`; nothing is written); 2 for every other error,
printed as one line on stderr (``--debug`` shows the traceback); 130 when interrupted. Warnings (e.g. the fit diagnostics: optimizer not
converged, worse than a noise-only model) are printed as ``scalegp COMMAND: warning: ...``
lines, each text once. Progress bars (tqdm) appear on long work when stderr is a terminal,
unless ``--quiet``.

This module holds the parser and :func:`main`; the commands are in :mod:`scalegp.cli.fit`
(``fit``), :mod:`scalegp.cli.predict` (``predict``, ``evaluate``) and :mod:`scalegp.cli.demo`,
with what they share in :mod:`scalegp.cli.common`.
"""

from __future__ import annotations

import argparse
import sys

from .. import experiments, features, kernels, local
from .._output import PNG_SUFFIXES, check_output_dir, check_output_path
from .._version import __version__
from ..data.readers import HEADER_MODES, HEADER_RULE, TableError
from ..errors import NonFiniteResultError
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from . import demo as demo_module
from .common import CommandError, _log, _warnings_as_lines, require_matplotlib
from .fit import command_fit
from .info import command_info
from .options import (DEFAULT_DIFFERENCES, add_flag, add_gibbs_flags, add_kernel_flags,
                      add_auto_flags, add_learning_flags, add_vecchia_flags, differences_epilog, int_at_least, parameter_default,
                      positive_float, thread_count)
from .predict import command_evaluate, command_predict


EXIT_NON_FINITE = 1


EXIT_USAGE = 2


#: How predict finds the model's input columns in its table (the help text of predict).
COLUMN_RULE = ("The model's input columns are found by name when the model and the table both "
               "have column names (other columns, e.g. the target, are ignored; a missing one "
               "is an error), otherwise by position (the table must have exactly the model's "
               "number of columns). With --header auto, a numeric first line that holds the "
               "model's (numeric) column names is read as the header.")


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


# --------------------------------------------------------------------------- argument types
def _open_interval(meaning: str):
    """An argparse type: a number strictly between 0 and 1; ``meaning`` says what it is in
    the error message."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
        if not 0 < value < 1:
            raise argparse.ArgumentTypeError(
                f"must lie strictly between 0 and 1 ({meaning}), got {text!r}")
        return value
    return parse


_open_fraction = _open_interval("a share of the rows")
_level = _open_interval("the level of a central interval: 0.9 for 90 %")


def command_list(args) -> None:
    print("approximations (use with --approximation NAME):")
    for name, text in features.describe().items():
        print(f"  {name:<18} {text}")
    print("  exact              the dense exact GP (reference; small data only)")
    print("  vecchia            the Vecchia approximation: each point conditioned on its m "
          "nearest predecessors (VecchiaGPRegressor; --n-neighbors M)")
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
    require_matplotlib("scalegp demo")
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
def _add_header_option(parser) -> None:
    parser.add_argument("--header", choices=HEADER_MODES, default="auto",
                        help=HEADER_RULE + " (default: %(default)s)")


def _add_approximation_flags(group, *, full: bool) -> None:
    add_flag(group, "n_components", "m, the number of features (or Nystrom knots)",
             type=int_at_least(1), default_text="the map's own: 256, or grown by glf's "
                                                "n_nodes=auto")
    add_flag(group, "option", "an option of the map's build (repeatable), e.g. --option "
             "n_nodes=auto", action="append", metavar="KEY=VALUE")
    if not full:
        return
    add_flag(group, "objective", "what learning maximizes (docs/nystrom.md): the DTC / subset-"
             "of-regressors likelihood, the FITC-style corrected one, or Titsias' VFE bound "
             "(nystrom only); predictions of fitc and vfe models, and of nystrom and "
             "random-projection under any objective, add the diagonal correction to the "
             "variance (predict --diag-correction)", choices=["dtc", "fitc", "vfe"])
    add_flag(group, "solver", "normal equations, or the QR variant that never forms "
             "Phi^T Phi (fixed-basis maps such as glf, float64)", choices=["cholesky", "qr"])
    add_flag(group, "signed_rule", "a quadrature rule with negative weights (sgq, ...): "
             "repair uses the positive part of its approximation, keep the indefinite rule "
             "as it is (needed with --noise-variance-column or --objective fitc); "
             "docs/positive-part.md", choices=["repair", "keep"])
    add_flag(group, "knots", "where the Nystrom knots start (docs/nystrom.md, section 2)",
             choices=["pivoted_cholesky", "random", "grid", "kmeans"])
    add_flag(group, "learn_knots", "with --objective vfe: L-BFGS-B iterations over the knots "
             "and the hyperparameters together (SGPR's inducing inputs; 0: keep the knots)",
             type=int_at_least(0))
    add_flag(group, "dtype", DTYPE_RULE, choices=["auto", "float64", "float32"])
    add_flag(group, "n_jobs", "threads sharing each pass's chunks, one BLAS thread each (-1: "
             "every core; none: one thread, BLAS's own threading); global models with "
             "--solver cholesky (docs/engine.md, \"Threads over chunks\")", type=thread_count)


def _add_local_flags(group) -> None:
    add_flag(group, "local", "a local (centred) model around the approximation "
             "(docs/local-models.md): test-points centres every test point on itself (the "
             "model file keeps the training data; each prediction costs a pass over it), "
             "clusters keeps one posterior per farthest-point centre and routes each test "
             "point to the nearest; learning maximizes the mean of the cluster centres' log "
             "marginal likelihoods; neighbors trains one GP per centre on its nearest "
             "training points (any approximation, or exact) and blends the nearest centres' "
             "predictions, learning on the sum of the local log marginal likelihoods",
             choices=sorted(local.LOCAL_KINDS))
    add_flag(group, "local_threshold", "clustering threshold, in length scales: every "
             "training input lies within T of a centre", type=positive_float, metavar="T")
    add_flag(group, "local_lazy", "keep only the centres test points need, conditioned at "
             "prediction (the model file keeps the training data)", action="store_true")
    add_flag(group, "local_reoptimize", "one feature map per centre, built on the training "
             "rows routed to it (the model file keeps the training data and rebuilds the "
             "maps)", action="store_true")
    add_flag(group, "local_neighbors", "training points per neighbourhood",
             type=int_at_least(1), metavar="K")
    add_flag(group, "local_learning_centers", "neighbourhoods drawn at random to learn the "
             "hyperparameters on", type=int_at_least(1), metavar="J")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scalegp", description="Gaussian process regression at scale.")
    parser.add_argument("--version", action="version", version=f"scalegp {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--quiet", action="store_true",
                        help="no progress output (default: off: bars on a terminal, and the "
                             "log on stderr)")
    common.add_argument("--debug", action="store_true",
                        help="show tracebacks on errors (default: off: one line per error)")
    common.add_argument("--seed", type=int, default=DEFAULT_DIFFERENCES["random_state"][0],
                        help="random seed (default: %(default)s; the estimators' random_state "
                             "is None: " + DEFAULT_DIFFERENCES["random_state"][1] + ")")
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", parents=[common], help="fit a model to a table",
                         epilog=differences_epilog(),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    data = fit.add_argument_group("data")
    data.add_argument("data", help="CSV, .npy, .npz or Parquet file, or - for CSV on standard "
                      "input (read once into memory, where the fit's passes parse it; the "
                      "binary formats need a file, and so does --dask-scheduler)")
    data.add_argument("--target", required=True, help="target column: name or 0-based index")
    data.add_argument("--noise-variance-column", metavar="COLUMN",
                      help="a column of known per-row noise variances (measurement errors, "
                           ">= 0, in target units squared), added to the learned noise "
                           "variance; not an input (name or 0-based index) (default: none)")
    data.add_argument("--drop-missing", action="store_true",
                      help="drop rows with missing values instead of failing (default: off)")
    _add_header_option(data)
    model = fit.add_argument_group("model")
    model.add_argument("--approximation", default=None,
                       help="auto (the library chooses within --time-budget), the feature map "
                            "(see `scalegp list`), exact, or vecchia (case-insensitive) "
                            "(default: auto; with --local, "
                            f"{parameter_default(LowRankGPRegressor, 'approximation')}; with "
                            f"--sampler gibbs, {parameter_default(GibbsGPRegressor, 'approximation')}"
                            ": the estimators' defaults)")
    _add_approximation_flags(model, full=True)
    add_auto_flags(fit.add_argument_group("choosing the model (--approximation auto)"))
    add_vecchia_flags(fit.add_argument_group("Vecchia (--approximation vecchia)"))
    _add_local_flags(fit.add_argument_group("local models (--local)"))
    add_kernel_flags(fit.add_argument_group("kernel"))
    add_learning_flags(fit.add_argument_group("learning"))
    sampler = fit.add_argument_group("sampler (--sampler gibbs)")
    sampler.add_argument("--sampler", choices=["optimize", "gibbs"], default="optimize",
                         help="optimize: learn the hyperparameters by maximum likelihood; "
                              "gibbs: sample them (tau, theta2, theta1 on a grid) by the Gibbs "
                              "sampler of Banerjee, Dunson & Tokdar (docs/gibbs.md) (default: "
                              "%(default)s)")
    add_gibbs_flags(sampler)
    dask = fit.add_argument_group("distributed (--dask-scheduler)")
    dask.add_argument("--dask-scheduler", metavar="ADDRESS",
                      help="fit on a Dask cluster (e.g. tcp://HOST:8786; needs pip install "
                           "'scalegp[dask]'): the workers read DATA (CSV, .npy or Parquet) at "
                           "the same path, so it must be readable there, and every pass runs "
                           "on them; global low-rank models with a map built from the "
                           "bounding box only (docs/distributed.md) (default: none, fit here)")
    dask.add_argument("--dask-block-rows", type=int_at_least(1), default=1_000_000,
                      metavar="ROWS", help="with --dask-scheduler: rows per block (task) read "
                                           "by a worker; a CSV block is about this many rows, "
                                           "by bytes (default: %(default)s)")
    dask.add_argument("--dask-timeout", type=positive_float, default=10.0, metavar="SECONDS",
                      help="with --dask-scheduler: how long to wait for the scheduler "
                           "(default: %(default)s)")
    output = fit.add_argument_group("output")
    output.add_argument("--out", required=True, metavar="MODEL.npz",
                        help="model file to write (.npz; required: scalegp writes no file you "
                             "did not name); checked before the fit. " + OUT_RULES)
    fit.set_defaults(handler=command_fit)

    predict = sub.add_parser("predict", parents=[common], help="predict with a saved model",
                             description=COLUMN_RULE)
    data = predict.add_argument_group("data")
    data.add_argument("model", help="a model file written by `scalegp fit` (.npz)")
    data.add_argument("data", help="CSV, .npy, .npz or Parquet file of inputs, or - for "
                         "CSV on standard input")
    _add_header_option(data)
    prediction = predict.add_argument_group("prediction")
    output = predict.add_argument_group("output")
    output.add_argument("--out", default="-", metavar="FILE.csv",
                         help="predictions to write (.csv, columns mean and std, and those of "
                              "--interval); must not be "
                              "the model or the data. Without --out, or with --out -, the CSV "
                              "goes to standard output (nothing else does: messages go to "
                              "stderr; after an error, exit code not 0, the rows written so "
                              "far may be incomplete). " + OUT_RULES + " (default: -)")
    prediction.add_argument("--include-noise", action="store_true",
                         help="std of a new noisy observation instead of the latent function "
                              "(default: off)")
    prediction.add_argument("--interval", type=_level, default=None, metavar="LEVEL",
                         help="add the columns lower_P and upper_P (P = 100 LEVEL) of the "
                              "central predictive interval, of the latent function or with "
                              "--include-noise of a new observation: mean +- z std for a "
                              "Gaussian predictive, the model's own quantiles for a Gibbs "
                              "model (a mixture over draws) and for a calibrated predictive "
                              "variance (a scale mixture). (default: 0.95 for those two, whose "
                              "interval is not mean +- 1.96 std; none for other models)")
    prediction.add_argument("--diag-correction", action=argparse.BooleanOptionalAction,
                         default=None,
                         help="global low-rank models (predict's diag_correction): add the "
                              "prior variance the model misses, max(k(x, x) - q(x, x), 0), "
                              "to the std (the DTC / FITC / SGPR predictive), or not (the "
                              "subset-of-regressors std, which vanishes away from Nystrom "
                              "knots); default: the model's own, on for nystrom and "
                              "random-projection and for the fitc and vfe objectives")
    output.add_argument("--plot", default=None, metavar="FILE.png",
                         help="also draw the predictions for the table's rows (.png): one "
                              "input, the mean and 95 %% band with the rows as points; two "
                              "inputs, maps of mean and std; more, a calibration plot if the "
                              "table has the model's target column, else the learned length "
                              "scales. Checked before any work, like --out. " + OUT_RULES
                              + " (default: no figure)")
    predict.set_defaults(handler=command_predict)

    evaluate = sub.add_parser("evaluate", parents=[common],
                              help="compare approximations against the exact GP on a subsample",
                              epilog=differences_epilog(),
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    data = evaluate.add_argument_group("data")
    data.add_argument("data", help="CSV, .npy, .npz or Parquet file, or - for CSV on standard "
                      "input (read once into memory)")
    data.add_argument("--target", required=True, help="target column: name or 0-based index")
    data.add_argument("--drop-missing", action="store_true",
                      help="drop rows with missing values instead of failing (default: off)")
    _add_header_option(data)
    data.add_argument("--subsample", type=int_at_least(2), default=2000,
                      help="rows drawn for the comparison, at least 2: one to train, one to "
                           "test (default: %(default)s)")
    data.add_argument("--test-fraction", type=_open_fraction, default=0.2,
                      help="share of the subsample held out, strictly between 0 and 1, at "
                           "least one row each for training and testing (default: "
                           "%(default)s)")
    model = evaluate.add_argument_group("model")
    model.add_argument("--approximations",
                       default=parameter_default(LowRankGPRegressor, "approximation"),
                       help="comma-separated names, e.g. rff,glf (default: %(default)s)")
    _add_approximation_flags(model, full=False)
    model.add_argument("--learn", action="store_true",
                       help="each approximation learns its own hyperparameters (default: "
                            "off: they use the exact GP's)")
    add_kernel_flags(evaluate.add_argument_group("kernel"))
    add_learning_flags(evaluate.add_argument_group("learning"))
    evaluate.set_defaults(handler=command_evaluate)

    info = sub.add_parser("info", parents=[common], help="show what a model file holds",
                          description="The estimator, its parameters, the fitted kernel and "
                                      "noise, the table columns and, for a model chosen by "
                                      "--approximation auto, the table of the choice.")
    info.add_argument("model", metavar="MODEL.npz", help="a model file written by scalegp fit")
    info.set_defaults(handler=command_info)
    listing = sub.add_parser("list", parents=[common], help="list approximations and kernels")
    listing.set_defaults(handler=command_list)

    demo = sub.add_parser("demo", parents=[common],
                          help="fit the embedded East Africa relief map and draw it")
    demo.add_argument("--model", choices=["vecchia", "neighbors", "global"],
                      default="vecchia",
                      help="vecchia (default): the Vecchia approximation of the GP on every "
                           "training point; neighbors: exact GPs on the neighbourhoods of "
                           "every training point, blended; global: one low-rank GP "
                           "(Gauss-Legendre features by default) on --subsample points")
    demo.add_argument("--subsample", type=int, default=None,
                      help="training points drawn from the 82,800-point map without its "
                           "5,000 test points (default: all 77,800 for vecchia and "
                           "neighbors, 20,000 for global)")
    demo.add_argument("--n-components", type=int_at_least(1), default=2048,
                      help="feature budget of a low-rank model (default: %(default)s)")
    demo.add_argument("--approximation", default=None,
                      help="the map (default: exact local GPs for neighbors, glf for global)")
    demo.add_argument("--local-neighbors", type=int_at_least(1), default=300, metavar="K",
                      help="training points per neighbourhood of --model neighbors (default: "
                           "%(default)s)")
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
    experiment.add_argument("--quick", action="store_true",
                            help="reduced sizes (default: off: the paper's sizes)")
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
