"""Nystrom (predictive-process) features at knots Z (docs/nystrom.md).

With K_ZZ = k(Z, Z) = L L^T (Cholesky) the inductive map is

    psi(x) = L^{-1} k(Z, x),     psi(x)^T psi(z) = k(x, Z) K_ZZ^{-1} k(Z, z),       (N.1)

the subset-of-regressors / predictive-process kernel (Banerjee, Dunson & Tokdar 2013, Eq. 2;
Williams & Seeger 2001). On any inputs Q = Psi Psi^T is the orthogonal projection of k onto the
span of k(., Z) in the RKHS, so K - Q is positive semidefinite
(:attr:`NystromFeatures.bounded_by_kernel`): the missing prior variance k(x, x) - |psi(x)|^2
is >= 0 (up to rounding) and the VFE trace term is a bound (docs/nystrom.md, section 3). The
knots are the map's saved state; they are chosen once, in :meth:`NystromFeatures.build`,
from the training inputs ("random" = PP1, "grid", "pivoted_cholesky" = PP2, "kmeans") or
given by the user.

The derivative in a log-parameter theta_j, with dK_ZZ = L dL^T + dL L^T solved for the
lower-triangular dL (Murray 2016, "Differentiation of the Cholesky decomposition"):

    dL_j = L Phi(L^{-1} dK_ZZ,j L^{-T}),   Phi(A) = tril(A) with its diagonal halved,    (N.2)
    dpsi_j(x)^T = dk(x, Z)_j L^{-T} - psi(x)^T Phi_j^T,                                  (N.3)

since d(L^{-1}) = -L^{-1} dL L^{-1}. The factor of K_ZZ and the Phi_j are per-theta work,
done once by :meth:`NystromFeatures.at`; a chunk then costs k(X, Z), its gradient and one
triangular solve.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .. import linalg, parallel
from .._validation import check_matrix
from ..kernels import Kernel
from ..stored import Array, Value
from .base import DEFAULT_N_COMPONENTS, FeatureGradient, FeatureMap, MapAtTheta, feature_dtype

#: Knot rules of :meth:`NystromFeatures.build`; a map built from a user's array records
#: "given".
KNOT_RULES = ("random", "grid", "pivoted_cholesky", "kmeans")
GIVEN = "given"
#: The selection of knots moved by the VFE gradient (:mod:`scalegp.inference.knot_learning`).
LEARNED = "learned"


@dataclass(frozen=True, eq=False)
class NystromFeatures(FeatureMap, name="nystrom"):
    """psi(x) = L_ZZ^{-1} k(Z, x) at the knots Z (module docstring, Eq. N.1).

    Attributes
    ----------
    knots : ndarray of shape (m, n_dims)
        Z, chosen from the training inputs by :meth:`build` (or given).
    selection : str
        How the knots were chosen: one of :data:`KNOT_RULES`, "given", or "learned" (moved
        by the VFE gradient, :mod:`scalegp.inference.knot_learning`).
    """

    knots: np.ndarray
    selection: str = GIVEN

    STORED = {"knots": Array(("m", "d")), "selection": Value("str")}

    description = ("Nystrom / predictive-process features at knots (random, grid, pivoted "
                   "Cholesky, k-means or given): psi(x) = L_ZZ^-1 k(Z, x)")
    reference = "Williams & Seeger 2001; Banerjee, Dunson & Tokdar 2013"
    #: K - Psi Psi^T is positive semidefinite on any inputs (a projection in the RKHS).
    bounded_by_kernel = True
    has_own_gradient = True        # NystromAtTheta.own_gradient
    #: build receives None for the estimator's n_components=None: DEFAULT_N_COMPONENTS knots
    #: for a rule, the array's length for given knots.
    default_n_components = None

    def __post_init__(self):
        knots = check_matrix(self.knots, "knots", n_dims=self.n_dims)
        if knots.shape[0] < 1:
            raise ValueError("knots must hold at least one row")
        object.__setattr__(self, "knots", knots)
        if self.selection not in KNOT_RULES + (GIVEN, LEARNED):
            raise ValueError(f"selection must be one of {KNOT_RULES + (GIVEN, LEARNED)}, got "
                             f"{self.selection!r}")

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Every kernel: the map needs only kernel values and their gradient."""
        return True

    @classmethod
    def build(cls, X, kernel: Kernel, n_components, rng=None, *, knots="pivoted_cholesky",
              **options) -> "NystromFeatures":
        """Choose the knots from the training inputs X (the only data-dependent step).

        Parameters
        ----------
        X : array of shape (n, d)
        kernel : Kernel
            The kernel at the starting hyperparameters: "pivoted_cholesky" selects the pivots
            of k(X, X) at these values, and the knots stay fixed while theta is learned.
        n_components : int or None
            m; None: :data:`~scalegp.features.base.DEFAULT_N_COMPONENTS` for a rule, the
            number of rows of given knots.
        rng : numpy.random.Generator
            For "random" (m rows without replacement) and "kmeans" (k-means++ seeding).
        knots : {"random", "grid", "pivoted_cholesky", "kmeans"} or array of shape (m, d)
            "random": PP1 of Tables 1-2; "grid": q^d equispaced points on the bounding box of
            X, q = floor(m^(1/d)) >= 2 (PP1 of Table 3; m is rounded down to q^d);
            "pivoted_cholesky": PP2, the pivots of the partial pivoted Cholesky factorization
            of k(X, X) (m kernel columns, O(n m^2); fewer knots when the residual diagonal
            reaches rounding level first); "kmeans": the centroids of Lloyd's k-means
            (scikit-learn, one k-means++ start).
        """
        if options:
            raise TypeError(f"nystrom got unexpected options {sorted(options)}; it takes "
                            "knots=")
        X = check_matrix(X, "X")
        kernel.check_n_dims(X.shape[1])
        if not isinstance(knots, str):
            Z = check_matrix(knots, "knots", n_dims=X.shape[1])
            if n_components is not None and n_components != Z.shape[0]:
                raise ValueError(f"n_components={n_components} disagrees with the "
                                 f"{Z.shape[0]} given knots; pass n_components=None")
            return cls(n_dims=X.shape[1], knots=Z.copy(), selection=GIVEN)
        if knots not in KNOT_RULES:
            raise ValueError(f"knots must be one of {KNOT_RULES} or an array of shape "
                             f"(m, {X.shape[1]}), got {knots!r}")
        m = DEFAULT_N_COMPONENTS if n_components is None else int(n_components)
        if m < 1:
            raise ValueError(f"n_components must be >= 1, got {m}")
        rng = np.random.default_rng(rng)
        Z = _SELECTORS[knots](X, kernel, m, rng)
        return cls(n_dims=X.shape[1], knots=Z, selection=knots)

    @property
    def n_components(self) -> int:
        return self.knots.shape[0]

    def at(self, kernel: Kernel) -> "NystromAtTheta":
        return NystromAtTheta(self, kernel)

    def diagnostics(self, kernel: Kernel) -> dict:
        """The knot rule, m and cond_2(K_ZZ) at the kernel's hyperparameters."""
        return {"knots": self.selection, "n_knots": self.n_components,
                "knot_condition_number": self.at(kernel).condition_number}


# ------------------------------------------------------------------------ knot rules
def _check_count(m: int, n: int, rule: str) -> None:
    if m > n:
        raise ValueError(f"knots={rule!r} selects {m} of the {n} training inputs; ask for "
                         f"n_components <= {n}")


def _random_knots(X, kernel, m, rng):
    _check_count(m, X.shape[0], "random")
    return X[np.sort(rng.choice(X.shape[0], size=m, replace=False))].copy()


def _grid_knots(X, kernel, m, rng):
    d = X.shape[1]
    q = int(np.floor(m ** (1.0 / d) + 1e-9))
    if d > 1 and q < 2:
        raise ValueError(f"knots='grid' needs n_components >= 2^d = {2**d} in d = {d} "
                         "dimensions; use 'pivoted_cholesky' or 'kmeans'")
    low, high = X.min(axis=0), X.max(axis=0)
    if q > 1 and np.any(high <= low):
        raise ValueError("knots='grid' needs every input column to vary (column "
                         f"{int(np.flatnonzero(high <= low)[0])} is constant)")
    axes = [np.linspace(lo, hi, q) if q > 1 else np.array([0.5 * (lo + hi)])
            for lo, hi in zip(low, high)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, d)


def _pivoted_cholesky_knots(X, kernel, m, rng):
    _, pivots = linalg.pivoted_cholesky(kernel.diag(X), lambda i: kernel(X, X[i:i + 1])[:, 0],
                                        max_rank=m)
    return X[pivots].copy()


def _kmeans_knots(X, kernel, m, rng):
    from sklearn.cluster import KMeans      # scikit-learn is a dependency; imported on use
    _check_count(m, X.shape[0], "kmeans")
    seed = int(rng.integers(2**31 - 1))
    return KMeans(n_clusters=m, n_init=1, random_state=seed).fit(X).cluster_centers_


_SELECTORS = {"random": _random_knots, "grid": _grid_knots,
              "pivoted_cholesky": _pivoted_cholesky_knots, "kmeans": _kmeans_knots}


# ------------------------------------------------------------------------ at theta
class NystromAtTheta(MapAtTheta):
    """The map at theta: L (K_ZZ = L L^T, with the jitter ``linalg.cholesky`` may add, then
    recorded in ``jitter``, warned above
    :data:`scalegp.linalg.KNOT_JITTER_QUIET`) once; the Phi_j of Eq. N.2 on first use."""

    def __init__(self, feature_map: NystromFeatures, kernel: Kernel):
        super().__init__(feature_map, kernel)
        self.knot_gram = kernel(feature_map.knots)
        self.factor, self.jitter = linalg.cholesky(self.knot_gram, name="K_ZZ (the knots' "
                                                   "kernel matrix)",
                                                   quiet_below=linalg.KNOT_JITTER_QUIET)

    @functools.cached_property
    def condition_number(self) -> float:
        """cond_2(K_ZZ) = lambda_max / lambda_min of the matrix factorized."""
        eigenvalues = linalg.eigenvalues(self.knot_gram)
        return float(eigenvalues[-1] / eigenvalues[0]) if eigenvalues[0] > 0 else np.inf

    @functools.cached_property
    def cholesky_derivatives(self) -> np.ndarray:
        """Phi_j = Phi(L^{-1} dK_ZZ,j L^{-T}) of Eq. N.2, shape (n_params, m, m)."""
        L = self.factor
        grads = self.kernel.gradient(self.feature_map.knots)
        out = np.empty_like(grads)
        for j, dK in enumerate(grads):
            A = linalg.solve_lower(L, linalg.solve_lower(L, dK).T)   # L^{-1} dK L^{-T}
            out[j] = np.tril(A, -1) + 0.5 * np.diag(np.diag(A))
        return out

    def own_gradient(self, items, statistics, system, *, trace_weight: float = 0.0,
                     n_jobs: int = 1, knots: bool = False, row_weights=None):
        """(dF/dtheta's kernel part, dF/dZ or None) from one pass over the (chunk, Psi)
        ``items`` on ``n_jobs`` threads, F = log p (DTC) or the VFE bound (``trace_weight``
        t = 1/s2; docs/nystrom.md, Eqs. N.3, N.4, V.3 and V.4):

            <W, dPsi_j> = sum(B o dK_XZ,j) - <Phi_j, C>,    B = W L^{-1} = dF/dK_XZ,
            C = sum over the chunks of W^T Psi,

        each chunk's B in one product (:class:`_KnotSpaceSensitivity`) and its share
        sum(B o dK_XZ,j) (with ``knots=True`` also the knots' cross term) from one kernel
        evaluation (:meth:`~scalegp.kernels.Kernel.gradient_inner_and_input_contraction`);
        C from the statistics. The engine's general chunk gradient
        (:func:`scalegp.engine.statistics.chunk_gradient`) gives the same numbers at about twice
        the flops.

        ``row_weights``: for known noise variances, a function (chunk, Psi) -> w^ (w^_i =
        s2 / (s2 + v_i); None for a chunk without them): row i of W, and so of B, is scaled
        by w^_i, and the statistics are the weighted ones (G = Psi^T W^ Psi, b = Psi^T W^ y),
        so C keeps its form. The noise part is not here (it is the closed form
        :func:`scalegp.engine.gradients.noise_gradient` for homoscedastic noise, a pass of
        :func:`scalegp.engine.statistics.accumulate_noise_gradient` otherwise).
        """
        sensitivity = _KnotSpaceSensitivity(self, statistics, system, trace_weight)
        add = functools.partial(self._add_shares, sensitivity, trace_weight, knots, row_weights)
        totals = parallel.reduce_chunks(
            items, add,
            [_GradientShares(self.kernel.n_params, self.feature_map.knots.shape)
             for _ in range(n_jobs)], rows=lambda item: item[0].X.shape[0])
        kernel = (sum((t.kernel for t in totals[1:]), totals[0].kernel)
                  + self.factor_gradient(sensitivity.summed_product))
        if not knots:
            return kernel, None
        cross = sum((t.cross for t in totals[1:]), totals[0].cross)
        return kernel, self.knot_gradient(cross, sensitivity.summed_product)

    def _add_shares(self, sensitivity, trace_weight, knots, row_weights, total, item) -> None:
        chunk, Psi = item
        B = sensitivity(Psi, chunk.y)
        weights = None if row_weights is None else row_weights(chunk, Psi)
        if weights is not None:
            B *= weights[:, None]
        inner, cross = self.kernel.gradient_inner_and_input_contraction(
            chunk.X, self.feature_map.knots, B, input_contraction=knots)
        total.kernel += inner
        if trace_weight:
            diagonal_gradient = self.kernel.diag_gradient(chunk.X)
            total.kernel -= 0.5 * trace_weight * (diagonal_gradient.sum(axis=1) if weights is None
                                                  else diagonal_gradient @ weights)
        if knots:
            total.cross += cross

    def factor_gradient(self, C) -> np.ndarray:
        """The K_ZZ part of dF/dtheta, -<Phi_j, C> for each kernel parameter j, from the summed
        C = W^T Psi (Eq. N.3)."""
        return -np.einsum("pij,ij->p", self.cholesky_derivatives, C)

    def knot_gradient(self, cross, C) -> np.ndarray:
        """dF/dZ (m, d) from the summed cross terms sum_i B_ia dk(x_i, z_a)/dz_a and the summed
        C = W^T Psi (Eq. N.4):

            dF/dK_ZZ = -L^{-T} sym(Phi(C)) L^{-1},     <W, Psi Phi^T> = <Phi(C), A>,

        with A = L^{-1} dK_ZZ L^{-T} symmetric, and each knot moving row and column a of K_ZZ
        (the factor 2; dk(z_a, z_a)/dz_a = 0 for a stationary kernel)."""
        L = self.factor
        P = np.tril(C, -1) + 0.5 * np.diag(np.diag(C))                     # Phi(C)
        S = 0.5 * (P + P.T)
        D = -linalg.solve_lower(L, linalg.solve_lower(L, S, transpose=True).T,
                                transpose=True)                            # L^{-T} S L^{-1}
        Z = self.feature_map.knots
        return cross + self.kernel.input_gradient_contraction(Z, Z, 2.0 * D)

    def _cross(self, X) -> np.ndarray:
        return self.kernel(X, self.feature_map.knots)

    def _solve(self, B) -> np.ndarray:
        """B L^{-T} for rows B (n, m)."""
        return linalg.solve_lower(self.factor, B.T).T

    def features(self, X) -> np.ndarray:
        X = self.check_input(X)
        return self._solve(self._cross(X)).astype(feature_dtype(X), copy=False)

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Psi and dPsi_j = dk(X, Z)_j L^{-T} - Psi Phi_j^T (Eq. N.3)."""
        X = self.check_input(X)
        Psi = self._solve(self._cross(X))
        dK = self.kernel.gradient(X, self.feature_map.knots)
        dPsi = np.stack([self._solve(dK_j) - Psi @ Phi_j.T
                         for dK_j, Phi_j in zip(dK, self.cholesky_derivatives)])
        dtype = feature_dtype(X)
        return Psi.astype(dtype, copy=False), dPsi.astype(dtype, copy=False)

    def features_and_grad_operator(self, X, features=None):
        X = self.check_input(X)
        Psi = (self._solve(self._cross(X)) if features is None
               else np.asarray(features, dtype=np.float64))
        dK = self.kernel.gradient(X, self.feature_map.knots)
        return Psi, NystromGradient(dK, self.factor, Psi, self.cholesky_derivatives)


class _GradientShares:
    """One thread's sums over its chunks: the k(X, Z) part of the kernel-parameter gradient
    and the knots' cross term sum_i B_ia dk(x_i, z_a)/dz_a (Eq. N.4)."""

    def __init__(self, n_params: int, knot_shape):
        self.kernel = np.zeros(n_params)
        self.cross = np.zeros(knot_shape)


class _KnotSpaceSensitivity:
    """B = W L^{-1} = dF/dK_XZ of a chunk in one product with its features,

        B = r u^T - Psi E,    u = L^{-T} beta / s2,    E = (M^{-1} - t I) L^{-1},

    from W = dF/dPsi = r beta^T / s2 - Psi (M^{-1} - t I) (the kernel part of
    :func:`scalegp.engine.statistics.chunk_gradient` is <W, dPsi_j>),
    r = y - Psi beta, K_ZZ = L L^T: u and E once per evaluation (O(m^3)), then 2 n m^2 flops
    per pass where forming W and solving with L takes 3 n m^2. ``summed_product`` is
    C = sum over the chunks of W^T Psi from the statistics alone (no pass):

        C = beta (b - G beta)^T / s2 - (M^{-1} - t I) G,    G = Psi^T Psi, b = Psi^T y.
    """

    def __init__(self, at_map: NystromAtTheta, statistics, system, trace_weight: float):
        s2 = system.noise_variance + system.jitter         # as in engine.chunk_gradient
        A = system.inverse - trace_weight * np.eye(system.beta.shape[0])     # symmetric
        self.beta = system.beta
        self.u = linalg.solve_lower(at_map.factor, system.beta, transpose=True) / s2
        self.E = linalg.solve_lower(at_map.factor, A, transpose=True).T
        G = statistics.gram
        self.summed_product = (np.outer(system.beta, statistics.projection - G @ system.beta)
                               / s2 - A @ G)

    def __call__(self, Psi, y) -> np.ndarray:
        return np.outer(y - Psi @ self.beta, self.u) - Psi @ self.E


class NystromGradient(FeatureGradient):
    """dPsi_j = dK_j L^{-T} - Psi Phi_j^T (Eq. N.3) without forming it:

        dPsi_j v = dK_j (L^{-T} v) - Psi (Phi_j^T v),                      O(n m) per j,
        sum_l A_rl (dPsi_j)_rl = sum_k (A L^{-1})_rk dK_j,rk - sum_k (A Phi_j)_rk Psi_rk.
    """

    def __init__(self, dK, factor, Psi, cholesky_derivatives):
        self.dK = dK
        self.factor = factor
        self.Psi = Psi
        self.Phi = cholesky_derivatives

    def matvec(self, v):
        u = linalg.solve_lower(self.factor, v, transpose=True)
        Phi_T_v = np.einsum("plk,l->pk", self.Phi, v)                    # Phi_j^T v
        return self.dK @ u - Phi_T_v @ self.Psi.T

    def row_inner(self, A):
        B = linalg.solve_lower(self.factor, A.T, transpose=True).T       # A L^{-1}
        return np.stack([np.einsum("rk,rk->r", B, dK_j)
                         - np.einsum("rk,rk->r", A @ Phi_j, self.Psi)
                         for dK_j, Phi_j in zip(self.dK, self.Phi)])
