"""Random Fourier features (Rahimi & Recht, NIPS 2007)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_generator, check_matrix, check_positive_int
from ..kernels import Kernel
from ._fourier import FourierFeatureMap


def monte_carlo_frequencies(n_components) -> tuple[int, int]:
    """(n_frequencies, n_single) for m = n_components columns of a Monte-Carlo Fourier map.

    m // 2 frequencies give cos/sin pairs; an odd m adds one frequency with a single
    phase-shifted cosine (n_single = m mod 2), so any m >= 1 is possible.
    """
    n_components = check_positive_int(n_components, "n_components")
    n_single = n_components % 2
    return n_components // 2 + n_single, n_single


def monte_carlo_weights(n_frequencies: int, n_single: int) -> np.ndarray:
    """Equal weight per column: a_l = 2 / m for a pair, 1 / m for a single column (sum 1).

    For an even m this is 1 / n_frequencies for every frequency.
    """
    if n_single == 0:
        return np.full(n_frequencies, 1.0 / n_frequencies)
    n_components = 2 * n_frequencies - n_single
    return np.append(np.full(n_frequencies - n_single, 2.0 / n_components),
                     np.full(n_single, 1.0 / n_components))


def draw_phase_shifts(rng: np.random.Generator, n_single: int) -> np.ndarray | None:
    """b ~ U(0, 2 pi) for the single columns, from a stream spawned off ``rng`` (so the
    frequencies are those ``rng`` gives anyway); None when there are none (even m)."""
    if n_single == 0:
        return None
    (phase_rng,) = rng.spawn(1)
    return phase_rng.uniform(0.0, 2.0 * np.pi, size=n_single)


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
    so the features depend smoothly on theta (GLF paper Section 4.3, Eq. 15;
    docs/quadrature-features.md, "Monte-Carlo maps"):

        psi(x) = sqrt(s / S) [cos(omega_l^T x / l), sin(omega_l^T x / l)]_l,

    an unbiased estimate of k(x, x') with variance O(1/S) (Rahimi & Recht 2007, Claim 1).
    An odd n_components = 2 S + 1 draws one more frequency, whose single column is
    sqrt(2 s / m) cos(omega^T x / l + b), b ~ U(0, 2 pi), the pairs then having weight 2 / m
    (module ``_fourier``): n_components = 1 is scikit-learn's ``RBFSampler`` with one component.
    """

    description = "random Fourier features: Monte-Carlo frequencies from the spectral density"
    reference = "Rahimi & Recht, NIPS 2007"

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, **options):
        if options:
            raise TypeError(f"rff takes no options, got {sorted(options)}")
        X = check_matrix(X, "X")
        n_frequencies, n_single = monte_carlo_frequencies(n_components)
        rng = as_generator(rng)
        omega = kernel.sample_standard_frequencies(n_frequencies, X.shape[1], rng)
        return cls(n_dims=X.shape[1], omega=omega,
                   frequency_weights=monte_carlo_weights(n_frequencies, n_single),
                   offset=data_centre(X), phase_shifts=draw_phase_shifts(rng, n_single))
