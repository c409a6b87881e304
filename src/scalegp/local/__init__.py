"""Local models: centred models around a feature map, neighbourhood-local GPs, the clustering
that places their centres and the checks of what an approximation can resolve
(docs/local-models.md).

The local-model protocol and what every kind shares are in :mod:`~scalegp.local.centered`; the
kinds are :mod:`~scalegp.local.clusters`, :mod:`~scalegp.local.test_points` and
:mod:`~scalegp.local.neighborhoods`, each registered in :data:`LOCAL_KINDS` by its class
statement (importing this package registers them all).
"""

from .centered import (LOCAL_KINDS, LocalContext, LocalMarginalLikelihood, LocalModel,
                       centred_gradients, centred_statistics, local_kernel, local_memory_bytes)
from .clustering import farthest_point_centres, nearest_centres
from .clusters import ClusterLocalModel
from .neighborhoods import NeighborhoodPosterior
from .test_points import TestPointLocalModel

__all__ = ["LOCAL_KINDS", "ClusterLocalModel", "LocalContext", "LocalMarginalLikelihood",
           "LocalModel", "NeighborhoodPosterior", "TestPointLocalModel", "centred_gradients",
           "centred_statistics", "farthest_point_centres", "local_kernel", "local_memory_bytes",
           "nearest_centres"]
