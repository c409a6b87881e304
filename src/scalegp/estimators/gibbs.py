"""GibbsGPRegressor: Bayesian low-rank GP regression with the hyperparameters sampled by the
Gibbs sampler of :mod:`scalegp.inference.gibbs` (docs/gibbs.md, "The estimator").

A separate estimator rather than ``LowRankGPRegressor(sampler="gibbs")``: its fitted state
is a set of draws (not one posterior at learned hyperparameters), it has priors and chain
settings instead of starting values, bounds and an optimizer, and its predictions are
mixtures with intervals. Folding both into one class would make half of each one's
parameters meaningless for the other.
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral

import numpy as np
from scipy import stats
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import kernels, rowwise
from .._memory import check_memory
from .._validation import as_generator, check_matrix, check_vector
from ..data.sources import ProgressBars
from ..errors import ConvergenceWarning
from ..inference.gibbs import check_predictive_draws, sample_posterior
from ..inference.gibbs_model import (FEATURE_CACHE_BYTES, AtomMaps, GammaPrior, check_theta1_grid,
                                     length_scale_of, unit_kernel)
from . import configuration
from .training_data import InMemoryData
from .transformers import (KERNEL_CONSTRAINT, RANDOM_STATE_CONSTRAINT, KernelParamsMixin,
                           _build_feature_map)

__all__ = ["GibbsGPRegressor", "DEFAULT_THETA1_GRID"]

#: The paper's grid of 2,000 equispaced atoms in (0, 2] (0 excluded), coarsened to 100; the
#: paper reports that a coarser grid (1,000 atoms in (0, 1]) gave almost the same results.
DEFAULT_THETA1_GRID = np.linspace(0.02, 2.0, 100)
#: Prior mass left out of each end of the range the map is built for (1 / theta2 for the
#: kernel variance, 1 / tau for the noise floor of a Gauss-Legendre truncation).
PRIOR_TAIL = 1e-3


class GibbsGPRegressor(KernelParamsMixin, RegressorMixin, BaseEstimator):
    """Low-rank GP regression with tau, theta2 and theta1 sampled (Banerjee, Dunson &
    Tokdar, Section 4).

    Model (docs/gibbs.md, Eq. G1-G4): y = f(X) + e, e ~ N(0, I / tau), f = psi_1(.; theta1)^T w
    [+ eps], w ~ N(0, I / theta2), with tau ~ Ga(a1, b1), theta2 ~ Ga(a2, b2) (shape-rate)
    and theta1 uniform on a grid; the kernel at theta1 has length scale (2 theta1)^{-1/2} and
    variance 1 / theta2.

    Parameters
    ----------
    approximation : str, Features or Nystrom, default="rff"
        The feature map (any unsigned registered map; data-dependent maps are built on the
        training inputs): a name (its defaults), or ``Features(name, n_components=...,
        options=...)`` / ``Nystrom(n_components=..., knots=...)``
        (:mod:`scalegp.estimators.configuration`; nested ``approximation__n_components``
        works). ``n_components`` None: the map's default; ``options``: keyword arguments of
        the map's ``build``. The sampler conditions on the DTC model with the Cholesky
        solver: a configuration with another ``objective``, ``solver``, ``signed_rule`` or
        ``learn_knots`` is refused.
    kernel : str or Kernel, default="gaussian"
        The kernel family, isotropic; its length scale and variance are not used (they are
        sampled). Nested ``kernel__<name>`` parameters work as in LowRankGPRegressor.
    theta1_grid : array-like or None, default=None
        Atoms of theta1 (> 0, distinct); None: ``DEFAULT_THETA1_GRID``, 100 atoms in (0, 2].
    tau_prior, theta2_prior : (shape, rate), default=(1.0, 0.1) and (1.0, 1.0)
        Gamma priors of the noise precision and of the inverse kernel variance (the paper's
        abalone choice), in the units of the (normalized, if ``normalize_y``) targets.
    n_iter, burn_in, thin : int, default=2000, 500, 1
        They must keep at least :data:`scalegp.inference.gibbs.MIN_PREDICTIVE_DRAWS` (9) draws, since
        the predictive std is their spread (``fit`` refuses fewer before any work).
    collapsed : bool, default=True
        Draw theta1 with the latent field integrated out: the chain moves between atoms,
        where the paper's step (``collapsed=False``, conditioned on the latent field)
        rarely leaves its first (docs/gibbs.md, "The sweep"), and a sweep costs O(t m)
        instead of O(t m r) for the theta1 step.
    diag_correction : bool, default=False
        The FITC-style diagonal (the modified predictive process): cost O(n m^2) per sweep.
    map_per_atom : bool, default=False
        Build one map per theta1 atom, at that atom's unit kernel (the paper's
        precomputation for its random projection; :class:`scalegp.inference.gibbs.AtomMaps`), instead
        of one map for the whole grid. With ``approximation=Features("random-projection",
        options={"epsilon": ...})`` each atom then gets the rank its target
        error needs (``samples_.average_rank``); ``n_components`` caps it. Costs one build
        per atom (for random projection Theta(n^2) kernel evaluations each); such a model
        cannot be saved yet (NotImplementedError).
    normalize_y : bool, default=True
        Sample with (y - mean) / std; the priors are then on that scale.
    normalize_X : bool, default=True
        Standardize the input columns (the grid is then in standardized units).
    feature_cache_bytes : int, default=2**30
        With ``diag_correction``: keep the n x m features of every grid point up to this.
    verbose : bool, default=False
        Progress bars (tqdm, on stderr) over the stages, when ``fit`` is given no ``progress``.
    random_state : None, int, numpy.random.Generator, default=None
        Seed of the map and of the chain (independent streams).

    Attributes
    ----------
    samples_ : scalegp.inference.gibbs.GibbsSamples
        The retained draws (normalized units) and the predictive they define.
    feature_map_ : FeatureMap
    theta1_grid_ : ndarray
    cost_model_ : str
        "statistics", "rows-cached" or "rows-recomputed": which cost model ran.
    effective_sample_sizes_ : dict
        ESS of tau, theta2 and theta1.
    posterior_means_ : dict
        Posterior means of tau, theta2, theta1, the noise variance 1 / tau, the kernel
        variance 1 / theta2 (normalized units) and the length scale.
    y_train_mean_, y_train_std_ : float
    X_train_mean_, X_train_scale_ : ndarray
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "approximation": [str, configuration.Features, configuration.Nystrom],
        "kernel": KERNEL_CONSTRAINT,
        "theta1_grid": ["array-like", None],
        "tau_prior": ["array-like", GammaPrior],
        "theta2_prior": ["array-like", GammaPrior],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "thin": [Interval(Integral, 1, None, closed="left")],
        "collapsed": ["boolean"],
        "diag_correction": ["boolean"],
        "map_per_atom": ["boolean"],
        "normalize_y": ["boolean"],
        "normalize_X": ["boolean"],
        "feature_cache_bytes": [Interval(Integral, 0, None, closed="left")],
        "verbose": ["boolean"],
        "random_state": RANDOM_STATE_CONSTRAINT,
    }

    def __init__(self, approximation="rff", kernel="gaussian",
                 theta1_grid=None, tau_prior=(1.0, 0.1), theta2_prior=(1.0, 1.0), n_iter=2000,
                 burn_in=500, thin=1, collapsed=True, diag_correction=False,
                 map_per_atom=False, normalize_y=True,
                 normalize_X=True,
                 feature_cache_bytes=FEATURE_CACHE_BYTES, verbose=False, random_state=None):
        self.approximation = approximation
        self.kernel = kernel
        self.theta1_grid = theta1_grid
        self.tau_prior = tau_prior
        self.theta2_prior = theta2_prior
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.collapsed = collapsed
        self.diag_correction = diag_correction
        self.map_per_atom = map_per_atom
        self.normalize_y = normalize_y
        self.normalize_X = normalize_X
        self.feature_cache_bytes = feature_cache_bytes
        self.verbose = verbose
        self.random_state = random_state

    # ----------------------------------------------------------------- fitting
    def fit(self, X, y, progress=None):
        """Build the map on X and run the chain.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        y : array-like (n_samples,)
        progress : callable, optional
            The progress protocol of every estimator (:class:`scalegp.data.sources.ProgressBars`):
            ``progress.start_pass(name, total, unit="steps")``, when it has it, as each stage
            begins ("gibbs maps" with ``map_per_atom``, one step per atom built; "gibbs grid";
            "gibbs sweep"), and ``progress(steps_done)`` after each step.

        Returns
        -------
        self
        """
        self._validate_params()
        if self.burn_in < self.n_iter:      # (else sample_posterior names the problem)
            check_predictive_draws(len(range(self.burn_in, self.n_iter, self.thin)),
                                   f"n_iter={self.n_iter}, burn_in={self.burn_in}, "
                                   f"thin={self.thin}")
        X, y = validate_data(self, X, y, y_numeric=True, ensure_all_finite=False)
        X = check_matrix(X, "X")
        y = check_vector(y, "y", n_samples=X.shape[0])
        kernel = kernels.get(self.kernel)
        kernel.check_n_dims(X.shape[1])
        grid = check_theta1_grid(DEFAULT_THETA1_GRID if self.theta1_grid is None
                                 else self.theta1_grid)
        tau_prior = GammaPrior.of(self.tau_prior, "tau_prior")
        theta2_prior = GammaPrior.of(self.theta2_prior, "theta2_prior")
        data = InMemoryData(X, y, kernel, self.normalize_X, self.normalize_y, None, None)
        X, y_fit = data.X, data.y

        spec = configuration.resolve_for_sampler(self.approximation)
        if spec.n_components is not None:   # before the map is built (the sampler's check)
            check_memory(spec.n_components, n_matrices=grid.size + 6,
                         what=f"the Gibbs factors of {grid.size} grid points")
        build_rng, chain_rng = as_generator(self.random_state).spawn(2)
        noise_lower = 1.0 / stats.gamma(tau_prior.shape,
                                        scale=1 / tau_prior.rate).ppf(1 - PRIOR_TAIL)
        context = {"y": y_fit, "noise_variance": 1.0 / tau_prior.mean,
                   "noise_variance_lower": noise_lower}
        bars = ProgressBars() if self.verbose and progress is None else None
        report = _stage_reporter(progress if bars is None else bars)
        try:
            if self.map_per_atom:
                feature_map = AtomMaps(tuple(self._atom_maps(spec, X, kernel, grid, build_rng,
                                                             context, report)))
            else:
                feature_map = _build_feature_map(
                    spec.approximation, X, build_kernel(kernel, grid, theta2_prior),
                    spec.n_components, spec.options, build_rng, context)
            samples = sample_posterior(
                feature_map, kernel, X, y_fit, theta1_grid=grid, tau_prior=tau_prior,
                theta2_prior=theta2_prior, n_iter=self.n_iter, burn_in=self.burn_in,
                thin=self.thin, collapsed=self.collapsed, diag_correction=self.diag_correction,
                rng=chain_rng, progress=report, feature_cache_bytes=self.feature_cache_bytes)
        finally:
            if bars is not None:
                bars.close()
        self._set_fitted(samples, y_train_mean=data.y_mean, y_train_std=data.y_std,
                         X_train_mean=data.X_mean, X_train_scale=data.X_scale)
        if grid.size > 1 and np.unique(samples.theta1_index).size == 1:
            theta1 = float(samples.theta1[0])
            end = "smallest" if theta1 == grid.min() else "largest" if theta1 == grid.max() \
                else None
            cause = ("the chain has not explored the grid" if end is None else
                     f"it is the grid's {end} atom, so theta1's posterior may lie beyond the "
                     f"grid (theta1 = 1 / (2 l^2): a length scale "
                     f"{'above' if end == 'smallest' else 'below'} {(2 * theta1) ** -0.5:.3g} "
                     f"in the {'standardized ' if self.normalize_X else ''}inputs); extend "
                     "theta1_grid")
            warnings.warn(
                f"theta1 stayed on one atom ({theta1:.4g}) in all {samples.n_draws} kept "
                f"draws: {cause}"
                + ("" if self.collapsed else "; collapsed=True draws theta1 with the latent "
                   "field integrated out and mixes far better (docs/gibbs.md, \"The sweep\")"),
                ConvergenceWarning, stacklevel=2)
        return self

    def _atom_maps(self, spec, X, kernel, grid, rng, context, progress):
        """One map per atom, built at its unit kernel (``map_per_atom``), each from its own
        stream of ``rng``; ``progress(done, t, "maps")`` after each."""
        for h, (theta1, atom_rng) in enumerate(zip(grid, rng.spawn(grid.size))):
            yield _build_feature_map(spec.approximation, X, unit_kernel(kernel, theta1),
                                     spec.n_components, spec.options, atom_rng, context)
            if progress is not None:
                progress(h + 1, grid.size, "maps")

    def _set_fitted(self, samples, *, y_train_mean, y_train_std, X_train_mean=None,
                    X_train_scale=None):
        """The fitted attributes (``fit`` and :func:`scalegp.load`); n_features_in_ set."""
        n_dims = self.n_features_in_
        self.samples_ = samples
        self.feature_map_ = samples.feature_map
        self.theta1_grid_ = samples.theta1_grid
        self.cost_model_ = samples.cost_model
        self.effective_sample_sizes_ = samples.effective_sample_sizes
        self.posterior_means_ = {
            "tau": float(samples.tau.mean()), "theta2": float(samples.theta2.mean()),
            "theta1": float(samples.theta1.mean()),
            "noise_variance": float(samples.noise_variance.mean()),
            "variance": float(samples.variance.mean()),
            "length_scale": float(samples.length_scale.mean())}
        self.y_train_mean_ = float(y_train_mean)
        self.y_train_std_ = float(y_train_std)
        self.X_train_mean_ = (np.zeros(n_dims) if X_train_mean is None
                              else np.asarray(X_train_mean, dtype=float))
        self.X_train_scale_ = (np.ones(n_dims) if X_train_scale is None
                               else np.asarray(X_train_scale, dtype=float))

    # ----------------------------------------------------------------- prediction
    def _inputs(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite=False)
        return rowwise.standardized(X, self.X_train_mean_, self.X_train_scale_)

    def predict(self, X, return_std=False, include_noise=False):
        """Posterior predictive mean (and std) averaged over the draws (Eq. G13).

        Parameters
        ----------
        X : array-like (n_test, n_dims)
        return_std : bool, default=False
        include_noise : bool, default=False
            The std of a new observation (adds 1 / tau of each draw) instead of the latent f.

        Returns
        -------
        mean : ndarray (n_test,)
        std : ndarray (n_test,), if ``return_std``
        """
        X = self._inputs(X)              # checks the fit first (NotFittedError)
        mean, var = self.samples_.predict(X, return_var=True, include_noise=include_noise)
        rowwise.check_finite_rows(mean, "predictive mean", rowwise.UNEVALUABLE)
        rowwise.check_finite_rows(var, "predictive std", rowwise.UNEVALUABLE)
        mean = mean * self.y_train_std_ + self.y_train_mean_
        return (mean, np.sqrt(var) * self.y_train_std_) if return_std else mean

    def predict_interval(self, X, level=0.95, include_noise=False):
        """Equal-tailed predictive interval of the mixture over the draws (Eq. G14).

        Returns
        -------
        lower, upper : ndarray (n_test,)
        """
        X = self._inputs(X)
        lower, upper = self.samples_.interval(X, level, include_noise=include_noise)
        rowwise.check_finite_rows(np.column_stack([lower, upper]), "predictive interval",
                                  rowwise.UNEVALUABLE)
        return (lower * self.y_train_std_ + self.y_train_mean_,
                upper * self.y_train_std_ + self.y_train_mean_)


def build_kernel(kernel, grid: np.ndarray, theta2_prior: GammaPrior):
    """The kernel a map is built for: length scales spanning the grid's, and the kernel
    variance 1 / theta2 spanning the central 1 - 2 ``PRIOR_TAIL`` of its prior (a
    Gauss-Legendre rule's truncation and node counts hold on that box)."""
    scales = length_scale_of(grid)
    lo, hi = float(scales.min()), float(scales.max())
    law = stats.gamma(theta2_prior.shape, scale=1 / theta2_prior.rate)
    v_lo, v_hi = 1.0 / law.ppf(1 - PRIOR_TAIL), 1.0 / law.ppf(PRIOR_TAIL)
    return kernel.with_params(
        length_scale=math.sqrt(lo * hi), length_scale_bounds=(lo, hi) if hi > lo else "fixed",
        variance=float(np.clip(1.0, v_lo, v_hi)), variance_bounds=(v_lo, v_hi))


def _stage_reporter(progress):
    """The sampler's ``report(done, total, stage)`` as the progress protocol of every estimator:
    ``progress.start_pass("gibbs STAGE", total, unit="steps")`` (when it has it) as a stage
    begins, then ``progress(done)``; None without ``progress``."""
    if progress is None:
        return None
    current = []
    start_pass = getattr(progress, "start_pass", None)

    def report(done, total, stage):
        if current != [stage]:
            current[:] = [stage]
            if start_pass is not None:
                start_pass(f"gibbs {stage}", total, unit="steps")
        progress(done)
    return report
