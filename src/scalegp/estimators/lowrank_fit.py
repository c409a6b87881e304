"""The preparation of a low-rank fit (a mixin of
:class:`scalegp.estimators.lowrank.LowRankGPRegressor`, split off by job): the feature map, the checks of the options that one
configuration reads (local models, learned knots, threads, memory), and the local models'
maps, neighbourhoods and objectives.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import kernels, local as local_models, parallel
from .._limits import MAX_KNOT_ITERATIONS, check_count
from .._memory import ENGINE_MATRICES, check_memory
from .._validation import check_bounds, check_dtype
from ..data.base import ArraySource
from ..engine.hyperparameters import Hyperparameters
from ..features import gauss_legendre
from ..inference import knot_learning
from ..inference.optimize import continued_history
from ..local import cover as local_cover, neighborhoods as neighborhood_models
from . import configuration
from .transformers import _build_feature_map


class LowRankFit:
    """What ``fit`` prepares before the engine runs: the map, local state and checks."""

    @property
    def _spec(self) -> configuration.Resolved:
        """The approximation and local model as one validated record
        (:func:`scalegp.estimators.configuration.resolve`)."""
        return configuration.resolve(self.approximation, self.local)

    def _check_local(self):
        """The local kind (None for a global model)."""
        kind = self._spec.local
        return None if kind is None else local_models.LOCAL_KINDS[kind]

    def _default_length_scale_box(self, X, kernel, fit_context):
        """For a global Gauss-Legendre map with node counts from a budget or given: the box
        its rule resolves, the fixed point of
        :func:`scalegp.features.gauss_legendre.resolved_box` started from the default box.

        The default box (:data:`scalegp.kernels.base.DEFAULT_LENGTH_SCALE_BOUNDS`, in the
        standardized inputs) is wider than any rule of a few hundred columns resolves: the
        map built for it would warn at both ends and the learning narrow it anyway (with a
        warning). The fixed point is the box that the map built for it resolves whole, so
        the default fit learns there without a warning; the box is that of the fitted
        ``kernel_``. Bounds the user set are kept, and warned about where the rule does not
        resolve them."""
        options = self._spec.options or {}
        if (self._check_local() is not None or self._spec.approximation != "glf"
                or isinstance(options.get("n_nodes"), str)):
            return kernel
        kernel, _, _ = gauss_legendre.resolved_box(
            lambda k: _build_feature_map("glf", X, k, self._spec.n_components, options,
                                         np.random.default_rng(0), fit_context), kernel)
        return kernel

    def _prepare(self, X, kernel, rng, fit_context):
        self._dtype = check_dtype(self.dtype)
        self._n_jobs = self._check_n_jobs()
        if self._check_local() is not None:
            return self._prepare_local(X, kernel, rng, fit_context)
        # Memory: before the build for the requested m (the least the fit needs), then for the
        # map built (its m, and the positive part of a signed rule) before any pass over X;
        # a threaded pass holds more m x m matrices and chunks (parallel.threaded_pass_buffers).
        extra, chunks = parallel.threaded_pass_buffers(self._n_jobs)
        if self._spec.n_components is not None:       # a derived budget respects its own cap
            check_memory(self._spec.n_components, n_matrices=ENGINE_MATRICES[self._spec.solver] + extra,
                         n_chunks=chunks, itemsize=self._dtype.itemsize,
                         what=f"the fit (solver {self._spec.solver!r}, {self._n_jobs} thread(s))",
                         advice=self._memory_advice())
        if self._spec.learn_knots:
            self._check_learn_knots(X, kernel)
        feature_map = _build_feature_map(self._spec.approximation, X, kernel, self._spec.n_components,
                                         self._spec.options, rng, fit_context)
        if feature_map.signs is None:
            path = self._spec.solver
        else:
            path = "positive_part" if self._spec.signed_rule == "repair" else "eigen"
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
                (f"local={self._spec.local!r}", self._spec.local is not None),
                (f"solver={self._spec.solver!r}", self._spec.solver != "cholesky")) if bad]
            if unthreaded:
                raise NotImplementedError(
                    f"n_jobs={self.n_jobs} (threads over chunks) is implemented for global "
                    f"models with solver='cholesky'; got {', '.join(unthreaded)}: use n_jobs=None")
        return n_jobs

    def _check_learn_knots(self, X, kernel) -> None:
        """Refuse ``learn_knots`` before any work where it does not apply."""
        check_count(self._spec.learn_knots, "learn_knots", MAX_KNOT_ITERATIONS,
                    "each iteration is a likelihood-and-gradient pass")
        problems = [what for what, bad in (
            (f"approximation='nystrom' (got {self._spec.approximation!r})",
             self._spec.approximation != "nystrom"),
            (f"objective='vfe' (got {self._spec.objective!r})", self._spec.objective != "vfe"),
            ("optimize=True", not self.optimize)) if bad]
        if problems:
            raise ValueError(f"learn_knots={self._spec.learn_knots} moves Nystrom knots by the "
                             f"gradient of the VFE bound; it needs {', '.join(problems)}")
        kernel.input_gradient_contraction(X[:1], X[:1], np.zeros((1, 1)))   # smooth kernels

    def _learn_state(self, state, hyperparameters, result, data):
        if not self._spec.learn_knots:
            return None
        feature_map, hyperparameters, joint, _ = knot_learning.learn_knots(
            state, hyperparameters, data.X, data.y, max_iter=int(self._spec.learn_knots),
            dtype=self._dtype, progress=data.progress, n_jobs=self._n_jobs,
            sample_noise_variance=data.sample_noise_variance)
        result = replace(
            joint, theta=joint.theta[:hyperparameters.n_params],
            n_evaluations=result.n_evaluations + joint.n_evaluations,
            history=continued_history(result.history,
                                      joint.history[0] if joint.history else ()))
        return feature_map, hyperparameters, result

    def _prepare_local(self, X, kernel, rng, fit_context):
        """The shared map, built on the mean-centred inputs (decision 8), and how to build
        one per centre (``local_reoptimize``); for ``local="neighbors"`` the cover and the
        map of the shifted neighbourhoods (:meth:`_prepare_neighborhoods`)."""
        if self._spec.local == "neighbors":
            return self._prepare_neighborhoods(X, kernel, rng, fit_context)
        if self._spec.n_components is not None:
            check_memory(self._spec.n_components, n_matrices=ENGINE_MATRICES["cholesky"],
                         itemsize=self._dtype.itemsize, what="a local model")
        map_rng, centre_rng = rng.spawn(2)
        feature_map = _build_feature_map(self._spec.approximation, X - X.mean(axis=0), kernel,
                                         self._spec.n_components, self._spec.options,
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
            return _build_feature_map(self._spec.approximation, X[rows] - centre, kernel,
                                      self._spec.n_components, self._spec.options, stream,
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
                f"local models need an unsigned map; {self._spec.approximation!r} has negative "
                "quadrature weights here (use another approximation, or local=None)")

    def _prepare_neighborhoods(self, X, kernel, rng, fit_context):
        """The cover of X at the starting length scales (kept while learning), and one map
        for every neighbourhood, built on the neighbourhoods shifted to their centres
        (their stacked rows; None for ``approximation="exact"``)."""
        if not hasattr(kernel, "length_scale"):
            raise ValueError(f"local='neighbors' measures distances in length scales; the "
                             f"kernel {kernel!r} has none")
        map_rng, centre_rng = rng.spawn(2)
        cover = local_cover.cover(X, self._spec.local_neighbors, scale=kernel.length_scale)
        feature_map = None
        if self._spec.approximation != "exact":
            shifted = np.vstack([X[rows] - centre
                                 for rows, centre in zip(cover.members, cover.centres)])
            context = dict(fit_context)
            if "y" in context:
                context["y"] = np.concatenate([np.asarray(context["y"])[rows]
                                               for rows in cover.members])
            feature_map = _build_feature_map(self._spec.approximation, shifted, kernel,
                                             self._spec.n_components, self._spec.options,
                                             map_rng, context)
            self._check_unsigned(feature_map)
        neighborhood_models.check_memory(cover, feature_map, itemsize=self._dtype.itemsize)
        self._local_state = _LocalState(feature_map, None, centre_rng, cover)
        return self._local_state

    def _local_objective(self, state, hyperparameters, X, y, progress, sample_noise_variance):
        kind = local_models.LOCAL_KINDS[self._spec.local]
        if sample_noise_variance is not None and not kind.TAKES_NOISE_VARIANCES:
            takes = [name for name, other in local_models.LOCAL_KINDS.items()
                     if other.TAKES_NOISE_VARIANCES]
            raise NotImplementedError(
                f"local={self._spec.local!r} takes one noise variance for all rows, not "
                f"known per-row variances (sample_noise_variance); local kinds that take "
                f"them: {', '.join(takes)}")
        context = local_models.LocalContext(
            state.feature_map, ArraySource(X, y, sample_noise_variance, dtype=self._dtype),
            threshold=float(self._spec.local_threshold), lazy=bool(self._spec.local_lazy),
            reoptimize=bool(self._spec.local_reoptimize), build_map=state.build_map, rng=state.rng,
            map_seed=state.map_seed,
            dtype=self._dtype, progress=progress, neighborhoods=state.neighborhoods,
            learning_centres=self._spec.local_learning_centers)
        return kind.learning_objective(context, hyperparameters)


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
