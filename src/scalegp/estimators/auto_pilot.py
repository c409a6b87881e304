"""The pilot of ``approximation="auto"`` (issue 26; :mod:`scalegp.estimators.auto`, step
(a)): an exact GP on a random subsample of the rows, one per kernel family, whose learned
hyperparameters, held-back predictions and measured seconds price and predict the
candidates and verify them.

:func:`run_pilot` fits one (ARD kernel, the better of the starts ``PILOT_STARTS``) on at most
``PILOT_ROWS`` rows, of which ``HOLDOUT_FRACTION`` are held back; :func:`best_pilot` keeps the
family of lowest NLPD on the held-back rows (:func:`kernel_families`); :func:`at_full_density`
learns its hyperparameters again on sampled Vecchia conditionals of all rows, where a
subsample's sparsity biases them (spatial data).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .. import kernels, linalg
from . import auto_validation
from .exact import ExactGPRegressor

__all__ = ["Pilot", "run_pilot", "best_pilot", "at_full_density", "kernel_families",
           "pilot_kernel", "holdout_nlpd", "held_back_measures"]

#: Starting length scales of the pilot (standardized units): a long start on a rough field
#: can end in the noise-only optimum (l large, s2 = var y), a short one finds the field.
PILOT_STARTS = (1.0, 0.2)
#: Rows of the pilot exact GP at most ...
PILOT_ROWS = 600
#: ... of which this share is held back for the predicted and measured accuracies.
HOLDOUT_FRACTION = 0.2
#: Sampled conditionals of the pilot learned again at full density (:func:`at_full_density`,
#: which :func:`scalegp.estimators.auto.select` runs from ``VECCHIA_SCHEDULE_ROWS`` rows in
#: up to ``LOW_DIMENSION`` inputs: spatial data, where the subsample's sparsity biases the
#: length scales most).
DENSE_PILOT_POINTS = 2000
#: Conditioning-set size of the dense refit's Vecchia likelihood, and the m the Vecchia
#: candidates' predicted accuracy refers to (:mod:`scalegp.estimators.auto`).
VECCHIA_REFERENCE_M = 30
#: Stage tolerance of the dense refit's learning (and of the scheduled Vecchia candidates).
VECCHIA_SCHEDULE_TOLERANCE = 0.01


@dataclass(frozen=True)
class Pilot:
    """The pilot exact GP, in standardized units (X and y scaled by the full data's mean and
    std): its hyperparameters, the rows it was fitted on and the rows held back."""

    kernel: object              # the learned kernel (its box may have widened)
    noise_variance: float
    train: np.ndarray
    holdout: np.ndarray
    evaluations: int
    seconds: float
    mean: np.ndarray            # exact predictive mean on the held-back rows
    var: np.ndarray             # and variance, noise included
    rmse: float                 # of the exact GP on the held-back rows
    family: object = "gaussian"  # the kernel family (name or Kernel) it was started from
    #: Evaluations of all its starts (``seconds`` is their time: the cost model's
    #: calibration); ``evaluations`` is the best start's, what a candidate's learning costs.
    total_evaluations: int = 0
    #: What :meth:`training_spectrum` computed (not copied by ``dataclasses.replace``, so a
    #: pilot with another kernel computes its own).
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def training_spectrum(self, X) -> np.ndarray:
        """The eigenvalues of the learned kernel's matrix on the pilot's training rows of
        (standardized) X, in descending order; computed once per pilot."""
        if "spectrum" not in self._cache:
            rows = X[self.train]
            self._cache["spectrum"] = linalg.eigenvalues(self.kernel(rows, rows))[::-1]
        return self._cache["spectrum"]

    @property
    def length_scale(self) -> np.ndarray:
        return self.kernel.length_scale

    @property
    def variance(self) -> float:
        return float(self.kernel.variance)


def pilot_kernel(kernel, n_dims: int):
    """The kernel the pilot and the chosen model start from: a name gives that family with
    one length scale per input (ARD); a Kernel object is used as given."""
    if isinstance(kernel, str):
        return kernels.get(kernel).with_params(length_scale=np.ones(n_dims))
    return kernel


def run_pilot(X, y, rng, max_rows: int = PILOT_ROWS, kernel="gaussian",
              family=None, sample_noise_variance=None) -> Pilot:
    """Fit the pilot exact GP on at most ``max_rows`` random rows of standardized (X, y),
    from each start of ``PILOT_STARTS`` (a kernel name) or from the kernel given (then
    ``family`` names its family, recorded in the pilot); ``sample_noise_variance``: the
    rows' known noise variances (standardized as y), or None."""
    n = X.shape[0]
    rows = rng.permutation(n)[:min(n, max_rows)]
    n_hold = max(1, int(round(HOLDOUT_FRACTION * rows.size)))
    holdout, train = rows[:n_hold], rows[n_hold:]
    start = time.perf_counter()
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = pilot_kernel(kernel, X.shape[1])
        starts = ([base.with_params(length_scale=np.full(X.shape[1], scale))
                   for scale in PILOT_STARTS] if isinstance(kernel, str) else [base])
        for initial in starts:
            fits.append(ExactGPRegressor(kernel=initial, noise_variance=0.1).fit(
                X[train], y[train], **auto_validation.rows_noise(sample_noise_variance, train)))
    seconds = time.perf_counter() - start
    model = max(fits, key=lambda fit: fit.log_marginal_likelihood_value_)
    mean, std = model.predict(X[holdout], return_std=True, include_noise=True)
    rmse = float(np.sqrt(np.mean((mean - y[holdout]) ** 2)))
    return Pilot(model.kernel_, float(model.noise_variance_), train, holdout,
                 model.optimization_result_.n_evaluations, seconds, mean, std ** 2, rmse,
                 kernel if family is None else family,
                 sum(fit.optimization_result_.n_evaluations for fit in fits))


def at_full_density(X, y, pilot: Pilot, rng,
                    sample_noise_variance=None) -> tuple[Pilot, str]:
    """The pilot with its hyperparameters learned again at the data's full density: the
    Vecchia likelihood of ``DENSE_PILOT_POINTS`` sampled conditionals of all n rows (each
    conditioned on its ``VECCHIA_REFERENCE_M`` nearest predecessors among all rows), from the
    pilot's values; its held-back predictions are the exact GP's on its rows at them.

    A random subsample sees the data sparser than they are, and on a rough field its GP
    learns the longer length scales it can see (the relief map: a few hundred random rows
    learn a length scale a Gauss-Legendre rule of 1,024 columns resolves, whose fit then
    reaches 244 m against Vecchia's 50 m); a sample of Vecchia's conditionals keeps every
    neighbour (docs/vecchia.md, "Schedules of block samples"). Only shorter length scales
    replace the pilot's: that is the subsample's bias (on smooth fields the sampled
    conditionals can learn longer ones, 0.16 against the pilot's 0.08 on a sinusoid the
    pilot resolves, and the pilot stands)."""
    from ..vecchia import VecchiaGP
    start = pilot_kernel(pilot.family, X.shape[1]).with_params(
        length_scale=np.clip(pilot.length_scale, *kernels.DEFAULT_LENGTH_SCALE_BOUNDS),
        variance=float(np.clip(pilot.variance, *kernels.DEFAULT_VARIANCE_BOUNDS)))
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dense = VecchiaGP(start, float(np.clip(pilot.noise_variance, 1e-6, 1e5)),
                          VECCHIA_REFERENCE_M, ordering="grid-maximin",
                          schedule=(DENSE_PILOT_POINTS,), tolerance=VECCHIA_SCHEDULE_TOLERANCE,
                          random_state=int(rng.integers(2**31))).fit(
            X, y, sample_noise_variance=sample_noise_variance)
        exact = ExactGPRegressor(kernel=dense.kernel_, noise_variance=dense.noise_variance_,
                                 optimize=False, normalize_X=False, normalize_y=False)
        exact.fit(X[pilot.train], y[pilot.train],
                  **auto_validation.rows_noise(sample_noise_variance, pilot.train))
        mean, std = exact.predict(X[pilot.holdout], return_std=True, include_noise=True)
    seconds = time.perf_counter() - began
    rmse = float(np.sqrt(np.mean((mean - y[pilot.holdout]) ** 2)))
    ratio = float(np.exp(np.mean(np.log(pilot.length_scale / dense.kernel_.length_scale))))
    note = (f"hyperparameters learned again at full density ({DENSE_PILOT_POINTS:,} sampled "
            f"Vecchia conditionals, {seconds:.2g} s): length scales {ratio:.3g} times shorter "
            "than the pilot's")
    if ratio <= 1.0:                   # not what a sparse subsample causes: the pilot stands
        return pilot, note + "; the pilot's kept"
    return replace(pilot, kernel=dense.kernel_, noise_variance=float(dense.noise_variance_),
                   mean=mean, var=std ** 2, rmse=rmse), note


def kernel_families(kernel) -> tuple:
    """The kernel families ``auto`` compares: every one of
    :data:`~scalegp.estimators.auto_validation.KERNEL_FAMILIES` for None, else the one
    given (a name, one length scale per input, or a Kernel used as given)."""
    return auto_validation.KERNEL_FAMILIES if kernel is None else (kernel,)


def holdout_nlpd(pilot: Pilot, y) -> float:
    """Mean NLPD of the pilot's predictions on its held-back rows (noise included)."""
    residual = y[pilot.holdout] - pilot.mean
    return float(np.mean(0.5 * np.log(2 * np.pi * pilot.var) + 0.5 * residual ** 2
                         / pilot.var))


def best_pilot(Xs, ys, rng, families, sample_noise_variance=None) -> tuple[Pilot, str]:
    """The pilot of each kernel family on the same rows, and the one of lowest NLPD on the
    held-back rows (with a note saying so when there was a choice)."""
    seed = int(rng.integers(2**31))
    first = run_pilot(Xs, ys, np.random.default_rng(seed), kernel=families[0],
                      sample_noise_variance=sample_noise_variance)
    # the other families start once, from the first's length scales (not from every start)
    pilots = [first] + [
        run_pilot(Xs, ys, np.random.default_rng(seed), family=family,
                  kernel=pilot_kernel(family, Xs.shape[1]).with_params(
                      length_scale=np.clip(first.length_scale,
                                           *kernels.DEFAULT_LENGTH_SCALE_BOUNDS))
                  if isinstance(family, str) else family,
                  sample_noise_variance=sample_noise_variance)
        for family in families[1:]]
    scores = [holdout_nlpd(p, ys) for p in pilots]
    best = int(np.argmin(scores))
    if len(pilots) == 1:
        return pilots[0], ""
    named = ", ".join(f"{_family_name(f)} {score:.4g}" for f, score in zip(families, scores))
    # its own seconds and evaluations calibrate the cost model; the budget counts every
    # pilot's time (select's clock)
    chosen = pilots[best]
    return chosen, (f"kernel family {_family_name(families[best])}: the lowest NLPD of the "
                    f"pilots on the held-back rows ({named})")


def _family_name(family) -> str:
    return family if isinstance(family, str) else type(family).__name__


#: Resamples of the bootstrap-t bounds of :func:`held_back_measures`.
BOOTSTRAP_RESAMPLES = 400


def held_back_measures(error2, exact2, kl) -> tuple[float, float, float, float]:
    """(R, its upper bound, mean KL, its upper bound) on n held-back rows, from the squared
    errors of a candidate (e^2) and of the exact GP (e*^2) and the KL divergences there.

    R^2 = mean(e^2) / mean(e*^2). Each bound is a nominal one-sided 95 % bootstrap-t bound
    on the log scale. Squared errors have a heavy tail, which skews the statistic: in
    ``tests/test_auto.py::test_held_back_upper_bounds_cover_the_population_values`` (n =
    150) these bounds cover the population values in 92.4 % (R) and 94.5 % (KL) of
    samples, the delta method's and the percentile bootstrap's in 89 %. The bound:
    t = log R^2 with se = sd(e^2 / mean(e^2) - e*^2 / mean(e*^2)) / sqrt(n) (the delta
    method), the 5 % quantile q of (t_b - t) / se_b over ``BOOTSTRAP_RESAMPLES`` row
    resamples (seeded: the bound is a function of the rows), and the bound
    sqrt(exp(t - q se)); likewise for log mean(KL).
    """
    error2, exact2, kl = (np.asarray(a, dtype=float) for a in (error2, exact2, kl))
    n = error2.size
    rows = np.random.default_rng(0).integers(0, n, (BOOTSTRAP_RESAMPLES, n))

    def log_ratio(a, b):            # log mean(a) - log mean(b) and its delta-method se
        mean_a, mean_b = a.mean(-1, keepdims=True), b.mean(-1, keepdims=True)
        se = np.std(a / mean_a - b / mean_b, axis=-1) / np.sqrt(n)
        return np.log(mean_a[..., 0]) - np.log(mean_b[..., 0]), se

    def upper(a, b):
        if not (a.mean() > 0 and b.mean() > 0):     # a zero mean: no spread to bound
            return 0.0 if b.mean() > 0 else np.inf
        t, se = log_ratio(a, b)
        t_b, se_b = log_ratio(a[rows], b[rows])
        valid = se_b > 0
        q = np.quantile((t_b[valid] - t) / se_b[valid], 0.05) if valid.any() else 0.0
        return float(np.exp(t - q * se))

    ones = np.ones(n)
    return (math.sqrt(error2.mean() / max(exact2.mean(), 1e-300)),
            math.sqrt(upper(error2, exact2)), float(kl.mean()), upper(kl, ones))
