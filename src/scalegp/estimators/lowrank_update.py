"""Online updates of a fitted low-rank model (a mixin of
:class:`scalegp.estimators.lowrank.LowRankGPRegressor`, split off by job): ``partial_fit``.

A global low-rank model depends on its rows only through sums over them
(:class:`scalegp.engine.statistics.RowSums`: G = Psi^T W^ Psi, b = Psi^T W^ y, y^T W^ y, n, and
for the VFE bound sum_i k(x_i, x_i)), so rows are added by adding their sums and conditioning
again (:func:`scalegp.engine.likelihood.posterior_of_sums`): O(n_new m^2 + m^3), without the
old rows. At fixed hyperparameters and map this is the fit on all rows up to the order of
floating-point sums. For a fixed-basis map (Gauss-Legendre features, homoscedastic noise)
the sums hold Phi^T Phi and Phi^T y, the statistics at every theta, so the hyperparameters can
be learned again from them at O(m^3) per optimizer step (``relearn=True``).

What cannot be updated so is refused with the reason (ValueError), never approximated.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import features, kernels, rowwise
from .._validation import (as_generator, check_bounds, check_matrix, check_noise_variances,
                           check_vector)
from ..engine.hyperparameters import Hyperparameters
from ..engine.likelihood import MarginalLikelihood, posterior_of_sums
from ..errors import NonFiniteResultError
from ..inference.optimize import learn_hyperparameters


def _updatable(estimator) -> bool:
    """Whether the configuration can take rows by their sums (scikit-learn's
    ``available_if``: ``partial_fit`` exists only then); AttributeError naming the reason
    otherwise, which becomes the cause of the AttributeError ``partial_fit`` raises."""
    reason = estimator._configuration_refusal()
    if reason is not None:
        raise AttributeError(f"partial_fit adds rows by their sums to a model that depends on "
                             f"its rows only through them; this one cannot: {reason}")
    return True


class LowRankUpdate:
    """``partial_fit``: rows added to a fitted global low-rank model by their sums."""

    @available_if(_updatable)
    def partial_fit(self, X, y, sample_noise_variance=None, relearn=False):
        """Add rows (X, y) to the fitted model without revisiting the rows it was fitted on.

        The rows' sums (G = Psi^T W^ Psi, b = Psi^T W^ y, y^T W^ y, n; engine.RowSums) are
        added to the model's and the posterior is conditioned again at the fitted
        hyperparameters, on the fitted feature map: the result equals the fit on all rows
        with the same map and hyperparameters (``optimize=False``) up to rounding
        (about 1e-13 relative), at O(n_new m^2 + m^3) and no pass over the old rows.

        The first call on an unfitted estimator is ``fit(X, y)`` (scikit-learn's convention;
        it learns the hyperparameters when ``optimize``).

        Kept from the first fit: the feature map (frequencies, knots, nodes and their box),
        and the standardization (``X_train_mean_``, ``X_train_scale_``, ``y_train_mean_``,
        ``y_train_std_``): new rows are standardized with the first fit's constants, so the
        model equals a fit on all rows standardized that way (not a fit that standardizes
        all rows anew, whose constants and hence kernel differ).

        Not available (scikit-learn's ``available_if``: no attribute ``partial_fit``, the
        AttributeError caused by one that names the reason), because the fit on all rows
        would not be the sum of the parts: local models (centres, neighbourhoods and their covers come
        from the rows); maps chosen from the rows (Nystrom knots picked by a rule or
        learned, random-projection and Maclaurin maps; Nystrom with an array of knots is
        accepted); Gauss-Legendre features with ``n_nodes="auto"`` (searched on the
        targets); ``solver="qr"`` (its R-factor would need its own update; not
        implemented). Refused (ValueError, with the reason): fixed-basis rows outside the
        box the nodes were chosen for; a model read from a file (it stores the
        factorization, not the sums).

        Parameters
        ----------
        X : array-like of shape (n_new, n_features_in_)
        y : array-like of shape (n_new,)
        sample_noise_variance : array-like of shape (n_new,), optional
            Known noise variances of the new rows (as in ``fit``), in the units of y squared.
            Their weights s2 / (s2 + v_i) are taken at the fitted s2.
        relearn : bool, default=False
            Learn the hyperparameters again from the sums of all rows (fixed-basis maps
            with homoscedastic noise and ``objective="dtc"`` only; ValueError otherwise),
            from the same start, box and restarts as ``fit``, at O(m^3) per optimizer step:
            equal to ``fit`` on all rows (standardized with the first fit's constants) up
            to rounding. ``optimization_result_`` is then the new run's.

        Returns
        -------
        self

        Notes
        -----
        After ``partial_fit`` the model keeps no training rows: ``log_marginal_likelihood(theta)``
        refuses (``log_marginal_likelihood_value_`` is of all rows), and
        ``noise_only_log_marginal_likelihood_`` is of all rows (from their sum of squares).
        """
        try:
            check_is_fitted(self)
        except NotFittedError:      # the first call fits
            return self.fit(X, y, sample_noise_variance=sample_noise_variance)
        X, y = validate_data(self, X, y, reset=False, y_numeric=True, ensure_all_finite=False)
        self._check_updatable(relearn)
        X = check_matrix(X, "X")
        y = check_vector(y, "y", n_samples=X.shape[0])
        X = rowwise.standardized(X, self.X_train_mean_, self.X_train_scale_)
        y = (y - self.y_train_mean_) / self.y_train_std_
        noise = (None if sample_noise_variance is None else
                 check_noise_variances(sample_noise_variance, X.shape[0])
                 / self.y_train_std_**2)
        self._check_update_box(X)
        at = Hyperparameters(self.kernel_, self.noise_variance_)
        objective = self._objective(self.feature_map_, at, X.astype(self._dtype, copy=False), y,
                                    None, noise)
        sums = self.posterior_.row_sums + objective.row_sums(at)
        result = self.optimization_result_
        if relearn:
            at, result = self._relearn(sums)
        posterior = posterior_of_sums(self.feature_map_, at.kernel, at.noise_variance, sums,
                                      signed_rule=self._spec.signed_rule,
                                      variational=self._spec.objective == "vfe")
        self._check_updated(posterior)
        noise_only = _noise_only(self.noise_only_log_marginal_likelihood_,
                                 self.posterior_.n_samples, y)
        box = self._training_box
        self._set_fitted(posterior, optimization_result=result,
                         y_train_mean=self.y_train_mean_, y_train_std=self.y_train_std_,
                         training_data=None, X_train_mean=self.X_train_mean_,
                         X_train_scale=self.X_train_scale_,
                         noise_only_log_marginal_likelihood=noise_only)
        self._training_box = (np.minimum(box[0], X.min(axis=0)), np.maximum(box[1], X.max(axis=0)))
        return self

    def _configuration_refusal(self) -> str | None:
        """Why this configuration cannot take rows by their sums (None: it can)."""
        spec = self._spec
        reason = None
        if spec.local is not None:
            reason = (f"local={spec.local!r} conditions one model per centre on the rows "
                      "routed to it, with centres (and neighbourhoods) chosen from the rows")
        elif spec.solver == "qr":
            reason = ("solver='qr' keeps the R-factor of [Phi | y], whose update is not "
                      "implemented; use solver='cholesky'")
        elif spec.learn_knots:
            reason = "learn_knots moved the Nystrom knots by the gradient on the rows"
        elif not features.get(spec.approximation).builds_from_bounding_box and not (
                spec.approximation == "nystrom"
                and not isinstance(spec.options.get("knots"), str)):
            reason = (f"approximation {spec.approximation!r} chose its map from the rows "
                      "themselves (landmarks or knots), which a fit on all rows would choose "
                      "again (Nystrom with knots given as an array can be updated)")
        elif str(spec.options.get("n_nodes")) == "auto":
            reason = "n_nodes='auto' searched the node counts on the targets"
        return reason

    def _check_updatable(self, relearn: bool) -> None:
        """ValueError naming why this fitted model cannot take rows by their sums."""
        if getattr(self.posterior_, "row_sums", None) is None:
            raise ValueError(
                "partial_fit adds rows by their sums to a model that depends on its rows only "
                "through them; this one cannot: the model was read from a model file, which "
                "stores the factorization, not the sums of the rows; fit it again")
        if relearn and self.posterior_.row_sums.basis is None:
            raise ValueError(
                "partial_fit(relearn=True) learns the hyperparameters from the basis "
                "statistics Phi^T Phi, Phi^T y of a fixed-basis map (Gauss-Legendre features) "
                "with homoscedastic noise and objective='dtc'; this model has none "
                f"(approximation {self._spec.approximation!r}, objective {self._spec.objective!r}"
                f"{', rows with known noise variances' if self._is_fixed_basis() else ''})")

    def _is_fixed_basis(self) -> bool:
        return isinstance(self.feature_map_, features.FixedBasisFeatureMap)

    def _check_update_box(self, X) -> None:
        """A fixed basis resolves the box its nodes were chosen for; rows outside it would
        be conditioned on a basis a fit on all rows would not choose."""
        if not self._is_fixed_basis():
            return
        lower, upper = self._training_box
        outside = np.any((X < lower) | (X > upper), axis=1)
        if np.any(outside):
            row = int(np.flatnonzero(outside)[0])
            raise ValueError(
                f"partial_fit: {int(outside.sum())} new row(s) lie outside the input box the "
                f"{self.feature_map_.name!r} nodes were chosen for (first: row {row}; box "
                f"[{lower.tolist()}, {upper.tolist()}] in standardized units); a fit on all "
                "rows would choose another basis: fit again on all rows")

    def _relearn(self, sums):
        """(hyperparameters, result) learned on the basis statistics of all rows, from the
        start, box and restarts of ``fit``."""
        kernel = kernels.get(self.kernel)
        start = Hyperparameters(kernel, float(self.noise_variance),
                                check_bounds(self.noise_variance_bounds, "noise_variance_bounds"))
        with warnings.catch_warnings():     # the fit warned already where the box narrows
            warnings.simplefilter("ignore", UserWarning)
            box = start.restricted_to(self._valid_log_bounds(self.feature_map_, kernel))
        objective = MarginalLikelihood(self.feature_map_, box, dtype=self._dtype,
                                       basis_statistics=sums.basis)
        restart_rng = as_generator(self.random_state).spawn(2)[1]
        return learn_hyperparameters(objective, box, n_restarts=int(self.n_restarts),
                                     rng=restart_rng)

    def _check_updated(self, posterior) -> None:
        bad = [what for what, values in (
            ("log marginal likelihood", posterior.log_marginal_likelihood),
            ("posterior coefficient", posterior.system.beta)) if not np.all(np.isfinite(values))]
        if bad:
            raise NonFiniteResultError(f"partial_fit: non-finite {', '.join(bad)} after "
                                       "adding the rows; the model is unchanged")


def _noise_only(previous, n_previous: int, y) -> float | None:
    """max_s2 log N(y | 0, s2 I) of all rows, from the previous value (of n_previous rows,
    which gives their mean square) and the new normalized targets y."""
    if previous is None:
        return None
    previous_square = (0.0 if math.isinf(previous) else
                       n_previous * math.exp(-2.0 * previous / n_previous
                                             - math.log(2 * math.pi) - 1.0))
    n = n_previous + y.size
    mean_square = (previous_square + float(y @ y)) / n
    if mean_square == 0:
        return math.inf
    return -0.5 * n * (math.log(2 * math.pi) + math.log(mean_square) + 1.0)
