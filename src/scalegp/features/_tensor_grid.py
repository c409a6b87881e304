"""Tensor-grid algebra of the Gauss-Legendre maps (docs/gauss-legendre.md, section 2).

A tensor rule's nodes, weights and features are built from per-dimension factors: the full
grid (every node, row-major over the dimensions) and the half grid (one node of each pair
{eta, -eta}, eta != 0: the real-feature pairing). An *algebra* says how factors of one kind
combine: node coordinates (:class:`Nodes`), weights (:class:`Weights`) and separable features
(:class:`Products`: also the complex exponentials of phases, e^{i(a + b)} = e^{ia} e^{ib}).
"""

from __future__ import annotations

import numpy as np


class Nodes:
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


class Weights:
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


class Products:
    """Tensor algebra of separable features: the row-wise Kronecker product,
    f_(i, k)(x) = f_i(x) g_k(x)."""

    @staticmethod
    def combine(first, second):
        return (first[:, :, None] * second[:, None, :]).reshape(first.shape[0], -1)


def full_grid(factors, algebra, j=0):
    """Every node of the tensor grid over dimensions j..d-1, row-major."""
    if j == len(factors) - 1:
        return factors[j]
    return algebra.combine(factors[j], full_grid(factors, algebra, j + 1))


def half_grid(factors, positive, zero, algebra, j=0):
    """One node of each pair {eta, -eta}, eta != 0, over dimensions j..d-1.

    docs/gauss-legendre.md, section 2.

    The representative is the node whose first nonzero coordinate is positive: a positive
    node of dimension j with anything after it, or the node 0 of dimension j followed by a
    representative of the remaining dimensions.
    """
    head = algebra.select(factors[j], positive[j])
    parts = [head if j == len(factors) - 1
             else algebra.combine(head, full_grid(factors, algebra, j + 1))]
    if zero[j] is not None and j < len(factors) - 1:
        origin = algebra.select(factors[j], zero[j])
        parts.append(algebra.combine(origin, half_grid(factors, positive, zero, algebra, j + 1)))
    return algebra.concat(parts)


def full_grid_rows(factors, j=0):
    """The products of the feature-major factors (q_j, n) of dimensions j..d-1 over the full
    grid, shape (prod_j q_j, n), row-major over the dimensions like :func:`full_grid`."""
    if j == len(factors) - 1:
        return factors[j]
    tail = full_grid_rows(factors, j + 1)
    return (factors[j][:, None, :] * tail[None, :, :]).reshape(-1, tail.shape[1])


def half_grid_exponential_rows(factors, positive, zero, cos_rows, sin_rows, j=0):
    """Write cos and sin of 2 pi eta^T x for the representatives of ``half_grid`` (same order)
    into the rows of ``cos_rows`` and ``sin_rows`` (n_pairs, n); ``factors[j]`` holds
    exp(2 pi i eta_{j,k} x_j) of dimension j, feature-major (q_j, n). The phase of node (k, l)
    is a_k + b_l, so its exponential is the product e^{i a_k} e^{i b_l} (the angle-addition
    identities in one complex multiplication): each representative of the leading dimension
    times the full grid of the remaining dimensions, one block of rows at a time (a block small
    enough to stay in cache before its real and imaginary parts are written out)."""
    heads = factors[j][positive[j]]
    if j == len(factors) - 1:
        cos_rows[:len(heads)] = heads.real
        sin_rows[:len(heads)] = heads.imag
        return
    tail = full_grid_rows(factors, j + 1)
    block, size = np.empty_like(tail), tail.shape[0]
    for k, head in enumerate(heads):
        np.multiply(tail, head, out=block)
        cos_rows[k * size:(k + 1) * size] = block.real
        sin_rows[k * size:(k + 1) * size] = block.imag
    if zero[j] is not None:
        # the node 0 of dimension j adds no phase: e^{i (0 + b)} = e^{i b}
        done = len(heads) * size
        half_grid_exponential_rows(factors, positive, zero, cos_rows[done:], sin_rows[done:],
                                   j + 1)


def half_grid_flat_indices(n_nodes, positive, zero) -> np.ndarray:
    """The positions of :func:`half_grid`'s representatives (same order) in the full grid
    flattened row-major (the order of a Kronecker product of per-dimension factors)."""
    factors = [np.arange(int(q))[:, None] for q in n_nodes]
    multi = half_grid(factors, positive, zero, Nodes)
    return np.ravel_multi_index(tuple(multi.T), tuple(int(q) for q in n_nodes))


def kronecker(factors) -> np.ndarray:
    """F_1 (x) F_2 (x) ... of square per-dimension factors: the sum over a full tensor grid of
    cells of z z^H (or z z^T) for z = e_1 (x) e_2 (x) ..., each factor that sum over its axis
    (the sum of a product over a product set is the product of the sums)."""
    result = factors[0]
    for factor in factors[1:]:
        result = np.kron(result, factor)
    return result


def contract_axes(values: np.ndarray, factors) -> np.ndarray:
    """sum over every cell t of values[t] prod_j factors[j][:, t_j]: the full-grid vector
    sum_x z(x) y(x) for feature-major factors (q_j, n_j), flattened row-major."""
    result = values
    for j, factor in enumerate(factors):
        # contract axis j with the factor's cell axis and put its q_j nodes in its place
        result = np.moveaxis(np.tensordot(result, factor, axes=([j], [1])), -1, j)
    return result.reshape(-1)
