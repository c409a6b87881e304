"""The model options of ``scalegp fit`` and ``scalegp evaluate``, declared once against the
parameters they set.

Every model flag is a :class:`Flag`: the objects that own its parameter (an estimator, or a
configuration object of :mod:`scalegp.estimators.configuration`) and the parameter's name.
From the declaration come

- its default, read from the owner's signature (so the command line and the estimators
  cannot disagree), except for the deliberate differences of :data:`DEFAULT_DIFFERENCES`,
  the one table of them (also printed by ``scalegp fit --help``);
- its help text's "(default: ...)";
- the check that it is not ignored: a flag given to a configuration whose objects do not
  own it (``--local-neighbors`` without ``--local neighbors``, ``--n-iter`` without
  ``--sampler gibbs``) is an error, never silently dropped.

``tests/test_cli_declarations.py`` checks the other direction: every parameter of the
estimators and configuration objects has a flag here or a reason in :data:`NOT_ON_THE_CLI`.
"""

from __future__ import annotations

import argparse
import inspect
import math
from dataclasses import dataclass

import numpy as np

from .. import features, kernels
from .._limits import MAX_GIBBS_SWEEPS, MAX_RESTARTS, MAX_THETA1_ATOMS
from ..estimators import configuration
from ..estimators.configuration import Clusters, Features, Neighbors, Nystrom, TestPoints
from ..estimators.exact import ExactGPRegressor
from ..estimators.gibbs import GibbsGPRegressor
from ..estimators.gp_regressor import GPRegressor
from ..estimators.lowrank import LowRankGPRegressor
from ..estimators.vecchia import VecchiaGPRegressor
from ..vecchia import ORDERINGS
from ..vecchia.learning import OPTIMIZERS as VECCHIA_OPTIMIZERS
from .common import CommandError, _parse_options


#: The parameters whose command-line default differs from the estimator's, with the reason.
DEFAULT_DIFFERENCES = {
    "random_state": (0, "the command line is reproducible by default (--seed 0); the "
                        "estimators follow scikit-learn (random_state=None)"),
    "dtype": ("auto", "the command line picks float32 for very large fits (--dtype auto); "
                      "the estimators compute in float64 unless asked"),
}


#: Parameters that have no flag of their own, and why.
NOT_ON_THE_CLI = {
    (GibbsGPRegressor, "verbose"): "the command line shows progress bars on a terminal "
                                   "unless --quiet",
    (LowRankGPRegressor, "kernel"): "set by --kernel, --ard, --length-scale, --variance and "
                                    "their bounds",
    (ExactGPRegressor, "kernel"): "set by the kernel flags",
    (GibbsGPRegressor, "kernel"): "set by --kernel",
    (LowRankGPRegressor, "approximation"): "--approximation NAME with the model group's flags",
    (GibbsGPRegressor, "approximation"): "--approximation NAME with the model group's flags",
    (Features, "name"): "--approximation NAME",
    (GPRegressor, "approximation"): "--approximation auto (the default) or another NAME",
    (GPRegressor, "local"): "auto chooses neighbourhood models itself; --local with an "
                            "explicit --approximation",
    (GPRegressor, "kernel"): "--kernel (the family, one length scale per input); the other "
                             "kernel flags choose a fixed kernel start, refused under auto",
    (VecchiaGPRegressor, "kernel"): "set by the kernel flags",
}


ESTIMATORS = (GPRegressor, LowRankGPRegressor, ExactGPRegressor, GibbsGPRegressor,
              VecchiaGPRegressor)
APPROXIMATION_CONFIGURATIONS = (Features, Nystrom)
LOCAL_CONFIGURATIONS = (TestPoints, Clusters, Neighbors)
REGRESSORS = (LowRankGPRegressor, ExactGPRegressor, VecchiaGPRegressor)
#: The models that are not a feature map (``--approximation NAME``): the dense exact GP (or
#: exact local GPs with ``--local neighbors``) and the Vecchia approximation.
NOT_FEATURE_MAPS = ("auto", "exact", "vecchia")


@dataclass(frozen=True)
class Flag:
    """One model flag: ``flag`` sets ``parameter`` of whichever of ``owners`` the chosen
    configuration holds (``negated``: a ``--no-...`` switch that sets it False)."""

    flag: str
    owners: tuple
    parameter: str
    negated: bool = False

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def default(self):
        """The owner's default (every owner has the same one; the test checks), or the
        declared difference."""
        if self.parameter in DEFAULT_DIFFERENCES:
            return DEFAULT_DIFFERENCES[self.parameter][0]
        return parameter_default(self.owners[0], self.parameter)

    def owner_names(self) -> str:
        return " / ".join(_owner_name(owner) for owner in self.owners)


def parameter_default(owner, name: str):
    return inspect.signature(owner.__init__).parameters[name].default


def _owner_name(owner) -> str:
    return {LowRankGPRegressor: "low-rank and local models", ExactGPRegressor: "the exact GP",
            GibbsGPRegressor: "--sampler gibbs", Features: "feature maps",
            Nystrom: "--approximation nystrom", TestPoints: "--local test-points",
            Clusters: "--local clusters", Neighbors: "--local neighbors",
            VecchiaGPRegressor: "--approximation vecchia",
            GPRegressor: "--approximation auto"}[owner]


FLAGS = (
    # the approximation
    Flag("--n-components", APPROXIMATION_CONFIGURATIONS, "n_components"),
    Flag("--objective", APPROXIMATION_CONFIGURATIONS, "objective"),
    Flag("--option", APPROXIMATION_CONFIGURATIONS, "options"),
    Flag("--solver", (Features,), "solver"),
    Flag("--signed-rule", (Features,), "signed_rule"),
    Flag("--knots", (Nystrom,), "knots"),
    Flag("--learn-knots", (Nystrom,), "learn_knots"),
    # local models
    Flag("--local", (LowRankGPRegressor,), "local"),
    Flag("--local-threshold", (TestPoints, Clusters), "threshold"),
    Flag("--local-lazy", (Clusters,), "lazy"),
    Flag("--local-reoptimize", (Clusters,), "reoptimize"),
    Flag("--local-neighbors", (Neighbors,), "n_neighbors"),
    Flag("--local-learning-centers", (Neighbors,), "learning_centers"),
    # learning
    Flag("--noise-variance", (GPRegressor,) + REGRESSORS, "noise_variance"),
    Flag("--noise-variance-bounds", REGRESSORS, "noise_variance_bounds"),
    Flag("--no-optimize", REGRESSORS, "optimize", negated=True),
    Flag("--n-restarts", REGRESSORS, "n_restarts"),
    Flag("--no-normalize-y", ESTIMATORS, "normalize_y", negated=True),
    Flag("--no-standardize", ESTIMATORS, "normalize_X", negated=True),
    Flag("--seed", ESTIMATORS, "random_state"),
    Flag("--dtype", (LowRankGPRegressor,), "dtype"),
    Flag("--n-jobs", (LowRankGPRegressor, VecchiaGPRegressor), "n_jobs"),
    # the Vecchia approximation
    Flag("--n-neighbors", (VecchiaGPRegressor,), "n_neighbors"),
    Flag("--n-neighbors-predict", (VecchiaGPRegressor,), "n_neighbors_predict"),
    Flag("--ordering", (VecchiaGPRegressor,), "ordering"),
    Flag("--optimizer", (VecchiaGPRegressor,), "optimizer"),
    Flag("--learning-schedule", (VecchiaGPRegressor,), "learning_schedule"),
    Flag("--learning-tolerance", (VecchiaGPRegressor,), "learning_tolerance"),
    # approximation="auto"
    Flag("--time-budget", (GPRegressor,), "time_budget"),
    Flag("--memory-budget", (GPRegressor,), "memory_budget"),
    Flag("--tolerance", (GPRegressor,), "tolerance"),
    Flag("--no-variance-calibration", (GPRegressor,), "calibrate_variance", negated=True),
    Flag("--no-nugget-split", (GPRegressor,), "split_nugget", negated=True),
    # the Gibbs sampler
    Flag("--n-iter", (GibbsGPRegressor,), "n_iter"),
    Flag("--burn-in", (GibbsGPRegressor,), "burn_in"),
    Flag("--thin", (GibbsGPRegressor,), "thin"),
    Flag("--theta1-grid", (GibbsGPRegressor,), "theta1_grid"),
    Flag("--tau-prior", (GibbsGPRegressor,), "tau_prior"),
    Flag("--theta2-prior", (GibbsGPRegressor,), "theta2_prior"),
    Flag("--no-collapsed", (GibbsGPRegressor,), "collapsed", negated=True),
    Flag("--diag-correction", (GibbsGPRegressor,), "diag_correction"),
    Flag("--map-per-atom", (GibbsGPRegressor,), "map_per_atom"),
    Flag("--feature-cache-bytes", (GibbsGPRegressor,), "feature_cache_bytes"),
)
FLAGS_BY_DEST = {flag.dest: flag for flag in FLAGS}


# --------------------------------------------------------------------------- argument types
def int_at_least(minimum: int):
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


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def count_or_auto(text: str):
    """An argparse type: an integer >= 1, or "auto"."""
    if text.lower() == "auto":
        return "auto"
    try:
        return int_at_least(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1 or 'auto', got {text!r}") from None


def stage_size(text: str):
    """An argparse type: a learning stage's size, an integer >= 1 or "all" (None)."""
    if text.lower() == "all":
        return None
    try:
        return int_at_least(1)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1 or 'all', got {text!r}") from None


def thread_count(text: str) -> int:
    """An argparse type: n_jobs, a nonzero integer (-1: every core)."""
    from ..parallel import resolve_n_jobs
    try:
        return resolve_n_jobs(int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a nonzero integer (-1: every core), got {text!r}") from None


def _shown(value) -> str:
    if isinstance(value, tuple):
        return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    if value is None:
        return "none"
    return str(value)


def add_flag(group, dest: str, help: str, *, default_text: str | None = None, **kwargs):
    """Add the declared flag ``dest`` to ``group``: default None (so a given flag can be
    told from an absent one), and its help ending in the declared default."""
    flag = FLAGS_BY_DEST[dest]
    if flag.negated or kwargs.get("action") == "store_true":
        kwargs.setdefault("action", "store_true")
        shown = "off" if flag.negated else ("on" if flag.default() else "off")
    else:
        shown = default_text if default_text is not None else _shown(flag.default())
    note = ""
    if flag.parameter in DEFAULT_DIFFERENCES:
        note = " (differs from the estimators': see `scalegp fit --help`)"
    group.add_argument(flag.flag, dest=dest, default=None,
                       help=f"{help} [{flag.owner_names()}; default: {shown}]{note}", **kwargs)


def differences_epilog() -> str:
    rows = [f"  {name}: {value!r} here; {reason}"
            for name, (value, reason) in DEFAULT_DIFFERENCES.items()]
    return ("Defaults are the estimators' (LowRankGPRegressor, ExactGPRegressor, "
            "GibbsGPRegressor, VecchiaGPRegressor and the configuration objects), except:\n" + "\n".join(rows))


# --------------------------------------------------------------------------- the estimator
def _given(args) -> dict:
    """dest -> value of the declared flags given on the command line."""
    return {dest: getattr(args, dest) for dest in FLAGS_BY_DEST
            if getattr(args, dest, None) is not None}


def approximation_name(text: str) -> str:
    """The registered name of an approximation (case-insensitive), or one of
    :data:`NOT_FEATURE_MAPS` ("exact", "vecchia")."""
    return text.lower() if text.lower() in NOT_FEATURE_MAPS else features.get(text).name


def _value(flag: Flag, value):
    if flag.negated:
        return not value
    if flag.parameter == "options":
        return _parse_options(value) or None
    if flag.parameter in ("noise_variance_bounds", "tau_prior", "theta2_prior"):
        return tuple(value)
    if flag.parameter == "theta1_grid":
        return theta1_grid(value)
    if flag.parameter == "learning_schedule":
        return tuple(value)
    return value


def theta1_grid(triple):
    start, stop, count = triple
    if not (count >= 1 and count == int(count)):
        raise CommandError(f"--theta1-grid COUNT must be a positive integer, got {count!r}")
    if count > MAX_THETA1_ATOMS:                     # before linspace allocates it
        raise CommandError(f"--theta1-grid COUNT={count:.0f} is above its limit of "
                           f"{MAX_THETA1_ATOMS:,} atoms (one feature map and one m x m "
                           "factor per atom)")
    return np.linspace(start, stop, int(count))


def fill_approximation(args) -> None:
    """``--approximation`` when not given: ``auto`` (:class:`scalegp.GPRegressor` chooses),
    or the estimator's default where another flag chose the estimator (GibbsGPRegressor's
    with ``--sampler gibbs``, LowRankGPRegressor's with ``--local``)."""
    if getattr(args, "approximation", None) is None:
        if getattr(args, "sampler", "optimize") == "gibbs":
            args.approximation = parameter_default(GibbsGPRegressor, "approximation")
        elif getattr(args, "local", None) is not None:
            args.approximation = parameter_default(LowRankGPRegressor, "approximation")
        else:
            args.approximation = parameter_default(GPRegressor, "approximation")


def chosen_parts(args) -> tuple:
    """(estimator class, approximation configuration class or None, local configuration
    class or None) that the command line's flags choose."""
    fill_approximation(args)
    name = approximation_name(args.approximation)
    kind = getattr(args, "local", None)
    local_class = None if kind is None else type(configuration.as_local(kind))
    if getattr(args, "sampler", "optimize") == "gibbs":
        estimator = GibbsGPRegressor
    elif name == "auto":
        estimator = GPRegressor
    elif name == "exact" and kind is None:
        estimator = ExactGPRegressor
    elif name == "vecchia":
        estimator = VecchiaGPRegressor
    else:
        estimator = LowRankGPRegressor
    approximation = (None if name in NOT_FEATURE_MAPS
                     else type(configuration.as_approximation(name)))
    return estimator, approximation, local_class


def model_arguments(args) -> tuple:
    """(estimator class, its keyword arguments but the kernel, the approximation's options,
    the local model's options) from the declared flags; a flag that the chosen parts do not
    read is a CommandError naming it and what it applies to."""
    estimator, approximation, local_class = chosen_parts(args)
    chosen = {estimator, approximation, local_class} - {None}
    parts = {estimator: {}, approximation: {}, local_class: {}}
    for dest, value in _given(args).items():
        flag = FLAGS_BY_DEST[dest]
        owner = next((owner for owner in flag.owners if owner in chosen), None)
        if owner is None:
            raise CommandError(
                f"{flag.flag} applies to {flag.owner_names()}; with "
                f"{describe_choice(args)} it would be ignored")
        parts[owner][flag.parameter] = _value(flag, value)
    for name, (value, _) in DEFAULT_DIFFERENCES.items():
        dest = next(flag.dest for flag in FLAGS if flag.parameter == name)
        if estimator in FLAGS_BY_DEST[dest].owners and dest not in _given(args):
            parts[estimator][name] = value
    return estimator, parts[estimator], parts[approximation], parts[local_class]


def describe_choice(args) -> str:
    sampler = getattr(args, "sampler", "optimize")
    words = [f"--approximation {args.approximation}"]
    if getattr(args, "local", None) is not None:
        words.append(f"--local {args.local}")
    if sampler == "gibbs":
        words.append("--sampler gibbs")
    return " ".join(words)


def kernel_name(args) -> str:
    """--kernel, or the explicit estimators' default family where it is not given (under
    --approximation auto no name lets auto compare the families)."""
    return parameter_default(LowRankGPRegressor, "kernel") if args.kernel is None else \
        args.kernel


def kernel_from_args(args, n_dims: int):
    """The starting kernel: --kernel with its bounds (the kernel's own unless given), and
    --length-scale / --variance (each checked inside its bounds) or the kernel's default
    start (1), or the bounds' geometric mean when 1 lies outside them."""
    family = kernels.get(kernel_name(args))
    length_bounds = (tuple(family.length_scale_bounds) if args.length_scale_bounds is None
                     else tuple(args.length_scale_bounds))
    variance_bounds = (tuple(family.variance_bounds) if args.variance_bounds is None
                       else tuple(args.variance_bounds))
    variance = _start(args.variance, family.variance, variance_bounds, "--variance",
                      "--variance-bounds")
    return kernels.get(kernel_name(args), length_scale=_length_scale_start(args, n_dims, length_bounds),
                       variance=variance, length_scale_bounds=length_bounds,
                       variance_bounds=variance_bounds)


def _start(given, default: float, bounds, flag: str, bounds_flag: str):
    """``given`` (each value checked inside the bounds), else the kernel's ``default`` when
    inside them, else their geometric mean."""
    lower, upper = bounds
    if not 0 < lower < upper:
        return default if given is None else given     # the kernel reports the bounds
    if given is None:
        return default if lower <= default <= upper else math.sqrt(lower * upper)
    outside = [value for value in np.atleast_1d(given) if not lower <= value <= upper]
    if outside:
        raise CommandError(
            f"{flag} {outside[0]:g} lies outside {bounds_flag} [{lower:g}, {upper:g}]; give a "
            f"start inside the bounds, or omit {flag} (the default start is then inside them)")
    return given


def _length_scale_start(args, n_dims: int, bounds):
    given = args.length_scale
    if given is not None and len(given) > 1 and not args.ard:
        raise CommandError(f"--length-scale got {len(given)} values: give one, or one per "
                           f"input ({n_dims}) with --ard")
    if given is not None and len(given) not in (1, n_dims):
        raise CommandError(f"--length-scale got {len(given)} values for {n_dims} input(s): "
                           "give one, or one per input with --ard")
    given = None if given is None else np.asarray(given, dtype=float)
    start = _start(given, 1.0, bounds, "--length-scale", "--length-scale-bounds")
    return np.broadcast_to(start, (n_dims,)).copy() if args.ard else float(np.ravel(start)[0])


def noise_variance_start(args) -> float:
    """--noise-variance (checked inside its bounds), else the estimators' default start
    when inside the bounds, else their geometric mean."""
    return _start(getattr(args, "noise_variance", None),
                  parameter_default(LowRankGPRegressor, "noise_variance"),
                  noise_variance_bounds(args), "--noise-variance", "--noise-variance-bounds")


def noise_variance_bounds(args) -> tuple:
    value = getattr(args, "noise_variance_bounds", None)
    return (parameter_default(LowRankGPRegressor, "noise_variance_bounds") if value is None
            else tuple(value))


def add_kernel_flags(group) -> None:
    """The kernel's flags (:data:`NOT_ON_THE_CLI`: the estimators' ``kernel``)."""
    group.add_argument("--kernel", default=None,
                       help="gaussian, matern12, matern32, matern52, cauchy, laplacian or "
                            "reciprocal_semigroup (see `scalegp list`) (default: under "
                            "--approximation auto the better of gaussian and matern52 by "
                            "cross-validation or on the pilot's held-back rows, otherwise "
                            f"{parameter_default(LowRankGPRegressor, 'kernel')})")
    group.add_argument("--ard", action="store_true",
                       help="one length scale per input (default: one shared length scale)")
    group.add_argument("--length-scale", type=positive_float, nargs="+", metavar="L",
                       help="starting length scale: one value, or one per input with --ard "
                            "(default: the kernel's, 1); a start outside the bounds is an "
                            "error")
    group.add_argument("--variance", type=positive_float,
                       help="starting signal variance (default: the kernel's, 1)")
    bounds = kernels.get("gaussian")
    group.add_argument("--length-scale-bounds", type=float, nargs=2, metavar=("LOW", "HIGH"),
                       help="box of the length scales, in standard deviations of each input "
                            "unless --no-standardize (default: the kernel's, "
                            f"{_shown(tuple(bounds.length_scale_bounds))})")
    group.add_argument("--variance-bounds", type=float, nargs=2, metavar=("LOW", "HIGH"),
                       help="box of the signal variance (default: the kernel's, "
                            f"{_shown(tuple(bounds.variance_bounds))})")


def tolerance(text: str):
    """An argparse type: an RMSE ratio >= 1 (``1.05``) or ``kl=VALUE``, a mean KL
    divergence per held-back point (``kl=0.05``)."""
    try:
        if text.lower().startswith("kl="):
            value = float(text[3:])
            if math.isfinite(value) and value > 0:
                return {"mean_kl": value}
        else:
            value = float(text)
            if math.isfinite(value) and value >= 1:
                return value
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"must be an RMSE ratio >= 1 (e.g. 1.05) or kl=VALUE > 0 "
                                     f"(e.g. kl=0.05), got {text!r}")


def add_auto_flags(group) -> None:
    """``--approximation auto`` settings (docs/choosing.md)."""
    add_flag(group, "time_budget", "seconds of fit on this machine, the pilot included",
             type=positive_float, metavar="SECONDS", default_text="60")
    add_flag(group, "memory_budget", "bytes the fit may use", type=positive_float,
             metavar="BYTES", default_text="half the available memory")
    add_flag(group, "tolerance", "accuracy relative to the exact GP: an RMSE ratio (1.05) or "
             "kl=VALUE, the mean KL divergence per held-back point", type=tolerance)
    add_flag(group, "no_variance_calibration", "keep the chosen model's Gaussian predictive "
             "distribution: no calibration of its variance by the inputs from its "
             "cross-validated errors (docs/choosing.md, \"Calibrated predictive variances\")")
    add_flag(group, "no_nugget_split", "fit repeated inputs row by row: no split of the noise "
             "into micro-scale variation and measurement error on the distinct inputs' mean "
             "targets (docs/choosing.md, \"Repeated inputs\")")


def add_learning_flags(group) -> None:
    add_flag(group, "noise_variance", "starting noise variance, of the normalized target",
             type=positive_float)
    add_flag(group, "noise_variance_bounds", "box of the noise variance (its lower end also "
             "sets the truncation of glf)", type=float, nargs=2, metavar=("LOW", "HIGH"))
    add_flag(group, "no_optimize", "keep the initial hyperparameters (no learning)")
    add_flag(group, "n_restarts", f"extra optimizer starts drawn in the box (at most "
             f"{MAX_RESTARTS:,})", type=int_at_least(0))
    add_flag(group, "no_normalize_y", "fit the targets as they are, not (y - mean) / std")
    add_flag(group, "no_standardize", "use the inputs as they are; by default each input "
             "column is standardized, (x - mean) / std with the training mean and std (only "
             "/ std for reciprocal_semigroup, whose inputs must stay >= 0), so the length "
             "scales and their bounds are in standard deviations and predict applies the "
             "same transform")


def add_gibbs_flags(group) -> None:
    """``--sampler gibbs`` settings (docs/gibbs.md, "The estimator")."""
    add_flag(group, "n_iter", f"sweeps in all (at most {MAX_GIBBS_SWEEPS:,})",
             type=int_at_least(1))
    add_flag(group, "burn_in", "sweeps discarded first", type=int_at_least(0))
    add_flag(group, "thin", "keep every THIN-th sweep after the burn-in",
             type=int_at_least(1))
    add_flag(group, "theta1_grid", "theta1 = 1 / (2 l^2) on linspace(START, STOP, COUNT), "
             f"all > 0 (COUNT at most {MAX_THETA1_ATOMS:,})", type=float, nargs=3,
             metavar=("START", "STOP", "COUNT"), default_text="100 atoms in (0, 2]")
    add_flag(group, "tau_prior", "Ga(shape, rate) prior of the noise precision (normalized "
             "targets)", type=positive_float, nargs=2, metavar=("A1", "B1"))
    add_flag(group, "theta2_prior", "Ga(shape, rate) prior of the inverse kernel variance",
             type=positive_float, nargs=2, metavar=("A2", "B2"))
    add_flag(group, "no_collapsed", "draw theta1 given the latent field (the paper's step; "
             "by default it is drawn with the field integrated out)")
    add_flag(group, "diag_correction", "the FITC-style diagonal (O(n m^2) per sweep)",
             action="store_true")
    add_flag(group, "map_per_atom", "one feature map per theta1 atom, built at its unit "
             "kernel (the paper's precomputation for random projections)",
             action="store_true")
    add_flag(group, "feature_cache_bytes", "with --diag-correction: keep the n x m features "
             "of every grid point up to this many bytes", type=int_at_least(0))


def add_vecchia_flags(group) -> None:
    """``--approximation vecchia`` settings (docs/vecchia.md)."""
    add_flag(group, "n_neighbors", "m, the neighbours each training point conditions on in "
             "the likelihood (O(N m^3) per evaluation)", type=int_at_least(1), metavar="M")
    add_flag(group, "n_neighbors_predict", "training neighbours each test point conditions "
             "on (none: --n-neighbors; auto: the smallest of 1, 2, 4, 8 x M, and doublings "
             "up to 256 while they gain, within 1 %% of the best RMSE on held-out training "
             "rows)", type=count_or_auto, metavar="M")
    add_flag(group, "ordering", "the ordering of the training points, in the inputs scaled "
             "by the length scales", choices=list(ORDERINGS))
    add_flag(group, "optimizer", "lbfgs (L-BFGS-B) or fisher (Fisher scoring, as GpGp)",
             choices=list(VECCHIA_OPTIMIZERS))
    add_flag(group, "learning_schedule", "learning stages on nested random samples of the "
             "likelihood: each SIZE the training points a stage sums at least, 'all' the "
             "whole likelihood (for large N: 2000 8000 all)", type=stage_size, nargs="+",
             metavar="SIZE", default_text="all")
    add_flag(group, "learning_tolerance", "stop a learning stage when an iteration gains less "
             "than about TOL times the log likelihood per point (none: scipy's ftol)",
             type=positive_float, metavar="TOL")
