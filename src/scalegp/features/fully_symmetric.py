"""Fully symmetric quadrature features for the Gaussian kernel (Liu, Huang, Chen & Suykens,
"Towards a unified quadrature framework for large-scale kernel machines", TPAMI 2021):
the deterministic rules D-FS of degree 3 and 5 ("dfs") and the stochastic control-variate
estimator S-FS ("sfs").

With z = (x - y) / l (per-dimension length scales) the Gaussian kernel is
k(x, y) = s I_d(f), f(omega) = cos(omega^T z), omega ~ N(0, I_d) (their Eq. 1). The third-
degree D-FS value used throughout is (Eq. 7 applied to f)

    Q(z) = 1 - (1 / lambda^2) sum_j (1 - cos(lambda z_j)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_generator, check_matrix, check_positive_int, check_positive_scalar
from ..kernels import Kernel
from . import quadrature
from ._fourier import FourierFeatureMap
from .gaussian_quadrature import largest_fitting, require_gaussian, rule_columns
from .qmc import scrambled_points
from .random_fourier import data_centre
from .spherical_radial import rules_within, spherical_radial_rule

#: D-FS generator lambda_1 (Genz-Keister; the 3-point Gauss-Hermite node; docs/decisions.md,
#: "The D-FS generator").
DEFAULT_LAMBDA = float(np.sqrt(3.0))

DEGREES = (3, 5)
#: Point sets the S-FS control variate can correct (Remark 3).
SAMPLINGS = ("mc", "qmc", "ssr")


def _check_lambda(lambda_) -> float:
    return check_positive_scalar(lambda_, "lambda_")


def dfs_rule(n_dims: int, degree: int, lambda_: float = DEFAULT_LAMBDA):
    """The D-FS rule Q^(m,d), degree 2m + 1 in {3, 5}, with lambda_1 = ``lambda_``.

    Degree 5 takes lambda_2 from the Genz-Keister sequence; with lambda_1 = sqrt(3) its
    weight is 0 and the rule has 2 d^2 + 1 nodes (docs/quadrature-features.md, "D-FS, degree 5").
    """
    if degree not in DEGREES:
        raise ValueError(f"degree must be one of {DEGREES} or None, got {degree!r}")
    generators = (lambda_,) + quadrature.GENZ_KEISTER_GENERATORS[1:(degree - 1) // 2]
    return quadrature.fully_symmetric_rule(n_dims, degree, generators)


@dataclass(frozen=True, eq=False)
class DeterministicFullySymmetricFeatures(FourierFeatureMap, name="dfs"):
    r"""D-FS: deterministic fully symmetric quadrature features of degree 3 or 5.

    Notes
    -----
    Liu et al. Eqs. (3)-(4) (Genz-Keister weights), third degree Eqs. (7)-(9):

        k(x, y) ~ s [ (1 - d/lambda^2) + (1/lambda^2) sum_j cos(lambda z_j) ],

    nodes 0 and +-lambda e_j (Eq. 8). The fifth-degree rule (lambda = sqrt(3)) adds the
    nodes +-lambda e_i +-lambda e_j with weight 1/36 and has weights w_0 = (d^2 - 7d + 18)/18
    and w_(1) = (4 - d)/18 (docs/quadrature-features.md, "D-FS, degree 5"). The real feature
    map keeps one node of each +-pair (doubled weight) and the origin:

        psi(x) = sqrt(s |a_l|) [cos(gamma_l^T (x - c)/l), sin(gamma_l^T (x - c)/l)]_l,

    with sign(a_l) in ``frequency_signs`` where a weight is negative (degree 3 for
    d > lambda^2, degree 5 for d > 4; docs/decisions.md, "Signed weights"); such a rule is
    not a positive definite kernel, and on widely spread inputs K~ + s2 I can be indefinite
    (the engine raises NotPositiveDefiniteError). Real columns: 2d + 2 (degree 3)
    and 2d^2 + 2 (degree 5, lambda = sqrt(3)). ``degree`` defaults to the larger degree that
    fits ``n_components``. Gaussian kernel only: the paper builds the rules for N(0, I).
    """

    may_have_negative_weights = True

    description = "deterministic fully symmetric quadrature (D-FS), degree 3 or 5"
    reference = "Liu, Huang, Chen & Suykens, TPAMI 2021, Eqs. 3-9"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Gaussian kernel only: the rules integrate against N(0, I) (Liu et al. Eq. 1)."""
        return kernel.spectral_measure_is_standard_normal

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *,
              degree: int | None = None, lambda_: float = DEFAULT_LAMBDA):
        """Build the D-FS rule of the given degree (default: the highest that fits).

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian
        n_components : int
            Budget of real columns; the map reports its actual ``n_components``.
        rng : ignored
            The rule is deterministic.
        degree : {3, 5}, optional
        lambda_ : float, default sqrt(3)
            The generator lambda_1 (node spacing).
        """
        X = check_matrix(X, "X")
        require_gaussian("dfs", kernel)
        n_components = check_positive_int(n_components, "n_components")
        lambda_ = _check_lambda(lambda_)
        n_dims = X.shape[1]
        rules = {candidate: dfs_rule(n_dims, candidate, lambda_)
                 for candidate in (DEGREES if degree is None else [degree])}
        chosen = largest_fitting(rules, lambda candidate: rule_columns(rules[candidate]),
                                 n_components, "dfs", "degree")
        omega, weights, signs = quadrature.cosine_rule(rules[chosen])
        return cls(n_dims=n_dims, omega=omega, frequency_weights=weights,
                   offset=data_centre(X), frequency_signs=signs)


@dataclass(frozen=True, eq=False)
class StochasticFullySymmetricFeatures(FourierFeatureMap, name="sfs"):
    r"""S-FS: the third-degree stochastic fully symmetric estimator with control variates.

    Notes
    -----
    Liu et al. Eqs. (10)-(16), real-valued form (docs/decisions.md, "S-FS in real form"). The
    randomized weights a~_0(omega) = 1 - |omega|^2/lambda^2, a~_j(omega) = |omega|^2 /
    (2 d lambda^2) (Eq. 11) give the control variate M(omega) = 1 - |omega|^2 (1 - Q)/d with
    E[M] = Q (Eq. 10). The estimator (Eqs. 12-14)::

        R(z) = (1/D) sum_i [cos(omega_i^T z) - M(omega_i)] + Q(z)
             = (1/D) sum_i cos(omega_i^T z) - c sum_j (1 - cos(lambda z_j)),
        c = (d - S) / (d lambda^2),   S = (1/D) sum_i |omega_i|^2,

    is unbiased (Theorem 1) with variance (Theorem 2, :func:`sfs_variance`)::

        V[R] = V_RFF + (2 (1 - Q) / (D d)) (1 - Q - |z|^2 exp(-|z|^2/2)),
        V_RFF = (1 - exp(-|z|^2))^2 / (2D),

    smaller than RFF's exactly when 1 - Q < |z|^2 exp(-|z|^2/2) (condition 18). The map has
    D frequencies omega_i ~ N(0, I) with weight 1/D (the cos/sin form, which Theorem 2
    needs), the origin with signed weight -c d, and lambda e_j with signed weight c:
    2D + 2d + 2 real columns, D = (n_components - 2d - 2) // 2 >= 1. With ``sampling="mc"``
    the frequencies are drawn by the kernel's sampler, so S-FS and ``rff`` built from equal
    generators share omega_i (a paired comparison). The estimate is unbiased but not positive
    semidefinite: for small D or widely spread inputs K~ + s2 I can be indefinite, and the engine
    then raises NotPositiveDefiniteError. Gaussian kernel only.
    """

    may_have_negative_weights = True

    description = "stochastic fully symmetric quadrature (S-FS): RFF with a D-FS control variate"
    reference = "Liu, Huang, Chen & Suykens, TPAMI 2021, Eqs. 10-16, Theorem 2"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Gaussian kernel only: the control variate uses E|omega|^2 = d under N(0, I)."""
        return kernel.spectral_measure_is_standard_normal

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *,
              lambda_: float = DEFAULT_LAMBDA, sampling: str = "mc"):
        """Draw D frequencies and form the control-variate weights.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian
        n_components : int
            Budget of real columns, at least 2d + 4 (D = 1).
        rng : numpy.random.Generator
            Source of the D frequencies.
        lambda_ : float, default sqrt(3)
            The D-FS generator of the control variate.
        sampling : {"mc", "qmc", "ssr"}, default "mc"
            The points the control variate corrects (Remark 3, Section VI-C;
            docs/quadrature-features.md, "S-FS"): i.i.d. N(0, I) ("mc"), scrambled Sobol
            points through the normal
            inverse CDF ("qmc"; each point still N(0, I), so the estimate stays unbiased),
            or the nodes and weights of averaged spherical-radial rules ("ssr"). S is the
            rule-weighted mean of |omega|^2; an SR rule integrates |omega|^2 exactly, so with
            "ssr" S = d, c = 0 and S-FS is SSR itself (the correction columns are zero):
            randomizing the weights adds nothing to a rule already exact to degree 3.
        """
        X = check_matrix(X, "X")
        require_gaussian("sfs", kernel)
        n_components = check_positive_int(n_components, "n_components")
        lambda_ = _check_lambda(lambda_)
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
        n_dims = X.shape[1]
        correction_columns = 2 * n_dims + 2
        rng = as_generator(rng)
        if sampling == "ssr":
            if n_components < correction_columns + 2 * (n_dims + 2):
                raise ValueError(
                    f"n_components must be at least {4 * n_dims + 6} for sfs with ssr "
                    f"sampling (one SR rule, 2 (d + 2) real columns, and the correction, "
                    f"2d + 2), got {n_components}"
                )
            n_rules = rules_within(n_components - correction_columns, n_dims)
            omega, base_weights = spherical_radial_rule(kernel, n_rules, n_dims, rng)
        else:
            n_draws = (n_components - correction_columns) // 2       # 2D + 2d + 2 <= budget
            if n_draws < 1:
                raise ValueError(
                    f"n_components must be at least {2 * n_dims + 4} for sfs "
                    f"(n_frequencies=1, the smallest rule, has {2 * n_dims + 4} real "
                    f"features), got {n_components}"
                )
            if sampling == "mc":
                omega = kernel.sample_standard_frequencies(n_draws, n_dims, rng)
            else:
                omega = stats.norm.ppf(scrambled_points(n_draws, n_dims, "sobol", rng))
            base_weights = np.full(n_draws, 1.0 / n_draws)
        frequencies, weights = control_variate_rule(omega, lambda_, base_weights)
        weights, signs = quadrature.signed_weights(weights)
        return cls(n_dims=n_dims, omega=frequencies, frequency_weights=weights,
                   offset=data_centre(X), frequency_signs=signs)


def control_variate_rule(omega: np.ndarray, lambda_: float,
                         base_weights: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Frequencies and signed weights of the S-FS estimate (docs/quadrature-features.md, "S-FS").

    R(z) = sum_l w_l cos(gamma_l^T z) with gamma = (omega_1..omega_D, 0, lambda e_1..e_d)
    and w = (v_1, ..., v_D, -c d, c, ..., c), c = (d - S) / (d lambda^2),
    S = sum_i v_i |omega_i|^2, where v are the base weights (default 1/D each; they sum to 1).
    """
    n_draws, n_dims = omega.shape
    if base_weights is None:
        base_weights = np.full(n_draws, 1.0 / n_draws)
    c = (n_dims - base_weights @ np.einsum("ij,ij->i", omega, omega)) / (n_dims * lambda_**2)
    frequencies = np.vstack([omega, np.zeros((1, n_dims)), lambda_ * np.eye(n_dims)])
    weights = np.concatenate([base_weights, [-c * n_dims], np.full(n_dims, c)])
    return frequencies, weights


# ----------------------------------------------------------------------------- theory


def _check_z(z) -> np.ndarray:
    z = np.asarray(z, dtype=float)
    if z.ndim == 0 or not np.all(np.isfinite(z)):
        raise ValueError(f"z must be a finite array (..., n_dims) of scaled differences, got {z!r}")
    return z


def third_degree_value(z, lambda_: float = DEFAULT_LAMBDA) -> np.ndarray:
    """Q(z) = 1 - (1/lambda^2) sum_j (1 - cos(lambda z_j)), the D-FS kernel (Eq. 7), per row."""
    z = _check_z(z)
    return 1.0 - np.sum(1.0 - np.cos(lambda_ * z), axis=-1) / lambda_**2


def rff_variance(z, n_frequencies: int) -> np.ndarray:
    """V_RFF = Var[(1/D) sum_i cos(omega_i^T z)] = (1 - exp(-|z|^2))^2 / (2D), per row."""
    z = _check_z(z)
    D = check_positive_int(n_frequencies, "n_frequencies")
    return (1.0 - np.exp(-np.sum(z**2, axis=-1)))**2 / (2.0 * D)


def sfs_variance(z, n_frequencies: int, lambda_: float = DEFAULT_LAMBDA) -> np.ndarray:
    """Theorem 2: V[R] = V_RFF + 2 (1 - Q)(1 - Q - |z|^2 e^{-|z|^2/2}) / (D d), per row.

    From Var|omega|^2 = 2d and Cov(cos(omega^T z), |omega|^2) = -|z|^2 e^{-|z|^2/2}.
    """
    z = _check_z(z)
    D = check_positive_int(n_frequencies, "n_frequencies")
    gap = 1.0 - third_degree_value(z, lambda_)
    r2 = np.sum(z**2, axis=-1)
    return rff_variance(z, D) + 2.0 * gap * (gap - r2 * np.exp(-0.5 * r2)) / (D * z.shape[-1])


def variance_reduction_margin(z, lambda_: float = DEFAULT_LAMBDA) -> np.ndarray:
    """J(z) = (1 - Q(z)) - |z|^2 exp(-|z|^2/2) (Eq. 20); S-FS beats RFF where J < 0 (Eq. 18)."""
    z = _check_z(z)
    r2 = np.sum(z**2, axis=-1)
    return 1.0 - third_degree_value(z, lambda_) - r2 * np.exp(-0.5 * r2)
