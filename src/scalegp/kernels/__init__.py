"""Stationary kernels: exact values, spectral densities, frequency samplers, log-parameters.

Fourier convention (docs/conventions.md; GLF paper Eq. 9): ordinary frequency,

    k(x, z) = int p(eta) cos(2 pi eta^T (x - z)) d eta,

with the spectral density p scaled by the kernel variance s. The densities are those of the
GLF paper's Table 2 (docs/conventions.md, "Spectral densities"). Monte-Carlo maps draw
*standardized angular* frequencies omega from the unit-length-scale base distribution, so that

    k(x, z) = s E[cos(omega^T (x - z) / l)],    eta = omega / (2 pi l).

Each kernel also carries the laws of omega that the feature maps build on (docs/conventions.md,
"Spectral laws the maps ask for"): its Gaussian scale-mixture form (orthogonal and
spherical-radial maps), its inverse-CDF construction (quasi-Monte Carlo maps) and whether the
law is N(0, I_d) (Gaussian-measure quadrature rules); for the Gauss-Legendre maps, the decay
class of its density (tail radius and scale), a bound of the density on a complex ellipse and
the panels a rule needs, or its Laplace representation (semigroup kernels). Maps ask the
kernel; none tests its class.

Hyperparameters are log-parameters in a fixed order: log length scales (one, or one per
dimension for ARD), then log variance. Kernels are immutable; ``with_theta`` returns a copy.

The package: :mod:`~scalegp.kernels.base` (the :class:`Kernel` protocol, :func:`get`),
:mod:`~scalegp.kernels.values` and :mod:`~scalegp.kernels.spectral` (its two sides),
:mod:`~scalegp.kernels.stationary` and :mod:`~scalegp.kernels.semigroup` (the kernels).
A new kernel is one class (docs/extending.md, "A kernel: one class").
"""

from .base import (DEFAULT_LENGTH_SCALE_BOUNDS, DEFAULT_VARIANCE_BOUNDS, KERNEL_CLASSES,
                   KERNEL_NAMES, Kernel, from_params, get)
from .semigroup import ReciprocalSemigroup
from .stationary import Cauchy, Gaussian, Laplacian, Matern

__all__ = ["DEFAULT_LENGTH_SCALE_BOUNDS", "DEFAULT_VARIANCE_BOUNDS", "KERNEL_CLASSES",
           "KERNEL_NAMES", "Cauchy", "Gaussian", "Kernel", "Laplacian", "Matern",
           "ReciprocalSemigroup", "from_params", "get"]
