"""Sparse-grid (Smolyak) quadrature features for the Gaussian kernel (Dao, De Sa & Re,
NeurIPS 2017; the SGQ baseline of Liu et al., TPAMI 2021, Eq. 21)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .._validation import check_matrix, check_positive_int
from ..kernels import Kernel
from . import quadrature
from ._fourier import FourierFeatureMap
from .gaussian_quadrature import largest_fitting, require_gaussian, rule_columns
from .random_fourier import data_centre


#: Highest level: A(q, d) uses V_{q+1}, the (2q + 1)-point rule, and 2q + 1 <= 300.
MAX_LEVEL = (quadrature.MAX_GAUSS_HERMITE_POINTS - 1) // 2


def _check_level(level) -> int:
    level = check_positive_int(level, "level", minimum=1)
    if level > MAX_LEVEL:
        raise ValueError(f"level must be at most {MAX_LEVEL}, got {level}")
    return level


@lru_cache(maxsize=32)
def _sparse_grid(level: int, n_dims: int) -> quadrature.QuadratureRule:
    """A(level, d), cached: budgets are probed level by level and the rule is deterministic."""
    rule = quadrature.smolyak(level, n_dims)
    rule.nodes.setflags(write=False)
    rule.weights.setflags(write=False)
    return rule


@dataclass(frozen=True, eq=False)
class SparseGridFeatures(FourierFeatureMap, name="sgq"):
    r"""Smolyak sparse-grid quadrature features (signed weights).

    Notes
    -----
    The Smolyak rule of level q (Liu et al. Eq. 21; :func:`scalegp.features.quadrature.smolyak`) on
    the 1-D Gauss-Hermite sequence V_i with 2i - 1 points,

        A(q, d) = sum_{max(d, q+1) <= |i| <= d+q} (-1)^{d+q-|i|} C(d-1, d+q-|i|)
                  V_{i_1} x ... x V_{i_d},

    is exact for polynomials of total degree 2q + 1. Level 1 is the third-degree rule
    (1 - d/3) f(0) + (1/6) sum_j [f(sqrt3 e_j) + f(-sqrt3 e_j)], identical to D-FS with
    lambda = sqrt(3) (Liu et al. Section V); higher levels have negative weights, handled by
    ``frequency_signs`` (docs/decisions.md, "Signed weights"):

        k(x, y) ~ s sum_l sign_l |a_l| cos(gamma_l^T (x - y) / l),

    over one node of each +-pair (doubled weight) and the origin. ``level`` defaults to 1,
    the third-degree rule that Liu et al. compare with; ``level=None`` takes the largest
    level whose rule fits ``n_components`` real columns. Rules with negative weights are
    indefinite approximations: on inputs whose scaled distances are large (|z_j| >~ 3) the
    matrix K~ + s2 I may not be positive definite, which the engine reports. The 1-D
    sequence (non-nested Gauss-Hermite rather than nested Genz-Keister) is our choice;
    Dao et al.'s is not recovered. Gaussian kernel only (``supports``).
    """

    may_have_negative_weights = True

    description = "Smolyak sparse-grid Gauss-Hermite quadrature (signed weights)"
    reference = "Dao, De Sa & Re, NeurIPS 2017; Liu et al., TPAMI 2021, Eq. 21"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Gaussian kernel only: the Gauss-Hermite rules integrate against N(0, I)."""
        return kernel.spectral_measure_is_standard_normal

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, level: int | None = 1):
        """Build the sparse grid of the given level (None: the largest that fits).

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian
        n_components : int
            Budget of real columns; the map reports its actual ``n_components``.
        rng : ignored
            The rule is deterministic.
        level : int or None, default=1
            q >= 1 (degree 2q + 1); level 1 is the third-degree rule; None chooses the
            largest level that fits ``n_components``.
        """
        X = check_matrix(X, "X")
        require_gaussian("sgq", kernel)
        n_components = check_positive_int(n_components, "n_components")
        n_dims = X.shape[1]
        levels = range(1, MAX_LEVEL + 1) if level is None else [_check_level(level)]
        chosen = largest_fitting(levels, lambda q: rule_columns(_sparse_grid(q, n_dims)),
                                 n_components, "sgq", "level")
        omega, weights, signs = quadrature.cosine_rule(_sparse_grid(chosen, n_dims))
        return cls(n_dims=n_dims, omega=omega, frequency_weights=weights,
                   offset=data_centre(X), frequency_signs=signs)
