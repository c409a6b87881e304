"""Scikit-learn estimators: low-rank and exact GP regression.

Both are pure adapters: ``fit`` validates, optionally normalizes the targets, learns the
hyperparameters with :func:`scalegp.optimize.learn_hyperparameters` on the log marginal
likelihood (:class:`scalegp.gp.MarginalLikelihood`, :class:`scalegp.exact.
ExactMarginalLikelihood`) and conditions (:meth:`scalegp.gp.Posterior.fit`,
:meth:`scalegp.exact.ExactPosterior.fit`); ``predict`` maps the posterior back to the
original target scale. The hyperparameter box is the kernel's own bounds plus
``noise_variance_bounds``.

After conditioning, ``fit`` checks its result (``_diagnose``): a NaN or infinite log marginal
likelihood, posterior coefficient or training-input prediction raises
:class:`~scalegp.errors.NonFiniteResultError`; an optimizer that stopped without converging
(any L-BFGS-B end but a convergence test, including "ABNORMAL" line-search ends, as in
scikit-learn) warns with :class:`~scalegp.errors.ConvergenceWarning`; a log marginal
likelihood below the noise-only model's warns with :class:`~scalegp.errors.FitQualityWarning`.
The warnings' texts are kept in ``fit_warnings_``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from . import exact, features, kernels, local as local_models
from . import knot_learning, parallel, resolution, rowwise
from . import neighborhoods as neighborhood_models
from ._limits import MAX_KNOT_ITERATIONS, MAX_RESTARTS, check_count
from ._memory import ENGINE_MATRICES, check_memory, check_prediction_memory
from ._validation import (as_generator, check_bounds, check_dtype, check_matrix,
                          check_positive_int, check_positive_scalar, check_vector,
                          check_within_bounds)
from .errors import (ConvergenceWarning, FitQualityWarning, NonFiniteResultError,
                     NumericalWarning)
from ._training_data import InMemoryData, Staged, StreamedData, probe_indices
from ._training_data import noise_only_log_marginal_likelihood  # noqa: F401 (public here)
from .data import ArraySource, DataSource
from .distributed import DaskSource, is_dask_collection
from .hyperparameters import Hyperparameters
from .noise import default_diag_correction, floored_rows
from .objectives import OBJECTIVES, SOLVERS, low_rank_objective
from .optimize import learn_hyperparameters
from .systems import EigenSystem
from .transformers import (KERNEL_CONSTRAINT, RANDOM_STATE_CONSTRAINT, KernelParamsMixin,
                           _build_feature_map)

__all__ = ["LowRankGPRegressor", "ExactGPRegressor"]

#: Training rows (evenly spaced) at which ``fit`` checks that predictions are finite.
PROBE_ROWS = 64
#: The same for a test-point-centred local model, whose every prediction is a pass.
TEST_POINT_PROBE_ROWS = 8
#: ``fit`` warns when its log marginal likelihood is below the noise-only model's by more than
#: this relative margin (rounding of two O(n) sums; a model on the noise-only limit is not
#: "worse").
NOISE_ONLY_MARGIN = 1e-9


def _non_finite(values) -> str | None:
    """'nan' / 'inf' / '-inf' for the first non-finite entry of values, else None."""
    values = np.atleast_1d(np.asarray(values, dtype=float))
    bad = ~np.isfinite(values)
    return str(values[bad][0]) if np.any(bad) else None


def _check_finite_prediction(values: np.ndarray, what: str, y_train_std: float) -> np.ndarray:
    """Return values, or raise NonFiniteResultError naming ``what``, the first test row and
    the target scale."""
    advice = ("; the covariance is in squared target units: use return_std=True"
              if what == "predictive covariance" else "")
    return rowwise.check_finite_rows(
        values, what, f"float64 overflowed in the target scale (y_train_std_ = "
                      f"{y_train_std:.3g}){advice}")


class _GPRegressor(KernelParamsMixin, RegressorMixin, BaseEstimator):
    """fit / predict / sample_y shared by the two regressors.

    A subclass supplies ``_prepare`` (theta-independent state, e.g. the feature map),
    ``_objective`` (theta -> (log p(y), gradient), with ``posterior(kernel, noise_variance)``
    to condition) and ``_prediction_input`` (the dtype predictions are computed in).
    ``fit`` first validates the parameters against ``_parameter_constraints`` (scikit-learn's
    validator: e.g. ``optimize="no"`` is refused, not taken as True); ``set_params`` accepts
    nested ``kernel__<name>`` keys (:class:`scalegp.transformers.KernelParamsMixin`).
    """

    _parameter_constraints: dict = {
        "kernel": KERNEL_CONSTRAINT,
        "noise_variance": [Interval(Real, 0, None, closed="neither")],
        "noise_variance_bounds": ["array-like", str],
        "optimize": ["boolean"],
        "n_restarts": [Interval(Integral, 0, None, closed="left")],
        "normalize_X": ["boolean"],
        "normalize_y": ["boolean"],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    # ----------------------------------------------------------------- fitting
    def fit(self, X, y=None, progress=None, sample_noise_variance=None):
        """Learn the hyperparameters (if ``optimize``) and condition on (X, y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_dims), or a :class:`scalegp.data.DataSource`
            A data source (a file of :mod:`scalegp.sources`, an
            :class:`~scalegp.data.IterableSource`, ...) is streamed: ``fit`` never holds
            its rows, only chunks (O(chunk_size * m + m^2) memory;
            docs/data-sources.md, "Fitting from a source"), and the source carries the
            targets and noise variances, so ``y`` and ``sample_noise_variance`` stay None.
            The standardization comes from the source's one-pass summary. Equal to the fit
            on the same rows as arrays (the same floats, chunk for chunk). A ``dask.array`` X
            (with a ``dask.array`` y and optionally ``sample_noise_variance``) becomes a
            :class:`scalegp.distributed.DaskSource`: every pass runs on the Dask workers
            (docs/distributed.md).
        y : array-like of shape (n_samples,); None when X is a data source
        progress : callable, optional
            ``progress(rows_done)``, called after each chunk of a streaming pass over the
            data (the command line draws a progress bar with it). When X is a data source
            every pass is reported, and ``progress.start_pass(name, total_rows)``, if the
            callable has it, is called before each one with the pass's name ("summary
            pass", "statistics pass", "learning evaluation K", "conditioning pass") and its
            number of rows (None while unknown).
        sample_noise_variance : array-like of shape (n_samples,), optional
            Known noise variances v_i of the observations (measurement errors, >= 0, in the
            units of y squared), added to the learned ``noise_variance``: the noise of row i
            has variance noise_variance + v_i (docs/engine.md, "Noise models"). With known
            variances every likelihood evaluation passes over the data, also for a
            fixed-basis map.

        Returns
        -------
        self
        """
        self._validate_params()
        if is_dask_collection(X):           # rows stay on the workers (docs/distributed.md)
            X = DaskSource(X, y, sample_noise_variance, dtype=self.dtype
                           if isinstance(self, LowRankGPRegressor) else None)
            y = sample_noise_variance = None
        streamed = isinstance(X, DataSource)
        if streamed:
            given = [name for name, value in (("y", y), ("sample_noise_variance",
                                                         sample_noise_variance))
                     if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)} must be None when X is a data source "
                                 "(the source carries its targets and noise variances)")
            self._check_streaming()
            n_dims = X.n_dims
        else:
            # validate_data gives scikit-learn's checks (sparse, complex, n_features_in_,
            # column vectors); finiteness is left to check_matrix, whose message names the
            # bad entry.
            X, y = validate_data(self, X, y, y_numeric=True, ensure_all_finite=False)
            X = check_matrix(X, "X")
            y = check_vector(y, "y", n_samples=X.shape[0])
            n_dims = X.shape[1]
        kernel = kernels.get(self.kernel)
        kernel.check_n_dims(n_dims)
        noise_variance = check_positive_scalar(self.noise_variance, "noise_variance")
        noise_bounds = check_bounds(self.noise_variance_bounds, "noise_variance_bounds")
        check_within_bounds(noise_variance, noise_bounds, "noise_variance")
        n_restarts = check_count(check_positive_int(self.n_restarts, "n_restarts", minimum=0),
                                 "n_restarts", MAX_RESTARTS, "each restart is a whole L-BFGS-B "
                                 "run")
        if streamed:
            data = StreamedData(X, kernel, self.normalize_X, self.normalize_y, progress,
                                dtype=getattr(self, "dtype", None),
                                probe_rows=self._probe_rows())
            self.n_features_in_ = n_dims
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        else:
            data = InMemoryData(X, y, kernel, self.normalize_X, self.normalize_y,
                                sample_noise_variance, progress)

        build_rng, restart_rng = as_generator(self.random_state).spawn(2)
        hyperparameters = Hyperparameters(kernel, noise_variance, noise_bounds)
        state = self._prepare(data.build_inputs, kernel, build_rng,
                              {"y": data.y, "noise_variance": noise_variance,
                               "noise_variance_lower": hyperparameters.noise_variance_lower,
                               "n_samples": data.n_samples})
        # One objective serves learning and conditioning, so a fixed-basis map (GLF) makes
        # a single pass over the data.
        data.stage("statistics pass")
        objective = self._objective(state, hyperparameters, data.X, data.y, data.progress,
                                    data.noise_variance)
        result = None
        if self.optimize:
            hyperparameters, result = learn_hyperparameters(
                Staged(objective, data.stage),
                hyperparameters.restricted_to(self._valid_log_bounds(state, kernel)),
                n_restarts=n_restarts, rng=restart_rng)
            learned = self._learn_state(state, hyperparameters, result, data)
            if learned is not None:
                state, hyperparameters, result = learned
                objective = self._objective(state, hyperparameters, data.X, data.y,
                                            data.progress, data.noise_variance)
        data.stage("conditioning pass")
        posterior = objective.posterior(hyperparameters)
        noise_only = getattr(posterior, "noise_only_log_marginal_likelihood", None)
        if noise_only is None:       # a composite likelihood brings its own comparison
            noise_only = data.noise_only_log_marginal_likelihood()
        data.stage("probe rows pass")
        diagnostics = self._diagnose(posterior, result, data, noise_only)
        self._set_fitted(posterior, optimization_result=result, y_train_mean=data.y_mean,
                         y_train_std=data.y_std, training_data=data.kept(),
                         X_train_mean=data.X_mean,
                         X_train_scale=data.X_scale, noise_only_log_marginal_likelihood=noise_only,
                         fit_warnings=[message for message, _ in diagnostics])
        for message, category in diagnostics:
            warnings.warn(message, category, stacklevel=2)
        return self

    def _check_streaming(self) -> None:
        """Raise when this estimator cannot fit from a data source without its rows."""

    def _learn_state(self, state, hyperparameters, result, data):
        """After learning theta: (state, hyperparameters, result) learned further with the
        prepared state (Nystrom knots, ``learn_knots``), or None (nothing more to learn)."""
        return None

    def _diagnose(self, posterior, result, data, noise_only):
        """[(message, warning class)] of a finite fit; raise NonFiniteResultError otherwise.

        ``data`` is the fit's training data (:mod:`scalegp._training_data`).
        Predictions are checked at ``PROBE_ROWS`` evenly spaced training rows.
        """
        value = float(posterior.log_marginal_likelihood)
        y_mean, y_std = data.y_mean, data.y_std
        probe = data.rows(probe_indices(data.n_samples, self._probe_rows()))
        mean, var = posterior.predict(self._prediction_input(probe), return_var=True)
        problems = [
            f"{what} {bad}" for what, bad in (
                ("log marginal likelihood",
                 _non_finite(value) if self._has_likelihood(posterior) else None),
                ("posterior coefficient", _non_finite(self._coefficients(posterior))),
                ("predictive mean at a training input", _non_finite(mean * y_std + y_mean)),
                ("predictive std at a training input", _non_finite(np.sqrt(var) * y_std)),
            ) if bad is not None]
        if problems:
            largest = data.largest_abs_y
            advice = ("pass normalize_y=True" if not self.normalize_y else
                      "rescale the targets or the inputs (normalize_X=True)")
            raise NonFiniteResultError(
                f"the fit is not usable: non-finite {', '.join(problems)} (targets up to "
                f"|y| = {largest:.3g}; float64 overflows near 1.8e308); {advice}"
            )
        diagnostics = []
        if result is not None and not result.converged:
            cause = ("the line search failed, so the objective or its gradient is inaccurate "
                     "there (rounding near a flat optimum, or an ill-conditioned model)"
                     if result.message.startswith("ABNORMAL") else
                     "the hyperparameters may not maximize the log marginal likelihood")
            diagnostics.append((
                f"the hyperparameter optimizer (L-BFGS-B) stopped without converging after "
                f"{result.n_evaluations} evaluation(s) ({result.message.strip()}): {cause}; "
                "try n_restarts > 0, another start, or standardized inputs",
                ConvergenceWarning))
        if value < noise_only - NOISE_ONLY_MARGIN * max(1.0, abs(noise_only)):
            diagnostics.append((
                f"the fitted log marginal likelihood {value:.6g} is below the noise-only "
                f"model's {noise_only:.6g} (y ~ N(0, s2 I) with s2 = mean(y^2) of the "
                f"{'normalized ' if self.normalize_y else ''}targets): the kernel explains "
                "the data worse than white noise; check the input scales (normalize_X=True), "
                "fixed hyperparameters, the bounds and the starting point",
                FitQualityWarning))
        return diagnostics + self._approximation_diagnostics(posterior, data, probe)

    def _approximation_diagnostics(self, posterior, data, probe) -> list:
        """[(message, warning class)] about the approximation itself (none by default);
        ``probe`` are the training rows predictions were checked at."""
        return []

    def _check_resolution(self, X, diag_correction) -> None:
        """Warn where the model cannot resolve the test rows X (nothing by default)."""

    def _probe_rows(self) -> int:
        """Training rows at which ``fit`` checks that predictions are finite."""
        return PROBE_ROWS

    def _has_likelihood(self, posterior) -> bool:
        """Whether the posterior has a log marginal likelihood to check (a local model of
        test points, or a lazy one, has none: NaN)."""
        return True

    def _valid_log_bounds(self, state, kernel):
        """The log box the prepared state approximates the kernel on (None: all of it)."""
        return None

    def _set_fitted(self, posterior, *, optimization_result, y_train_mean, y_train_std,
                    training_data=None, X_train_mean=None, X_train_scale=None,
                    noise_only_log_marginal_likelihood=None, fit_warnings=()):
        """Set the fitted attributes (used by ``fit`` and by :func:`scalegp.load`).

        ``n_features_in_`` must be set; X_train_mean / X_train_scale default to 0 / 1
        (inputs not standardized).
        """
        n_dims = self.n_features_in_
        self.X_train_mean_ = (np.zeros(n_dims) if X_train_mean is None
                              else np.asarray(X_train_mean, dtype=float))
        self.X_train_scale_ = (np.ones(n_dims) if X_train_scale is None
                               else np.asarray(X_train_scale, dtype=float))
        self.noise_only_log_marginal_likelihood_ = noise_only_log_marginal_likelihood
        self.fit_warnings_ = list(fit_warnings)
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
    def predict(self, X, return_std=False, return_cov=False, include_noise=False,
                diag_correction=None):
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
        diag_correction : bool or None, default=None
            :class:`LowRankGPRegressor` only: add the prior variance the low-rank model misses,
            max(k(x, x) - psi(x)^T S psi(x), 0), to the latent variance (docs/nystrom.md,
            section 4). None: True for ``objective="fitc"`` and ``"vfe"`` (the FITC and
            SGPR predictive distributions) and for the Nystrom-type maps (``"nystrom"``,
            ``"random-projection"``) under any objective (the DTC predictive: without it their
            variance collapses to 0 away from the knots); False for the other maps under
            ``"dtc"`` (the subset-of-regressors predictive)
            (:func:`scalegp.noise.default_diag_correction`). The mean does not depend on it.

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
        if return_cov:
            check_prediction_memory(X.shape[0], covariance=True)
        out = self.posterior_.predict(X, return_var=return_std, return_cov=return_cov,
                                      include_noise=include_noise,
                                      **self._prediction_options(diag_correction))
        self._check_resolution(X, diag_correction)
        scale = self.y_train_std_
        mean, spread = (out, None) if not (return_std or return_cov) else out
        rowwise.check_finite_rows(mean, "predictive mean", rowwise.UNEVALUABLE)
        if return_std:
            rowwise.check_finite_rows(spread, "predictive std", rowwise.UNEVALUABLE)
        mean = _check_finite_prediction(mean * scale + self.y_train_mean_, "predictive mean",
                                        scale)
        if spread is None:
            return mean
        if return_std:      # scale the std, not the variance: std^2 overflows beyond 1e154
            return mean, _check_finite_prediction(np.sqrt(spread) * scale, "predictive std",
                                                  scale)
        with np.errstate(over="ignore"):        # an overflow is reported just below
            cov = spread * scale * scale
        return mean, _check_finite_prediction(cov, "predictive covariance", scale)

    def sample_y(self, X, n_samples=1, random_state=0, diag_correction=None):
        """Draw functions from the posterior at X (from the predictive covariance).

        Parameters
        ----------
        X : array-like of shape (n_test, n_dims)
        n_samples : int, default=1
        random_state : None, int, numpy.random.Generator, default=0
        diag_correction : bool or None, default=None
            :class:`LowRankGPRegressor` only, as in :meth:`predict` (None resolved the same
            way): the draws then have the covariance of
            ``predict(X, return_cov=True, diag_correction=True)``.

        Returns
        -------
        y_samples : ndarray of shape (n_test, n_samples)
            Latent function values (no observation noise), as scikit-learn's
            ``GaussianProcessRegressor.sample_y``.
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        rng = as_generator(random_state)
        X = self._validate_test_inputs(X)
        # in weight space unless the posterior draws from the n_test x n_test covariance
        # (the exact GP, a signed rule's eigen system: gp.Posterior.sample)
        system = getattr(self.posterior_, "system", None)
        weights = system is not None and not isinstance(system, EigenSystem)
        check_prediction_memory(X.shape[0], covariance=not weights, n_samples=n_samples,
                                n_components=self.posterior_.feature_map.n_components
                                if weights else 0)
        # Drawn in the normalized target units and mapped back (y = mean + std * f), so the
        # covariance is never squared into target units.
        draws = self.posterior_.sample(X, n_samples, rng,
                                       **self._prediction_options(diag_correction))
        return _check_finite_prediction(draws * self.y_train_std_ + self.y_train_mean_,
                                        "posterior sample", self.y_train_std_)

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
        X, y, sample_noise_variance = self._training_data
        objective = self._objective(self._fitted_state(),
                                    Hyperparameters(self.kernel_, self.noise_variance_), X, y,
                                    None, sample_noise_variance)
        value, gradient = objective(theta)
        return (value, gradient) if eval_gradient else value

    def _prediction_options(self, diag_correction) -> dict:
        """Keyword arguments of ``posterior_.predict`` beyond the common ones."""
        if diag_correction:
            raise ValueError(f"diag_correction applies to low-rank models; "
                             f"{type(self).__name__} has none")
        return {}

    def _validate_test_inputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite=False)
        return self._prediction_input(rowwise.standardized(X, self.X_train_mean_,
                                                           self.X_train_scale_))


class LowRankGPRegressor(_GPRegressor):
    """Gaussian-process regression through a low-rank kernel approximation.

    The kernel is approximated by a feature map, k(x, x') ~ psi(x)^T S psi(x'), with
    m = ``n_components`` features; fitting costs O(n m^2) and predicting O(m^2) per point.

    Parameters
    ----------
    approximation : str, default="rff"
        The feature map, one of :func:`scalegp.features.names`; or ``"exact"`` with
        ``local="neighbors"``: an exact GP per neighbourhood.
    n_components : int or None, default=None
        m, the number of features. None: the map's default, 256 for every map except
        Gauss-Legendre features with ``n_nodes="auto"``, which grow until the likelihood
        and predictions settle, up to a budget derived from the problem
        (:func:`scalegp.glf_selection.auto_budget`: s <= n / sqrt(3), beyond
        which the fit is no cheaper than the exact GP, and 1 GiB of s x s matrices); the
        map's ``selection`` says what was chosen. An int is a hard cap for ``"auto"``.
        ``fit`` refuses, before any work, an m whose engine
        (m x m float64 matrices and chunks of features, :mod:`scalegp._memory`) needs more
        memory than is available (:class:`~scalegp.errors.InsufficientMemoryError`).
    kernel : str or Kernel, default="gaussian"
        A :class:`scalegp.kernels.Kernel` or a name accepted by :func:`scalegp.kernels.get`.
        Nested parameters ``kernel__<name>`` (``set_params``, ``GridSearchCV``) replace it by
        a copy with those constructor arguments changed (kernels are immutable).
        Its hyperparameters are the starting point, and its bounds the box, of learning.
    noise_variance : float, default=1e-2
        Observation noise variance s2 (starting point when ``optimize``).
    noise_variance_bounds : (float, float) or "fixed", default=(1e-6, 1e5)
    optimize : bool, default=True
        Maximize the log marginal likelihood over the hyperparameters (L-BFGS-B).
    n_restarts : int, default=0
        Extra optimizer starts drawn uniformly in the box (within a factor 1e7 of the start
        for a parameter whose box is wider: :mod:`scalegp.optimize`).
    approximation_options : dict, optional
        Extra keyword arguments of the map's ``build``. Options a map lists in its
        ``fit_context`` are filled from ``fit`` unless given here: for ``"glf"`` the
        (normalized) targets ``y`` and the starting ``noise_variance`` (used by
        ``n_nodes="auto"``), ``noise_variance_lower``, the lower end of
        ``noise_variance_bounds`` (the truncation of Proposition 7), and the search of
        ``n_nodes="auto"``, ``node_search``
        (:func:`scalegp.glf_selection.search_node_counts`). For ``"nystrom"``, ``knots``:
        "pivoted_cholesky" (default; chosen at the starting hyperparameters), "random",
        "grid", "kmeans" or an array of shape (m, n_dims) (docs/nystrom.md, section 2).
    normalize_y : bool, default=False
        Fit to (y - mean) / std and map predictions back (standard deviations times std).
        The mean and std are computed on y / 2^e with max|y| < 2^e, so any finite y works.
    normalize_X : bool, default=False
        Standardize each input column, x -> (x - mean) / std (std 0 counts as 1), with the
        mean and std of the training inputs, in ``fit`` and in every later prediction. The
        learned ``kernel_`` (its length scales and bounds) is then in standardized units.
        For a kernel of x + z (``reciprocal_semigroup``, inputs >= 0) only the scale is
        applied (mean 0), which keeps the inputs non-negative.
    signed_rule : {"repair", "keep"}, default="repair"
        For quadrature rules with negative weights (``ssr``, ``sgq``, ``dfs``, ``sfs``), whose
        approximation Psi S Psi^T is indefinite: "repair" conditions on its positive part, the
        nearest positive semidefinite kernel of that rank on the training inputs
        (:mod:`scalegp.positive_part`; a warning says how much negative mass was dropped);
        "keep" conditions on the signed approximation itself and refuses it
        (NotPositiveDefiniteError) where Psi S Psi^T + s2 I is not positive definite. No effect
        on maps without negative weights.
    solver : {"cholesky", "qr"}, default="cholesky"
        How the engine solves its m x m system: the normal equations (every map), or the QR
        variant of the GLF paper's Appendix A.2, which never forms Phi^T Phi (whose condition
        number is Phi's squared): fixed-basis maps (Gauss-Legendre features), homoscedastic
        noise and float64 only (:mod:`scalegp.objectives`).
    objective : {"dtc", "fitc", "vfe"}, default="dtc"
        What learning maximizes and the model conditions on (docs/nystrom.md, section 3):
        "dtc" the likelihood of K = Q + s2 I with Q = Psi S Psi^T (subset of regressors /
        DTC); "fitc" that of Q + diag(max(k(x, x) - q(x, x), 0)) + s2 I, the FITC-style
        (modified predictive process) diagonal, for every map; "vfe" the variational bound
        of Titsias, the DTC likelihood minus tr(K - Q) / (2 s2), conditioned as DTC, for
        maps with ``bounded_by_kernel`` (``"nystrom"``) and homoscedastic noise only
        (ValueError otherwise: for a Fourier map tr(K - Q) can be negative). Global models
        only (local models refuse "fitc" and "vfe").
    learn_knots : int, default=0
        With ``approximation="nystrom"`` and ``objective="vfe"``: after the hyperparameters
        are learned at the knots of the rule, maximize the VFE bound over the hyperparameters
        and the knots together (SGPR's inducing inputs; :mod:`scalegp.knot_learning`,
        docs/nystrom.md, "Learned knots"), with at most this many L-BFGS-B iterations; each
        costs about one evaluation of the bound plus O(n m d). The fitted map's selection
        is then "learned". 0: the knots stay where the rule put them. Smooth kernels only
        (gaussian, matern32, matern52, cauchy).
    dtype : {"float64", "float32"}, default="float64"
        Precision of the features and of the Gram accumulation (fit and predict); the
        m x m algebra is always float64.
    local : {None, "test-points", "clusters", "neighbors"}, default=None
        A local (centred) model around the map (:mod:`scalegp.local`; docs/local-models.md):
        one posterior per centre c, conditioned on x - c with one shared map built on the
        mean-centred inputs, each test point predicted from its centre. "test-points": every
        test point is its own centre (Eq. 6-7; the model keeps the training data, and so does
        its model file; O(N m^2 + m^3) per test point). "clusters": farthest-point centres
        (Algorithm 1) with covering radius ``local_threshold``, each test point routed to the
        nearest. None: the global model (unchanged). Learning (``optimize``) maximizes the
        mean over the cluster centres at ``local_threshold`` of their log marginal
        likelihoods, for both kinds. "neighbors" (beyond the paper; :mod:`scalegp.neighborhoods`,
        docs/local-models.md, "Neighbourhood-local models"): one GP per centre of an adaptive
        cover, trained only on the centre's ``local_neighbors`` nearest training points
        (exact, or any map built once on the shifted neighbourhoods), predictions blended
        over the nearest centres with continuous weights; learning maximizes the composite
        likelihood sum_c log p(y_{N_c}) on ``local_learning_centres`` neighbourhoods, and
        ``log_marginal_likelihood_value_`` is that sum over all of them. Unsigned maps,
        homoscedastic noise and ``solver="cholesky"`` only.
    local_threshold : float, default=2.0
        The clustering threshold theta, in length scales (distances in x / l): every
        training input lies within theta of a centre. Centres are chosen at the starting
        length scale for learning, and again at the final one for the fitted model.
    local_lazy : bool, default=False
        With ``local="clusters"``: fit computes the centres only, and each predict conditions
        (in one pass) the centres its test points need, caching them; the model keeps the
        training data, and its log marginal likelihood is NaN.
    local_neighbors : int, default=300
        With ``local="neighbors"``: k, the training points of each neighbourhood. The cover
        is chosen at the starting length scales; a fitted model keeps one k x k factor (exact)
        or m x m system per centre (``local_memory_bytes_``).
    local_learning_centres : int or None, default=32
        With ``local="neighbors"``: the neighbourhoods, drawn at random, whose composite
        likelihood is maximized (None: all of them; each step then costs every local GP).
    local_reoptimize : bool, default=False
        With ``local="clusters"``: one map per centre, built (``approximation_options``
        applied) on the training inputs routed to it, shifted by it, each from its own
        stream; its model file stores the rows and the streams' seed and rebuilds the maps
        (docs/local-models.md, "Algorithm 1"). Float32 fits are not saved.
    random_state : None, int, numpy.random.Generator, default=None
        Seed of the map's randomness and of the optimizer restarts (independent streams).
    n_jobs : int or None, default=None
        Threads that share the chunks of every pass over the training data (features,
        rank-k updates and gradient shares; :mod:`scalegp.parallel`, docs/engine.md,
        "Threads over chunks"), each with one BLAS thread: None means 1 (BLAS keeps its own
        threads), -1 every core. The result depends on n_jobs only through the order of
        floating-point sums (about 1e-15 relative) and is reproducible for a given n_jobs.
        Memory: two m x m matrices and one chunk of features per thread. Global models
        with solver="cholesky" only (NotImplementedError otherwise); a Dask source brings
        its own parallelism and ignores it.

    Attributes
    ----------
    kernel_ : Kernel
        The kernel with the learned hyperparameters.
    noise_variance_ : float
    log_marginal_likelihood_value_ : float
        At the learned hyperparameters, of the normalized targets if ``normalize_y``.
    posterior_ : scalegp.gp.Posterior
    feature_map_ : scalegp.features.FeatureMap
    approximation_diagnostics_ : dict
        The map's report at the learned hyperparameters (``feature_map_.diagnostics``: for
        ``"nystrom"`` the knot rule, m and ``knot_condition_number`` = cond_2(K_ZZ)), and for
        ``objective="fitc"`` ``fitc_floored_rows``, the training rows whose
        k(x, x) - q(x, x) was negative and floored at 0 (empty for a local model).
    local_model_ : scalegp.local.LocalModel or None
        The local model (also ``posterior_``); None when ``local`` is None.
    n_centres_ : int or None
        The number of centres of a cluster-centred or neighbourhood model (None otherwise).
    local_memory_bytes_ : int or None
        Bytes of the per-centre m x m systems the local model keeps (for test points, those
        of one block); None when ``local`` is None.
    dtype_ : numpy.dtype
        The precision the model was fitted in (its features at prediction too).
    optimization_result_ : scalegp.optimize.OptimizationResult or None
        None when ``optimize=False``.
    y_train_mean_, y_train_std_ : float
        The normalization constants (0 and 1 without ``normalize_y``).
    X_train_mean_, X_train_scale_ : ndarray of shape (n_features_in_,)
        The input standardization (zeros and ones without ``normalize_X``).
    noise_only_log_marginal_likelihood_ : float or None
        log N(y | 0, s2 I) at s2 = mean(y^2) of the (normalized) training targets, the best
        noise-only model (+inf for all-zero targets); None for a loaded model.
    fit_warnings_ : list of str
        The diagnostics ``fit`` warned about (optimizer not converged, worse than the
        noise-only model); empty for a loaded model.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``fit`` received a DataFrame with string column names.
    """

    _parameter_constraints: dict = {
        **_GPRegressor._parameter_constraints,
        "approximation": [str],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "approximation_options": [Mapping, None],
        "dtype": [str, type, np.dtype],
        "signed_rule": [StrOptions({"repair", "keep"})],
        "solver": [StrOptions(set(SOLVERS))],
        "objective": [StrOptions(set(OBJECTIVES))],
        "local": [str, None],
        "local_threshold": [Interval(Real, 0, None, closed="neither")],
        "local_lazy": ["boolean"],
        "local_reoptimize": ["boolean"],
        "local_neighbors": [Interval(Integral, 1, None, closed="left")],
        "local_learning_centres": [Interval(Integral, 1, None, closed="left"), None],
        "learn_knots": [Interval(Integral, 0, None, closed="left")],
        "n_jobs": [Integral, None],
    }

    def __init__(self, approximation="rff", n_components=None, kernel="gaussian",
                 noise_variance=1e-2, noise_variance_bounds=(1e-6, 1e5), optimize=True,
                 n_restarts=0, approximation_options=None, normalize_y=False, normalize_X=False,
                 dtype="float64", signed_rule="repair", solver="cholesky", local=None,
                 local_threshold=2.0, local_lazy=False, local_reoptimize=False,
                 local_neighbors=300, local_learning_centres=32, random_state=None,
                 objective="dtc", learn_knots=0, n_jobs=None):
        self.approximation = approximation
        self.n_components = n_components
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.approximation_options = approximation_options
        self.normalize_y = normalize_y
        self.normalize_X = normalize_X
        self.dtype = dtype
        self.signed_rule = signed_rule
        self.solver = solver
        self.local = local
        self.local_threshold = local_threshold
        self.local_lazy = local_lazy
        self.local_reoptimize = local_reoptimize
        self.local_neighbors = local_neighbors
        self.local_learning_centres = local_learning_centres
        self.random_state = random_state
        self.objective = objective
        self.learn_knots = learn_knots
        self.n_jobs = n_jobs

    def _check_local(self):
        """The local kind (None for a global model), after the local parameters agree."""
        if self.approximation == "exact" and self.local != "neighbors":
            raise ValueError(
                "approximation='exact' (an exact GP per neighbourhood) needs local='neighbors', "
                f"got local={self.local!r}; for one exact GP use scalegp.ExactGPRegressor")
        if self.local is None:
            for name in ("local_lazy", "local_reoptimize"):
                if getattr(self, name):
                    raise ValueError(f"{name}=True needs local='clusters', got local=None")
            return None
        if self.local not in local_models.LOCAL_KINDS:
            raise ValueError(f"local must be one of {sorted(local_models.LOCAL_KINDS)} or None, "
                             f"got {self.local!r}")
        for name in ("local_lazy", "local_reoptimize"):
            if getattr(self, name) and self.local != "clusters":
                raise ValueError(f"{name}=True applies to local='clusters', got "
                                 f"local={self.local!r}")
        if self.solver != "cholesky":
            raise NotImplementedError(f"local models use solver='cholesky', got "
                                      f"solver={self.solver!r}")
        if self.objective != "dtc":
            raise NotImplementedError(f"local models use objective='dtc', got "
                                      f"objective={self.objective!r}")
        return local_models.LOCAL_KINDS[self.local]

    def _check_streaming(self) -> None:
        if self.local is not None:
            raise ValueError(
                f"local={self.local!r} needs the training rows in memory (it routes them to "
                "centres and searches neighbourhoods), so it fits arrays, not a streaming "
                "data source: read the rows into arrays, or use local=None")
        map_class = features.get(self.approximation)
        if not map_class.builds_from_bounding_box:
            streaming = [name for name in features.names()
                         if features.get(name).builds_from_bounding_box]
            raise ValueError(
                f"approximation {self.approximation!r} builds its map from the training rows "
                "themselves, so it fits arrays, not a streaming data source; the maps built "
                f"from the data's bounding box stream: {', '.join(streaming)}")

    def _prepare(self, X, kernel, rng, fit_context):
        self._dtype = check_dtype(self.dtype)
        self._n_jobs = self._check_n_jobs()
        if self._check_local() is not None:
            return self._prepare_local(X, kernel, rng, fit_context)
        # Memory: before the build for the requested m (the least the fit needs), then for the
        # map built (its m, and the positive part of a signed rule) before any pass over X;
        # a threaded pass holds more m x m matrices and chunks (parallel.threaded_pass_buffers).
        extra, chunks = parallel.threaded_pass_buffers(self._n_jobs)
        if self.n_components is not None:       # a derived budget respects its own cap
            check_memory(self.n_components, n_matrices=ENGINE_MATRICES[self.solver] + extra,
                         n_chunks=chunks, itemsize=self._dtype.itemsize,
                         what=f"the fit (solver {self.solver!r}, {self._n_jobs} thread(s))",
                         advice=self._memory_advice())
        if self.learn_knots:
            self._check_learn_knots(X, kernel)
        feature_map = _build_feature_map(self.approximation, X, kernel, self.n_components,
                                         self.approximation_options, rng, fit_context)
        if feature_map.signs is None:
            path = self.solver
        else:
            path = "positive_part" if self.signed_rule == "repair" else "eigen"
        check_memory(feature_map.n_components, n_matrices=ENGINE_MATRICES[path] + extra,
                     n_chunks=chunks, itemsize=self._dtype.itemsize,
                     what=f"the fit ({path!r} path, {self._n_jobs} thread(s))",
                     advice=self._memory_advice())
        return feature_map

    def _memory_advice(self) -> str:
        # each thread of a pass holds its own m x m statistics and chunks
        return ("choose a smaller n_components" if self._n_jobs == 1 else
                "choose a smaller n_components or fewer threads (n_jobs)")

    def _check_n_jobs(self) -> int:
        """The threads of the engine's passes; refused where a pass has no threaded form."""
        n_jobs = parallel.resolve_n_jobs(self.n_jobs)
        if n_jobs > 1:
            unthreaded = [what for what, bad in (
                (f"local={self.local!r}", self.local is not None),
                (f"solver={self.solver!r}", self.solver != "cholesky")) if bad]
            if unthreaded:
                raise NotImplementedError(
                    f"n_jobs={self.n_jobs} (threads over chunks) is implemented for global "
                    f"models with solver='cholesky'; got {', '.join(unthreaded)}: use n_jobs=None")
        return n_jobs

    def _check_learn_knots(self, X, kernel) -> None:
        """Refuse ``learn_knots`` before any work where it does not apply."""
        check_count(self.learn_knots, "learn_knots", MAX_KNOT_ITERATIONS,
                    "each iteration is a likelihood-and-gradient pass")
        problems = [what for what, bad in (
            (f"approximation='nystrom' (got {self.approximation!r})",
             self.approximation != "nystrom"),
            (f"objective='vfe' (got {self.objective!r})", self.objective != "vfe"),
            ("optimize=True", not self.optimize)) if bad]
        if problems:
            raise ValueError(f"learn_knots={self.learn_knots} moves Nystrom knots by the "
                             f"gradient of the VFE bound; it needs {', '.join(problems)}")
        kernel.input_gradient_contraction(X[:1], X[:1], np.zeros((1, 1)))   # smooth kernels

    def _learn_state(self, state, hyperparameters, result, data):
        if not self.learn_knots:
            return None
        feature_map, hyperparameters, joint, _ = knot_learning.learn_knots(
            state, hyperparameters, data.X, data.y, max_iter=int(self.learn_knots),
            dtype=self._dtype, progress=data.progress, n_jobs=self._n_jobs)
        result = replace(
            joint, theta=joint.theta[:hyperparameters.n_params],
            n_evaluations=result.n_evaluations + joint.n_evaluations)
        return feature_map, hyperparameters, result

    def _prepare_local(self, X, kernel, rng, fit_context):
        """The shared map, built on the mean-centred inputs (decision 8), and how to build
        one per centre (``local_reoptimize``); for ``local="neighbors"`` the cover and the
        map of the shifted neighbourhoods (:meth:`_prepare_neighborhoods`)."""
        if self.local == "neighbors":
            return self._prepare_neighborhoods(X, kernel, rng, fit_context)
        if self.n_components is not None:
            check_memory(self.n_components, n_matrices=ENGINE_MATRICES["cholesky"],
                         itemsize=self._dtype.itemsize, what="a local model")
        map_rng, centre_rng = rng.spawn(2)
        feature_map = _build_feature_map(self.approximation, X - X.mean(axis=0), kernel,
                                         self.n_components, self.approximation_options,
                                         map_rng, fit_context)
        self._check_unsigned(feature_map)
        self._local_state = _LocalState(feature_map, self._centre_map_builder(
            X, kernel, fit_context), centre_rng, map_seed=int(centre_rng.integers(2**63 - 1)))
        return self._local_state

    def _centre_map_builder(self, X, kernel, fit_context):
        """``build_map(rows, centre, rng)``: the map of one centre (``local_reoptimize``),
        built like the shared one on X[rows] - centre (and the rows' targets)."""
        def build_map(rows, centre, stream):
            context = dict(fit_context)
            if "y" in context:
                context["y"] = np.asarray(context["y"])[rows]
            return _build_feature_map(self.approximation, X[rows] - centre, kernel,
                                      self.n_components, self.approximation_options, stream,
                                      context)
        return build_map

    def _stored_centre_map_builder(self, X, y):
        """:meth:`_centre_map_builder` of a loaded model's parameters and (standardized)
        training rows: the fit's context, rebuilt (the starting kernel and noise variance)."""
        kernel = kernels.get(self.kernel)
        noise_variance = float(self.noise_variance)
        hyperparameters = Hyperparameters(kernel, noise_variance,
                                          check_bounds(self.noise_variance_bounds,
                                                       "noise_variance_bounds"))
        return self._centre_map_builder(X, kernel, {
            "y": y, "noise_variance": noise_variance,
            "noise_variance_lower": hyperparameters.noise_variance_lower,
            "n_samples": X.shape[0]})

    def _check_unsigned(self, feature_map) -> None:
        if feature_map.signs is not None:
            raise NotImplementedError(
                f"local models need an unsigned map; {self.approximation!r} has negative "
                "quadrature weights here (use another approximation, or local=None)")

    def _prepare_neighborhoods(self, X, kernel, rng, fit_context):
        """The cover of X at the starting length scales (kept while learning), and one map
        for every neighbourhood, built on the neighbourhoods shifted to their centres
        (their stacked rows; None for ``approximation="exact"``)."""
        if not hasattr(kernel, "length_scale"):
            raise ValueError(f"local='neighbors' measures distances in length scales; the "
                             f"kernel {kernel!r} has none")
        map_rng, centre_rng = rng.spawn(2)
        cover = neighborhood_models.cover(X, self.local_neighbors, scale=kernel.length_scale)
        feature_map = None
        if self.approximation != "exact":
            shifted = np.vstack([X[rows] - centre
                                 for rows, centre in zip(cover.members, cover.centres)])
            context = dict(fit_context)
            if "y" in context:
                context["y"] = np.concatenate([np.asarray(context["y"])[rows]
                                               for rows in cover.members])
            feature_map = _build_feature_map(self.approximation, shifted, kernel,
                                             self.n_components, self.approximation_options,
                                             map_rng, context)
            self._check_unsigned(feature_map)
        neighborhood_models.check_memory(cover, feature_map, itemsize=self._dtype.itemsize)
        self._local_state = _LocalState(feature_map, None, centre_rng, cover)
        return self._local_state

    def _valid_log_bounds(self, state, kernel):
        if isinstance(state, _LocalState):
            if state.feature_map is None:
                return None
            return state.feature_map.valid_log_bounds(kernel)
        return state.valid_log_bounds(kernel)

    def _objective(self, feature_map, hyperparameters, X, y, progress=None,
                   sample_noise_variance=None):
        if isinstance(feature_map, _LocalState):
            return self._local_objective(feature_map, hyperparameters, X, y, progress,
                                         sample_noise_variance)
        # the QR objective has no threaded pass (n_jobs > 1 is refused with it in _prepare)
        threads = {"n_jobs": self._n_jobs} if self._n_jobs > 1 else {}
        return low_rank_objective(feature_map, hyperparameters, X, y, solver=self.solver,
                                  objective=self.objective, dtype=self._dtype,
                                  progress=progress,
                                  signed_rule=self.signed_rule,
                                  sample_noise_variance=sample_noise_variance, **threads)

    def _local_objective(self, state, hyperparameters, X, y, progress, sample_noise_variance):
        if sample_noise_variance is not None:
            raise NotImplementedError("local models take homoscedastic noise only; got "
                                      "sample_noise_variance")
        context = local_models.LocalContext(
            state.feature_map, ArraySource(X, y, dtype=self._dtype),
            threshold=float(self.local_threshold), lazy=bool(self.local_lazy),
            reoptimize=bool(self.local_reoptimize), build_map=state.build_map, rng=state.rng,
            map_seed=state.map_seed,
            dtype=self._dtype, progress=progress, neighborhoods=state.neighborhoods,
            learning_centres=self.local_learning_centres)
        return local_models.LOCAL_KINDS[self.local].learning_objective(context, hyperparameters)

    def _set_fitted(self, posterior, *, dtype=None, **kwargs):
        super()._set_fitted(posterior, **kwargs)
        self.feature_map_ = posterior.feature_map
        is_local = isinstance(posterior, local_models.LocalModel)
        self.local_model_ = posterior if is_local else None
        self.n_centres_ = posterior.n_centres if is_local else None
        self.local_memory_bytes_ = posterior.memory_bytes if is_local else None
        self.approximation_diagnostics_ = ({} if is_local else
                                           posterior.feature_map.diagnostics(posterior.kernel))
        training = kwargs.get("training_data")
        if self.objective == "fitc" and not is_local and training is not None:
            X = training[0]         # standardized arrays, or the standardized source streamed
            if not isinstance(X, DataSource):
                X = X.astype(self._dtype, copy=False)
            self.approximation_diagnostics_["fitc_floored_rows"] = floored_rows(
                posterior.at_map, X)
        if dtype is not None:                   # a loaded model; fit set it in _prepare
            self._dtype = check_dtype(dtype)
        self.dtype_ = self._dtype

    def _fitted_state(self):
        if self.local_model_ is not None:
            state = getattr(self, "_local_state", None)
            return state if state is not None else _LocalState(self.feature_map_, None, None)
        return self.feature_map_

    def _probe_rows(self) -> int:
        # test-point centring conditions one GP per probe row, each a pass over the data
        return TEST_POINT_PROBE_ROWS if self.local == "test-points" else PROBE_ROWS

    def _has_likelihood(self, posterior) -> bool:
        return not (isinstance(posterior, local_models.LocalModel)
                    and math.isnan(posterior.log_marginal_likelihood))

    def _approximation_diagnostics(self, posterior, data, probe) -> list:
        # the training box, for the prediction check (resolution.exact_variance_floor)
        self._training_box = (data.build_inputs.min(axis=0), data.build_inputs.max(axis=0))
        if isinstance(posterior, local_models.LocalModel):
            return []
        diagnostics = resolution.warn_training_kernel_error(posterior, probe, data.n_samples)
        part = posterior.system.positive_part
        if part is None or part.negative_mass == 0:    # nothing dropped on the training inputs
            return diagnostics
        return [(f"{posterior.feature_map.name} is a signed quadrature rule and its approximation "
                 f"Psi S Psi^T is indefinite; the model uses its positive part "
                 f"(signed_rule='repair'): {part.describe()}", NumericalWarning)] + diagnostics

    def _check_resolution(self, X, diag_correction) -> None:
        """Warn at test rows where this model is more confident than the exact GP can be
        (:func:`scalegp.resolution.warn_overconfident`; a local model of a feature map too);
        needs the training box of a fit (a loaded model has none: not checked)."""
        box = getattr(self, "_training_box", None)
        if box is None or getattr(self.posterior_, "feature_map", None) is None:
            return
        options = self._prediction_options(diag_correction)
        resolution.warn_overconfident(
            self.posterior_, X, box, self.posterior_.n_samples,
            lambda rows: self.posterior_.predict(rows, return_var=True, **options)[1])

    def _coefficients(self, posterior):
        if isinstance(posterior, local_models.LocalModel):
            return posterior.coefficients
        return posterior.system.beta

    def _prediction_input(self, X):
        if self._dtype == np.float64:
            return X
        with np.errstate(over="ignore"):
            X = X.astype(self._dtype)
        return rowwise.check_finite_rows(
            X, "input in float32", "it exceeds float32's range (3.4e38), which a float32 "
                                   "model cannot evaluate; fit with dtype='float64'")

    def _prediction_options(self, diag_correction) -> dict:
        if self.local_model_ is not None:
            return super()._prediction_options(diag_correction)
        if diag_correction is None:
            diag_correction = default_diag_correction(self.feature_map_, self.objective)
        return {"diag_correction": bool(diag_correction)}


@dataclass(frozen=True)
class _LocalState:
    """What a local fit prepares: the shared map, ``build_map(rows, centre, rng)`` for one
    map per centre, a neighbourhood model's stream and cover, and the seed of the
    per-centre maps' streams."""

    feature_map: object
    build_map: object
    rng: object
    neighborhoods: object = None
    map_seed: int | None = None


class ExactGPRegressor(_GPRegressor):
    """Exact (dense) Gaussian-process regression: the reference, for n up to a few thousand.

    Builds n x n matrices (O(n^3) time, O(n^2) memory); refuses n above
    :data:`scalegp.exact.MAX_EXACT_SAMPLES`. Parameters and attributes are those of
    :class:`LowRankGPRegressor` without ``approximation``, ``n_components``,
    ``approximation_options``, ``dtype``, ``solver`` and ``feature_map_``; ``posterior_`` is a
    :class:`scalegp.exact.ExactPosterior`. ``random_state`` seeds the optimizer restarts.
    """

    def __init__(self, kernel="gaussian", noise_variance=1e-2,
                 noise_variance_bounds=(1e-6, 1e5), optimize=True, n_restarts=0,
                 normalize_y=False, normalize_X=False, random_state=None):
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
