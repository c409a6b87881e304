"""Random Fourier features (Rahimi & Recht, NIPS 2007)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from ._fourier import FourierFeatureMap


def even_components(n_components, name: str) -> int:
    """The number of cos/sin pairs for an even n_components."""
    n_components = check_positive_int(n_components, "n_components", minimum=2)
    if n_components % 2:
        raise ValueError(
            f"n_components must be even for {name} (cos/sin pairs), got {n_components}"
        )
    return n_components // 2


def data_centre(X: np.ndarray) -> np.ndarray:
    """Midpoint of the bounding box of X (the offset that keeps phases small)."""
    return 0.5 * (X.min(axis=0) + X.max(axis=0)).astype(np.float64)


@dataclass(frozen=True, eq=False)
class RandomFourierFeatures(FourierFeatureMap, name="rff"):
    """Random Fourier features with common random numbers.

    Notes
    -----
    S = n_components / 2 standardized frequencies omega_l are drawn once from the kernel's
    base spectral distribution (Gaussian: normal; Matern: Student t with 2 nu dof; Cauchy:
    Laplace per dimension; Laplacian: Cauchy per dimension) and rescaled by 1/l on every call,
    so the features depend smoothly on theta (GLF paper Section 4.3, Eq. 15; spec A.10):

        psi(x) = sqrt(s / S) [cos(omega_l^T x / l), sin(omega_l^T x / l)]_l,

    an unbiased estimate of k(x, x') with variance O(1/S) (Rahimi & Recht 2007, Claim 1).
    """

    description = "random Fourier features: Monte-Carlo frequencies from the spectral density"
    reference = "Rahimi & Recht, NIPS 2007"

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, **options):
        if options:
            raise TypeError(f"rff takes no options, got {sorted(options)}")
        X = check_matrix(X, "X")
        n_frequencies = even_components(n_components, "rff")
        omega = kernel.sample_standard_frequencies(n_frequencies, X.shape[1], as_generator(rng))
        return cls(n_dims=X.shape[1], omega=omega,
                   frequency_weights=np.full(n_frequencies, 1.0 / n_frequencies),
                   offset=data_centre(X))
