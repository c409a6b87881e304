"""The random-projection GP (Banerjee, Dunson & Tokdar, Biometrika 2013).

k_RP(x, z) = (Phi k_{f,x})^T (Phi K Phi^T)^{-1} Phi k_{f,z} is written as psi(x)^T psi(z)
with the inductive feature map

    psi(x) = B^{-1} Phi k(X, x),   B B^T = Phi K Phi^T   (docs/random-projection.md, Eq. 1)

where X are the training inputs, K = k(X, X) and Phi (m x n, orthonormal rows) comes from a
sketch Omega drawn once at build: Phi^T spans K Omega (Algorithm 1) or is cut from it by the
Nystrom eigen-truncation of Algorithm 2 (docs/random-projection.md). Phi depends on theta
through K, so it is recomputed per theta in :meth:`RandomProjectionFeatures.at` (two passes
over K in row blocks, O(n r) memory), and the gradient follows by differentiating the QR,
singular vectors, Cholesky factor and eigenvectors involved (docs/random-projection.md,
"Gradient"). Cost: Theta(n^2) kernel evaluations per theta, so n is capped at
MAX_TRAINING_POINTS.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import numpy as np

from .. import linalg
from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from ..stored import Array, Value
from . import projections as sketching
from .base import FeatureMap, MapAtTheta, feature_dtype

#: Largest n accepted: one theta costs about 2 n^2 kernel evaluations (and 2 n^2 P more for
#: the gradient); measured 1.7 s (gradient 3.6 s more) at n = 5,000, m = 100, d = 2 on one
#: core, so about 45 minutes (and 1.5 hours) at the cap (docs/random-projection.md, "Row
#: blocks and the cap").
MAX_TRAINING_POINTS = 200_000
REDUCTIONS = ("range", "nystrom")


def _check_size(n: int) -> None:
    if n > MAX_TRAINING_POINTS:
        raise ValueError(
            f"random-projection needs Theta(n^2) kernel evaluations per hyperparameter value "
            f"and is limited to n <= {MAX_TRAINING_POINTS}, got n = {n}; use pivoted "
            "Cholesky knots (approximation='nystrom', knots='pivoted_cholesky': O(n m^2)) or "
            "Gauss-Legendre features (approximation='glf': linear in n, streamed)")


def _is_finite_number(value, minimum: float, strict: bool) -> bool:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    try:
        value = float(value)
    except OverflowError:
        return False
    return math.isfinite(value) and (value > minimum if strict else value >= minimum)


def _check_report(target_error, certified_error, certificate) -> None:
    """Algorithm 2's report: all None (fixed rank), or epsilon > 0, an error >= 0 and the
    certificate's name."""
    if target_error is None and certified_error is None and certificate is None:
        return
    if not (_is_finite_number(target_error, 0.0, True)
            and _is_finite_number(certified_error, 0.0, False)
            and certificate in sketching.CERTIFICATES):
        raise ValueError(
            "target_error, certified_error and certificate must all be None (fixed rank) or "
            "a positive number, a non-negative number and one of "
            f"{', '.join(sketching.CERTIFICATES)}; got {target_error!r}, "
            f"{certified_error!r}, {certificate!r}")


@dataclass(frozen=True, eq=False)
class RandomProjectionFeatures(FeatureMap, name="random-projection"):
    """Random-projection features psi(x) = B^{-1} Phi k(X, x) (docs/random-projection.md,
    sections 1-5).

    Attributes
    ----------
    inputs : ndarray (n, d)
        The points the projection is built on: the training inputs (plus the prediction
        points in the transductive mode of the paper's tables).
    probes : ndarray (n, r)
        Omega, drawn at build (Gaussian, Rademacher or sphere; theta-independent).
    rank : int
        m, the number of features.
    oversampling : int
        r - m >= 0: the sketch's extra columns (Algorithm 1's oversampling; for Algorithm 2
        the probes of the range found beyond the truncated rank).
    reduction : str
        How r columns become m when m < r: "range" (Algorithm 1, step 2: Phi^T = the m leading
        left singular vectors of K Omega) or "nystrom" (Algorithm 2: the Nystrom
        approximation on range(K Omega) truncated to its m leading eigenvectors,
        psi_m = V_m^T psi_r with V the right singular vectors of C = [psi_r(x_i)^T]_i).
    target_error : float or None
        Algorithm 2's target error epsilon (None: fixed rank). Reported, not used after build: the
        rank is fixed at build (docs/random-projection.md, "Learning at a fixed rank").
    certified_error : float or None
        The certified Frobenius error at build (exact, or the trace bound; see
        ``certificate``).
    certificate : str or None
        "frobenius" or "trace" (Algorithm 2), None for fixed rank.
    """

    inputs: np.ndarray
    probes: np.ndarray
    rank: int
    oversampling: int = 0
    reduction: str = "range"
    target_error: float | None = None
    certified_error: float | None = None
    certificate: str | None = None

    # the points the projection is built on, and the sketch
    STORED = {"inputs": Array(("points", "d")),
              "probes": Array(("points", "sketch_columns")),
              "rank": Value("int", "at_least_one"),
              "oversampling": Value("int", "nonnegative"),
              "reduction": Value("str", choices=REDUCTIONS),
              "target_error": Value("number", "positive", nullable=True),
              "certified_error": Value("number", "nonnegative", nullable=True),
              "certificate": Value("str", nullable=True, choices=sketching.CERTIFICATES)}

    #: Q = K Phi^T (Phi K Phi^T)^{-1} Phi K (truncated or not) is a Nystrom approximation of
    #: K on the span of K Phi^T, so K - Q is positive semidefinite: the VFE bound holds.
    bounded_by_kernel = True
    description = ("random projection of K (Algorithm 1 fixed rank, Algorithm 2 fixed "
                   "accuracy): psi(x) = B^{-1} Phi k(X, x)")
    reference = "Banerjee, Dunson & Tokdar, Biometrika 2013"

    def __post_init__(self):
        inputs = check_matrix(self.inputs, "inputs", n_dims=self.n_dims)
        probes = check_matrix(self.probes, "probes")
        if probes.shape[0] != inputs.shape[0]:
            raise ValueError(f"probes (the sketch) must have one row per input "
                             f"({inputs.shape[0]}), got shape {probes.shape}")
        _check_size(inputs.shape[0])
        rank = check_positive_int(self.rank, "rank")
        oversampling = check_positive_int(self.oversampling, "oversampling", minimum=0)
        if probes.shape[1] != rank + oversampling:
            raise ValueError(f"the sketch must have rank + oversampling = {rank + oversampling} "
                             f"columns, got shape {probes.shape}")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}; got "
                             f"{self.reduction!r}")
        _check_report(self.target_error, self.certified_error, self.certificate)
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "probes", probes)
        object.__setattr__(self, "rank", rank)
        object.__setattr__(self, "oversampling", oversampling)

    # ----------------------------------------------------------------- construction
    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *, epsilon=None,
              oversampling: int = 0, sketch: str = "gaussian", certificate: str = "frobenius",
              transductive_inputs=None):
        """Draw the sketch (Algorithm 1) or run Algorithm 2 at the kernel's hyperparameters.

        Parameters
        ----------
        X : array (n, d)
            Training inputs; n <= MAX_TRAINING_POINTS.
        kernel : Kernel
            The kernel (Algorithm 2 runs at its current hyperparameters).
        n_components : int
            m (fixed rank), or the largest rank allowed (fixed accuracy). A value above n is
            reduced to n: a projection has at most n independent directions, and at m = n it
            is exact (Q^RP = K).
        epsilon : float, optional
            Fixed accuracy: target Frobenius error ||K - Q^RP||_F <= epsilon (absolute, on K
            at the build hyperparameters). The rank found is ``rank``.
        oversampling : int
            Fixed rank: r - m extra sketch columns (0, the paper's r = m, by default).
        sketch : {"gaussian", "rademacher", "sphere"}
        certificate : {"frobenius", "trace"}
            Fixed accuracy: truncate on the exact Frobenius error (one more pass over K) or on
            its upper bound tr(K - Q) (no pass).
        transductive_inputs : array (n_p, d), optional
            The paper's transductive formulation, for reproducing its tables only: the
            projection is built over X and these prediction points together.
        """
        X = check_matrix(X, "X")
        if transductive_inputs is not None:
            X = np.vstack([X, check_matrix(transductive_inputs, "transductive_inputs",
                                           n_dims=X.shape[1])])
        _check_size(X.shape[0])
        kernel.check_n_dims(X.shape[1])
        rank = min(check_positive_int(n_components, "n_components"), X.shape[0])
        rng = as_generator(rng)
        if epsilon is None:
            oversampling = check_positive_int(oversampling, "oversampling", minimum=0)
            width = min(rank + oversampling, X.shape[0])
            return cls(n_dims=X.shape[1], inputs=X,
                       probes=sketching.draw_sketch(rng, X.shape[0], width, sketch), rank=rank,
                       oversampling=width - rank)
        if oversampling:
            raise TypeError("oversampling applies to the fixed rank (epsilon=None) only")
        result = sketching.fixed_accuracy(sketching.KernelOperator(kernel, X), epsilon, rng,
                                          max_rank=rank, certificate=certificate,
                                          sketch=sketch)
        return cls(n_dims=X.shape[1], inputs=X, probes=result.probes, rank=result.rank,
                   oversampling=result.probes.shape[1] - result.rank, reduction="nystrom",
                   target_error=float(epsilon),
                   certified_error=result.error, certificate=certificate)

    # ----------------------------------------------------------------- evaluation
    @property
    def n_components(self) -> int:
        return self.rank

    def at(self, kernel: Kernel) -> "RandomProjectionAtTheta":
        return RandomProjectionAtTheta(self, kernel)

    def report(self, kernel: Kernel) -> dict:
        """What the projection is at the kernel's hyperparameters (docs/random-projection.md,
        "The certificate"): the rank m, the sketch width r, cond(Phi K Phi^T) of the matrix
        factorized, the jitter it needed, tr(K - Q^RP), and Algorithm 2's build report."""
        at = self.at(kernel)
        return dict(rank=self.rank, sketch_columns=self.probes.shape[1],
                    condition_number=at.condition_number, jitter=at.jitter,
                    trace_certificate=at.trace_certificate, target_error=self.target_error,
                    certified_error=self.certified_error, certificate=self.certificate)


class RandomProjectionAtTheta(MapAtTheta):
    """The projection at one theta: Psi = k(x, X) T with T = Phi^T B^{-T} (n x m), computed
    once (two passes over K); the gradient's operators H_p (dPsi_p = k(x, X) H_p +
    dk_p(x, X) T) on the first request (two passes over k and dk).

    Attributes
    ----------
    transform : ndarray (n, m)
        T.
    condition_number : float
        cond(Phi K Phi^T), the r x r (or m x m) matrix factorized
        (docs/decisions.md, "Condition numbers of the projections").
    trace_certificate : float
        tr(K - Q^RP) >= ||K - Q^RP||_F at this theta.
    jitter : float
        Added to Phi K Phi^T's diagonal for the factorization (0 when none was needed).
    """

    def __init__(self, feature_map: RandomProjectionFeatures, kernel: Kernel):
        super().__init__(feature_map, kernel)
        self.operator = sketching.KernelOperator(kernel, feature_map.inputs)
        Y = self.operator.matmat(feature_map.probes)
        self.Q_sketch, self.R_sketch = sketching.positive_qr(Y)        # Y = Q R
        m, r = feature_map.rank, Y.shape[1]
        self.reduced = m < r
        truncated = self.reduced and feature_map.reduction == "nystrom"
        if self.reduced and feature_map.reduction == "range":
            W, s, Zt = linalg.svd(self.R_sketch)                      # Y = (Q W) S Z^T
            Z = sketching.fix_signs(Zt.T)
            W = W * np.sign(np.sum(Zt.T * Z, axis=0))                   # keep R Z = W S
            self.left, self.singular_values, self.Z = self.Q_sketch @ W, s, Z
            basis = self.left[:, :m]
        else:
            basis = self.Q_sketch
        self.basis = basis
        self.nystrom = sketching.nystrom(self.operator, basis)
        B = self.nystrom.cholesky_factor
        self.base_transform = linalg.solve_lower(B, basis.T).T
        C = self.nystrom.C                                              # K Phi^T B^{-T}
        if truncated:
            self.V = sketching.fix_signs(self.nystrom.V)
            self.transform = self.base_transform @ self.V[:, :m]
            C = C @ self.V[:, :m]
        else:
            self.transform = self.base_transform
        self.condition_number = self.nystrom.condition_number
        self.jitter = self.nystrom.jitter
        self.trace_certificate = float(np.sum(self.operator.diagonal()) - np.sum(C**2))

    def _inputs(self, X) -> tuple[np.ndarray, np.dtype]:
        return self.check_input(X).astype(np.float64), feature_dtype(X)

    def features(self, X) -> np.ndarray:
        """Psi = k(X, inputs) T (docs/random-projection.md, "The feature map"), Eq. (1)."""
        X, dtype = self._inputs(X)
        return self.operator.rows_times(X, self.transform).astype(dtype)

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        """(Psi, dPsi): dPsi_p = k(X, inputs) H_p + dk_p(X, inputs) T (docs/random-projection.md,
        "Gradient")."""
        X, dtype = self._inputs(X)
        H = self.gradient_operators
        P, n, m = H.shape
        stacked = np.concatenate([self.transform, H.transpose(1, 0, 2).reshape(n, P * m)],
                                 axis=1)
        KV, dKT = self.operator.rows_times(X, stacked, grad_V=self.transform)
        Psi = KV[:, :m]
        dPsi = KV[:, m:].reshape(X.shape[0], P, m).transpose(1, 0, 2) + dKT
        return Psi.astype(dtype), dPsi.astype(dtype)

    @functools.cached_property
    def gradient_operators(self) -> np.ndarray:
        """H_p (n_params, n, m) with d psi(x)^T / d theta_p = k(x, X) H_p + dk_p(x, X) T.

        With A = (the sketch's image whose range is Phi^T), A = Phi^T R_A (R_A upper
        triangular, positive diagonal), psi = L^{-1} A^T k_x for L = chol(A^T K A) = R_A^T B
        (invariant under A -> A R for such R), and dA~ = dA R_A^{-1}:

            X_p = B^{-1} (dA~^T K Phi^T + Phi K dA~ + Phi dK_p Phi^T) B^{-T},
            Phi_p = tril(X_p) - diag(X_p) / 2        (d L = L Phi_p),
            H_p = dA~ B^{-T} - T_r Phi_p^T,

        then, for the Nystrom truncation psi_m = V_m^T psi_r, H_p V_m + T_r dV_m with dV_m
        from the eigenvector perturbation of C^T C.
        """
        fmap = self.feature_map
        truncated = self.reduced and fmap.reduction == "nystrom"
        _, dY = self.operator.matmat(fmap.probes, grad_V=fmap.probes)         # dK_p Omega
        dA = self._basis_derivative(dY)                                          # (P, n, m')
        P, n, width = dA.shape
        # K dA~ only for the truncation's dC; otherwise the pass gives dK_p Phi^T alone
        V = dA.transpose(1, 0, 2).reshape(n, P * width) if truncated else self.basis[:, :1]
        K_dA, dK_basis = self.operator.matmat(V, grad_V=self.basis)
        B = self.nystrom.cholesky_factor
        K1 = self.nystrom.C @ B.T                                               # K Phi^T
        inner = np.swapaxes(dA, 1, 2) @ K1 + K1.T @ dA + self.basis.T @ dK_basis
        X_p = _solve_both_sides(B, inner)
        Phi_p = np.tril(X_p) - 0.5 * np.einsum("pii->pi", X_p)[:, :, None] * np.eye(width)
        T_r = self.base_transform
        H = _right_solve_transpose(B, dA) - T_r @ np.swapaxes(Phi_p, 1, 2)
        if not truncated:
            return H
        m, C = fmap.rank, self.nystrom.C
        K_dA = K_dA.reshape(n, P, width).transpose(1, 0, 2)
        dC = (_right_solve_transpose(B, K_dA) + _right_solve_transpose(B, dK_basis)
              - C @ np.swapaxes(Phi_p, 1, 2))
        dG = np.swapaxes(dC, 1, 2) @ C
        dG = dG + np.swapaxes(dG, 1, 2)
        dV = _eigenvector_derivative(self.V, self.nystrom.singular_values**2, dG, m)
        return H @ self.V[:, :m] + T_r @ dV

    def _basis_derivative(self, dY: np.ndarray) -> np.ndarray:
        """dA~ = dA R_A^{-1} for the basis Phi^T = A R_A^{-1}: A = Y = K Omega (R_A = R), or
        A = Y Z_m (R_A = S_m) for the m leading singular vectors of Y, where
        dz_i = sum_{j != i} z_j (z_j^T dG z_i) / (s_i^2 - s_j^2), G = Y^T Y."""
        if not (self.reduced and self.feature_map.reduction == "range"):
            return _right_solve_upper(self.R_sketch, dY)
        m, s, Z = self.feature_map.rank, self.singular_values, self.Z
        E = self.left.T @ dY @ Z                                   # (P, r, r): q_j^T dY z_i
        coupling = s[None, :] * np.swapaxes(E, 1, 2) + s[:, None] * E   # z_j^T dG z_i
        gaps = s[None, :] ** 2 - s[:, None] ** 2                   # (j, i): s_i^2 - s_j^2
        np.fill_diagonal(gaps, np.inf)
        c = coupling / gaps                                        # dz_i = sum_j z_j c_ji
        Y_dZ = self.left @ (s[:, None] * c[:, :, :m])              # Y z_j = s_j q_j
        return (dY @ Z[:, :m] + Y_dZ) / s[:m]


def _solve_both_sides(B: np.ndarray, A: np.ndarray) -> np.ndarray:
    """B^{-1} A_p B^{-T} for a stack A (P, k, k)."""
    left = np.stack([linalg.solve_lower(B, a) for a in A])
    return np.stack([linalg.solve_lower(B, a.T).T for a in left])


def _right_solve_transpose(B: np.ndarray, A: np.ndarray) -> np.ndarray:
    """A_p B^{-T} for a stack A (P, n, k), B lower triangular."""
    return np.stack([linalg.solve_lower(B, a.T).T for a in A])


def _right_solve_upper(R: np.ndarray, A: np.ndarray) -> np.ndarray:
    """A_p R^{-1} for a stack A (P, n, k), R upper triangular."""
    return np.stack([linalg.solve_upper(R, a.T, transpose=True).T for a in A])


def _eigenvector_derivative(V: np.ndarray, eigenvalues: np.ndarray, dG: np.ndarray,
                            m: int) -> np.ndarray:
    """dv_i = sum_{j != i} v_j (v_j^T dG v_i) / (g_i - g_j) for the m leading eigenvectors
    of a symmetric G = V diag(g) V^T (all eigenpairs known), shape (P, r, m)."""
    coupling = np.swapaxes(V, 0, 1) @ dG @ V[:, :m]                    # (P, r, m)
    gaps = eigenvalues[None, :m] - eigenvalues[:, None]                # (j, i)
    gaps[np.arange(m), np.arange(m)] = np.inf
    return V @ (coupling / gaps)
