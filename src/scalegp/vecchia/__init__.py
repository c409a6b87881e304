"""The Vecchia approximation of the GP likelihood and its predictive (docs/vecchia.md)."""

from .likelihood import VecchiaLikelihood, vecchia_log_likelihood
from .neighbors import Blocks, grouped_blocks, ordered_neighbors, singleton_blocks
from .ordering import ORDERINGS, coordinate_order, maximin_order, order_points, scaled_inputs
from .structure import VecchiaStructure, build_structure

__all__ = [
    "Blocks", "ORDERINGS", "VecchiaLikelihood", "VecchiaStructure", "build_structure",
    "coordinate_order", "grouped_blocks", "maximin_order", "order_points", "ordered_neighbors",
    "scaled_inputs", "singleton_blocks", "vecchia_log_likelihood",
]
