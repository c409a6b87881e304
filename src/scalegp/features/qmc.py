"""Quasi-Monte Carlo features (Yang, Sindhwani, Avron & Mahoney, "Quasi-Monte Carlo feature
maps for shift-invariant kernels", ICML 2014): randomly scrambled low-discrepancy points
mapped through the inverse CDF of the kernel's base spectral law
(``Kernel.frequencies_from_uniform``; docs/conventions.md, "Spectral laws the maps ask for")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .._validation import as_generator, check_matrix
from ..kernels import Kernel
from ._fourier import FourierFeatureMap
from .orthogonal import require_support
from .random_fourier import (data_centre, draw_phase_shifts, monte_carlo_frequencies,
                             monte_carlo_weights)

SEQUENCES = ("sobol", "halton")

#: ppf needs 0 < u < 1. Clipping to [eps, 1 - eps] moves only points within eps of the
#: faces; scrambled Sobol coordinates lie on a grid of spacing 2^-30, so only u = 0 moves,
#: with probability 2^-30 per coordinate: a change of law far below any resolvable error.
_EPS = np.finfo(float).eps


def scrambled_points(n_points: int, n_dims: int, sequence: str,
                     rng: np.random.Generator) -> np.ndarray:
    """The first ``n_points`` of a randomly scrambled Sobol or Halton sequence in (0, 1)^d.

    Sobol: Owen-type linear matrix scrambling plus a digital shift (scipy's ``scramble=True``);
    the first 2^k >= n points are drawn (the balance properties hold for powers of two) and
    the first n kept. Halton: random digit permutations. Either way each point is uniform on
    the unit cube, which is what makes the QMC estimate unbiased.
    """
    if sequence == "sobol":
        engine = stats.qmc.Sobol(n_dims, scramble=True, rng=rng)
        points = engine.random_base2((n_points - 1).bit_length())[:n_points]
    else:
        points = stats.qmc.Halton(n_dims, scramble=True, rng=rng).random(n_points)
    return np.clip(points, _EPS, 1.0 - _EPS)


@dataclass(frozen=True, eq=False)
class QuasiMonteCarloFeatures(FourierFeatureMap, name="qmc"):
    r"""Randomized quasi-Monte Carlo features.

    Notes
    -----
    Yang et al. (2014), Section 3: replace the i.i.d. frequencies of RFF by
    omega_l = Phi^{-1}(t_l), t_l a low-discrepancy sequence in (0, 1)^d and Phi^{-1} the
    coordinate-wise inverse CDF of the spectral law (their Algorithm 1;
    ``kernel.frequencies_from_uniform``), with equal weights
    (an odd n_components adds one point with a single phase-shifted cosine, module
    ``_fourier``):

        psi(x) = sqrt(s / S) [cos(omega_l^T (x - c) / l), sin(omega_l^T (x - c) / l)]_l.

    Base laws and their inverse CDFs (docs/conventions.md, "Spectral laws the maps ask for"):
    Gaussian N(0, 1) per dimension; Cauchy kernel Laplace(0, 1) per dimension; Laplacian
    kernel standard Cauchy per dimension; Matern the multivariate Student t with 2 nu dof as
    g sqrt(2 nu / w), g from N(0, 1) inverse CDFs of d coordinates and w from the
    chi^2(2 nu) inverse CDF of one extra coordinate (points in (0, 1)^(d + e), e =
    ``kernel.uniform_extra_dims``). The points are randomly scrambled (scipy.stats.qmc,
    seeded from ``rng``), so each omega_l has the exact law and the estimate is unbiased, while the points stay
    equidistributed: for integrands of bounded variation the error decays like the
    discrepancy, O((log S)^d / S) (Koksma-Hlawka), faster than RFF's S^(-1/2) for small d.
    """

    description = "quasi-Monte Carlo features: scrambled Sobol/Halton through inverse CDFs"
    reference = "Yang, Sindhwani, Avron & Mahoney, ICML 2014, Section 3, Algorithm 1"

    @classmethod
    def supports(cls, kernel: Kernel) -> bool:
        """Kernels with an inverse-CDF construction (``kernel.uniform_extra_dims``)."""
        return kernel.uniform_extra_dims is not None

    @classmethod
    def build(cls, X, kernel: Kernel, n_components: int, rng=None, *,
              sequence: str = "sobol"):
        """Draw a scrambled low-discrepancy point set and map it to frequencies.

        Parameters
        ----------
        X : array-like (n_samples, n_dims)
        kernel : Kernel
        n_components : int
            Number of real columns: n_components // 2 cos/sin pairs, and for an odd count one
            more point with a single phase-shifted cosine.
        rng : numpy.random.Generator
            Seeds the scrambling and the phase shift (the only randomness).
        sequence : {"sobol", "halton"}, default "sobol"
        """
        X = check_matrix(X, "X")
        kernel.check_n_dims(X.shape[1])
        if sequence not in SEQUENCES:
            raise ValueError(f"sequence must be one of {SEQUENCES}, got {sequence!r}")
        require_support(cls, kernel, "no inverse-CDF construction of its frequencies is known")
        n_frequencies, n_single = monte_carlo_frequencies(n_components)
        n_dims = X.shape[1]
        rng = as_generator(rng)
        points = scrambled_points(n_frequencies, n_dims + kernel.uniform_extra_dims,
                                  sequence, rng)
        return cls(n_dims=n_dims, omega=kernel.frequencies_from_uniform(points),
                   frequency_weights=monte_carlo_weights(n_frequencies, n_single),
                   offset=data_centre(X), phase_shifts=draw_phase_shifts(rng, n_single))
