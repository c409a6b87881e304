"""Gaussian-quadrature features (Dao, De Sa & Re, NeurIPS 2017): the dense Gauss-Hermite
grid and its subsampled variant, for the Gaussian kernel.

Also the helpers shared by the deterministic quadrature maps of this package (``sgq``,
``dfs``): the Gaussian-only check (``Kernel.spectral_measure_is_standard_normal``) and the
choice of the largest rule within a budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from . import quadrature
from ._fourier import FourierFeatureMap
from .random_fourier import data_centre

#: 1-D points of the subsampled grid by default: the degree of Dao et al.'s released routine
#: (``hermgauss(deg=8)``; docs/decisions.md, "Baseline variants").
DEFAULT_SUBSAMPLE_POINTS = 8

GAUSSIAN_ONLY_REASON = (
    "the rule integrates against N(0, I), the spectral measure of the Gaussian kernel only; "
    "the other kernels' spectral measures (Student t, Laplace, Cauchy) are not what the "
    "method's nodes and weights are built for"
)


def require_gaussian(name: str, kernel: Kernel) -> None:
    """Raise a ValueError naming the map and the kernel unless its spectral measure is N(0, I).

    Among the kernels of :mod:`scalegp.kernels` only the Gaussian kernel has that measure
    (``kernel.spectral_measure_is_standard_normal``).
    """
    if not kernel.spectral_measure_is_standard_normal:
        raise ValueError(
            f"kernel must be a Gaussian kernel for {name} ({GAUSSIAN_ONLY_REASON}), "
            f"got {kernel!r}"
        )


def largest_fitting(settings, columns, n_components: int, name: str, setting_name: str):
    """The last setting, in increasing size, whose rule has at most n_components columns.

    Parameters
    ----------
    settings : iterable
        Candidate settings in increasing rule size (may be infinite).
    columns : callable
        setting -> the number of real feature columns of its rule.
    n_components : int
        The budget of real columns.
    name, setting_name : str
        For the error message (map name, e.g. "sgq"; setting, e.g. "level").

    Raises
    ------
    ValueError
        If not even the smallest rule fits; the message names the minimum budget.
    """
    chosen = None
    for setting in settings:
        size = columns(setting)
        if size > n_components:
            if chosen is None:
                raise ValueError(
                    f"n_components must be at least {size} for {name} ({setting_name}="
                    f"{setting!r}, the smallest rule, has {size} real features), "
                    f"got {n_components}"
                )
            break
        chosen = setting
    return chosen


def rule_columns(rule: quadrature.QuadratureRule) -> int:
    """Real columns of a symmetric rule's features: a cos/sin pair per +-pair of nodes and
    one for the origin (its sin column is 0), see
    :func:`scalegp.features.quadrature.symmetric_half`."""
    has_origin = bool(np.any(np.all(rule.nodes == 0.0, axis=1)))
    return 2 * ((rule.n_nodes + int(has_origin)) // 2)


@dataclass(frozen=True, eq=False)
class GaussianQuadratureFeatures(FourierFeatureMap, name="gq"):
    r"""Gauss-Hermite quadrature features: dense product grid or subsampled grid.

    Notes
    -----
    With u = (x - y) / l and the n-point Gauss-Hermite rule (t_i, a_i) for N(0, 1), the dense
    grid of Dao, De Sa & Re (2017, "dense grid" construction; equation numbers not
    recovered) is the product rule (:func:`scalegp.features.quadrature.tensor_gauss_hermite`)

        k(x, y) ~ s sum_{i in [n]^d} a_{i_1} ... a_{i_d} cos(t_i^T u) = s prod_j g_n(u_j),

    g_n(u) = sum_i a_i cos(t_i u), exact for polynomials of degree 2n - 1 in each frequency
    coordinate. Nodes come in +-pairs with equal weights, so one of each pair is kept with
    doubled weight and the origin (n odd) once: n^d + (n mod 2) real columns. The largest
    n with at most ``n_components`` columns is used (n >= 2; the 1-point rule is constant).

    ``subsample=True`` draws D = n_components // 2 grid nodes i.i.d. with probability equal
    to their weights, p(t_i) = a_{i_1} ... a_{i_d} (each coordinate independently), and
    gives each weight 1/D (the importance weight a_i / (D p_i)):

        k(x, y) ~ (s / D) sum_{r=1}^D cos(t_{i_r}^T u),    E = s prod_j g_n(u_j),

    an unbiased estimate of the dense-grid value with variance
    s^2 [ (1 + prod_j g_n(2 u_j)) / 2 - prod_j g_n(u_j)^2 ] / D.
    Gaussian kernel only (``supports``).
    """

    may_have_negative_weights = True

    description = "Gauss-Hermite quadrature: dense product grid or its subsampled version"
    reference = "Dao, De Sa & Re, NeurIPS 2017"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Gaussian kernel only: Gauss-Hermite nodes integrate against N(0, I)."""
        return kernel.spectral_measure_is_standard_normal

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, subsample: bool = False,
              n_points: int | None = None):
        """Build the dense grid, or the subsampled grid when ``subsample``.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Gaussian
        n_components : int
            Budget of real columns (dense: the largest grid that fits is used; subsampled:
            n_components // 2 cos/sin pairs).
        rng : numpy.random.Generator, optional
            Used by ``subsample=True`` only.
        subsample : bool, default=False
        n_points : int, optional
            1-D points n. Dense: the largest fitting n by default; subsampled:
            :data:`DEFAULT_SUBSAMPLE_POINTS` by default.
        """
        X = check_matrix(X, "X")
        require_gaussian("gq", kernel)
        n_components = check_positive_int(n_components, "n_components")
        if not isinstance(subsample, (bool, np.bool_)):
            raise TypeError(f"subsample must be True or False, got {subsample!r}")
        n_dims = X.shape[1]
        if subsample:
            n_points = DEFAULT_SUBSAMPLE_POINTS if n_points is None else n_points
            omega, weights = subsampled_grid(n_points, n_dims, n_components, as_generator(rng))
            signs = None
        else:
            n_points = dense_grid_points(n_dims, n_components, n_points)
            rule = quadrature.tensor_gauss_hermite(n_points, n_dims)
            omega, weights, signs = quadrature.cosine_rule(rule)
        return cls(n_dims=n_dims, omega=omega, frequency_weights=weights, offset=data_centre(X),
                   frequency_signs=signs)


def dense_grid_points(n_dims: int, n_components: int, n_points: int | None) -> int:
    """The largest n >= 2 (at most 300) whose n^d grid fits the budget, or the given n."""
    def columns(n):
        return n**n_dims + n % 2
    if n_points is None:
        candidates = range(2, quadrature.MAX_GAUSS_HERMITE_POINTS + 1)
        return largest_fitting(candidates, columns, n_components, "gq", "n_points")
    n_points = check_positive_int(n_points, "n_points", minimum=2)
    return largest_fitting([n_points], columns, n_components, "gq", "n_points")


def subsampled_grid(n_points: int, n_dims: int, n_components: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """D = n_components // 2 nodes of the n^d grid drawn with probability = weight.

    The product weight a_{i_1} ... a_{i_d} factorizes, so each coordinate index is drawn
    independently from the 1-D weights; the unbiased weight of every draw is 1/D.
    """
    n_points = check_positive_int(n_points, "n_points")
    n_draws = check_positive_int(n_components, "n_components", minimum=2) // 2
    rule = quadrature.gauss_hermite(n_points)
    index = rng.choice(n_points, size=(n_draws, n_dims), p=rule.weights)
    return rule.nodes[index, 0], np.full(n_draws, 1.0 / n_draws)
