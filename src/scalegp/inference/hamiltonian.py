"""Hamiltonian Monte Carlo over a few log hyperparameters (Neal 2011, "MCMC using Hamiltonian
dynamics", Handbook of Markov Chain Monte Carlo, ch. 5).

The target is a log density known up to a constant, ``log_density(theta) -> (value,
gradient)``. Each draw augments theta with a momentum p ~ N(0, M) and follows Hamilton's
equations for H(theta, p) = -log pi(theta) + p^T M^{-1} p / 2 with ``n_steps`` leapfrog
steps of size e (Neal's Eq. 5.18-5.20):

    p <- p + (e / 2) grad log pi(theta);   theta <- theta + e M^{-1} p;
    p <- p + (e / 2) grad log pi(theta)

and accepts the end point with probability min(1, exp(H_start - H_end)), which leaves
pi exactly invariant whatever e, n_steps and M are (a trajectory that meets a non-finite
value, or whose energy overflows, is rejected). The mass matrix M is the negative Hessian of log pi at its mode
(:func:`negative_hessian`), so that a Gaussian target becomes a unit one and a step of
about 1 fits every direction at once. e is tuned during the warm-up draws by dual averaging
(Hoffman & Gelman 2014, "The No-U-Turn sampler", JMLR 15, Section 3.2, Eq. 6): after warm-up
draw m with acceptance probability a_m,

    H_m = (1 - 1/(m + t0)) H_{m-1} + (delta - a_m) / (m + t0),
    log e_m = mu - sqrt(m) H_m / gamma,
    log ebar_m = m^-kappa log e_m + (1 - m^-kappa) log ebar_{m-1},

with delta = ``TARGET_ACCEPTANCE``, mu = log(10 e_0), gamma = 0.05, t0 = 10, kappa = 0.75
(their values), and the kept draws use ebar (the average, not the last, so that one
unlucky warm-up draw does not set the step), jittered by a uniform factor in [0.8, 1.2]
(Neal, Section 5.4.2.2). The warm-up draws are discarded.
"""

from __future__ import annotations

import math
import time

import numpy as np

from .. import linalg
from ..errors import TimeBudgetExceeded

__all__ = ["negative_hessian", "hamiltonian_draws", "TARGET_ACCEPTANCE"]

#: The acceptance probability the warm-up tunes the step size towards (Neal's Section
#: 5.4.2.2 finds 0.65 optimal for Gaussian targets in many dimensions; a little above it
#: costs little).
TARGET_ACCEPTANCE = 0.7
#: The first step size, in units of the mass matrix's scale.
FIRST_STEP = 0.5
#: Hoffman & Gelman's dual-averaging constants (gamma, t0, kappa).
DUAL_AVERAGING = (0.05, 10.0, 0.75)
#: The smallest eigenvalue kept in the mass matrix (log units^-2: a standard deviation of
#: at most about 3 log units, e^3 = 20 times, where the curvature is flatter).
MIN_CURVATURE = 0.1


def negative_hessian(log_density, theta, step: float = 1e-4) -> np.ndarray:
    """-d^2 log pi / d theta^2 at ``theta`` by central differences of the gradient
    (2 p evaluations), symmetrized, with eigenvalues below ``MIN_CURVATURE`` raised to it
    (a flat or saddle direction gets a finite, wide scale)."""
    theta = np.asarray(theta, dtype=float)
    columns = []
    for unit in np.eye(theta.size):
        columns.append((log_density(theta + step * unit)[1]
                        - log_density(theta - step * unit)[1]) / (2 * step))
    hessian = np.array(columns)
    if not np.all(np.isfinite(hessian)):
        raise ValueError("the log density's curvature at the mode is not finite")
    values, vectors = linalg.symmetric_eigen(-hessian, name="the negative Hessian")
    return (vectors * np.maximum(values, MIN_CURVATURE)) @ vectors.T


def hamiltonian_draws(log_density, start, mass, *, n_draws: int, n_warmup: int,
                      n_steps: int, rng, end: float = math.inf):
    """``n_draws`` draws of theta (after ``n_warmup`` tuning draws), started at ``start``,
    with mass matrix ``mass`` (symmetric positive definite): (draws (n_draws, p), the mean
    acceptance probability of the kept draws). ``end``: a ``time.perf_counter()`` time
    after which no further draw starts (TimeBudgetExceeded)."""
    if n_draws < 1 or n_steps < 1 or n_warmup < 0:
        raise ValueError(f"n_draws and n_steps must be >= 1 and n_warmup >= 0, got "
                         f"{n_draws}, {n_steps}, {n_warmup}")
    theta = np.asarray(start, dtype=float).copy()
    value, gradient = log_density(theta)
    if not (np.isfinite(value) and np.all(np.isfinite(gradient))):
        raise ValueError("the log density is not finite at the start")
    values, vectors = linalg.symmetric_eigen(mass, name="the mass matrix")
    if values[0] <= 0:
        raise ValueError("the mass matrix must be positive definite")
    root = vectors * np.sqrt(values)                  # M = root root^T
    inverse = (vectors / values) @ vectors.T
    step, gamma, t0, kappa = FIRST_STEP, *DUAL_AVERAGING
    centre, statistic, average_log_step = math.log(10 * FIRST_STEP), 0.0, 0.0
    draws, accepted = [], []
    for draw in range(n_warmup + n_draws):
        if time.perf_counter() > end:
            raise TimeBudgetExceeded("the Hamiltonian draws would end past the budget")
        momentum = root @ rng.standard_normal(theta.size)
        size = step * rng.uniform(0.8, 1.2)
        start_energy = -value + momentum @ inverse @ momentum / 2
        proposal, p, new = theta, momentum + size / 2 * gradient, None
        for leap in range(n_steps):
            proposal = proposal + size * (inverse @ p)
            new = log_density(proposal)
            if not (np.isfinite(new[0]) and np.all(np.isfinite(new[1]))):
                new = None
                break
            p = p + (size if leap < n_steps - 1 else size / 2) * new[1]
        probability = 0.0
        if new is not None:
            energy = -new[0] + p @ inverse @ p / 2
            if np.isfinite(energy):          # an overflowing momentum is a rejection too
                probability = math.exp(min(0.0, start_energy - energy))
        if rng.uniform() < probability:
            theta, (value, gradient) = proposal, new
        if draw < n_warmup:                 # dual averaging (module docstring)
            m = draw + 1
            statistic += (TARGET_ACCEPTANCE - probability - statistic) / (m + t0)
            log_step = centre - math.sqrt(m) * statistic / gamma
            weight = m ** -kappa
            average_log_step = weight * log_step + (1 - weight) * average_log_step
            step = math.exp(log_step if draw < n_warmup - 1 else average_log_step)
        else:
            draws.append(theta)
            accepted.append(probability)
    return np.array(draws), float(np.mean(accepted))
