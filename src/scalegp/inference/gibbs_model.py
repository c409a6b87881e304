"""The model of the Gibbs sampler (docs/gibbs.md, "Model and priors"): the Gamma priors, the
theta1 grid and its length scales, the feature maps at the grid's atoms (:class:`AtomMaps`:
one per atom, or the shared map repeated), and the state of a chain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._limits import MAX_THETA1_ATOMS, check_count
from ..features.base import MapSequence
from ..kernels import Kernel


#: Relative floor of the FITC-style diagonal c(x) >= DIAG_FLOOR * k(x, x) (docs/gibbs.md,
#: "Cost model"): where the map reproduces k(x, x) (RFF does exactly) c would be 0 and
#: Q^{-1} would not exist.
DIAG_FLOOR = 1e-10


#: Bytes of n x m feature matrices the diagonal sampler keeps over the grid (default).
FEATURE_CACHE_BYTES = 2**30


# ============================================================================ priors, grid
@dataclass(frozen=True)
class GammaPrior:
    """Ga(shape, rate): density b^a x^{a-1} e^{-b x} / Gamma(a), mean a / b (Eq. G3)."""

    shape: float
    rate: float

    def __post_init__(self):
        for name in ("shape", "rate"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.floating, np.integer))
                    and not isinstance(value, bool) and math.isfinite(value) and value > 0):
                raise ValueError(f"a Gamma prior needs a finite {name} > 0 (shape-rate form, "
                                 f"mean shape / rate), got {name}={value!r}")

    @classmethod
    def of(cls, value, name: str) -> "GammaPrior":
        """A prior from a GammaPrior or a (shape, rate) pair."""
        if isinstance(value, GammaPrior):
            return value
        try:
            shape, rate = value
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a (shape, rate) pair, got {value!r}") from None
        try:
            return cls(float(shape), float(rate))
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name}: {error}") from None

    @property
    def mean(self) -> float:
        return self.shape / self.rate

    def draw(self, rng: np.random.Generator) -> float:
        return float(rng.gamma(self.shape, 1.0 / self.rate))     # numpy: shape-scale

    def logpdf(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return (self.shape * math.log(self.rate) - math.lgamma(self.shape)
                + (self.shape - 1) * np.log(x) - self.rate * x)

    def updated(self, shape_add: float, rate_add: float) -> "GammaPrior":
        """The conjugate update Ga(a + shape_add, b + rate_add)."""
        return GammaPrior(self.shape + shape_add, self.rate + rate_add)


def check_theta1_grid(grid) -> np.ndarray:
    """The theta1 atoms c_1..c_t (Eq. G4): a non-empty 1-D array of distinct finite values
    > 0. theta1 = 0 is refused: it is an infinite length scale, where k is constant, the map
    has rank one and the FITC diagonal vanishes."""
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1:
        raise ValueError(f"theta1_grid must be one-dimensional, got shape {grid.shape}")
    if grid.size == 0:
        raise ValueError("theta1_grid is empty; give at least one positive value")
    if not np.all(np.isfinite(grid)):
        raise ValueError(f"theta1_grid must be finite, got {grid[~np.isfinite(grid)][0]!r}")
    if np.any(grid <= 0):
        bad = grid[grid <= 0][0]
        raise ValueError(f"theta1_grid must exclude 0 and negative values (theta1 = 0 is an "
                         f"infinite length scale, a constant kernel), got {bad!r}")
    check_count(grid.size, "theta1_grid's size", MAX_THETA1_ATOMS,
                "one feature map and one m x m factor per atom, built before the first sweep")
    if np.unique(grid).size != grid.size:
        raise ValueError("theta1_grid has repeated values; each atom must be distinct")
    return grid


def length_scale_of(theta1) -> np.ndarray:
    """l = (2 theta1)^{-1/2}: exp(-|x - x'|^2 / (2 l^2)) = exp(-theta1 |x - x'|^2) (Eq. G1)."""
    return 1.0 / np.sqrt(2.0 * np.asarray(theta1, dtype=float))


def unit_kernel(kernel: Kernel, theta1: float) -> Kernel:
    """The kernel family at length scale l(theta1) and variance 1 (fixed bounds)."""
    return kernel.with_params(length_scale=float(length_scale_of(theta1)), variance=1.0,
                              length_scale_bounds="fixed", variance_bounds="fixed")


# ============================================================================ state
@dataclass
class _State:
    """The chain's state: tau, theta2, the grid index h and the latent field: the weights w
    (statistics) or g = f(X) (rows; w is drawn given g for the stored samples)."""

    tau: float
    theta2: float
    index: int
    latent: np.ndarray


def _draw_index(log_probs: np.ndarray, rng: np.random.Generator) -> int:
    """A draw from Pr(h) ∝ exp(log_probs[h]) (inverse CDF; log-sum-exp safe)."""
    cdf = np.cumsum(np.exp(log_probs - log_probs.max()))
    return min(int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right")), cdf.size - 1)


# ============================================================================ no diagonal
@dataclass(frozen=True)
class AtomMaps(MapSequence):
    """One feature map per theta1 atom, map h built at the unit kernel of atom h (a
    :class:`~scalegp.features.base.MapSequence`; the shared map of ``map_per_atom=False`` is
    the one map repeated, made by :func:`scalegp.inference.gibbs.sample_posterior`).

    With maps whose rank depends on the hyperparameters (the fixed-accuracy random
    projection, Algorithm 2) this is the paper's per-grid-point precomputation: atom h has
    rank m_h = ``ranks[h]``. The sampler keeps weights of the largest rank m = max_h m_h; at
    atom h only the first m_h enter f, the others are a priori N(0, 1 / theta2) draws. The
    joint law of (tau, theta2, theta1, f) is then that of the rank-m_h model at every atom,
    since the unused weights integrate out (docs/gibbs.md, "Maps built per atom").
    """


def _atom_map(atoms: AtomMaps, kernel: Kernel, grid: np.ndarray, h: int):
    """(map at theta, kernel) of atom h, at the unit kernel of theta1 = grid[h]."""
    kernel_h = unit_kernel(kernel, grid[h])
    return atoms[h].at(kernel_h), kernel_h
