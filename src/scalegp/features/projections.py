"""Random projections of a positive semi-definite matrix K (Banerjee, Dunson & Tokdar,
Biometrika 2013; docs/random-projection.md).

K is known only through products K V (an operator): :class:`KernelOperator` forms k(X, X)
in row blocks, so memory is O(n c) for a product with c columns, and O(n^2) only where K takes
at most ``DENSE_BYTES`` (then it is formed once and every product is one GEMM);
:class:`DenseOperator` wraps an explicit matrix (the paper's Table 2 matrices). On it:

* :func:`draw_sketch`: the test matrix Omega (Gaussian, Rademacher or uniform on the sphere);
* :func:`nystrom`: steps 3-7 of Algorithm 1, Q^RP = K Phi^T (Phi K Phi^T)^{-1} Phi K = C C^T
  (docs/random-projection.md, sections 1-2), with the trace certificate
  tr(K - Q^RP) >= ||K - Q^RP||_F;
* :func:`fixed_rank`: Algorithm 1 (Sarlos 2006 with Halko et al. 2011, Algorithm 5.5);
* :func:`fixed_accuracy`: Algorithm 2, the adaptive range finder (Halko et al., Algorithm 4.2)
  with re-orthogonalisation, then the Nystrom approximation truncated to the smallest rank
  whose certified Frobenius error is at most epsilon (docs/random-projection.md, section 3;
  docs/decisions.md, "Random projection: the fixed-accuracy stopping rule").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .. import linalg
from .._memory import available_bytes
from .._validation import check_positive_int
from ..rowwise import BLOCK_ROWS

#: Kernel entries (times max(d, n_params)) formed at once by a row block: 2^21 float64
#: values are 16 MiB, so a product costs O(n c) memory plus this block.
BLOCK_ELEMENTS = 2**21
#: Bytes up to which :class:`KernelOperator` forms K once (n <= 5,792 at 256 MiB) and
#: reuses it for every product without gradients: Algorithm 2 applies K once per block of
#: r ~ log10 n probes, so a rank-m run is m / r passes of n^2 kernel entries otherwise.
DENSE_BYTES = 256 * 2**20
SKETCHES = ("gaussian", "rademacher", "sphere")
CERTIFICATES = ("frobenius", "trace")
#: Halko et al. (2011), Eq. (4.3): max_i ||(I - P) K omega_i|| <= epsilon / (10 sqrt(2 / pi))
#: over r probes certifies ||(I - P) K||_2 <= epsilon with probability >= 1 - n 10^{-r}.
HALKO_FACTOR = 10.0 * math.sqrt(2.0 / math.pi)


def row_blocks(n_rows: int, n_cols: int, width: int = 1):
    """Slices of a whole number of prediction blocks (:data:`scalegp.rowwise.BLOCK_ROWS`
    rows), at most BLOCK_ELEMENTS / (n_cols width) rows where that allows one block: a
    prediction block is then never split, so its rows meet the same products wherever they
    sit in it (memory: at least BLOCK_ROWS n_cols width entries)."""
    blocks = BLOCK_ELEMENTS // max(1, n_cols * width) // BLOCK_ROWS
    step = BLOCK_ROWS * max(1, blocks)
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


class KernelOperator:
    """K = k(X, X) of a kernel at fixed hyperparameters, applied in row blocks.

    ``matmat(V)`` is K V; ``matmat(V, grad_V=W)`` also returns dK_p W for every
    log-parameter p (shape (n_params, n, c')), from the same blocks of k and dk. Products
    without gradients use K formed once when it takes at most ``DENSE_BYTES`` (and a quarter
    of the available memory).
    """

    def __init__(self, kernel, inputs: np.ndarray):
        self.kernel = kernel
        self.inputs = inputs
        self.n = inputs.shape[0]
        self._dense = None

    def _dense_matrix(self) -> np.ndarray | None:
        """K itself where it is small enough to keep, else None."""
        if self._dense is None:
            size = 8 * self.n * self.n
            available = available_bytes()
            if size <= DENSE_BYTES and (available is None or size <= available // 4):
                self._dense = self.kernel(self.inputs)
        return self._dense

    def diagonal(self) -> np.ndarray:
        return self.kernel.diag(self.inputs)

    def rows_times(self, rows: np.ndarray, V: np.ndarray, grad_V: np.ndarray | None = None):
        """k(rows, X) V, and [dk_p(rows, X) grad_V]_p when grad_V is given."""
        width = max(rows.shape[1], self.kernel.n_params if grad_V is not None else 1)
        out = np.empty((rows.shape[0], V.shape[1]))
        grad_out = (None if grad_V is None
                    else np.empty((self.kernel.n_params, rows.shape[0], grad_V.shape[1])))
        for block in row_blocks(rows.shape[0], self.n, width):
            if grad_V is None:
                out[block] = self.kernel(rows[block], self.inputs) @ V
                continue
            dK = self.kernel.gradient(rows[block], self.inputs)     # last entry: k itself
            out[block] = dK[-1] @ V
            grad_out[:, block] = dK @ grad_V
        return out if grad_V is None else (out, grad_out)

    def matmat(self, V: np.ndarray, grad_V: np.ndarray | None = None):
        K = self._dense_matrix() if grad_V is None else None
        if K is not None:
            return K @ V
        return self.rows_times(self.inputs, V, grad_V)

    def matmat_and_squared_frobenius(self, V: np.ndarray) -> tuple[np.ndarray, float]:
        """(K V, ||K||_F^2) from one pass of kernel blocks (or the kept K)."""
        K = self._dense_matrix()
        if K is not None:
            return K @ V, float(np.sum(K**2))
        out, total = np.empty((self.n, V.shape[1])), 0.0
        for block in row_blocks(self.n, self.n, self.inputs.shape[1]):
            K = self.kernel(self.inputs[block], self.inputs)
            out[block] = K @ V
            total += float(np.sum(K**2))
        return out, total


class DenseOperator:
    """An explicit symmetric positive semi-definite matrix as an operator."""

    def __init__(self, K: np.ndarray):
        self.K = np.asarray(K, dtype=np.float64)
        self.n = self.K.shape[0]

    def diagonal(self) -> np.ndarray:
        return np.diag(self.K).copy()

    def matmat(self, V: np.ndarray) -> np.ndarray:
        return self.K @ V

    def matmat_and_squared_frobenius(self, V: np.ndarray) -> tuple[np.ndarray, float]:
        return self.K @ V, float(np.sum(self.K**2))


def draw_sketch(rng: np.random.Generator, n: int, r: int, kind: str = "gaussian") -> np.ndarray:
    """Omega (n x r): iid N(0, 1), Rademacher +-1, or columns uniform on the unit sphere.

    The scale of Omega does not matter (only the range of K Omega is used;
    docs/random-projection.md, section 2).
    """
    if kind not in SKETCHES:
        raise ValueError(f"sketch must be one of {', '.join(SKETCHES)}; got {kind!r}")
    if kind == "rademacher":
        return rng.choice(np.array([-1.0, 1.0]), size=(n, r))
    Omega = rng.standard_normal((n, r))
    if kind == "sphere":
        Omega /= np.linalg.norm(Omega, axis=0)
    return Omega


def positive_qr(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thin QR with diag(R) >= 0: the unique (and smooth) factorization of a full-rank A."""
    Q, R = linalg.qr(A)
    signs = np.where(np.diag(R) < 0, -1.0, 1.0)
    return Q * signs, R * signs[:, None]


def fix_signs(V: np.ndarray) -> np.ndarray:
    """Columns of V with their largest-magnitude entry made positive (a sign convention that
    is locally constant in the matrix, so eigenvectors are differentiable functions of it)."""
    pivots = np.argmax(np.abs(V), axis=0)
    return V * np.where(V[pivots, np.arange(V.shape[1])] < 0, -1.0, 1.0)


@dataclass
class Nystrom:
    """Q^RP = C C^T with C = K Phi^T B^{-T}, B B^T = Phi K Phi^T (docs/random-projection.md,
    section 2, steps 3-7).

    ``U``, ``singular_values``, ``V``: the thin SVD C = U diag(sigma) V^T, so
    Q^RP = U diag(sigma^2) U^T is the approximate eigendecomposition of K (step 7).
    ``condition_number``: cond(Phi K Phi^T), the m x m matrix factorized
    (docs/decisions.md, "Condition numbers of the projections").
    """

    basis: np.ndarray              # Phi^T (n x m), orthonormal columns
    cholesky_factor: np.ndarray    # B
    jitter: float
    C: np.ndarray
    U: np.ndarray
    singular_values: np.ndarray
    V: np.ndarray
    condition_number: float

    def trace_errors(self, diagonal: np.ndarray) -> np.ndarray:
        """tr(K - Q_k) for k = 0..m, with Q_k = U_k diag(sigma_k^2) U_k^T (the truncation).

        K - Q_k is positive semi-definite, so tr(K - Q_k) >= ||K - Q_k||_F >= ||K - Q_k||_2
        (docs/random-projection.md, "The certificate")."""
        return float(np.sum(diagonal)) - np.concatenate([[0.0],
                                                         np.cumsum(self.singular_values**2)])

    def frobenius_errors(self, operator) -> np.ndarray:
        """||K - Q_k||_F for k = 0..m, from one pass over K (K U and ||K||_F^2):

            ||K - U_k S_k^2 U_k^T||_F^2 = ||K||_F^2 - 2 sum_{i<=k} s_i^2 u_i^T K u_i
                                          + sum_{i<=k} s_i^4.

        Accurate to about eps ||K||_F^2 m in the squared error (cancellation)."""
        s2 = self.singular_values**2
        KU, squared_norm = operator.matmat_and_squared_frobenius(self.U)
        quadratic = np.einsum("ij,ij->j", self.U, KU)
        squared = squared_norm - np.concatenate(
            [[0.0], np.cumsum(2.0 * s2 * quadratic - s2**2)])
        return np.sqrt(np.maximum(squared, 0.0))


def nystrom(operator, basis: np.ndarray, K_basis: np.ndarray | None = None) -> Nystrom:
    """Steps 3-7 of Algorithm 1 for an orthonormal basis Phi^T (n x m); ``K_basis`` = K Phi^T
    when already computed."""
    K1 = operator.matmat(basis) if K_basis is None else K_basis            # step 3
    K2 = basis.T @ K1
    K2 = 0.5 * (K2 + K2.T)                                                   # step 4
    B, jitter = linalg.cholesky(K2, name="Phi K Phi^T",                    # step 5
                                quiet_below=linalg.KNOT_JITTER_QUIET)
    C = linalg.solve_lower(B, K1.T).T                                      # step 6
    U, sigma, Vt = linalg.svd(C, full_matrices=False)                        # step 7
    return Nystrom(basis, B, jitter, C, U, sigma, Vt.T, linalg.condition_number(K2))


def range_basis(Y: np.ndarray, rank: int) -> np.ndarray:
    """Phi^T: the ``rank`` leading left singular vectors of Y = K Omega (docs/random-projection.md,
    section 2, step 2);
    for rank = Y's column count, the Q of its thin QR (any orthonormal basis of the range)."""
    Q, R = positive_qr(Y)
    if rank == Y.shape[1]:
        return Q
    W, _, _ = linalg.svd(R)
    return Q @ W[:, :rank]


def fixed_rank(operator, rank: int, rng: np.random.Generator, *, oversampling: int = 0,
               sketch: str = "gaussian") -> tuple[Nystrom, np.ndarray]:
    """Algorithm 1: Omega (n x r), r = rank + oversampling; Y = K Omega; Phi from Y; Nystrom.

    Returns the approximation and Omega. Cost: two passes over K (K Omega and K Phi^T).
    """
    rank = check_positive_int(rank, "rank")
    oversampling = check_positive_int(oversampling, "oversampling", minimum=0)
    if rank + oversampling > operator.n:
        raise ValueError(f"rank + oversampling = {rank + oversampling} exceeds n = {operator.n}")
    Omega = draw_sketch(rng, operator.n, rank + oversampling, sketch)
    return nystrom(operator, range_basis(operator.matmat(Omega), rank)), Omega


def probe_count(n: int) -> int:
    """r = ceil(log10 n) + 1, so that n 10^{-r} <= 0.1 (docs/random-projection.md, section 3)."""
    return int(math.ceil(math.log10(max(n, 1)))) + 1


class RangeFinder:
    """Halko et al. (2011), Algorithm 4.2 as the paper's Algorithm 2, steps 1-8
    (docs/random-projection.md, section 3).

    The probes K omega are computed ``batch`` at a time in one pass over K (the same
    algorithm: a probe's projection (I - Phi^T Phi) is applied when it is used, which equals
    the paper's updates of step 7). Step 9 re-orthogonalises each kappa_j before it is
    normalised. :meth:`extend` can be called again with a smaller threshold.
    """

    def __init__(self, operator, rng, max_rank: int, sketch: str = "gaussian",
                 n_probes: int | None = None, batch: int = 16):
        self.operator, self.rng, self.sketch = operator, rng, sketch
        self.max_rank = min(max_rank, operator.n)
        self.n_probes = probe_count(operator.n) if n_probes is None else n_probes
        self.batch = max(batch, self.n_probes)
        self.basis = np.empty((operator.n, 0))
        self.probes: list[np.ndarray] = []      # omega_1, omega_2, ... in order of use
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._kappas = [self._next() for _ in range(self.n_probes)]            # steps 1-2

    def _next(self) -> tuple[np.ndarray, np.ndarray]:
        """(omega, (I - Phi^T Phi) K omega) for a new probe (step 6)."""
        if not self._pending:
            Omega = draw_sketch(self.rng, self.operator.n, self.batch, self.sketch)
            KOmega = self.operator.matmat(Omega)
            self._pending = list(zip(Omega.T, KOmega.T))
        omega, kappa = self._pending.pop(0)
        return omega, kappa - self.basis @ (self.basis.T @ kappa)

    @property
    def largest_probe_norm(self) -> float:
        return max(float(np.linalg.norm(kappa)) for _, kappa in self._kappas)

    def extend(self, threshold: float) -> bool:
        """Add basis vectors until every pending probe has norm <= threshold (step 4);
        False if max_rank was reached first."""
        while self.largest_probe_norm > threshold:
            if self.basis.shape[1] >= self.max_rank:
                return False
            self.step()
        return True

    def step(self) -> None:
        """One pass of the loop body: the next probe becomes a basis vector (steps 5-7, 9)."""
        omega, kappa = self._kappas.pop(0)
        kappa = kappa - self.basis @ (self.basis.T @ kappa)                    # step 9
        phi = kappa / np.linalg.norm(kappa)                                     # step 5
        self.basis = np.column_stack([self.basis, phi])
        self.probes.append(omega)
        self._kappas = [(w, k - phi * (phi @ k)) for w, k in self._kappas]      # step 7
        self._kappas.append(self._next())                                       # step 6


@dataclass
class FixedAccuracy:
    """The result of Algorithm 2: the Nystrom approximation of the range found, its rank k
    after truncation, the certified error of rank k, and the probes whose K omega span the
    basis (``probes``, n x j: orth(K probes) is the basis in exact arithmetic)."""

    approximation: Nystrom
    rank: int
    error: float
    certificate: str
    probes: np.ndarray


def fixed_accuracy(operator, epsilon: float, rng: np.random.Generator, *, max_rank: int,
                   certificate: str = "frobenius", sketch: str = "gaussian",
                   n_probes: int | None = None) -> FixedAccuracy:
    """Algorithm 2 with Nystrom eigen-truncation (docs/random-projection.md,
    "Algorithm 2: fixed accuracy").

    1. Range finder (:class:`RangeFinder`) to Halko's threshold epsilon / (10 sqrt(2/pi)).
    2. Nystrom approximation Q^RP = U diag(sigma^2) U^T on that range (Algorithm 1, 3-7).
    3. Truncation: the smallest k with error(Q_k) <= epsilon, where error is the exact
       ||K - Q_k||_F (``certificate="frobenius"``, one more pass over K) or its upper bound
       tr(K - Q_k) (``"trace"``, free). If even the full range is not certified (the range
       finder's guarantee is probabilistic), the range finder continues at a ten times smaller
       threshold; the result is therefore always certified, or max_rank is reported reached.

    Raises
    ------
    ValueError
        If epsilon is not positive, or the error is not reached within max_rank.
    """
    if not (isinstance(epsilon, numbers.Real) and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive number, got {epsilon!r}")
    if certificate not in CERTIFICATES:
        raise ValueError(f"certificate must be one of {', '.join(CERTIFICATES)}; "
                         f"got {certificate!r}")
    finder = RangeFinder(operator, rng, check_positive_int(max_rank, "max_rank"), sketch,
                         n_probes)
    threshold = epsilon / HALKO_FACTOR
    diagonal = operator.diagonal()
    while True:
        complete = finder.extend(threshold)
        if finder.basis.shape[1] == 0:           # every probe below the threshold: rank 1
            finder.step()
        approximation = nystrom(operator, finder.basis)
        errors = (approximation.frobenius_errors(operator) if certificate == "frobenius"
                  else approximation.trace_errors(diagonal))
        certified = np.flatnonzero(errors <= epsilon)
        if certified.size:
            rank = max(1, int(certified[0]))
            return FixedAccuracy(approximation, rank, float(errors[rank]), certificate,
                                 np.array(finder.probes).T)
        if not complete or finder.basis.shape[1] >= finder.max_rank:
            raise ValueError(
                f"the target error epsilon = {epsilon:g} was not reached within rank "
                f"{finder.max_rank} (the {certificate} error at that rank is "
                f"{errors[-1]:.3g}); raise n_components (the largest rank) or epsilon")
        threshold /= 10.0
