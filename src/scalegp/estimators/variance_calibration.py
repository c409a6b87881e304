"""Predictive variances calibrated by the inputs, learned from cross-validated residuals.

A GP's noise variance s2 is one number for all inputs; on real data the size of the errors
often depends on the inputs (benchmarks/results/auto-panel.md, session 14: modelling it
lowers the test NLPD of all eight small UCI sets of the panel). Given a model's K-fold
cross-validated residuals e_i = y_i - mu_{-k(i)}(x_i) and predictive variances v_i (of a new
observation, at the hyperparameters learned on all rows), the log ratio

    t_i = log(e_i^2 / v_i) - E[log chi2_1],    E[log chi2_1] = psi(1/2) + log 2 = -1.2704,

is an unbiased estimate of h(x_i) = log(Var[e_i] / v_i) when e_i ~ N(0, v_i exp(h(x_i))), with
the known error variance Var[log chi2_1] = psi'(1/2) = pi^2 / 2 (the log-squared transform of
stochastic-volatility models: Harvey, Ruiz and Shephard, Rev. Econ. Stud. 61, 1994). h gets
a GP prior with mean 0 (no calibration), learned by the library's exact GP with pi^2 / 2 as
every row's known noise variance (``sample_noise_variance``; its own learned noise variance
adds any dispersion beyond it). A new observation at x then has the predictive distribution

    p(y | x) = int N(y; mu(x), v(x) e^h) N(h; m(x), s(x)^2) dh                        (C.1)

with m, s^2 the GP's posterior of h at x: a scale mixture of Gaussians with the model's own
mean mu(x) (the RMSE is unchanged), variance v(x) exp(m + s^2 / 2) (the log-normal mean of
e^h) and tails heavier than a Gaussian's where h is uncertain. Its log density is computed
by adaptive Gauss-Hermite quadrature in h (Liu and Pierce, Biometrika 81, 1994): the nodes
centred on the mode of the integrand, which is log-concave in h, and scaled by its
curvature there, so that an outlying error (whose mass lies far in the tail of N(h; m, s^2))
is integrated as accurately as a typical one (:data:`QUADRATURE_NODES` nodes: within 1e-6
of a fine trapezoid rule for errors up to 300 standard deviations, where 24 nodes around m
were 0.29 off at 100; tests/test_variance_calibration.py). The mixture is symmetric about
mu(x), so its central interval at level p is mu(x) +- q with

    P(|y - mu(x)| <= q) = E_h[2 Phi(q / sqrt(v(x) e^h)) - 1] = p,                     (C.2)

solved for q by safeguarded Newton steps in log q, the expectation by Gauss-Hermite
quadrature in h (:data:`INTERVAL_NODES` nodes; its coverage within 1e-6 of a fine
trapezoid rule's for s up to 3, tests/test_variance_calibration.py).

Whether a model is calibrated is decided by nested cross-validation on the same folds: h
conditioned, at the hyperparameters learned on all rows, on the other folds' t and scored
on each fold. The calibration is kept where the mean of -log (C.1) is lower than the
uncalibrated Gaussian NLPD by more than :data:`MIN_GAIN`, and the Gaussian with (C.1)'s
variance (what ``predict(return_std=True)`` reports) scores no worse than the uncalibrated
one: on wine, whose repeated rows have residuals of exactly 0, the mixture gained and that
Gaussian lost 1.2 (auto-panel.md, session 14).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.stats
from scipy.special import ndtr, ndtri
from sklearn.base import clone

from .exact import ExactGPRegressor
from .. import kernels
from ..metrics import gaussian_log_density

__all__ = ["VarianceCalibration", "learn", "mixture_log_density", "mixture_half_width",
           "LOG_CHI2_MEAN",
           "LOG_CHI2_VARIANCE", "MIN_GAIN"]

#: E[log chi2_1] = psi(1/2) + log 2.
LOG_CHI2_MEAN = -1.2703628454614782
#: Var[log chi2_1] = psi'(1/2) = pi^2 / 2: the known noise variance of every t_i.
LOG_CHI2_VARIANCE = math.pi ** 2 / 2
#: log(e^2 / v) is clipped below here (a residual of exactly 0, from a row that repeats a
#: training row, would give -inf); log chi2_1 has 0.2 % of its mass below it, and the
#: clipped t has mean 0.004 and variance 4.83 where the unclipped has 0 and pi^2 / 2 = 4.93.
LOWEST_LOG_RATIO = -12.0
#: The calibration is kept where it lowers the nested cross-validated NLPD by more than this.
MIN_GAIN = 0.01
#: Gauss-Hermite nodes of the mixture's log density (probabilists' weights, normalized).
QUADRATURE_NODES = 24
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(QUADRATURE_NODES)
_LOG_WEIGHTS = np.log(_WEIGHTS / _WEIGHTS.sum())
#: Newton steps to the integrand's mode, each clipped to 1 in h: the mode of an error of z
#: standard deviations lies within about 2 log z of m, so 100 steps reach any z below
#: e^45 (near the mode Newton converges quadratically; the log integrand is concave).
MODE_STEPS = 100
#: Gauss-Hermite nodes of the mixture's coverage (Eq. C.2). The integrand, a smooth step in
#: h of width about 1/s, is resolved by 128 nodes to within 1e-6 in coverage for s <= 3
#: (tail probabilities at levels 0.5 to 0.999 against a trapezoid rule of 400,001 points;
#: 32 nodes were 2 % off in the tail at s = 3, level 0.999).
INTERVAL_NODES = 128
_INTERVAL_NODES, _INTERVAL_WEIGHTS = np.polynomial.hermite_e.hermegauss(INTERVAL_NODES)
_INTERVAL_WEIGHTS = _INTERVAL_WEIGHTS / _INTERVAL_WEIGHTS.sum()
#: Rows per block of the interval's quadrature (a block holds rows x nodes numbers).
INTERVAL_BLOCK = 4096


def mixture_log_density(errors, variances, m, s) -> np.ndarray:
    """log int N(e; 0, v e^h) N(h; m, s^2) dh, row by row (Eq. C.1; s = 0 gives the
    Gaussian of variance v e^m), by adaptive Gauss-Hermite quadrature (module docstring).

    With g(h) the log integrand, g'(h) = -1/2 + r e^-h / 2 - (h - m) / s^2 and
    g''(h) = -r e^-h / 2 - 1 / s^2 < 0 (r = e^2 / v): Newton's steps from h = m reach the
    mode h*, and int e^g dh = sigma sqrt(2 pi) E_z[exp(g(h* + sigma z) + z^2 / 2)], z ~ N(0, 1),
    with sigma = (-g''(h*))^-1/2."""
    errors, variances = np.asarray(errors, float), np.asarray(variances, float)
    m, s = np.asarray(m, float), np.asarray(s, float)
    value = gaussian_log_density(errors, variances * np.exp(m))   # s = 0: no integral
    spread = s > 0
    if np.any(spread):
        value[spread] = _adaptive_quadrature(errors[spread], variances[spread], m[spread],
                                             s[spread])
    return value


def _adaptive_quadrature(errors, variances, m, s) -> np.ndarray:
    """:func:`mixture_log_density` where s > 0."""
    ratio = errors ** 2 / variances
    precision = 1.0 / s ** 2
    h = m.copy()
    for _ in range(MODE_STEPS):
        curvature = 0.5 * ratio * np.exp(-h) + precision
        step = (-0.5 + 0.5 * ratio * np.exp(-h) - (h - m) * precision) / curvature
        h = h + np.clip(step, -1.0, 1.0)
        if np.all(np.abs(step) < 1e-12 * (1 + np.abs(h))):
            break
    scale = 1.0 / np.sqrt(0.5 * ratio * np.exp(-h) + precision)
    nodes = h[:, None] + scale[:, None] * _NODES[None, :]
    log_integrand = (gaussian_log_density(errors[:, None], variances[:, None] * np.exp(nodes))
                     + scipy.stats.norm.logpdf(nodes, m[:, None], s[:, None]))
    terms = _LOG_WEIGHTS[None, :] + log_integrand + 0.5 * _NODES[None, :] ** 2
    top = terms.max(axis=1)
    return (top + np.log(np.sum(np.exp(terms - top[:, None]), axis=1))
            + np.log(scale * np.sqrt(2 * np.pi)))


def mixture_half_width(variances, m, s, level: float) -> np.ndarray:
    """q per row with P(|e| <= q) = ``level`` for e ~ int N(0, v e^h) N(h; m, s^2) dh
    (Eq. C.2; s = 0 gives the Gaussian's z_{(1+p)/2} sqrt(v e^m)): the half width of the
    mixture's central interval.

    On the quadrature's nodes h_k = m + s xi_k the coverage is C(u) = sum_k w_k (2 Phi(e^u
    a_k) - 1), u = log(q / sqrt v), a_k = e^{-h_k / 2}: increasing in u, with C'(u) = sum_k
    w_k 2 phi(e^u a_k) e^u a_k, and C(log z - log max a) <= p <= C(log z - log min a) (each
    term is at most, at least, the Gaussian's coverage there). Newton's steps from the
    Gaussian of the mixture's variance, bisecting where a step leaves the bracket."""
    variances, m, s = (np.asarray(a, dtype=float) for a in (variances, m, s))
    z = float(ndtri(0.5 + level / 2.0))
    u = np.log(z) + m / 2                      # s = 0: the Gaussian's
    for block in range(0, u.size, INTERVAL_BLOCK):
        rows = slice(block, block + INTERVAL_BLOCK)
        spread = np.flatnonzero(s[rows] > 0) + block
        if spread.size:
            u[spread] = _log_half_width(m[spread], s[spread], level, z)
    return np.sqrt(variances) * np.exp(u)


def _log_half_width(m, s, level: float, z: float) -> np.ndarray:
    """u = log(q / sqrt v) of :func:`mixture_half_width` where s > 0."""
    log_a = -(m[:, None] + s[:, None] * _INTERVAL_NODES[None, :]) / 2
    low, high = np.log(z) - log_a.max(axis=1), np.log(z) - log_a.min(axis=1)
    u = np.clip(np.log(z) + (m + s ** 2 / 2) / 2, low, high)
    for _ in range(200):
        scaled = np.exp(u[:, None] + log_a)
        excess = (2 * ndtr(scaled) - 1) @ _INTERVAL_WEIGHTS - level
        slope = (2 * np.exp(-scaled ** 2 / 2) / np.sqrt(2 * np.pi) * scaled) @ _INTERVAL_WEIGHTS
        low, high = np.where(excess < 0, u, low), np.where(excess > 0, u, high)
        if np.all((np.abs(excess) <= 1e-14) | (high - low <= 1e-12 * (1 + np.abs(u)))):
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            step = u - excess / slope
        inside = np.isfinite(step) & (step > low) & (step < high)
        u = np.where(inside, step, (low + high) / 2)
    return u


def log_ratios(errors, variances) -> np.ndarray:
    """t_i = max(log(e_i^2 / v_i), LOWEST_LOG_RATIO) - E[log chi2_1]."""
    with np.errstate(divide="ignore"):
        ratio = np.log(np.asarray(errors, float) ** 2 / np.asarray(variances, float))
    return np.maximum(ratio, LOWEST_LOG_RATIO) - LOG_CHI2_MEAN


class VarianceCalibration:
    """The GP of h (module docstring) and what its decision measured.

    Attributes
    ----------
    model : ExactGPRegressor
        The exact GP of h, fitted on (X, t) with the known noise variance pi^2 / 2 per row.
    X, t : its training rows (the inputs as the calibrated estimator receives them) and
        their log ratios (kept for model files).
    cv_nlpd : tuple of float
        The nested cross-validated NLPD without the calibration, with it (the mixture), and
        of the Gaussian with the mixture's variance.
    """

    def __init__(self, model: ExactGPRegressor, X, t, cv_nlpd=(math.nan,) * 3):
        self.model, self.X, self.t = model, X, t
        self.cv_nlpd = tuple(float(value) for value in cv_nlpd)

    @property
    def accepted(self) -> bool:
        """Whether the nested cross-validation keeps it (module docstring)."""
        before, mixture, gaussian = self.cv_nlpd
        return bool(mixture < before - MIN_GAIN and gaussian <= before)

    def describe(self) -> str:
        before, mixture, gaussian = self.cv_nlpd
        verdict = "calibrated" if self.accepted else "not calibrated"
        return (f"predictive variance {verdict} by the inputs: nested cross-validated NLPD "
                f"{before:.4g} without, {mixture:.4g} with (the scale mixture; "
                f"{gaussian:.4g} as a Gaussian of its variance)")

    def log_ratio(self, X) -> tuple[np.ndarray, np.ndarray]:
        """The posterior mean and standard deviation of h at the rows of X."""
        return self.model.predict(X, return_std=True)

    def variance_factor(self, X) -> np.ndarray:
        """E[e^h] = exp(m + s^2 / 2): the factor on the predictive variance at X."""
        m, s = self.log_ratio(X)
        return np.exp(m + s ** 2 / 2)

    def half_width(self, X, variances, level: float) -> np.ndarray:
        """q of the central ``level`` interval mu(x) +- q of Eq. C.1 at the rows of X, for
        uncalibrated variances v(x) (Eq. C.2)."""
        m, s = self.log_ratio(X)
        return mixture_half_width(variances, m, s, level)

    def log_density(self, X, errors, variances) -> np.ndarray:
        """log p(y | x) of Eq. C.1 for errors y - mu(x) and uncalibrated variances v(x)."""
        m, s = self.log_ratio(X)
        return mixture_log_density(errors, variances, m, s)

    # ----------------------------------------------------------------- model files
    def to_state(self) -> dict:
        """What a model file keeps: the GP's kernel, its learned noise variance and log
        likelihood (JSON), its rows X and targets t (arrays)."""
        return {"kernel": self.model.kernel_, "noise_variance": float(self.model.noise_variance_),
                "log_marginal_likelihood": float(self.model.log_marginal_likelihood_value_),
                "cv_nlpd": list(self.cv_nlpd), "X": self.X, "t": self.t}

    @classmethod
    def from_state(cls, kernel, noise_variance: float, log_marginal_likelihood: float,
                   cv_nlpd, X, t) -> "VarianceCalibration":
        """The calibration conditioned again on its stored rows (the fit's numbers); a
        ValueError where its log likelihood differs from the stored one (altered rows)."""
        with warnings.catch_warnings():     # the fit's own diagnostics were its fit's
            warnings.simplefilter("ignore")
            model = _gp(kernel, noise_variance, optimize=False).fit(X, t, **_known(t))
        value = model.log_marginal_likelihood_value_
        if not np.isclose(value, log_marginal_likelihood, rtol=1e-9, atol=1e-9):
            raise ValueError(f"its variance calibration's log marginal likelihood is "
                             f"{value!r} on the stored rows, but the file says "
                             f"{log_marginal_likelihood!r}")
        return cls(model, X, t, cv_nlpd)


def _known(t) -> dict:
    return {"sample_noise_variance": np.full(len(t), LOG_CHI2_VARIANCE)}


def _gp(kernel, noise_variance: float, optimize: bool = True) -> ExactGPRegressor:
    # prior mean 0 (no calibration): targets not centred; inputs standardized as fitted
    return ExactGPRegressor(kernel=kernel, noise_variance=noise_variance, optimize=optimize,
                            normalize_X=True, normalize_y=False)


def learn(X, errors, variances, folds, family="matern32") -> VarianceCalibration:
    """The calibration of a model from its cross-validated ``errors`` and ``variances`` at
    the rows of X (``folds``: the held-out rows of each fold), with its nested
    cross-validated scores (module docstring); ``family``: the kernel family of h (one
    length scale per input)."""
    X = np.asarray(X, dtype=float)
    errors, variances = np.asarray(errors, float), np.asarray(variances, float)
    t = log_ratios(errors, variances)
    kernel = kernels.get(family).with_params(length_scale=np.ones(X.shape[1]))
    with warnings.catch_warnings():     # a flat h (no calibration) is a legitimate answer
        warnings.simplefilter("ignore")
        model = _gp(kernel, 0.1).fit(X, t, **_known(t))
        fixed = _gp(model.kernel_, model.noise_variance_, optimize=False)
        mixture = gaussian = 0.0
        for held in folds:
            train = np.ones(t.size, dtype=bool)
            train[held] = False
            m, s = clone(fixed).fit(X[train], t[train], **_known(t[train])).predict(
                X[held], return_std=True)
            mixture -= float(np.sum(mixture_log_density(errors[held], variances[held], m, s)))
            gaussian -= float(np.sum(gaussian_log_density(
                errors[held], variances[held] * np.exp(m + s ** 2 / 2))))
    before = -float(np.mean(gaussian_log_density(errors, variances)))
    return VarianceCalibration(model, X, t, (before, mixture / t.size, gaussian / t.size))
