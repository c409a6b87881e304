"""Quadrature rules for N(0, I_d): exactness on every monomial up to the stated degree
(1-D Gauss-Hermite, tensor grids, Smolyak, fully symmetric D-FS of degree 3 and 5), the
closed-form weights of Liu et al., fully symmetric sets, node merging and the +-pair folding
that turns a rule into cos/sin features."""

import itertools
from math import factorial

import numpy as np
import pytest

from scalegp.features import quadrature


def gaussian_moment(k) -> float:
    """E[omega^k] for omega ~ N(0, I): prod_j (k_j - 1)!!, zero when some k_j is odd."""
    return float(np.prod([0.0 if kj % 2 else np.prod(np.arange(1, kj, 2)) for kj in k]))


def monomials(n_dims, degree):
    """Every exponent vector k in N^d with |k| = degree."""
    return [k for k in itertools.product(range(degree + 1), repeat=n_dims) if sum(k) == degree]


def worst_monomial_error(rule, degree) -> float:
    """max over |k| = degree of |Q(omega^k) - E[omega^k]| / max(1, sum_i |a_i omega_i^k|).

    The denominator is the size of the terms summed, so rounding gives ~1e-16 whatever the
    cancellation (odd moments are sums of large terms of both signs)."""
    worst = 0.0
    for k in monomials(rule.n_dims, degree):
        terms = rule.weights * np.prod(rule.nodes ** np.array(k), axis=1)
        worst = max(worst, abs(terms.sum() - gaussian_moment(k)) / max(1.0, np.abs(terms).sum()))
    return worst


def assert_exact_up_to(rule, degree):
    for total in range(degree + 1):
        assert worst_monomial_error(rule, total) < 1e-12, f"degree {total} of {degree}"


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("n_points", range(1, 9))
def test_gauss_hermite_exact_to_degree_2n_minus_1_and_not_beyond(n_points):
    rule = quadrature.gauss_hermite(n_points)
    assert rule.degree == 2 * n_points - 1 and rule.n_nodes == n_points
    assert_exact_up_to(rule, rule.degree)
    assert worst_monomial_error(rule, 2 * n_points) > 1e-3
    np.testing.assert_array_equal(rule.nodes[:, 0], -rule.nodes[::-1, 0])   # exactly symmetric


@pytest.mark.parametrize("n_dims", range(1, 6))
@pytest.mark.parametrize("n_points", [2, 3])
def test_tensor_gauss_hermite_exact_to_stated_degree(n_dims, n_points):
    rule = quadrature.tensor_gauss_hermite(n_points, n_dims)
    assert rule.n_nodes == n_points**n_dims and rule.degree == 2 * n_points - 1
    assert_exact_up_to(rule, rule.degree)


@pytest.mark.parametrize("n_dims", range(1, 6))
@pytest.mark.parametrize("level", [1, 2, 3])
def test_smolyak_exact_to_degree_2q_plus_1(n_dims, level):
    rule = quadrature.smolyak(level, n_dims)
    assert rule.degree == 2 * level + 1
    assert_exact_up_to(rule, rule.degree)
    if n_dims > level:       # x_1^2 ... x_{q+1}^2 needs q + 1 coordinates at level 2
        assert worst_monomial_error(rule, rule.degree + 1) > 1e-3


@pytest.mark.parametrize("n_dims", range(1, 6))
@pytest.mark.parametrize("degree", [3, 5])
def test_fully_symmetric_rule_exact_to_stated_degree(n_dims, degree):
    rule = quadrature.fully_symmetric_rule(n_dims, degree)
    assert rule.degree == degree
    assert_exact_up_to(rule, degree)
    if n_dims > 1 or degree == 5:          # in 1-D the degree-3 rule is 3-point Gauss-Hermite
        assert worst_monomial_error(rule, degree + 1) > 1e-3


@pytest.mark.parametrize("n_dims", range(1, 6))
@pytest.mark.parametrize("generators", [(1.2,), (2.5,), (1.5, 2.5), (2.2, 0.9)])
def test_fully_symmetric_rule_exact_for_other_generators(n_dims, generators):
    """Eq. (4) is interpolatory for any distinct generators, not only Genz-Keister's."""
    degree = 2 * len(generators) + 1
    assert_exact_up_to(quadrature.fully_symmetric_rule(n_dims, degree, generators), degree)


# ----------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("n_dims", [1, 2, 4, 5, 7])
@pytest.mark.parametrize("lam", [np.sqrt(3.0), 1.3, 2.4])
def test_third_degree_rule_is_eq_8(n_dims, lam):
    """Liu et al. Eq. (8): a_0 = 1 - d / lambda^2 at 0, 1 / (2 lambda^2) at +-lambda e_j."""
    rule = quadrature.fully_symmetric_rule(n_dims, 3, (lam,))
    at_origin = np.all(rule.nodes == 0, axis=1)
    assert rule.weights[at_origin] == pytest.approx([1 - n_dims / lam**2], rel=1e-12)
    axis = ~at_origin
    assert axis.sum() == 2 * n_dims
    np.testing.assert_allclose(np.sort(np.abs(rule.nodes[axis]).max(axis=1)), lam, rtol=1e-15)
    np.testing.assert_allclose(rule.weights[axis], 1 / (2 * lam**2), rtol=1e-12)


@pytest.mark.parametrize("n_dims", [1, 2, 3, 5, 6, 8])
def test_fifth_degree_rule_weights_in_closed_form(n_dims):
    """lambda = sqrt3: w_0 = (d^2 - 7d + 18)/18, w_(1) = (4 - d)/18, w_(1,1) = 1/36."""
    rule = quadrature.fully_symmetric_rule(n_dims, 5)
    n_nonzero = np.count_nonzero(rule.nodes, axis=1)
    expected = {0: (n_dims**2 - 7 * n_dims + 18) / 18, 1: (4 - n_dims) / 18, 2: 1 / 36}
    for count, weight in expected.items():
        np.testing.assert_allclose(rule.weights[n_nonzero == count], weight, rtol=1e-12)
    assert rule.n_nodes == 2 * n_dims**2 + 1
    np.testing.assert_allclose(np.abs(rule.nodes[rule.nodes != 0]), np.sqrt(3), rtol=1e-15)


def test_fifth_degree_rule_drops_the_zero_weight_generator_only_for_sqrt3():
    assert quadrature.fully_symmetric_rule(3, 5).n_nodes == 19
    assert quadrature.fully_symmetric_rule(3, 5, (1.5, 4.0)).n_nodes == 19 + 6


@pytest.mark.parametrize("n_dims", range(1, 6))
def test_third_degree_smolyak_equals_dfs(n_dims):
    """Liu et al. Section V: A(1, d) on 3-point Gauss-Hermite is D-FS with lambda = sqrt3."""
    sparse = quadrature.smolyak(1, n_dims)
    dfs = quadrature.fully_symmetric_rule(n_dims, 3)
    order_s, order_d = np.lexsort(sparse.nodes.T), np.lexsort(dfs.nodes.T)
    np.testing.assert_allclose(sparse.nodes[order_s], dfs.nodes[order_d], atol=1e-15)
    np.testing.assert_allclose(sparse.weights[order_s], dfs.weights[order_d], atol=1e-15)


def test_smolyak_coefficients_of_the_combination_technique():
    assert quadrature.smolyak_coefficients(0, 3) == [((1, 1, 1), 1)]
    terms = dict(quadrature.smolyak_coefficients(2, 2))
    assert terms == {(1, 2): -1, (2, 1): -1, (1, 3): 1, (2, 2): 1, (3, 1): 1}
    assert sum(c for _, c in quadrature.smolyak_coefficients(3, 4)) == 1


def test_smolyak_has_negative_weights_from_level_2():
    assert np.all(quadrature.smolyak(1, 2).weights > 0)
    assert np.any(quadrature.smolyak(2, 2).weights < 0)


# ----------------------------------------------------------------------------- sets and folding


@pytest.mark.parametrize("generator", [(2.0, 0, 0, 0), (1.0, 1.0, 0), (1.0, 2.0, 0), (0.5,),
                                       (1.0, 2.0, 3.0)])
def test_fully_symmetric_set_size_and_membership(generator):
    points = quadrature.fully_symmetric_set(generator)
    values, counts = np.unique(generator, return_counts=True)
    n_nonzero = np.count_nonzero(generator)
    expected = factorial(len(generator)) // np.prod([factorial(c) for c in counts])
    assert points.shape == (expected * 2**n_nonzero, len(generator))
    assert np.unique(points, axis=0).shape[0] == points.shape[0]            # distinct
    np.testing.assert_array_equal(np.sort(np.abs(points), axis=1),
                                  np.tile(np.sort(generator), (points.shape[0], 1)))


def test_fully_symmetric_set_example_of_definition_1():
    """d = 4, p = (2, 0, 0, 0): the 8 points +-lambda_2 e_i."""
    points = quadrature.fully_symmetric_set([4.0, 0, 0, 0])
    expected = np.vstack([4.0 * np.eye(4), -4.0 * np.eye(4)])
    assert {tuple(p) for p in points} == {tuple(p) for p in expected}


@pytest.mark.parametrize("rule", [quadrature.tensor_gauss_hermite(3, 2),
                                  quadrature.tensor_gauss_hermite(4, 3),
                                  quadrature.smolyak(2, 3), quadrature.fully_symmetric_rule(5, 5)],
                         ids=["gh3x3", "gh4^3", "smolyak2", "fs5"])
def test_symmetric_half_keeps_the_cosine_integral(rule):
    nodes, weights = quadrature.symmetric_half(rule)
    has_origin = np.any(np.all(rule.nodes == 0, axis=1))
    assert nodes.shape[0] == (rule.n_nodes + has_origin) // 2
    z = np.random.default_rng(0).normal(size=(7, rule.n_dims))
    full = np.cos(rule.nodes @ z.T).T @ rule.weights
    np.testing.assert_allclose(np.cos(nodes @ z.T).T @ weights, full, rtol=1e-13, atol=1e-15)
    omega, magnitudes, signs = quadrature.cosine_rule(rule)
    signs = np.ones(len(magnitudes)) if signs is None else signs
    np.testing.assert_allclose(np.cos(omega @ z.T).T @ (signs * magnitudes), full,
                               rtol=1e-13, atol=1e-15)


def test_symmetric_half_rejects_an_asymmetric_rule():
    rule = quadrature.QuadratureRule(np.array([[1.0], [-1.0]]), np.array([0.3, 0.7]), 0)
    with pytest.raises(ValueError, match="rule must be symmetric under gamma -> -gamma"):
        quadrature.symmetric_half(rule)


def test_merge_nodes_sums_duplicates_and_drops_exact_cancellations():
    nodes = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    weights = np.array([0.1, 0.3, 0.2, -0.3, 0.4])
    merged_nodes, merged_weights = quadrature.merge_nodes(nodes, weights)
    np.testing.assert_array_equal(merged_nodes, [[0.0, 1.0], [2.0, 2.0]])
    np.testing.assert_allclose(merged_weights, [0.3, 0.4])


def test_signed_weights():
    magnitudes, signs = quadrature.signed_weights(np.array([0.5, 0.0, 0.25]))
    assert signs is None
    magnitudes, signs = quadrature.signed_weights(np.array([-0.5, 0.0, 0.25]))
    np.testing.assert_array_equal(magnitudes, [0.5, 0.0, 0.25])
    np.testing.assert_array_equal(signs, [-1.0, 1.0, 1.0])


def test_gauss_hermite_cosine_is_the_dense_grid_kernel_factor():
    u = np.linspace(-2, 2, 9)
    rule = quadrature.gauss_hermite(6)
    np.testing.assert_allclose(quadrature.gauss_hermite_cosine(6, u),
                               np.cos(np.outer(u, rule.nodes[:, 0])) @ rule.weights, rtol=1e-14)
    np.testing.assert_allclose(quadrature.gauss_hermite_cosine(40, u), np.exp(-u**2 / 2),
                               atol=1e-12)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize("call, error, message", [
    (lambda: quadrature.gauss_hermite(0), ValueError, r"n_points must be an integer >= 1, got 0"),
    (lambda: quadrature.gauss_hermite(2.5), TypeError, r"n_points must be an integer"),
    (lambda: quadrature.gauss_hermite(301), ValueError, r"n_points must be at most 300"),
    (lambda: quadrature.fully_symmetric_rule(2, 4), ValueError, r"degree must be odd .* got 4"),
    (lambda: quadrature.fully_symmetric_rule(2, 7), ValueError, r"generators must be given"),
    (lambda: quadrature.fully_symmetric_rule(2, 5, (1.0, 1.0)), ValueError,
     r"generators must hold at least 2 distinct positive"),
    (lambda: quadrature.fully_symmetric_rule(2, 3, (-1.0,)), ValueError,
     r"generators must hold at least 1 distinct positive"),
    (lambda: quadrature.smolyak(-1, 2), ValueError, r"level must be an integer >= 0, got -1"),
    (lambda: quadrature.tensor_product([]), ValueError, r"rules must contain at least one"),
    (lambda: quadrature.fully_symmetric_set([np.nan]), ValueError, r"generator must be"),
])
def test_validation_names_parameter_expectation_and_value(call, error, message):
    with pytest.raises(error, match=message):
        call()
