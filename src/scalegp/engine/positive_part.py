"""The positive part of a signed low-rank approximation: a repair for indefinite quadrature rules.

A quadrature rule with negative weights (``ssr``, ``sgq``, ``dfs``, ``sfs``) approximates the
kernel matrix by A = Psi S Psi^T with signs S = diag(+-1); A is indefinite, and A + s2 I often
is too, so the GP is undefined. The repair replaces A by its positive part A+, the nearest
positive semidefinite matrix of rank <= m in Frobenius norm (Higham 1988), computed from the
m x m statistics alone:

    G = Psi^T Psi = V D V^T,   R = D^{1/2} V^T,   Q = Psi V D^{-1/2}  (orthonormal columns),
    A = Q C Q^T  with  C = R S R^T = U diag(lambda) U^T,
    A+ = Q U diag(lambda+) U^T Q^T = (Psi T)(Psi T)^T,   T = V D^{-1/2} U_+ diag(lambda_+)^{1/2}.

T (m x r, r = number of positive lambda) turns the signed features into r ordinary ones,
psi+(x) = T^T psi(x), so k+(x, z) = psi+(x)^T psi+(z) is a positive semidefinite kernel
everywhere, equal to A+ on the training inputs. The statistics of the repaired features are
G+ = T^T G T = diag(lambda_+) and b+ = T^T b, and the engine's ordinary Cholesky path applies.
What is dropped is the negative part, of trace sum(-lambda_-) (reported). By Sylvester's law of
inertia C has as many negative eigenvalues as S has -1 entries whenever G has full rank, so the
repair always drops those directions; it changes little when their mass is small.

Learning needs the gradient of log N(y | 0, A+ + s2 I), where A+ moves with theta through both
Psi and T. By the Daleckii-Krein formula for the spectral function f(lambda) = max(lambda, 0),

    d log p / d theta_i = 1/2 tr(H dA+_i) = sum_rows [(Psi N1 + r n2^T) S] o dPsi_i,
    H = alpha alpha^T - (A+ + s2 I)^{-1},   r = (y - Psi G^+ b) / s2,
    N1 = V D^{-1/2} U (F o H_U) U^T D^{1/2} V^T,   H_U = v v^T - diag(1 / (f(lambda) + s2)),
    v = U^T q / (f(lambda) + s2),   q = D^{-1/2} V^T b,   n2 = V D^{1/2} U (1[lambda > 0] o v),

with F the first divided differences of f: F_kl = (f(lambda_k) - f(lambda_l)) / (lambda_k -
lambda_l), f'(lambda_k) on the diagonal (so F is 1 where both are positive, 0 where both are
not, in (0, 1) across). The column 1[lambda > 0] is f's divided difference against the
eigenvalue 0 of A outside range(Psi). Derivation: ``docs/positive-part.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import linalg

__all__ = ["PositivePart", "SignedSpectrum", "positive_part_gradient"]


@dataclass(frozen=True)
class SignedSpectrum:
    """What the gradient needs of the eigen-decomposition at the training data.

    Attributes
    ----------
    basis : (m, r0)
        V D^{-1/2} U: maps the eigen-coordinates of C back to feature space.
    cobasis : (m, r0)
        V D^{1/2} U.
    q : (r0,)
        U^T D^{-1/2} V^T b: the targets' coordinates in the eigenbasis.
    pseudo_solution : (m,)
        G^+ b, the least-squares coefficients of y on Psi.
    """

    basis: np.ndarray
    cobasis: np.ndarray
    q: np.ndarray
    pseudo_solution: np.ndarray


@dataclass(frozen=True)
class PositivePart:
    """The positive part of Psi S Psi^T, as a transform of the features.

    Attributes
    ----------
    transform : (m, r)
        T, with psi+(x) = T^T psi(x).
    eigenvalues : (r0,)
        All eigenvalues lambda of C = R S R^T (r0 = numerical rank of G), ascending: the
        nonzero spectrum of Psi S Psi^T on the training inputs.
    spectrum : SignedSpectrum or None
        The decomposition the gradient needs; None for a model read from a file (which has no
        training data to differentiate on).
    """

    transform: np.ndarray
    eigenvalues: np.ndarray
    spectrum: SignedSpectrum | None = None

    @classmethod
    def of(cls, gram: np.ndarray, projection: np.ndarray, signs: np.ndarray) -> "PositivePart":
        """The positive part for G = Psi^T Psi, b = Psi^T y and the signs S."""
        signs = np.asarray(signs, dtype=float)
        d, V = linalg.symmetric_eigen(gram, name="Psi^T Psi")
        keep = d > gram.shape[0] * np.finfo(float).eps * max(float(d.max()), 0.0)
        if not np.any(keep):
            raise ValueError("the features are all zero on the training inputs (Psi^T Psi = 0)")
        d, V = d[keep], V[:, keep]
        root = np.sqrt(d)
        R = root[:, None] * V.T                                   # R^T R = G on range(Psi)
        lam, U = linalg.symmetric_eigen((R * signs) @ R.T, name="R S R^T")
        basis = (V / root) @ U
        cobasis = (V * root) @ U
        positive = lam > 0
        transform = basis[:, positive] * np.sqrt(lam[positive])
        q = U.T @ ((V.T @ projection) / root)
        pseudo_solution = V @ ((V.T @ projection) / d)
        return cls(transform, lam, SignedSpectrum(basis, cobasis, q, pseudo_solution))

    @property
    def n_components(self) -> int:
        """r, the number of repaired features (positive eigenvalues)."""
        return self.transform.shape[1]

    @property
    def negative_mass(self) -> float:
        """tr(A-) = sum(-lambda_-): the part of Psi S Psi^T the repair drops."""
        return float(np.sum(-self.eigenvalues[self.eigenvalues < 0]))

    @property
    def positive_mass(self) -> float:
        """tr(A+) = sum(lambda_+)."""
        return float(self.eigenvalues[self.eigenvalues > 0].sum())

    @property
    def dropped_fraction(self) -> float:
        """tr(A-) / tr(A+): the dropped negative mass relative to what is kept."""
        return self.negative_mass / self.positive_mass if self.positive_mass > 0 else np.inf

    def project(self, Psi: np.ndarray) -> np.ndarray:
        """Psi+ = Psi T, the repaired features of the rows of Psi."""
        return Psi @ self.transform

    def describe(self) -> str:
        n_negative = int(np.sum(self.eigenvalues < 0))
        return (f"dropped the negative part of the signed approximation: {n_negative} of the "
                f"{self.eigenvalues.size} directions its {self.transform.shape[0]} features "
                f"span on the training inputs, trace {self.negative_mass:.4g} "
                f"({100 * self.dropped_fraction:.3g} % of the kept trace {self.positive_mass:.4g})")

    # ---------------------------------------------------------------- gradient pieces
    def gradient_matrices(self, noise_variance: float, signs: np.ndarray):
        """(N1 S, S n2) of the module docstring, so that for each row
        d log p / d theta_i gathers (psi^T N1 S + r (S n2)^T) . dpsi_i."""
        if self.spectrum is None:
            raise ValueError("this positive part was read from a model file and has no "
                             "spectrum to differentiate: refit on the training data")
        lam, spectrum = self.eigenvalues, self.spectrum
        f = np.maximum(lam, 0.0)
        v = spectrum.q / (f + noise_variance)
        H_U = np.outer(v, v) - np.diag(1.0 / (f + noise_variance))
        N1 = (spectrum.basis @ (_divided_differences(lam) * H_U)) @ spectrum.cobasis.T
        n2 = spectrum.cobasis @ np.where(lam > 0, v, 0.0)
        return N1 * signs, n2 * signs


def _divided_differences(lam: np.ndarray) -> np.ndarray:
    """F_kl = (f(lam_k) - f(lam_l)) / (lam_k - lam_l) for f = max(., 0); f'(lam_k) if equal."""
    f = np.maximum(lam, 0.0)
    difference = lam[:, None] - lam[None, :]
    same = np.abs(difference) <= 1e-12 * np.maximum(np.abs(lam[:, None]), np.abs(lam[None, :]))
    with np.errstate(divide="ignore", invalid="ignore"):
        F = (f[:, None] - f[None, :]) / np.where(same, 1.0, difference)
    derivative = (lam > 0).astype(float)
    return np.where(same, 0.5 * (derivative[:, None] + derivative[None, :]), F)


def positive_part_gradient(part: PositivePart, noise_variance: float, signs, *, gram=None,
                           projection=None, log_weights_grad=None, at_map=None,
                           chunks=None) -> np.ndarray:
    """Kernel-parameter gradient of log N(y | 0, A+ + s2 I) (module docstring).

    For a fixed basis (Psi = Phi diag(sqrt(w)), ``log_weights_grad`` g given with ``gram`` and
    ``projection``), dPsi_i = Psi diag(g_i / 2) and the row sum collapses to statistics:
    sum_l (g_il / 2) [G N1 S + (Psi^T r) (S n2)^T]_ll with Psi^T r = (b - G G^+ b) / s2.
    Otherwise one streaming pass over the ``chunks`` of the data with the features and their
    gradient of ``at_map`` (the map at theta).
    """
    signs = np.asarray(signs, dtype=float)
    N1S, Sn2 = part.gradient_matrices(noise_variance, signs)
    pseudo_solution = part.spectrum.pseudo_solution
    if log_weights_grad is not None:
        Psi_r = (projection - gram @ pseudo_solution) / noise_variance
        diagonal = np.einsum("ij,ji->i", gram, N1S) + Psi_r * Sn2
        return 0.5 * log_weights_grad @ diagonal
    gradient = np.zeros(at_map.kernel.n_params)
    for chunk in chunks:
        Psi, dPsi = at_map.features_and_grad_operator(chunk.X)
        r = (chunk.y - Psi @ pseudo_solution) / noise_variance
        Z = Psi @ N1S + np.outer(r, Sn2)
        gradient += dPsi.row_inner(Z).sum(axis=1)
    return gradient
