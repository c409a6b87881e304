"""Scikit-learn estimators: low-rank and exact GP regression.

Both are pure adapters: ``fit`` validates, optionally normalizes the targets, learns the
hyperparameters with :func:`scalegp.optimize.learn_hyperparameters` on the log marginal
likelihood (:class:`scalegp.gp.MarginalLikelihood`, :class:`scalegp.exact.
ExactMarginalLikelihood`) and conditions (:meth:`scalegp.gp.Posterior.fit`,
:meth:`scalegp.exact.ExactPosterior.fit`); ``predict`` maps the posterior back to the
original target scale. The hyperparameter box is the kernel's own bounds plus
``noise_variance_bounds``.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from . import exact, kernels, qr
from ._validation import (as_generator, check_bounds, check_dtype, check_matrix,
                          check_positive_int, check_positive_scalar, check_vector,
                          check_within_bounds)
from .optimize import learn_hyperparameters
from .transformers import _build_feature_map

__all__ = ["LowRankGPRegressor", "ExactGPRegressor"]


class _GPRegressor(RegressorMixin, BaseEstimator):
    """fit / predict / sample_y shared by the two regressors.

    A subclass supplies ``_prepare`` (theta-independent state, e.g. the feature map),
    ``_objective`` (theta -> (log p(y), gradient), with ``posterior(kernel, noise_variance)``
    to condition) and ``_prediction_input`` (the dtype predictions are computed in).
    """

    # ----------------------------------------------------------------- fitting
    def fit(self, X, y, progress=None):
        """Learn the hyperparameters (if ``optimize``) and condition on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_dims)
        y : array-like of shape (n_samples,)
        progress : callable, optional
            ``progress(rows_done)``, called after each chunk of a streaming pass over the
            data (the command line draws a progress bar with it).

        Returns
        -------
        self
        """
        # validate_data gives scikit-learn's checks (sparse, complex, n_features_in_, column
        # vectors); finiteness is left to check_matrix, whose message names the bad entry.
        X, y = validate_data(self, X, y, y_numeric=True, ensure_all_finite=False)
        X = check_matrix(X, "X")
        y = check_vector(y, "y", n_samples=X.shape[0])
        kernel = kernels.get(self.kernel)
        kernel.check_n_dims(X.shape[1])
        noise_variance = check_positive_scalar(self.noise_variance, "noise_variance")
        noise_bounds = check_bounds(self.noise_variance_bounds, "noise_variance_bounds")
        check_within_bounds(noise_variance, noise_bounds, "noise_variance")
        n_restarts = check_positive_int(self.n_restarts, "n_restarts", minimum=0)

        y_mean, y_std = 0.0, 1.0
        if self.normalize_y:
            y_mean, y_std = float(np.mean(y)), float(np.std(y))
            y_std = y_std if y_std > 0 else 1.0     # constant targets: centre only
        y_fit = (y - y_mean) / y_std

        build_rng, restart_rng = as_generator(self.random_state).spawn(2)
        noise_lower = noise_variance if noise_bounds == "fixed" else noise_bounds[0]
        state = self._prepare(X, kernel, build_rng,
                              {"y": y_fit, "noise_variance": noise_variance,
                               "noise_variance_lower": noise_lower})
        # One objective serves learning and conditioning, so a fixed-basis map (GLF) makes
        # a single pass over the data.
        objective = self._objective(state, kernel, X, y_fit, progress)
        result = None
        if self.optimize:
            kernel, noise_variance, result = learn_hyperparameters(
                objective, kernel, noise_variance, noise_bounds,
                n_restarts=n_restarts, rng=restart_rng)
        posterior = objective.posterior(kernel, noise_variance)
        self._set_fitted(posterior, optimization_result=result, y_train_mean=y_mean,
                         y_train_std=y_std, training_data=(X, y_fit))
        return self

    def _set_fitted(self, posterior, *, optimization_result, y_train_mean, y_train_std,
                    training_data=None):
        """Set the fitted attributes (used by ``fit`` and by :func:`scalegp.load`)."""
        self.posterior_ = posterior
        self.kernel_ = posterior.kernel
        self.noise_variance_ = float(posterior.noise_variance)
        self.log_marginal_likelihood_value_ = float(posterior.log_marginal_likelihood)
        self.optimization_result_ = optimization_result
        self.y_train_mean_ = float(y_train_mean)
        self.y_train_std_ = float(y_train_std)
        # (X, normalized y) for log_marginal_likelihood(theta); model files do not keep it.
        self._training_data = training_data

    # ----------------------------------------------------------------- prediction
    def predict(self, X, return_std=False, return_cov=False, include_noise=False):
        """Predictive mean, and optionally its standard deviation or covariance.

        Parameters
        ----------
        X : array-like of shape (n_test, n_dims)
        return_std : bool, default=False
            Also return the predictive standard deviation, shape (n_test,).
        return_cov : bool, default=False
            Also return the predictive covariance, shape (n_test, n_test) (small n_test).
        include_noise : bool, default=False
            Add the noise variance, ``noise_variance_ * y_train_std_**2`` in target units
            (std and cov are of the latent function by default, as in scikit-learn; with
            the noise they are those of a new observation).

        Returns
        -------
        mean : ndarray of shape (n_test,)
        std : ndarray of shape (n_test,), if ``return_std``
        cov : ndarray of shape (n_test, n_test), if ``return_cov``
        """
        if return_std and return_cov:
            raise ValueError(
                "return_std and return_cov cannot both be True; request one of them"
            )
        X = self._validate_test_inputs(X)
        out = self.posterior_.predict(X, return_var=return_std, return_cov=return_cov,
                                      include_noise=include_noise)
        if not (return_std or return_cov):
            return out * self.y_train_std_ + self.y_train_mean_
        mean, var = out
        mean = mean * self.y_train_std_ + self.y_train_mean_
        var = var * self.y_train_std_**2
        return (mean, np.sqrt(var)) if return_std else (mean, var)

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw functions from the posterior at X (from the predictive covariance).

        Parameters
        ----------
        X : array-like of shape (n_test, n_dims)
        n_samples : int, default=1
        random_state : None, int, numpy.random.Generator, default=0

        Returns
        -------
        y_samples : ndarray of shape (n_test, n_samples)
            Latent function values (no observation noise), as scikit-learn's
            ``GaussianProcessRegressor.sample_y``.
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = as_generator(random_state)
        mean, cov = self.predict(X, return_cov=True)
        # eigh tolerates the rank-deficient covariance of a low-rank model.
        return rng.multivariate_normal(mean, cov, size=n_samples, method="eigh").T

    def log_marginal_likelihood(self, theta=None, eval_gradient=False):
        """log p(y | theta) of the (normalized, if ``normalize_y``) training targets.

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params + 1,), optional
            Log-parameters [kernel_.theta..., log noise_variance]; values outside the
            kernel's bounds are clipped into them. None returns
            ``log_marginal_likelihood_value_``.
        eval_gradient : bool, default=False
            Also return the gradient with respect to theta (requires theta).

        Returns
        -------
        value : float
        gradient : ndarray, if ``eval_gradient``
        """
        check_is_fitted(self)
        if theta is None:
            if eval_gradient:
                raise ValueError("eval_gradient=True requires theta, got theta=None")
            return self.log_marginal_likelihood_value_
        if self._training_data is None:
            raise ValueError(
                "log_marginal_likelihood(theta) needs the training data, which model files "
                "do not store; fit the estimator again (without theta it returns "
                "log_marginal_likelihood_value_)"
            )
        theta = np.asarray(theta, dtype=float)
        expected = self.kernel_.n_params + 1
        if theta.shape != (expected,):
            raise ValueError(
                f"theta must have shape ({expected},) "
                f"({', '.join(self.kernel_.param_names)}, noise_variance; log scale), "
                f"got shape {theta.shape}"
            )
        X, y = self._training_data
        objective = self._objective(self._fitted_state(), self.kernel_, X, y)
        value, gradient = objective(theta)
        return (value, gradient) if eval_gradient else value

    def _validate_test_inputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite=False)
        return self._prediction_input(X)


class LowRankGPRegressor(_GPRegressor):
    """Gaussian-process regression through a low-rank kernel approximation.

    The kernel is approximated by a feature map, k(x, x') ~ psi(x)^T S psi(x'), with
    m = ``n_components`` features; fitting costs O(n m^2) and predicting O(m^2) per point.

    Parameters
    ----------
    approximation : str, default="rff"
        The feature map, one of :func:`scalegp.features.names`.
    n_components : int, default=256
        m, the number of features.
    kernel : str or Kernel, default="gaussian"
        A :class:`scalegp.kernels.Kernel` or a name accepted by :func:`scalegp.kernels.get`.
        Its hyperparameters are the starting point, and its bounds the box, of learning.
    noise_variance : float, default=1e-2
        Observation noise variance s2 (starting point when ``optimize``).
    noise_variance_bounds : (float, float) or "fixed", default=(1e-6, 1e5)
    optimize : bool, default=True
        Maximize the log marginal likelihood over the hyperparameters (L-BFGS-B).
    n_restarts : int, default=0
        Extra optimizer starts drawn uniformly in the box.
    approximation_options : dict, optional
        Extra keyword arguments of the map's ``build``. Options a map lists in its
        ``fit_context`` are filled from ``fit`` unless given here: for ``"glf"`` the
        (normalized) targets ``y`` and the starting ``noise_variance`` (used by
        ``n_nodes="auto"``) and ``noise_variance_lower``, the lower end of
        ``noise_variance_bounds`` (the truncation of Proposition 7).
    normalize_y : bool, default=False
        Fit to (y - mean) / std and map predictions back (variances times std^2).
    dtype : {"float64", "float32"}, default="float64"
        Precision of the features and of the Gram accumulation (fit and predict); the
        m x m algebra is always float64.
    random_state : None, int, numpy.random.Generator, default=None
        Seed of the map's randomness and of the optimizer restarts (independent streams).

    Attributes
    ----------
    kernel_ : Kernel
        The kernel with the learned hyperparameters.
    noise_variance_ : float
    log_marginal_likelihood_value_ : float
        At the learned hyperparameters, of the normalized targets if ``normalize_y``.
    posterior_ : scalegp.gp.Posterior
    feature_map_ : scalegp.features.FeatureMap
    optimization_result_ : scalegp.optimize.OptimizationResult or None
        None when ``optimize=False``.
    y_train_mean_, y_train_std_ : float
        The normalization constants (0 and 1 without ``normalize_y``).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``fit`` received a DataFrame with string column names.
    """

    def __init__(self, approximation="rff", n_components=256, kernel="gaussian",
                 noise_variance=1e-2, noise_variance_bounds=(1e-6, 1e5), optimize=True,
                 n_restarts=0, approximation_options=None, normalize_y=False,
                 dtype="float64", random_state=None):
        self.approximation = approximation
        self.n_components = n_components
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.approximation_options = approximation_options
        self.normalize_y = normalize_y
        self.dtype = dtype
        self.random_state = random_state

    def _prepare(self, X, kernel, rng, fit_context):
        self._dtype = check_dtype(self.dtype)
        return _build_feature_map(self.approximation, X, kernel, self.n_components,
                                  self.approximation_options, rng, fit_context)

    def _objective(self, feature_map, kernel, X, y, progress=None):
        # the map's solver picks the objective: normal equations, or QR for solver="qr"
        return qr.marginal_likelihood(feature_map, kernel, X, y, dtype=self._dtype,
                                      progress=progress)

    def _set_fitted(self, posterior, *, dtype=None, **kwargs):
        super()._set_fitted(posterior, **kwargs)
        self.feature_map_ = posterior.feature_map
        if dtype is not None:                   # a loaded model; fit set it in _prepare
            self._dtype = check_dtype(dtype)

    def _fitted_state(self):
        return self.feature_map_

    def _prediction_input(self, X):
        return check_matrix(X, "X", dtype=self._dtype)


class ExactGPRegressor(_GPRegressor):
    """Exact (dense) Gaussian-process regression: the reference, for n up to a few thousand.

    Builds n x n matrices (O(n^3) time, O(n^2) memory); refuses n above
    :data:`scalegp.exact.MAX_EXACT_SAMPLES`. Parameters and attributes are those of
    :class:`LowRankGPRegressor` without ``approximation``, ``n_components``,
    ``approximation_options``, ``dtype`` and ``feature_map_``; ``posterior_`` is a
    :class:`scalegp.exact.ExactPosterior`. ``random_state`` seeds the optimizer restarts.
    """

    def __init__(self, kernel="gaussian", noise_variance=1e-2,
                 noise_variance_bounds=(1e-6, 1e5), optimize=True, n_restarts=0,
                 normalize_y=False, random_state=None):
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.normalize_y = normalize_y
        self.random_state = random_state

    def _prepare(self, X, kernel, rng, fit_context):
        return None

    def _objective(self, _state, kernel, X, y, _progress=None):
        return exact.ExactMarginalLikelihood(kernel, X, y)

    def _fitted_state(self):
        return None

    def _prediction_input(self, X):
        return X
