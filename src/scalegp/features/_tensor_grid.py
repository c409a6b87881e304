"""Tensor-grid algebra of the Gauss-Legendre maps (docs/gauss-legendre.md, section 2).

A tensor rule's nodes, weights and features are built from per-dimension factors: the full
grid (every node, row-major over the dimensions) and the half grid (one node of each pair
{eta, -eta}, eta != 0: the real-feature pairing). An *algebra* says how factors of one kind
combine: node coordinates (:class:`Nodes`), weights (:class:`Weights`), (cos, sin) of phases
(:class:`Phases`) and separable features (:class:`Products`).
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


class Phases:
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


def half_grid_phases(factors, positive, zero, cos_out, sin_out, j=0):
    """Write cos and sin of 2 pi eta^T x for the representatives of ``half_grid`` (same
    order) into the (n, n_pairs) views ``cos_out``, ``sin_out``; ``factors[j]`` holds the
    (cos, sin) of the phases of dimension j. Block by block of the leading dimension, with the
    angle-addition identities of :class:`Phases`, so nothing of size n x s is allocated."""
    c, s = factors[j]
    heads = positive[j]
    if j == len(factors) - 1:
        cos_out[:, :heads.size] = c[:, heads]
        sin_out[:, :heads.size] = s[:, heads]
        return
    tail_cos, tail_sin = full_grid(factors, Phases, j + 1)
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
        half_grid_phases(factors, positive, zero, cos_out[:, done:], sin_out[:, done:], j + 1)
