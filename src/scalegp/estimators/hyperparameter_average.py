"""A GP's hyperparameters integrated out (issue 26): the predictive distribution averaged
over their posterior instead of taken at their optimum (Rasmussen & Williams 2006, Section
5.2; benchmarks/results/auto-panel.md, sessions 17 and 18), for the exact GP and for
Vecchia's.

With one length scale per input, type-II maximum likelihood on a few hundred rows overfits:
on the auto panel's autompg and housing the exact Matern-3/2 GP at its optimum predicted
worse on average than one length scale for all inputs. The posterior over the log
hyperparameters theta = (log length scales, log signal variance, log noise variance), in
the estimator's standardized units, is

    log p(theta | y) = log p(y | theta) + log p(theta) + const,                     (A.1)

(log p(y | theta) the exact GP's likelihood, or Vecchia's, sum_i log p(y_i | y_h(i)) of
:mod:`scalegp.vecchia.likelihood`, on the conditioning sets h(i) of its optimum) on the
estimator's box (its kernel's bounds and ``noise_variance_bounds``: the prior is zero
outside, since a member is the estimator and takes no hyperparameter outside its box; on
the held-out concreteslump data, a noise-free fit whose optimum sat on the noise's lower
bound, draws below it made the members fail, and kernel draws outside would have been
clipped into it silently), with
independent Gaussian priors ``PRIOR_MEANS`` / ``PRIOR_SCALES`` on each log
hyperparameter (:func:`log_prior`): weak ones, a factor e^1.5 = 4.5 per standard deviation
around a length scale and a signal variance of 1 (the standardized inputs' and targets'
scale), and e^3 = 20 around a noise variance of e^-4 = 0.018. Hamiltonian Monte Carlo
(:mod:`scalegp.inference.hamiltonian`) draws from it, started at the learned optimum with
the negative Hessian there as its mass matrix; ``N_MEMBERS`` draws, evenly spaced in the
chain, are kept, and each is the estimator (an exact GP, or Vecchia's with its
conditioning and prediction neighbour counts) conditioned at its hyperparameters (a
member). A new observation's predictive distribution is their equal mixture, reported by
its mean and variance (moment matching):

    mu(x) = (1/K) sum_k mu_k(x),   v(x) = (1/K) sum_k [v_k(x) + mu_k(x)^2] - mu(x)^2   (A.2)

(mu_k, v_k member k's predictive mean and variance, with or without the noise). On the
panel the mixture's own NLPD and that of the Gaussian of Eq. A.2 agreed to 0.005 on every
fold measured, so the average fits the library's Gaussian predictive interface (intervals,
the variance calibration, cross-validation) unchanged.

What it did (auto-panel.md, session 17; HMC with ``N_WARMUP`` warm-up and ``N_DRAWS`` kept
draws of ``N_STEPS`` leapfrog steps, about 750 gradients): on the panel's fixed split,
autompg's test RMSE / NLPD went from 0.3251 / -0.068 at the optimum to 0.3068 / -0.082
(6.1 s), housing's from 0.2406 / -0.057 to 0.2125 / -0.187 (9.6 s), yacht's from 0.1228 /
-2.388 to 0.1216 / -2.437; servo's average scored worse by cross-validation and was not
kept.

``approximation="auto"`` integrates the best exact GP of its validated choice on at most
``MAX_ROWS`` rows, chosen or not, and above that a chosen Vecchia GP (:func:`target`,
:func:`integrate_validated`), and keeps the average where its own cross-validated NLPD
(each member conditioned on each fold's other rows, Eq. A.2) is lower than the best
candidate's (on housing's folds 1 and 3, where Vecchia was chosen, the exact GP's
average beat it, test RMSE 0.2776 -> 0.2637 and 0.2483 -> 0.2448; session 18). Unlike
a restart (:func:`scalegp.estimators.auto_validation.restart_leaders`), which must beat the
fit by ``RESTART_CV_GAIN`` because the best of several optima's scores is biased low, the
average is one alternative, and the one the model itself prefers: cross-validation only
guards against a prior or a chain that misleads it (on autompg's fold 0 it scored 0.2723
against the optimum's 0.2789, a gain of 0.0066 that ``RESTART_CV_GAIN`` would have refused,
and reached test RMSE 0.3068 against 0.3251).
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.base import clone

from ..errors import TimeBudgetExceeded
from ..inference.hamiltonian import hamiltonian_draws, negative_hessian
from ..metrics import gaussian_log_density
from . import auto_budget, auto_progress, auto_validation
from .exact import ExactGPRegressor
from .vecchia import VecchiaGPRegressor

__all__ = ["HyperparameterAverage", "log_prior", "box", "integrate", "integrate_validated", "price",
           "target", "PRIOR_MEANS", "PRIOR_SCALES", "N_MEMBERS", "MAX_ROWS"]

#: Prior means and standard deviations of the log hyperparameters (Eq. A.1), in the
#: standardized units the estimator learns in: (length scale, signal variance, noise
#: variance).
PRIOR_MEANS = {"length_scale": 0.0, "variance": 0.0, "noise_variance": -4.0}
PRIOR_SCALES = {"length_scale": 1.5, "variance": 1.5, "noise_variance": 3.0}
#: HMC's warm-up draws, kept draws and leapfrog steps per draw (module docstring).
N_WARMUP = 30
N_DRAWS = 60
N_STEPS = 8
#: Members kept (every ``N_DRAWS // N_MEMBERS``-th draw).
N_MEMBERS = 20
#: The most training rows an exact GP's average takes: every member holds an n x n Cholesky
#: factor (20 members of 1,000 rows: 160 MB), and each gradient costs O(n^3).
MAX_ROWS = 1000
#: The estimators whose hyperparameters are integrated out.
AVERAGED = (ExactGPRegressor, VecchiaGPRegressor)


def _roles(estimator) -> np.ndarray:
    """The role of each log hyperparameter: the kernel's parameters, then the noise."""
    roles = ["length_scale" if name.startswith("length_scale") else name
             for name in estimator.kernel_.param_names]
    if any(role not in PRIOR_MEANS for role in roles):
        raise ValueError(f"no prior for the kernel parameters {roles}")
    return np.array(roles + ["noise_variance"])


def log_prior(theta, roles) -> tuple[float, np.ndarray]:
    """The log prior of Eq. A.1 (up to a constant) and its gradient."""
    means = np.array([PRIOR_MEANS[role] for role in roles])
    scales = np.array([PRIOR_SCALES[role] for role in roles])
    z = (np.asarray(theta, dtype=float) - means) / scales
    return -0.5 * float(z @ z), -z / scales


class HyperparameterAverage:
    """The members of Eq. A.2: ``draws`` (K, p) their log hyperparameters (the estimator's
    kernel theta, then the log noise variance), ``members`` the estimator's copies (exact GPs
    or Vecchia's) conditioned at them on its training rows ``X``, ``y``, and the chain's
    mean ``acceptance``."""

    #: Arrays a model file stores (their shapes' names); the members are conditioned again.
    STATE_ARRAYS = {"draws": ("members", "hyperparameters"), "X": ("rows", "d"),
                    "y": ("rows",)}
    STATE_VALUES = ("acceptance",)

    def __init__(self, estimator, draws, X, y, acceptance: float):
        self.draws = np.asarray(draws, dtype=float)
        self.X, self.y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        self.acceptance = float(acceptance)
        self.members = [member_at(estimator, theta).fit(self.X, self.y)
                        for theta in self.draws]

    @classmethod
    def from_state(cls, estimator, arrays: dict, values: dict) -> "HyperparameterAverage":
        """The average a model file stored (``STATE_ARRAYS``, ``STATE_VALUES``), checked,
        its members conditioned again."""
        if not isinstance(estimator, AVERAGED):
            raise ValueError(f"only an exact GP's or Vecchia's hyperparameters are "
                             f"integrated out, not a {type(estimator).__name__}'s")
        draws, X, y = (np.asarray(arrays[name], dtype=float) for name in cls.STATE_ARRAYS)
        expected = estimator.kernel_.n_params + 1
        if draws.ndim != 2 or draws.shape[1] != expected or len(draws) < 1:
            raise ValueError(f"the draws must be (members, {expected}), got {draws.shape}")
        if X.ndim != 2 or X.shape[1] != estimator.n_features_in_ or y.shape != (len(X),):
            raise ValueError(f"the rows must be (n, {estimator.n_features_in_}) and (n,), got "
                             f"{X.shape} and {y.shape}")
        acceptance = float(values["acceptance"])
        if not (np.all(np.isfinite(draws)) and np.all(np.isfinite(X))
                and np.all(np.isfinite(y)) and 0.0 <= acceptance <= 1.0):
            raise ValueError("the draws, the rows and the acceptance must be finite, the "
                             "acceptance in [0, 1]")
        _check_training_rows(estimator, X, y)
        return cls(estimator, draws, X, y, acceptance)

    def note(self) -> str:
        kind = "exact GPs" if isinstance(self.members[0], ExactGPRegressor) else "Vecchia GPs"
        return (f"hyperparameters integrated out: {len(self.members)} {kind} at draws of "
                f"their posterior (Hamiltonian Monte Carlo, mean acceptance "
                f"{self.acceptance:.2f}), their predictions averaged (Eq. A.2)")

    def predict(self, X, return_std=False, return_cov=False, include_noise=False):
        """Eq. A.2's mean, and with ``return_std`` its std (the noise included where asked)."""
        if return_cov:
            raise NotImplementedError(
                "a model with its hyperparameters integrated out has no joint covariance "
                "here (its members' covariances are not combined); use return_std=True")
        means, variances = [], []
        for member in self.members:
            mean, std = member.predict(X, return_std=True, include_noise=include_noise)
            means.append(mean)
            variances.append(std ** 2)
        means, variances = np.array(means), np.array(variances)
        mean = means.mean(axis=0)
        if not return_std:
            return mean
        spread = np.mean((means - mean) ** 2, axis=0)
        return mean, np.sqrt(variances.mean(axis=0) + spread)


def _check_training_rows(estimator, X, y) -> None:
    """That ``X``, ``y`` are the rows ``estimator`` was conditioned on: its posterior's
    standardized inputs, and its standardized targets (Vecchia's posterior holds them; for
    the exact GP, targets y_s with L L^T alpha = y_s to the rounding of the product and of
    alpha's solves, 4 n eps (|L| |L|^T |alpha|) per row; Higham 2002, Section 3.5, for
    both)."""
    posterior = estimator.posterior_
    Xs = (X - estimator.X_train_mean_) / estimator.X_train_scale_
    if Xs.shape != posterior.X_train.shape or not np.allclose(Xs, posterior.X_train,
                                                              rtol=1e-12, atol=1e-12):
        raise ValueError(f"the rows are not the {type(estimator).__name__}'s training inputs")
    ys = (y - estimator.y_train_mean_) / estimator.y_train_std_
    if isinstance(estimator, VecchiaGPRegressor):
        if not np.allclose(ys, posterior.y_train, rtol=1e-12, atol=1e-12):
            raise ValueError("the targets are not those the Vecchia GP was conditioned on")
        return
    L, alpha = posterior.cholesky_factor, posterior.alpha
    rounding = 4 * len(ys) * np.finfo(float).eps * (np.abs(L) @ (np.abs(L).T @ np.abs(alpha)))
    if np.any(np.abs(L @ (L.T @ alpha) - ys) > rounding):
        raise ValueError("the targets are not those the exact GP was conditioned on")


def member_at(estimator, theta):
    """An unfitted copy of the fitted ``estimator`` at the log hyperparameters ``theta``
    (kernel theta, then the log noise variance), learning nothing; a Vecchia GP predicts
    with the neighbour count the estimator chose (``prediction_neighbors_``), not choosing
    again."""
    member = clone(estimator).set_params(kernel=estimator.kernel_.with_theta(theta[:-1]),
                                         noise_variance=math.exp(theta[-1]), optimize=False)
    if isinstance(estimator, VecchiaGPRegressor):
        member.set_params(n_neighbors_predict=estimator.prediction_neighbors_)
    return member


def box(estimator) -> np.ndarray:
    """The fitted ``estimator``'s box in its log hyperparameters (p, 2): its kernel's bounds,
    then the noise variance's. A fixed hyperparameter (lower = upper) is not integrated
    out here (ValueError): the chain would move it and reject every draw."""
    noise = estimator.noise_variance_bounds
    if isinstance(noise, str):
        raise ValueError("a fixed noise variance is not integrated out: the average moves "
                         "every hyperparameter")
    bounds = np.vstack([estimator.kernel_.bounds, np.log(np.asarray(noise, dtype=float))])
    if np.any(bounds[:, 0] >= bounds[:, 1]):
        raise ValueError("a fixed kernel parameter is not integrated out: the average "
                         "moves every hyperparameter")
    return bounds


def integrate(estimator, X, y, rng, end: float = math.inf) -> HyperparameterAverage:
    """The average of the fitted exact or Vecchia GP ``estimator`` (learned on ``X``,
    ``y``): HMC on Eq. A.1 from its optimum (module docstring), on the estimator's box
    (:func:`box`). ``end``: a ``time.perf_counter()`` time after which no draw starts
    (TimeBudgetExceeded)."""
    roles = _roles(estimator)
    bounds = box(estimator)
    # the optimum may sit on a bound (its log is the bound's to the rounding of exp and log)
    slack = 1e-12 * np.maximum(1.0, np.abs(bounds))

    def log_density(theta):
        # a point the likelihood cannot evaluate (a noise variance that under- or
        # overflows, a kernel matrix not positive definite) has zero density: the
        # trajectory that reached it is rejected
        try:
            value, gradient = estimator.log_marginal_likelihood(theta, eval_gradient=True)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            return -math.inf, np.full(theta.size, math.nan)
        prior, prior_gradient = log_prior(theta, roles)
        return value + prior, gradient + prior_gradient

    def on_box(theta):
        # zero density outside the box: the trajectory that leaves it is rejected
        if np.any(theta < bounds[:, 0] - slack[:, 0]) or np.any(theta > bounds[:, 1]
                                                                  + slack[:, 1]):
            return -math.inf, np.full(theta.size, math.nan)
        return log_density(theta)

    start = np.append(estimator.kernel_.theta, math.log(estimator.noise_variance_))
    # the curvature of the likelihood itself (smooth across a bound the optimum sits on)
    mass = negative_hessian(log_density, start)
    if time.perf_counter() > end:
        raise TimeBudgetExceeded("the mass matrix took the time left")
    draws, acceptance = hamiltonian_draws(on_box, start, mass, n_draws=N_DRAWS,
                                          n_warmup=N_WARMUP, n_steps=N_STEPS, rng=rng,
                                          end=end)
    return HyperparameterAverage(estimator, draws[::N_DRAWS // N_MEMBERS], X, y, acceptance)


def price(n_params: int, gradient_seconds: float, fold_seconds: float = 0.0) -> float:
    """Predicted seconds of :func:`integrate_validated` for ``n_params`` log hyperparameters
    at ``gradient_seconds`` per likelihood gradient and ``fold_seconds`` per conditioning of
    a member on one fold's other rows and predicting the fold: the Hessian's 2 p gradients,
    the chain's, and each member's conditioning on all rows and on each fold's (taken at
    one fold's). A Vecchia member's conditioning is far dearer than its gradient (its
    structure is built, its fit checked and its prediction neighbours searched: on the
    panel's housing, 456 rows, 0.4 s against 0.026 s)."""
    evaluations = 2 * n_params + 1 + (N_WARMUP + N_DRAWS) * N_STEPS
    return (gradient_seconds * evaluations
            + fold_seconds * N_MEMBERS * (1 + auto_validation.VALIDATION_FOLDS))


def timed_price(estimator, X, y, folds, left: float = math.inf) -> float:
    """:func:`price` for the fitted exact or Vecchia GP ``estimator`` (learned on ``X``,
    ``y``), one gradient at its optimum and its conditioning on the first of ``folds``
    timed now; where the gradients alone are priced over ``left`` seconds, that part (a
    lower bound), the conditioning not timed (a Vecchia GP's on 3,000 rows takes
    seconds)."""
    theta = np.append(estimator.kernel_.theta, math.log(estimator.noise_variance_))
    started = time.perf_counter()
    estimator.log_marginal_likelihood(theta, eval_gradient=True)
    gradient = time.perf_counter() - started
    lower = price(theta.size, gradient)
    if lower > left:
        return lower
    Xs, ys, _ = auto_validation.standardized(X, y, estimator.normalize_X,
                                             estimator.normalize_y)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auto_validation.conditioned_residuals(auto_validation.fixed_copy(estimator), Xs, ys,
                                              folds[0])
    return price(theta.size, gradient, time.perf_counter() - started)


def target(candidates: list, n: int):
    """The scored candidate (a :class:`~scalegp.estimators.auto_validation.Scored`) whose
    hyperparameters the validated choice integrates out, or None: on ``MIN_VALIDATED_ROWS``
    to ``MAX_ROWS`` rows the best exact GP, whether or not it is the best candidate (its
    average competes with every candidate by cross-validation, and costs a fraction of a
    Vecchia GP's: on the panel's housing 9.6 s, where Vecchia's took 55 s); on more rows the
    best candidate where it is a Vecchia GP (its price decides whether it runs)."""
    scored = [c for c in candidates if c.scored and c.cv_folds is not None]
    if n < auto_validation.MIN_VALIDATED_ROWS or not scored:
        return None
    exact = [c for c in scored if c.kind == "exact"]
    if exact and n <= MAX_ROWS:
        return min(exact, key=lambda c: c.cv_nlpd)
    best = min(scored, key=lambda c: c.cv_nlpd)
    return best if best.kind == "vecchia" else None


def reserve(candidates: list, X, y, left: float = math.inf) -> float:
    """The seconds :func:`integrate_validated` is predicted to take (:func:`timed_price`,
    a lower bound where over ``left``) for the :func:`target` among the candidates scored
    so far, else inf:
    :func:`scalegp.estimators.auto_validation.learn_and_score` keeps them from the
    restarts."""
    found = target(candidates, y.size)
    if found is None:
        return math.inf
    return timed_price(found.estimator, X, y, found.cv_folds, left)


def memory_bytes(estimator, n: int) -> float:
    """The members' memory: for exact GPs their Cholesky factors and the kernel matrices
    while one is conditioned; for Vecchia GPs each member's copies of the rows (its
    posterior's and the training data kept for its likelihood, standardized and as given)
    and its conditioning sets' indices."""
    if isinstance(estimator, VecchiaGPRegressor):
        d = estimator.n_features_in_
        return 8.0 * n * (3 * (d + 1) + estimator.n_neighbors) * (N_MEMBERS + 1)
    return 8.0 * n * n * (N_MEMBERS + 2)


def cross_validated(average: HyperparameterAverage, estimator, folds, end: float = math.inf):
    """Each row's error and Eq. A.2 variance (noise included) with every member conditioned
    on its fold's other rows, in the standardized units ``estimator`` learned in
    (:func:`scalegp.estimators.auto_validation.cross_validate`'s, fold by fold). A member
    that would end after ``end`` (a ``time.perf_counter()`` time, each taken to last as long
    as the longest before it) is not started: TimeBudgetExceeded."""
    Xs, ys, _ = auto_validation.standardized(average.X, average.y, estimator.normalize_X,
                                             estimator.normalize_y)
    errors, variances = np.zeros((len(average.members), ys.size)), np.zeros(
        (len(average.members), ys.size))
    longest = 0.0
    for k, member in enumerate(average.members):
        began = time.perf_counter()
        if began + longest > end:
            raise TimeBudgetExceeded("the next member's cross-validation would end past "
                                     "the budget")
        fixed = auto_validation.fixed_copy(member)
        for held in folds:
            errors[k, held], variances[k, held] = auto_validation.conditioned_residuals(
                fixed, Xs, ys, held)
        longest = max(longest, time.perf_counter() - began)
    error = errors.mean(axis=0)          # y - mean of the means
    return error, variances.mean(axis=0) + np.mean((errors - error) ** 2, axis=0)


def integrate_validated(X, y, candidates: list, best, *, end: float, rng,
                        memory_budget: float = math.inf):
    """The :func:`target` among ``candidates`` (scored
    :class:`~scalegp.estimators.auto_validation.Scored` rows, learned on ``X``, ``y``) with
    its hyperparameters integrated out, kept where its cross-validated NLPD on the same folds
    is lower than that of the validated choice ``best`` (module docstring): (the average and
    its Scored row, or None and None; a note, empty where it does not apply). Priced
    (:func:`timed_price`) before anything else; not started where the price or the memory
    does not fit before ``end`` (a ``time.perf_counter()`` time)."""
    chosen = target(candidates, y.size)
    if chosen is None:
        return None, None, ""
    estimator = chosen.estimator
    skipped = "hyperparameters not integrated out: "
    memory = memory_bytes(estimator, y.size)
    if memory > memory_budget:
        return None, None, skipped + f"its members need {memory / 1e6:.3g} MB"
    started = time.perf_counter()
    predicted = timed_price(estimator, X, y, chosen.cv_folds, end - started)
    if started + predicted > end:
        auto_budget.cut("the average over the hyperparameters: not run")
        return None, None, skipped + (f"priced at {predicted:.3g} s with "
                                      f"{max(end - started, 0.0):.3g} s left")
    auto_progress.stage("integrating out the hyperparameters")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            average = integrate(estimator, X, y, rng, end)
            errors, variances = cross_validated(average, estimator, chosen.cv_folds, end)
    except TimeBudgetExceeded:
        auto_budget.cut("the average over the hyperparameters: stopped and not used")
        return None, None, skipped + "stopped at the time budget"
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as error:
        return None, None, skipped + f"failed: {error}"
    nlpd = -float(np.mean(gaussian_log_density(errors, variances)))
    seconds = time.perf_counter() - started
    found = (f"{chosen.name}: cross-validated NLPD {chosen.cv_nlpd:.4g} at the optimum, "
             f"{nlpd:.4g} integrated ({len(average.members)} members, {seconds:.3g} s, "
             f"priced at {predicted:.3g} s)")
    if chosen is not best:
        found += f"; the best candidate, {best.name}, {best.cv_nlpd:.4g}"
    if not (np.isfinite(nlpd) and nlpd < best.cv_nlpd):
        return None, None, "hyperparameters integrated out and not kept: " + found
    scored = auto_validation.Scored(f"{chosen.name}, hyperparameters integrated",
                                    chosen.kind, estimator, chosen.cost)
    scored.predicted_seconds, scored.seconds = predicted, seconds
    scored.warnings = chosen.warnings
    scored.cv_rmse, scored.cv_nlpd = float(np.sqrt(np.mean(errors ** 2))), nlpd
    scored.cv_errors, scored.cv_variances, scored.cv_folds = errors, variances, chosen.cv_folds
    return average, scored, average.note() + ": " + found
