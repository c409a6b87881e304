"""The Vecchia structure of a training set: ordering, conditioning sets and blocks.

Built once for a length-scale vector (the scaling u = x / l of the ordering and of the
neighbour search) and reused for every likelihood evaluation until learning rebuilds it
for new length scales ("scaled Vecchia", Katzfuss, Guinness & Lawrence 2022).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_matrix, check_positive_int
from .neighbors import Blocks, grouped_blocks, ordered_neighbors, singleton_blocks
from .ordering import order_points, scaled_inputs


@dataclass(frozen=True)
class VecchiaStructure:
    """order[k] is the row of the k-th point; neighbors (N, m) and blocks refer to positions.

    ``length_scale`` is the scaling the ordering and the neighbours were computed in."""

    order: np.ndarray
    neighbors: np.ndarray
    blocks: Blocks
    length_scale: np.ndarray
    grouped: bool

    @property
    def n_samples(self) -> int:
        return self.order.size

    @property
    def m(self) -> int:
        return self.neighbors.shape[1]


def build_structure(X, length_scale, m: int, *, ordering: str = "maximin",
                    grouping: bool = True, exponent: float = 2.0, rng=None,
                    coordinate: int | None = None, n_jobs: int = 1) -> VecchiaStructure:
    """Order the rows of X in the scaling x / ``length_scale``, find each point's m nearest
    previously ordered points, and group them into blocks (``grouping=False``: one block
    per point, the ungrouped Vecchia approximation).

    Costs O(N log N) for the maximin ordering, O(N m log N) for the neighbours (``n_jobs``
    threads in the tree queries) and O(N m) for the grouping; memory O(N m)."""
    X = check_matrix(X, "X")
    m = check_positive_int(m, "m")
    U = scaled_inputs(X, length_scale)
    order = order_points(U, ordering, rng=rng, coordinate=coordinate)
    neighbors = ordered_neighbors(U[order], m, n_jobs=n_jobs)
    blocks = grouped_blocks(neighbors, exponent=exponent) if grouping else \
        singleton_blocks(neighbors)
    scale = np.broadcast_to(np.asarray(length_scale, dtype=float).ravel(),
                            (X.shape[1],)).copy()
    return VecchiaStructure(order, neighbors, blocks, scale, bool(grouping))
