"""LowRankGPRegressor: GP regression through a low-rank kernel approximation, global or local.

A pure adapter over the engine (:mod:`scalegp.engine`): the fit plumbing is the base class's
(:class:`scalegp.estimators.base._GPRegressor`); this class builds the feature map, the
objective (the engine's, its QR variant, or a local model's: :mod:`scalegp.local`) and the
posterior, and checks what the approximation can resolve.
"""

from __future__ import annotations

import math
from numbers import Integral

import numpy as np

from .. import features, local as local_models, rowwise
from .._validation import check_dtype
from ..data.base import DataSource
from ..engine.noise import default_diag_correction, floored_rows
from ..engine.objectives import low_rank_objective
from ..errors import NumericalWarning
from ..local import resolution
from . import configuration
from .base import PROBE_ROWS, TEST_POINT_PROBE_ROWS, _GPRegressor
from .lowrank_fit import LowRankFit, _LocalState
from .lowrank_update import LowRankUpdate


__all__ = ["LowRankGPRegressor"]


class LowRankGPRegressor(LowRankFit, LowRankUpdate, _GPRegressor):
    """Gaussian-process regression through a low-rank kernel approximation.

    The kernel is approximated by a feature map, k(x, x') ~ psi(x)^T S psi(x'), with
    m = ``n_components`` features; fitting costs O(n m^2) and predicting O(m^2) per point.

    Parameters
    ----------
    approximation : str, Features, Nystrom or Exact, default="nystrom"
        The feature map and its options (:mod:`scalegp.estimators.configuration`). The
        default, Nystrom features at pivoted-Cholesky knots, adapts to the data in any
        dimension (data-independent maps such as ``"rff"`` need many more features for the
        same kernel error, benchmarks/results/features.md); :class:`scalegp.GPRegressor`
        chooses the model for you. A name
        of :func:`scalegp.features.names` (its defaults), ``Features(name, n_components,
        objective, solver, signed_rule, options)``, ``Nystrom(n_components, knots,
        objective, learn_knots)``; or ``"exact"`` / ``Exact()`` with ``local="neighbors"``:
        an exact GP per neighbourhood. Nested names work in ``set_params`` and
        ``GridSearchCV`` (``approximation__n_components``). What the options do:

        - ``n_components``: m, the number of features. None: the map's default, 256 for
          every map except Gauss-Legendre features with ``n_nodes="auto"``, which grow
          until the likelihood and predictions settle, up to a budget derived from the
          problem (:func:`scalegp.inference.glf_selection.auto_budget`: s <= n / sqrt(3),
          beyond which the fit is no cheaper than the exact GP, and 1 GiB of s x s
          matrices); the map's ``selection`` says what was chosen. An int is a hard cap for
          ``"auto"``. ``fit`` refuses, before any work, an m whose engine (m x m float64
          matrices and chunks of features, :mod:`scalegp._memory`) needs more memory than
          is available (:class:`~scalegp.errors.InsufficientMemoryError`).
        - ``options``: extra keyword arguments of the map's ``build``. Options a map lists
          in its ``fit_context`` are filled from ``fit`` unless given: for ``"glf"`` the
          (normalized) targets ``y`` and the starting ``noise_variance`` (used by
          ``n_nodes="auto"``), ``noise_variance_lower``, the lower end of
          ``noise_variance_bounds`` (the truncation of Proposition 7), and the search of
          ``n_nodes="auto"``, ``node_search``
          (:func:`scalegp.inference.glf_selection.search_node_counts`).
        - ``knots`` (Nystrom): "pivoted_cholesky" (default; chosen at the starting
          hyperparameters), "random", "grid", "kmeans" or an array of shape (m, n_dims)
          (docs/nystrom.md, section 2).
        - ``signed_rule`` (quadrature rules with negative weights: ``ssr``, ``sgq``, ``dfs``,
          ``sfs``, ``gq``), whose approximation Psi S Psi^T is indefinite: "repair"
          conditions on its positive part, the nearest positive semidefinite kernel of that
          rank on the training inputs (:mod:`scalegp.engine.positive_part`; a warning says
          how much negative mass was dropped); "keep" conditions on the signed
          approximation itself and refuses it (NotPositiveDefiniteError) where
          Psi S Psi^T + s2 I is not positive definite. Refused for other maps.
        - ``solver``: "cholesky" solves the normal equations (every map); "qr" is the
          variant of the GLF paper's Appendix A.2, which never forms Phi^T Phi (whose
          condition number is Phi's squared): fixed-basis maps (Gauss-Legendre features),
          homoscedastic noise and float64 only (:mod:`scalegp.engine.objectives`).
        - ``objective``: what learning maximizes and the model conditions on
          (docs/nystrom.md, section 3): "dtc" the likelihood of K = Q + s2 I with
          Q = Psi S Psi^T (subset of regressors / DTC); "fitc" that of
          Q + diag(max(k(x, x) - q(x, x), 0)) + s2 I, the FITC-style (modified predictive
          process) diagonal, for every map; "vfe" (Nystrom only) the variational bound of
          Titsias, the DTC likelihood minus tr(K - Q) / (2 s2) (with known noise variances
          sum_i (k_ii - q_ii) / (2 (s2 + v_i))), conditioned as DTC. Global models only
          (local models refuse "fitc" and "vfe").
        - ``learn_knots`` (Nystrom, ``objective="vfe"``): after the hyperparameters are
          learned at the knots of the rule, maximize the VFE bound over the hyperparameters
          and the knots together (SGPR's inducing inputs;
          :mod:`scalegp.inference.knot_learning`, docs/nystrom.md, "Learned knots"), with
          at most this many L-BFGS-B iterations; each costs about one evaluation of the
          bound plus O(n m d). The fitted map's selection is then "learned". Smooth kernels
          only (gaussian, matern32, matern52, cauchy).
    kernel : str or Kernel, default="gaussian"
        A :class:`scalegp.kernels.Kernel` or a name accepted by :func:`scalegp.kernels.get`.
        Nested parameters ``kernel__<name>`` (``set_params``, ``GridSearchCV``) replace it by
        a copy with those constructor arguments changed (kernels are immutable).
        Its hyperparameters are the starting point, and its bounds the box, of learning.
    noise_variance : float, default=0.1
        Observation noise variance s2 (starting point when ``optimize``).
    noise_variance_bounds : (float, float) or "fixed", default=(1e-6, 1e5)
    optimize : bool, default=True
        Maximize the log marginal likelihood over the hyperparameters (L-BFGS-B).
    n_restarts : int, default=0
        Extra optimizer starts drawn uniformly in the box (within a factor 1e7 of the start
        for a parameter whose box is wider: :mod:`scalegp.inference.optimize`).
    normalize_y : bool, default=True
        Fit to (y - mean) / std and map predictions back (standard deviations times std).
        The mean and std are computed on y / 2^e with max|y| < 2^e, so any finite y works.
    normalize_X : bool, default=True
        Standardize each input column, x -> (x - mean) / std (std 0 counts as 1), with the
        mean and std of the training inputs, in ``fit`` and in every later prediction. The
        learned ``kernel_`` (its length scales and bounds) is then in standardized units.
        For a kernel of x + z (``reciprocal_semigroup``, inputs >= 0) only the scale is
        applied (mean 0), which keeps the inputs non-negative.
    dtype : {"float64", "float32"}, default="float64"
        Precision of the features and of the Gram accumulation (fit and predict); the
        m x m algebra is always float64.
    local : None, str, TestPoints, Clusters or Neighbors, default=None
        A local (centred) model around the map (:mod:`scalegp.local.centered`;
        docs/local-models.md): one posterior per centre c, conditioned on x - c with one
        shared map built on the mean-centred inputs, each test point predicted from its
        centre. A name ("test-points", "clusters", "neighbors") is the kind with its
        defaults; nested names work (``local__n_neighbors``).

        - ``TestPoints(threshold)``: every test point is its own centre (Eq. 6-7; the model
          keeps the training data, and so does its model file; O(N m^2 + m^3) per test
          point).
        - ``Clusters(threshold, lazy, reoptimize)``: farthest-point centres (Algorithm 1)
          with covering radius ``threshold`` (in length scales: distances in x / l; chosen
          at the starting length scale for learning and again at the final one), each test
          point routed to the nearest. ``lazy``: fit computes the centres only, and each
          predict conditions (in one pass) the centres its test points need, caching them;
          the model keeps the training data, and its log marginal likelihood is NaN.
          ``reoptimize``: one map per centre, built on the training inputs routed to it,
          shifted by it, each from its own stream; its model file stores the rows and the
          streams' seed and rebuilds the maps (docs/local-models.md, "Algorithm 1"); float32
          fits are not saved. For both centred kinds, learning (``optimize``) maximizes the
          mean over the cluster centres at ``threshold`` of their log marginal likelihoods.
        - ``Neighbors(n_neighbors, learning_centers)`` (beyond the paper;
          :mod:`scalegp.local.neighborhoods`, docs/local-models.md, "Neighbourhood-local
          models"): one GP per centre of an adaptive cover, trained only on the centre's
          ``n_neighbors`` nearest training points (exact, or any map built once on the
          shifted neighbourhoods), predictions blended over the nearest centres with
          continuous weights; learning maximizes the composite likelihood
          sum_c log p(y_{N_c}) on ``learning_centers`` neighbourhoods drawn at random (None:
          all), and ``log_marginal_likelihood_value_`` is that sum over all of them. The
          cover is chosen at the starting length scales; a fitted model keeps one k x k
          factor (exact) or m x m system per centre (``local_memory_bytes_``).

        Local models need unsigned maps, homoscedastic noise, the "cholesky" solver and
        the "dtc" objective.
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
    posterior_ : scalegp.engine.likelihood.Posterior
    feature_map_ : scalegp.features.FeatureMap
    approximation_diagnostics_ : dict
        The map's report at the learned hyperparameters (``feature_map_.diagnostics``: for
        ``"nystrom"`` the knot rule, m and ``knot_condition_number`` = cond_2(K_ZZ)), and for
        ``objective="fitc"`` ``fitc_floored_rows``, the training rows whose
        k(x, x) - q(x, x) was negative and floored at 0 (empty for a local model).
    local_model_ : scalegp.local.centered.LocalModel or None
        The local model (also ``posterior_``); None when ``local`` is None.
    n_centres_ : int or None
        The number of centres of a cluster-centred or neighbourhood model (None otherwise).
    local_memory_bytes_ : int or None
        Bytes of the per-centre m x m systems the local model keeps (for test points, those
        of one block); None when ``local`` is None.
    dtype_ : numpy.dtype
        The precision the model was fitted in (its features at prediction too).
    optimization_result_ : scalegp.inference.optimize.OptimizationResult or None
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
        "approximation": [str, configuration.Features, configuration.Nystrom,
                          configuration.Exact],
        "dtype": [str, type, np.dtype],
        "local": [str, configuration.TestPoints, configuration.Clusters,
                  configuration.Neighbors, None],
        "n_jobs": [Integral, None],
    }

    def __init__(self, approximation="nystrom", kernel="gaussian", noise_variance=0.1,
                 noise_variance_bounds=(1e-6, 1e5), optimize=True, n_restarts=0,
                 normalize_y=True, normalize_X=True, dtype="float64", local=None,
                 random_state=None, n_jobs=None):
        self.approximation = approximation
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.normalize_y = normalize_y
        self.normalize_X = normalize_X
        self.dtype = dtype
        self.local = local
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_streaming(self) -> None:
        if self._spec.local is not None:
            raise ValueError(
                f"local={self._spec.local!r} needs the training rows in memory (it routes them to "
                "centres and searches neighbourhoods), so it fits arrays, not a streaming "
                "data source: read the rows into arrays, or use local=None")
        map_class = features.get(self._spec.approximation)
        if not map_class.builds_from_bounding_box:
            streaming = [name for name in features.names()
                         if features.get(name).builds_from_bounding_box]
            raise ValueError(
                f"approximation {self._spec.approximation!r} builds its map from the training rows "
                "themselves, so it fits arrays, not a streaming data source; the maps built "
                f"from the data's bounding box stream: {', '.join(streaming)}")

    def _widens_box(self, state) -> bool:
        # a fixed-basis rule (Gauss-Legendre features) is built on the box and resolves only
        # it, and a local model keeps the box it was set up with; the other maps draw or
        # pick their state independently of the box (frequencies scaled by theta, knots)
        return not isinstance(state, (_LocalState, features.FixedBasisFeatureMap))

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
        return low_rank_objective(feature_map, hyperparameters, X, y, solver=self._spec.solver,
                                  objective=self._spec.objective, dtype=self._dtype,
                                  progress=progress,
                                  signed_rule=self._spec.signed_rule,
                                  sample_noise_variance=sample_noise_variance, **threads)

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
        if self._spec.objective == "fitc" and not is_local and training is not None:
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
        return TEST_POINT_PROBE_ROWS if self._spec.local == "test-points" else PROBE_ROWS

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
        (:func:`scalegp.local.resolution.warn_overconfident`; a local model of a feature map
        too); needs the training box of a fit (a loaded model has none: not checked)."""
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
            diag_correction = default_diag_correction(self.feature_map_, self._spec.objective)
        return {"diag_correction": bool(diag_correction)}
