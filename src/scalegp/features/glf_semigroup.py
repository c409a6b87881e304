"""Gauss-Legendre features of a semigroup kernel (the map ``"glf-semigroup"``; GLF paper, Section
6.3; docs/gauss-legendre.md, section 9): the rule on the kernel's Laplace representation
k(x, z) = s int e^{-eta^T (x + z)} p(eta) d eta, for non-negative inputs.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import check_matrix, check_positive_int, check_positive_scalar
from ..kernels import Kernel
from ..stored import Array, Value
from ._tensor_grid import Nodes, Products, Weights, full_grid
from .base import FixedBasisFeatureMap, feature_dtype
from .gauss_legendre import DEFAULT_NOISE_VARIANCE_LOWER, MASS_TOLERANCE, _integer_vector
from .glf_theory import DEFAULT_EPSILON, HyperparameterBox, semigroup_truncation_half_widths
from .quadrature import gauss_legendre


# --------------------------------------------------------------------------- semigroup kernels
#: Largest per-dimension node count the semigroup resolution check searches.
SEMIGROUP_MAX_NODES = 4096


def _semigroup_factor_error(kernel: Kernel, n_nodes: int, half_width: float, c_min: float,
                            c_max: float, data_max: float) -> float:
    """max |sum_i W_i p_c(eta_i) e^{-u eta_i} - k_c(u)| over c in [c_min, c_max] and
    u = x + z in [0, 2 max x]: the error of one dimension's rule on its factor of k / s.

    p_c and k_c are the kernel's in one dimension with scale c and unit variance (for the
    reciprocal semigroup kernel p_c(eta) = c e^{-c eta} and k_c(u) = c / (c + u)), asked of
    the kernel: its Laplace density and its value at x = z = u / 2."""
    t, omega = gauss_legendre(int(n_nodes))
    eta, W = 0.5 * half_width * (t + 1.0), 0.5 * half_width * omega
    u = np.linspace(0.0, 2.0 * data_max, 65)
    error = 0.0
    for c in np.geomspace(c_min, c_max, 9):
        factor = kernel.with_params(length_scale=c, variance=1.0, length_scale_bounds="fixed",
                                    variance_bounds="fixed")
        density = np.exp(factor.log_spectral_density(eta[:, None]))
        rule = np.exp(-np.multiply.outer(u, eta)) @ (W * density)
        error = max(error, float(np.max(np.abs(rule - factor.diag(0.5 * u[:, None])))))
    return error


def _semigroup_required_nodes(kernel, half_width, c_min, c_max, data_max,
                              tolerance) -> int | None:
    """The smallest q (doubling) whose factor error is <= tolerance, None past the cap."""
    q = 1
    while q <= SEMIGROUP_MAX_NODES:
        if _semigroup_factor_error(kernel, q, half_width, c_min, c_max, data_max) <= tolerance:
            return q
        q *= 2
    return None


def _warn_if_semigroup_unresolved(fmap, kernel: Kernel, box: HyperparameterBox,
                                  data_max: np.ndarray) -> None:
    """Warn when the tensor rule cannot resolve the kernel over Theta and the data's range.

    With per-dimension factor errors e_j (:func:`_semigroup_factor_error`, factors <= 1) the
    error of k / s is at most prod_j (1 + e_j) - 1; above ``MASS_TOLERANCE`` the rule is poor.
    A budget of m columns gives q = floor(m^(1/d)) nodes per dimension, so in higher dimension
    q is too small to resolve the factors (the paper uses this map in low dimension).
    """
    errors = np.array([
        _semigroup_factor_error(kernel, q, Q, low, high, top) for q, Q, low, high, top in zip(
            fmap.n_nodes, fmap.half_width, box.length_scale_min, box.length_scale_max,
            data_max)])
    total = float(np.prod(1.0 + errors) - 1.0)
    if total <= MASS_TOLERANCE:
        return
    d = fmap.n_dims
    per_dimension = (1.0 + MASS_TOLERANCE) ** (1.0 / d) - 1.0
    needed = [_semigroup_required_nodes(kernel, Q, low, high, top, per_dimension)
              for Q, low, high, top in zip(fmap.half_width, box.length_scale_min,
                                           box.length_scale_max, data_max)]
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

    STORED = {"n_nodes": Array(("d",), ("at_least_one",), kind="int"),
              "half_width": Array(("d",), ("positive",)),
              "truncation_bound": Array(("d",), ("reported",)),
              "epsilon": Value("number", "positive"),
              "selection": Value("str")}

    description = ("Gauss-Legendre features of the reciprocal semigroup kernel (non-negative "
                   "inputs): Laplace-transform nodes on [0, Q]")
    reference = "Fink Shustin & Avron, JMLR 2022, Section 6.3"
    fit_context = ("noise_variance_lower", "n_samples")
    builds_from_bounding_box = True

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
                           full_grid([nodes[:, None] for nodes, _ in rules], Nodes))
        object.__setattr__(self, "_log_node_weights",
                           np.log(full_grid([w for _, w in rules], Weights)))

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """A kernel with a Laplace representation
        (:attr:`scalegp.kernels.Kernel.laplace_representation`)."""
        return kernel.laplace_representation

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, n_nodes=None,
              epsilon=DEFAULT_EPSILON, noise_variance_lower=DEFAULT_NOISE_VARIANCE_LOWER,
              n_samples=None):
        """Truncation from epsilon, Theta and n; q_j = ``n_nodes`` (an int or one per
        dimension) or the largest equal counts with prod_j q_j <= ``n_components``.
        ``rng`` is not used (the rule is deterministic). ``n_samples``: n when X is the
        bounding box of the training rows (a streaming fit), default X's row count."""
        X = check_matrix(X, "X")
        n, d = X.shape
        n = n if n_samples is None else check_positive_int(n_samples, "n_samples")
        if not cls.supports(kernel):
            raise ValueError(f"kernel {kernel!r} is not supported by {cls.name}: it has no "
                             "Laplace representation k(x, z) = s int e^{-eta^T (x + z)} "
                             "p(eta) d eta (a semigroup kernel, such as ReciprocalSemigroup)")
        kernel.check_n_dims(d)
        if np.any(X < 0):
            raise ValueError(f"X must be non-negative for glf-semigroup, got a minimum of "
                             f"{float(X.min())!r}")
        epsilon = check_positive_scalar(epsilon, "epsilon")
        box = HyperparameterBox.from_kernel(kernel, d, noise_variance_lower)
        bound = semigroup_truncation_half_widths(kernel, box, n, epsilon)
        if n_nodes is None:
            budget = check_positive_int(n_components, "n_components")
            counts = np.full(d, max(1, int(math.floor(budget ** (1.0 / d) + 1e-9))))
            selection = f"budget n_components = {budget}"
        else:
            counts, selection = _integer_vector(n_nodes, "n_nodes", d), "given"
        fmap = cls(n_dims=d, n_nodes=counts, half_width=bound, truncation_bound=bound,
                   epsilon=epsilon, selection=selection)
        _warn_if_semigroup_unresolved(fmap, kernel, box, X.max(axis=0))
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
        return full_grid(factors, Products)

    def weights(self, kernel: Kernel) -> np.ndarray:
        """w_l = W_l s p_c(eta_l)."""
        return np.exp(self._log_node_weights + kernel.log_spectral_density(self._nodes))

    def log_weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d log w_l / d theta = d log p_c(eta_l) / d theta: 1 - c_j eta_j, and 1 for log s."""
        return kernel.log_spectral_density_grad(self._nodes).T
