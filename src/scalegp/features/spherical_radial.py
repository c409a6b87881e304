"""Stochastic spherical-radial features (Munkhoeva, Kapushev, Burnaev & Oseledets,
"Quadrature-based features for kernel approximation", NeurIPS 2018), built on the
degree-(3,3) stochastic spherical-radial rule of Genz & Monahan ("Stochastic integration
rules for infinite regions", SIAM J. Sci. Comput. 1998)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from . import quadrature
from ._fourier import FourierFeatureMap
from .orthogonal import haar_orthogonal, require_support
from .random_fourier import data_centre


def simplex_vertices(n_dims: int) -> np.ndarray:
    """Unit vertices v_1..v_(d+1) of a regular simplex centred at 0, rows of shape (d+1, d).

    v_i^T v_j = -1/d for i != j and sum_j v_j = 0. Construction: the Helmert basis B of the
    hyperplane 1^perp in R^(d+1) (column k = (1, ..., 1, -k, 0, ...) / sqrt(k (k+1)), k
    ones) has B B^T = I - 1 1^T / (d+1), so its rows scaled by sqrt((d+1)/d) are the
    projected, normalized standard basis vectors.
    """
    rows = np.arange(n_dims + 1)[:, None]
    k = np.arange(1, n_dims + 1)[None, :]
    helmert = np.where(rows < k, 1.0, np.where(rows == k, -k, 0.0)) / np.sqrt(k * (k + 1))
    return np.sqrt((n_dims + 1) / n_dims) * helmert


def spherical_radial_rule(kernel: Kernel, n_rules: int, n_dims: int,
                          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    r"""Frequencies and signed weights of the average of ``n_rules`` independent SR rules.

    Returns
    -------
    omega : ndarray (1 + n_rules (d+1), d)
        The centre 0, then rho_k t_k * Q_k v_j for each rule k and vertex j.
    weights : ndarray (1 + n_rules (d+1),)
        (1/n) sum_k (1 - d / rho_k^2) for the centre, d / ((d+1) rho_k^2 n) for the nodes.
    """
    rotation_rng, radius_rng, scale_rng = rng.spawn(3)
    Q = haar_orthogonal((n_rules, n_dims, n_dims), rotation_rng)
    rho2 = radius_rng.chisquare(n_dims + 2, size=n_rules)                 # rho ~ chi(d + 2)
    nodes = np.sqrt(rho2)[:, None, None] * (simplex_vertices(n_dims) @ Q.transpose(0, 2, 1))
    nodes = nodes * kernel.sample_mixture_scales(n_rules, n_dims, scale_rng)[:, None, :]
    node_weights = np.repeat(n_dims / ((n_dims + 1) * rho2 * n_rules), n_dims + 1)
    centre_weight = np.mean(1.0 - n_dims / rho2)
    omega = np.vstack([np.zeros((1, n_dims)), nodes.reshape(-1, n_dims)])
    return omega, np.concatenate([[centre_weight], node_weights])


def rules_within(n_components: int, n_dims: int) -> int:
    """The largest number of SR rules whose features fit in ``n_components`` real columns.

    n rules have 1 + n (d+1) frequencies (the centres of all rules share the frequency 0),
    2 (1 + n (d+1)) real columns.
    """
    n_components = check_positive_int(n_components, "n_components")
    n_rules = (n_components // 2 - 1) // (n_dims + 1)
    if n_rules < 1:
        raise ValueError(
            f"n_components must be at least {2 * (n_dims + 2)} for ssr with {n_dims} input "
            f"dimension(s) (one rule: d + 1 nodes and the centre, 2 (d + 2) real columns), "
            f"got {n_components}"
        )
    return n_rules


@dataclass(frozen=True, eq=False)
class SphericalRadialFeatures(FourierFeatureMap, name="ssr"):
    r"""Stochastic spherical-radial (SSR) features: randomly rotated simplex rules.

    Notes
    -----
    For the Gaussian kernel, kappa(z) = E cos(g^T z), g ~ N(0, I_d). Munkhoeva et al. (2018,
    Section 3) estimate the integral with the degree-(3,3) stochastic spherical-radial rule
    of Genz & Monahan (docs/quadrature-features.md, "SSR"):

        SR_{Q,rho}(f) = (1 - d / rho^2) f(0)
                        + d / (2 (d+1) rho^2) sum_{j=1}^{d+1} [f(rho Q v_j) + f(-rho Q v_j)],

    with Q Haar-orthogonal, rho ~ chi(d + 2) and v_j the vertices of a regular simplex
    (:func:`simplex_vertices`). It is unbiased for every integrable f: Q v_j is uniform on
    the sphere, and d / rho^2 times the chi(d + 2) density is the chi(d) density, so the
    radial part has the law of |g| while E[1 - d / rho^2] = 0. Since cos is even, the pair
    +-rho Q v_j is one cos/sin feature of weight d / ((d+1) rho^2). The map averages
    n independent rules (n the largest that fits ``n_components``, :func:`rules_within`):

        psi(x) = sqrt(s |a_l|) [cos(omega_l^T (x - c) / l), sin(omega_l^T (x - c) / l)]_l,

    the centres of all rules merged into the frequency 0 with weight
    a_0 = (1/n) sum_k (1 - d / rho_k^2), which is negative with positive probability: its
    sign goes to ``frequency_signs`` (docs/decisions.md, "Signed weights"; the engine then
    factorizes an indefinite matrix and raises if K~ + s2 I is not positive definite). The
    weights sum to
    1, so psi(x)^T S psi(x) = s exactly. The centre's sin column is identically zero (kept so
    every frequency is a cos/sin pair). Real columns: 2 (1 + n (d+1)) <= n_components.

    The other kernels (our extension, not in the paper): their base laws are Gaussian scale
    mixtures omega = t * g (:mod:`scalegp.features.orthogonal`), so rule k is applied to
    f(t_k * g) with its own scale t_k (scalar for Matern, per dimension for Cauchy and
    Laplacian): conditionally on t_k the rule is unbiased, hence also after averaging over
    t_k. The nodes are then rho_k t_k * Q_k v_j.
    """

    may_have_negative_weights = True

    description = "stochastic spherical-radial rules: rotated simplex, chi(d+2) radii"
    reference = "Munkhoeva, Kapushev, Burnaev & Oseledets, NeurIPS 2018; Genz & Monahan 1998"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """The four kernel families (Gaussian scale mixtures; the non-Gaussian ones are our
        extension of the method)."""
        return kernel.scale_mixture is not None

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, **options):
        """Draw the rotations, radii and mixture scales of as many rules as fit.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Kernel
        n_components : int
            Budget of real columns, at least 2 (d + 2); the map reports its actual
            ``n_components`` = 2 (1 + n (d+1)).
        rng : numpy.random.Generator
            The only source of randomness.
        """
        if options:
            raise TypeError(f"ssr takes no options, got {sorted(options)}")
        X = check_matrix(X, "X")
        require_support(cls, kernel, "no Gaussian scale-mixture form is known for it")
        kernel.check_n_dims(X.shape[1])
        n_dims = X.shape[1]
        n_rules = rules_within(n_components, n_dims)
        omega, weights = spherical_radial_rule(kernel, n_rules, n_dims, as_generator(rng))
        weights, signs = quadrature.signed_weights(weights)
        return cls(n_dims=n_dims, omega=omega, frequency_weights=weights,
                   offset=data_centre(X), frequency_signs=signs)
