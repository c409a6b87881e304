"""The theory of Gauss-Legendre features: the box Theta, truncation, node counts, resolution.

Fink Shustin & Avron, *Gauss-Legendre Features for Gaussian Process Regression*, JMLR 23
(2022); the project's derivation is docs/gauss-legendre.md (cited by section). For a rule
valid on a box Theta of hyperparameters (:class:`HyperparameterBox`, section 4) this module
gives the truncation half-widths of Proposition 7 (section 5), the node counts sufficient
for epsilon-spectral equivalence (Theorems 10-12, section 6), and the practical rules of
section 7: the budget split and the resolution rule for Q. Everything the kernel contributes
(its decay class, the density bound on a Bernstein ellipse, the panels a rule needs) is asked
of the kernel (:mod:`scalegp.kernels`). The maps that use these numbers are in
:mod:`scalegp.features.gauss_legendre`; the ``n_nodes="auto"`` search in
:mod:`scalegp.inference.glf_selection`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_positive_int, check_positive_scalar
from ..kernels import Kernel

#: Default spectral-equivalence target epsilon of Proposition 7 and Theorem 12.
DEFAULT_EPSILON = 0.1
#: Bounds wider than this ratio (upper / lower) do not define a usable box Theta ...
WIDE_BOUNDS_RATIO = 1e4
#: ... and are replaced by [value / FALLBACK_FACTOR, value * FALLBACK_FACTOR] (with a warning).
FALLBACK_FACTOR = 10.0
#: Safety factor of the resolution rule Q_j <= q_j / (RESOLUTION_FACTOR pi D_j) (measured:
#: 1.5 gave the smallest likelihood errors over the Gaussian and Matern cases we tried).
RESOLUTION_FACTOR = 1.5


# --------------------------------------------------------------------------- hyperparameter box
@dataclass(frozen=True)
class HyperparameterBox:
    """The box Theta the rules are valid on, at its worst cases (docs/gauss-legendre.md, section 4).

    Attributes
    ----------
    length_scale_min, length_scale_max : ndarray (n_dims,)
        Per-dimension extremes of the length scale in Theta.
    variance_max : float
        Largest signal variance s_max.
    noise_variance_min : float
        Smallest noise variance lambda_min (> 0: GLF needs a ridge; docs/decisions.md,
        "Bounded hyperparameters").
    """

    length_scale_min: np.ndarray
    length_scale_max: np.ndarray
    variance_max: float
    noise_variance_min: float

    @classmethod
    def from_kernel(cls, kernel: Kernel, n_dims: int, noise_variance_lower: float):
        """Theta from the kernel's bounds ("fixed" pins the current value).

        Length-scale bounds wider than ``WIDE_BOUNDS_RATIO`` would make the truncation and
        node counts absurd; they are replaced by [value / FALLBACK_FACTOR, value *
        FALLBACK_FACTOR] around the kernel's current value, intersected with the bounds, with
        a warning: set the kernel's bounds instead. The variance enters the rule only through
        the tail budget t = delta / s_max of the truncation radius, so s_max is the upper
        variance bound however wide (the library default (1e-5, 1e5) among them).
        """
        noise_variance_lower = check_positive_scalar(noise_variance_lower,
                                                     "noise_variance_lower")
        length_scale = np.broadcast_to(kernel.length_scale, (n_dims,)).astype(float)
        low, high = _box_side(kernel.length_scale_bounds, length_scale, "length_scale_bounds")
        variance_bounds = kernel.variance_bounds
        variance_max = kernel.variance if variance_bounds == "fixed" else variance_bounds[1]
        return cls(low, high, float(variance_max), noise_variance_lower)

    def extreme_kernels(self, kernel: Kernel) -> list[Kernel]:
        """The kernel with all length scales at their smallest, then at their largest."""
        return [kernel.with_params(length_scale=scale if kernel.anisotropic else scale[0])
                for scale in (self.length_scale_min, self.length_scale_max)]

    def describe(self) -> str:
        scales = " x ".join(f"[{low:.3g}, {high:.3g}]"
                            for low, high in zip(self.length_scale_min, self.length_scale_max))
        return (f"Theta: length scales in {scales}, variance <= {self.variance_max:.3g}, "
                f"noise_variance >= {self.noise_variance_min:.3g}")


def _box_side(bounds, value: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    if bounds == "fixed":
        return value.copy(), value.copy()
    low, high = bounds
    if high / low <= WIDE_BOUNDS_RATIO:
        return np.full(value.shape, low), np.full(value.shape, high)
    warnings.warn(
        f"{name} = ({low:g}, {high:g}) spans more than {WIDE_BOUNDS_RATIO:g}; the Gauss-Legendre "
        f"rules are built for [value / {FALLBACK_FACTOR:g}, value * {FALLBACK_FACTOR:g}] around "
        f"the current value {np.array2string(value, precision=4)} instead, and do not hold "
        "outside it: set the kernel's bounds to the range you mean to search",
        UserWarning, stacklevel=4,
    )
    return (np.maximum(low, value / FALLBACK_FACTOR), np.minimum(high, value * FALLBACK_FACTOR))


# --------------------------------------------------------------------------- truncation (Prop. 7)
def truncation_radius(kernel: Kernel, n_dims: int, tail: float, variance: float) -> float:
    """r with tail mass s * T(r) = ``tail`` for the kernel's decay class.

    docs/gauss-legendre.md, section 5: p(eta) <= C g(Sigma eta) with Sigma = diag(sigma); the
    mass outside the box {|Sigma eta|_inf <= r} is at most s t when r = r(t, d)
    (:meth:`scalegp.kernels.Kernel.spectral_tail_radius`, t = tail / s).
    """
    return kernel.spectral_tail_radius(tail / variance, n_dims)


def truncation_half_widths(kernel: Kernel, box: HyperparameterBox, n_samples: int,
                           epsilon: float) -> np.ndarray:
    """Q_j = r / sigma_j(l_j,min) of Proposition 7 at the worst case of Theta.

    docs/gauss-legendre.md, section 5.

    The tail budget is delta = epsilon lambda_min / (2 n M^2) with M = 1 for Fourier features
    (Eq. 19), so that the truncated integral is within epsilon lambda / 2 for every unit
    vector beta (Eq. 17-18); the radius uses s_max, the scales sigma_j the smallest length
    scales (the density is widest there).
    """
    d = box.length_scale_min.size
    delta = epsilon * box.noise_variance_min / (2.0 * n_samples)
    sigma_per_length = kernel.spectral_decay_rate()
    r = truncation_radius(kernel, d, delta, box.variance_max)
    return r / (sigma_per_length * box.length_scale_min)


def semigroup_truncation_half_widths(kernel: Kernel, box: HyperparameterBox, n_samples: int,
                                     epsilon: float) -> np.ndarray:
    """Q_j of the Laplace representation (docs/gauss-legendre.md, section 9; Eq. 19).

    The tail of p_c is s [1 - prod_j (1 - e^{-c_j Q_j})] (|phi| <= 1 for x >= 0); it equals
    delta = epsilon lambda_min / (2 n) with equal factors per dimension at s_max, c_j,min
    (:meth:`scalegp.kernels.Kernel.laplace_tail_radius`).
    """
    d = box.length_scale_min.size
    delta = epsilon * box.noise_variance_min / (2.0 * n_samples)
    return kernel.laplace_tail_radius(delta / box.variance_max, d) / box.length_scale_min


# ------------------------------------------------------------------------ node counts (Thm 11-12)
#: Values of log(rho - 1) over which the Bernstein ellipse E_rho is chosen
#: (docs/gauss-legendre.md, section 6).
_LOG_RHO_EXCESS = np.linspace(-40.0, math.log(50.0), 4000)


def rule_panels(kernel: Kernel, n_dims: int) -> np.ndarray:
    """Panels per dimension of the kernel's rule: 2 where its density has a kink at 0 (the
    Cauchy kernel), else 1 (:attr:`scalegp.kernels.Kernel.spectral_panels`)."""
    return np.full(n_dims, kernel.spectral_panels, dtype=np.int64)


def _log_panel_error(kernel: Kernel, box: HyperparameterBox, half_width: np.ndarray,
                     data_half_width: np.ndarray, panel_counts: np.ndarray, j: int):
    """(log C_j, log rho) on the grid of rho: a panel of dimension j with q nodes errs by
    <= n C_j rho^{-2q} for every unit vector beta (docs/gauss-legendre.md, section 6), where

        C_j = 2^{d-1} (64/15) (prod_i Q_i) e^{4 pi h_j b B_j} M_p,j(rho) / (rho^2 - 1),

    h_j = Q_j / panels_j, b = (rho - 1/rho)/2 and B_j the half-width of the centred data box;
    M_p,j is the density bound at l_max and s_max, the worst case over Theta
    (:meth:`scalegp.kernels.Kernel.log_spectral_density_bound`).
    """
    d = half_width.size
    excess = _LOG_RHO_EXCESS
    # rho - 1 = e^x keeps rho^2 - 1 = (rho - 1)(rho + 1) and log rho accurate near 1
    rho = 1.0 + np.exp(excess)
    log_rho = np.log1p(np.exp(excess))
    h = half_width[j] / panel_counts[j]
    log_constant = (d - 1) * math.log(2) + math.log(64 / 15) + np.sum(np.log(half_width))
    log_density = kernel.log_spectral_density_bound(box.length_scale_max, box.variance_max, j,
                                                    h, rho)
    log_c = (log_constant + 4 * math.pi * h * 0.5 * (rho - 1.0 / rho) * data_half_width[j]
             + log_density - excess - np.log(rho + 1.0))
    return log_c, log_rho


def theoretical_node_counts(kernel: Kernel, box: HyperparameterBox, half_width: np.ndarray,
                            data_half_width: np.ndarray, n_samples: int, epsilon: float,
                            panel_counts: np.ndarray) -> np.ndarray:
    """q_j sufficient for the quadrature error to be <= epsilon lambda_min / 2.

    docs/gauss-legendre.md, section 6.

    Gauss-Legendre on an integrand analytic in the Bernstein ellipse E_rho with |f| <= M
    errs by <= (64/15) M rho^{-2q} / (rho^2 - 1) (Trefethen, ATAP Thm 19.3); telescoping the
    tensor rule and giving each dimension epsilon lambda / (2 d) yields

        q_j >= log( 2^{d-1} (64/15) d (prod_i Q_i) n e^{4 pi h_j b_j B_j} M_p,j(rho_j)
                    / ((rho_j^2 - 1) epsilon lambda_min / 2) ) / (2 log rho_j),

    minimized over rho_j > 1 (b_j = (rho_j - 1/rho_j)/2, B_j the half-width of the centred
    data box, h_j = Q_j / panels the half-length of a panel; a two-panel rule needs this
    many nodes per panel). The constants are ours (the paper's were lost); the bound is
    rigorous, and measured 1.4-1.7 times the empirical minimum (docs/gauss-legendre.md, section 10).
    """
    d = half_width.size
    budget = math.log(d * n_samples / (0.5 * epsilon * box.noise_variance_min))
    counts = np.empty(d)
    for j in range(d):
        log_c, log_rho = _log_panel_error(kernel, box, half_width, data_half_width,
                                         panel_counts, j)
        needed = np.min(np.maximum(log_c + budget, 0.0) / (2 * log_rho))
        counts[j] = panel_counts[j] * math.ceil(needed) if np.isfinite(needed) else math.inf
    return counts


# --------------------------------------------------------------------------- choosing q and Q
def split_budget(n_components, growth: np.ndarray, panel_counts: np.ndarray) -> np.ndarray:
    """q_j proportional to ``growth`` with prod_j q_j <= n_components, in steps of
    ``panel_counts`` (docs/gauss-legendre.md, section 7: growth R_j D_j, the Nyquist counts)."""
    budget = check_positive_int(n_components, "n_components")
    step = panel_counts.astype(np.int64)
    if np.prod(step) > budget:
        raise ValueError(
            f"n_components must be at least {int(np.prod(step))} for this kernel (two nodes "
            f"per dimension for the Cauchy kernel's two panels), got {budget}"
        )
    growth = np.maximum(growth, np.finfo(float).tiny)
    scale = np.exp((math.log(budget) - np.sum(np.log(growth))) / growth.size)
    q = np.maximum(step, np.floor(scale * growth / step).astype(np.int64) * step)
    while np.prod(q.astype(float)) > budget:
        shrinkable = np.flatnonzero(q > step)
        j = shrinkable[np.argmax(q[shrinkable] / growth[shrinkable])]
        q[j] -= step[j]
    while True:
        grown = [j for j in range(q.size)
                 if np.prod(q.astype(float)) / q[j] * (q[j] + step[j]) <= budget]
        if not grown:
            return q
        j = min(grown, key=lambda i: q[i] / growth[i])
        q[j] += step[j]


def resolved_half_widths(n_nodes: np.ndarray, data_width: np.ndarray,
                         entrywise_bound: np.ndarray) -> np.ndarray:
    """Q_j = min(R'_j, q_j / (RESOLUTION_FACTOR pi D_j)): the widest useful box q_j resolve.

    The q-point rule integrates the phase e^{2 pi i eta Delta} over [-Q, Q] only once its
    exactness degree 2q - 1 exceeds the phase's 2 pi Q |Delta| (the Nyquist count q ~ pi Q D
    read the other way; docs/gauss-legendre.md, section 7); |Delta_j| <= D_j, the data box width.
    Beyond R'_j, where the dropped mass is epsilon lambda_min / 2 (Proposition 7 without the
    Cauchy-Schwarz factor n), a wider box only costs resolution (our rule; the Notes of
    :meth:`scalegp.features.gauss_legendre.GaussLegendreFeatures.build`).
    """
    with np.errstate(divide="ignore"):
        resolved = n_nodes / (RESOLUTION_FACTOR * math.pi * data_width)
    return np.minimum(entrywise_bound, resolved)

