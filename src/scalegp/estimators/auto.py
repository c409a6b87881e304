"""``approximation="auto"``: the pilot, the candidates and the choice (issue 26).

:func:`select` chooses a configuration for (X, y). Where the budget allows learning the
cheap models on all rows (and no tolerance relative to the exact GP is asked), it does so
and keeps the best by cross-validation: the *validated choice*
(:mod:`scalegp.estimators.auto_validation`: the exact GP and Vecchia, Gaussian,
Matern-5/2 and Matern-3/2; below ``auto_validation.MAX_VALIDATED_ROWS`` rows), integrates
out the hyperparameters of its best exact GP (on at most 1,000 rows; above, of a chosen
Vecchia GP) and takes the average where cross-validation prefers it to the best candidate
(:mod:`scalegp.estimators.hyperparameter_average`), and calibrates the chosen
model's predictive variance by the inputs from its cross-validated errors where a nested
cross-validation says it gains (:mod:`scalegp.estimators.auto_calibration`,
:mod:`scalegp.estimators.variance_calibration`). With the time left, the chosen learned model
is scored by nested cross-validation and the fit warns where it predicts held-out rows no
better than their mean (:mod:`scalegp.estimators.auto_nested`).
Otherwise, in four steps:

(a) **Pilot** (:mod:`scalegp.estimators.auto_pilot`). An exact GP (ARD kernel, inputs and
    targets standardized, the better of the starts ``PILOT_STARTS``) on a random subsample
    of at most ``PILOT_ROWS`` rows, of which ``HOLDOUT_FRACTION`` are held back, one per
    kernel family, the family of lowest NLPD on the held-back rows kept: its length scales
    l, signal variance s, noise variance s2, its number of likelihood evaluations E and its
    measured seconds.
(b) **Costs.** Each candidate's fit on all n rows is counted in flops and bytes
    (:mod:`scalegp.estimators.auto_costs`) and priced in seconds by the machine's GEMM rate
    (measured once per process) at a fixed efficiency, plus the seconds per likelihood
    evaluation, times the evaluations, with the arithmetic slowed by the pilot's measured
    slowdown. Candidates: the exact GP (up to its row limit); Nystrom with the VFE bound and
    learned knots (m in ``NYSTROM_SIZES``);
    Gauss-Legendre features (d <= ``LOW_DIMENSION``, only where the rule of s columns resolves
    the pilot's length scales: :meth:`GaussLegendreFeatures.valid_log_bounds` holds log l and
    the captured prior variance is within ``GLF_MASS_TOLERANCE`` of 1); neighbourhood-local
    exact GPs (d <= ``LOW_DIMENSION``, the pilot's length scale short against the domain,
    mean l / range < ``ROUGH_LENGTH_RATIO``); Vecchia in the scaled inputs
    (d <= ``VECCHIA_DIMENSION``), from ``VECCHIA_SCHEDULE_ROWS`` rows learned on the
    schedule ``VECCHIA_SCHEDULE`` of sampled conditionals.
(c) **Predicted accuracy**, as the RMSE ratio rho = RMSE(candidate) / RMSE(exact GP):
    exact 1; Nystrom sqrt(1 + r / MSE_exact) with r = mean over the held-back rows of
    k(x, x) - q(x, x), the prior variance m random knots of the pilot rows miss at the
    pilot's hyperparameters (a model that drops that part of the signal adds it to the
    squared error: a conservative guess, as learned knots do better); GLF 1 where it resolves
    (excluded elsewhere); neighbourhoods 1 + exp(-R^2 / 2) with R the radius of a
    k-neighbourhood in length scales (the correlation with the nearest point left out);
    Vecchia 1 + (VECCHIA_REFERENCE_M / m)^2 / 100 (an assumption, not a measurement: about
    1 % at m = 30 in low dimension), with its prediction neighbours measured after learning
    (``n_neighbors_predict="auto"``). Then the **verification**: the chosen
    candidate is fitted on the pilot's training rows at the pilot's hyperparameters
    (Nystrom's knots and Vecchia's neighbours the same share of those rows as of all rows,
    other sizes capped by them), and its RMSE ratio and mean KL(exact || candidate) of the
    predictive distributions (noise included) measured on the held-back rows, with their
    one-sided 95 % upper bounds
    (:func:`scalegp.estimators.auto_pilot.held_back_measures`).
(d) **The choice.** Without a tolerance: the exact GP when it fits the budgets, otherwise
    the ``VERIFIED_CANDIDATES`` of best predicted accuracy within them are verified and the
    best measured one is chosen (cheaper first among equals to 3 digits). With a
    tolerance (an RMSE ratio, or ``{"mean_kl": value}``): the cheapest candidate within the
    budgets predicted to meet it whose upper bound meets it; when none does, the best
    measured one, and the :class:`Selection` says so.

The result is a :class:`Selection`: the candidates' table, the chosen configuration as
estimator keyword arguments (``configuration``) and why.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.base import clone

from .. import kernels, linalg
from ..engine.exact import MAX_EXACT_SAMPLES
from ..errors import InsufficientMemoryError
from ..inference import optimize
from .._memory import available_bytes
from ..features.gauss_legendre import BOX_ROUNDS, resolved_box
from .._validation import as_generator, check_matrix, check_noise_variances, check_vector
from . import (auto_budget, auto_calibration, auto_costs, auto_nested, auto_pilot,
               auto_progress, auto_validation, hyperparameter_average)
from .auto_pilot import (VECCHIA_REFERENCE_M, VECCHIA_SCHEDULE_TOLERANCE, Pilot,
                         at_full_density, best_pilot, kernel_families, pilot_kernel,
                         run_pilot)
from .auto_selection import Candidate, Selection
from .configuration import Exact, Features, Neighbors, Nystrom
from .lowrank import LowRankGPRegressor

# the pilot's names (scalegp.estimators.auto_pilot) are reached through this module too
__all__ = ["Pilot", "select", "run_pilot", "at_full_density", "kernel_families",
           "pilot_kernel", "DEFAULT_TIME_BUDGET"]

#: Seconds of fit (the pilot included) a user waiting at a terminal accepts: one minute.
DEFAULT_TIME_BUDGET = 60.0
#: Share of the available memory (``scalegp._memory.available_bytes``) a fit may use.
DEFAULT_MEMORY_FRACTION = 0.5
#: Memory assumed when the available memory cannot be read (4 GiB).
FALLBACK_MEMORY = 4 * 2**30
#: Share of the time budget after which the pilot's learning stops at the best point it
#: evaluated (:func:`scalegp.inference.optimize.deadline`, soft): on sml (22 inputs) the
#: pilots took 235 s of 295 likelihood evaluations on a loaded machine, where the chosen fit
#: then took 0.25 s.
PILOT_SHARE = 0.4
#: Inducing points of the Nystrom candidates (learned with ``learn_knots`` iterations).
NYSTROM_SIZES = (256, 512, 1024, 2048)
NYSTROM_LEARN_ITERATIONS = 150
#: Columns of the Gauss-Legendre candidates.
GLF_SIZES = (1024, 4096)
#: |captured prior variance - 1| a resolving Gauss-Legendre rule stays within.
GLF_MASS_TOLERANCE = 0.01
#: Neighbourhood sizes of the local candidates, and their learning neighbourhoods.
NEIGHBOR_SIZES = (100, 300)
LEARNING_CENTRES = 32
#: Conditioning-set sizes of the Vecchia candidates.
VECCHIA_SIZES = (15, 30)
#: From this many rows a Vecchia candidate learns on a schedule of nested samples of its
#: conditionals (``learning_schedule``, docs/vecchia.md) at a stage tolerance, as the UCI
#: configuration does: on pol (9,600 rows, 26 inputs, m = 30) 26 s and test RMSE 0.082. Its
#: last stage sums 20,000 conditionals (all of them below that): the whole likelihood of the
#: relief map's 77,800 points would cost 30 evaluations of 1.7 s.
#: The validated choice stops below it (``auto_validation.MAX_VALIDATED_ROWS``).
VECCHIA_SCHEDULE_ROWS = auto_validation.MAX_VALIDATED_ROWS
VECCHIA_SCHEDULE = (2000, 8000, 20000)
#: Spatial / low-dimensional models are candidates up to this many inputs.
LOW_DIMENSION = 3
#: Vecchia (in the length-scale-scaled inputs: scaled Vecchia) up to this many inputs: on
#: the auto panel it was the most accurate model on sml (22 inputs: 0.023 against 0.051 for
#: Nystrom-VFE), where the learned length scales switch most inputs off.
VECCHIA_DIMENSION = 32
#: Neighbours (Vecchia's m, a local model's k) whose share of the pilot's rows is below this
#: leave a candidate unverified: fitted at that share it is another model (the relief map:
#: 30 of 77,800 rows are 0.15 of the pilot's 384), so its predicted accuracy stands.
MIN_VERIFIED_NEIGHBORS = 5
#: Without a tolerance, this many of the best predicted candidates are verified on the
#: pilot's held-back rows, and the best measured one is chosen.
VERIFIED_CANDIDATES = 3
#: A field is rough (neighbourhood models are candidates) when the pilot's mean length scale
#: is below this share of the data's range (both in standardized units).
ROUGH_LENGTH_RATIO = 0.1


def _validated_selection(X, y, families, time_budget, memory_budget, tolerance, rng,
                         estimator_params, sample_noise_variance, started,
                         calibrate_variance=True, measurement_variances=False):
    """The validated choice (:mod:`scalegp.estimators.auto_validation`) where its cheapest
    candidate fits the budgets and no tolerance relative to the exact GP is asked; else
    None (the pilot decides)."""
    n, d = X.shape
    if tolerance is not None or n >= auto_validation.MAX_VALIDATED_ROWS:
        return None
    found = auto_validation.validated_candidates(
        n, d, families, estimator_params=estimator_params,
        known_noise=sample_noise_variance is not None,
        slowdowns=auto_validation.measured_slowdowns(X, y, families[0]))
    within = [c for c in found if c.cost.memory_bytes <= memory_budget]
    for c in found:
        if c not in within:
            c.note = "over the memory budget"
    if not within or within[0].predicted_seconds > time_budget:
        if within:
            auto_budget.cut("the validated choice: over the time budget")
        return None
    auto_validation.learn_and_score(
        X, y, within, time_budget=time_budget, rng=rng,
        sample_noise_variance=sample_noise_variance, started=started,
        calibrating=calibrate_variance and (sample_noise_variance is None
                                            or measurement_variances),
        integration_price=hyperparameter_average.reserve if sample_noise_variance is None
        else None)
    if n < auto_validation.MIN_VALIDATED_ROWS:
        best = next(c for c in within if c.seconds is not None)
        reason = (f"n = {n} < {auto_validation.MIN_VALIDATED_ROWS} rows, too few to "
                  "cross-validate: the exact GP with the first kernel family")
    else:
        scored = [c for c in within if c.scored]
        if not scored:
            return None
        best = min(scored, key=lambda c: c.cv_nlpd)
        reason = (f"the lowest {auto_validation.VALIDATION_FOLDS}-fold cross-validated NLPD "
                  "among the models learned on all rows within the budgets")
    rows = [Candidate(c.name, {}, c.predicted_seconds, c.cost.memory_bytes, None, c.note,
                      fit_seconds=c.seconds, cv_rmse=c.cv_rmse, cv_nlpd=c.cv_nlpd)
            for c in found]
    chosen = rows[found.index(best)]
    average, notes = None, []
    if sample_noise_variance is None:    # its members take no known noise variances
        average, integrated, note = hyperparameter_average.integrate_validated(
            X, y, within, best, end=started + time_budget, rng=rng,
            memory_budget=memory_budget)
        notes.append(note)
        if integrated is not None:
            memory = hyperparameter_average.memory_bytes(integrated.estimator, y.size)
            rows.append(Candidate(integrated.name, {}, integrated.predicted_seconds, memory,
                                  None, fit_seconds=integrated.seconds,
                                  cv_rmse=integrated.cv_rmse, cv_nlpd=integrated.cv_nlpd))
            chosen, best = rows[-1], integrated
    calibration = None
    if calibrate_variance:
        calibration, note = auto_calibration.calibrate_validated(
            X, best, found, None if measurement_variances else sample_noise_variance,
            time_budget - (time.perf_counter() - started))
        notes.append(note)
    # the chosen learned model scored on rows its hyperparameters never saw, with the
    # time left (auto_nested): reported, and warned of where no better than the mean
    learned = next(c for c in within if c.estimator is best.estimator)
    note, nested_warnings, nested = auto_nested.nested_score(
        learned, X, y, end=started + time_budget, sample_noise_variance=sample_noise_variance)
    notes.append(note)
    if nested is not None and not nested.skilled:   # one length scale tried (auto_nested)
        twin, twin_nested, note = auto_nested.one_scale_fallback(
            learned, nested, X, y, end=started + time_budget,
            sample_noise_variance=sample_noise_variance)
        notes.append(note)
        if twin is not None:
            rows.append(Candidate(twin.name, {}, twin.predicted_seconds, None, None,
                                  fit_seconds=twin.seconds, cv_rmse=twin.cv_rmse,
                                  cv_nlpd=twin.cv_nlpd))     # its memory not priced
            if twin_nested.nlpd < nested.nlpd:
                chosen, best, average, calibration = rows[-1], twin, None, None
                reason = (f"{learned.name}, of {reason}, predicted held-out rows no "
                          "better than their mean in nested cross-validation; one length "
                          "scale for all inputs scored a lower nested NLPD")
                nested_warnings = auto_nested.no_skill_warnings(twin_nested, twin)
    return Selection(rows, chosen, reason, None, time_budget, memory_budget, tolerance,
                     auto_costs.machine_rate(), 1.0, notes=[n for n in notes if n],
                     estimator=best.estimator, warnings=best.warnings + nested_warnings,
                     calibration=calibration, average=average)


def _nystrom_ratio(X, pilot: Pilot, m: int, rng) -> float:
    """sqrt(1 + r / MSE_exact), r = mean_holdout k(x, x) - q(x, x) with m random knots."""
    kernel = pilot.kernel
    m = min(m, pilot.train.size)
    knots = X[rng.choice(pilot.train, size=m, replace=False)]
    with warnings.catch_warnings():     # near-duplicate knots: the jitter is what the fit adds
        warnings.simplefilter("ignore")
        L, _ = linalg.cholesky(kernel(knots, knots), name="K_ZZ")
    A = linalg.solve_lower(L, kernel(knots, X[pilot.holdout]))
    residual = float(np.mean(np.maximum(kernel.diag(X[pilot.holdout]) - np.sum(A * A, 0), 0)))
    return math.sqrt(1.0 + residual / max(pilot.rmse ** 2, 1e-12))


def verification_knots(spectrum, m: int, n: int) -> int:
    """The knots of a Nystrom candidate's verification on the pilot's n_p training rows,
    from ``spectrum``, the eigenvalues of the pilot's kernel matrix K_p in descending order
    (:meth:`Pilot.training_spectrum`): the count that truncates K_p where m knots truncate
    that of all n rows. The eigenvalues of K on n rows are about n mu_k (mu_k those of the
    kernel's integral operator; Williams & Seeger, NIPS 2001), and what the truncation
    misses, against the noise, is set by the first eigenvalue it leaves out; so

        m' = #{k : lambda_k(K_p) >= (n / n_p) lambda_m(K_p)}

    on the pilot's K_p (lambda_m no lower than n_p eps lambda_1, the rounding of K_p's
    eigenvalues, so that m beyond K_p's numerical rank gives that rank). For a power law
    mu_k ~ k^-a that is m (n_p / n)^(1/a): the density m n_p / n (the rule before it) for
    a = 1, nearly m for a fast decay (the Gaussian kernel on a smooth field). Since the
    mu_k sum to k(x, x), a > 1 and m' is at least the density; a flatter pilot spectrum
    (n_p rows that do not resolve the kernel in many inputs) is held to it. At most
    n_p // 2 (also where m >= n_p). With the density, 256 knots on 20,000 rows were
    verified at 19 among the pilot's 1,500 rows and measured 1.46 times the pilot's RMSE,
    where the fit on all rows reached 0.0095 against the noise-free field and the Vecchia
    model chosen instead 0.022 (known-noise.md, session 13)."""
    eigenvalues = np.asarray(spectrum, dtype=float)
    n_pilot = eigenvalues.size
    if m >= n_pilot:
        return max(1, n_pilot // 2)
    rounding = n_pilot * np.finfo(float).eps * eigenvalues[0]
    threshold = (n / n_pilot) * max(eigenvalues[m - 1], rounding)
    density = round(m * n_pilot / n)
    return int(min(max(1, density, np.count_nonzero(eigenvalues >= threshold)), n_pilot // 2))


def _glf_resolves(X, pilot: Pilot, s: int) -> tuple[bool, str, tuple]:
    """Whether a Gauss-Legendre rule of s columns on X's box resolves the pilot's l, why,
    and the length-scale box the fit then learns in.

    The box is the fixed point of :func:`scalegp.features.gauss_legendre.resolved_box`
    from :func:`glf_box`, the map built as the chosen estimator will (the kernel of
    :meth:`GPRegressor._from_selection`, the estimators' default noise floor): the
    estimator then builds the same map on the same box and has nothing to narrow or warn
    about (issue 28: no warnings from a default fit)."""
    from ..features import get as get_map
    noise_floor = LowRankGPRegressor().noise_variance_bounds[0]
    start = pilot_kernel(pilot.family, X.shape[1]).with_params(
        length_scale=pilot.length_scale, variance=pilot.variance,
        length_scale_bounds=glf_box(pilot))
    kernel, fmap, resolved = resolved_box(
        lambda k: get_map("glf").build(X, k, s, noise_variance_lower=noise_floor), start)
    box = kernel.length_scale_bounds
    log_l = np.log(pilot.length_scale)
    inside = bool(np.all((np.log(box[0]) <= log_l + 1e-9) & (log_l <= np.log(box[1]) + 1e-9)))
    mass = fmap.captured_mass(kernel)
    ok = resolved and inside and abs(mass - 1.0) <= GLF_MASS_TOLERANCE
    return ok, (f"captured prior variance {mass:.3f}, pilot length scales "
                f"{'inside' if inside else 'outside'} the resolved box"
                + ("" if resolved else f" (no fixed point in {BOX_ROUNDS} rounds)")), box


def glf_box(pilot: Pilot) -> tuple[float, float]:
    """The length-scale box of a Gauss-Legendre candidate: the pilot's scales / 2 to x 2."""
    return float(pilot.length_scale.min()) / 2, float(pilot.length_scale.max()) * 2


def _config(estimator, **options) -> dict:
    return {"estimator": estimator, **options}


def candidates(X, pilot: Pilot, rate: float, slowdown: float, rng,
               vecchia_slowdown: float | None = None, known_noise: bool = False) -> list:
    """Every candidate for standardized X (n x d) with its predicted cost and accuracy;
    Vecchia's priced at ``vecchia_slowdown`` (:func:`auto_costs.calibrate_vecchia`; None:
    ``slowdown``). The exact GP only up to its row limit
    (:data:`scalegp.engine.exact.MAX_EXACT_SAMPLES`: it cannot be fitted beyond). With
    ``known_noise`` (the rows carry known noise variances) Nystrom-VFE is priced with the
    noise part's extra pass; every candidate adds the rows' variances to the learned one
    (the exact GP, Vecchia, Nystrom-VFE by docs/nystrom.md, Eq. V.4, and each
    neighbourhood's exact GP)."""
    n, d = X.shape
    E = max(pilot.evaluations, 10)
    # starting values for the full fit, clipped into the default boxes (the pilot's box may
    # have widened; the full fit widens its own where its optimum needs it)
    low, high = kernels.DEFAULT_LENGTH_SCALE_BOUNDS
    v_low, v_high = kernels.DEFAULT_VARIANCE_BOUNDS
    start = {"family": pilot.family,
             "length_scale": np.clip(pilot.length_scale, low, high).tolist(),
             "variance": float(np.clip(pilot.variance, v_low, v_high)),
             "noise_variance": float(np.clip(pilot.noise_variance, 1e-6, 1e5))}

    def priced(name, cost, ratio, config, note="", factor=slowdown):
        return Candidate(name, config, cost.seconds(rate, factor), cost.memory_bytes,
                         ratio, note, steps=cost.evaluations)

    out = [] if n > MAX_EXACT_SAMPLES else [
        priced("exact", auto_costs.exact_cost(n, d, E), 1.0,
               _config("ExactGPRegressor", start=start))]
    for m in NYSTROM_SIZES:
        if m >= n:
            break
        out.append(priced(
            f"nystrom-vfe m={m}",
            auto_costs.nystrom_cost(n, d, m, E, NYSTROM_LEARN_ITERATIONS,
                                    known_noise=known_noise),
            _nystrom_ratio(X, pilot, m, rng),
            _config("LowRankGPRegressor",
                    approximation=Nystrom(n_components=m, knots="random", objective="vfe",
                                          learn_knots=NYSTROM_LEARN_ITERATIONS),
                    start=start)))
    if d <= VECCHIA_DIMENSION:
        scheduled = n >= VECCHIA_SCHEDULE_ROWS
        for m in VECCHIA_SIZES:
            if scheduled:
                cost = auto_costs.vecchia_schedule_cost(n, d, m, E, VECCHIA_SCHEDULE)
                options = {"learning_schedule": VECCHIA_SCHEDULE,
                           "learning_tolerance": VECCHIA_SCHEDULE_TOLERANCE}
            else:
                cost, options = auto_costs.vecchia_cost(n, d, m, E), {}
            out.append(priced(f"vecchia m={m}" + (" scheduled" if scheduled else ""), cost,
                              1.0 + (VECCHIA_REFERENCE_M / m) ** 2 / 100,
                              _config("VecchiaGPRegressor", n_neighbors=m,
                                      n_neighbors_predict=auto_validation.PREDICT_NEIGHBORS,
                                      start=start, **options),
                              "predicted by assumption",
                              slowdown if vecchia_slowdown is None else vecchia_slowdown))
    if d > LOW_DIMENSION:
        return out
    for s in GLF_SIZES:
        if s >= n:          # no faster than the exact GP (the map's own warning)
            break
        ok, why, box = _glf_resolves(X, pilot, s)
        if ok:
            out.append(priced(f"glf s={s}", auto_costs.glf_cost(n, d, s, E), 1.0,
                              _config("LowRankGPRegressor",
                                      approximation=Features("glf", n_components=s),
                                      start={**start, "length_scale_bounds": box}), why))
    span = float(np.mean(X.max(axis=0) - X.min(axis=0)))
    if float(np.mean(pilot.length_scale)) < ROUGH_LENGTH_RATIO * span:
        for k in NEIGHBOR_SIZES:
            if k >= n:
                break
            # radius of a k-neighbourhood in length scales: (k / n)^(1/d) of the range
            radius = (k / n) ** (1.0 / d) * span / float(np.mean(pilot.length_scale)) / 2
            out.append(priced(
                f"neighbors k={k}", auto_costs.neighbors_cost(n, d, k, E, LEARNING_CENTRES),
                1.0 + math.exp(-radius ** 2 / 2),
                _config("LowRankGPRegressor", approximation=Exact(),
                        local=Neighbors(n_neighbors=k, learning_centers=LEARNING_CENTRES),
                        start=start)))
    return out


def verify(X, y, pilot: Pilot, candidate: Candidate, sample_noise_variance=None) -> None:
    """Set the candidate's RMSE ratio and mean KL(exact || candidate) on the pilot's n
    held-back rows and their one-sided 95 % upper bounds, the candidate fitted on the
    pilot's training rows at the pilot's hyperparameters (Vecchia's conditioning sets and a
    local model's neighbourhoods the same share of those rows as of all n rows, Vecchia
    predicting with m; Nystrom's knots truncating the pilot's kernel matrix where they
    truncate all n rows', :func:`verification_knots`). Where that share of a neighbour
    count is below ``MIN_VERIFIED_NEIGHBORS``, the candidate is left unverified (its note
    says so).

    The bounds: :func:`scalegp.estimators.auto_pilot.held_back_measures`.
    ``sample_noise_variance``: the rows' known noise variances (standardized), or None."""
    config = candidate.configuration
    noise = auto_validation.rows_noise(sample_noise_variance, pilot.train)
    Xt, yt, Xh = X[pilot.train], y[pilot.train], X[pilot.holdout]
    kernel, s2 = pilot.kernel, pilot.noise_variance
    fixed = dict(kernel=kernel, noise_variance=s2, optimize=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if config["estimator"] == "ExactGPRegressor":
            mean, var = pilot.mean, pilot.var
        elif config["estimator"] == "VecchiaGPRegressor":
            from ..vecchia import VecchiaGP
            # the same share of the rows as the fit on all n rows (as Nystrom's knots below),
            # predicting with it too (the count "auto" measures on all rows)
            m = min(round(config["n_neighbors"] * yt.size / X.shape[0]), yt.size - 1)
            if m < MIN_VERIFIED_NEIGHBORS:
                candidate.note = _unverifiable(config["n_neighbors"], m)
                return
            model = VecchiaGP(kernel, s2, m=m).fit(Xt, yt, learn=False, **noise)
            mean, var = model.predict(Xh, return_var=True, include_noise=True)
        else:
            options = {key: value for key, value in config.items()
                       if key not in ("estimator", "start")}
            approximation = clone(options["approximation"])
            if isinstance(approximation, Nystrom):    # at the pilot's theta: no learning
                approximation.set_params(
                    n_components=verification_knots(pilot.training_spectrum(X),
                                                    approximation.n_components, X.shape[0]),
                    objective="dtc", learn_knots=0)
            local = options.get("local")
            if local is not None:     # the same share of the rows, as Vecchia's above
                k = min(round(local.n_neighbors * yt.size / X.shape[0]), yt.size // 2)
                if k < MIN_VERIFIED_NEIGHBORS:
                    candidate.note = _unverifiable(local.n_neighbors, k)
                    return
                local = clone(local).set_params(n_neighbors=k)
            options.update(approximation=approximation, local=local)
            model = LowRankGPRegressor(**{**options, **fixed, "normalize_X": False,
                                          "normalize_y": False}, random_state=0).fit(Xt, yt,
                                                                                     **noise)
            mean, std = model.predict(Xh, return_std=True, include_noise=True)
            var = std ** 2
    yh = y[pilot.holdout]
    kl = 0.5 * (pilot.var / var + (mean - pilot.mean) ** 2 / var - 1 + np.log(var / pilot.var))
    (candidate.measured_ratio, candidate.ratio_upper, candidate.measured_kl,
     candidate.kl_upper) = auto_pilot.held_back_measures(
        (mean - yh) ** 2, (pilot.mean - yh) ** 2, kl)


def _unverifiable(count: int, share: int) -> str:
    return (f"not verified: {count} neighbours on all rows are {share} among the pilot's "
            f"(fewer than {MIN_VERIFIED_NEIGHBORS}); its predicted accuracy stands")


def _meets(candidate: Candidate, tolerance, measured: bool) -> bool:
    """Predicted to meet the tolerance, or (``measured``) verified: its 95 % upper bound
    on the held-back rows meets it."""
    if isinstance(tolerance, dict):
        return measured and candidate.kl_upper is not None and \
            candidate.kl_upper <= tolerance["mean_kl"]
    ratio = candidate.ratio_upper if measured else candidate.predicted_ratio
    return ratio is not None and ratio <= tolerance


def _without_learning(Xs, ys, vs, found, pilot, left, time_budget, memory_budget, tolerance,
                      rate, slowdown, notes) -> Selection:
    """No candidate's learning fits the budgets: the candidate of best predicted accuracy
    whose fit at the pilot's hyperparameters (no learning on all rows, Nystrom's knots not
    learned: one step of its cost) fits them, else the cheapest such fit. Learning on all
    rows would overrun the budget by the factor its predicted seconds say. Where no
    candidate fits the memory budget: InsufficientMemoryError (a fit over it is no answer)."""
    within_memory = [c for c in found if c.memory_bytes <= memory_budget]
    if not within_memory:
        least = min(found, key=lambda c: c.memory_bytes)
        raise InsufficientMemoryError(
            f"no candidate fits the memory budget of {memory_budget / 2**20:.3g} MiB: the "
            f"smallest, {least.name}, needs {least.memory_bytes / 2**20:.3g} MiB; raise "
            "memory_budget, or subsample the rows")
    affordable = [c for c in within_memory if c.conditioning_seconds <= left]
    chosen = (min(affordable, key=lambda c: (c.predicted_ratio, c.conditioning_seconds))
              if affordable else min(within_memory, key=lambda c: c.conditioning_seconds))
    config = dict(chosen.configuration, optimize=False)
    if isinstance(config.get("approximation"), Nystrom):
        config["approximation"] = clone(config["approximation"]).set_params(learn_knots=0)
    chosen.configuration = config
    verify(Xs, ys, pilot, chosen, vs)
    chosen.note = "; ".join(filter(None, [chosen.note, "at the pilot's hyperparameters"]))
    return Selection(found, chosen, "no candidate's learning fits the budgets: "
                     + ("the most accurate predicted" if affordable else "the cheapest")
                     + " at the pilot's hyperparameters (no learning on all rows; predicted "
                     f"{chosen.conditioning_seconds:.3g} s)", pilot, time_budget,
                     memory_budget, tolerance, rate, slowdown, notes)


def select(X, y, *, time_budget: float = DEFAULT_TIME_BUDGET, memory_budget=None,
           tolerance=None, random_state=None, rate: float | None = None,
           pilot: Pilot | None = None, kernel=None,
           sample_noise_variance=None, estimator_params=None,
           calibrate_variance: bool = True, measurement_variances: bool = False) -> Selection:
    """Choose a configuration for (X, y) (module docstring).

    Parameters
    ----------
    X : array (n, d); y : array (n,)
    time_budget : float, default=60
        Seconds of the whole fit, the pilot included.
    memory_budget : int, optional
        Bytes; default DEFAULT_MEMORY_FRACTION of the available memory.
    tolerance : None, float or {"mean_kl": float}
        The accuracy relative to the exact GP: an RMSE ratio (e.g. 1.05), or the mean KL
        divergence per held-back point.
    random_state : None, int or Generator
    rate : float, optional
        GEMM flops per second (default: :func:`scalegp.estimators.auto_costs.machine_rate`).
    pilot : Pilot, optional
        A pilot already run on these data (standardized:
        :func:`~scalegp.estimators.auto_pilot.run_pilot`), reused.
    kernel : None, str or Kernel
        The kernel family (:func:`~scalegp.estimators.auto_pilot.kernel_families`): None compares
        :data:`~scalegp.estimators.auto_validation.KERNEL_FAMILIES`.
    sample_noise_variance : array (n,), optional
        Known per-row noise variances: the pilot, the verification and the chosen model
        fit with them (every candidate takes them: :func:`candidates`), and the predictive
        variance is not calibrated (:mod:`scalegp.estimators.auto_calibration`).
    estimator_params : dict, optional
        noise_variance, normalize_X, normalize_y and random_state of the estimators the
        validated choice learns (default: theirs, standardizing, seeded by random_state).
    calibrate_variance : bool, default=True
        Learn the validated choice's variance calibration
        (:func:`scalegp.estimators.auto_calibration.calibrate_validated`).
    measurement_variances : bool, default=False
        ``sample_noise_variance`` are the measurement-error variances tau^2 / n_g of the
        group means of repeated inputs (:mod:`scalegp.estimators.replicates`), whose value
        for a new row (tau^2) is known: the variance is calibrated all the same.
    """
    X = check_matrix(X, "X")
    y = check_vector(y, "y", n_samples=X.shape[0])
    if isinstance(tolerance, dict) and set(tolerance) != {"mean_kl"}:
        raise ValueError(f"tolerance must be None, an RMSE ratio or {{'mean_kl': value}}, "
                         f"got {tolerance!r}")
    if tolerance is not None and not isinstance(tolerance, dict) and not tolerance >= 1.0:
        raise ValueError(f"an RMSE-ratio tolerance must be >= 1, got {tolerance!r}")
    if memory_budget is None:
        available = available_bytes()
        memory_budget = DEFAULT_MEMORY_FRACTION * (available or FALLBACK_MEMORY)
    rng = as_generator(random_state)
    started = time.perf_counter()
    families = kernel_families(kernel)
    if pilot is None:
        params = {"normalize_X": True, "normalize_y": True, "random_state": random_state,
                  **(estimator_params or {})}
        validated = _validated_selection(X, y, families, time_budget, memory_budget,
                                         tolerance, rng, params, sample_noise_variance,
                                         started, calibrate_variance, measurement_variances)
        if validated is not None:
            return validated
    Xs, ys, y_std = auto_validation.standardized(X, y, True, True)
    vs = None if sample_noise_variance is None else \
        check_noise_variances(sample_noise_variance, X.shape[0]) / y_std ** 2
    notes = []
    if pilot is None:
        # an estimate by design: its learning stops at its share of the budget
        auto_progress.stage("pilot: an exact GP on a sample of the rows")
        with optimize.deadline(started + PILOT_SHARE * time_budget, soft=True):
            pilot, why = best_pilot(Xs, ys, rng, families, vs)
        if why:
            notes.append(why)
        if X.shape[0] >= VECCHIA_SCHEDULE_ROWS and X.shape[1] <= LOW_DIMENSION:
            pilot, why = at_full_density(Xs, ys, pilot, rng, vs)
            notes.append(why)
    rate = auto_costs.machine_rate() if rate is None else float(rate)
    slowdown = auto_costs.calibrate(pilot.train.size, X.shape[1],
                                    max(pilot.total_evaluations, pilot.evaluations),
                                    pilot.seconds, rate)
    vecchia_slowdown = None
    if X.shape[1] <= VECCHIA_DIMENSION:
        vecchia_slowdown = auto_costs.calibrate_vecchia(
            Xs[pilot.train], ys[pilot.train], pilot.kernel, pilot.noise_variance,
            VECCHIA_REFERENCE_M, rate)
    auto_progress.stage("pricing the candidates and measuring the best on held-back rows")
    found = candidates(Xs, pilot, rate, slowdown, rng, vecchia_slowdown,
                       known_noise=vs is not None)
    left = time_budget - (time.perf_counter() - started)
    fitting = [c for c in found if c.memory_bytes <= memory_budget and c.seconds <= left]
    for c in found:
        if c not in fitting:
            c.note = "over the memory budget" if c.memory_bytes > memory_budget else \
                "over the time budget"
            if c.memory_bytes <= memory_budget:
                auto_budget.cut(f"{c.name}: over the time budget")
    if not fitting:
        return _without_learning(Xs, ys, vs, found, pilot, left, time_budget, memory_budget,
                                 tolerance, rate, slowdown, notes)
    if tolerance is None:
        ranked = sorted(fitting, key=lambda c: (c.predicted_ratio, c.seconds))
        if ranked[0].name == "exact":
            chosen = ranked[0]
            verify(Xs, ys, pilot, chosen, vs)
            return Selection(found, chosen, "the exact GP fits the budgets", pilot,
                             time_budget, memory_budget, tolerance, rate, slowdown, notes)
        # the predicted ratios are rough (Vecchia's an assumption): measure the best few
        for c in ranked[:VERIFIED_CANDIDATES]:
            verify(Xs, ys, pilot, c, vs)
        chosen = min(ranked[:VERIFIED_CANDIDATES],
                     key=lambda c: (round(c.predicted_ratio if c.measured_ratio is None
                                          else c.measured_ratio, 3), c.seconds))
        return Selection(found, chosen, "the best measured accuracy on the pilot's held-back "
                         f"rows (predicted where too few rows verify it) among the "
                         f"{min(len(ranked), VERIFIED_CANDIDATES)} best predicted within the "
                         "budgets (the exact GP does not fit)", pilot,
                         time_budget, memory_budget, tolerance, rate, slowdown, notes)
    predicted = [c for c in fitting if isinstance(tolerance, dict) or _meets(c, tolerance,
                                                                             False)]
    for c in sorted(predicted, key=lambda c: c.seconds):
        verify(Xs, ys, pilot, c, vs)
        if _meets(c, tolerance, True):
            return Selection(found, c, "the cheapest candidate within the budgets predicted "
                             "to meet the tolerance, and verified to (the 95 % upper bound on the held-back "
                             "rows)", pilot, time_budget,
                             memory_budget, tolerance, rate, slowdown, notes)
    for c in fitting:
        if c.measured_ratio is None:
            verify(Xs, ys, pilot, c, vs)
    measure = "measured_kl" if isinstance(tolerance, dict) else "measured_ratio"
    measured = [c for c in fitting if getattr(c, measure) is not None]
    if measured:
        chosen = min(measured, key=lambda c: (getattr(c, measure), c.seconds))
        reason = "no candidate within the budgets meets the tolerance: the best measured one"
    else:
        # none could be verified (too few neighbours among the pilot's rows): nothing is
        # claimed, and the best predicted accuracy is fitted
        chosen = min(fitting, key=lambda c: (c.predicted_ratio, c.seconds))
        reason = ("no candidate within the budgets meets the tolerance: none could be "
                  "verified on the pilot's held-back rows; the best predicted one")
    return Selection(found, chosen, reason, pilot, time_budget, memory_budget, tolerance,
                     rate, slowdown, notes)
