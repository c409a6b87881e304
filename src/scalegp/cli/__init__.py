"""The ``scalegp`` command line: fit, predict, evaluate, list, demo, experiment.

Exit codes: 0 on success; 1 when the computation ran but its result is not finite (a fit
or prediction that overflowed, :class:`~scalegp.errors.NonFiniteResultError`; nothing is
written); 2 for every other error, printed as one line on stderr (``--debug`` shows the
traceback); 130 when interrupted. Warnings (e.g. the fit diagnostics: optimizer not
converged, worse than a noise-only model) are printed as ``scalegp COMMAND: warning: ...``
lines, each text once. Progress bars (tqdm) appear on long work when stderr is a terminal,
unless ``--quiet``.

This module holds the parser and :func:`main`; the commands are in :mod:`scalegp.cli.fit`
(``fit``), :mod:`scalegp.cli.predict` (``predict``, ``evaluate``) and :mod:`scalegp.cli.demo`,
with what they share in :mod:`scalegp.cli.common`.
"""

from __future__ import annotations

import argparse
import math
import sys

from .. import experiments, features, kernels, local
from .._limits import MAX_GIBBS_SWEEPS, MAX_RESTARTS, MAX_THETA1_ATOMS
from .._output import PNG_SUFFIXES, check_output_dir, check_output_path
from .._version import __version__
from ..data.readers import HEADER_MODES, HEADER_RULE, TableError
from ..errors import NonFiniteResultError
from ..parallel import resolve_n_jobs
from . import demo as demo_module
from .common import CommandError, _log, _warnings_as_lines
from .fit import command_fit
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
def _add_model_options(parser) -> None:
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
    predict.add_argument("data", help="CSV, .npy, .npz or Parquet file of inputs, or - for "
                         "CSV on standard input")
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
