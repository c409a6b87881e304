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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..kernels import Kernel
from .base import FeatureMap, feature_dtype


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
    """

    omega: np.ndarray
    frequency_weights: np.ndarray
    offset: np.ndarray
    frequency_signs: np.ndarray | None = None

    @property
    def n_frequencies(self) -> int:
        return self.omega.shape[0]

    @property
    def n_components(self) -> int:
        return 2 * self.n_frequencies

    @property
    def signs(self) -> np.ndarray | None:
        if self.frequency_signs is None:
            return None
        return np.concatenate([self.frequency_signs, self.frequency_signs])

    def scaled_inputs(self, X, kernel: Kernel) -> np.ndarray:
        """u = (x - c) / l in the dtype of X."""
        X = self.check_input(X, kernel)
        dtype = feature_dtype(X)
        return ((X - self.offset.astype(dtype)) / kernel.length_scale.astype(dtype)).astype(dtype)

    def phases(self, U: np.ndarray) -> np.ndarray:
        """z = U omega^T, shape (n_samples, n_frequencies); SORF overrides with a fast transform."""
        return U @ self.omega.T.astype(U.dtype)

    def _amplitudes(self, kernel: Kernel, dtype) -> np.ndarray:
        return np.sqrt(kernel.variance * self.frequency_weights).astype(dtype)

    def features(self, X, kernel: Kernel) -> np.ndarray:
        U = self.scaled_inputs(X, kernel)
        Z = self.phases(U)
        amplitude = self._amplitudes(kernel, U.dtype)
        Psi = np.empty((U.shape[0], self.n_components), dtype=U.dtype)
        m = self.n_frequencies
        np.cos(Z, out=Psi[:, :m])
        np.sin(Z, out=Psi[:, m:])
        Psi[:, :m] *= amplitude
        Psi[:, m:] *= amplitude
        return Psi

    def features_grad(self, X, kernel: Kernel) -> np.ndarray:
        U = self.scaled_inputs(X, kernel)
        Z = self.phases(U)
        amplitude = self._amplitudes(kernel, U.dtype)
        cos_part = np.cos(Z) * amplitude
        sin_part = np.sin(Z) * amplitude
        omega = self.omega.astype(U.dtype)
        if kernel.anisotropic:
            # dz / d log l_j = -u_j omega_j for each dimension j
            phase_grads = [-(U[:, j:j + 1] * omega[:, j]) for j in range(self.n_dims)]
        else:
            phase_grads = [-Z]
        grads = [np.hstack([-sin_part * dz, cos_part * dz]) for dz in phase_grads]
        grads.append(0.5 * np.hstack([cos_part, sin_part]))
        return np.stack(grads)
