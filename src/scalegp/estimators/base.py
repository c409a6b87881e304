"""The base of the scikit-learn GP regressors: validation, fit, predict, sampling, diagnostics.

The regressors are pure adapters: ``fit`` validates, optionally normalizes the targets, learns
the hyperparameters with :func:`scalegp.inference.optimize.learn_hyperparameters` on the log
marginal likelihood (:class:`scalegp.engine.likelihood.MarginalLikelihood`,
:class:`scalegp.engine.exact.ExactMarginalLikelihood`) and conditions
(:meth:`scalegp.engine.likelihood.Posterior.fit`, :meth:`scalegp.engine.exact.ExactPosterior.fit`);
``predict`` maps the posterior back to the original target scale. The hyperparameter box is
the kernel's own bounds plus ``noise_variance_bounds``.

After conditioning, ``fit`` checks its result (``_diagnose``): a NaN or infinite log marginal
likelihood, posterior coefficient or training-input prediction raises
:class:`~scalegp.errors.NonFiniteResultError`; an optimizer that stopped without converging
(any L-BFGS-B end but a convergence test, including "ABNORMAL" line-search ends, as in
scikit-learn) warns with :class:`~scalegp.errors.ConvergenceWarning`; a log marginal
likelihood below the noise-only model's warns with :class:`~scalegp.errors.FitQualityWarning`,
and so does a learned noise variance below ``REPEATED_NOISE_SHARE`` of the targets' variance
where training rows repeat others exactly (inputs and target, :func:`_repeated_records_warnings`).
The warnings' texts are kept in ``fit_warnings_``.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import kernels, rowwise
from .._limits import MAX_RESTARTS, check_count
from .._memory import check_prediction_memory
from .._validation import (as_generator, check_bounds, check_matrix, check_positive_int,
                           check_positive_scalar, check_vector, check_within_bounds)
from ..data.base import DataSource
from ..data.distributed import DaskSource, is_dask_collection
from ..engine.hyperparameters import Hyperparameters
from ..engine.systems import EigenSystem
from ..errors import ConvergenceWarning, FitQualityWarning, NonFiniteResultError
from ..inference.optimize import DEADLINE_MESSAGE, learn_hyperparameters, learn_widening
from . import auto_budget
from .training_data import (InMemoryData, Staged, StreamedData, probe_indices,
                            repeated_records)
from .transformers import KERNEL_CONSTRAINT, RANDOM_STATE_CONSTRAINT, KernelParamsMixin


#: Training rows (evenly spaced) at which ``fit`` checks that predictions are finite.
PROBE_ROWS = 64


#: The same for a test-point-centred local model, whose every prediction is a pass.
TEST_POINT_PROBE_ROWS = 8


#: ``fit`` warns when its log marginal likelihood is below the noise-only model's by more than
#: this relative margin (rounding of two O(n) sums; a model on the noise-only limit is not
#: "worse").
NOISE_ONLY_MARGIN = 1e-9
#: A learned noise variance below this share of the targets' variance, with training rows
#: that repeat others exactly, is reported (:func:`_repeated_records_warnings`).
REPEATED_NOISE_SHARE = 1e-3


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


def fits_data_sources(estimator) -> bool:
    """Whether ``estimator.fit`` streams a data source (not exact, local or a map built from
    the rows themselves, which need the rows in memory): the command line asks before it
    chooses to stream a file."""
    try:
        estimator._check_streaming()
    except ValueError:
        return False
    return True


def _learn(make_objective, objective, box, stage, widens, n_restarts, rng, ftol=None):
    """(hyperparameters, result, objective) learned from ``box``: in a default box that
    widens where the optimum sits on it
    (:func:`scalegp.inference.optimize.learn_widening`) when ``widens`` (the objective holds
    on any box: the exact GP, maps whose state does not depend on the box), else in ``box``.
    ``make_objective(hyperparameters)`` builds the objective of a wider box (it decodes theta
    with its own kernel, which clips theta into its bounds); ``objective`` is the one of
    ``box``, returned unless the box widened. ``ftol``: L-BFGS-B's relative reduction
    tolerance (:func:`scalegp.inference.optimize.maximize_likelihood`; None: scipy's)."""
    if not widens:
        hyperparameters, result = learn_hyperparameters(Staged(objective, stage), box,
                                                        n_restarts=n_restarts, rng=rng,
                                                        ftol=ftol)
        return hyperparameters, result, objective

    def staged(wider):
        return Staged(objective if wider is box else make_objective(wider), stage)

    hyperparameters, result = learn_widening(staged, box, n_restarts=n_restarts, rng=rng,
                                             ftol=ftol)
    if result.widened:
        objective = make_objective(hyperparameters)
    return hyperparameters, result, objective


def _not_converged(result) -> tuple[str, type]:
    """The diagnostic of learning that stopped without converging (one stopped at its
    deadline is recorded as a cut of ``auto``'s time budget, :mod:`.auto_budget`)."""
    if result.message == DEADLINE_MESSAGE:
        auto_budget.cut("a learning stopped at its deadline before it converged")
        return (f"the hyperparameter optimizer (L-BFGS-B) stopped without converging after "
                f"{result.n_evaluations} evaluation(s): its learning reached the time "
                "budget, and the hyperparameters are the best point found, not a maximum "
                "of the log marginal likelihood; a larger time_budget lets it converge",
                ConvergenceWarning)
    cause = ("the line search failed, so the objective or its gradient is inaccurate "
             "there (rounding near a flat optimum, or an ill-conditioned model)"
             if result.message.startswith("ABNORMAL") else
             "the hyperparameters may not maximize the log marginal likelihood")
    return (f"the hyperparameter optimizer (L-BFGS-B) stopped without converging after "
            f"{result.n_evaluations} evaluation(s) ({result.message.strip()}): {cause}; "
            "try n_restarts > 0, another start, or standardized inputs", ConvergenceWarning)


class _GPRegressor(KernelParamsMixin, RegressorMixin, BaseEstimator):
    """fit / predict / sample_y shared by the two regressors.

    A subclass supplies ``_prepare`` (theta-independent state, e.g. the feature map),
    ``_objective`` (theta -> (log p(y), gradient), with ``posterior(kernel, noise_variance)``
    to condition) and ``_prediction_input`` (the dtype predictions are computed in).
    ``fit`` first validates the parameters against ``_parameter_constraints`` (scikit-learn's
    validator: e.g. ``optimize="no"`` is refused, not taken as True); ``set_params`` accepts
    nested ``kernel__<name>`` keys (:class:`scalegp.estimators.transformers.KernelParamsMixin`).
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
        X : array-like of shape (n_samples, n_dims), or a :class:`scalegp.data.base.DataSource`
            A data source (a file of :mod:`scalegp.data.sources`, an
            :class:`~scalegp.data.base.IterableSource`, ...) is streamed: ``fit`` never holds
            its rows, only chunks (O(chunk_size * m + m^2) memory;
            docs/data-sources.md, "Fitting from a source"), and the source carries the
            targets and noise variances, so ``y`` and ``sample_noise_variance`` stay None.
            The standardization comes from the source's one-pass summary. Equal to the fit
            on the same rows as arrays (the same floats, chunk for chunk). A ``dask.array`` X
            (with a ``dask.array`` y and optionally ``sample_noise_variance``) becomes a
            :class:`scalegp.data.distributed.DaskSource`: every pass runs on the Dask workers
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
            X = DaskSource(X, y, sample_noise_variance, dtype=getattr(self, "dtype", None))
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
        fit_context = {"y": data.y, "noise_variance": noise_variance,
                       "noise_variance_lower": hyperparameters.noise_variance_lower,
                       "n_samples": data.n_samples}
        if self.optimize and hyperparameters.default_sides()[:-2].any():
            kernel = self._default_length_scale_box(data.build_inputs, kernel, fit_context)
            hyperparameters = Hyperparameters(kernel, noise_variance, noise_bounds)
        state = self._prepare(data.build_inputs, kernel, build_rng, fit_context)
        # One objective serves learning and conditioning, so a fixed-basis map (GLF) makes
        # a single pass over the data.
        data.stage("statistics pass")
        objective = self._objective(state, hyperparameters, data.X, data.y, data.progress,
                                    data.sample_noise_variance)
        result = None
        if self.optimize:
            box = hyperparameters.restricted_to(self._valid_log_bounds(state, kernel))
            hyperparameters, result, objective = self._learn_hyperparameters(
                state, data, objective, box, n_restarts, restart_rng)
            learned = self._learn_state(state, hyperparameters, result, data)
            if learned is not None:
                state, hyperparameters, result = learned
                objective = self._objective(state, hyperparameters, data.X, data.y,
                                            data.progress, data.sample_noise_variance)
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

    def _default_length_scale_box(self, X, kernel, fit_context):
        """The kernel to learn in when its length scales have the library's default box:
        ``kernel`` itself, unless the approximation resolves only part of that box (Gauss-
        Legendre features), where it learns in the box it resolves."""
        return kernel

    def _check_streaming(self) -> None:
        """Raise when this estimator cannot fit from a data source without its rows."""

    def _learn_hyperparameters(self, state, data, objective, box, n_restarts, rng):
        """(hyperparameters, result, objective) learned from the start and box ``box`` by
        L-BFGS-B (:func:`_learn`: in a default box that widens when ``_widens_box``); an
        estimator whose learning also changes its prepared state (the Vecchia structure)
        or uses another optimizer overrides it."""
        return _learn(lambda wider: self._objective(state, wider, data.X, data.y,
                                                    data.progress, data.sample_noise_variance),
                      objective, box, data.stage, self._widens_box(state), n_restarts, rng)

    def _widens_box(self, state) -> bool:
        """Whether the default box may widen (:func:`_learn`): the state holds on any box."""
        return True

    def _learn_state(self, state, hyperparameters, result, data):
        """After learning theta: (state, hyperparameters, result) learned further with the
        prepared state (Nystrom knots, ``learn_knots``), or None (nothing more to learn)."""
        return None

    def _diagnose(self, posterior, result, data, noise_only):
        """[(message, warning class)] of a finite fit; raise NonFiniteResultError otherwise.

        ``data`` is the fit's training data (:mod:`scalegp.estimators.training_data`).
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
        diagnostics = [] if result is None or result.converged else [_not_converged(result)]
        if value < noise_only - NOISE_ONLY_MARGIN * max(1.0, abs(noise_only)):
            diagnostics.append((
                f"the fitted log marginal likelihood {value:.6g} is below the noise-only "
                f"model's {noise_only:.6g} (y ~ N(0, s2 I) with s2 = mean(y^2) of the "
                f"{'normalized ' if self.normalize_y else ''}targets): the kernel explains "
                "the data worse than white noise; check the input scales (normalize_X=True), "
                "fixed hyperparameters, the bounds and the starting point",
                FitQualityWarning))
        return (diagnostics + _repeated_records_warnings(posterior, data)
                + self._approximation_diagnostics(posterior, data, probe))

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
            :class:`~scalegp.estimators.lowrank.LowRankGPRegressor` only: add the prior variance the low-rank model misses,
            max(k(x, x) - psi(x)^T S psi(x), 0), to the latent variance (docs/nystrom.md,
            section 4). None: True for ``objective="fitc"`` and ``"vfe"`` (the FITC and
            SGPR predictive distributions) and for the Nystrom-type maps (``"nystrom"``,
            ``"random-projection"``) under any objective (the DTC predictive: without it their
            variance collapses to 0 away from the knots); False for the other maps under
            ``"dtc"`` (the subset-of-regressors predictive)
            (:func:`scalegp.engine.noise.default_diag_correction`). The mean does not depend on it.

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
            :class:`~scalegp.estimators.lowrank.LowRankGPRegressor` only, as in :meth:`predict` (None resolved the same
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
        # (the exact GP, a signed rule's eigen system: engine.Posterior.sample)
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
                "do not store (nor does a model that partial_fit updated); fit the estimator "
                "again (without theta it returns log_marginal_likelihood_value_)"
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


def _repeated_records_warnings(posterior, data) -> list:
    """[(message, FitQualityWarning)] where the learned noise variance is below
    ``REPEATED_NOISE_SHARE`` of the targets' variance and some training rows (in memory)
    repeat others exactly; else [].

    Under independent Gaussian noise two observations at one input are equal with
    probability zero; repeated identical targets are explained best by no noise, so the
    likelihood drives the noise variance down and the model interpolates. On the UCI wine
    data (1,440 training rows, 206 of them repeats) the exact GP learned a noise variance of
    4.8e-6 of the targets' variance, and 0.16 without the repeats. With known per-row noise
    variances v_i a row's noise is s2 + v_i, and the smallest of them is compared.
    """
    if data.y is None or data.n_samples < 2:
        return []
    spread = float(np.var(data.y))
    noise = float(posterior.noise_variance)
    known = getattr(data, "sample_noise_variance", None)
    if known is not None and np.size(known):
        noise += float(np.min(known))
    if not spread > 0 or noise >= REPEATED_NOISE_SHARE * spread:
        return []
    count = repeated_records(data.X, data.y)
    if not count:
        return []
    return [(f"{count} of {data.n_samples} training rows repeat an earlier row exactly (inputs "
            f"and target), and the learned noise variance is {noise / spread:.2g} of the "
            "targets' variance: repeated identical targets tell the likelihood there is no "
            "noise, so the model interpolates them. If they are copies of one record, drop "
            "them before fitting; if they are real replicate measurements (a discrete target), "
            "set a lower bound on the noise (noise_variance_bounds); GPRegressor() splits the "
            "noise into a micro-scale and a measurement part there (docs/choosing.md, "
            "'Repeated inputs')", FitQualityWarning)]
