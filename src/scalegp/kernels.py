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
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import numpy as np
from scipy import stats
from scipy.special import betaincinv, erfcinv, gammaln

from ._validation import (
    as_generator,
    check_bounds,
    check_matrix,
    check_positive_int,
    check_positive_scalar,
    check_positive_vector,
    check_within_bounds,
)

#: Default length-scale box, meant for standardised inputs (unit variance per column, a data
#: box about 3.5 wide): from 1/350 of the box (a rougher function is noise at any n a GP
#: handles) to 30 box widths (a function flat on the data). Its ratio upper / lower is 1e4,
#: the widest box for which a fixed-basis map (Gauss-Legendre features) builds its rule on
#: Theta itself rather than on a fallback around the starting value; such a map further
#: narrows the search to the length scales its nodes resolve
#: (:meth:`scalegp.features.FeatureMap.valid_log_bounds`). Scale raw inputs first, or set
#: the bounds.
DEFAULT_LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
#: Default signal-variance box; wide, as the targets are often not normalised (a fixed-basis
#: map's rule depends on the variance only through its truncation tail, log s_max).
DEFAULT_VARIANCE_BOUNDS = (1e-5, 1e5)


#: Names that :func:`get` (and the estimators and the command line) accept -> (class, the
#: constructor arguments the name fixes); filled by the kernel classes' ``names=``.
KERNEL_NAMES: dict[str, tuple[type, dict]] = {}
#: Registered kernel classes by class name (model files store the class name).
KERNEL_CLASSES: dict[str, type] = {}


class Kernel(abc.ABC):
    """A stationary kernel s * kappa(L^{-1} (x - z)), L = diag(length_scale).

    Parameters
    ----------
    length_scale : float or array of shape (n_dims,)
        One value (isotropic) or one per input dimension (ARD).
    variance : float
        The signal variance s = k(x, x).
    length_scale_bounds, variance_bounds : (lower, upper) or "fixed"
        The box Theta for hyperparameter learning (in the original, not log, scale).
    """

    name: ClassVar[str]
    #: True when kappa is a product over dimensions (per-dimension spectral factors).
    separable: ClassVar[bool] = False
    #: True when k depends on x - z only (Bochner: Fourier feature maps apply).
    shift_invariant: ClassVar[bool] = True
    #: True when the standardized angular frequencies are omega ~ N(0, I_d): the measure that
    #: Gauss-Hermite and fully symmetric rules integrate against (docs/conventions.md,
    #: "Spectral laws the maps ask for").
    spectral_measure_is_standard_normal: ClassVar[bool] = False
    #: The Gaussian scale-mixture form omega = t * g, g ~ N(0, I_d) independent of t:
    #: "radial" (one scalar t per frequency), "per_dimension" (t_j per coordinate) or None
    #: (no such form known); see :meth:`sample_mixture_scales`.
    scale_mixture: ClassVar[str | None] = None
    #: Uniform coordinates beyond n_dims that :meth:`frequencies_from_uniform` consumes per
    #: frequency, or None when no inverse-CDF construction of omega is known.
    uniform_extra_dims: ClassVar[int | None] = None
    #: The decay class of the spectral density (docs/gauss-legendre.md, section 5): "F1"
    #: separable polynomial, "F2" radial polynomial, "F3" exponential, "F4"
    #: square-exponential, or None when none is known. The Gauss-Legendre map ``"glf"`` needs
    #: one, with :meth:`spectral_decay_rate`, :meth:`spectral_tail_radius` and
    #: :meth:`log_spectral_density_bound`.
    spectral_decay_class: ClassVar[str | None] = None
    #: Panels per dimension of a Gauss-Legendre rule on the density: 1 where it is analytic
    #: across eta_j = 0, 2 where it has a kink there (one panel on each side;
    #: docs/gauss-legendre.md, section 1).
    spectral_panels: ClassVar[int] = 1
    #: True when k(x, z) = s int_{R^d_+} e^{-eta^T (x + z)} p(eta) d eta (a semigroup kernel;
    #: the map ``"glf-semigroup"``, with :meth:`laplace_tail_radius`).
    laplace_representation: ClassVar[bool] = False

    def __init_subclass__(cls, names: dict | None = None, **kwargs):
        """``names={"name": {fixed constructor arguments}, ...}`` registers the class: the
        names for :func:`get`, the class name for model files (:func:`from_params`). A kernel
        is then one class (docs/extending.md)."""
        super().__init_subclass__(**kwargs)
        if names is None:
            return
        for name, fixed in names.items():
            if name in KERNEL_NAMES and KERNEL_NAMES[name][0] is not cls:
                raise ValueError(f"kernel name {name!r} is registered twice")
            KERNEL_NAMES[name] = (cls, dict(fixed))
        KERNEL_CLASSES[cls.__name__] = cls

    def __init__(self, length_scale=1.0, variance=1.0,
                 length_scale_bounds=DEFAULT_LENGTH_SCALE_BOUNDS,
                 variance_bounds=DEFAULT_VARIANCE_BOUNDS):
        self._length_scale = check_positive_vector(length_scale, "length_scale")
        self._variance = check_positive_scalar(variance, "variance")
        self._length_scale_bounds = check_bounds(length_scale_bounds, "length_scale_bounds")
        self._variance_bounds = check_bounds(variance_bounds, "variance_bounds")
        check_within_bounds(self._length_scale, self._length_scale_bounds, "length_scale")
        check_within_bounds(self._variance, self._variance_bounds, "variance")

    # ----------------------------------------------------------------- parameters
    @property
    def length_scale(self) -> np.ndarray:
        return self._length_scale.copy()

    @property
    def variance(self) -> float:
        return self._variance

    @property
    def length_scale_bounds(self):
        return self._length_scale_bounds

    @property
    def variance_bounds(self):
        return self._variance_bounds

    @property
    def anisotropic(self) -> bool:
        return self._length_scale.size > 1

    @property
    def n_params(self) -> int:
        return self._length_scale.size + 1

    @property
    def theta(self) -> np.ndarray:
        """Log-parameters: [log l_1, ..., log l_p, log s]."""
        return np.log(np.append(self._length_scale, self._variance))

    @property
    def param_names(self) -> list[str]:
        if self.anisotropic:
            scales = [f"length_scale[{j}]" for j in range(self._length_scale.size)]
        else:
            scales = ["length_scale"]
        return scales + ["variance"]

    @property
    def bounds(self) -> np.ndarray:
        """Log-space box, shape (n_params, 2); a "fixed" parameter has lower == upper."""
        rows = []
        for value in self._length_scale:
            rows.append(_log_bounds(self._length_scale_bounds, value))
        rows.append(_log_bounds(self._variance_bounds, self._variance))
        return np.array(rows)

    def with_theta(self, theta) -> "Kernel":
        """A copy with log-parameters theta (bounds are kept; values are clipped into them)."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,) or not np.all(np.isfinite(theta)):
            raise ValueError(
                f"theta must be a finite vector of length {self.n_params} "
                f"({', '.join(self.param_names)}), got {theta!r}"
            )
        bounds = self.bounds
        values = np.exp(np.clip(theta, bounds[:, 0], bounds[:, 1]))
        return self._replace(length_scale=values[:-1], variance=values[-1])

    def with_params(self, **changes) -> "Kernel":
        """A copy with some constructor arguments replaced.

        Raises
        ------
        ValueError
            If a name is not a constructor argument (scikit-learn's wording for
            ``set_params``), or a value is invalid.
        """
        valid = self._init_args()
        for name in changes:
            if name not in valid:
                raise ValueError(
                    f"Invalid parameter {name!r} for kernel {self!r}. "
                    f"Valid parameters are: {sorted(valid)!r}."
                )
        return self._replace(**changes)

    def _init_args(self) -> dict:
        args = dict(length_scale=self._length_scale.copy(), variance=self._variance,
                    length_scale_bounds=self._length_scale_bounds,
                    variance_bounds=self._variance_bounds)
        return args

    def _replace(self, **changes) -> "Kernel":
        args = self._init_args()
        args.update(changes)
        return type(self)(**args)

    def get_params(self, deep=True) -> dict:
        """Constructor arguments, JSON-friendly (arrays as lists), as scikit-learn's ``get_params``.

        Parameters
        ----------
        deep : bool, default=True
            Accepted for scikit-learn's protocol; a kernel holds no nested estimators, so
            ``deep`` changes nothing. Estimators list these as ``kernel__<name>``.

        Returns
        -------
        params : dict
            ``length_scale`` (list), ``variance``, ``length_scale_bounds``,
            ``variance_bounds`` (and ``nu`` for Matern).
        """
        args = self._init_args()
        args["length_scale"] = args["length_scale"].tolist()
        return args

    def set_params(self, **params):
        """Refused: kernels are immutable (a silent copy would leave the caller's kernel as is).

        Estimators accept scikit-learn's nested ``kernel__<name>`` parameters
        (``estimator.set_params(kernel__length_scale=2.0)``): they replace their kernel by
        ``kernel.with_params(...)``, which is also the way to change a kernel directly.
        """
        raise TypeError(
            "kernels are immutable; use kernel.with_params(...) for a changed copy, or "
            "estimator.set_params(kernel__<name>=...), which replaces the estimator's kernel"
        )

    def __sklearn_clone__(self) -> "Kernel":
        """scikit-learn's ``clone``: the kernel itself (it is immutable, so sharing is safe)."""
        return self

    def check_n_dims(self, n_dims: int) -> None:
        if self.anisotropic and self._length_scale.size != n_dims:
            raise ValueError(
                f"length_scale has {self._length_scale.size} entries (ARD) but X has {n_dims} "
                "column(s); give one length scale per input dimension or a scalar"
            )

    def __eq__(self, other) -> bool:
        return (type(self) is type(other)
                and self.get_params() == other.get_params())

    def __hash__(self):
        return hash((type(self).__name__, tuple(self.theta)))

    def __repr__(self) -> str:
        scale = (np.array2string(self._length_scale, precision=4) if self.anisotropic
                 else f"{self._length_scale[0]:.4g}")
        extra = self._repr_extra()
        return f"{type(self).__name__}({extra}length_scale={scale}, variance={self._variance:.4g})"

    def _repr_extra(self) -> str:
        return ""

    # ----------------------------------------------------------------- exact kernel
    def _scaled_differences(self, X, Y):
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        return (X[:, None, :] - Y[None, :, :]) / self._length_scale

    #: True for a radial kernel kappa(u) = f(|u|^2) with f smooth at 0 (Gaussian, Matern 3/2
    #: and 5/2), which implements ``_profile``, ``_profile_log_scale_sum`` and
    #: ``_profile_input_factor`` of r^2: its matrices then come from r^2 by one GEMM
    #: (:meth:`_scaled_squared_distances`) instead of an (n, m, d) array of differences.
    smooth_in_r2 = False

    def _scaled_squared_distances(self, X, Y):
        """(r^2, A, B): r^2_ia = |a_i - b_a|^2 with a = (x - c) / l, b = (y - c) / l and c the
        mean of Y, as |a|^2 + |b|^2 - 2 a^T b (a GEMM), floored at 0.

        The shift c is the mean of Y, the reference set (training inputs, knots; X itself for
        k(X)), never of X: row i of r^2 is a function of x_i and Y alone, so a far row in a
        prediction batch X moves no other row's distances (a shift by the batch's mean did).

        Rounding: the expansion's terms carry relative errors of about (d + 4) eps, so
        |delta r^2| <= (d + 4) eps (|a| + |b|)^2 to first order. With beta = max_a |b_a| (the
        spread of Y about its mean, in length scales) and |a| <= |b| + r,

            |delta r^2| <= (d + 4) eps (8 beta^2 + 2 r^2):

        an absolute error set by the reference set's spread, not by the data's offset |x| / l
        (as without the shift), plus a relative one for far pairs. f smooth in r^2 at 0 turns
        an error delta of r^2 into delta f'(0), so the matrix is as accurate as from the
        differences (a kink at r = 0, Matern 1/2, would turn it into sqrt(delta): those
        kernels keep the differences). A row (or column) whose |a|^2 overflows, |a| > 1.3e154
        length scales, gets r^2 = inf, so k = 0 exactly, not inf - inf = NaN.
        """
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        shift = Y.mean(axis=0)
        with np.errstate(over="ignore", invalid="ignore"):   # far rows: handled below
            A = (X - shift) / self._length_scale
            B = A if Y is X else (Y - shift) / self._length_scale
            a2 = np.einsum("ij,ij->i", A, A)
            b2 = a2 if B is A else np.einsum("ij,ij->i", B, B)
            r2 = -2.0 * (A @ B.T)
            r2 += a2[:, None]
            r2 += b2[None, :]
        np.maximum(r2, 0.0, out=r2)
        r2[~np.isfinite(a2)] = np.inf
        r2[:, ~np.isfinite(b2)] = np.inf
        return r2, A, B

    def by_differences(self, X, Y=None) -> np.ndarray:
        """k(X, Y) from the coordinate differences (x_j - y_j) / l_j, one dimension at a time:
        accurate to rounding at any offset and free of any shift, in O(len(X) len(Y)) memory
        and O(len(X) len(Y) d) time without a GEMM. For the joint covariance of a prediction
        batch, where neither set is a fixed reference for the shift of :meth:`__call__`."""
        if not self.smooth_in_r2:
            return self(X, Y)                    # already from the differences
        X = check_matrix(X, "X")
        Y = X if Y is None else check_matrix(Y, "Y", n_dims=X.shape[1])
        self.check_n_dims(X.shape[1])
        scale = np.broadcast_to(self._length_scale, (X.shape[1],))
        r2 = np.zeros((X.shape[0], Y.shape[0]))
        with np.errstate(over="ignore"):        # a far row: r^2 = inf, k = 0
            for j in range(X.shape[1]):
                u = np.subtract.outer(X[:, j], Y[:, j])
                u /= scale[j]
                r2 += np.square(u, out=u)
        return self._variance * self._profile(r2)

    def __call__(self, X, Y=None) -> np.ndarray:
        """The kernel matrix k(X, Y), shape (len(X), len(Y)); Y defaults to X.

        Y is the reference set (training inputs, knots) and X the rows evaluated against it:
        row i depends on x_i and Y alone (:meth:`_scaled_squared_distances`), so pass a
        prediction batch as X. A row farther than float64 can measure gets k = 0."""
        if self.smooth_in_r2:
            return self._variance * self._profile(self._scaled_squared_distances(X, Y)[0])
        with np.errstate(over="ignore"):       # a row too far to measure: |u| = inf, k = 0
            return self._variance * self._correlation(self._scaled_differences(X, Y))

    def diag(self, X) -> np.ndarray:
        """k(x, x) for each row of X: the variance s for a stationary kernel."""
        X = check_matrix(X, "X")
        return np.full(X.shape[0], self._variance)

    def diag_gradient(self, X) -> np.ndarray:
        """d k(x, x) / d theta_i for each row, shape (n_params, n): a stationary kernel has
        k(x, x) = s, so 0 for the length scales and s for log s."""
        grad = np.zeros((self.n_params, check_matrix(X, "X").shape[0]))
        grad[-1] = self._variance
        return grad

    def gradient(self, X, Y=None) -> np.ndarray:
        """dK/d theta_i of k(X, Y) (Y defaults to X) for the log-parameters, shape
        (n_params, len(X), len(Y)); memory O(len(X) len(Y) d) (O(len(X) len(Y)) for a
        smooth radial kernel with one length scale)."""
        if self.smooth_in_r2 and not self.anisotropic:
            r2 = self._scaled_squared_distances(X, Y)[0]
            return np.stack([self._variance * self._profile_log_scale_sum(r2),
                             self._variance * self._profile(r2)])
        U = self._scaled_differences(X, Y)
        K = self._variance * self._correlation(U)
        if self.anisotropic:
            scale_grads = self._correlation_grad_log_scale(U)                # (n, n', d)
            grads = list(self._variance * np.moveaxis(scale_grads, -1, 0))
        else:
            grads = [self._variance * self._correlation_grad_log_scale_sum(U)]
        grads.append(K)
        return np.stack(grads)

    def input_gradient_contraction(self, X, Z, E) -> np.ndarray:
        """sum_i E_ia d k(x_i, z_a) / d z_a for each row z_a of Z, shape (len(Z), d).

        With u = (x - z) / l, d k(x, z) / d z_j = -(s / l_j) d kappa / d u_j, so the result is
        -(s / l) o sum_i E_ia grad kappa(u_ia): the chain rule of a function of k(X, Z) in the
        knots (docs/nystrom.md, "Learned knots"). Memory O(len(X) len(Z) d), as for the kernel
        matrix itself. Kernels whose correlation is not differentiable at u = 0 raise
        NotImplementedError.
        """
        E = np.asarray(E, dtype=float)
        if self.smooth_in_r2:
            # grad kappa(u_ia) = g(r^2_ia) u_ia with u_ia = a_i - b_a, so the sum over i is
            # F^T A - (F^T 1) o B with F = E o g(r^2): two GEMMs, no (n, m, d) array
            r2, A, B = self._scaled_squared_distances(X, Z)
            if E.shape != r2.shape:
                raise ValueError(f"E must have shape {r2.shape}, got {E.shape}")
            F = E * self._profile_input_factor(r2)
            return -(self._variance / self._length_scale) * (F.T @ A - F.sum(axis=0)[:, None] * B)
        U = self._scaled_differences(X, Z)
        if E.shape != U.shape[:2]:
            raise ValueError(f"E must have shape {U.shape[:2]}, got {E.shape}")
        grad = self._correlation_grad_input(U)                              # (n, m, d)
        return -(self._variance / self._length_scale) * np.einsum("ia,iaj->aj", E, grad)

    def gradient_inner_and_input_contraction(self, X, Z, E, *, input_contraction=True):
        """(g, c) with g_j = <E, dk(X, Z)/d theta_j> for each log-parameter, shape (n_params,),
        and c = :meth:`input_gradient_contraction` (X, Z, E) (None with
        ``input_contraction=False``): what a Nystrom gradient pass needs of a chunk
        (:meth:`scalegp.features.nystrom.NystromAtTheta.homoscedastic_gradient`).

        For a smooth radial kernel with one length scale, both come from one r^2 and one
        evaluation of kappa and g = kappa'(r) / r (:meth:`_profile_and_input_factor`): with
        d kappa / d log l = -kappa'(r) r = -g r^2 and d k / d log s = k,

            g = [-s <E o g(r^2), r^2>, s <E, kappa(r^2)>];

        other kernels form :meth:`gradient` and the contraction separately.
        """
        if not self.smooth_in_r2 or self.anisotropic:
            inner = np.array([np.vdot(E, dK_j) for dK_j in self.gradient(X, Z)])
            return inner, (self.input_gradient_contraction(X, Z, E) if input_contraction
                           else None)
        E = np.asarray(E, dtype=float)
        r2, A, B = self._scaled_squared_distances(X, Z)
        if E.shape != r2.shape:
            raise ValueError(f"E must have shape {r2.shape}, got {E.shape}")
        profile, factor = self._profile_and_input_factor(r2)
        F = np.multiply(E, factor, out=factor)
        inner = self._variance * np.array([-np.vdot(F, r2), np.vdot(E, profile)])
        if not input_contraction:
            return inner, None
        cross = -(self._variance / self._length_scale) * (F.T @ A - F.sum(axis=0)[:, None] * B)
        return inner, cross

    def _profile_and_input_factor(self, r2) -> tuple[np.ndarray, np.ndarray]:
        """(kappa(r^2), kappa'(r) / r) of a kernel smooth in r^2; kernels override it to share
        one exponential."""
        return self._profile(r2), self._profile_input_factor(r2)

    def _correlation_grad_input(self, U: np.ndarray) -> np.ndarray:
        """d kappa / d u_j, shape (..., d), for the stationary kernels differentiable at
        u = 0 (Gaussian, Matern 3/2 and 5/2, Cauchy)."""
        raise NotImplementedError(
            f"the input gradient (learned knots) is implemented for the gaussian, matern32, "
            f"matern52 and cauchy kernels, not for {self!r} (matern12 and laplacian have a "
            "kink at x = z)")

    @abc.abstractmethod
    def _correlation(self, U: np.ndarray) -> np.ndarray:
        """kappa of the scaled differences U = (x - z) / l, shape (..., d) -> (...)."""

    @abc.abstractmethod
    def _correlation_grad_log_scale(self, U: np.ndarray) -> np.ndarray:
        """d kappa / d log l_j for each dimension j, shape (..., d)."""

    def _correlation_grad_log_scale_sum(self, U: np.ndarray) -> np.ndarray:
        """sum_j d kappa / d log l_j, shape (...): the derivative in one shared length scale.
        A radial kernel overrides it with -kappa'(r) r (no (..., d) temporaries)."""
        return self._correlation_grad_log_scale(U).sum(axis=-1)

    # ----------------------------------------------------------------- spectral side
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


def _log_bounds(bounds, value):
    if bounds == "fixed":
        return (np.log(value), np.log(value))
    return (np.log(bounds[0]), np.log(bounds[1]))


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
    Spectral density (docs/conventions.md; R&W eq. 4.15 times s):
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


def get(name, **params) -> Kernel:
    """A kernel from a name ("gaussian", "rbf", "matern12", "matern32", "matern52",
    "cauchy", "laplacian", "reciprocal_semigroup") or a Kernel instance (returned as is)."""
    if isinstance(name, Kernel):
        return name
    if not isinstance(name, str) or name.lower() not in KERNEL_NAMES:
        raise ValueError(
            f"kernel must be a Kernel or one of {sorted(KERNEL_NAMES)}, got {name!r}"
        )
    cls, fixed = KERNEL_NAMES[name.lower()]
    return cls(**fixed, **params)


def from_params(class_name: str, params: dict) -> Kernel:
    """Rebuild a kernel from its class name and ``get_params()`` (used by model files); the
    class must be a registered one (``names=`` in its class statement)."""
    classes = KERNEL_CLASSES
    if class_name not in classes:
        raise ValueError(f"kernel class must be one of {sorted(classes)}, got {class_name!r}")
    params = dict(params)
    for key in ("length_scale_bounds", "variance_bounds"):
        if key in params and not isinstance(params[key], str):
            params[key] = tuple(params[key])
    return classes[class_name](**params)
