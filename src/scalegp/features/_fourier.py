"""The shared cos/sin basis of every Fourier-type feature map, and its length-scale derivative.

A Fourier map holds standardized angular frequencies omega_l (rows of ``omega``), non-negative
per-frequency weights a_l (sum_l a_l sign_l ~ 1 for an unbiased estimate of kappa(0) = 1), an
optional sign per frequency and an offset c (inputs are centred before the phases are formed,
which changes nothing mathematically because the approximation depends only on x - z, but
keeps cos/sin accurate). With u = (x - c) / l and z_l = omega_l^T u,

    psi(x) = sqrt(s) [sqrt(a_l) cos(z_l)]_l  ++  sqrt(s) [sqrt(a_l) sin(z_l)]_l,

so that psi(x)^T diag(S) psi(x') = s sum_l sign_l a_l cos(omega_l^T (x - x') / l)
(Rahimi & Recht 2007; for quadrature rules, a_l are the quadrature weights). Derivatives
(log-parameters): d z_l / d log l_j = -omega_lj u_j, and d psi / d log s = psi / 2.

An odd number of columns (Monte-Carlo maps) ends with single phase-shifted cosines: a
frequency with a phase shift b_l gives the one column sqrt(2 s a_l) cos(z_l + b_l), and
with b ~ U(0, 2 pi)

    E_b[2 cos(z_l(x) + b) cos(z_l(x') + b)] = cos(z_l(x) - z_l(x')),

so its term is unbiased too (Rahimi & Recht 2007, Section 3; scikit-learn's ``RBFSampler``).
Its derivatives are those of the cosine at the shifted phase, with the same d z_l.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..kernels import Kernel
from ..stored import Array
from .base import FeatureGradient, FeatureMap, MapAtTheta, feature_dtype


@dataclass(frozen=True, eq=False)
class FourierFeatureMap(FeatureMap):
    """Base of maps with cos/sin pairs at standardized frequencies rescaled by 1/l on each call.

    Attributes
    ----------
    omega : ndarray (n_frequencies, n_dims)
        Standardized angular frequencies (drawn or chosen once, in ``build``).
    frequency_weights : ndarray (n_frequencies,)
        a_l >= 0.
    offset : ndarray (n_dims,)
        Centre c subtracted from the inputs before forming phases.
    frequency_signs : ndarray (n_frequencies,) or None
        +-1 for quadrature rules with negative weights; None when all positive.
    phase_shifts : ndarray (n_single,) or None
        Phase shifts b of the last n_single frequencies, each giving the single column
        sqrt(2 s a_l) cos(z_l + b_l) instead of a cos/sin pair; None when all are pairs.
        Columns: the n_pairs cosines, the n_pairs sines, then the single columns.
    """

    omega: np.ndarray
    frequency_weights: np.ndarray
    offset: np.ndarray
    frequency_signs: np.ndarray | None = None
    phase_shifts: np.ndarray | None = None

    STORED = {"omega": Array(("f", "d")),
              "frequency_weights": Array(("f",), ("nonnegative",)),
              "offset": Array(("d",)),
              "frequency_signs": Array(("f",), ("sign",)),
              "phase_shifts": Array(("single",))}

    # every build reads X through data_centre (the bounding box) and n_dims only; a subclass
    # that reads the rows themselves must set this False
    builds_from_bounding_box = True

    @property
    def n_frequencies(self) -> int:
        return self.omega.shape[0]

    @property
    def n_pairs(self) -> int:
        """Frequencies with a cos/sin pair (all but the phase-shifted ones)."""
        return self.n_frequencies - (0 if self.phase_shifts is None else self.phase_shifts.size)

    @property
    def n_components(self) -> int:
        return self.n_pairs + self.n_frequencies

    @property
    def signs(self) -> np.ndarray | None:
        if self.frequency_signs is None:
            return None
        pairs = self.frequency_signs[:self.n_pairs]
        return np.concatenate([pairs, pairs, self.frequency_signs[self.n_pairs:]])

    def phases(self, U: np.ndarray) -> np.ndarray:
        """z = U omega^T, shape (n_samples, n_frequencies); SORF overrides with a fast transform."""
        return U @ self.omega.T.astype(U.dtype)

    def _single_phases(self, Z: np.ndarray) -> np.ndarray:
        """z_l + b_l for the phase-shifted frequencies, shape (n_samples, n_single)."""
        return Z[:, self.n_pairs:] + self.phase_shifts.astype(Z.dtype)

    def at(self, kernel: Kernel) -> "FourierAtTheta":
        return FourierAtTheta(self, kernel)


class FourierAtTheta(MapAtTheta):
    """A Fourier map at theta: the length scales and the amplitudes sqrt(s a_l) are fixed
    once; a chunk costs its phases z = ((x - c) / l) omega^T and their cosines and sines, which
    the features and their gradient share."""

    def __init__(self, feature_map: FourierFeatureMap, kernel: Kernel):
        super().__init__(feature_map, kernel)
        self.length_scale = kernel.length_scale
        self.amplitude = np.sqrt(kernel.variance * feature_map.frequency_weights)

    def scaled_inputs(self, X) -> np.ndarray:
        """u = (x - c) / l in the dtype of X."""
        X = self.check_input(X)
        dtype = feature_dtype(X)
        return ((X - self.feature_map.offset.astype(dtype))
                / self.length_scale.astype(dtype)).astype(dtype)

    def features(self, X) -> np.ndarray:
        fmap = self.feature_map
        U = self.scaled_inputs(X)
        Z = fmap.phases(U)
        amplitude = self.amplitude.astype(U.dtype)
        Psi = np.empty((U.shape[0], fmap.n_components), dtype=U.dtype)
        m = fmap.n_pairs
        np.cos(Z[:, :m], out=Psi[:, :m])
        np.sin(Z[:, :m], out=Psi[:, m:2 * m])
        Psi[:, :m] *= amplitude[:m]
        Psi[:, m:2 * m] *= amplitude[:m]
        if fmap.phase_shifts is not None:
            Psi[:, 2 * m:] = np.cos(fmap._single_phases(Z)) * (math.sqrt(2.0) * amplitude[m:])
        return Psi

    def features_and_grad(self, X) -> tuple[np.ndarray, np.ndarray]:
        fmap = self.feature_map
        U = self.scaled_inputs(X)
        Z = fmap.phases(U)
        amplitude = self.amplitude.astype(U.dtype)
        m = fmap.n_pairs
        cos_part = np.cos(Z[:, :m]) * amplitude[:m]
        sin_part = np.sin(Z[:, :m]) * amplitude[:m]
        if fmap.phase_shifts is None:
            single_cos = single_sin = np.empty((U.shape[0], 0), dtype=U.dtype)
        else:
            single_amplitude = math.sqrt(2.0) * amplitude[m:]
            single_cos = np.cos(fmap._single_phases(Z)) * single_amplitude
            single_sin = np.sin(fmap._single_phases(Z)) * single_amplitude
        omega = fmap.omega.astype(U.dtype)
        if self.kernel.anisotropic:
            # dz / d log l_j = -u_j omega_j for each dimension j
            phase_grads = [-(U[:, j:j + 1] * omega[:, j]) for j in range(fmap.n_dims)]
        else:
            phase_grads = [-Z]
        grads = [np.hstack([-sin_part * dz[:, :m], cos_part * dz[:, :m],
                            -single_sin * dz[:, m:]]) for dz in phase_grads]
        Psi = np.hstack([cos_part, sin_part, single_cos])
        grads.append(0.5 * Psi)
        return Psi, np.stack(grads)

    def features_and_grad_operator(self, X, features=None) -> tuple[np.ndarray,
                                                                      FeatureGradient]:
        if feature_dtype(X) == np.float32:
            # float32 features: dPsi is formed in float32 as they are (the structured
            # operator below would compute it in float64, another model)
            return super().features_and_grad_operator(X)
        fmap = self.feature_map
        U = self.scaled_inputs(X)
        Psi = (self.features(X) if features is None else features).astype(np.float64,
                                                                          copy=False)
        single_sin = None
        if fmap.phase_shifts is not None:
            Z = fmap.phases(U)
            single_sin = np.sin(fmap._single_phases(Z)).astype(np.float64) * (
                math.sqrt(2.0) * self.amplitude[fmap.n_pairs:])
        return Psi, FourierGradient(Psi, single_sin, U.astype(np.float64, copy=False), fmap.omega,
                                    fmap.n_pairs, self.kernel.anisotropic)


class FourierGradient(FeatureGradient):
    """dPsi of a Fourier map without forming it (module docstring).

    With R the features rotated by a quarter period, R = [-sin part, cos part, -single sines]
    (d psi / d z per column), and omega~ the frequency of each column,
    dPsi_j = diag(-u_j) R diag(omega~_j) for the log length scale l_j (their sum for one l),
    and dPsi = Psi / 2 for the log variance. So

        dPsi_j v = -u_j o (R (omega~_j o v)),   sum_l A_rl (dPsi_j)_rl = -u_rj ((A o R) omega~)_rj,

    one (n x m) by (m x d) product each: O(n m d) instead of forming d + 1 (n x m) arrays.
    """

    def __init__(self, Psi, single_sin, U, omega, n_pairs: int, anisotropic: bool):
        self.Psi, self.single_sin, self.U = Psi, single_sin, U
        self.omega, self.n_pairs, self.anisotropic = omega, n_pairs, anisotropic

    def _rotated_times(self, W: np.ndarray) -> np.ndarray:
        """R W for W of shape (m, k), without forming R."""
        p = self.n_pairs
        out = self.Psi[:, :p] @ W[p:2 * p] - self.Psi[:, p:2 * p] @ W[:p]
        if self.single_sin is not None:
            out -= self.single_sin @ W[2 * p:]
        return out

    def _column_frequencies(self) -> np.ndarray:
        p = self.n_pairs
        return np.vstack([self.omega[:p], self.omega[:p], self.omega[p:]])

    def _length_scale_rows(self, T: np.ndarray) -> np.ndarray:
        """-u_j o T[:, j] per length scale (summed over j for one length scale), (n_l, n)."""
        rows = -(self.U * T)
        return rows.T if self.anisotropic else rows.sum(axis=1)[None, :]

    def matvec(self, v):
        T = self._rotated_times(self._column_frequencies() * v[:, None])
        return np.vstack([self._length_scale_rows(T), 0.5 * (self.Psi @ v)[None, :]])

    def row_inner(self, A):
        p = self.n_pairs
        omega = self.omega
        T = (A[:, p:2 * p] * self.Psi[:, :p]) @ omega[:p] - (A[:, :p] * self.Psi[:, p:2 * p]) @ omega[:p]
        if self.single_sin is not None:
            T -= (A[:, 2 * p:] * self.single_sin) @ omega[p:]
        return np.vstack([self._length_scale_rows(T),
                          0.5 * np.einsum("rl,rl->r", A, self.Psi)[None, :]])
