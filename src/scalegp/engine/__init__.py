"""The engine: statistics of the data under a feature map, the log marginal likelihood and its
gradient, the posterior, the factorized systems, the noise models and the exact reference GP.

It reads data sources (:mod:`scalegp.data`) and feature maps (:mod:`scalegp.features`), and
knows nothing of estimators, model files or the command line (docs/engine.md). Its public face
is this package: the names below are what the other wings use; its modules are

* :mod:`~scalegp.engine.statistics`: the streaming passes (statistics, the gradient's shares);
* :mod:`~scalegp.engine.likelihood`: the log marginal likelihood, its gradient, the posterior;
* :mod:`~scalegp.engine.gradients`: the gradient paths, one chosen per objective;
* :mod:`~scalegp.engine.systems`, :mod:`~scalegp.engine.positive_part`: the m x m systems;
* :mod:`~scalegp.engine.noise`, :mod:`~scalegp.engine.hyperparameters`: the model's diagonal
  and theta;
* :mod:`~scalegp.engine.qr`, :mod:`~scalegp.engine.objectives`: the QR path and the choice of
  the objective; :mod:`~scalegp.engine.exact`: the dense reference GP.
"""

from .gradients import (GradientPath, choose_gradient_path, fixed_basis_gradient,
                        noise_gradient)
from .likelihood import (SIGNED_RULES, MarginalLikelihood, Posterior, condition,
                         log_marginal_likelihood, posterior_of_sums)
from .noise import FITC, HOMOSCEDASTIC, NoiseModel
from .statistics import (FEATURE_CACHE_BYTES, BasisOnly, BasisStatistics, KeptFeatures, RowSums,
                         Statistics,
                         accumulate_gradient, accumulate_statistics, chunk_gradient,
                         chunk_statistics, feature_cache_budget, features_by_chunk)

__all__ = [
    "FEATURE_CACHE_BYTES", "FITC", "HOMOSCEDASTIC", "SIGNED_RULES", "BasisOnly", "BasisStatistics",
    "GradientPath", "KeptFeatures", "MarginalLikelihood", "NoiseModel", "Posterior", "RowSums",
    "Statistics",
    "accumulate_gradient", "accumulate_statistics", "choose_gradient_path", "chunk_gradient",
    "chunk_statistics", "condition", "feature_cache_budget", "features_by_chunk",
    "fixed_basis_gradient", "log_marginal_likelihood", "noise_gradient", "posterior_of_sums",
]
