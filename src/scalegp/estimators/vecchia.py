"""VecchiaGPRegressor: the Vecchia approximation (:mod:`scalegp.vecchia`, docs/vecchia.md) as a
scikit-learn estimator, on the shared base of the regressors.

The Vecchia log likelihood of the (standardized) targets in an ordering of the points,
each conditioned on its m nearest predecessors h(i) in the scaled inputs u = x / l,

    log q(y) = sum_i log N(y_i; k_ih K_hh^{-1} y_h, K_ii - k_ih K_hh^{-1} k_hi)
               (K = k(X, X) + s2 I),

costs O(N m^3) per evaluation and O(N m) memory, and equals the exact GP's at m = N - 1.
It plugs into the base's fit (:class:`scalegp.estimators.base._GPRegressor`) as the others
do: ``_prepare`` builds the Vecchia structure (ordering, neighbour sets and blocks) at the
starting length scales, ``_objective`` is :class:`scalegp.vecchia.VecchiaLikelihood` at that
structure, and its ``posterior`` is a :class:`scalegp.vecchia.posterior.VecchiaPosterior`
(training rows and targets; each prediction conditions on the test point's m nearest
training points). What the base's learning does not do is the one override,
``_learn_hyperparameters``: scaled Vecchia (Katzfuss, Guinness & Lawrence 2022) rebuilds the
structure at the learned length scales when their shape moved by more than
:data:`scalegp.vecchia.learning.REBUILD_FACTOR` and learns again from there, at most
:data:`~scalegp.vecchia.learning.MAX_STRUCTURES` structures per fit, each stage by L-BFGS-B
in the base's widening box (``optimizer="lbfgs"``) or by Fisher scoring
(``optimizer="fisher"``, :func:`scalegp.vecchia.fisher.fisher_scoring`, as GpGp). With a
``learning_schedule`` each stage learns on a nested random sample of the blocks
(:func:`scalegp.vecchia.learning.sample_blocks`), from the previous stage's optimum, as
:class:`scalegp.vecchia.VecchiaGP` does; the fit conditions on the whole likelihood's last
structure.
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import as_generator
from ..parallel import resolve_n_jobs
from ..vecchia import ORDERINGS, VecchiaLikelihood, build_structure, vecchia_log_likelihood
from ..vecchia.fisher import fisher_scoring
from ..vecchia.learning import (DEFAULT_M, MAX_STRUCTURES, OPTIMIZERS, REBUILD_FACTOR,
                                check_schedule, check_tolerance, sample_blocks, stage_ftol,
                                stage_record, stage_sizes)
from ..vecchia.posterior import VecchiaPosterior
from ..vecchia.prediction import choose_prediction_neighbors
from ..vecchia.structure import VecchiaStructure
from .base import _GPRegressor, _learn
from .training_data import Staged


class _Structures:
    """The Vecchia structure of a fit, rebuilt as learning moves the length scales, with a
    random permutation of its blocks (the nested samples of a learning schedule) and the
    record of the learning stages."""

    def __init__(self, X, m: int, ordering: str, rng, length_scale, n_jobs: int):
        self.X, self.m, self.ordering, self.rng, self.n_jobs = X, m, ordering, rng, n_jobs
        self.n_built = 0
        self.history: list = []
        self.rebuild(length_scale)

    def rebuild(self, length_scale) -> None:
        self.structure = build_structure(self.X, length_scale, self.m, ordering=self.ordering,
                                         rng=self.rng, n_jobs=self.n_jobs)
        self.permutation = None         # drawn when a stage first samples this structure
        self.n_built += 1

    def sample(self, n_points) -> VecchiaStructure:
        """The blocks of a learning stage of ``n_points`` members (None: all)."""
        if n_points is None:
            return self.structure
        if self.permutation is None:
            self.permutation = self.rng.permutation(self.structure.blocks.n_blocks)
        return sample_blocks(self.structure, n_points, self.permutation)


class _VecchiaObjective(VecchiaLikelihood):
    """The Vecchia likelihood at a fixed structure, with the posterior it conditions on."""

    def __init__(self, hyperparameters, X, y, structure, *, n_jobs: int, m_predict: int,
                 sample_noise_variance=None):
        super().__init__(hyperparameters, X, y, structure, n_jobs=n_jobs,
                         sample_noise_variance=sample_noise_variance)
        self.m_predict = m_predict

    def posterior(self, theta) -> VecchiaPosterior:
        kernel, noise_variance = self.hyperparameters.values(theta)
        value = vecchia_log_likelihood(kernel, noise_variance, self.X, self.y, self.structure,
                                       n_jobs=self.n_jobs,
                                       sample_noise_variance=self.sample_noise_variance)
        return VecchiaPosterior(kernel, float(noise_variance), self.X, self.y, self.m_predict,
                                value, self.n_jobs, self.sample_noise_variance)


class VecchiaGPRegressor(_GPRegressor):
    """Gaussian-process regression with the Vecchia approximation: each training point
    conditioned on its ``n_neighbors`` nearest predecessors in a maximin ordering of the
    scaled inputs (docs/vecchia.md), for N up to millions of rows in low dimension.

    Parameters
    ----------
    kernel, noise_variance, noise_variance_bounds, optimize, n_restarts, normalize_y, \
normalize_X, random_state
        As :class:`~scalegp.estimators.exact.ExactGPRegressor` (the same defaults);
        ``random_state`` also draws the ``"random"`` ordering. ``n_restarts`` applies to
        ``optimizer="lbfgs"``.
    n_neighbors : int, default=30
        m, the conditioning-set size of the likelihood (``scalegp.vecchia.DEFAULT_M``, GpGp's
        default); at most N - 1 are used (the exact likelihood). Cost O(N m^3) per
        likelihood evaluation, memory O(N m).
    n_neighbors_predict : int, None or "auto", default=None
        Training neighbours each test point conditions on (None: ``n_neighbors``); at most N
        are used (at N the predictions are the exact GP's). The joint predictive
        (``return_cov``, ``sample_y``) conditions each test point on this many among the
        training points and the earlier test points (exact at N + n_test - 1). "auto":
        measured after learning, the smallest of 1, 2, 4 and 8 times ``n_neighbors`` (and
        further doublings up to 256 while each gains more than 1 %) whose RMSE on a few
        hundred held-out training rows and whose latent predictive RMSE there are both
        within 1 % of the best
        (:func:`scalegp.vecchia.prediction.choose_prediction_neighbors`): smooth data need
        more neighbours to predict than to learn (kin40k: 0.173 with 30, 0.093 with 250),
        and noisy data too, where the targets' noise hides it from the held-out RMSE.
    ordering : {"maximin", "grid-maximin", "random", "coordinate"}, default="maximin"
        The ordering of the training points, in the scaled inputs
        (:data:`scalegp.vecchia.ORDERINGS`).
    optimizer : {"lbfgs", "fisher"}, default="lbfgs"
        L-BFGS-B in the widening default box, or Fisher scoring (as GpGp).
    learning_schedule : sequence of (int or None), or None, default=None
        Learning stages on nested random samples of the likelihood's blocks: each entry is
        the number of training points (conditionals) a stage's likelihood sums at least
        (None, or N or more: all of them), each stage starting from the previous one's
        optimum (docs/vecchia.md, "Learning: scaled Vecchia (`learning.py`, `fisher.py`)").
        None: one stage on the whole likelihood. For large N, ``(2000, 8000, None)`` takes
        most steps at a few per cent of a full evaluation's cost and ends with a few full
        ones (the UCI and 9.3-million-point fits of docs/vecchia.md).
    learning_tolerance : float or None, default=None
        Stop a stage when an iteration raises its log likelihood by less than about this
        many times the log likelihood per point (L-BFGS-B's ``ftol`` = tolerance / n for n
        sampled points; with ``optimizer="fisher"``: the step's predicted gain in nats).
        None: scipy's ftol (2.2e-9) or GpGp's 1e-4 nats. 0.01 stops where the learned
        hyperparameters no longer change the test scores (docs/vecchia.md).
    n_jobs : int or None, default=None
        Threads over the likelihood's blocks and the test points (-1: every core); the
        likelihood is the same bit for bit for any count.

    Attributes
    ----------
    kernel_, noise_variance_, log_marginal_likelihood_value_, optimization_result_
        As the other regressors; ``log_marginal_likelihood_value_`` is the Vecchia log
        likelihood at the fitted hyperparameters and the last structure.
    posterior_ : scalegp.vecchia.posterior.VecchiaPosterior
    structure_ : scalegp.vecchia.VecchiaStructure or None
        The structure of the last learning stage (None after :func:`scalegp.load`).
    n_structures_ : int or None
        Structures built during the fit (1, or more when scaled Vecchia rebuilt it; None
        after :func:`scalegp.load`).
    prediction_neighbors_ : int
        The training neighbours each prediction conditions on (``n_neighbors_predict``, or
        the count "auto" chose).
    prediction_rmse_, prediction_latent_rmse_ : dict or None
        With ``n_neighbors_predict="auto"``: {count: RMSE on the held-out training rows, in
        standardized units} of the counts tried, and {count: sqrt(mean latent predictive
        variance) there} (the model's expected error against the noise-free function); None
        otherwise and after :func:`scalegp.load`.
    learning_history_ : list of dict or None
        One entry per learning stage run (a rebuilt structure runs its stage again): its
        sampled ``n_points``, ``log_likelihood`` (of those points' conditionals),
        ``n_evaluations``, ``converged``, the ``length_scale`` learned and the
        ``shape_factor`` it moved from the structure's
        (:func:`scalegp.vecchia.learning.shape_change`); empty without learning, None after
        :func:`scalegp.load`.

    Notes
    -----
    The model holds its training rows (a model file stores them), so it fits arrays, not a
    streaming data source or Dask arrays (the Vecchia likelihood over Dask row blocks is
    :mod:`scalegp.vecchia.distributed`); known per-row noise variances
    (``fit(X, y, sample_noise_variance=v)``) are added to the learned noise variance on
    every block's and every prediction's diagonal, as the exact GP adds them, and the model
    file stores them; the kernel is stationary (not ``reciprocal_semigroup``).
    ``predict(return_cov=True)`` and ``sample_y`` use the joint
    Vecchia predictive of the test points in their given order
    (:mod:`scalegp.vecchia.posterior`), at most ``scalegp.vecchia.prediction.MAX_JOINT``
    of them.
    """

    _parameter_constraints: dict = {
        **_GPRegressor._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "n_neighbors_predict": [Interval(Integral, 1, None, closed="left"), None,
                                StrOptions({"auto"})],
        "ordering": [StrOptions(set(ORDERINGS))],
        "optimizer": [StrOptions(set(OPTIMIZERS))],
        "learning_schedule": [list, tuple, None],
        "learning_tolerance": [Interval(Real, 0, None, closed="neither"), None],
        "n_jobs": [Integral, None],
    }

    def __init__(self, kernel="gaussian", noise_variance=0.1,
                 noise_variance_bounds=(1e-6, 1e5), optimize=True, n_restarts=0,
                 normalize_y=True, normalize_X=True, n_neighbors=DEFAULT_M,
                 n_neighbors_predict=None, ordering="maximin", optimizer="lbfgs",
                 learning_schedule=None, learning_tolerance=None, random_state=None,
                 n_jobs=None):
        self.kernel = kernel
        self.noise_variance = noise_variance
        self.noise_variance_bounds = noise_variance_bounds
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.normalize_y = normalize_y
        self.normalize_X = normalize_X
        self.n_neighbors = n_neighbors
        self.n_neighbors_predict = n_neighbors_predict
        self.ordering = ordering
        self.optimizer = optimizer
        self.learning_schedule = learning_schedule
        self.learning_tolerance = learning_tolerance
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_streaming(self) -> None:
        raise ValueError(
            "VecchiaGPRegressor holds its training rows (each prediction conditions on the "
            "nearest of them), so it fits arrays, not a streaming data source or Dask arrays; "
            "read the rows into arrays, or stream a LowRankGPRegressor (the Vecchia "
            "likelihood over Dask row blocks is scalegp.vecchia.distributed)")

    # ----------------------------------------------------------------- fitting
    def _prepare(self, X, kernel, rng, fit_context):
        if not kernel.shift_invariant:
            raise ValueError(f"VecchiaGPRegressor needs a stationary kernel, a function of "
                             f"x - z (its orderings and neighbour sets are distances in x / l); "
                             f"got {type(kernel).__name__}")
        n = fit_context["n_samples"]
        if n < 2:
            raise ValueError(f"VecchiaGPRegressor needs at least 2 samples, got n_samples = {n}")
        self._schedule = (None,) if self.learning_schedule is None else \
            check_schedule(self.learning_schedule, "learning_schedule")
        self._tolerance = check_tolerance(self.learning_tolerance, "learning_tolerance")
        self._n_threads = resolve_n_jobs(self.n_jobs)
        self._structures = _Structures(X, min(self.n_neighbors, n - 1), self.ordering, rng,
                                       kernel.length_scale, self._n_threads)
        return self._structures

    def _objective(self, state, hyperparameters, X, y, _progress=None,
                   sample_noise_variance=None):
        return self._objective_at(state.structure, hyperparameters, X, y,
                                  sample_noise_variance)

    def _objective_at(self, structure, hyperparameters, X, y,
                      sample_noise_variance) -> _VecchiaObjective:
        m_predict = self.n_neighbors if self.n_neighbors_predict in (None, "auto") \
            else self.n_neighbors_predict
        return _VecchiaObjective(hyperparameters, X, y, structure, n_jobs=self._n_threads,
                                 m_predict=m_predict,
                                 sample_noise_variance=sample_noise_variance)

    def _learn_hyperparameters(self, state, data, objective, box, n_restarts, rng):
        """Scaled Vecchia with a learning schedule (module docstring): for each stage, learn
        on its sample of the blocks from the previous optimum; where the learned length
        scales' shape moved, rebuild the structure and run the stage again. Returns the
        objective of the whole likelihood at the last structure (what the fit conditions
        on and reports)."""
        sizes = stage_sizes(self._schedule, data.n_samples)
        stage = 0
        while stage < len(sizes):
            sample = state.sample(sizes[stage])
            noise = data.sample_noise_variance
            objective = self._objective_at(sample, box, data.X, data.y, noise)
            if self.optimizer == "fisher":
                hyperparameters, result = fisher_scoring(Staged(objective, data.stage), box,
                                                         tolerance=self._tolerance)
            else:
                hyperparameters, result, objective = _learn(
                    lambda wider, sample=sample: self._objective_at(sample, wider, data.X,
                                                                    data.y, noise),
                    objective, box, data.stage, True, n_restarts, rng,
                    ftol=stage_ftol(self._tolerance, sample))
            record = stage_record(stage, sample, state.structure, hyperparameters, result)
            state.history.append(record)
            box = hyperparameters     # the next stage starts at the optimum, in its box
            if record["shape_factor"] > REBUILD_FACTOR and state.n_built < MAX_STRUCTURES:
                state.rebuild(hyperparameters.kernel.length_scale)
                continue                                   # the stage again, rebuilt
            stage += 1
        if sample is not state.structure:
            objective = self._objective_at(state.structure, hyperparameters, data.X, data.y,
                                           data.sample_noise_variance)
        return hyperparameters, result, objective

    def _set_fitted(self, posterior, **fitted):
        # the structure of a fit (a loaded model has none: it predicts without one)
        structures = getattr(self, "_structures", None)
        if fitted.get("training_data") is None:
            structures = None
        self.prediction_rmse_ = self.prediction_latent_rmse_ = None
        if self.n_neighbors_predict == "auto" and structures is not None:
            (count, self.prediction_rmse_,
             self.prediction_latent_rmse_) = choose_prediction_neighbors(
                posterior.kernel, posterior.noise_variance, posterior.X_train,
                posterior.y_train, posterior.n_neighbors, as_generator(self.random_state),
                n_jobs=self._n_threads, sample_noise_variance=posterior.sample_noise_variance)
            posterior = replace(posterior, n_neighbors=count)
        # threads are the estimator's parameter (a model file does not store them)
        super()._set_fitted(posterior.with_threads(resolve_n_jobs(self.n_jobs)), **fitted)
        self.structure_ = None if structures is None else structures.structure
        self.n_structures_ = None if structures is None else structures.n_built
        self.learning_history_ = None if structures is None else structures.history
        self._structures = None

    @property
    def prediction_neighbors_(self) -> int:
        return self.posterior_.n_neighbors

    def _fitted_state(self):
        return _Fitted(self.structure_)

    def _coefficients(self, posterior):
        # no coefficient vector: each prediction solves with its own neighbours (the
        # probe predictions and the likelihood are checked)
        return np.empty(0)

    def _prediction_input(self, X):
        return X


class _Fitted:
    """The state ``log_marginal_likelihood(theta)`` evaluates at: the fitted structure."""

    def __init__(self, structure):
        self.structure = structure
