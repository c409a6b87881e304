"""Quadrature rules: for integrals against the standard Gaussian measure N(0, I_d), and the
1-D Gauss-Legendre rules of the Gauss-Legendre features.

Every rule here approximates

    I_d(f) = int_{R^d} f(omega) (2 pi)^{-d/2} exp(-|omega|^2 / 2) d omega
           ~ Q(f) = sum_i a_i f(gamma_i),

with nodes gamma_i and weights a_i (Liu et al., TPAMI 2021, Eq. 2). For the Gaussian kernel,
f(omega) = cos(omega^T z) with z = (x - y) / l gives k(x, y) = I_d(f) (their Eq. 1), so a
rule is a feature map (:mod:`scalegp.features.gaussian_quadrature`, ``sparse_grid``,
``fully_symmetric``). Provided here:

- :func:`gauss_hermite`: the 1-D Gauss-Hermite rule for N(0, 1) (probabilists' Hermite);
- :func:`tensor_product`, :func:`tensor_gauss_hermite`: product rules;
- :func:`fully_symmetric_set`, :func:`fully_symmetric_rule`: fully symmetric sets and the
  Genz-Keister interpolatory rules of degree 2m + 1 (Liu et al. Definition 1, Eqs. 3-4);
- :func:`smolyak_coefficients`, :func:`smolyak`: Smolyak sparse grids (Liu et al. Eq. 21);
- :func:`symmetric_half`, :func:`signed_weights`: the bridge to real cos/sin features.
- :func:`gauss_legendre`, :func:`symmetric_rule`: the q-point Gauss-Legendre rule on [-1, 1],
  and its one- or two-panel map onto [-Q, Q] (:mod:`scalegp.features.gauss_legendre`;
  docs/gauss-legendre.md, section 1).

A rule's ``degree`` is the total polynomial degree it integrates exactly (every monomial
omega^k with |k| <= degree), which the tests check against the Gaussian moments
E[omega^k] = prod_j (k_j - 1)!! (zero when some k_j is odd).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from math import comb

import numpy as np
from numpy.polynomial import hermite_e
from scipy.special import roots_legendre

from .._validation import check_positive_int

#: Generators lambda_1, lambda_2 of the Genz-Keister nested sequence for N(0, 1) (sqrt(2)
#: times the values for the weight exp(-x^2), Genz & Keister 1996; lambda_0 = 0). lambda_1 =
#: sqrt(3) is the 3-point Gauss-Hermite node; lambda_2 was checked: with the other nodes of
#: the 9-point Genz-Keister rule its interpolatory rule is exact to degree 15. Only lambda_1,
#: lambda_2 enter degrees 3 and 5; with lambda_1 = sqrt(3), lambda_2 gets weight 0.
GENZ_KEISTER_GENERATORS = (np.sqrt(3.0), np.sqrt(2.0) * 2.9592107790638380)

#: Most 1-D Gauss-Hermite points: numpy's hermegauss overflows beyond about 350.
MAX_GAUSS_HERMITE_POINTS = 300

#: Relative size below which a sum of terms is treated as an exact cancellation (zero).
CANCELLATION_TOLERANCE = 1e-13


@dataclass(frozen=True, eq=False)
class QuadratureRule:
    """Nodes and weights of a rule for N(0, I_d): Q(f) = sum_i a_i f(gamma_i).

    Attributes
    ----------
    nodes : ndarray (n_nodes, n_dims)
        The nodes gamma_i.
    weights : ndarray (n_nodes,)
        The weights a_i (may be negative; they sum to 1 for every rule of degree >= 0).
    degree : int
        Every monomial of total degree <= ``degree`` is integrated exactly.
    """

    nodes: np.ndarray
    weights: np.ndarray
    degree: int

    @property
    def n_nodes(self) -> int:
        return self.nodes.shape[0]

    @property
    def n_dims(self) -> int:
        return self.nodes.shape[1]


# ----------------------------------------------------------------------------- 1-D and tensor


@cache
def _gauss_hermite_arrays(n_points: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = hermite_e.hermegauss(n_points)
    # hermegauss integrates against exp(-t^2/2), whose mass is sqrt(2 pi); the nodes are
    # symmetric, so averaging with the mirror image makes t -> -t exact (and the centre 0).
    nodes = 0.5 * (nodes - nodes[::-1])
    weights = 0.5 * (weights + weights[::-1]) / np.sqrt(2.0 * np.pi)
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights


def gauss_hermite(n_points: int) -> QuadratureRule:
    """The n-point Gauss-Hermite rule for N(0, 1), exact to degree 2n - 1.

    Nodes are the roots of the probabilists' Hermite polynomial He_n; weights
    a_j = n! / (n He_{n-1}(t_j))^2 (they sum to 1). Repeated calls return bit-identical
    arrays, so nodes shared by several rules compare equal.

    Parameters
    ----------
    n_points : int
        1 <= n <= :data:`MAX_GAUSS_HERMITE_POINTS`.

    Returns
    -------
    QuadratureRule
        Nodes of shape (n, 1).
    """
    nodes, weights = _gauss_hermite_arrays(_check_n_points(n_points))
    return QuadratureRule(nodes[:, None].copy(), weights.copy(), 2 * n_points - 1)


def _check_n_points(n_points) -> int:
    n_points = check_positive_int(n_points, "n_points")
    if n_points > MAX_GAUSS_HERMITE_POINTS:
        raise ValueError(
            f"n_points must be at most {MAX_GAUSS_HERMITE_POINTS} (larger Gauss-Hermite rules "
            f"overflow in double precision), got {n_points}"
        )
    return n_points


def tensor_product(rules: Sequence[QuadratureRule]) -> QuadratureRule:
    """The product rule (Q_1 x ... x Q_k)(f) = sum_{i_1..i_k} a_{i_1} ... a_{i_k} f(gamma).

    The nodes are all concatenations (gamma_{i_1}, ..., gamma_{i_k}); a monomial factorizes
    over the blocks, so the product is exact to total degree min_j degree_j.

    Parameters
    ----------
    rules : sequence of QuadratureRule
        At least one rule; their dimensions add up.

    Returns
    -------
    QuadratureRule
    """
    if len(rules) == 0:
        raise ValueError("rules must contain at least one QuadratureRule, got an empty sequence")
    nodes, weights = rules[0].nodes, rules[0].weights
    for rule in rules[1:]:
        nodes = np.hstack([np.repeat(nodes, rule.n_nodes, axis=0),
                           np.tile(rule.nodes, (nodes.shape[0], 1))])
        weights = np.outer(weights, rule.weights).ravel()
    return QuadratureRule(nodes, weights, min(rule.degree for rule in rules))


def tensor_gauss_hermite(n_points: int, n_dims: int) -> QuadratureRule:
    """The product of d copies of the n-point Gauss-Hermite rule: n^d nodes, degree 2n - 1.

    This is the "dense grid" of Dao, De Sa & Re (NeurIPS 2017). Because N(0, I) and the
    kernel factorize, Q(cos(omega^T z)) = prod_j g_n(z_j) with g_n(u) = sum_i a_i cos(t_i u)
    (see :func:`gauss_hermite_cosine`).
    """
    n_dims = check_positive_int(n_dims, "n_dims")
    return tensor_product([gauss_hermite(n_points)] * n_dims)


def gauss_hermite_cosine(n_points: int, u) -> np.ndarray:
    """g_n(u) = sum_i a_i cos(t_i u): the n-point rule applied to cos(omega u), elementwise.

    E[cos(omega u)] = exp(-u^2 / 2) for omega ~ N(0, 1); the dense-grid kernel is
    prod_j g_n(z_j), the expectation of the subsampled-grid estimator.
    """
    nodes, weights = _gauss_hermite_arrays(_check_n_points(n_points))
    u = np.asarray(u, dtype=float)
    return np.cos(u[..., None] * nodes) @ weights


# ----------------------------------------------------------------------------- fully symmetric


def _distinct_permutations(values: tuple) -> list[tuple]:
    """All distinct orderings of a multiset, each once (no d! enumeration)."""
    if not values:
        return [()]
    out = []
    for first in sorted(set(values)):
        rest = list(values)
        rest.remove(first)
        out.extend((first,) + tail for tail in _distinct_permutations(tuple(rest)))
    return out


def fully_symmetric_set(generator) -> np.ndarray:
    """FS[lambda]: all distinct points from permutations and sign changes of lambda.

    Liu et al. Definition 1. A generator with K nonzero entries, taking values with
    multiplicities c_0 (zeros), c_1, ..., gives d! / prod c_r! * 2^K points.

    Parameters
    ----------
    generator : array-like (n_dims,)
        The generator vector; signs of its entries are irrelevant.

    Returns
    -------
    ndarray (n_points, n_dims)
    """
    generator = np.abs(np.asarray(generator, dtype=float))
    if generator.ndim != 1 or generator.size == 0 or not np.all(np.isfinite(generator)):
        raise ValueError(
            f"generator must be a non-empty finite 1-D vector, got {np.asarray(generator)!r}"
        )
    points = []
    for perm in _distinct_permutations(tuple(generator)):
        perm = np.array(perm)
        nonzero = np.flatnonzero(perm)
        for signs in itertools.product((1.0, -1.0), repeat=nonzero.size):
            point = perm.copy()
            point[nonzero] *= signs
            points.append(point)
    return np.array(points)


def _partitions(n_dims: int, total: int) -> list[tuple[int, ...]]:
    """P^(m,d): non-increasing p in N^d with |p| <= m ("distinct d-partitions")."""
    def descend(length, budget, largest):
        if length == 0:
            yield ()
            return
        for first in range(min(budget, largest), -1, -1):
            for tail in descend(length - 1, budget - first, first):
                yield (first,) + tail
    return list(descend(n_dims, total, total))


def _cancel(value: float, magnitude: float) -> float:
    """value, or exactly 0 when it is a rounding residue of terms of total size magnitude."""
    return 0.0 if abs(value) <= CANCELLATION_TOLERANCE * magnitude else value


def _product_moments(generators: np.ndarray, q_max: int) -> np.ndarray:
    """a_q = E[prod_{j<q} (t^2 - lambda_j^2)], t ~ N(0, 1), lambda_0 = 0, for q = 0..q_max.

    Expanding the product as a polynomial in s = t^2 and using E[t^{2k}] = (2k - 1)!!.
    """
    squares = np.concatenate([[0.0], generators**2])
    even_moments = np.array([np.prod(np.arange(1, 2 * k, 2)) for k in range(q_max + 1)])
    moments = np.empty(q_max + 1)
    poly = np.array([1.0])                       # coefficients of prod_{j<q} (s - lambda_j^2)
    for q in range(q_max + 1):
        terms = poly * even_moments[:poly.size]
        moments[q] = _cancel(terms.sum(), np.abs(terms).sum())
        poly = np.convolve(poly, [-squares[q], 1.0])
    return moments


def _genz_keister_weight(p: tuple[int, ...], m: int, generators: np.ndarray,
                         moments: np.ndarray) -> float:
    """Eq. (4): w_p = 2^{-K(p)} sum_{|k| <= m - |p|} prod_i a_{k_i+p_i} / prod_{j != p_i,
    j <= k_i + p_i} (lambda_{p_i}^2 - lambda_j^2).

    The sum over k factorizes per coordinate, so it is the sum of the coefficients of degree
    <= m - |p| of prod_i (sum_k c_i(k) x^k), a truncated polynomial product.
    """
    squares = np.concatenate([[0.0], generators**2])
    order = m - sum(p)
    product, magnitude = np.array([1.0]), np.array([1.0])
    for p_i in p:
        c = np.empty(order + 1)
        for k in range(order + 1):
            others = [squares[p_i] - squares[j] for j in range(k + p_i + 1) if j != p_i]
            c[k] = moments[k + p_i] / np.prod(others)
        product = np.convolve(product, c)[:order + 1]
        magnitude = np.convolve(magnitude, np.abs(c))[:order + 1]
    n_nonzero = sum(1 for p_i in p if p_i > 0)
    # e.g. a_0 = 1 - d / lambda^2 is exactly 0 at d = lambda^2 = 3, not a rounding residue
    return _cancel(float(product.sum()), float(magnitude.sum())) / 2.0**n_nonzero


def fully_symmetric_rule(n_dims: int, degree: int, generators=None) -> QuadratureRule:
    """Genz-Keister fully symmetric interpolatory rule Q^(m,d) of degree 2m + 1.

    Liu et al. Eq. (3), with the weights of Eq. (4) (Genz & Keister 1996):

        Q^(m,d)(f) = sum_{p in P^(m,d)} w_p sum_{nu in FS[lambda_p]} f(nu),

    lambda_p = (lambda_{p_1}, ..., lambda_{p_d}), lambda_0 = 0. Degree 3 (m = 1) is D-FS,
    Eqs. (7)-(8): a_0 = 1 - d / lambda^2 at the origin and 1 / (2 lambda^2) at +-lambda e_j.
    Degree 5 (m = 2) with lambda_1 = sqrt(3): w_0 = (d^2 - 7d + 18)/18, w_(1) = (4 - d)/18,
    w_(1,1) = 1/36, and the lambda_2 generator gets weight 0 (docs/quadrature-features.md,
    "D-FS, degree 5"). Generators whose weight is exactly 0 are dropped.

    Parameters
    ----------
    n_dims : int
        d >= 1.
    degree : int
        An odd degree 2m + 1 >= 1.
    generators : sequence of float, optional
        lambda_1, ..., lambda_m: distinct positive values (Genz-Keister by default,
        :data:`GENZ_KEISTER_GENERATORS`, extended only up to m = 2).

    Returns
    -------
    QuadratureRule
    """
    n_dims = check_positive_int(n_dims, "n_dims")
    degree = check_positive_int(degree, "degree")
    if degree % 2 == 0:
        raise ValueError(f"degree must be odd (2m + 1) for a fully symmetric rule, got {degree}")
    m = (degree - 1) // 2
    generators = _check_generators(generators, m)
    moments = _product_moments(generators, m)
    lambdas = np.concatenate([[0.0], generators])
    nodes, weights = [], []
    for p in _partitions(n_dims, m):
        weight = _genz_keister_weight(p, m, generators, moments)
        if weight == 0.0:
            continue
        points = fully_symmetric_set(lambdas[list(p)])
        nodes.append(points)
        weights.append(np.full(points.shape[0], weight))
    return QuadratureRule(np.vstack(nodes), np.concatenate(weights), degree)


def _check_generators(generators, m: int) -> np.ndarray:
    if generators is None:
        if m > len(GENZ_KEISTER_GENERATORS):
            raise ValueError(
                f"generators must be given for degree {2 * m + 1} (the built-in Genz-Keister "
                f"generators reach degree {2 * len(GENZ_KEISTER_GENERATORS) + 1})"
            )
        generators = GENZ_KEISTER_GENERATORS[:m]
    generators = np.asarray(generators, dtype=float).ravel()
    if (generators.size < m or not np.all(np.isfinite(generators)) or np.any(generators <= 0)
            or np.unique(generators[:m]).size != m):
        raise ValueError(
            f"generators must hold at least {m} distinct positive finite values "
            f"lambda_1..lambda_{m}, got {generators!r}"
        )
    return generators[:m]


# ----------------------------------------------------------------------------- Smolyak


def _compositions(total: int, n_parts: int):
    """All i in N^n_parts with i_j >= 1 and |i| = total."""
    for cuts in itertools.combinations(range(1, total), n_parts - 1):
        bounds = (0,) + cuts + (total,)
        yield tuple(bounds[j + 1] - bounds[j] for j in range(n_parts))


def smolyak_coefficients(level: int, n_dims: int) -> list[tuple[tuple[int, ...], int]]:
    """Multi-indices and combination coefficients of the Smolyak formula A(q, d).

    A(q, d) = sum_{|i| <= d + q} Delta_{i_1} x ... x Delta_{i_d},  Delta_i = V_i - V_{i-1},
            = sum_{max(d, q+1) <= |i| <= d + q} (-1)^{d+q-|i|} C(d-1, d+q-|i|)
              V_{i_1} x ... x V_{i_d}

    (the combination technique; Liu et al. Eq. 21 with C^d_q = {i : |i| = d + q}).

    Parameters
    ----------
    level : int
        q >= 0.
    n_dims : int
        d >= 1.

    Returns
    -------
    list of (multi-index i, coefficient)
        Only the nonzero coefficients.
    """
    level = check_positive_int(level, "level", minimum=0)
    n_dims = check_positive_int(n_dims, "n_dims")
    terms = []
    for total in range(max(n_dims, level + 1), n_dims + level + 1):
        gap = n_dims + level - total
        coefficient = (-1) ** gap * comb(n_dims - 1, gap)
        terms.extend((index, coefficient) for index in _compositions(total, n_dims))
    return terms


def gauss_hermite_level(level: int) -> QuadratureRule:
    """V_i: the (2i - 1)-point Gauss-Hermite rule, exact to degree 4i - 3 (V_1 = {0; 1})."""
    return gauss_hermite(2 * check_positive_int(level, "level") - 1)


def smolyak(level: int, n_dims: int) -> QuadratureRule:
    """Smolyak sparse grid A(q, d) on V_i = (2i - 1)-point Gauss-Hermite (merged nodes).

    A(q, d) is exact to total degree 2q + 1: odd exponents integrate to 0 on every symmetric
    grid, and a monomial of degree <= 2q + 1 has at most q even exponents k_j >= 2, each
    exact once i_j >= 1 + k_j / 4 (V_i has degree 4i - 3), which fits in |i| <= d + q
    (checked by the tests, which also show 2q + 2 fails for d > q). q = 1 is the
    third-degree rule of Liu et al. Eq. (21):
    (1 - d(1 - a_0)) f(0) + a_1 sum_j [f(sqrt3 e_j) + f(-sqrt3 e_j)], equal to D-FS with
    lambda = sqrt(3). Weights can be negative (the combination coefficients alternate).

    Parameters
    ----------
    level : int
        q >= 0.
    n_dims : int
        d >= 1.

    Returns
    -------
    QuadratureRule
        Degree 2q + 1. Nodes shared by several tensor grids are merged, which relies on
        :func:`gauss_hermite` returning bit-identical nodes on every call.
    """
    nodes, weights = [], []
    for index, coefficient in smolyak_coefficients(level, n_dims):
        grid = tensor_product([gauss_hermite_level(i) for i in index])
        nodes.append(grid.nodes)
        weights.append(coefficient * grid.weights)
    merged_nodes, merged_weights = merge_nodes(np.vstack(nodes), np.concatenate(weights))
    return QuadratureRule(merged_nodes, merged_weights, 2 * level + 1)


def merge_nodes(nodes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum the weights of identical nodes; drop nodes whose contributions cancel exactly.

    A merged weight is treated as 0 when it is below ``CANCELLATION_TOLERANCE`` times the
    sum of the absolute contributions to that node (a rounding residue, not a weight).
    """
    unique, inverse = np.unique(nodes + 0.0, axis=0, return_inverse=True)   # -0.0 -> 0.0
    inverse = inverse.ravel()
    total = np.zeros(unique.shape[0])
    magnitude = np.zeros(unique.shape[0])
    np.add.at(total, inverse, weights)
    np.add.at(magnitude, inverse, np.abs(weights))
    keep = np.abs(total) > CANCELLATION_TOLERANCE * magnitude
    return unique[keep], total[keep]


# ----------------------------------------------------------------------------- to features


def symmetric_half(rule: QuadratureRule) -> tuple[np.ndarray, np.ndarray]:
    """One node of each +-gamma pair with doubled weight, and the origin once.

    For a rule symmetric under gamma -> -gamma with a_{-gamma} = a_gamma and an even
    integrand, a f(gamma) + a f(-gamma) = 2a f(gamma); for f = cos(gamma^T z) this halves the
    number of cos/sin feature pairs. The representative is the node whose first nonzero
    coordinate is positive.

    Returns
    -------
    nodes : ndarray (n_half, n_dims)
    weights : ndarray (n_half,)

    Raises
    ------
    ValueError
        If the rule is not symmetric (a node's mirror is missing or has another weight).
    """
    lookup = {node.tobytes(): weight for node, weight in zip(rule.nodes + 0.0, rule.weights)}
    keep, doubled = [], []
    for i, node in enumerate(rule.nodes + 0.0):          # + 0.0 turns -0.0 into 0.0
        nonzero = np.flatnonzero(node)
        if nonzero.size == 0:
            keep.append(i)
            doubled.append(rule.weights[i])
            continue
        mirror = lookup.get((-node + 0.0).tobytes())
        if mirror is None or not np.isclose(mirror, rule.weights[i], rtol=1e-12, atol=0.0):
            raise ValueError(
                f"rule must be symmetric under gamma -> -gamma; node {node} has mirror weight "
                f"{mirror} against {rule.weights[i]}"
            )
        if node[nonzero[0]] > 0:
            keep.append(i)
            doubled.append(2.0 * rule.weights[i])
    return rule.nodes[keep] + 0.0, np.array(doubled)


def cosine_rule(rule: QuadratureRule) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Frequencies, |weights| and signs of the cos/sin features of a symmetric rule.

    Q(cos(omega^T z)) = sum_l sign_l |a_l| cos(omega_l^T z) over :func:`symmetric_half`.
    """
    nodes, weights = symmetric_half(rule)
    return (nodes, *signed_weights(weights))


def signed_weights(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(|a|, sign(a)) for a signed rule; the signs are None when no weight is negative.

    A zero weight gets sign +1: the engine takes a +-1 sign vector (docs/decisions.md,
    "Signed weights").
    """
    weights = np.asarray(weights, dtype=float)
    if np.all(weights >= 0):
        return weights.copy(), None
    return np.abs(weights), np.where(weights < 0, -1.0, 1.0)


# --------------------------------------------------------------------------- Gauss-Legendre
def gauss_legendre(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The q-point Gauss-Legendre rule on [-1, 1]: nodes t_i (ascending) and weights omega_i.

    The nodes are the roots of the Legendre polynomial P_q, omega_i = 2 / ((1 - t_i^2)
    P_q'(t_i)^2); the rule is exact for polynomials of degree <= 2q - 1. The rule is made
    exactly symmetric (t_{q+1-i} = -t_i, omega_{q+1-i} = omega_i), so that an odd q has the
    node 0 exactly and the real-feature pairing is exact (docs/gauss-legendre.md, sections 1-2).
    """
    t, omega = _legendre_rule(check_positive_int(n_nodes, "n_nodes"))
    return t.copy(), omega.copy()


@lru_cache(maxsize=64)
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
