"""The one owner of theta: names, log-encoding, bounds, fixed parameters and the noise variance.

Every objective of the engine is a function of the log-parameter vector

    theta = [log l_1, ..., log l_p, log s, log s2]

(the kernel's log-parameters, :attr:`scalegp.kernels.Kernel.theta`, then the log noise
variance; docs/engine.md, "Hyperparameters"). :class:`Hyperparameters` is the only place that
encodes a (kernel, noise variance) pair into theta and decodes theta back, and it holds the box
that learning searches: the kernel's bounds and the noise variance's bounds, in log space, where
a parameter whose lower and upper bounds coincide ("fixed") is held at its value.

A feature map may be accurate only on part of the kernel's box (Gauss-Legendre features resolve
a band of length scales: :meth:`scalegp.features.FeatureMap.valid_log_bounds`).
:meth:`Hyperparameters.restricted_to` intersects the box with that region and warns for each
parameter whose range it narrows, so the optimizer searches where the model holds and says so.

The library's default box is meant to hold the optimum, not to confine it: a parameter that
learning leaves on a default bound (not one the user gave) has its side of the box widened by
``WIDENING_FACTOR`` (:meth:`Hyperparameters.default_sides`, :meth:`Hyperparameters.widened`;
the loop is :func:`scalegp.inference.optimize.learn_widening`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import numpy as np

from .._validation import check_bounds, check_positive_scalar, check_within_bounds
from ..kernels import DEFAULT_LENGTH_SCALE_BOUNDS, DEFAULT_VARIANCE_BOUNDS, Kernel

__all__ = ["DEFAULT_NOISE_VARIANCE_BOUNDS", "Hyperparameters", "NOISE_NAME", "WIDENING_FACTOR"]

#: Name of the last entry of theta.
NOISE_NAME = "noise_variance"
#: The estimators' default noise-variance box (relative to a standardized target: 1e-6 is
#: a floor for the conditioning of K + s2 I, 1e5 far above any target's variance).
DEFAULT_NOISE_VARIANCE_BOUNDS = (1e-6, 1e5)
#: A default bound that the optimum sits on moves outward by this factor (3 in log10 units).
WIDENING_FACTOR = 1e3


@dataclass(frozen=True)
class Hyperparameters:
    """A kernel, a noise variance and the log box theta lives in.

    Parameters
    ----------
    kernel : Kernel
        Its hyperparameters are the current values; its bounds the kernel part of the box.
    noise_variance : float
        s2 > 0.
    noise_variance_bounds : (float, float) or "fixed", default="fixed"
    kernel_log_bounds : ndarray of shape (kernel.n_params, 2), optional
        A box narrower than ``kernel.bounds`` (log scale), set by :meth:`restricted_to`.
    """

    kernel: Kernel
    noise_variance: float
    noise_variance_bounds: object = "fixed"
    kernel_log_bounds: np.ndarray | None = None

    def __post_init__(self):
        object.__setattr__(self, "noise_variance",
                           check_positive_scalar(self.noise_variance, NOISE_NAME))
        bounds = check_bounds(self.noise_variance_bounds, "noise_variance_bounds")
        check_within_bounds(self.noise_variance, bounds, NOISE_NAME)
        object.__setattr__(self, "noise_variance_bounds", bounds)

    @classmethod
    def of(cls, hyperparameters) -> "Hyperparameters":
        """``hyperparameters`` itself, or a kernel taken as one (noise variance 1, fixed): an
        objective needs only the kernel to decode theta."""
        if isinstance(hyperparameters, Hyperparameters):
            return hyperparameters
        if isinstance(hyperparameters, Kernel):
            return cls(hyperparameters, 1.0)
        raise TypeError("expected Hyperparameters or a Kernel, got "
                        f"{type(hyperparameters).__name__}")

    # ----------------------------------------------------------------- the vector
    @property
    def n_params(self) -> int:
        """Length of theta: the kernel's parameters and the noise variance."""
        return self.kernel.n_params + 1

    @property
    def names(self) -> list[str]:
        return self.kernel.param_names + [NOISE_NAME]

    @property
    def theta(self) -> np.ndarray:
        """The current values, encoded."""
        return self.encode(self.kernel, self.noise_variance)

    def encode(self, kernel: Kernel, noise_variance: float) -> np.ndarray:
        """theta = [kernel.theta..., log noise_variance]."""
        return np.append(kernel.theta, math.log(noise_variance))

    def decode(self, theta) -> tuple[Kernel, float]:
        """(kernel, noise_variance) at theta; the kernel keeps its bounds and clips into them."""
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_params,):
            raise ValueError(
                f"theta must have shape ({self.n_params},) ({', '.join(self.names)}; log "
                f"scale), got shape {theta.shape}")
        return self.kernel.with_theta(theta[:-1]), float(np.exp(theta[-1]))

    def values(self, theta_or_hyperparameters) -> tuple[Kernel, float]:
        """(kernel, noise_variance) of a theta vector (decoded) or of a Hyperparameters
        (taken as they are, so values given by the user are not rounded through log/exp)."""
        if isinstance(theta_or_hyperparameters, Hyperparameters):
            return theta_or_hyperparameters.kernel, theta_or_hyperparameters.noise_variance
        return self.decode(theta_or_hyperparameters)

    def at(self, theta) -> "Hyperparameters":
        """The same box with the values theta."""
        kernel, noise_variance = self.decode(theta)
        return replace(self, kernel=kernel, noise_variance=noise_variance)

    # ----------------------------------------------------------------- the box
    @property
    def noise_log_bounds(self) -> tuple[float, float]:
        """Log-space bounds of the noise variance ("fixed" pins it at its value)."""
        if self.noise_variance_bounds == "fixed":
            return (math.log(self.noise_variance),) * 2
        lower, upper = self.noise_variance_bounds
        return (math.log(lower), math.log(upper))

    @property
    def noise_variance_lower(self) -> float:
        """The smallest noise variance learning may reach."""
        if self.noise_variance_bounds == "fixed":
            return self.noise_variance
        return self.noise_variance_bounds[0]

    @property
    def bounds(self) -> np.ndarray:
        """The log box, shape (n_params, 2); rows with lower == upper are fixed."""
        kernel_bounds = (self.kernel.bounds if self.kernel_log_bounds is None
                         else self.kernel_log_bounds)
        return np.vstack([kernel_bounds, self.noise_log_bounds])

    @property
    def free(self) -> np.ndarray:
        """Mask of the parameters learning moves."""
        bounds = self.bounds
        return bounds[:, 0] < bounds[:, 1]

    def default_sides(self) -> np.ndarray:
        """Which sides of the box are the library's defaults, shape (n_params, 2) of bool
        (columns: lower, upper): the sides :meth:`widened` may move.

        A group of bounds (the length scales share one pair, then the signal variance, then
        the noise variance) counts as default when it equals the library's default exactly
        (:data:`scalegp.kernels.base.DEFAULT_LENGTH_SCALE_BOUNDS`,
        :data:`~scalegp.kernels.base.DEFAULT_VARIANCE_BOUNDS`,
        :data:`DEFAULT_NOISE_VARIANCE_BOUNDS`): any other pair is the user's box and is kept.
        The noise variance's lower bound is never widened (it is a floor for the conditioning
        of K + s2 I, below scikit-learn's own 1e-5), and a box already narrowed to where a
        feature map is valid (:meth:`restricted_to`) is not widened on the kernel's side.
        """
        sides = np.zeros((self.n_params, 2), dtype=bool)
        kernel = self.kernel
        if self.kernel_log_bounds is None:
            n_scales = kernel.n_params - 1
            if _same_pair(kernel.length_scale_bounds, DEFAULT_LENGTH_SCALE_BOUNDS):
                sides[:n_scales] = True
            if _same_pair(kernel.variance_bounds, DEFAULT_VARIANCE_BOUNDS):
                sides[n_scales] = True
        if _same_pair(self.noise_variance_bounds, DEFAULT_NOISE_VARIANCE_BOUNDS):
            sides[-1, 1] = True
        return sides & self.free[:, None]

    def widened(self, sides, factor: float = WIDENING_FACTOR) -> "Hyperparameters":
        """The same values in a box whose marked sides moved outward by ``factor``.

        Parameters
        ----------
        sides : array of bool, shape (n_params, 2)
            Sides to move (columns: lower, upper). The length scales share one pair of
            bounds, so a side marked for any of them moves for all: lower / factor,
            upper * factor.
        factor : float > 1

        Returns
        -------
        Hyperparameters
            With the kernel rebuilt on the wider bounds (its values unchanged).
        """
        sides = np.asarray(sides, dtype=bool)
        if sides.shape != (self.n_params, 2):
            raise ValueError(f"sides must have shape ({self.n_params}, 2), got {sides.shape}")
        factor = check_positive_scalar(factor, "factor")
        if factor <= 1.0:
            raise ValueError(f"factor must be > 1, got {factor}")
        if self.kernel_log_bounds is not None and np.any(sides[:-1]):
            raise ValueError("a box narrowed to where a feature map is valid cannot widen")

        def wider(pair, marked):
            lower, upper = pair
            return (lower / factor if marked[:, 0].any() else lower,
                    upper * factor if marked[:, 1].any() else upper)

        n_scales = self.kernel.n_params - 1
        changes = {}
        if sides[:n_scales].any():
            changes["length_scale_bounds"] = wider(self.kernel.length_scale_bounds,
                                                   sides[:n_scales])
        if sides[n_scales].any():
            changes["variance_bounds"] = wider(self.kernel.variance_bounds,
                                               sides[n_scales:n_scales + 1])
        kernel = self.kernel.with_params(**changes) if changes else self.kernel
        noise_bounds = self.noise_variance_bounds
        if sides[-1].any():
            noise_bounds = wider(noise_bounds, sides[-1:])
        return replace(self, kernel=kernel, noise_variance_bounds=noise_bounds)

    def restricted_to(self, valid_log_bounds) -> "Hyperparameters":
        """The box intersected with the region a feature map is valid on (None: unchanged).

        Parameters
        ----------
        valid_log_bounds : ndarray of shape (kernel.n_params, 2) or None
            Log bounds of the kernel's parameters where the map approximates the kernel.

        Warns (UserWarning) for each parameter whose range is narrowed; raises ValueError
        when the intersection is empty for some parameter.
        """
        if valid_log_bounds is None:
            return self
        valid = np.asarray(valid_log_bounds, dtype=float)
        box = self.kernel.bounds if self.kernel_log_bounds is None else self.kernel_log_bounds
        low, high = np.maximum(box[:, 0], valid[:, 0]), np.minimum(box[:, 1], valid[:, 1])
        names = self.kernel.param_names
        for name, (a, b), (c, d) in zip(names, np.exp(valid), np.exp(box)):
            if max(a, c) > min(b, d):
                raise ValueError(
                    f"the feature map approximates the kernel only for {name} in [{a:.4g}, "
                    f"{b:.4g}], which does not meet its bounds [{c:.4g}, {d:.4g}]; move the "
                    "bounds or raise n_components")
        for row, name in enumerate(names):
            if low[row] > box[row, 0] or high[row] < box[row, 1]:
                warnings.warn(
                    f"searching {name} in [{np.exp(low[row]):.4g}, {np.exp(high[row]):.4g}] "
                    f"(the box the feature map's rule resolves) instead of "
                    f"[{np.exp(box[row, 0]):.4g}, {np.exp(box[row, 1]):.4g}]; raise "
                    "n_components for a wider box", UserWarning, stacklevel=3)
        return replace(self, kernel_log_bounds=np.column_stack([low, high]))


def _same_pair(bounds, default) -> bool:
    """Whether ``bounds`` (a pair or "fixed") is the pair ``default``."""
    if isinstance(bounds, str):
        return False
    return tuple(float(b) for b in bounds) == tuple(float(b) for b in default)
