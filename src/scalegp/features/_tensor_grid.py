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


def half_grid_exponentials(factors, positive, zero, out, j=0):
    """Write exp(2 pi i eta^T x) for the representatives of ``half_grid`` (same order) into
    the complex (n, n_pairs) view ``out``; ``factors[j]`` holds exp(2 pi i eta_{j,k} x_j) of
    dimension j. The phase of node (k, l) is a_k + b_l, so its exponential is the product
    e^{i a_k} e^{i b_l} (the angle-addition identities in one complex multiplication): the
    leading dimension's representatives times the full grid of the remaining dimensions
    (:class:`Products`), one broadcast product written in place."""
    heads = factors[j][:, positive[j]]
    if j == len(factors) - 1:
        out[:, :heads.shape[1]] = heads
        return
    tail = full_grid(factors, Products, j + 1)
    n, done = tail.shape[0], heads.shape[1] * tail.shape[1]
    # splitting the contiguous last axis of a view is again a view: written in place
    np.multiply(heads[:, :, None], tail[:, None, :],
                out=out[:, :done].reshape(n, heads.shape[1], tail.shape[1]))
    if zero[j] is not None:
        # the node 0 of dimension j adds no phase: e^{i (0 + b)} = e^{i b}
        half_grid_exponentials(factors, positive, zero, out[:, done:], j + 1)
