"""Every registered feature map as a scikit-learn transformer.

:class:`FeatureMapTransformer` turns inputs X (n_samples, n_dims) into the features Psi
(n_samples, n_components) of a low-rank kernel approximation, k(x, x') ~ psi(x)^T S psi(x'),
so that any linear scikit-learn model on Psi is an approximate kernel method
(Rahimi & Recht 2007), e.g. ``make_pipeline(FeatureMapTransformer(), RidgeClassifier())``.
"""

from __future__ import annotations

import inspect

from collections.abc import Mapping
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin, clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

from .. import features, kernels
from .._memory import FEATURE_CHUNKS, check_memory
from .._validation import as_generator, check_matrix
from ..inference import glf_selection
from . import configuration

__all__ = ["FeatureMapTransformer"]

#: scikit-learn ``_parameter_constraints`` entries shared by the transformer and the
#: estimators. Names (approximation, kernel) are only typed here: ``features.get`` and
#: ``kernels.get`` check them with messages that list the choices.
RANDOM_STATE_CONSTRAINT = ["random_state", np.random.Generator, np.random.SeedSequence]
KERNEL_CONSTRAINT = [str, kernels.Kernel]
#: What the builder supplies to a map that names it in ``fit_context``, with or without an
#: estimator: the model selection a map's ``build`` may ask for but cannot do itself (no
#: feature map imports the GP engine), the ``n_nodes="auto"`` search of Gauss-Legendre
#: features.
BUILD_CONTEXT = {"node_search": glf_selection.search_node_counts}


class KernelParamsMixin:
    """``set_params`` that accepts scikit-learn's nested ``kernel__<name>``,
    ``approximation__<name>`` and ``local__<name>`` parameters.

    Kernels are immutable, so ``set_params(kernel__length_scale=2.0)`` replaces ``kernel`` by
    ``kernels.get(kernel).with_params(length_scale=2.0)`` (a kernel name is resolved first),
    after the other parameters (``kernel=...`` included) are set. Likewise
    ``approximation__n_components=64`` replaces the approximation by a copy of its
    configuration object with that option changed (a name is first replaced by its object
    with the defaults: :mod:`scalegp.estimators.configuration`), and so does ``local__*``.
    This is what ``GridSearchCV``, ``RandomizedSearchCV`` and ``Pipeline`` call.
    """

    def set_params(self, **params):
        """Set parameters; ``kernel__<name>``, ``approximation__<name>`` and
        ``local__<name>`` keys give a copy of that part with them changed.

        Parameters
        ----------
        **params : dict
            Estimator parameters; ``kernel__<name>`` for any argument of the kernel's
            constructor (``length_scale``, ``variance``, ``length_scale_bounds``,
            ``variance_bounds``, ``nu`` for Matern); ``approximation__<name>`` and
            ``local__<name>`` for any option of those configuration objects.

        Returns
        -------
        self
        """
        nested = {}
        for part in ("kernel", "approximation", "local"):
            prefix = part + "__"
            changes = {key[len(prefix):]: params.pop(key) for key in list(params)
                       if key.startswith(prefix)}
            if changes:
                nested[part] = changes
        super().set_params(**params)
        for part, changes in nested.items():
            if part == "kernel":
                self.kernel = kernels.get(self.kernel).with_params(**changes)
                continue
            current = getattr(self, part)
            config = (configuration.as_approximation(current) if part == "approximation"
                      else configuration.as_local(current))
            if config is None:
                raise ValueError(f"cannot set {part}__{next(iter(changes))}: {part} is None; "
                                 f"set {part} first (e.g. {part}='neighbors')")
            setattr(self, part, clone(config).set_params(**changes))
        return self


def _build_feature_map(approximation, X, kernel, n_components, approximation_options, rng,
                       fit_context=None):
    """Validate the approximation settings and build the map (shared with the estimators).

    Parameters
    ----------
    approximation : str
        A name from :func:`scalegp.features.names`.
    X : ndarray (n_samples, n_dims)
        Validated training inputs (data-dependent maps select landmarks from them).
    kernel : Kernel
        The kernel, with the hyperparameters the map is built for.
    n_components : int or None
        m, the number of columns of Psi; None: the map's ``default_n_components`` (256), or,
        where that is None, the map derives m itself in ``build``.
    approximation_options : dict or None
        Keyword arguments of the map's ``build``.
    rng : numpy.random.Generator
        The only source of randomness of the map.
    fit_context : dict, optional
        What the estimator knows at fit time (``y``, ``noise_variance``,
        ``noise_variance_lower``); with :data:`BUILD_CONTEXT`, the entries named in the map's
        ``fit_context`` fill the options the user did not give.
    """
    map_class = features.get(approximation)
    if not map_class.supports(kernel):
        raise ValueError(
            f"approximation {approximation!r} does not support the kernel {kernel!r}; "
            "choose another kernel or approximation (see scalegp.features.describe())"
        )
    if approximation_options is None:
        options = {}
    elif isinstance(approximation_options, Mapping):
        options = dict(approximation_options)
    else:
        raise TypeError(
            "approximation_options must be a dict of keyword arguments for the "
            f"{approximation!r} map, or None; got {type(approximation_options).__name__}"
        )
    _check_option_names(approximation, map_class, options)
    context = {**BUILD_CONTEXT, **(fit_context or {})}
    for key in map_class.fit_context:
        if key in context and key not in options:
            options[key] = context[key]
    if n_components is None:
        n_components = map_class.default_n_components
    return map_class.build(X, kernel, n_components, rng, **options)


def _check_option_names(approximation, map_class, options) -> None:
    """Refuse an option the map's ``build`` does not take, naming the ones it does (a map
    whose ``build`` takes ``**options`` checks them itself)."""
    parameters = inspect.signature(map_class.build).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    accepted = [p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(
            f"approximation {approximation!r} has no option {', '.join(map(repr, unknown))} "
            f"(its options: {', '.join(accepted) or 'none'}); the estimator's own settings, "
            "such as signed_rule, solver or objective, are not map options")


class FeatureMapTransformer(KernelParamsMixin, TransformerMixin, BaseEstimator):
    """Features Psi of a low-rank kernel approximation, as a scikit-learn transformer.

    Parameters
    ----------
    approximation : str, default="rff"
        The feature map, one of :func:`scalegp.features.names`.
    n_components : int, default=100
        m, the number of output columns.
    kernel : str or Kernel, default="gaussian"
        A :class:`scalegp.kernels.Kernel` or a name accepted by :func:`scalegp.kernels.get`;
        the map is built for its current hyperparameters (they are not learned here).
    approximation_options : dict, optional
        Extra keyword arguments of the map's ``build`` (see the map's documentation).
    random_state : None, int, numpy.random.Generator, default=None
        Seed of the map's randomness. The same value builds the same map as
        ``LowRankGPRegressor(random_state=...)`` with the same settings.

    Attributes
    ----------
    feature_map_ : scalegp.features.FeatureMap
        The built map.
    kernel_ : Kernel
        The kernel the features are computed with.
    signs_ : ndarray of shape (n_components,)
        The signs S (+1 or -1) with k(X, X') ~ Psi diag(S) Psi'^T. All +1 unless the map is a
        quadrature rule with negative weights; then Psi Psi^T is *not* the kernel
        approximation, and a model that needs it must use ``Psi * signs_`` on one side.
    n_features_in_ : int
        Number of input dimensions seen in ``fit``.
    feature_names_in_ : ndarray of str
        Input column names, when ``fit`` received a DataFrame with string column names.

    Notes
    -----
    ``transform`` returns float32 features for float32 inputs and float64 otherwise.
    ``fit`` refuses an ``n_components`` whose features for one chunk of rows (256 at least)
    exceed the available memory (:mod:`scalegp._memory`).
    """

    _parameter_constraints: dict = {
        "approximation": [str],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "kernel": KERNEL_CONSTRAINT,
        "approximation_options": [Mapping, None],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(self, approximation="rff", n_components=100, kernel="gaussian",
                 approximation_options=None, random_state=None):
        self.approximation = approximation
        self.n_components = n_components
        self.kernel = kernel
        self.approximation_options = approximation_options
        self.random_state = random_state

    def fit(self, X, y=None):
        """Build the feature map for the inputs X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_dims)
        y : ignored

        Returns
        -------
        self : FeatureMapTransformer
        """
        self._validate_params()
        check_memory(self.n_components, n_matrices=0, n_chunks=FEATURE_CHUNKS,
                     what="the transformer's features")
        X = validate_data(self, X, dtype=(np.float64, np.float32), ensure_all_finite=False)
        X = check_matrix(X, "X")
        kernel = kernels.get(self.kernel)
        kernel.check_n_dims(X.shape[1])
        # The first spawned child, as in LowRankGPRegressor, so both build the same map.
        (map_rng,) = as_generator(self.random_state).spawn(1)
        feature_map = _build_feature_map(self.approximation, X, kernel, self.n_components,
                                         self.approximation_options, map_rng)
        self.feature_map_ = feature_map
        self.kernel_ = kernel
        signs = feature_map.signs
        self.signs_ = np.ones(feature_map.n_components) if signs is None else np.array(signs)
        return self

    def transform(self, X):
        """Psi, the features of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_dims)

        Returns
        -------
        Psi : ndarray of shape (n_samples, n_components)
            float32 for float32 X, float64 otherwise.
        """
        check_is_fitted(self, "feature_map_")
        X = validate_data(self, X, dtype=(np.float64, np.float32), ensure_all_finite=False,
                          reset=False)
        return self.feature_map_.features(X, self.kernel_)

    def get_feature_names_out(self, input_features=None):
        """Output column names: the approximation name and the column index ("rff0", ...).

        Parameters
        ----------
        input_features : array-like of str, optional
            Only checked against the input names seen in ``fit``.

        Returns
        -------
        names : ndarray of str, shape (n_components,)
        """
        check_is_fitted(self, "feature_map_")
        _check_feature_names_in(self, input_features, generate_names=False)
        prefix = self.feature_map_.name.replace("-", "_")
        return np.asarray([f"{prefix}{i}" for i in range(self.feature_map_.n_components)],
                          dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
