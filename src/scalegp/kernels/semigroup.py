"""The reciprocal semigroup kernel, for non-negative inputs: a kernel with a Laplace
representation (docs/gauss-legendre.md, section 9).
"""

from __future__ import annotations


import numpy as np

from .._validation import check_matrix
from .base import Kernel
from .spectral import _per_dimension_tail


class ReciprocalSemigroup(Kernel, names={"reciprocal_semigroup": {}}):
    """Reciprocal semigroup kernel on non-negative inputs, s prod_j c_j / (x_j + z_j + c_j).

    A semigroup kernel depends on x + z, not x - z (GLF paper Section 6.3, after Yang et al.
    2014; docs/gauss-legendre.md, section 9); its Laplace representation (Berg, Christensen &
    Ressel) is

        k(x, z) = s int_{R^d_+} e^{-eta^T (x + z)} p_c(eta) d eta,
        p_c(eta) = prod_j c_j e^{-c_j eta_j}  (eta >= 0),

    since int_0^inf c e^{-c eta} e^{-eta u} d eta = c / (c + u). The scale c plays the part
    of a length scale, kappa(u) = prod_j 1 / (1 + u_j) with u = (x + z) / c, and is stored as
    one: ``length_scale`` (and ``length_scale_bounds``) hold c, log-parameters are
    [log c..., log s]. ``spectral_density`` is p_c times s (on eta >= 0); there is no
    frequency sampler, so Fourier feature maps do not apply: use ``"glf-semigroup"``.
    """

    name = "reciprocal_semigroup"
    separable = True
    shift_invariant = False
    laplace_representation = True

    @property
    def c(self) -> np.ndarray:
        """The scale c (the ``length_scale`` field)."""
        return self.length_scale

    def _scaled_differences(self, X, Y):
        """u = (x + z) / c for every pair (the kernel's argument; inputs must be >= 0)."""
        X = _non_negative(X, "X")
        Y = X if Y is None else _non_negative(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        return (X[:, None, :] + Y[None, :, :]) / self._length_scale

    def diag(self, X) -> np.ndarray:
        """k(x, x) = s prod_j 1 / (1 + 2 x_j / c_j)."""
        X = _non_negative(X, "X")
        self.check_n_dims(X.shape[1])
        return self._variance * self._correlation(2.0 * X / self._length_scale)

    def diag_gradient(self, X) -> np.ndarray:
        """d k(x, x) / d theta with u = 2 x / c: s kappa(u) u_j / (1 + u_j) per log c_j
        (summed over j for one c), and k(x, x) for log s; shape (n_params, n)."""
        X = _non_negative(X, "X")
        self.check_n_dims(X.shape[1])
        U = 2.0 * X / self._length_scale
        per_dim = self._variance * self._correlation_grad_log_scale(U)        # (n, d)
        scales = per_dim.T if self.anisotropic else per_dim.sum(axis=1)[None, :]
        return np.vstack([scales, self._variance * self._correlation(U)[None, :]])

    def _correlation(self, U):
        return np.prod(1.0 / (1.0 + U), axis=-1)

    def _correlation_grad_log_scale(self, U):
        # du_j / d log c_j = -u_j, so d kappa / d log c_j = kappa u_j / (1 + u_j)
        return self._correlation(U)[..., None] * (U / (1.0 + U))

    def _log_base_density(self, V):
        return -V.sum(axis=1)

    def _log_base_density_grad_log(self, V):
        return -V

    def _sample_base(self, rng, n_samples, n_dims):
        raise NotImplementedError(
            "the reciprocal semigroup kernel is not shift-invariant: it has no Fourier "
            "frequencies to sample; use the 'glf-semigroup' approximation"
        )

    def laplace_tail_radius(self, relative_tail, n_dims):
        """r = -log u_t: the tail 1 - prod_j (1 - e^{-r}) of p_c outside {c_j eta_j <= r}
        equals t with equal factors per dimension."""
        return -np.log(_per_dimension_tail(relative_tail, n_dims))


def _non_negative(X, name: str, n_dims: int | None = None) -> np.ndarray:
    X = check_matrix(X, name, n_dims=n_dims)
    if np.any(X < 0):
        raise ValueError(
            f"{name} must be non-negative for a semigroup kernel, got a minimum of "
            f"{float(X.min())!r}"
        )
    return X
