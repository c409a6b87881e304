"""Dense linear algebra: the only module of scalegp that factorizes a matrix or calls BLAS.

* :func:`symmetric_rank_k_update`: G + Psi^T Psi by BLAS ``?syrk`` (half a GEMM), upper
  triangle only, in place; :func:`symmetrize_upper` completes the matrix.
* :func:`cholesky`: Cholesky with adaptive jitter (relative to the mean diagonal, dtype-aware),
  a :class:`NumericalWarning` stating the amount, and :class:`NotPositiveDefiniteError` after
  the last try. The jitter actually used is returned so callers can record it.
* :func:`batched_cholesky`: the Cholesky factors of a stack of matrices in one LAPACK call
  (numpy's batched ``potrf``), each matrix that fails refactored alone by :func:`cholesky`.
* :func:`batched_triangular_inverse`: L^{-1} of a stack of small triangular factors, by
  recursion into batched matrix products (the Vecchia blocks).
* :func:`solve_lower`, :func:`cho_solve`, :func:`logdet_from_cholesky`: solves, never inverses.
* :func:`pivoted_cholesky`: partial pivoted Cholesky of a matrix given by its diagonal and a
  column oracle (rank- or tolerance-limited), for landmark selection.
* :func:`symmetric_eigen`: the eigen-decomposition of a symmetric matrix; :func:`eigh`,
  :func:`eigenvalues`, :func:`qr`, :func:`svd`, :func:`condition_number`, :func:`solve_upper`
  for the feature maps' own algebra, and :func:`solve`, :func:`slogdet`,
  :func:`pseudo_inverse` for the dense references of :mod:`scalegp.testing`.
* :class:`SymmetricFactorization`: an eigen-factorization of a symmetric, possibly indefinite
  matrix, for features with signed quadrature weights (solve, log|det|, inertia).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.linalg.blas as blas
import scipy.linalg.lapack
import scipy.sparse.linalg

from ._validation import check_positive_int
from .errors import NotPositiveDefiniteError, NumericalWarning

#: Number of jitter attempts after the plain factorization fails.
MAX_JITTER_TRIES = 6


def _check_square_finite(A: np.ndarray, name: str) -> np.ndarray:
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(
            f"{name} contains NaN or inf; cannot factorize it (check the inputs and "
            "hyperparameters that produced it)"
        )
    return A


def symmetric_rank_k_update(G_upper: np.ndarray, Psi: np.ndarray,
                             beta: float = 1.0) -> np.ndarray:
    """Return beta G_upper + upper(Psi^T Psi) by a BLAS symmetric rank-k update (half a GEMM).

    Only the upper triangle is written. The update is in place when G_upper is Fortran-ordered
    of Psi's dtype. syrk reads a Fortran-ordered operand without a copy: Psi.T for a C-ordered
    Psi (what feature maps return, trans=0: Psi.T Psi.T^T), else Psi itself (trans=1: Psi^T Psi).
    """
    syrk = blas.ssyrk if Psi.dtype == np.float32 else blas.dsyrk
    if Psi.T.flags.f_contiguous:
        return syrk(1.0, Psi.T, c=G_upper, beta=beta, trans=0, lower=0, overwrite_c=1)
    return syrk(1.0, np.asfortranarray(Psi), c=G_upper, beta=beta, trans=1, lower=0,
                overwrite_c=1)


def symmetrize_upper(G_upper: np.ndarray) -> np.ndarray:
    """The symmetric matrix whose upper triangle is that of G_upper."""
    return np.triu(G_upper) + np.triu(G_upper, 1).T


#: Relative jitter (of the mean diagonal) up to which a knots' matrix (K_ZZ, Phi K Phi^T) is
#: factorized without a warning. Jitter e on K_ZZ gives Q_e = K_XZ (K_ZZ + e I)^{-1} K_ZX,
#: the Nystrom approximation whose knot values are observed with variance e: K - Q_e is
#: positive semidefinite, so the VFE bound and the predictive variances stay valid, and the
#: objective and the predictions use the same factor. Q_e differs from Q_0 only along the
#: eigenvectors of K_ZZ whose eigenvalues are at most about e, where the knots are
#: numerically redundant; above 1e-6 of the mean diagonal the change reaches directions a
#: fit can resolve, and the jitter is warned. (The jitter used is kept: ``jitter``.)
KNOT_JITTER_QUIET = 1e-6


def initial_jitter(A: np.ndarray) -> float:
    """First jitter: 1e-2 sqrt(eps) times the mean diagonal (about 1.5e-10 relative in float64)."""
    mean_diag = float(np.mean(np.abs(np.diag(A)))) or 1.0
    return 1e-2 * np.sqrt(np.finfo(A.dtype).eps) * mean_diag


def cholesky(A, *, name: str = "matrix", allow_jitter: bool = True,
             quiet_below: float = 0.0) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor L of A = L L^T, adding jitter to the diagonal when needed.

    With ``allow_jitter=False`` a failed factorization raises at once (for matrices whose
    definiteness is the question, e.g. the covariances compared by a KL divergence).
    The jitter added is warned (:class:`~scalegp.errors.NumericalWarning`) unless it is at
    most ``quiet_below`` times the mean diagonal: a caller passes a positive ``quiet_below``
    only for a matrix whose jittered factor still defines a valid model of its own (the
    knots' matrix of a Nystrom map: :data:`KNOT_JITTER_QUIET`).

    Returns
    -------
    L : ndarray, lower triangular
    jitter : float
        The amount added to the diagonal (0.0 when none was needed).

    Raises
    ------
    ValueError
        If A is not square or contains NaN/inf (checked before any attempt).
    NotPositiveDefiniteError
        If A + jitter I is not positive definite for the largest jitter tried
        (``initial_jitter(A) * 10**(MAX_JITTER_TRIES - 1)``).
    """
    A = _check_square_finite(A, name)
    if A.dtype not in (np.float32, np.float64):
        A = A.astype(np.float64)
    try:
        return scipy.linalg.cholesky(A, lower=True, check_finite=False), 0.0
    except np.linalg.LinAlgError:
        if not allow_jitter:
            raise NotPositiveDefiniteError(
                f"{name} is not positive definite (Cholesky failed; no jitter added)") from None
    jitter = initial_jitter(A)
    identity = np.eye(A.shape[0], dtype=A.dtype)
    for _ in range(MAX_JITTER_TRIES):
        try:
            L = scipy.linalg.cholesky(A + jitter * identity, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            jitter *= 10.0
            continue
        if jitter <= quiet_below * (float(np.mean(np.abs(np.diag(A)))) or 1.0):
            return L, float(jitter)
        warnings.warn(
            f"{name} was not numerically positive definite; added jitter {jitter:.3e} to its "
            f"diagonal ({jitter / (np.mean(np.abs(np.diag(A))) or 1.0):.1e} of the mean diagonal)",
            NumericalWarning, stacklevel=2,
        )
        return L, float(jitter)
    raise NotPositiveDefiniteError(
        f"{name} is not positive definite even with jitter {jitter / 10:.3e} on its diagonal "
        "(check for duplicated inputs with zero noise, or hyperparameters at extreme values)"
    )


def batched_cholesky(A, *, name: str = "matrix",
                     allow_jitter: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Lower Cholesky factors of a stack of matrices A (B, m, m), factorized together.

    One batched call factorizes the whole stack; if any matrix of it is not numerically
    positive definite, each matrix is factorized alone, by the same LAPACK call (so its factor
    is bitwise the one of the batched call: a failing neighbour changes nothing), and those
    that fail get the adaptive jitter of :func:`cholesky` (warned, recorded); with
    ``allow_jitter=False`` the first that fails raises :class:`NotPositiveDefiniteError`.

    Returns
    -------
    L : ndarray (B, m, m), lower triangular
    jitter : ndarray (B,)
        The amount added to each diagonal (0.0 where none was needed).
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"{name} must be a stack of square matrices, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} contains NaN or inf; cannot factorize it (check the inputs "
                         "and hyperparameters that produced it)")
    try:
        return np.linalg.cholesky(A), np.zeros(A.shape[0])
    except np.linalg.LinAlgError:
        pass
    L, jitter = np.empty_like(A), np.zeros(A.shape[0])
    for j in range(A.shape[0]):
        try:
            L[j] = np.linalg.cholesky(A[j])
        except np.linalg.LinAlgError:
            if not allow_jitter:
                raise NotPositiveDefiniteError(
                    f"{name} [{j}] is not positive definite") from None
            L[j], jitter[j] = cholesky(A[j], name=f"{name} [{j}]")
    return L, jitter


#: Largest diagonal block :func:`batched_triangular_inverse` inverts by LAPACK; larger ones are
#: split in two and joined by matrix products.
TRIANGULAR_INVERSE_BASE = 16


def batched_triangular_inverse(L) -> np.ndarray:
    """L^{-1} of each lower triangular matrix of a stack L (B, s, s), all at once.

    Recursive, in the blocks of L = [[L11, 0], [L21, L22]]:

        L^{-1} = [[L11^{-1}, 0], [-L22^{-1} L21 L11^{-1}, L22^{-1}]],

    down to diagonal blocks of at most :data:`TRIANGULAR_INVERSE_BASE` rows, inverted by
    numpy's batched LAPACK (its strictly upper part set to 0). s^3 / 3 flops per matrix, as
    LAPACK's ``trtri``, nearly all of them in batched matrix products (no Python step per
    matrix: for the many small Vecchia blocks, where one ``trtri`` call per matrix costs
    more in overhead than in arithmetic). The rounding is that of blocked ``trtri``."""
    L = np.asarray(L, dtype=np.float64)
    if L.ndim != 3 or L.shape[1] != L.shape[2]:
        raise ValueError(f"L must be a stack of square matrices, got shape {L.shape}")
    n = L.shape[-1]
    if n <= TRIANGULAR_INVERSE_BASE:
        return np.tril(np.linalg.inv(L))
    h = n // 2
    first = batched_triangular_inverse(L[:, :h, :h])
    second = batched_triangular_inverse(L[:, h:, h:])
    out = np.zeros_like(L)
    out[:, :h, :h] = first
    out[:, h:, h:] = second
    out[:, h:, :h] = -(second @ (L[:, h:, :h] @ first))
    return out


def solve_lower(L: np.ndarray, B: np.ndarray, *, transpose: bool = False) -> np.ndarray:
    """Solve L X = B (or L^T X = B with ``transpose=True``) for lower triangular L."""
    return scipy.linalg.solve_triangular(L, B, lower=True, trans=1 if transpose else 0,
                                         check_finite=False)


def cho_solve(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Solve (L L^T) X = B by two triangular solves."""
    return scipy.linalg.cho_solve((L, True), B, check_finite=False)


def small_cholesky(A: np.ndarray) -> np.ndarray | None:
    """Lower Cholesky factor of a small symmetric positive definite A by LAPACK's potrf, with
    none of the wrappers' checks (A, float64, is overwritten), or None where A is not
    positive definite: for loops over many small matrices (the Vecchia blocks, m ~ 30), where
    the checks of :func:`cholesky` cost as much as the arithmetic."""
    L, info = scipy.linalg.lapack.dpotrf(A, lower=1, clean=1, overwrite_a=1)
    return L if info == 0 else None


def small_triangular_inverse(L: np.ndarray) -> np.ndarray:
    """L^{-1} of a lower triangular L by LAPACK's trtri (no checks; :func:`small_cholesky`)."""
    return scipy.linalg.lapack.dtrtri(L, lower=1)[0]


def small_solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^{-1} B for a lower triangular L by LAPACK's trtrs (no checks; :func:`small_cholesky`)."""
    return scipy.linalg.lapack.dtrtrs(L, B, lower=1)[0]


def logdet_from_cholesky(L: np.ndarray) -> float:
    """log det(L L^T) = 2 sum_i log L_ii."""
    return 2.0 * float(np.sum(np.log(np.diag(L))))


def inverse_diagonal_from_cholesky(L: np.ndarray) -> np.ndarray:
    """diag((L L^T)^{-1}): squared column norms of L^{-1} (LAPACK triangular inverse, ?trtri)."""
    (trtri,) = scipy.linalg.lapack.get_lapack_funcs(("trtri",), (L,))
    L_inv, info = trtri(L, lower=1)
    if info != 0:
        raise NotPositiveDefiniteError(f"triangular factor is singular (trtri info {info})")
    L_inv = np.tril(L_inv)  # trtri leaves the strictly upper triangle of its input untouched
    return np.einsum("ij,ij->j", L_inv, L_inv)


def inverse_from_cholesky(L: np.ndarray) -> np.ndarray:
    """(L L^T)^{-1} by LAPACK ?potri (n^3 flops against 2 n^3 for two solves with I).

    For the trace terms of gradients, tr(K^{-1} dK) of the exact GP and tr(M^{-1} Psi^T dPsi)
    of the low-rank engine (summed row by row as sum (Psi M^{-1}) o dPsi, one GEMM per chunk
    instead of two triangular solves), which need the whole inverse; everywhere else, solve.
    """
    (potri,) = scipy.linalg.lapack.get_lapack_funcs(("potri",), (L,))
    inverse, info = potri(L, lower=1)
    if info != 0:
        raise NotPositiveDefiniteError(f"Cholesky factor is singular (potri info {info})")
    inverse = np.tril(inverse)
    return inverse + np.tril(inverse, -1).T


def triangular_factor(A) -> np.ndarray:
    """R of the Householder QR A = Q R (Q is not formed), rows signed so that diag(R) >= 0.

    R^T R = A^T A without forming A^T A (whose condition number is A's squared); for A of
    shape (n, m) R has min(n, m) rows. With full column rank, R^T is the Cholesky factor of
    A^T A, usable by :func:`cho_solve`, :func:`logdet_from_cholesky` and
    :func:`inverse_diagonal_from_cholesky`.
    """
    R = scipy.linalg.qr(A, mode="r", check_finite=False)[0]
    R = R[:min(A.shape)]
    return R * np.where(np.diag(R) < 0, -1.0, 1.0)[:, None]


def symmetric_eigen(A, *, name: str = "matrix") -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and orthonormal eigenvectors of the symmetric part of A."""
    A = _check_square_finite(A, name)
    return np.linalg.eigh(0.5 * (A + A.T))


def eigenvalues(A) -> np.ndarray:
    """Eigenvalues (ascending) of a symmetric A, read from its lower triangle."""
    return np.linalg.eigvalsh(A)


def eigh(A) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric A, read from its lower
    triangle as given (:func:`symmetric_eigen` checks A and symmetrizes it first)."""
    return np.linalg.eigh(A)


def qr(A) -> tuple[np.ndarray, np.ndarray]:
    """The reduced QR decomposition A = Q R, Q with orthonormal columns."""
    return np.linalg.qr(A)


def svd(A, *, full_matrices: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The singular value decomposition A = U diag(s) V^T, as (U, s, V^T)."""
    return np.linalg.svd(A, full_matrices=full_matrices)


def condition_number(A) -> float:
    """The 2-norm condition number of A: its largest singular value over its smallest."""
    return float(np.linalg.cond(A))


def solve_upper(R: np.ndarray, B: np.ndarray, *, transpose: bool = False) -> np.ndarray:
    """Solve R X = B (or R^T X = B with ``transpose=True``) for upper triangular R."""
    return scipy.linalg.solve_triangular(R, B, lower=False, trans=1 if transpose else 0,
                                         check_finite=False)


def solve(A, B) -> np.ndarray:
    """Solve A X = B for a square nonsingular A by LU with partial pivoting (dense references
    only: the engine solves through its factorized systems)."""
    return np.linalg.solve(A, B)


def slogdet(A) -> tuple[float, float]:
    """(sign, log|det A|) by LU."""
    return np.linalg.slogdet(A)


def solve_symmetric(A, B) -> np.ndarray:
    """Solve A X = B for a symmetric, possibly indefinite, nonsingular A (LAPACK's Bunch-Kaufman
    ``sysv``, half the flops of LU)."""
    return scipy.linalg.solve(A, B, assume_a="sym")


def extreme_eigenvalues(A) -> tuple[float, float]:
    """(smallest, largest) eigenvalue of a symmetric A, read from its lower triangle, each
    computed alone (LAPACK's ``syevr`` with an index range: the tridiagonal reduction, O(n^3),
    but no eigenvectors)."""
    n = A.shape[0]
    low = scipy.linalg.eigh(A, eigvals_only=True, subset_by_index=[0, 0])
    high = scipy.linalg.eigh(A, eigvals_only=True, subset_by_index=[n - 1, n - 1])
    return float(low[0]), float(high[0])


def spectral_norm(A) -> float:
    """||A||_2 = max |eigenvalue| of a symmetric A: dense for n <= 50, else one Lanczos
    eigenvalue of largest magnitude (ARPACK, started from the ones vector, so repeatable)."""
    if A.shape[0] <= 50:
        return float(np.max(np.abs(np.linalg.eigvalsh(A))))
    value = scipy.sparse.linalg.eigsh(A, k=1, which="LM", v0=np.ones(A.shape[0]),
                                      return_eigenvectors=False)
    return float(np.abs(value[0]))


def pseudo_inverse(A) -> np.ndarray:
    """The Moore-Penrose pseudo-inverse of A (by the SVD)."""
    return np.linalg.pinv(A)


@dataclass(frozen=True)
class SymmetricFactorization:
    """A = V diag(lam) V^T for a symmetric, possibly indefinite A (from ``numpy.linalg.eigh``).

    The eigen-decomposition gives solves, log|det A| and the inertia (number of negative
    eigenvalues) in one O(m^3) step; an eigenvalue below ``tol = m eps max|lam|`` in absolute
    value makes A numerically singular and is an error.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray

    @classmethod
    def factor(cls, A, *, name: str = "matrix") -> "SymmetricFactorization":
        eigenvalues, eigenvectors = symmetric_eigen(A, name=name)
        tol = A.shape[0] * np.finfo(A.dtype).eps * max(np.max(np.abs(eigenvalues)), 1e-300)
        if np.any(np.abs(eigenvalues) <= tol):
            raise NotPositiveDefiniteError(
                f"{name} is numerically singular (smallest |eigenvalue| "
                f"{np.min(np.abs(eigenvalues)):.3e})"
            )
        return cls(eigenvalues, eigenvectors)

    @property
    def n_negative(self) -> int:
        return int(np.sum(self.eigenvalues < 0))

    def solve(self, B: np.ndarray) -> np.ndarray:
        V = self.eigenvectors
        coeffs = V.T @ B
        scaled = coeffs / (self.eigenvalues if coeffs.ndim == 1 else self.eigenvalues[:, None])
        return V @ scaled

    def logabsdet(self) -> float:
        return float(np.sum(np.log(np.abs(self.eigenvalues))))

    def inverse_diagonal(self) -> np.ndarray:
        return np.einsum("ij,j,ij->i", self.eigenvectors, 1.0 / self.eigenvalues,
                         self.eigenvectors)

    def quadratic_diagonal(self, P: np.ndarray) -> np.ndarray:
        """diag(P A^{-1} P^T) for rows of P, shape (n,)."""
        W = P @ self.eigenvectors
        return np.einsum("ij,j,ij->i", W, 1.0 / self.eigenvalues, W)


def pivoted_cholesky(diagonal, column, *, max_rank: int | None = None,
                     tol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Partial pivoted Cholesky K ~ F F^T of an n x n PSD matrix given implicitly.

    At each step the pivot is the row with the largest remaining diagonal (Harbrecht,
    Peters & Schneider 2012); the trace of the residual K - F F^T is tracked exactly.

    Parameters
    ----------
    diagonal : array of shape (n,)
        diag(K).
    column : callable
        ``column(i)`` returns K[:, i] as an array of shape (n,).
    max_rank : int, optional
        Stop after this many pivots.
    tol : float in [0, 1), optional
        Stop when trace(K - F F^T) <= tol * trace(K). At least one of max_rank/tol is needed.
        Either way the factorization stops when the largest remaining diagonal is at most
        n eps max(diag K) (LAPACK ?pstrf's default tolerance): such a pivot is roundoff, and
        as a landmark it would make K[pivots, pivots] singular.

    Returns
    -------
    F : ndarray of shape (n, r)
    pivots : ndarray of int, shape (r,)
    """
    residual = np.array(diagonal, dtype=float)
    if (residual.ndim != 1 or residual.size == 0 or not np.all(np.isfinite(residual))
            or np.any(residual < 0)):
        raise ValueError("diagonal must be a non-empty finite non-negative 1-D array, got "
                         f"shape {residual.shape}: {np.array2string(residual, threshold=6)}")
    n = residual.size
    if max_rank is None and tol is None:
        raise ValueError("pivoted_cholesky needs max_rank, tol or both")
    rank_limit = n if max_rank is None else min(check_positive_int(max_rank, "max_rank"), n)
    if tol is not None and not (isinstance(tol, numbers.Real) and 0.0 <= tol < 1.0):
        raise ValueError(f"tol must be a number in [0, 1) (a fraction of trace(K)), got {tol!r}")
    total = residual.sum()
    roundoff = n * np.finfo(float).eps * residual.max()
    F = np.zeros((n, rank_limit))
    pivots = []
    for k in range(rank_limit):
        if tol is not None and residual.sum() <= tol * total:
            break
        i = int(np.argmax(residual))
        if residual[i] <= roundoff:
            break
        pivots.append(i)
        col = np.asarray(column(i), dtype=float)
        if col.shape != (n,):
            raise ValueError(f"column({i}) must return K[:, {i}] of shape ({n},), got shape "
                             f"{col.shape}")
        col = col - F[:, :k] @ F[i, :k]
        F[:, k] = col / np.sqrt(residual[i])
        residual -= F[:, k] ** 2
        residual[pivots] = 0.0
        np.maximum(residual, 0.0, out=residual)
    rank = len(pivots)
    return F[:, :rank], np.array(pivots, dtype=int)
