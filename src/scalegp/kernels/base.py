"""The kernel protocol: :class:`Kernel` (its parameters, log-parameters and registration by
name), the default boxes, and :func:`get` / :func:`from_params`. What a kernel computes is
in its two mixins: :class:`~scalegp.kernels.values.KernelValues` (exact values and gradients)
and :class:`~scalegp.kernels.spectral.SpectralLaws` (densities, samplers, Gauss-Legendre laws).
"""

from __future__ import annotations

import abc
from typing import ClassVar

import numpy as np

from .._validation import (check_bounds, check_positive_scalar, check_positive_vector,
                           check_within_bounds)
from .spectral import SpectralLaws
from .values import KernelValues

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


class Kernel(KernelValues, SpectralLaws, abc.ABC):
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


def _log_bounds(bounds, value):
    if bounds == "fixed":
        return (np.log(value), np.log(value))
    return (np.log(bounds[0]), np.log(bounds[1]))


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
