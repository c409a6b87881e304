"""Noise models: the diagonal D of the approximate covariance K = Psi S Psi^T + D.

Three diagonals (docs/engine.md, "Noise models"):

* homoscedastic, d_i = s2: the learned noise variance, the same on every row;
* known per-row variances v_i (measurement errors) added to it, d_i = s2 + v_i;
* the FITC-style diagonal d_i = s2 [+ v_i] + c_i, c_i = max(k(x_i, x_i) - psi_i^T S psi_i, 0),
  the prior variance the low-rank model misses at x_i (Snelson & Ghahramani 2006; the
  modified predictive process of Finley et al. 2009), floored at 0 where a map over-shoots
  k(x_i, x_i).

The engine writes every diagonal through row weights relative to the noise variance,
w^_i = s2 / d_i (1 for the homoscedastic model): with W^ = diag(w^)::

    M = s2 S + Psi^T W^ Psi,   b = Psi^T W^ y,   beta = M^{-1} b,
    log p(y) = -1/2 [ (y^T W^ y - b^T beta) / s2 + (n - m) log s2 + log|det M|
                      - sum_i log w^_i + n log 2 pi ],

which is the Woodbury form with W = W^ / s2 and M_W = M / s2 (docs/engine.md, "Noise
models"). For w^ = 1 it is exactly the homoscedastic engine, whose fixed-basis path keeps its
O(m^3) learning steps; any other diagonal depends on s2 (and, for FITC, on theta), so its
statistics are accumulated anew at every evaluation.

:func:`noise_only_log_marginal_likelihood` is the baseline every fit is compared with: the
model with no kernel at all, y ~ N(0, s2 I) at its best s2.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..data.base import DataSource, DistributedSource

__all__ = ["NoiseModel", "HOMOSCEDASTIC", "FITC", "missing_prior_variance", "floored_rows",
           "default_diag_correction"]

#: Rows per chunk of :func:`floored_rows`.
_FLOOR_CHUNK = 4096


def missing_prior_variance(kernel, X, Psi, signs) -> np.ndarray:
    """c(x) = max(k(x, x) - psi(x)^T S psi(x), 0) for each row, with ``Psi`` = psi(X)."""
    return np.maximum(kernel.diag(X) - _approximate_prior_variance(Psi, signs), 0.0)


def default_diag_correction(feature_map, objective: str) -> bool:
    """Whether a low-rank model's predictive variance adds c(x*) by default (the estimators'
    ``diag_correction=None``; docs/nystrom.md, section 4).

    True for ``objective="fitc"`` and ``"vfe"`` (their own predictive: FITC's test
    conditional, SGPR's), and for every map with ``bounded_by_kernel`` (Nystrom, random
    projection) under any objective: their q(x*, x*) = |psi(x*)|^2 is the projection of
    k(., x*) on the span of the knots (or of the projection's basis), which vanishes away from
    them, so the subset-of-regressors variance s2 psi*^T M^{-1} psi* <= q(x*, x*) collapses
    to 0 where the model knows least, and even with every training point as a knot it is not
    the exact GP's off the training inputs. With c(x*) = k(x*, x*) - q(x*, x*) >= 0 it is
    the DTC predictive, which with all training points as knots is the exact GP's. False
    for the other maps under "dtc" (the weight-space GP of a Fourier or quadrature map, whose
    q(x*, x*) approximates k(x*, x*) everywhere).
    """
    return objective in ("fitc", "vfe") or bool(feature_map.bounded_by_kernel)


def floored_rows(at_map, X) -> int:
    """How many rows of X have k(x, x) - psi(x)^T S psi(x) < 0, floored at 0 by the FITC
    diagonal (rounding at a Nystrom map's knots; over-shoot of a Fourier map).

    X is an array (read in chunks of ``_FLOOR_CHUNK`` rows) or a
    :class:`scalegp.data.base.DataSource` (a pass over its chunks; a distributed source counts
    on its workers and returns the sum).
    """
    if isinstance(X, DistributedSource):
        return int(X.map_reduce(functools.partial(_floored_in_chunk, at_map)))
    if isinstance(X, DataSource):
        return sum(_floored_in_chunk(at_map, chunk) for chunk in X.chunks(_FLOOR_CHUNK))
    return sum(_floored_in(at_map, X[start:start + _FLOOR_CHUNK])
               for start in range(0, X.shape[0], _FLOOR_CHUNK))


def _floored_in_chunk(at_map, chunk) -> int:
    """:func:`floored_rows` of one :class:`scalegp.data.base.Chunk` (top level: Dask pickles it)."""
    return _floored_in(at_map, chunk.X)


def _floored_in(at_map, X) -> int:
    Psi = np.asarray(at_map.features(X), dtype=np.float64)
    return int(np.sum(at_map.kernel.diag(X) < _approximate_prior_variance(Psi, at_map.signs)))


def _approximate_prior_variance(Psi, signs) -> np.ndarray:
    if signs is None:
        return np.einsum("ij,ij->i", Psi, Psi)
    return np.einsum("ij,ij,j->i", Psi, Psi, signs)


@dataclass(frozen=True)
class NoiseModel:
    """The diagonal d_i = s2 + v_i [+ c_i] of the approximate covariance.

    The known variances v_i come with the data (the source's per-row ``sample_noise_variance``,
    0 when it has none); ``fitc`` adds the missing prior variance c_i.

    Parameters
    ----------
    fitc : bool, default=False
        Add c_i = max(k(x_i, x_i) - psi_i^T S psi_i, 0) (the FITC-style correction).
    """

    fitc: bool = False

    @property
    def name(self) -> str:
        return "fitc" if self.fitc else "homoscedastic"

    def is_homoscedastic(self, source) -> bool:
        """True when d_i = s2 on every row of ``source`` (no known variances, no FITC)."""
        return not self.fitc and not source.has_sample_noise_variance

    def row_variances(self, at_map, chunk, Psi, noise_variance: float) -> np.ndarray:
        """d_i for the rows of a chunk, with ``Psi`` its features at theta."""
        d = np.full(chunk.X.shape[0], float(noise_variance))
        if chunk.sample_noise_variance is not None:
            d += chunk.sample_noise_variance
        if self.fitc:
            d += missing_prior_variance(at_map.kernel, chunk.X, Psi, at_map.signs)
        return d

    def relative_weights(self, at_map, chunk, Psi, noise_variance: float) -> np.ndarray:
        """w^_i = s2 / d_i, in (0, 1]."""
        return noise_variance / self.row_variances(at_map, chunk, Psi, noise_variance)

    def row_variances_grad(self, at_map, chunk, Psi, dPsi, noise_variance: float) -> np.ndarray:
        """d d_i / d theta for theta = [kernel log-parameters..., log s2], shape (P + 1, rows);
        ``dPsi`` is the chunk's feature gradient operator
        (:class:`~scalegp.features.base.FeatureGradient`).

        d d_i / d log s2 = s2; for FITC, where c_i > 0,
        d c_i / d theta_j = d k(x_i, x_i) / d theta_j - 2 psi_i^T S dpsi_ij (0 where floored).
        """
        n_params = at_map.kernel.n_params
        grad = np.zeros((n_params + 1, chunk.X.shape[0]))
        grad[-1] = noise_variance
        if self.fitc:
            kernel = at_map.kernel
            missing = kernel.diag(chunk.X) - _approximate_prior_variance(Psi, at_map.signs)
            signed = Psi if at_map.signs is None else Psi * at_map.signs
            slope = kernel.diag_gradient(chunk.X) - 2.0 * dPsi.row_inner(signed)
            grad[:-1] = np.where(missing > 0, slope, 0.0)
        return grad


#: d_i = s2 (today's engine, and the default).
HOMOSCEDASTIC = NoiseModel()
#: d_i = s2 + v_i + max(k(x_i, x_i) - psi_i^T S psi_i, 0).
FITC = NoiseModel(fitc=True)


def power_of_two_scale(values: np.ndarray) -> np.ndarray:
    """2^e with max|v| in [2^(e-1), 2^e) per column (1 for an all-zero column).

    Dividing by a power of two is exact in floating point, so statistics of values / 2^e
    times 2^e equal the unscaled ones wherever those do not overflow.
    """
    largest = np.max(np.abs(values), axis=0)
    _, exponent = np.frexp(largest)
    return np.where(largest > 0, np.ldexp(1.0, exponent), 1.0)


def noise_only_log_marginal_likelihood(y) -> float:
    """max over s2 of log N(y | 0, s2 I) = -n/2 [log(2 pi s2) + 1], at s2 = mean(y^2).

    log s2 is computed from y / 2^e, so it is finite for every finite y; +inf when y = 0.
    """
    y = np.asarray(y, dtype=float)
    scale = float(power_of_two_scale(y))
    mean_square = float(np.mean((y / scale) ** 2))
    if mean_square == 0:
        return math.inf
    log_s2 = 2 * math.log(scale) + math.log(mean_square)
    return -0.5 * y.size * (math.log(2 * math.pi) + log_s2 + 1.0)
