"""Gauss-Legendre features (GLF): a hyperparameter-free basis for GP regression.

Fink Shustin & Avron, *Gauss-Legendre Features for Gaussian Process Regression*, JMLR 23
(2022); the project's derivation of everything below is docs/gauss-legendre.md (cited by
section). With the ordinary-frequency convention (Eq. 9; docs/conventions.md)

    k(x, z) = int_{R^d} p_theta(eta) cos(2 pi eta^T (x - z)) d eta,

the integral is truncated to the box [-Q_1, Q_1] x ... x [-Q_d, Q_d] (Proposition 7) and
replaced by the tensor Gauss-Legendre rule with q_j nodes in dimension j (Eqs. 10-11):

    k~(x, z) = sum_l W_l p_theta(eta_l) cos(2 pi eta_l^T (x - z)),   s = prod_j q_j nodes.

The nodes eta_l and weights W_l depend on (Q, q) only, so the basis Phi does not depend on the
hyperparameters theta; they enter through the diagonal weights w(theta) = W p_theta(eta)
(Section 4.2, Proposition 6), and after one O(n s^2) pass every likelihood-and-gradient
evaluation costs O(s^3) (the engine's :class:`~scalegp.gp.BasisStatistics` path).

This module holds the 1-D rules, the truncation rule (Proposition 7; section 5 there), the
node-count bound (Theorems 10-12; section 6), the feature map ``"glf"`` and the map
``"glf-semigroup"`` of the reciprocal semigroup kernel (Section 6.3; section 9). The QR-based
likelihood of Appendix A.2 (section 8) is in :mod:`scalegp.qr`.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import betaincinv, erfcinv, gammaln, roots_legendre

from .. import gp
from .._memory import ENGINE_MATRICES
from .._validation import (as_generator, check_matrix, check_positive_int,
                           check_positive_scalar, check_vector)
from ..kernels import Cauchy, Gaussian, Kernel, Laplacian, Matern, ReciprocalSemigroup
from .base import FixedBasisFeatureMap, feature_dtype

#: Default spectral-equivalence target epsilon of Proposition 7 and Theorem 12.
DEFAULT_EPSILON = 0.1
#: Default lower bound lambda_min of the noise variance (that of the estimators' box).
DEFAULT_NOISE_VARIANCE_LOWER = 1e-6
#: Bounds wider than this ratio (upper / lower) do not define a usable box Theta ...
WIDE_BOUNDS_RATIO = 1e4
#: ... and are replaced by [value / FALLBACK_FACTOR, value * FALLBACK_FACTOR] (with a warning).
FALLBACK_FACTOR = 10.0
#: Largest number of columns a rule may have (an s x s float64 Gram of 16,384 is 2 GiB).
MAX_COMPONENTS = 16_384
#: Default tolerance of ``n_nodes="auto"``.
DEFAULT_TOLERANCE = 1e-3
#: Growth factor of q_j per step of ``n_nodes="auto"`` (docs/gauss-legendre.md, section 7).
AUTO_GROWTH = 1.25
#: Rows of the subsample on which ``n_nodes="auto"`` compares likelihoods and predictions.
AUTO_SUBSAMPLE = 2000
#: Safety factor of the resolution rule Q_j <= q_j / (RESOLUTION_FACTOR pi D_j) (measured:
#: 1.5 gave the smallest likelihood errors over the Gaussian and Matern cases we tried).
RESOLUTION_FACTOR = 1.5
SOLVERS = ("cholesky", "qr")
#: build warns when the rule reproduces a share of k(x, x) off 1 by more than this at an end
#: of Theta's length scales (:meth:`GaussLegendreFeatures.captured_mass`).
MASS_TOLERANCE = 0.1
#: :meth:`GaussLegendreFeatures.valid_log_bounds` keeps the length scales at which the rule
#: reproduces k(x, x) to within this share (measured on the East Africa relief, standardised,
#: n = 3,000, Gaussian kernel: a 1 % mass deficit went with a 3 % error of the predictive
#: mean against the exact GP, MASS_TOLERANCE's 10 % with 7-12 %).
VALID_MASS_TOLERANCE = 0.01
#: Points per length-scale row of the log grid on which valid_log_bounds scans the mass.
VALID_GRID_POINTS = 512
#: Memory budget of the s x s float64 matrices of a fit with a derived ``n_nodes="auto"``
#: budget (:func:`auto_budget`) ...
AUTO_MEMORY_BYTES = 2**30
#: ... of which a fit holds this many at its peak (the engine's count for the normal
#: equations, :data:`scalegp._memory.ENGINE_MATRICES`).
AUTO_SQUARE_MATRICES = ENGINE_MATRICES["cholesky"]
#: s of ``n_nodes=None`` (the budget split) when ``n_components`` is None.
DEFAULT_SPLIT_COMPONENTS = 256


# --------------------------------------------------------------------------- 1-D rules
def gauss_legendre(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The q-point Gauss-Legendre rule on [-1, 1]: nodes t_i (ascending) and weights omega_i.

    The nodes are the roots of the Legendre polynomial P_q, omega_i = 2 / ((1 - t_i^2)
    P_q'(t_i)^2); the rule is exact for polynomials of degree <= 2q - 1. The rule is made
    exactly symmetric (t_{q+1-i} = -t_i, omega_{q+1-i} = omega_i), so that an odd q has the
    node 0 exactly and the real-feature pairing is exact (docs/gauss-legendre.md, sections 1-2).
    """
    t, omega = _legendre_rule(check_positive_int(n_nodes, "n_nodes"))
    return t.copy(), omega.copy()


@functools.lru_cache(maxsize=64)
def _legendre_rule(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    # Memoized: roots_legendre costs O(q^2) (50 ms at q = 1000) and q repeats across maps.
    t, omega = roots_legendre(n_nodes)
    t, omega = 0.5 * (t - t[::-1]), 0.5 * (omega + omega[::-1])
    t.flags.writeable = omega.flags.writeable = False
    return t, omega


def symmetric_rule(n_nodes: int, half_width: float, panels: int = 1):
    """A symmetric rule on [-Q, Q]: nodes eta_i and weights W_i with sum_i W_i f(eta_i) ~ int f.

    ``panels=1`` maps the q-point Gauss-Legendre rule: eta = Q t, W = Q omega. ``panels=2``
    (for a density with a kink at 0, the Cauchy kernel's e^{-2 pi l |eta|}) uses q/2 nodes on
    each of [-Q, 0] and [0, Q]: eta = (Q/2)(t + 1), W = (Q/2) omega on the right panel,
    mirrored on the left; this is the half-line rule on [0, Q] with doubled weight
    (docs/gauss-legendre.md, section 1).
    """
    if panels == 1:
        t, omega = gauss_legendre(n_nodes)
        return half_width * t, half_width * omega
    if n_nodes % 2:
        raise ValueError(
            f"n_nodes must be even for a two-panel rule (one panel on each side of the kink "
            f"at eta = 0), got {n_nodes}"
        )
    t, omega = gauss_legendre(n_nodes // 2)
    right = 0.5 * half_width * (t + 1.0)
    weight = 0.5 * half_width * omega
    return np.concatenate([-right[::-1], right]), np.concatenate([weight[::-1], weight])


# --------------------------------------------------------------------------- the symmetric grid
class _Nodes:
    """Tensor algebra of node coordinates: factors are (q_j, k) arrays of coordinates."""

    @staticmethod
    def select(factor, index):
        return factor[index]

    @staticmethod
    def combine(first, second):
        return np.hstack([np.repeat(first, len(second), axis=0),
                          np.tile(second, (len(first), 1))])

    @staticmethod
    def concat(parts):
        return np.vstack(parts)


class _Weights:
    """Tensor algebra of quadrature weights: W_(i, k) = W_i W_k."""

    @staticmethod
    def select(factor, index):
        return factor[index]

    @staticmethod
    def combine(first, second):
        return np.outer(first, second).ravel()

    @staticmethod
    def concat(parts):
        return np.concatenate(parts)


class _Phases:
    """Tensor algebra of (cos, sin) of phases: the angle-addition identities

        cos(a + b) = cos a cos b - sin a sin b,   sin(a + b) = sin a cos b + cos a sin b,

    applied as row-wise Kronecker products, so the phase of node (i, k) is a_i + b_k."""

    @staticmethod
    def combine(first, second):
        (c1, s1), (c2, s2) = first, second
        n = c1.shape[0]
        cos = np.multiply(c1[:, :, None], c2[:, None, :])
        cos -= s1[:, :, None] * s2[:, None, :]
        sin = np.multiply(s1[:, :, None], c2[:, None, :])
        sin += c1[:, :, None] * s2[:, None, :]
        return cos.reshape(n, -1), sin.reshape(n, -1)


class _Products:
    """Tensor algebra of separable features: the row-wise Kronecker product,
    f_(i, k)(x) = f_i(x) g_k(x)."""

    @staticmethod
    def combine(first, second):
        return (first[:, :, None] * second[:, None, :]).reshape(first.shape[0], -1)


def _full_grid(factors, algebra, j=0):
    """Every node of the tensor grid over dimensions j..d-1, row-major."""
    if j == len(factors) - 1:
        return factors[j]
    return algebra.combine(factors[j], _full_grid(factors, algebra, j + 1))


def _half_grid(factors, positive, zero, algebra, j=0):
    """One node of each pair {eta, -eta}, eta != 0, over dimensions j..d-1.

    docs/gauss-legendre.md, section 2.

    The representative is the node whose first nonzero coordinate is positive: a positive
    node of dimension j with anything after it, or the node 0 of dimension j followed by a
    representative of the remaining dimensions.
    """
    head = algebra.select(factors[j], positive[j])
    parts = [head if j == len(factors) - 1
             else algebra.combine(head, _full_grid(factors, algebra, j + 1))]
    if zero[j] is not None and j < len(factors) - 1:
        origin = algebra.select(factors[j], zero[j])
        parts.append(algebra.combine(origin, _half_grid(factors, positive, zero, algebra, j + 1)))
    return algebra.concat(parts)


def _half_grid_phases(factors, positive, zero, cos_out, sin_out, j=0):
    """Write cos and sin of 2 pi eta^T x for the representatives of ``_half_grid`` (same
    order) into the (n, n_pairs) views ``cos_out``, ``sin_out``; ``factors[j]`` holds the
    (cos, sin) of the phases of dimension j. Block by block of the leading dimension, with the
    angle-addition identities of :class:`_Phases`, so nothing of size n x s is allocated."""
    c, s = factors[j]
    heads = positive[j]
    if j == len(factors) - 1:
        cos_out[:, :heads.size] = c[:, heads]
        sin_out[:, :heads.size] = s[:, heads]
        return
    tail_cos, tail_sin = _full_grid(factors, _Phases, j + 1)
    width = tail_cos.shape[1]
    scratch = np.empty_like(tail_cos)
    for k, i in enumerate(heads):
        block = slice(k * width, (k + 1) * width)
        np.multiply(tail_cos, c[:, i:i + 1], out=cos_out[:, block])
        cos_out[:, block] -= np.multiply(tail_sin, s[:, i:i + 1], out=scratch)
        np.multiply(tail_cos, s[:, i:i + 1], out=sin_out[:, block])
        sin_out[:, block] += np.multiply(tail_sin, c[:, i:i + 1], out=scratch)
    if zero[j] is not None:
        # the node 0 of dimension j adds no phase: cos(0 + b) = cos b, sin(0 + b) = sin b
        done = heads.size * width
        _half_grid_phases(factors, positive, zero, cos_out[:, done:], sin_out[:, done:], j + 1)


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
def _decay_class(kernel: Kernel):
    """(sigma_j / l_j, radius r(t, d)) of the kernel's decay class.

    docs/gauss-legendre.md, section 5.

    p(eta) <= C g(Sigma eta) with Sigma = diag(sigma); the mass outside the box
    {|Sigma eta|_inf <= r} is at most s t when r = r(t, d). With u_t = 1 - (1 - t)^{1/d}:
    F4 (Gaussian) r = erfcinv(u_t); F2 (Matern) r = sqrt(1/x - 1), x = I^{-1}(nu, d/2; t)
    (the mass outside the ellipsoid |Sigma eta|_2 <= r is exactly s I_{1/(1+r^2)}(nu, d/2));
    F3 (Cauchy) r = -log u_t; F1 (Laplacian) r = cot(pi u_t / 2).
    """
    def u(t, d):
        return -np.expm1(np.log1p(-t) / d)

    if isinstance(kernel, Gaussian):
        return math.sqrt(2.0) * math.pi, lambda t, d: float(erfcinv(u(t, d)))
    if isinstance(kernel, Matern):
        nu = kernel.nu

        def matern_radius(t, d):
            x = betaincinv(nu, 0.5 * d, t)
            return float(np.sqrt(1.0 / x - 1.0))
        return math.pi * math.sqrt(2.0 / nu), matern_radius
    if isinstance(kernel, Cauchy):
        return 2 * math.pi, lambda t, d: float(-np.log(u(t, d)))
    if isinstance(kernel, Laplacian):
        return 2 * math.pi, lambda t, d: float(1.0 / np.tan(0.5 * math.pi * u(t, d)))
    raise ValueError(
        f"kernel must be Gaussian, Matern, Cauchy or Laplacian for Gauss-Legendre features, "
        f"got {type(kernel).__name__}"
    )


def truncation_radius(kernel: Kernel, n_dims: int, tail: float, variance: float) -> float:
    """r with tail mass s * T(r) = ``tail`` for the kernel's decay class.

    docs/gauss-legendre.md, section 5.
    """
    _, radius = _decay_class(kernel)
    return radius(tail / variance, n_dims)


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
    sigma_per_length, _ = _decay_class(kernel)
    r = truncation_radius(kernel, d, delta, box.variance_max)
    return r / (sigma_per_length * box.length_scale_min)


# ------------------------------------------------------------------------ node counts (Thm 11-12)
#: Values of log(rho - 1) over which the Bernstein ellipse E_rho is chosen
#: (docs/gauss-legendre.md, section 6).
_LOG_RHO_EXCESS = np.linspace(-40.0, math.log(50.0), 4000)


def _log_density_bound(kernel: Kernel, box: HyperparameterBox, j: int, h, rho):
    """log sup |p| over the Bernstein region of dimension j, worst case over Theta.

    docs/gauss-legendre.md, section 6.

    h is the half-length of the interval the rule maps [-1, 1] onto. With b = (rho - 1/rho)/2
    and a = (rho + 1/rho)/2, |Im eta_j| <= h b on the ellipse (the other coordinates real),
    and on the Cauchy kernel's half-line panel [0, 2h], Re eta_j >= -h (a - 1). Every bound
    increases with l and s, hence l_max and s_max; +inf where the ellipse reaches a pole.
    Vectorized over rho.
    """
    ell, s, d = box.length_scale_max, box.variance_max, box.length_scale_max.size
    y2 = (h * 0.5 * (rho - 1.0 / rho)) ** 2
    if isinstance(kernel, Cauchy):
        a = 0.5 * (rho + 1.0 / rho)
        return (math.log(s) + np.sum(np.log(math.pi * ell))
                + 2 * math.pi * ell[j] * h * (a - 1.0))
    if isinstance(kernel, Gaussian):
        return (math.log(s) + np.sum(np.log(math.sqrt(2 * math.pi) * ell))
                + 2 * math.pi**2 * ell[j] ** 2 * y2)
    if isinstance(kernel, Matern):
        nu = kernel.nu
        log_peak = (math.log(s) + gammaln(nu + 0.5 * d) - gammaln(nu)
                    + 0.5 * d * math.log(2 * math.pi / nu) + np.sum(np.log(ell)))
        gap, power = 1.0 - (2 * math.pi**2 * ell[j] ** 2 / nu) * y2, nu + 0.5 * d
    else:
        log_peak = math.log(s) + np.sum(np.log(2 * ell))
        gap, power = 1.0 - 4 * math.pi**2 * ell[j] ** 2 * y2, 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, log_peak - power * np.log(gap), np.inf)


def _log_panel_error(kernel: Kernel, box: HyperparameterBox, half_width: np.ndarray,
                     data_half_width: np.ndarray, panels: np.ndarray, j: int):
    """(log C_j, log rho) on the grid of rho: a panel of dimension j with q nodes errs by
    <= n C_j rho^{-2q} for every unit vector beta (docs/gauss-legendre.md, section 6), where

        C_j = 2^{d-1} (64/15) (prod_i Q_i) e^{4 pi h_j b B_j} M_p,j(rho) / (rho^2 - 1),

    h_j = Q_j / panels_j, b = (rho - 1/rho)/2 and B_j the half-width of the centred data box.
    """
    d = half_width.size
    excess = _LOG_RHO_EXCESS
    # rho - 1 = e^x keeps rho^2 - 1 = (rho - 1)(rho + 1) and log rho accurate near 1
    rho = 1.0 + np.exp(excess)
    log_rho = np.log1p(np.exp(excess))
    h = half_width[j] / panels[j]
    log_constant = (d - 1) * math.log(2) + math.log(64 / 15) + np.sum(np.log(half_width))
    log_c = (log_constant + 4 * math.pi * h * 0.5 * (rho - 1.0 / rho) * data_half_width[j]
             + _log_density_bound(kernel, box, j, h, rho) - excess - np.log(rho + 1.0))
    return log_c, log_rho


def theoretical_node_counts(kernel: Kernel, box: HyperparameterBox, half_width: np.ndarray,
                            data_half_width: np.ndarray, n_samples: int, epsilon: float,
                            panels: np.ndarray) -> np.ndarray:
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
        log_c, log_rho = _log_panel_error(kernel, box, half_width, data_half_width, panels, j)
        needed = np.min(np.maximum(log_c + budget, 0.0) / (2 * log_rho))
        counts[j] = panels[j] * math.ceil(needed) if np.isfinite(needed) else math.inf
    return counts


# --------------------------------------------------------------------------- the feature map
def _panels(kernel: Kernel, n_dims: int) -> np.ndarray:
    """Two panels per dimension for the Cauchy kernel (density kink at 0), else one."""
    return np.full(n_dims, 2 if isinstance(kernel, Cauchy) else 1, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class GaussLegendreFeatures(FixedBasisFeatureMap, name="glf"):
    """Gauss-Legendre features: cos/sin at the nodes of a truncated tensor Gauss-Legendre rule.

    Attributes
    ----------
    n_nodes : ndarray of int (n_dims,)
        q_j, the nodes of the 1-D rule of dimension j; s = prod_j q_j columns.
    half_width : ndarray (n_dims,)
        Q_j, the truncation box is [-Q_1, Q_1] x ... x [-Q_d, Q_d].
    panels : ndarray of int (n_dims,)
        1, or 2 for a composite rule with a panel boundary at eta_j = 0 (Cauchy kernel).
    offset : ndarray (n_dims,)
        Centre of the data box, subtracted from the inputs before the phases are formed.
    truncation_bound : ndarray (n_dims,) or None
        R_j of Proposition 7 for the box Theta, epsilon and n the map was built with.
    theoretical_n_nodes : ndarray (n_dims,) or None
        q_j of Theorems 11-12 at Q = R (inf when no ellipse is admissible).
    epsilon : float
        The spectral-equivalence target the two quantities above were computed for.
    solver : {"cholesky", "qr"}
        Normal equations (the engine's default path) or the QR variant of Appendix A.2
        (:class:`scalegp.qr.QRMarginalLikelihood`); :func:`scalegp.qr.marginal_likelihood`
        and the estimator choose the objective by this field.
    selection : str
        How the node counts were chosen (for :meth:`report`).

    Notes
    -----
    Real features (docs/gauss-legendre.md, section 2): the tensor grid
    eta_l = (Q_1 t_{1,i_1}, ..., Q_d t_{d,i_d}) with weights W_l = prod_j Q_j omega_{j,i_j} is
    symmetric under eta -> -eta. Taking one node of each pair {eta_l, -eta_l} (the one whose
    first nonzero coordinate is positive; the set S+) and the node 0 when every q_j is odd,

        k~(x, z) = W_0 p(0) + sum_{l in S+} 2 W_l p(eta_l) [cos 2 pi eta_l^T x cos 2 pi eta_l^T z
                                                         + sin 2 pi eta_l^T x sin 2 pi eta_l^T z],

    so Phi = [cos(2 pi eta_l^T (x - c)), sin(2 pi eta_l^T (x - c))]_{l in S+} (+ a column of
    ones) has exactly s columns, and w(theta) = [2 W_l p_theta(eta_l)] (twice) (+ W_0 p(0)).
    The phases are built from per-dimension factors cos/sin(2 pi eta_{j,i} (x_j - c_j)) by the
    angle-addition identities, so the trigonometric work is n sum_j q_j, not n s.

    For a separable kernel (Gaussian, Cauchy, Laplacian; p = prod_j p_j, each even) the tensor
    rule factorizes: k~ = prod_j k~_j with k~_j(D) = sum_{eta_i >= 0} W'_i p_j(eta_i)
    cos(2 pi eta_i D), the per-dimension half-line rule (W' = 2W for eta_i > 0); the Cauchy
    kernel's rule has two panels, [-Q, 0] and [0, Q], as p_j is not analytic at 0.

    Weights: d log w_l / d theta = d log p_theta(eta_l) / d theta (docs/conventions.md,
    "Log-density derivatives"), finite where p_theta(eta_l) underflows (large length scales).
    """

    n_nodes: np.ndarray
    half_width: np.ndarray
    panels: np.ndarray
    offset: np.ndarray
    truncation_bound: np.ndarray | None = None
    theoretical_n_nodes: np.ndarray | None = None
    epsilon: float = DEFAULT_EPSILON
    solver: str = "cholesky"
    selection: str = "given"

    description = ("Gauss-Legendre features: truncated tensor Gauss-Legendre rule, basis "
                   "independent of the hyperparameters (O(s^3) learning steps)")
    reference = "Fink Shustin & Avron, JMLR 2022"
    fit_context = ("y", "noise_variance", "noise_variance_lower")
    default_n_components = None         # build derives s for n_nodes="auto" (auto_budget)

    def __post_init__(self):
        d = check_positive_int(self.n_dims, "n_dims")
        n_nodes = _integer_vector(self.n_nodes, "n_nodes", d)
        panels = _integer_vector(self.panels, "panels", d)
        if not np.all(np.isin(panels, (1, 2))):
            raise ValueError(f"panels must contain only 1 or 2, got {panels.tolist()}")
        half_width = np.broadcast_to(np.asarray(self.half_width, dtype=float), (d,)).copy()
        if not np.all(np.isfinite(half_width)) or np.any(half_width <= 0):
            raise ValueError(
                f"half_width must contain {d} finite positive numbers, got {half_width.tolist()}"
            )
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        if int(np.prod(n_nodes.astype(float))) > MAX_COMPONENTS:
            raise ValueError(
                f"n_nodes = {n_nodes.tolist()} gives prod(n_nodes) = "
                f"{int(np.prod(n_nodes.astype(float)))} columns, more than {MAX_COMPONENTS}"
            )
        offset = np.broadcast_to(np.asarray(self.offset, dtype=float), (d,)).copy()
        object.__setattr__(self, "n_nodes", n_nodes)
        object.__setattr__(self, "panels", panels)
        object.__setattr__(self, "half_width", half_width)
        object.__setattr__(self, "offset", offset)
        rules = [symmetric_rule(int(q), float(Q), int(p))
                 for q, Q, p in zip(n_nodes, half_width, panels)]
        positive = [np.flatnonzero(nodes > 0) for nodes, _ in rules]
        zero = [np.flatnonzero(nodes == 0) if np.any(nodes == 0) else None
                for nodes, _ in rules]
        eta = _half_grid([nodes[:, None] for nodes, _ in rules], positive, zero, _Nodes)
        pair_weights = 2.0 * _half_grid([w for _, w in rules], positive, zero, _Weights)
        has_origin = all(z is not None for z in zero)
        if has_origin:
            eta = np.vstack([eta, np.zeros((1, d))])
            origin_weight = np.prod([w[z[0]] for (_, w), z in zip(rules, zero)])
            pair_weights = np.append(pair_weights, origin_weight)
        # Derived, theta-independent arrays (not fields: state() stays the constructor's input).
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_positive", positive)
        object.__setattr__(self, "_zero", zero)
        object.__setattr__(self, "_has_origin", has_origin)
        object.__setattr__(self, "_nodes", eta)
        object.__setattr__(self, "_log_node_weights", np.log(pair_weights))

    # ----------------------------------------------------------------- construction
    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        return isinstance(kernel, (Gaussian, Matern, Cauchy, Laplacian))

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, n_nodes=None,
              epsilon=DEFAULT_EPSILON, noise_variance_lower=DEFAULT_NOISE_VARIANCE_LOWER,
              solver="cholesky", tolerance=DEFAULT_TOLERANCE, y=None, noise_variance=None,
              half_width=None):
        """Choose the truncation box and node counts for the data box and Theta.

        Parameters
        ----------
        X : array (n_samples, n_dims)
            Training inputs: their bounding box sets the offset and the node counts.
        kernel : Gaussian, Matern, Cauchy or Laplacian
            Its bounds define Theta (see :class:`HyperparameterBox`).
        n_components : int or None
            Budget of real columns s: with ``n_nodes=None`` the q_j are chosen with
            prod_j q_j <= n_components in proportion to R_j D_j (the Nyquist counts
            pi R_j D_j of docs/gauss-legendre.md section 7, D_j the data box width; None: 256); with
            ``n_nodes="auto"`` the largest s tried, a hard cap (None: derived from the
            problem by :func:`auto_budget`). Ignored for integer and ``"theory"`` counts.
        rng : numpy.random.Generator, optional
            Draws the subsample of ``n_nodes="auto"`` (the rule itself is deterministic).
        n_nodes : None, int, sequence of int, "theory" or "auto"
            q_j per dimension (an int is used for every dimension); "theory": the counts
            of Theorems 11-12 with Q = R of Proposition 7; "auto": q grows by a factor 1.25
            until the log marginal likelihood (per sample) and the posterior mean (rms,
            relative to std(y)) change by less than ``tolerance``, at the kernel's
            hyperparameters and at the extreme length scales of Theta (needs ``y``).
        epsilon : float
            Spectral-equivalence target of Proposition 7 and Theorem 12.
        noise_variance_lower : float
            lambda_min, the lower bound of the noise variance in Theta.
        solver : {"cholesky", "qr"}
        tolerance : float
            Convergence tolerance of ``n_nodes="auto"``.
        y : array (n_samples,), optional
            Training targets, used by ``n_nodes="auto"`` only.
        noise_variance : float, optional
            Noise variance at which ``n_nodes="auto"`` compares likelihoods (default
            lambda_min; give the starting value of learning: at lambda_min the extremes of
            Theta are far more sensitive than any model learning visits).
        half_width : None, "proposition7", float or sequence of float
            Q_j: None for the resolution rule (Notes), "proposition7" for R_j, or given.
            Ignored by ``n_nodes="theory"`` (Q = R) and ``"auto"`` (the resolution rule).

        Notes
        -----
        Q_j is R_j of Proposition 7 for ``"theory"``; by default it is the widest box the
        q_j nodes resolve, Q_j = min(R'_j, q_j / (1.5 pi D_j)), with R' the box whose dropped
        mass is epsilon lambda_min / 2 (Proposition 7 without the Cauchy-Schwarz factor n,
        which is a worst case over unit vectors; our rule; for Matern kernels
        Proposition 7's R is far beyond what a practical q resolves, the paper's remark
        that the theoretical counts exceed n). It minimized the likelihood error at the
        learned hyperparameters among the rules we tried (1.25 to 3 pi D, the kernel error
        bounds of Theorem 11 balanced against the tail); the price is that for densities
        with poles near the real axis (Matern, Laplacian) the kernel error at pairs a box
        width apart stops improving with q until Q reaches R: ``half_width="proposition7"``
        restores convergence in q for every pair, at the cost of many more nodes.
        """
        X = check_matrix(X, "X")
        n, d = X.shape
        kernel.check_n_dims(d)
        if not cls.supports(kernel):
            raise ValueError(
                "kernel must be Gaussian, Matern, Cauchy or Laplacian for Gauss-Legendre "
                f"features, got {type(kernel).__name__}"
            )
        epsilon = check_positive_scalar(epsilon, "epsilon")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        box = HyperparameterBox.from_kernel(kernel, d, noise_variance_lower)
        lower, upper = X.min(axis=0), X.max(axis=0)
        width = upper - lower
        bound = truncation_half_widths(kernel, box, n, epsilon)
        entrywise_bound = truncation_half_widths(kernel, box, 1, epsilon)
        panels = _panels(kernel, d)
        theory = theoretical_node_counts(kernel, box, bound, 0.5 * width, n, epsilon, panels)
        common = dict(n_dims=d, panels=panels, offset=0.5 * (lower + upper),
                      truncation_bound=bound, theoretical_n_nodes=theory, epsilon=epsilon,
                      solver=solver)
        if isinstance(n_nodes, str) and n_nodes == "theory":
            if not np.all(np.isfinite(theory)) or np.prod(theory) > MAX_COMPONENTS:
                raise ValueError(
                    f"n_nodes='theory' needs q = {theory.tolist()} (s = {np.prod(theory):.3g} "
                    f"columns), more than {MAX_COMPONENTS}; give n_nodes as integers or "
                    "'auto', or narrow the kernel's bounds"
                )
            fmap = cls(n_nodes=theory.astype(np.int64), half_width=bound,
                       selection="theory: Theorems 11-12 with Q = R", **common)
        else:
            if isinstance(n_nodes, str) and n_nodes == "auto":
                if y is None:
                    raise ValueError("n_nodes='auto' compares likelihoods, so y (the training "
                                     "targets) must be given as an option, got y=None")
                counts, selection = _auto(
                    cls, common, kernel, box, X, check_vector(y, "y", n_samples=n), width,
                    entrywise_bound, _auto_cap(n_components, n, d),
                    check_positive_scalar(tolerance, "tolerance"),
                    box.noise_variance_min if noise_variance is None
                    else check_positive_scalar(noise_variance, "noise_variance"),
                    as_generator(rng))
            elif n_nodes is None:
                if n_components is None:
                    n_components = DEFAULT_SPLIT_COMPONENTS
                counts = _split_budget(n_components, bound * width, panels)
                selection = f"budget n_components = {n_components}"
            else:
                counts, selection = _integer_vector(n_nodes, "n_nodes", d), "given"
            fmap = cls(n_nodes=counts, selection=selection, **common,
                       half_width=_half_widths(half_width, counts, width, bound,
                                               entrywise_bound))
        _warn_if_unresolved(fmap, kernel, box)
        if fmap.n_components >= n:
            warnings.warn(
                f"Gauss-Legendre features have s = {fmap.n_components} columns for "
                f"n = {n} samples: training and prediction are no faster than the exact GP "
                "(hyperparameter learning still is)", UserWarning, stacklevel=2)
        return fmap

    # ----------------------------------------------------------------- evaluation
    @property
    def n_components(self) -> int:
        return int(np.prod(self.n_nodes))

    @property
    def nodes(self) -> np.ndarray:
        """The nodes eta_l of S+ (then 0 if present), shape (n_pairs [+ 1], n_dims)."""
        return self._nodes.copy()

    def basis(self, X) -> np.ndarray:
        """Phi = [cos(2 pi eta_l^T (x - c)) | sin(2 pi eta_l^T (x - c)) | 1 if 0 is a node]."""
        X = check_matrix(X, "X", dtype=feature_dtype(X), n_dims=self.n_dims)
        U = X - self.offset.astype(X.dtype)
        factors = []
        for j, (nodes, _) in enumerate(self._rules):
            phase = (2 * np.pi) * np.multiply.outer(U[:, j], nodes.astype(X.dtype))
            factors.append((np.cos(phase), np.sin(phase)))
        n_pairs = self.n_components // 2
        Phi = np.empty((X.shape[0], self.n_components), dtype=X.dtype)
        _half_grid_phases(factors, self._positive, self._zero, Phi[:, :n_pairs],
                          Phi[:, n_pairs:2 * n_pairs])
        if self._has_origin:
            Phi[:, -1] = 1.0
        return Phi

    def _log_weights_per_node(self, kernel: Kernel) -> np.ndarray:
        return self._log_node_weights + kernel.log_spectral_density(self._nodes)

    def _per_column(self, per_node: np.ndarray) -> np.ndarray:
        """Expand (..., n_pairs [+ 1]) to the columns [cos pairs | sin pairs | origin]."""
        n_pairs = self._nodes.shape[0] - int(self._has_origin)
        pairs = per_node[..., :n_pairs]
        return np.concatenate([pairs, pairs, per_node[..., n_pairs:]], axis=-1)

    def weights(self, kernel: Kernel) -> np.ndarray:
        """w = [2 W_l p_theta(eta_l)]_{l in S+} for cos and sin (+ W_0 p_theta(0)); Eq. (11)."""
        self._check_kernel(kernel)
        return self._per_column(np.exp(self._log_weights_per_node(kernel)))

    def log_weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d log w_l / d theta_i = d log p_theta(eta_l) / d theta_i, shape (n_params, s)."""
        self._check_kernel(kernel)
        return self._per_column(kernel.log_spectral_density_grad(self._nodes).T)

    def _check_kernel(self, kernel: Kernel) -> None:
        if not self.supports(kernel):
            raise ValueError(
                "kernel must be Gaussian, Matern, Cauchy or Laplacian for Gauss-Legendre "
                f"features, got {type(kernel).__name__}"
            )

    def captured_mass(self, kernel: Kernel) -> float:
        """k~(x, x) / k(x, x): the share of the prior variance the rule reproduces.

        k~(x, x) = sum_l W_l p_theta(eta_l), the same at every x (cos^2 + sin^2 = 1). Below 1
        the box drops spectral mass (truncation, Proposition 7) or the nodes miss the density's
        peak; above 1 they overshoot it. Either way, far from 1 the features approximate
        another (band-limited) kernel, not this one.
        """
        self._check_kernel(kernel)
        Psi = self.features(self.offset[None, :], kernel)
        return float(Psi[0] @ Psi[0]) / kernel.variance

    def valid_log_bounds(self, kernel: Kernel) -> np.ndarray:
        """The log box of ``kernel.theta`` on which the rule reproduces the kernel.

        Each free length-scale row of ``kernel.bounds`` is narrowed to the longest run of a
        log grid (VALID_GRID_POINTS points) on which the rule reproduces the prior variance
        to within VALID_MASS_TOLERANCE: for an isotropic length scale l,
        |prod_j m_j(l) - 1| <= tolerance, and for an ARD length scale l_j,
        |m_j(l_j) - 1| <= tolerance / d, where

            m_j(l) = sum_i W_{j,i} p_l(eta_{j,i})

        is the mass the 1-D rule of dimension j gives the 1-D density of the kernel family
        (the marginal of the d-dimensional one: the kernel restricted to axis j), so that
        prod_j m_j = :meth:`captured_mass` for a separable kernel (Gaussian, Cauchy,
        Laplacian). Below the run the truncation box drops the spectrum's tails, above it
        the nodes miss the density's peak: there the features approximate another kernel.
        The variance row is the kernel's (the mass is relative to it); fixed rows are kept.
        A row where no grid point is within VALID_MASS_TOLERANCE uses MASS_TOLERANCE (that of
        build's warning) instead, and is kept whole where none is within that either (build
        has then warned that the rule does not reproduce the kernel there).
        """
        self._check_kernel(kernel)
        bounds = kernel.bounds.copy()
        ard = kernel.anisotropic
        tolerance = VALID_MASS_TOLERANCE / self.n_dims if ard else VALID_MASS_TOLERANCE
        unit = kernel.with_params(length_scale=1.0, variance=1.0, length_scale_bounds="fixed",
                                  variance_bounds="fixed")
        for row in range(kernel.n_params - 1):
            low, high = bounds[row]
            if low == high:
                continue
            grid = np.linspace(low, high, VALID_GRID_POINTS)
            mass = np.ones(grid.size)
            for j in ([row] if ard else range(self.n_dims)):
                mass *= self._dimension_mass(unit, j, np.exp(grid))
            for share in (tolerance, tolerance * MASS_TOLERANCE / VALID_MASS_TOLERANCE):
                start, stop = _longest_run(np.abs(mass - 1.0) <= share)
                if start < stop:
                    bounds[row] = grid[start], grid[stop - 1]
                    break
        return bounds

    def _dimension_mass(self, unit: Kernel, j: int, scales: np.ndarray) -> np.ndarray:
        """m_j(l) for each l in ``scales``: sum_i W_i l p_1(l eta_i), p_1 the unit-scale
        1-D density (p_l(eta) = l p_1(l eta) in one dimension)."""
        nodes, weights = self._rules[j]
        V = np.multiply.outer(scales, nodes)
        density = np.exp(unit.log_spectral_density(V.reshape(-1, 1))).reshape(V.shape)
        return scales * (density @ weights)

    def report(self) -> str:
        """The node counts and truncation chosen, and the theoretical values.

        docs/gauss-legendre.md, sections 5-7.
        """
        def fmt(values, precision=4):
            if values is None:
                return "not computed"
            return np.array2string(np.asarray(values), precision=precision, separator=", ")
        return (
            f"Gauss-Legendre features: q = {fmt(self.n_nodes)} nodes (s = {self.n_components} "
            f"columns), Q = {fmt(self.half_width)} ({self.selection}); Proposition 7: "
            f"R = {fmt(self.truncation_bound)}; Theorems 11-12: q = "
            f"{fmt(self.theoretical_n_nodes, 6)} for epsilon = {self.epsilon:g}; "
            f"solver = {self.solver}"
        )


def _warn_if_unresolved(fmap: GaussLegendreFeatures, kernel: Kernel,
                        box: HyperparameterBox) -> None:
    """Warn when, at an end of Theta's length scales, the rule keeps a share of the prior
    variance outside [1 - MASS_TOLERANCE, 1 + MASS_TOLERANCE] (:meth:`captured_mass`)."""
    shortest, longest = box.extreme_kernels(kernel)
    for end, extreme, cause in (
            ("smallest", shortest, "the truncation box drops the spectrum's tails"),
            ("largest", longest, "the nodes do not resolve the spectral density's peak")):
        mass = fmap.captured_mass(extreme)
        if abs(mass - 1.0) > MASS_TOLERANCE:
            warnings.warn(
                f"Gauss-Legendre features with q = {fmap.n_nodes.tolist()} reproduce "
                f"{100 * mass:.0f} % of the prior variance at the {end} length scales of "
                f"Theta ({np.round(extreme.length_scale, 4).tolist()}): {cause}, so there "
                "the features approximate another kernel and learned hyperparameters near "
                "that end are unreliable; raise n_components or narrow the length-scale "
                "bounds", UserWarning, stacklevel=3)


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """[start, stop) of the longest run of True in ``mask`` ((0, 0) when there is none)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    if edges.size == 0:
        return 0, 0
    starts, stops = edges[0::2], edges[1::2]
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k])


def _integer_vector(values, name: str, n_dims: int) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iuf" or array.ndim > 1 or (
            array.ndim == 1 and array.size != n_dims):
        raise ValueError(
            f"{name} must be a positive integer or one per input dimension ({n_dims}), "
            f"got {values!r}"
        )
    array = np.broadcast_to(array, (n_dims,))
    if np.any(array < 1) or np.any(array != np.round(array)):
        raise ValueError(f"{name} must contain positive integers, got {array.tolist()}")
    return array.astype(np.int64)


# --------------------------------------------------------------------------- choosing q and Q
def _split_budget(n_components, growth: np.ndarray, panels: np.ndarray) -> np.ndarray:
    """q_j proportional to ``growth`` with prod_j q_j <= n_components (steps of ``panels``)."""
    budget = check_positive_int(n_components, "n_components")
    step = panels.astype(np.int64)
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


def _half_widths(half_width, n_nodes: np.ndarray, data_width: np.ndarray, bound: np.ndarray,
                 entrywise_bound: np.ndarray) -> np.ndarray:
    """Q_j of the ``half_width`` option: None -> the resolution rule, "proposition7" -> R."""
    if half_width is None:
        return _resolved_half_widths(n_nodes, data_width, entrywise_bound)
    if isinstance(half_width, str) and half_width == "proposition7":
        return bound.copy()
    values = np.broadcast_to(np.asarray(half_width, dtype=float), bound.shape).copy() \
        if np.ndim(half_width) <= 1 and np.size(half_width) in (1, bound.size) else None
    if values is None or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(
            f"half_width must be None, 'proposition7', a positive number or one per input "
            f"dimension ({bound.size}), got {half_width!r}"
        )
    return values


def _resolved_half_widths(n_nodes: np.ndarray, data_width: np.ndarray,
                          entrywise_bound: np.ndarray) -> np.ndarray:
    """Q_j = min(R'_j, q_j / (RESOLUTION_FACTOR pi D_j)): the widest useful box q_j resolve.

    The q-point rule integrates the phase e^{2 pi i eta Delta} over [-Q, Q] only once its
    exactness degree 2q - 1 exceeds the phase's 2 pi Q |Delta| (the Nyquist count q ~ pi Q D
    read the other way; docs/gauss-legendre.md, section 7); |Delta_j| <= D_j, the data box width.
    Beyond R'_j, where the dropped mass is epsilon lambda_min / 2 (Proposition 7 without the
    Cauchy-Schwarz factor n), a wider box only costs resolution (build's Notes: our rule).
    """
    with np.errstate(divide="ignore"):
        resolved = n_nodes / (RESOLUTION_FACTOR * math.pi * data_width)
    return np.minimum(entrywise_bound, resolved)


def auto_budget(n_samples: int, n_dims: int) -> tuple[int, str]:
    """The largest s of ``n_nodes="auto"`` when ``n_components`` is None, and why.

    s = min(floor(n / sqrt(3)), floor(sqrt(AUTO_MEMORY_BYTES / (8 AUTO_SQUARE_MATRICES))),
    MAX_COMPONENTS), at least min(4^d, MAX_COMPONENTS) (the first rule auto tries).

    - Cost: a fit makes one pass Phi^T Phi (n s^2 flops) and then O(s^3) per
      likelihood-and-gradient step; the exact GP costs a Cholesky factorization, n^3 / 3
      flops, and more per step. At s = n / sqrt(3) the pass alone costs one exact
      factorization, and each step (about s^3 = n^3 / 5.2) approaches an exact step: a
      larger s makes the fit no cheaper than the exact GP.
    - Memory: AUTO_SQUARE_MATRICES s x s float64 matrices within AUTO_MEMORY_BYTES (1 GiB:
      s <= 4,729 for the engine's 6).

    Parameters
    ----------
    n_samples, n_dims : int
        n and d of the training inputs.

    Returns
    -------
    budget : int
    reason : str
        The rule with its numbers, for the map's ``selection`` and warnings.
    """
    n = check_positive_int(n_samples, "n_samples")
    d = check_positive_int(n_dims, "n_dims")
    cost = int(math.floor(n / math.sqrt(3.0)))
    memory = int(math.isqrt(AUTO_MEMORY_BYTES // (8 * AUTO_SQUARE_MATRICES)))
    smallest = min(4 ** min(d, 7), MAX_COMPONENTS)
    budget = max(min(cost, memory, MAX_COMPONENTS), smallest)
    reason = (f"derived budget s <= {budget} = max(min(n / sqrt(3) = {cost} (no cheaper than "
              f"the exact GP beyond), {memory} ({AUTO_SQUARE_MATRICES} s x s float64 matrices "
              f"in {AUTO_MEMORY_BYTES / 2**30:g} GiB), {MAX_COMPONENTS}), {smallest}) for "
              f"n = {n}")
    return budget, reason


def _auto_cap(n_components, n_samples: int, n_dims: int) -> tuple[int, str]:
    """(budget, description) of n_nodes="auto": the user's n_components, or auto_budget."""
    if n_components is None:
        return auto_budget(n_samples, n_dims)
    budget = check_positive_int(n_components, "n_components")
    return budget, f"budget n_components = {budget}"


def _auto(cls, common: dict, kernel: Kernel, box: HyperparameterBox, X: np.ndarray,
          y: np.ndarray, width: np.ndarray, entrywise_bound: np.ndarray,
          cap: tuple[int, str], tolerance: float, noise_variance: float,
          rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """Node counts of ``n_nodes="auto"`` and their description (docs/gauss-legendre.md, section 7).

    q grows by AUTO_GROWTH per dimension (Q by the resolution rule) until the log marginal
    likelihood per sample and the root-mean-square posterior mean at the samples (relative to
    std(y)) change by less than ``tolerance`` between two steps (the smaller of the two is
    returned), at the kernel's
    hyperparameters and with its length scales at the two extremes of Theta (where the
    truncation, respectively the node count, is hardest; docs/gauss-legendre.md, section 4),
    all with noise variance ``noise_variance``. Compared on a subsample of at most
    AUTO_SUBSAMPLE rows. ``cap`` is (the largest s, its description): n_components, or
    :func:`auto_budget`.
    """
    budget, budget_note = cap
    if X.shape[0] > AUTO_SUBSAMPLE:
        rows = np.sort(rng.choice(X.shape[0], AUTO_SUBSAMPLE, replace=False))
        X, y = X[rows], y[rows]
    bound, panels = common["truncation_bound"], common["panels"]
    checks = [kernel] + box.extreme_kernels(kernel)
    y_scale = float(np.std(y)) or 1.0
    target = min(budget, 4 ** X.shape[1])
    steps, change = [], (math.inf, math.inf)          # steps: (q, [(log p, mean) per check])
    while True:
        counts = _split_budget(target, bound * width, panels)
        if not steps or not np.array_equal(counts, steps[-1][0]):
            fmap = cls(n_nodes=counts, **common,
                       half_width=_resolved_half_widths(counts, width, entrywise_bound))
            steps.append((counts, _likelihoods_and_means(fmap, checks, noise_variance, X, y)))
        if len(steps) > 1 and steps[-1][0] is counts:
            (_, current), (_, previous) = steps[-1], steps[-2]
            change = (max(abs(a - b) for (a, _), (b, _) in zip(current, previous)) / X.shape[0],
                      max(np.sqrt(np.mean((m - p) ** 2))
                          for (_, m), (_, p) in zip(current, previous)) / y_scale)
            if max(change) < tolerance:
                break
        if target >= budget:
            break
        target = min(budget, int(math.ceil(target * AUTO_GROWTH ** X.shape[1])))
    converged = max(change) < tolerance
    # converged: the smaller of the last two rules already agrees with the larger
    counts = steps[-2][0] if converged else steps[-1][0]
    if not converged:
        warnings.warn(
            f"n_nodes='auto' stopped at the {budget_note} (q = {counts.tolist()}) before the "
            f"likelihood and predictions settled (last change {change[0]:.2e} per sample, "
            f"{change[1]:.2e} of std(y); tolerance {tolerance:g}); raise n_components",
            UserWarning, stacklevel=3)
    selection = (f"auto, {'converged' if converged else 'stopped at the budget'}: last change "
                 f"{change[0]:.2e} in log p(y)/n, {change[1]:.2e} std(y) in the mean "
                 f"(tolerance {tolerance:g}, noise variance {noise_variance:.3g}); "
                 f"{budget_note}; {box.describe()}")
    return counts, selection


def _likelihoods_and_means(fmap, kernels, noise_variance, X, y):
    """(log p(y), posterior mean at X) for each kernel, from one basis pass."""
    statistics = gp.BasisStatistics.accumulate(fmap, X, y)
    Phi = fmap.basis(X)
    out = []
    for kernel in kernels:
        value, system = gp.log_marginal_likelihood(statistics.at(fmap, kernel), noise_variance)
        out.append((value, Phi @ (np.sqrt(fmap.weights(kernel)) * system.beta)))
    return out


# --------------------------------------------------------------------------- semigroup kernels
#: Largest per-dimension node count the semigroup resolution check searches.
SEMIGROUP_MAX_NODES = 4096


def _semigroup_factor_error(n_nodes: int, half_width: float, c_min: float, c_max: float,
                            data_max: float) -> float:
    """max |sum_i W_i c e^{-(c + u) eta_i} - c / (c + u)| over c in [c_min, c_max] and
    u = x + z in [0, 2 max x]: the error of one dimension's rule on its factor of k / s."""
    t, omega = gauss_legendre(int(n_nodes))
    eta, W = 0.5 * half_width * (t + 1.0), 0.5 * half_width * omega
    c = np.geomspace(c_min, c_max, 9)[:, None, None]
    u = np.linspace(0.0, 2.0 * data_max, 65)[None, :, None]
    rule = np.sum(W * c * np.exp(-(c + u) * eta), axis=-1)
    return float(np.max(np.abs(rule - c[..., 0] / (c[..., 0] + u[..., 0]))))


def _semigroup_required_nodes(half_width, c_min, c_max, data_max, tolerance) -> int | None:
    """The smallest q (doubling) whose factor error is <= tolerance, None past the cap."""
    q = 1
    while q <= SEMIGROUP_MAX_NODES:
        if _semigroup_factor_error(q, half_width, c_min, c_max, data_max) <= tolerance:
            return q
        q *= 2
    return None


def _warn_if_semigroup_unresolved(fmap, box: HyperparameterBox, data_max: np.ndarray) -> None:
    """Warn when the tensor rule cannot resolve the kernel over Theta and the data's range.

    With per-dimension factor errors e_j (:func:`_semigroup_factor_error`, factors <= 1) the
    error of k / s is at most prod_j (1 + e_j) - 1; above ``MASS_TOLERANCE`` the rule is poor.
    A budget of m columns gives q = floor(m^(1/d)) nodes per dimension, so in higher dimension
    q is too small to resolve the factors (the paper uses this map in low dimension).
    """
    errors = np.array([
        _semigroup_factor_error(q, Q, low, high, top) for q, Q, low, high, top in zip(
            fmap.n_nodes, fmap.half_width, box.length_scale_min, box.length_scale_max,
            data_max)])
    total = float(np.prod(1.0 + errors) - 1.0)
    if total <= MASS_TOLERANCE:
        return
    d = fmap.n_dims
    per_dimension = (1.0 + MASS_TOLERANCE) ** (1.0 / d) - 1.0
    needed = [_semigroup_required_nodes(Q, low, high, top, per_dimension) for Q, low, high, top
              in zip(fmap.half_width, box.length_scale_min, box.length_scale_max, data_max)]
    needed_text = ", ".join(f">{SEMIGROUP_MAX_NODES}" if q is None else str(q) for q in needed)
    warnings.warn(
        f"glf-semigroup with q = {fmap.n_nodes.tolist()} nodes per dimension ({d} dimension(s), "
        f"s = {fmap.n_components} columns) reproduces k(x, z) / s only to within "
        f"{min(total, 1.0):.2g} over the c box and the data's range: the rule cannot resolve "
        f"the kernel (q = floor(n_components^(1/d)) shrinks with d); about q = [{needed_text}] "
        "per dimension are needed: raise n_components or n_nodes, narrow the "
        "length_scale_bounds (c), or use fewer input dimensions", UserWarning, stacklevel=3)


@dataclass(frozen=True, eq=False)
class SemigroupGaussLegendreFeatures(FixedBasisFeatureMap, name="glf-semigroup"):
    """Gauss-Legendre features of the reciprocal semigroup kernel (GLF paper, Section 6.3).

    docs/gauss-legendre.md, section 9.

    Attributes
    ----------
    n_nodes : ndarray of int (n_dims,)
        q_j; s = prod_j q_j columns.
    half_width : ndarray (n_dims,)
        Q_j: the truncated domain is [0, Q_1] x ... x [0, Q_d].
    truncation_bound : ndarray (n_dims,) or None
        Q_j of the truncation rule for the Theta, epsilon and n the map was built with.
    epsilon : float
    selection : str

    Notes
    -----
    The Laplace integral k(x, z) = s int_{R^d_+} e^{-eta^T (x + z)} p_c(eta) d eta is truncated
    to [0, Q] and replaced by the tensor Gauss-Legendre rule mapped from [-1, 1]:
    eta_{j,i} = (Q_j / 2)(t_i + 1), W_{j,i} = (Q_j / 2) omega_i. The features are real,

        Phi = [e^{-eta_l^T x}]_l = row-wise Kronecker product of [e^{-eta_{j,i} x_j}]_i,
        w_l(theta) = W_l s p_c(eta_l),

    (no symmetry step; n sum_j q_j exponentials). Truncation (the tail of p_c is
    s [1 - prod_j (1 - e^{-c_j Q_j})], |phi| <= 1 for x >= 0): Q_j = -log(1 - (1 - delta /
    s_max)^{1/d}) / c_j,min with delta = epsilon lambda_min / (2 n) (Eq. 19).
    """

    n_nodes: np.ndarray
    half_width: np.ndarray
    truncation_bound: np.ndarray | None = None
    epsilon: float = DEFAULT_EPSILON
    selection: str = "given"

    description = ("Gauss-Legendre features of the reciprocal semigroup kernel (non-negative "
                   "inputs): Laplace-transform nodes on [0, Q]")
    reference = "Fink Shustin & Avron, JMLR 2022, Section 6.3"
    fit_context = ("noise_variance_lower",)

    def __post_init__(self):
        d = check_positive_int(self.n_dims, "n_dims")
        n_nodes = _integer_vector(self.n_nodes, "n_nodes", d)
        half_width = np.broadcast_to(np.asarray(self.half_width, dtype=float), (d,)).copy()
        if not np.all(np.isfinite(half_width)) or np.any(half_width <= 0):
            raise ValueError(
                f"half_width must contain {d} finite positive numbers, got {half_width.tolist()}"
            )
        object.__setattr__(self, "n_nodes", n_nodes)
        object.__setattr__(self, "half_width", half_width)
        rules = []
        for q, Q in zip(n_nodes, half_width):
            t, omega = gauss_legendre(int(q))
            rules.append((0.5 * Q * (t + 1.0), 0.5 * Q * omega))
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_nodes",
                           _full_grid([nodes[:, None] for nodes, _ in rules], _Nodes))
        object.__setattr__(self, "_log_node_weights",
                           np.log(_full_grid([w for _, w in rules], _Weights)))

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        return isinstance(kernel, ReciprocalSemigroup)

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, n_nodes=None,
              epsilon=DEFAULT_EPSILON, noise_variance_lower=DEFAULT_NOISE_VARIANCE_LOWER):
        """Truncation from epsilon, Theta and n; q_j = ``n_nodes`` (an int or one per
        dimension) or the largest equal counts with prod_j q_j <= ``n_components``.
        ``rng`` is not used (the rule is deterministic)."""
        X = check_matrix(X, "X")
        n, d = X.shape
        if not cls.supports(kernel):
            raise ValueError(f"kernel must be ReciprocalSemigroup for glf-semigroup, got "
                             f"{type(kernel).__name__}")
        kernel.check_n_dims(d)
        if np.any(X < 0):
            raise ValueError(f"X must be non-negative for glf-semigroup, got a minimum of "
                             f"{float(X.min())!r}")
        epsilon = check_positive_scalar(epsilon, "epsilon")
        box = HyperparameterBox.from_kernel(kernel, d, noise_variance_lower)
        delta = epsilon * box.noise_variance_min / (2.0 * n)
        # tail s [1 - prod_j (1 - e^{-c_j Q_j})] = delta with equal factors per dimension
        bound = -np.log(-np.expm1(np.log1p(-delta / box.variance_max) / d)) / box.length_scale_min
        if n_nodes is None:
            budget = check_positive_int(n_components, "n_components")
            counts = np.full(d, max(1, int(math.floor(budget ** (1.0 / d) + 1e-9))))
            selection = f"budget n_components = {budget}"
        else:
            counts, selection = _integer_vector(n_nodes, "n_nodes", d), "given"
        fmap = cls(n_dims=d, n_nodes=counts, half_width=bound, truncation_bound=bound,
                   epsilon=epsilon, selection=selection)
        _warn_if_semigroup_unresolved(fmap, box, X.max(axis=0))
        return fmap

    @property
    def n_components(self) -> int:
        return int(np.prod(self.n_nodes))

    @property
    def nodes(self) -> np.ndarray:
        """The nodes eta_l, shape (s, n_dims), row-major over the per-dimension rules."""
        return self._nodes.copy()

    def basis(self, X) -> np.ndarray:
        """Phi = [e^{-eta_l^T x}]_l for x >= 0."""
        X = check_matrix(X, "X", dtype=feature_dtype(X), n_dims=self.n_dims)
        if np.any(X < 0):
            raise ValueError(f"X must be non-negative for glf-semigroup, got a minimum of "
                             f"{float(X.min())!r}")
        factors = [np.exp(-np.multiply.outer(X[:, j], nodes.astype(X.dtype)))
                   for j, (nodes, _) in enumerate(self._rules)]
        return _full_grid(factors, _Products)

    def weights(self, kernel: Kernel) -> np.ndarray:
        """w_l = W_l s p_c(eta_l)."""
        return np.exp(self._log_node_weights + kernel.log_spectral_density(self._nodes))

    def log_weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d log w_l / d theta = d log p_c(eta_l) / d theta: 1 - c_j eta_j, and 1 for log s."""
        return kernel.log_spectral_density_grad(self._nodes).T
