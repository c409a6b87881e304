"""What the model files need of an estimator to rebuild a fitted one: the estimators' public face
for :mod:`scalegp.io` (issue 25: no wing calls another's private methods).

Each function is the estimator's own step, so a reader never reaches into an estimator's
private state: the fitted state set from a stored posterior, the parameters validated by the
estimator's constraints, a stored local model's map builder, and the inputs a posterior
predicts from.
"""

from __future__ import annotations


#: Option of the ``local`` configuration object -> the local model's section value (a flag,
#: false where a kind has none) that a model file must agree with
#: (:mod:`scalegp.local.centered`, :mod:`scalegp.estimators.configuration`).
LOCAL_SECTION_PARAMS = {"lazy": "lazy", "reoptimize": "reoptimized"}


def set_fitted(estimator, posterior, **state) -> None:
    """Give ``estimator`` the fitted state of a stored ``posterior`` (or Gibbs samples) and the
    stored normalization and optimization state, as ``fit`` would have."""
    estimator._set_fitted(posterior, **state)


def validate_params(estimator) -> None:
    """Check the estimator's parameters against its declared constraints (scikit-learn's
    ``_parameter_constraints``): ValueError or TypeError naming the parameter."""
    estimator._validate_params()


def centre_map_builder(estimator, X, y):
    """The builder of one map per centre of a stored local model with ``reoptimize``: the one
    ``fit`` used, rebuilt from the stored training rows."""
    return estimator._stored_centre_map_builder(X, y)


def prediction_input(estimator, X):
    """X as the fitted posterior predicts from it (standardized as in ``fit``)."""
    return estimator._prediction_input(X)
