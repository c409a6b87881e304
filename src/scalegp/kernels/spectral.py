"""A kernel's spectral side: the density p(eta) and its gradient, the samplers of the
standardized frequencies omega and their scale-mixture and inverse-CDF forms, and the
Gauss-Legendre laws (decay class, tail radius, a bound on a complex ellipse, the Laplace
representation): :class:`SpectralLaws`, a mixin of :class:`scalegp.kernels.base.Kernel`
(docs/conventions.md, "Spectral laws the maps ask for").
"""

from __future__ import annotations

import abc

import numpy as np

from .._validation import as_generator, check_positive_int


class SpectralLaws:
    """What the feature maps ask of a kernel's spectral density; the base says "none known"."""

    def _check_frequencies(self, eta) -> np.ndarray:
        eta = np.asarray(eta, dtype=float)
        if eta.ndim != 2:
            raise ValueError(f"eta must be a 2-D array (n_frequencies, n_dims), got {eta.shape}")
        self.check_n_dims(eta.shape[1])
        return eta

    def spectral_density(self, eta) -> np.ndarray:
        """p(eta) under the ordinary-frequency convention, including the variance s."""
        return np.exp(self.log_spectral_density(eta))

    def log_spectral_density(self, eta) -> np.ndarray:
        """log p(eta), shape (n_frequencies,)."""
        eta = self._check_frequencies(eta)
        scale = np.broadcast_to(self._length_scale, (eta.shape[1],))
        return np.log(self._variance) + self._log_base_density(eta * scale) + np.log(scale).sum()

    def log_spectral_density_grad(self, eta) -> np.ndarray:
        """d log p(eta) / d theta_i for the log-parameters, shape (n_frequencies, n_params).

        Differentiating log p instead of p keeps the gradient finite when p underflows.
        The variance column is 1; a length-scale column is
        1 + d log p0(v) / d log v_j at v = l * eta (chain rule through v_j = l_j eta_j);
        docs/conventions.md, "Log-density derivatives".
        """
        eta = self._check_frequencies(eta)
        scale = np.broadcast_to(self._length_scale, (eta.shape[1],))
        per_dim = 1.0 + self._log_base_density_grad_log(eta * scale)         # (m, d)
        if not self.anisotropic:
            per_dim = per_dim.sum(axis=1, keepdims=True)
        return np.hstack([per_dim, np.ones((eta.shape[0], 1))])

    @abc.abstractmethod
    def _log_base_density(self, V: np.ndarray) -> np.ndarray:
        """log p0(v) of the unit-scale, unit-variance kernel (ordinary frequency)."""

    @abc.abstractmethod
    def _log_base_density_grad_log(self, V: np.ndarray) -> np.ndarray:
        """v_j d log p0(v) / d v_j, shape (m, d)."""

    def sample_standard_frequencies(self, n_samples: int, n_dims: int, rng=None) -> np.ndarray:
        """Draw standardized angular frequencies omega, shape (n_samples, n_dims).

        With unit length scale and variance, E[cos(omega^T delta)] = kappa(delta); the
        frequencies for length scales l are omega / l (phase omega^T (x / l)).
        """
        n_samples = check_positive_int(n_samples, "n_samples")
        n_dims = check_positive_int(n_dims, "n_dims")
        self.check_n_dims(n_dims)
        return self._sample_base(as_generator(rng), n_samples, n_dims)

    @abc.abstractmethod
    def _sample_base(self, rng: np.random.Generator, n_samples: int, n_dims: int) -> np.ndarray:
        """Sampler of omega = 2 pi v with v ~ p0."""

    def sample_mixture_scales(self, n_frequencies: int, n_dims: int,
                              rng: np.random.Generator) -> np.ndarray:
        """Draw the scales t of omega = t * g, g ~ N(0, I_d) independent of t.

        E cos(omega^T z) = E_t exp(-|t * z|^2 / 2) is then the kernel's correlation
        (docs/conventions.md, "Spectral laws the maps ask for").

        Parameters
        ----------
        n_frequencies, n_dims : int
        rng : numpy.random.Generator

        Returns
        -------
        ndarray of shape (n_frequencies, 1) when ``scale_mixture == "radial"``, else
        (n_frequencies, n_dims).

        Raises
        ------
        NotImplementedError
            If the kernel has no known scale-mixture form (``scale_mixture is None``).
        """
        raise NotImplementedError(
            f"kernel {self!r} has no known Gaussian scale-mixture form omega = t * g"
        )

    def frequencies_from_uniform(self, U: np.ndarray) -> np.ndarray:
        """Map points U in (0, 1)^(d + uniform_extra_dims) to omega by inverse CDFs.

        A uniform point maps to an omega of the exact base law, so scrambled low-discrepancy
        points give unbiased quasi-Monte Carlo frequencies (docs/conventions.md, "Spectral
        laws the maps ask for").

        Parameters
        ----------
        U : ndarray (n_frequencies, n_dims + uniform_extra_dims), entries in (0, 1)

        Returns
        -------
        omega : ndarray (n_frequencies, n_dims)

        Raises
        ------
        NotImplementedError
            If no inverse-CDF construction is known (``uniform_extra_dims is None``).
        """
        raise NotImplementedError(
            f"kernel {self!r} has no known inverse-CDF construction of its frequencies"
        )

    # ----------------------------------------------------------------- Gauss-Legendre laws
    def spectral_decay_rate(self) -> float:
        """sigma_j / l_j of the decay class: p(eta) <= C g(Sigma eta), Sigma = diag(sigma_j).

        docs/gauss-legendre.md, section 5.

        Raises
        ------
        NotImplementedError
            If no decay class is known (``spectral_decay_class is None``).
        """
        raise NotImplementedError(self._no_decay_class())

    def spectral_tail_radius(self, relative_tail: float, n_dims: int) -> float:
        """r with spectral mass outside the box {|Sigma eta|_inf <= r} at most s * t.

        docs/gauss-legendre.md, section 5 (t = ``relative_tail``, the tail over the variance
        s; u_t = 1 - (1 - t)^{1/d}).

        Raises
        ------
        NotImplementedError
            If no decay class is known (``spectral_decay_class is None``).
        """
        raise NotImplementedError(self._no_decay_class())

    def log_spectral_density_bound(self, length_scale: np.ndarray, variance: float, j: int,
                                   half_length: float, rho):
        """log sup |p| over the Bernstein region of dimension j, vectorized over rho.

        docs/gauss-legendre.md, section 6.

        ``half_length`` h is the half-length of the interval a rule maps [-1, 1] onto; with
        b = (rho - 1/rho)/2 and a = (rho + 1/rho)/2, |Im eta_j| <= h b on the ellipse (the
        other coordinates real) and, on a two-panel rule's half-line panel [0, 2h],
        Re eta_j >= -h (a - 1). The density is that of the kernel family at ``length_scale``
        (one per dimension) and ``variance``; every bound increases with both, so the worst
        case over a box Theta is at its largest values. +inf where the region reaches a
        singularity of p.

        Raises
        ------
        NotImplementedError
            If no decay class is known (``spectral_decay_class is None``).
        """
        raise NotImplementedError(self._no_decay_class())

    def _no_decay_class(self) -> str:
        return (f"kernel {self!r} has no known decay class of its spectral density (tail "
                "radius and density bound on a complex ellipse)")

    def laplace_tail_radius(self, relative_tail: float, n_dims: int) -> float:
        """r with Laplace-density mass outside the box {c_j eta_j <= r} at most s * t.

        docs/gauss-legendre.md, section 9 (t = ``relative_tail``).

        Raises
        ------
        NotImplementedError
            If the kernel has no Laplace representation (``laplace_representation`` False).
        """
        raise NotImplementedError(
            f"kernel {self!r} has no known Laplace representation "
            "k(x, z) = s int e^{-eta^T (x + z)} p(eta) d eta"
        )


def _per_dimension_tail(relative_tail: float, n_dims: int) -> float:
    """u_t = 1 - (1 - t)^{1/d}: the 1-D tail whose d-fold product box keeps 1 - t."""
    return -np.expm1(np.log1p(-relative_tail) / n_dims)


def _bernstein_imaginary_square(half_length: float, rho):
    """(h b)^2, b = (rho - 1/rho)/2: the largest squared |Im eta_j| on the ellipse."""
    return (half_length * 0.5 * (rho - 1.0 / rho)) ** 2


def _log_pole_bound(log_peak: float, gap, power: float):
    """log_peak - power log(gap) where gap > 0, +inf where the region reaches a pole."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, log_peak - power * np.log(gap), np.inf)


