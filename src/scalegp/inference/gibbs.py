"""Bayesian inference of the hyperparameters by Gibbs sampling (Banerjee, Dunson & Tokdar,
Biometrika 2013, Section 4), for any registered feature map (docs/gibbs.md).

The model (docs/gibbs.md, "Model and priors", Eq. G1-G4): with psi_1(x; theta1) the map at
the unit-variance kernel of length scale l = (2 theta1)^{-1/2} (so that the Gaussian kernel
is exp(-theta1 |x - x'|^2), the paper's range parameter),

    y = f(X) + e,  e ~ N(0, tau^{-1} I),  f(x) = psi_1(x)^T w [+ eps(x)],  w ~ N(0, theta2^{-1} I),
    eps(x) ~ N(0, theta2^{-1} c(x)) independently, c(x) = max(1 - |psi_1(x)|^2, floor)   (G1-G2)
    tau ~ Ga(a1, b1),  theta2 ~ Ga(a2, b2)  (shape-rate: mean a / b),
    theta1 ~ uniform on a grid {c_1, ..., c_t} of positive values                         (G3-G4)

where eps (the FITC-style diagonal, "the modified predictive process") is present only with
``diag_correction=True``. theta2 is the inverse kernel variance: the map at variance 1 /
theta2 is psi_1 / sqrt(theta2), which is how "theta2 enters as a rescaling".

Two cost models (docs/gibbs.md, "Cost model"), reported as ``GibbsSamples.cost_model``:

* ``"statistics"`` (no diagonal): one pass per grid point (a single pass for a fixed-basis
  map) gives G_h = Psi_h^T Psi_h, b_h = Psi_h^T y and y^T y; their eigendecompositions
  (memory t m^2) make every step O(m^2) for the weights and O(t m^2) (O(t m) collapsed) for
  theta1, with no pass over the data;
* ``"rows-cached"`` / ``"rows-recomputed"`` (diagonal): the row weights
  (c_i / theta2 + 1 / tau)^{-1} depend on tau and theta2, so a step costs O(n m^2); the
  n x m features of every grid point are kept when they fit in ``feature_cache_bytes``,
  otherwise recomputed (one feature evaluation per grid point per theta1 update).

The map is one map for all atoms (evaluated at each atom's kernel with ``map.at``), or an
:class:`AtomMaps`, one map built at each atom, as the paper does for its fixed-accuracy random
projection ("we pre-compute the random projection matrix for each of the discrete grid
points"): the rank m_h is then an output per atom, and the weights of an atom of rank m_h
below the largest rank are padded with prior draws (docs/gibbs.md, "Maps built per atom").

The model (priors, grid, atom maps) is in :mod:`scalegp.inference.gibbs_model`, the sweeps'
work in :mod:`scalegp.inference.gibbs_sweeps`; this module runs the chain and holds its draws.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtr

from .. import rowwise
from .._limits import MAX_GIBBS_SWEEPS, check_count
from .._memory import check_bytes
from .._validation import check_matrix, check_positive_int, check_vector
from ..features.base import FeatureMap
from ..kernels import Kernel
from ..stored import Array, Value
from .gibbs_model import (FEATURE_CACHE_BYTES, AtomMaps, GammaPrior, _State, _atom_map,
                          _draw_index, check_theta1_grid, length_scale_of)
from .gibbs_sweeps import RowsBackend, StatisticsBackend, one_blas_thread


__all__ = ["AtomMaps", "GammaPrior", "GibbsSamples", "check_predictive_draws",
           "check_theta1_grid", "effective_sample_size",
           "length_scale_of", "sample_posterior", "COST_MODELS"]


COST_MODELS = ("statistics", "rows-cached", "rows-recomputed")


#: Bytes of the (F, V) draws of one block of test rows in predictions.
PREDICTION_BYTES = 64 * 2**20


#: Kept draws a prediction needs. The predictive variance avg_s V_s + var_s F_s (Eq. G13) is
#: the spread of the draws (V = 0 without the diagonal): one draw gives std 0, and the sample
#: std of S independent draws falls below half the true std with probability
#: P(chi2_{S-1} < (S-1)/4): 38 % for S = 2, 9 % for 5, 2.8 % for 8, and below 2.5 % from
#: S = 9 on (correlated draws need more; the effective sample sizes say how many).
MIN_PREDICTIVE_DRAWS = 9


def check_predictive_draws(n_draws: int, settings: str) -> None:
    """Raise ValueError when ``n_draws`` kept draws are fewer than ``MIN_PREDICTIVE_DRAWS``;
    ``settings`` names the chain settings that kept them."""
    if n_draws < MIN_PREDICTIVE_DRAWS:
        raise ValueError(
            f"{settings} keep {n_draws} draw(s); "
            f"a prediction needs at least {MIN_PREDICTIVE_DRAWS}: its std is the spread of "
            "the kept draws (one draw gives std 0, and fewer than "
            f"{MIN_PREDICTIVE_DRAWS} independent draws understate it by more than a factor "
            "2 with probability above 2.5 %); raise n_iter or lower burn_in or thin")


# ============================================================================ ESS
def effective_sample_size(chain) -> float:
    """n / tau_int by Geyer's initial monotone sequence estimator (Geyer 1992).

    With the (biased, FFT) autocovariances gamma_k and pair sums Gamma_j = gamma_{2j} +
    gamma_{2j+1}, the sum runs over the initial positive run of Gamma_j, each replaced by the
    running minimum (monotone), and tau_int = -1 + 2 sum_j Gamma_j / gamma_0 (Eq. G12).
    NaN for a constant chain (no variation to measure).
    """
    x = check_vector(chain, "chain")
    n = x.size
    if n < 4:
        raise ValueError(f"an effective sample size needs at least 4 draws, got {n}")
    x = x - x.mean()
    size = 1 << int(2 * n - 1).bit_length()
    spectrum = np.fft.rfft(x, size)
    gamma = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n] / n
    if gamma[0] <= 0:
        return math.nan
    pairs = gamma[: 2 * (n // 2)].reshape(-1, 2).sum(axis=1)
    positive = np.flatnonzero(pairs <= 0)
    pairs = pairs[: positive[0] if positive.size else pairs.size]
    pairs = np.minimum.accumulate(pairs)
    tau_int = -1.0 + 2.0 * pairs.sum() / gamma[0]
    return float(n / max(tau_int, 1.0 / n))


# ============================================================================ samples
@dataclass
class GibbsSamples:
    """The retained draws of a chain and the posterior predictive they define.

    Attributes
    ----------
    feature_map : FeatureMap or AtomMaps
    kernel : Kernel
        The kernel family; its length scale and variance are those of each draw.
    theta1_grid : ndarray (t,)
    tau, theta2 : ndarray (S,)
        Noise precision and inverse kernel variance of each retained draw.
    theta1_index : ndarray (S,) of int
        The grid index of theta1 of each draw.
    weights : ndarray (S, m)
        w of each draw (f(x) = psi_1(x; theta1)^T w [+ eps(x)]; with :class:`AtomMaps`, the
        first m_h entries at atom h).
    diag_correction : bool
    cost_model : str
        One of ``COST_MODELS``: what ran.
    collapsed : bool
    n_iter, burn_in, thin : int
    n_floored : int
        Training rows (over all grid points) where c(x) was raised to its floor.
    """

    feature_map: FeatureMap
    kernel: Kernel
    theta1_grid: np.ndarray
    tau: np.ndarray
    theta2: np.ndarray
    theta1_index: np.ndarray
    weights: np.ndarray
    diag_correction: bool
    cost_model: str
    collapsed: bool
    n_iter: int
    burn_in: int
    thin: int
    n_floored: int = 0
    _ess: dict | None = field(default=None, init=False, repr=False, compare=False)

    #: The samples' section of a model file (:mod:`scalegp.stored`): the chain's settings
    #: (metadata ``gibbs``) and the draws (arrays ``gibbs.<name>``); "t" is the grid's atoms,
    #: "S" the retained draws. The feature map and the kernel are sections of their own.
    STORED = {"diag_correction": Value("bool"), "collapsed": Value("bool"),
              "cost_model": Value("str", choices=COST_MODELS),
              "n_iter": Value("int", "at_least_one"), "burn_in": Value("int", "nonnegative"),
              "thin": Value("int", "at_least_one"), "n_grid": Value("int", "at_least_one"),
              "n_floored": Value("int", "nonnegative"),
              "theta1_grid": Array(("t",), ("positive",)),
              "tau": Array(("S",), ("positive",)), "theta2": Array(("S",), ("positive",)),
              "theta1_index": Array(("S",), ("nonnegative",), kind="int"),
              "weights": Array(("S", "m"))}

    def to_state(self) -> dict:
        """The section, as ``STORED`` declares it (one feature map: not :class:`AtomMaps`)."""
        if isinstance(self.feature_map, AtomMaps):
            raise NotImplementedError(
                "saving a Gibbs model with one map per theta1 atom (map_per_atom=True) is not "
                "implemented: the model file stores one feature map")
        return {"diag_correction": bool(self.diag_correction),
                "collapsed": bool(self.collapsed), "cost_model": str(self.cost_model),
                "n_iter": int(self.n_iter), "burn_in": int(self.burn_in),
                "thin": int(self.thin), "n_grid": int(self.theta1_grid.size),
                "n_floored": int(self.n_floored), "theta1_grid": self.theta1_grid,
                "tau": self.tau, "theta2": self.theta2, "theta1_index": self.theta1_index,
                "weights": self.weights}

    @classmethod
    def from_state(cls, state: dict, *, feature_map: FeatureMap,
                   kernel: Kernel) -> "GibbsSamples":
        """The samples from their validated section; ValueError unless the map, the kernel,
        the grid, the draws and the chain's settings agree: an unsigned map that supports
        the isotropic kernel, S = |range(burn_in, n_iter, thin)| draws, the cost model of
        ``diag_correction``, t distinct positive atoms with every index below t."""
        if not type(feature_map).supports(kernel) or feature_map.signs is not None:
            raise ValueError(f"its feature map ({feature_map.name!r}) cannot serve a Gibbs "
                             f"model with the kernel {type(kernel).__name__!r} (it must "
                             "support it and be unsigned)")
        if kernel.anisotropic:
            raise ValueError("its kernel is anisotropic, but a Gibbs model has one length "
                             "scale")
        n_iter, burn_in, thin = state["n_iter"], state["burn_in"], state["thin"]
        n_draws, kept = state["tau"].size, len(range(burn_in, n_iter, thin))
        if burn_in >= n_iter or n_draws != kept:
            raise ValueError(f"it has {n_draws} draws, but n_iter = {n_iter}, burn_in = "
                             f"{burn_in}, thin = {thin} keep {kept}")
        if (state["cost_model"] == "statistics") == state["diag_correction"]:
            raise ValueError(f"its cost model {state['cost_model']!r} is not that of a chain "
                             f"with diag_correction = {state['diag_correction']}")
        grid = check_theta1_grid(state["theta1_grid"])
        if grid.size != state["n_grid"]:
            raise ValueError(f"its grid has {grid.size} atoms, but n_grid = {state['n_grid']}")
        index = state["theta1_index"].astype(np.int64)
        if np.any(index >= grid.size):
            raise ValueError(f"theta1_index has the entry {int(index.max())}, past the "
                             f"{grid.size} atoms of its grid")
        return cls(feature_map=feature_map, kernel=kernel, theta1_grid=grid, tau=state["tau"],
                   theta2=state["theta2"], theta1_index=index, weights=state["weights"],
                   diag_correction=state["diag_correction"], cost_model=state["cost_model"],
                   collapsed=state["collapsed"], n_iter=n_iter, burn_in=burn_in, thin=thin,
                   n_floored=state["n_floored"])

    @property
    def n_draws(self) -> int:
        return int(self.tau.size)

    @functools.cached_property
    def atoms(self) -> AtomMaps:
        """The map of each atom: ``feature_map`` itself, or the shared map repeated."""
        return AtomMaps.of(self.feature_map, self.theta1_grid.size, "atom")

    @property
    def ranks(self) -> np.ndarray:
        """The rank m_h of the drawn atom of each draw, shape (S,)."""
        return self.atoms.ranks[self.theta1_index]

    @property
    def average_rank(self) -> float:
        """The rank averaged over the kept draws (the paper's "average rank ... over the
        iterations")."""
        return float(self.ranks.mean())

    @property
    def theta1(self) -> np.ndarray:
        return self.theta1_grid[self.theta1_index]

    @property
    def length_scale(self) -> np.ndarray:
        return length_scale_of(self.theta1)

    @property
    def noise_variance(self) -> np.ndarray:
        """sigma^2 = 1 / tau of each draw."""
        return 1.0 / self.tau

    @property
    def variance(self) -> np.ndarray:
        """The kernel variance 1 / theta2 of each draw."""
        return 1.0 / self.theta2

    @property
    def effective_sample_sizes(self) -> dict:
        """ESS of tau, theta2 and theta1 (Eq. G12; NaN for a constant chain)."""
        if self._ess is None:
            self._ess = {name: effective_sample_size(getattr(self, name))
                         for name in ("tau", "theta2", "theta1")} if self.n_draws >= 4 else {}
        return dict(self._ess)

    def prediction_effective_sample_sizes(self, X) -> np.ndarray:
        """ESS (Eq. G12) of the chain of predicted values F_s(x) at each row of X."""
        return self._per_row(
            lambda F, V: np.array([effective_sample_size(row) for row in F]), X, False)

    @property
    def corrects_test_points(self) -> bool:
        """Whether predictions add eps(x*) ~ N(0, c(x*) / theta2) at each test point: with the
        diagonal (the chain's own model), and for a Nystrom-type map (``bounded_by_kernel``:
        nystrom, random projection) without it too. Their f = psi_1^T w has prior variance
        q(x*, x*) / theta2, which vanishes away from the knots, so without eps the std there
        is 0 (the subset-of-regressors collapse); with it each draw's predictive is the DTC
        one of docs/nystrom.md, section 4 (the chain itself is unchanged)."""
        return self.diag_correction or bool(self.atoms.bounded_by_kernel)

    def latent_draws(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(F, V): F[i, s] = psi_1(x_i; theta1_s)^T w_s and V[i, s] = c(x_i) / theta2_s, the
        variance of eps (0 unless ``corrects_test_points``), shapes (n_test, S)."""
        X = check_matrix(X, "X", n_dims=self.atoms.n_dims)
        F = np.empty((X.shape[0], self.n_draws))
        V = np.zeros_like(F)
        for h in np.unique(self.theta1_index):
            draws = np.flatnonzero(self.theta1_index == h)
            fmap, kernel_h = _atom_map(self.atoms, self.kernel, self.theta1_grid, h)
            Psi = np.asarray(fmap.features(X), dtype=np.float64)
            F[:, draws] = Psi @ self.weights[draws, :Psi.shape[1]].T
            if self.corrects_test_points:
                c = np.maximum(kernel_h.diag(X) - np.einsum("ij,ij->i", Psi, Psi), 0.0)
                V[:, draws] = c[:, None] / self.theta2[draws]
        return F, V

    def _per_row(self, reduce, X, include_noise: bool):
        """reduce(F, V) (per-row results) of the mixtures at the rows of X, in the fixed blocks
        of :func:`scalegp.rowwise.in_blocks` (a row's value is bitwise the one it has alone):
        up to ten blocks of 48 rows at once, as ``PREDICTION_BYTES`` of draws allow; refused
        for fewer than ``MIN_PREDICTIVE_DRAWS`` draws (:func:`check_predictive_draws`)."""
        check_predictive_draws(self.n_draws, f"the chain's n_iter={self.n_iter}, "
                                             f"burn_in={self.burn_in}, thin={self.thin}")
        X = check_matrix(X, "X", n_dims=self.atoms.n_dims)
        per_block = 16 * max(self.n_draws, 1) * rowwise.BLOCK_ROWS
        rows = rowwise.BLOCK_ROWS * min(10, max(1, PREDICTION_BYTES // per_block))

        def block(rows_X):
            F, V = self.latent_draws(rows_X)
            if include_noise:
                V = V + (1.0 / self.tau)[None, :]
            return reduce(F, V)
        return rowwise.in_blocks(block, X, block_rows=rows)

    def predict(self, X, *, return_var: bool = False, include_noise: bool = False):
        """Posterior predictive mean (and variance) averaged over the draws (Eq. G13):
        mean = avg_s F_s, var = avg_s V_s + var_s F_s."""
        mean, var = self._per_row(lambda F, V: (F.mean(axis=1), V.mean(axis=1) + F.var(axis=1)),
                                  X, include_noise)
        return (mean, var) if return_var else mean

    def interval(self, X, level: float = 0.95, *, include_noise: bool = False):
        """Equal-tailed posterior predictive interval of the mixture over the draws
        (Eq. G14): quantiles of (1/S) sum_s N(F_s, V_s); empirical quantiles where V = 0."""
        if not (0 < level < 1):
            raise ValueError(f"level must be in (0, 1), got {level!r}")
        tail = 0.5 * (1 - level)
        return self._per_row(lambda F, V: (mixture_quantile(F, V, tail),
                                           mixture_quantile(F, V, 1 - tail)), X, include_noise)


#: Bisection steps of :func:`mixture_quantile` (the bracket shrinks 2^-60: below rounding).
QUANTILE_STEPS = 60


def mixture_quantile(F: np.ndarray, V: np.ndarray, p: float) -> np.ndarray:
    """The p-quantile of (1/S) sum_s N(F[i, s], V[i, s]) for each row i (point masses where
    V = 0; the empirical quantile for rows with V = 0 throughout), by bisection on the CDF."""
    out = np.quantile(F, p, axis=1)
    smooth = np.any(V > 0, axis=1)
    if not np.any(smooth):
        return out
    F, V = F[smooth], V[smooth]
    sd = np.sqrt(V)
    spread = 10 * sd.max(axis=1)
    lo, hi = F.min(axis=1) - spread, F.max(axis=1) + spread
    for _ in range(QUANTILE_STEPS):
        mid = 0.5 * (lo + hi)
        diff = mid[:, None] - F
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(sd > 0, diff / np.where(sd > 0, sd, 1.0), np.sign(diff) * np.inf)
        cdf = np.where(z == 0, 0.5, ndtr(z)).mean(axis=1)
        below = cdf < p
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    out[smooth] = 0.5 * (lo + hi)
    return out


# ============================================================================ sampler
def sample_posterior(feature_map: FeatureMap | AtomMaps, kernel: Kernel, X, y, *,
                     theta1_grid,
                     tau_prior=(1.0, 0.1), theta2_prior=(1.0, 1.0), n_iter: int = 2000,
                     burn_in: int = 500, thin: int = 1, collapsed: bool = True,
                     diag_correction: bool = False, rng=None, progress=None,
                     feature_cache_bytes: int = FEATURE_CACHE_BYTES) -> GibbsSamples:
    """Run the Gibbs sampler of Section 4 (docs/gibbs.md, "The sweep").

    One sweep updates, in this order, the latent field (w, or g with the diagonal), tau,
    theta2 and theta1 (Eq. G5-G11); with ``collapsed=True`` theta1 is drawn first with the
    latent field integrated out, then the latent field given it, then tau and theta2 (a
    blocked sweep with the same stationary law). Draws ``burn_in + 1, ..., n_iter`` are kept,
    every ``thin``-th.

    Parameters
    ----------
    feature_map : FeatureMap or AtomMaps
        Built on the training inputs (data-dependent maps); unsigned. An :class:`AtomMaps`
        has one map per atom of ``theta1_grid``.
    kernel : Kernel
        Isotropic (one length scale): theta1 sets l = (2 theta1)^{-1/2}.
    X, y : training inputs (n, d) and targets (n,)
    theta1_grid : array-like (t,)
        Positive, distinct atoms of the uniform prior of theta1 (:func:`check_theta1_grid`).
    tau_prior, theta2_prior : GammaPrior or (shape, rate)
    n_iter, burn_in, thin : int
        Sweeps in all (>= 1), discarded first sweeps (< n_iter), thinning (>= 1).
    collapsed : bool
    diag_correction : bool
        The FITC-style diagonal eps (cost model ``"rows-*"``; without: ``"statistics"``).
    rng : numpy.random.Generator or int or None
    progress : callable, optional
        ``progress(done, total, stage)`` after each grid point of the precomputation
        (stage "grid") and each sweep (stage "sweep").
    feature_cache_bytes : int
        With the diagonal: keep the t n x m feature matrices when they take at most this
        (and a quarter of the available memory); otherwise recompute them.

    The chain starts at the middle atom, with tau and theta2 at their prior means.
    """
    from .._validation import as_generator

    X = check_matrix(X, "X", n_dims=feature_map.n_dims)
    y = check_vector(y, "y", n_samples=X.shape[0])
    grid = check_theta1_grid(theta1_grid)
    tau_prior = GammaPrior.of(tau_prior, "tau_prior")
    theta2_prior = GammaPrior.of(theta2_prior, "theta2_prior")
    n_iter = check_count(check_positive_int(n_iter, "n_iter"), "n_iter", MAX_GIBBS_SWEEPS,
                         "each sweep is O(m^3) at least")
    burn_in = check_positive_int(burn_in, "burn_in", minimum=0)
    thin = check_positive_int(thin, "thin")
    if burn_in >= n_iter:
        raise ValueError(f"burn_in must be below n_iter so that draws are kept, got "
                         f"burn_in={burn_in} >= n_iter={n_iter}")
    n_kept = len(range(burn_in, n_iter, thin))       # each: tau, theta2, the atom, m weights
    check_bytes(8 * n_kept * (feature_map.n_components + 3),
                f"keeping {n_kept} Gibbs draws of {feature_map.n_components} weights",
                "raise thin or lower n_iter")
    if kernel.anisotropic:
        raise ValueError("the Gibbs sampler has one length-scale parameter theta1; give an "
                         "isotropic kernel (one length scale), not an ARD one")
    if feature_map.signs is not None:
        raise NotImplementedError(
            f"{feature_map.name!r} has negative quadrature weights here; the weight prior "
            "N(0, I / theta2) needs an unsigned map (use another approximation)")
    atoms = AtomMaps.of(feature_map, grid.size, "atom")      # the shared map repeated
    rng = as_generator(rng)

    def grid_progress(done):
        if progress is not None:
            progress(done, grid.size, "grid")

    if diag_correction:
        backend = RowsBackend(atoms, kernel, grid, X, y, grid_progress,
                              check_positive_int(feature_cache_bytes, "feature_cache_bytes",
                                                 minimum=0))
    else:
        backend = StatisticsBackend(atoms, kernel, grid, X, y, grid_progress)
    state = _State(tau_prior.mean, theta2_prior.mean, grid.size // 2, backend.initial_latent())
    kept = range(burn_in, n_iter, thin)
    n_kept = len(kept)
    taus, theta2s = np.empty(n_kept), np.empty(n_kept)
    indices = np.empty(n_kept, dtype=np.int64)
    weights = np.empty((n_kept, feature_map.n_components))
    slot = 0
    # a statistics sweep is O(m^2) work: one BLAS thread (gibbs_sweeps.one_blas_thread)
    with one_blas_thread(feature_map.n_components if not diag_correction else np.inf):
        for sweep in range(n_iter):
            if collapsed:
                state.index = _draw_index(
                    backend.collapsed_theta1_log_probs(state.tau, state.theta2), rng)
            backend.draw_latent(state, rng)
            state.tau = backend.tau_conditional(state, tau_prior).draw(rng)
            state.theta2 = backend.theta2_conditional(state, theta2_prior).draw(rng)
            if not collapsed:
                state.index = _draw_index(backend.theta1_log_probs(state), rng)
            if sweep >= burn_in and (sweep - burn_in) % thin == 0:
                taus[slot], theta2s[slot], indices[slot] = state.tau, state.theta2, state.index
                weights[slot] = backend.weights(state, rng)
                slot += 1
            if progress is not None:
                progress(sweep + 1, n_iter, "sweep")
    return GibbsSamples(feature_map, kernel, grid, taus, theta2s, indices, weights,
                        bool(diag_correction), backend.cost_model, bool(collapsed), n_iter,
                        burn_in, thin, backend.n_floored)
