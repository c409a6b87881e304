"""The Vecchia approximation of the GP likelihood and its predictive (docs/vecchia.md)."""

from .learning import DEFAULT_M, VecchiaGP, fit_vecchia
from .likelihood import VecchiaLikelihood, vecchia_log_likelihood
from .neighbors import Blocks, grouped_blocks, ordered_neighbors, singleton_blocks
from .ordering import (
    ORDERINGS,
    coordinate_order,
    grid_maximin_order,
    maximin_order,
    order_points,
    scaled_inputs,
)
from .prediction import predict, predict_joint, sample, training_neighbors
from .structure import VecchiaStructure, build_structure

__all__ = [
    "DEFAULT_M",
    "ORDERINGS",
    "Blocks",
    "VecchiaGP",
    "VecchiaLikelihood",
    "VecchiaStructure",
    "build_structure",
    "coordinate_order",
    "fit_vecchia",
    "grid_maximin_order",
    "grouped_blocks",
    "maximin_order",
    "order_points",
    "ordered_neighbors",
    "predict",
    "predict_joint",
    "sample",
    "scaled_inputs",
    "singleton_blocks",
    "training_neighbors",
    "vecchia_log_likelihood",
]
