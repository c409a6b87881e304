"""Gauss-Legendre features (GLF): a hyperparameter-free basis for GP regression.

Fink Shustin & Avron, *Gauss-Legendre Features for Gaussian Process Regression*, JMLR 23
(2022); the project's derivation of everything below is docs/gauss-legendre.md (cited by
section). With the ordinary-frequency convention (Eq. 9; docs/conventions.md)

    k(x, z) = int_{R^d} p_theta(eta) cos(2 pi eta^T (x - z)) d eta,

the integral is truncated to the box [-Q_1, Q_1] x ... x [-Q_d, Q_d] (Proposition 7) and
replaced by the tensor Gauss-Legendre rule with q_j nodes in dimension j (Eqs. 10-11):

    k~(x, z) = sum_l W_l p_theta(eta_l) cos(2 pi eta_l^T (x - z)),   s = prod_j q_j nodes.

The nodes eta_l and weights W_l depend on (Q, q) only, so the basis Phi does not depend on the
hyperparameters theta; they enter through the diagonal weights w(theta) = W p_theta(eta)
(Section 4.2, Proposition 6), and after one O(n s^2) pass every likelihood-and-gradient
evaluation costs O(s^3) (the engine's :class:`~scalegp.engine.statistics.BasisStatistics` path).

This module holds the map ``"glf"``; ``"glf-semigroup"`` of the reciprocal semigroup kernel
(Section 6.3; section 9) is :mod:`scalegp.features.glf_semigroup`. Their parts live elsewhere: the
1-D rules in :mod:`scalegp.features.quadrature` (section 1), the tensor-grid algebra in
:mod:`scalegp.features._tensor_grid` (section 2), the box Theta, truncation (Proposition 7;
section 5), node-count bounds (Theorems 10-12; section 6) and the practical rules for q and Q
(section 7) in :mod:`scalegp.features.glf_theory`, the ``n_nodes="auto"`` search in
:mod:`scalegp.inference.glf_selection` (it needs the engine, which no feature map imports), and
what the kernel contributes (decay class, density bound, panels, Laplace representation) in the
kernel (:mod:`scalegp.kernels`). The QR-based likelihood of Appendix A.2 (section 8) is in
:mod:`scalegp.engine.qr`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import (as_generator, check_matrix, check_positive_int, check_positive_scalar,
                           check_vector)
from ..kernels import Kernel
from ..stored import Array, Value
from ._tensor_grid import (Nodes, Weights, contract_axes, half_grid, half_grid_exponential_rows,
                           half_grid_flat_indices, kronecker)
from .base import FixedBasisFeatureMap, feature_dtype
from .glf_theory import (DEFAULT_EPSILON, HyperparameterBox, resolved_half_widths, rule_panels,
                         split_budget, theoretical_node_counts, truncation_half_widths)
from .quadrature import symmetric_rule


#: Default lower bound lambda_min of the noise variance (that of the estimators' box).
DEFAULT_NOISE_VARIANCE_LOWER = 1e-6


#: Largest number of columns a rule may have (an s x s float64 Gram of 16,384 is 2 GiB).
MAX_COMPONENTS = 16_384


#: Default tolerance of ``n_nodes="auto"``
#: (:func:`scalegp.inference.glf_selection.search_node_counts`).
DEFAULT_TOLERANCE = 1e-3


#: build warns when the rule reproduces a share of k(x, x) off 1 by more than this at an end
#: of Theta's length scales (:meth:`GaussLegendreFeatures.captured_mass`).
MASS_TOLERANCE = 0.1


#: :meth:`GaussLegendreFeatures.valid_log_bounds` keeps the length scales at which the rule
#: reproduces k(x, x) to within this share (measured on the East Africa relief, standardised,
#: n = 3,000, Gaussian kernel: a 1 % mass deficit went with a 3 % error of the predictive
#: mean against the exact GP, MASS_TOLERANCE's 10 % with 7-12 %).
VALID_MASS_TOLERANCE = 0.01


#: Points per length-scale row of the log grid on which valid_log_bounds scans the mass.
VALID_GRID_POINTS = 512


#: s of ``n_nodes=None`` (the budget split) when ``n_components`` is None.
DEFAULT_SPLIT_COMPONENTS = 256


#: Rounds of :func:`resolved_box`'s fixed-point iteration.
BOX_ROUNDS = 4


def resolved_box(build, kernel: Kernel, rounds: int = BOX_ROUNDS):
    """The length-scale box that the rule built for it resolves, as a fixed point.

    The rule depends on the box Theta it is built for (the truncation half-widths R_j of
    Proposition 7 grow as the shortest length scale shrinks; the node spacing must resolve
    the spectral density of the longest), and the map built for Theta may reproduce the
    kernel (:meth:`GaussLegendreFeatures.valid_log_bounds`) only on a narrower box V(Theta).
    Iterate Theta_{k+1} = Theta_k cap V(Theta_k), rebuilding the map each round, until nothing
    narrows: at the fixed point the map built for Theta resolves all of Theta, so a fit in
    that box has nothing to narrow or warn about.

    Parameters
    ----------
    build : callable, kernel -> GaussLegendreFeatures
        Builds the map for a kernel's box as the caller's fit will (its warnings, about the
        boxes passed through, are silenced here).
    kernel : Kernel
        Its ``length_scale_bounds`` is the starting box Theta_0.
    rounds : int
        At most this many builds.

    Returns
    -------
    kernel : Kernel
        The kernel on the last box built for, its length scales clipped into it.
    feature_map : GaussLegendreFeatures
        The map built for that box.
    resolved : bool
        Whether that box is a fixed point (False: still narrowing after ``rounds``
        builds, or the box the map resolves would be empty).
    """
    for round_ in range(rounds):
        box = tuple(float(b) for b in kernel.length_scale_bounds)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fmap = build(kernel)
        valid = fmap.valid_log_bounds(kernel)[:-1]
        narrowed = (max(box[0], float(np.exp(valid[:, 0].max()))),
                    min(box[1], float(np.exp(valid[:, 1].min()))))
        if narrowed == box or narrowed[0] >= narrowed[1] or round_ == rounds - 1:
            return kernel, fmap, narrowed == box
        kernel = kernel.with_params(length_scale=np.clip(kernel.length_scale, *narrowed),
                                    length_scale_bounds=narrowed)


# --------------------------------------------------------------------------- the feature map
class _ResolutionChecks:
    """What the rule of a :class:`GaussLegendreFeatures` resolves (docs/gauss-legendre.md,
    section 7): the prior variance it reproduces and the box of length scales on which it
    reproduces the kernel. A mixin of the map, split off by job."""

    def captured_mass(self, kernel: Kernel) -> float:
        """k~(x, x) / k(x, x): the share of the prior variance the rule reproduces.

        k~(x, x) = sum_l W_l p_theta(eta_l), the same at every x (cos^2 + sin^2 = 1). Below 1
        the box drops spectral mass (truncation, Proposition 7) or the nodes miss the density's
        peak; above 1 they overshoot it. Either way, far from 1 the features approximate
        another (band-limited) kernel, not this one.
        """
        self._check_kernel(kernel)
        Psi = self.features(self.offset[None, :], kernel)
        return float(Psi[0] @ Psi[0]) / kernel.variance

    def valid_log_bounds(self, kernel: Kernel) -> np.ndarray:
        """The log box of ``kernel.theta`` on which the rule reproduces the kernel.

        Each free length-scale row of ``kernel.bounds`` is narrowed to the longest run of a
        log grid (VALID_GRID_POINTS points) on which the rule reproduces the prior variance
        to within VALID_MASS_TOLERANCE: for an isotropic length scale l,
        |prod_j m_j(l) - 1| <= tolerance, and for an ARD length scale l_j,
        |m_j(l_j) - 1| <= tolerance / d, where

            m_j(l) = sum_i W_{j,i} p_l(eta_{j,i})

        is the mass the 1-D rule of dimension j gives the 1-D density of the kernel family
        (the marginal of the d-dimensional one: the kernel restricted to axis j), so that
        prod_j m_j = :meth:`captured_mass` for a separable kernel (Gaussian, Cauchy,
        Laplacian). Below the run the truncation box drops the spectrum's tails, above it
        the nodes miss the density's peak: there the features approximate another kernel.
        The variance row is the kernel's (the mass is relative to it); fixed rows are kept.
        A row where no grid point is within VALID_MASS_TOLERANCE uses MASS_TOLERANCE (that of
        build's warning) instead, and is kept whole where none is within that either (build
        has then warned that the rule does not reproduce the kernel there).
        """
        self._check_kernel(kernel)
        bounds = kernel.bounds.copy()
        ard = kernel.anisotropic
        tolerance = VALID_MASS_TOLERANCE / self.n_dims if ard else VALID_MASS_TOLERANCE
        unit = kernel.with_params(length_scale=1.0, variance=1.0, length_scale_bounds="fixed",
                                  variance_bounds="fixed")
        for row in range(kernel.n_params - 1):
            low, high = bounds[row]
            if low == high:
                continue
            grid = np.linspace(low, high, VALID_GRID_POINTS)
            mass = np.ones(grid.size)
            for j in ([row] if ard else range(self.n_dims)):
                mass *= self._dimension_mass(unit, j, np.exp(grid))
            for share in (tolerance, tolerance * MASS_TOLERANCE / VALID_MASS_TOLERANCE):
                start, stop = _longest_run(np.abs(mass - 1.0) <= share)
                if start < stop:
                    bounds[row] = grid[start], grid[stop - 1]
                    break
        return bounds

    def _dimension_mass(self, unit: Kernel, j: int, scales: np.ndarray) -> np.ndarray:
        """m_j(l) for each l in ``scales``: sum_i W_i l p_1(l eta_i), p_1 the unit-scale
        1-D density (p_l(eta) = l p_1(l eta) in one dimension)."""
        nodes, weights = self._rules[j]
        V = np.multiply.outer(scales, nodes)
        density = np.exp(unit.log_spectral_density(V.reshape(-1, 1))).reshape(V.shape)
        return scales * (density @ weights)


@dataclass(frozen=True, eq=False)
class GaussLegendreFeatures(_ResolutionChecks, FixedBasisFeatureMap, name="glf"):
    """Gauss-Legendre features: cos/sin at the nodes of a truncated tensor Gauss-Legendre rule.

    Attributes
    ----------
    n_nodes : ndarray of int (n_dims,)
        q_j, the nodes of the 1-D rule of dimension j; s = prod_j q_j columns.
    half_width : ndarray (n_dims,)
        Q_j, the truncation box is [-Q_1, Q_1] x ... x [-Q_d, Q_d].
    panels : ndarray of int (n_dims,)
        1, or 2 for a composite rule with a panel boundary at eta_j = 0 (Cauchy kernel).
    offset : ndarray (n_dims,)
        Centre of the data box, subtracted from the inputs before the phases are formed.
    truncation_bound : ndarray (n_dims,) or None
        R_j of Proposition 7 for the box Theta, epsilon and n the map was built with.
    theoretical_n_nodes : ndarray (n_dims,) or None
        q_j of Theorems 11-12 at Q = R (inf when no ellipse is admissible).
    epsilon : float
        The spectral-equivalence target the two quantities above were computed for.
    selection : str
        How the node counts were chosen (for :meth:`report`).

    Notes
    -----
    Real features (docs/gauss-legendre.md, section 2): the tensor grid
    eta_l = (Q_1 t_{1,i_1}, ..., Q_d t_{d,i_d}) with weights W_l = prod_j Q_j omega_{j,i_j} is
    symmetric under eta -> -eta. Taking one node of each pair {eta_l, -eta_l} (the one whose
    first nonzero coordinate is positive; the set S+) and the node 0 when every q_j is odd,

        k~(x, z) = W_0 p(0) + sum_{l in S+} 2 W_l p(eta_l) [cos 2 pi eta_l^T x cos 2 pi eta_l^T z
                                                         + sin 2 pi eta_l^T x sin 2 pi eta_l^T z],

    so Phi = [cos(2 pi eta_l^T (x - c)), sin(2 pi eta_l^T (x - c))]_{l in S+} (+ a column of
    ones) has exactly s columns, and w(theta) = [2 W_l p_theta(eta_l)] (twice) (+ W_0 p(0)).
    The phases are built from per-dimension factors cos/sin(2 pi eta_{j,i} (x_j - c_j)) by the
    angle-addition identities, so the trigonometric work is n sum_j q_j, not n s.

    For a separable kernel (Gaussian, Cauchy, Laplacian; p = prod_j p_j, each even) the tensor
    rule factorizes: k~ = prod_j k~_j with k~_j(D) = sum_{eta_i >= 0} W'_i p_j(eta_i)
    cos(2 pi eta_i D), the per-dimension half-line rule (W' = 2W for eta_i > 0); the Cauchy
    kernel's rule has two panels, [-Q, 0] and [0, Q], as p_j is not analytic at 0.

    Weights: d log w_l / d theta = d log p_theta(eta_l) / d theta (docs/conventions.md,
    "Log-density derivatives"), finite where p_theta(eta_l) underflows (large length scales).
    """

    n_nodes: np.ndarray
    half_width: np.ndarray
    panels: np.ndarray
    offset: np.ndarray
    truncation_bound: np.ndarray | None = None
    theoretical_n_nodes: np.ndarray | None = None
    epsilon: float = DEFAULT_EPSILON
    selection: str = "given"

    STORED = {"n_nodes": Array(("d",), ("at_least_one",), kind="int"),
              "half_width": Array(("d",), ("positive",)),
              "panels": Array(("d",), ("panel_count",), kind="int"),
              "offset": Array(("d",)),
              "truncation_bound": Array(("d",), ("reported",)),
              "theoretical_n_nodes": Array(("d",), ("reported",)),
              "epsilon": Value("number", "positive"),
              "selection": Value("str")}

    description = ("Gauss-Legendre features: truncated tensor Gauss-Legendre rule, basis "
                   "independent of the hyperparameters (O(s^3) learning steps)")
    reference = "Fink Shustin & Avron, JMLR 2022"
    fit_context = ("y", "noise_variance", "noise_variance_lower", "node_search", "n_samples")
    builds_from_bounding_box = True     # n_nodes="auto" excepted: it refuses a box (build)
    default_n_components = None     # build derives s for "auto" (glf_selection.auto_budget)

    def __post_init__(self):
        d = check_positive_int(self.n_dims, "n_dims")
        n_nodes = _integer_vector(self.n_nodes, "n_nodes", d)
        panels = _integer_vector(self.panels, "panels", d)
        if not np.all(np.isin(panels, (1, 2))):
            raise ValueError(f"panels must contain only 1 or 2, got {panels.tolist()}")
        half_width = np.broadcast_to(np.asarray(self.half_width, dtype=float), (d,)).copy()
        if not np.all(np.isfinite(half_width)) or np.any(half_width <= 0):
            raise ValueError(
                f"half_width must contain {d} finite positive numbers, got {half_width.tolist()}"
            )
        if int(np.prod(n_nodes.astype(float))) > MAX_COMPONENTS:
            raise ValueError(
                f"n_nodes = {n_nodes.tolist()} gives prod(n_nodes) = "
                f"{int(np.prod(n_nodes.astype(float)))} columns, more than {MAX_COMPONENTS}"
            )
        offset = np.broadcast_to(np.asarray(self.offset, dtype=float), (d,)).copy()
        object.__setattr__(self, "n_nodes", n_nodes)
        object.__setattr__(self, "panels", panels)
        object.__setattr__(self, "half_width", half_width)
        object.__setattr__(self, "offset", offset)
        rules = [symmetric_rule(int(q), float(Q), int(p))
                 for q, Q, p in zip(n_nodes, half_width, panels)]
        positive = [np.flatnonzero(nodes > 0) for nodes, _ in rules]
        zero = [np.flatnonzero(nodes == 0) if np.any(nodes == 0) else None
                for nodes, _ in rules]
        eta = half_grid([nodes[:, None] for nodes, _ in rules], positive, zero, Nodes)
        pair_weights = 2.0 * half_grid([w for _, w in rules], positive, zero, Weights)
        has_origin = all(z is not None for z in zero)
        if has_origin:
            eta = np.vstack([eta, np.zeros((1, d))])
            origin_weight = np.prod([w[z[0]] for (_, w), z in zip(rules, zero)])
            pair_weights = np.append(pair_weights, origin_weight)
        # Derived, theta-independent arrays (not fields: state() stays the constructor's input).
        object.__setattr__(self, "_rules", rules)
        object.__setattr__(self, "_positive", positive)
        object.__setattr__(self, "_zero", zero)
        object.__setattr__(self, "_has_origin", has_origin)
        object.__setattr__(self, "_nodes", eta)
        object.__setattr__(self, "_log_node_weights", np.log(pair_weights))

    # ----------------------------------------------------------------- construction
    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """A shift-invariant kernel whose spectral density has a known decay class (its tail
        radius and density bound: :attr:`scalegp.kernels.Kernel.spectral_decay_class`)."""
        return kernel.shift_invariant and kernel.spectral_decay_class is not None

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, n_nodes=None,
              epsilon=DEFAULT_EPSILON, noise_variance_lower=DEFAULT_NOISE_VARIANCE_LOWER,
              tolerance=DEFAULT_TOLERANCE, y=None, noise_variance=None,
              half_width=None, node_search=None, n_samples=None):
        """Choose the truncation box and node counts for the data box and Theta.

        Parameters
        ----------
        X : array (n_samples, n_dims)
            Training inputs: their bounding box sets the offset and the node counts.
        kernel : Kernel
            One with a known decay class (:meth:`supports`; Gaussian, Matern, Cauchy,
            Laplacian); its bounds define Theta (see
            :class:`scalegp.features.glf_theory.HyperparameterBox`).
        n_components : int or None
            Budget of real columns s: with ``n_nodes=None`` the q_j are chosen with
            prod_j q_j <= n_components in proportion to R_j D_j (the Nyquist counts
            pi R_j D_j of docs/gauss-legendre.md section 7, D_j the data box width; None: 256,
            and then s >= n is not warned about); with
            ``n_nodes="auto"`` the largest s tried, a hard cap (None: derived from the
            problem by :func:`scalegp.inference.glf_selection.auto_budget`). Ignored for integer and
            ``"theory"`` counts.
        rng : numpy.random.Generator, optional
            Draws the subsample of ``n_nodes="auto"`` (the rule itself is deterministic).
        n_nodes : None, int, sequence of int, "theory" or "auto"
            q_j per dimension (an int is used for every dimension); "theory": the counts
            of Theorems 11-12 with Q = R of Proposition 7; "auto": q grows by a factor 1.25
            until the log marginal likelihood (per sample) and the posterior mean (rms,
            relative to std(y)) change by less than ``tolerance``, at the kernel's
            hyperparameters and at the extreme length scales of Theta (needs ``y``).
        epsilon : float
            Spectral-equivalence target of Proposition 7 and Theorem 12.
        noise_variance_lower : float
            lambda_min, the lower bound of the noise variance in Theta.
        tolerance : float
            Convergence tolerance of ``n_nodes="auto"``.
        y : array (n_samples,), optional
            Training targets, used by ``n_nodes="auto"`` only.
        noise_variance : float, optional
            Noise variance at which ``n_nodes="auto"`` compares likelihoods (default
            lambda_min; give the starting value of learning: at lambda_min the extremes of
            Theta are far more sensitive than any model learning visits).
        half_width : None, "proposition7", float or sequence of float
            Q_j: None for the resolution rule (Notes), "proposition7" for R_j, or given.
            Ignored by ``n_nodes="theory"`` (Q = R) and ``"auto"`` (the resolution rule).
        node_search : callable, optional
            The search of ``n_nodes="auto"``, :func:`scalegp.inference.glf_selection.search_node_counts`
            (it needs the engine, which no feature map imports); the estimators and
            :class:`scalegp.FeatureMapTransformer` supply it.
        n_samples : int, optional
            n, when X is not all the training rows but their bounding box (a streaming fit,
            :attr:`builds_from_bounding_box`); default X's row count.

        Notes
        -----
        Q_j is R_j of Proposition 7 for ``"theory"``; by default it is the widest box the
        q_j nodes resolve, Q_j = min(R'_j, q_j / (1.5 pi D_j)), with R' the box whose dropped
        mass is epsilon lambda_min / 2 (Proposition 7 without the Cauchy-Schwarz factor n,
        which is a worst case over unit vectors; our rule; for Matern kernels
        Proposition 7's R is far beyond what a practical q resolves, the paper's remark
        that the theoretical counts exceed n). It minimized the likelihood error at the
        learned hyperparameters among the rules we tried (1.25 to 3 pi D, the kernel error
        bounds of Theorem 11 balanced against the tail); the price is that for densities
        with poles near the real axis (Matern, Laplacian) the kernel error at pairs a box
        width apart stops improving with q until Q reaches R: ``half_width="proposition7"``
        restores convergence in q for every pair, at the cost of many more nodes.
        """
        X = check_matrix(X, "X")
        n, d = X.shape
        n = n if n_samples is None else check_positive_int(n_samples, "n_samples")
        # s >= n is advice (the exact GP is as fast) for a size the user chose, not for the
        # default budget on small data
        default_size = n_components is None and n_nodes is None
        kernel.check_n_dims(d)
        _require_support(cls, kernel)
        epsilon = check_positive_scalar(epsilon, "epsilon")
        box = HyperparameterBox.from_kernel(kernel, d, noise_variance_lower)
        lower, upper = X.min(axis=0), X.max(axis=0)
        width = upper - lower
        bound = truncation_half_widths(kernel, box, n, epsilon)
        entrywise_bound = truncation_half_widths(kernel, box, 1, epsilon)
        panels = rule_panels(kernel, d)
        theory = theoretical_node_counts(kernel, box, bound, 0.5 * width, n, epsilon, panels)
        common = dict(n_dims=d, panels=panels, offset=0.5 * (lower + upper),
                      truncation_bound=bound, theoretical_n_nodes=theory, epsilon=epsilon)
        if isinstance(n_nodes, str) and n_nodes == "theory":
            if not np.all(np.isfinite(theory)) or np.prod(theory) > MAX_COMPONENTS:
                raise ValueError(
                    f"n_nodes='theory' needs q = {theory.tolist()} (s = {np.prod(theory):.3g} "
                    f"columns), more than {MAX_COMPONENTS}; give n_nodes as integers or "
                    "'auto', or narrow the kernel's bounds"
                )
            fmap = cls(n_nodes=theory.astype(np.int64), half_width=bound,
                       selection="theory: Theorems 11-12 with Q = R", **common)
        else:
            if isinstance(n_nodes, str) and n_nodes == "auto":
                if n != X.shape[0]:
                    raise ValueError(
                        "n_nodes='auto' searches on the training rows themselves, and a "
                        f"streaming data source holds {n} rows outside memory: give n_nodes "
                        "(integers) or n_components, or fit on arrays")
                if y is None:
                    raise ValueError("n_nodes='auto' compares likelihoods, so y (the training "
                                     "targets) must be given as an option, got y=None")
                if node_search is None:
                    raise ValueError(
                        "n_nodes='auto' needs node_search=scalegp.inference.glf_selection."
                        "search_node_counts (the estimators and FeatureMapTransformer pass it; "
                        "feature maps do not import the GP engine), got node_search=None")

                def rule_for_budget(budget):
                    """The rule of ``budget`` columns: q split by R_j D_j, Q resolved."""
                    counts = split_budget(budget, bound * width, panels)
                    return cls(n_nodes=counts, **common, half_width=resolved_half_widths(
                        counts, width, entrywise_bound))

                counts, selection = node_search(
                    rule_for_budget, [kernel] + box.extreme_kernels(kernel), X,
                    check_vector(y, "y", n_samples=n), n_components,
                    check_positive_scalar(tolerance, "tolerance"),
                    box.noise_variance_min if noise_variance is None
                    else check_positive_scalar(noise_variance, "noise_variance"),
                    as_generator(rng), box.describe())
            elif n_nodes is None:
                if n_components is None:
                    n_components = DEFAULT_SPLIT_COMPONENTS
                counts = split_budget(n_components, bound * width, panels)
                selection = f"budget n_components = {n_components}"
            else:
                counts, selection = _integer_vector(n_nodes, "n_nodes", d), "given"
            fmap = cls(n_nodes=counts, selection=selection, **common,
                       half_width=_half_widths(half_width, counts, width, bound,
                                               entrywise_bound))
        _warn_if_unresolved(fmap, kernel, box)
        if fmap.n_components >= n and not default_size:
            warnings.warn(
                f"Gauss-Legendre features have s = {fmap.n_components} columns for "
                f"n = {n} samples: training and prediction are no faster than the exact GP "
                "(hyperparameter learning still is)", UserWarning, stacklevel=2)
        return fmap

    # ----------------------------------------------------------------- evaluation
    @property
    def n_components(self) -> int:
        return int(np.prod(self.n_nodes))

    @property
    def nodes(self) -> np.ndarray:
        """The nodes eta_l of S+ (then 0 if present), shape (n_pairs [+ 1], n_dims)."""
        return self._nodes.copy()

    def basis(self, X) -> np.ndarray:
        """Phi = [cos(2 pi eta_l^T (x - c)) | sin(2 pi eta_l^T (x - c)) | 1 if 0 is a node],
        for l in S+ (the order of :attr:`nodes`), from the per-dimension factors
        (docs/gauss-legendre.md, section 2).

        Phi is returned Fortran-ordered (each feature's column contiguous): the layout in which
        the features are cheapest to build and the symmetric rank-k update of the one
        O(n s^2) pass reads fastest.
        """
        X = check_matrix(X, "X", dtype=feature_dtype(X), n_dims=self.n_dims)
        U = X - self.offset.astype(X.dtype)
        complex_dtype = np.result_type(X.dtype, np.complex64)
        factors = [_exponential_factor(U[:, j], nodes.astype(X.dtype), complex_dtype)
                   for j, (nodes, _) in enumerate(self._rules)]
        n_pairs = self.n_components // 2
        rows = np.empty((self.n_components, X.shape[0]), dtype=X.dtype)
        half_grid_exponential_rows(factors, self._positive, self._zero, rows[:n_pairs],
                                   rows[n_pairs:2 * n_pairs])
        if self._has_origin:
            rows[-1] = 1.0
        return rows.T

    has_grid_statistics = True

    def grid_basis_statistics(self, grid) -> tuple[np.ndarray, np.ndarray]:
        """(Phi^T Phi, Phi^T y) over every cell of a tensor grid (docs/gauss-legendre.md,
        section 2, "Statistics on a tensor grid"), in float64, without a pass over the cells.

        With z(x) = e_1(x_1) (x) ... (x) e_d(x_d) the full grid's exponentials
        (e_j = exp(2 pi i eta_j (x_j - c_j)), the factors :meth:`basis` multiplies), a sum over
        a product set of cells factorizes:

            H = sum_x z z^H = (x)_j E_j E_j^H,    T = sum_x z z^T = (x)_j E_j E_j^T,
            p = sum_x z(x) y(x)   (Y contracted with E_j along axis j),

        E_j the (q_j, n_j) exponentials of axis j. The columns of Phi are a = Re z and
        b = Im z at the half grid's nodes (and Re z = 1 at the node 0), so
        a a^T = Re(H + T) / 2, b b^T = Re(H - T) / 2, a b^T = Im(T - H) / 2 at those nodes,
        a^T y = Re p, b^T y = Im p. Cost O(sum_j n_j q_j^2 + N q_1 + s^2), N = prod_j n_j
        cells, where the pass costs N s^2.
        """
        if len(grid.axes) != self.n_dims:
            raise ValueError(f"the grid has {len(grid.axes)} axes, the map {self.n_dims} "
                             "dimensions")
        factors = [_exponential_factor(axis - self.offset[j], nodes, np.complex128)
                   for j, (axis, (nodes, _)) in enumerate(zip(grid.axes, self._rules))]
        H = kronecker([E @ E.conj().T for E in factors])
        T = kronecker([E @ E.T for E in factors])
        p = contract_axes(grid.values, factors)
        pairs = half_grid_flat_indices(self.n_nodes, self._positive, self._zero)
        real = pairs if not self._has_origin else np.append(pairs, np.ravel_multi_index(
            tuple(int(z[0]) for z in self._zero), tuple(int(q) for q in self.n_nodes)))
        # Phi's columns: [cos at pairs | sin at pairs | 1 at the origin], as in basis()
        n_pairs = pairs.size
        real_columns = np.r_[np.arange(n_pairs), np.arange(2 * n_pairs, self.n_components)]
        imag_columns = np.arange(n_pairs, 2 * n_pairs)
        gram = np.empty((self.n_components, self.n_components))
        gram[np.ix_(real_columns, real_columns)] = 0.5 * (H + T).real[np.ix_(real, real)]
        gram[np.ix_(imag_columns, imag_columns)] = 0.5 * (H - T).real[np.ix_(pairs, pairs)]
        cross = 0.5 * (T - H).imag[np.ix_(real, pairs)]
        gram[np.ix_(real_columns, imag_columns)] = cross
        gram[np.ix_(imag_columns, real_columns)] = cross.T
        projection = np.empty(self.n_components)
        projection[real_columns] = p.real[real]
        projection[imag_columns] = p.imag[pairs]
        return 0.5 * (gram + gram.T), projection       # H and T are symmetric up to rounding

    def _log_weights_per_node(self, kernel: Kernel) -> np.ndarray:
        return self._log_node_weights + kernel.log_spectral_density(self._nodes)

    def _per_column(self, per_node: np.ndarray) -> np.ndarray:
        """Expand (..., n_pairs [+ 1]) to the columns [cos pairs | sin pairs | origin]."""
        n_pairs = self._nodes.shape[0] - int(self._has_origin)
        pairs = per_node[..., :n_pairs]
        return np.concatenate([pairs, pairs, per_node[..., n_pairs:]], axis=-1)

    def weights(self, kernel: Kernel) -> np.ndarray:
        """w = [2 W_l p_theta(eta_l)]_{l in S+} for cos and sin (+ W_0 p_theta(0)); Eq. (11)."""
        self._check_kernel(kernel)
        return self._per_column(np.exp(self._log_weights_per_node(kernel)))

    def log_weights_grad(self, kernel: Kernel) -> np.ndarray:
        """d log w_l / d theta_i = d log p_theta(eta_l) / d theta_i, shape (n_params, s)."""
        self._check_kernel(kernel)
        return self._per_column(kernel.log_spectral_density_grad(self._nodes).T)

    def _check_kernel(self, kernel: Kernel) -> None:
        _require_support(type(self), kernel)

    def report(self) -> str:
        """The node counts and truncation chosen, and the theoretical values.

        docs/gauss-legendre.md, sections 5-7.
        """
        def fmt(values, precision=4):
            if values is None:
                return "not computed"
            return np.array2string(np.asarray(values), precision=precision, separator=", ")
        return (
            f"Gauss-Legendre features: q = {fmt(self.n_nodes)} nodes (s = {self.n_components} "
            f"columns), Q = {fmt(self.half_width)} ({self.selection}); Proposition 7: "
            f"R = {fmt(self.truncation_bound)}; Theorems 11-12: q = "
            f"{fmt(self.theoretical_n_nodes, 6)} for epsilon = {self.epsilon:g}"
        )


def _require_support(cls, kernel: Kernel) -> None:
    """Raise a ValueError naming the kernel and why the map cannot use it (the kernel's
    own reason where it has no decay class)."""
    if cls.supports(kernel):
        return
    if not kernel.shift_invariant:
        reason = "it is not shift-invariant (a semigroup kernel: use 'glf-semigroup')"
    else:
        try:
            kernel.spectral_decay_rate()
            reason = "its spectral_decay_class is None"
        except NotImplementedError as error:
            reason = str(error)
    raise ValueError(f"kernel {kernel!r} is not supported by {cls.name}: {reason}")


def _exponential_factor(u: np.ndarray, nodes: np.ndarray, dtype) -> np.ndarray:
    """exp(2 pi i eta_k u) of one dimension, feature-major: shape (q, n), for a symmetric rule
    (eta_{q-1-k} = -eta_k, ascending: docs/gauss-legendre.md, section 1): cos and sin of the
    nonnegative half only; the other half is its complex conjugate, mirrored."""
    q = nodes.size
    h = q // 2
    phase = (2 * np.pi) * np.multiply.outer(nodes[h:], u)
    Z = np.empty((q, u.size), dtype=dtype)
    np.cos(phase, out=Z.real[h:])
    np.sin(phase, out=Z.imag[h:])
    np.conjugate(Z[q - h:][::-1], out=Z[:h])
    return Z


def _warn_if_unresolved(fmap: GaussLegendreFeatures, kernel: Kernel,
                        box: HyperparameterBox) -> None:
    """Warn when, at an end of Theta's length scales, the rule keeps a share of the prior
    variance outside [1 - MASS_TOLERANCE, 1 + MASS_TOLERANCE] (:meth:`captured_mass`)."""
    shortest, longest = box.extreme_kernels(kernel)
    for end, extreme, cause in (
            ("smallest", shortest, "the truncation box drops the spectrum's tails"),
            ("largest", longest, "the nodes do not resolve the spectral density's peak")):
        mass = fmap.captured_mass(extreme)
        if abs(mass - 1.0) > MASS_TOLERANCE:
            warnings.warn(
                f"Gauss-Legendre features with q = {fmap.n_nodes.tolist()} reproduce "
                f"{100 * mass:.0f} % of the prior variance at the {end} length scales of "
                f"Theta ({np.round(extreme.length_scale, 4).tolist()}): {cause}, so there "
                "the features approximate another kernel and learned hyperparameters near "
                "that end are unreliable; raise n_components or narrow the length-scale "
                "bounds", UserWarning, stacklevel=3)


def _longest_run(mask: np.ndarray) -> tuple[int, int]:
    """[start, stop) of the longest run of True in ``mask`` ((0, 0) when there is none)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    if edges.size == 0:
        return 0, 0
    starts, stops = edges[0::2], edges[1::2]
    k = int(np.argmax(stops - starts))
    return int(starts[k]), int(stops[k])


def _integer_vector(values, name: str, n_dims: int) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "iuf" or array.ndim > 1 or (
            array.ndim == 1 and array.size != n_dims):
        raise ValueError(
            f"{name} must be a positive integer or one per input dimension ({n_dims}), "
            f"got {values!r}"
        )
    array = np.broadcast_to(array, (n_dims,))
    if np.any(array < 1) or np.any(array != np.round(array)):
        raise ValueError(f"{name} must contain positive integers, got {array.tolist()}")
    return array.astype(np.int64)


def _half_widths(half_width, n_nodes: np.ndarray, data_width: np.ndarray, bound: np.ndarray,
                 entrywise_bound: np.ndarray) -> np.ndarray:
    """Q_j of the ``half_width`` option: None -> the resolution rule, "proposition7" -> R."""
    if half_width is None:
        return resolved_half_widths(n_nodes, data_width, entrywise_bound)
    if isinstance(half_width, str) and half_width == "proposition7":
        return bound.copy()
    values = np.broadcast_to(np.asarray(half_width, dtype=float), bound.shape).copy() \
        if np.ndim(half_width) <= 1 and np.size(half_width) in (1, bound.size) else None
    if values is None or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(
            f"half_width must be None, 'proposition7', a positive number or one per input "
            f"dimension ({bound.size}), got {half_width!r}"
        )
    return values
