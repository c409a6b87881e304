"""The stationary kernels of the GLF paper's Table 2: Gaussian, Matern, Cauchy (product) and
Laplacian (product), each one class (docs/conventions.md, "Spectral densities").
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats
from scipy.special import betaincinv, erfcinv, gammaln


from .base import DEFAULT_LENGTH_SCALE_BOUNDS, DEFAULT_VARIANCE_BOUNDS, Kernel
from .spectral import _bernstein_imaginary_square, _log_pole_bound, _per_dimension_tail


class Gaussian(Kernel, names={"gaussian": {}, "rbf": {}}):
    """Gaussian (squared-exponential) kernel s exp(-1/2 sum_j (x_j - z_j)^2 / l_j^2).

    Spectral density (docs/conventions.md):
    p(eta) = s prod_j sqrt(2 pi) l_j exp(-2 pi^2 l_j^2 eta_j^2);
    standardized angular frequencies omega ~ N(0, I).
    """

    name = "gaussian"
    separable = True
    spectral_measure_is_standard_normal = True
    scale_mixture = "radial"
    uniform_extra_dims = 0
    spectral_decay_class = "F4"

    smooth_in_r2 = True

    def _profile(self, r2):
        return np.exp(-0.5 * r2)

    def _profile_log_scale_sum(self, r2):
        return np.exp(-0.5 * r2) * r2

    def _profile_input_factor(self, r2):
        return -np.exp(-0.5 * r2)

    def _profile_and_input_factor(self, r2):
        e = np.exp(-0.5 * r2)
        return e, -e

    def _correlation(self, U):
        return self._profile(np.einsum("...j,...j->...", U, U))

    def _correlation_grad_log_scale(self, U):
        return self._correlation(U)[..., None] * U**2

    def _correlation_grad_log_scale_sum(self, U):
        return self._profile_log_scale_sum(np.einsum("...j,...j->...", U, U))

    def _correlation_grad_input(self, U):
        return self._profile_input_factor(np.einsum("...j,...j->...", U, U))[..., None] * U

    def _log_base_density(self, V):
        d = V.shape[1]
        return 0.5 * d * np.log(2 * np.pi) - 2 * np.pi**2 * np.einsum("ij,ij->i", V, V)

    def _log_base_density_grad_log(self, V):
        return -4 * np.pi**2 * V**2

    def _sample_base(self, rng, n_samples, n_dims):
        return rng.standard_normal((n_samples, n_dims))

    def sample_mixture_scales(self, n_frequencies, n_dims, rng):
        """t = 1: omega = g is already N(0, I_d) (no randomness drawn)."""
        return np.ones((n_frequencies, 1))

    def frequencies_from_uniform(self, U):
        """omega_j = Phi^{-1}(u_j), Phi the standard normal CDF."""
        return stats.norm.ppf(U)

    def spectral_decay_rate(self):
        """sqrt(2) pi (class F4)."""
        return math.sqrt(2.0) * math.pi

    def spectral_tail_radius(self, relative_tail, n_dims):
        """r = erfcinv(u_t)."""
        return float(erfcinv(_per_dimension_tail(relative_tail, n_dims)))

    def log_spectral_density_bound(self, length_scale, variance, j, half_length, rho):
        """s prod_i sqrt(2 pi) l_i exp(2 pi^2 l_j^2 (h b)^2)."""
        y2 = _bernstein_imaginary_square(half_length, rho)
        return (math.log(variance) + np.sum(np.log(math.sqrt(2 * math.pi) * length_scale))
                + 2 * math.pi**2 * length_scale[j] ** 2 * y2)


class Matern(Kernel, names={"matern12": {"nu": 0.5}, "matern32": {"nu": 1.5},
                            "matern52": {"nu": 2.5}}):
    """Matern kernel, nu in {1/2, 3/2, 5/2}, with r = ||L^{-1}(x - z)||.

    nu = 1/2: s exp(-r); 3/2: s (1 + sqrt3 r) exp(-sqrt3 r);
    5/2: s (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r).
    Spectral density (docs/conventions.md; R&W eq. 4.15 times s)::

        p(eta) = s Gamma(nu + d/2) / Gamma(nu) (2 pi / nu)^{d/2} prod_j l_j
                 (1 + (2 pi^2 / nu) sum_j l_j^2 eta_j^2)^{-(nu + d/2)};

    standardized angular frequencies omega follow a multivariate Student t with 2 nu dof.
    """

    name = "matern"
    SUPPORTED_NU = (0.5, 1.5, 2.5)
    scale_mixture = "radial"
    uniform_extra_dims = 1
    spectral_decay_class = "F2"

    def __init__(self, nu=2.5, length_scale=1.0, variance=1.0,
                 length_scale_bounds=DEFAULT_LENGTH_SCALE_BOUNDS,
                 variance_bounds=DEFAULT_VARIANCE_BOUNDS):
        try:
            nu_value = float(nu)
        except (TypeError, ValueError):
            nu_value = None
        if nu_value not in self.SUPPORTED_NU:
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {nu!r}")
        self.nu = nu_value
        super().__init__(length_scale, variance, length_scale_bounds, variance_bounds)

    def _init_args(self):
        return dict(nu=self.nu, **super()._init_args())

    def _repr_extra(self):
        return f"nu={self.nu}, "

    @property
    def smooth_in_r2(self) -> bool:
        """nu = 3/2 and 5/2 are smooth in r^2 at 0; nu = 1/2, exp(-r), has a kink."""
        return self.nu != 0.5

    def _profile(self, r2):
        # in place on a = sqrt(2 nu) r: kernel matrices are the size of a chunk times m
        a = np.sqrt(r2)
        if self.nu == 0.5:
            return np.exp(-a, out=a)
        a *= np.sqrt(2.0 * self.nu)
        # e^{-a} is 0 in float64 beyond a = 745.2, so capping a at 1e3 changes no value and
        # keeps a = inf (a row too far to measure) from giving inf * 0 = NaN
        np.minimum(a, 1e3, out=a)
        e = np.exp(-a)
        if self.nu == 1.5:
            a += 1.0
        else:
            a += 1.0 + a * a / 3.0
        a *= e
        return a

    def _correlation(self, U):
        return self._profile(np.einsum("...j,...j->...", U, U))

    def _correlation_grad_log_scale(self, U):
        # d kappa / d log l_j = -kappa'(r) u_j^2 / r  (since dr / d log l_j = -u_j^2 / r);
        # kappa'(r)/r is finite at r = 0 for nu = 3/2, 5/2 and is handled by a mask for 1/2.
        r = np.sqrt(np.einsum("...j,...j->...", U, U))
        if self.nu == 0.5:
            with np.errstate(divide="ignore", invalid="ignore"):
                factor = np.where(r > 0, np.exp(-r) / np.where(r > 0, r, 1.0), 0.0)
        elif self.nu == 1.5:
            factor = 3.0 * np.exp(-np.sqrt(3.0) * r)
        else:
            a = np.sqrt(5.0) * r
            factor = (5.0 / 3.0) * (1 + a) * np.exp(-a)
        return factor[..., None] * U**2

    def _correlation_grad_log_scale_sum(self, U):
        return self._profile_log_scale_sum(np.einsum("...j,...j->...", U, U))

    def _profile_log_scale_sum(self, r2):
        # sum_j d kappa / d log l_j = -kappa'(r) r, with r^2 = sum_j u_j^2
        r = np.sqrt(r2)
        if self.nu == 0.5:
            return np.exp(-r) * r
        if self.nu == 1.5:
            return 3.0 * np.exp(-np.sqrt(3.0) * r) * r2
        a = np.sqrt(5.0) * r
        return (5.0 / 3.0) * (1 + a) * np.exp(-a) * r2

    def _correlation_grad_input(self, U):
        # d kappa / d u_j = kappa'(r) u_j / r; kappa'(r) / r = -3 e^{-sqrt(3) r} (nu = 3/2),
        # -(5/3)(1 + sqrt(5) r) e^{-sqrt(5) r} (nu = 5/2); nu = 1/2 has a kink at r = 0
        if self.nu == 0.5:
            return super()._correlation_grad_input(U)
        return self._profile_input_factor(np.einsum("...j,...j->...", U, U))[..., None] * U

    def _profile_input_factor(self, r2):
        # kappa'(r) / r, so that d kappa / d u_j = (kappa'(r) / r) u_j (nu = 3/2, 5/2)
        r = np.sqrt(r2)
        if self.nu == 1.5:
            return -3.0 * np.exp(-np.sqrt(3.0) * r)
        a = np.sqrt(5.0) * r
        return -(5.0 / 3.0) * (1 + a) * np.exp(-a)

    def _profile_and_input_factor(self, r2):
        # one exponential e = exp(-a), a = sqrt(2 nu) r, for both (nu = 3/2, 5/2)
        a = np.sqrt(r2)
        a *= np.sqrt(2.0 * self.nu)
        e = np.exp(-a)
        if self.nu == 1.5:
            return (1.0 + a) * e, -3.0 * e
        return (1.0 + a + a * a / 3.0) * e, -(5.0 / 3.0) * (1.0 + a) * e

    def _log_base_density(self, V):
        d = V.shape[1]
        alpha = self.nu + 0.5 * d
        u = (2 * np.pi**2 / self.nu) * np.einsum("ij,ij->i", V, V)
        return (gammaln(alpha) - gammaln(self.nu) + 0.5 * d * np.log(2 * np.pi / self.nu)
                - alpha * np.log1p(u))

    def _log_base_density_grad_log(self, V):
        alpha = self.nu + 0.5 * V.shape[1]
        u_j = (2 * np.pi**2 / self.nu) * V**2
        return -2 * alpha * u_j / (1 + u_j.sum(axis=1, keepdims=True))

    def _sample_base(self, rng, n_samples, n_dims):
        normal_rng, chi2_rng = rng.spawn(2)
        g = normal_rng.standard_normal((n_samples, n_dims))
        w = chi2_rng.chisquare(2 * self.nu, size=(n_samples, 1))
        return g / np.sqrt(w / (2 * self.nu))

    def sample_mixture_scales(self, n_frequencies, n_dims, rng):
        """t = sqrt(2 nu / w), w ~ chi^2(2 nu): t g is the Student t with 2 nu dof."""
        return np.sqrt(2 * self.nu / rng.chisquare(2 * self.nu, size=(n_frequencies, 1)))

    def frequencies_from_uniform(self, U):
        """omega = g sqrt(2 nu / w), g_j = Phi^{-1}(u_j) from the first d coordinates and
        w = F^{-1}_{chi^2(2 nu)}(u_{d+1}) from the last one."""
        w = stats.chi2.ppf(U[:, -1:], 2 * self.nu)
        return stats.norm.ppf(U[:, :-1]) * np.sqrt(2 * self.nu / w)

    def spectral_decay_rate(self):
        """pi sqrt(2 / nu) (class F2)."""
        return math.pi * math.sqrt(2.0 / self.nu)

    def spectral_tail_radius(self, relative_tail, n_dims):
        """r = sqrt(1/x - 1), x = betaincinv(nu, d/2, t): the mass outside the ellipsoid
        |Sigma eta|_2 <= r is exactly s I_{1/(1+r^2)}(nu, d/2)."""
        x = betaincinv(self.nu, 0.5 * n_dims, relative_tail)
        return float(np.sqrt(1.0 / x - 1.0))

    def log_spectral_density_bound(self, length_scale, variance, j, half_length, rho):
        """The peak p(0) times (1 - (2 pi^2 l_j^2 / nu) (h b)^2)^{-(nu + d/2)}, finite below
        the poles at eta_j = +-i sqrt(nu) / (sqrt(2) pi l_j)."""
        nu, d = self.nu, length_scale.size
        y2 = _bernstein_imaginary_square(half_length, rho)
        log_peak = (math.log(variance) + gammaln(nu + 0.5 * d) - gammaln(nu)
                    + 0.5 * d * math.log(2 * math.pi / nu) + np.sum(np.log(length_scale)))
        gap = 1.0 - (2 * math.pi**2 * length_scale[j] ** 2 / nu) * y2
        return _log_pole_bound(log_peak, gap, nu + 0.5 * d)


class Cauchy(Kernel, names={"cauchy": {}}):
    """Product Cauchy kernel s prod_j 1 / (1 + (x_j - z_j)^2 / l_j^2).

    Spectral density (docs/conventions.md): p(eta) = s prod_j pi l_j exp(-2 pi l_j |eta_j|);
    standardized angular frequencies are Laplace(0, 1) per dimension.
    """

    name = "cauchy"
    separable = True
    scale_mixture = "per_dimension"
    uniform_extra_dims = 0
    spectral_decay_class = "F3"
    spectral_panels = 2             # e^{-2 pi l |eta_j|} has a kink at eta_j = 0

    def _correlation(self, U):
        return np.prod(1.0 / (1.0 + U**2), axis=-1)

    def _correlation_grad_log_scale(self, U):
        return self._correlation(U)[..., None] * (2 * U**2 / (1 + U**2))

    def _correlation_grad_input(self, U):
        return -self._correlation(U)[..., None] * (2 * U / (1 + U**2))

    def _log_base_density(self, V):
        return V.shape[1] * np.log(np.pi) - 2 * np.pi * np.abs(V).sum(axis=1)

    def _log_base_density_grad_log(self, V):
        return -2 * np.pi * np.abs(V)

    def _sample_base(self, rng, n_samples, n_dims):
        return rng.laplace(0.0, 1.0, size=(n_samples, n_dims))

    def sample_mixture_scales(self, n_frequencies, n_dims, rng):
        """t_j = sqrt(2 e_j), e_j ~ Exp(1): t_j g_j is Laplace(0, 1), since
        E exp(-e z^2) = 1 / (1 + z^2)."""
        return np.sqrt(2 * rng.standard_exponential((n_frequencies, n_dims)))

    def frequencies_from_uniform(self, U):
        """omega_j = F^{-1}(u_j), F the Laplace(0, 1) CDF."""
        return stats.laplace.ppf(U)

    def spectral_decay_rate(self):
        """2 pi (class F3)."""
        return 2 * math.pi

    def spectral_tail_radius(self, relative_tail, n_dims):
        """r = -log u_t."""
        return float(-np.log(_per_dimension_tail(relative_tail, n_dims)))

    def log_spectral_density_bound(self, length_scale, variance, j, half_length, rho):
        """s prod_i pi l_i exp(2 pi l_j h (a - 1)) on a half-line panel (the density is
        entire on each panel, and Re eta_j >= -h (a - 1) there)."""
        a = 0.5 * (rho + 1.0 / rho)
        return (math.log(variance) + np.sum(np.log(math.pi * length_scale))
                + 2 * math.pi * length_scale[j] * half_length * (a - 1.0))


class Laplacian(Kernel, names={"laplacian": {}}):
    """Laplacian (product exponential) kernel s exp(-sum_j |x_j - z_j| / l_j).

    Spectral density (docs/conventions.md): p(eta) = s prod_j 2 l_j / (1 + 4 pi^2 l_j^2 eta_j^2);
    standardized angular frequencies are standard Cauchy per dimension.
    """

    name = "laplacian"
    separable = True
    scale_mixture = "per_dimension"
    uniform_extra_dims = 0
    spectral_decay_class = "F1"

    def _correlation(self, U):
        return np.exp(-np.abs(U).sum(axis=-1))

    def _correlation_grad_log_scale(self, U):
        return self._correlation(U)[..., None] * np.abs(U)

    def _log_base_density(self, V):
        return V.shape[1] * np.log(2.0) - np.log1p(4 * np.pi**2 * V**2).sum(axis=1)

    def _log_base_density_grad_log(self, V):
        a = 4 * np.pi**2 * V**2
        return -2 * a / (1 + a)

    def _sample_base(self, rng, n_samples, n_dims):
        return rng.standard_cauchy((n_samples, n_dims))

    def sample_mixture_scales(self, n_frequencies, n_dims, rng):
        """t_j = 1 / |n_j|, n_j ~ N(0, 1): t_j g_j is standard Cauchy, since
        E exp(-z^2 / (2 n^2)) = exp(-|z|)."""
        return 1.0 / np.abs(rng.standard_normal((n_frequencies, n_dims)))

    def frequencies_from_uniform(self, U):
        """omega_j = F^{-1}(u_j), F the standard Cauchy CDF."""
        return stats.cauchy.ppf(U)

    def spectral_decay_rate(self):
        """2 pi (class F1)."""
        return 2 * math.pi

    def spectral_tail_radius(self, relative_tail, n_dims):
        """r = cot(pi u_t / 2)."""
        return float(1.0 / np.tan(0.5 * math.pi * _per_dimension_tail(relative_tail, n_dims)))

    def log_spectral_density_bound(self, length_scale, variance, j, half_length, rho):
        """s prod_i 2 l_i times (1 - 4 pi^2 l_j^2 (h b)^2)^{-1}, finite below the poles at
        eta_j = +-i / (2 pi l_j)."""
        y2 = _bernstein_imaginary_square(half_length, rho)
        log_peak = math.log(variance) + np.sum(np.log(2 * length_scale))
        gap = 1.0 - 4 * math.pi**2 * length_scale[j] ** 2 * y2
        return _log_pole_bound(log_peak, gap, 1.0)
