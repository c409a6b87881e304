"""ExactGPRegressor: the dense exact GP (:mod:`scalegp.engine.exact`) as a scikit-learn estimator,
the reference every approximation is compared with. O(n^3) time and O(n^2) memory: for small n.
"""

from __future__ import annotations

from ..engine import exact
from .base import _GPRegressor


class ExactGPRegressor(_GPRegressor):
    """Exact (dense) Gaussian-process regression: the reference, for n up to a few thousand.

    Builds n x n matrices (O(n^3) time, O(n^2) memory); refuses n above
    :data:`scalegp.engine.exact.MAX_EXACT_SAMPLES`. Parameters and attributes are those of
    :class:`~scalegp.estimators.lowrank.LowRankGPRegressor` without ``approximation``,
    ``n_components``, ``approximation_options``, ``dtype``, ``solver`` and ``feature_map_``;
    ``posterior_`` is a :class:`scalegp.engine.exact.ExactPosterior`. ``random_state`` seeds the
    optimizer restarts.
    """

    def __init__(self, kernel="gaussian", noise_variance=0.1,
                 noise_variance_bounds=(1e-6, 1e5), optimize=True, n_restarts=0,
                 normalize_y=True, normalize_X=True, random_state=None):
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.normalize_y = normalize_y
        self.normalize_X = normalize_X
        self.random_state = random_state

    def _check_streaming(self) -> None:
        raise ValueError(
            "ExactGPRegressor builds n x n matrices of its training rows, so it fits arrays "
            f"(at most {exact.MAX_EXACT_SAMPLES} rows), not a streaming data source; read the "
            "rows into arrays, or stream a LowRankGPRegressor")

    def _prepare(self, X, kernel, rng, fit_context):
        return None

    def _objective(self, _state, hyperparameters, X, y, _progress=None,
                   sample_noise_variance=None):
        return exact.ExactMarginalLikelihood(hyperparameters, X, y,
                                             sample_noise_variance=sample_noise_variance)

    def _fitted_state(self):
        return None

    def _coefficients(self, posterior):
        return posterior.alpha

    def _prediction_input(self, X):
        return X
