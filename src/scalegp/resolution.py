"""Can the approximation resolve this setting? Cheap checks that warn once, naming the limit.

Two checks (docs/local-models.md, "Where the truncation resolves a local model";
docs/engine.md, "Resolution checks"):

* **local Maclaurin truncation** (:func:`warn_unresolved_local`). A local model at centre c is
  the GP of the local kernel k_{p,c}(x, y) = psi(x - c)^T psi(y - c); the exact kernel is
  k = k_{p,c} + T_c with T_c the dropped Maclaurin terms, positive semi-definite, whose
  diagonal at a row at squared scaled distance r^2 from c is s P(p + 1, r^2) (the regularized
  lower incomplete gamma function, :func:`scalegp.features.maclaurin.truncation_share`), and
  |T_c(x_i, x_j)| <= sqrt(T_c(x_i, x_i) T_c(x_j, x_j)). The local model ignores T_c, i.e. it
  treats the exact GP's y = f_p + g + e as y = f_p + e: the dropped part g acts as correlated
  noise it does not know about. The centre is *resolved* when, on every training row within
  the reach r^2 <= REACH_FACTOR ln(s / s2) (rows whose prior correlation with the centre,
  e^{-r^2/2}, is at least (s2 / s)^{REACH_FACTOR / 2}), that unmodelled variance is at most
  ``LOCAL_TAIL_LIMIT`` times the noise variance s2 (for a sketch, its standard deviation
  sd_i = sqrt(Var[psi(x_i - c)^T psi(x_i - c)]) is added to the bias):

      max_{i: r_i^2 <= rho^2} s P(p + 1, r_i^2) + sd_i <= LOCAL_TAIL_LIMIT s2.

  Equivalently, the truncation resolves the rows within r_p = sqrt(P^{-1}(p + 1,
  LOCAL_TAIL_LIMIT s2 / s)) length scales of the centre, and the centre is resolved when no
  row lies between r_p and the reach rho. Measured on 1-D problems (200 rows on [-2, 2],
  l in {0.3, 0.5, 1, 2}, s in {1, 1e2, 1e4}, s2 in {1e-4, 1e-2, 0.1}, p in {5, 9, 15, 30},
  3 seeds, 57 test points on [-3.5, 3.5]): every resolved centre's mean was within 0.44 of
  the exact GP's posterior standard deviations, while unresolved ones were off by up to 275.
  The criterion is sufficient, not necessary (it flags 68 % of the centres within 0.5 sd).

* **global kernel error** (:func:`kernel_error_on_training_pairs` at fit,
  :func:`prior_variance_deficit` at prediction): see their docstrings.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.special import gammaincinv

from .errors import ApproximationWarning

__all__ = ["LOCAL_TAIL_LIMIT", "REACH_FACTOR", "local_truncation_ratios",
           "resolved_radius", "warn_unresolved_local"]

#: The unmodelled (truncated) prior variance a resolved centre allows on its rows within
#: reach, as a share of the noise variance.
LOCAL_TAIL_LIMIT = 0.01
#: The reach of a centre: rows with r^2 <= REACH_FACTOR ln(s / s2).
REACH_FACTOR = 3.0
#: Entries of a block of squared distances (centres x rows x dims) formed at once.
_BLOCK_ENTRIES = 2**22


def _reach2(variance: float, noise_variance: float) -> float:
    """rho^2 = REACH_FACTOR ln(s / s2) (0 when the noise dominates the signal)."""
    return max(REACH_FACTOR * math.log(variance / noise_variance), 0.0)


def resolved_radius(degree: int, variance: float, noise_variance: float) -> float:
    """r_p, in length scales: s P(p + 1, r_p^2) = LOCAL_TAIL_LIMIT s2 (inf when the
    truncation never misses that much: LOCAL_TAIL_LIMIT s2 >= s)."""
    share = LOCAL_TAIL_LIMIT * noise_variance / variance
    return math.inf if share >= 1.0 else math.sqrt(float(gammaincinv(degree + 1, share)))


def local_truncation_ratios(feature_map, kernel, noise_variance: float, X_train,
                            centres) -> np.ndarray:
    """Per centre, max over the training rows within reach of e_i / s2, with e_i the map's
    ``centred_kernel_error`` at x_i - c: s P(p + 1, r_i^2), plus the sketch's standard
    deviation for sketched maps (the module docstring). Cost O(n_centres n_rows d), and
    O(p d) more per row within reach for sketches, in blocks of ``_BLOCK_ENTRIES``
    distances."""
    X_train = np.asarray(X_train, dtype=np.float64)
    centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
    scale = np.asarray(kernel.length_scale, dtype=np.float64)
    variance = float(kernel.variance)
    reach2 = _reach2(variance, noise_variance)
    U = X_train / scale
    C = centres / scale
    block = max(1, _BLOCK_ENTRIES // max(1, U.size))
    ratios = np.empty(C.shape[0])
    for start in range(0, C.shape[0], block):
        diff = U[None, :, :] - C[start:start + block, None, :]
        r2 = np.einsum("bnd,bnd->bn", diff, diff)
        within = r2 <= reach2
        error = np.zeros(r2.shape)
        if np.any(within):
            error[within] = feature_map.centred_kernel_error(diff[within] * scale, kernel)
        ratios[start:start + block] = error.max(axis=1) / noise_variance
    return ratios


def warn_unresolved_local(feature_map, kernel, noise_variance: float, X_train, centres,
                          what: str = "test row") -> np.ndarray:
    """Warn once (:class:`~scalegp.errors.ApproximationWarning`) when a centre is not resolved
    by the map's truncation, naming the degree, the radius r_p it resolves, the reach and the
    worst ratio; return the boolean mask of unresolved centres. Maps without
    ``centred_kernel_error`` (every map but Maclaurin features: centring a Fourier map changes
    nothing, docs/local-models.md) are not checked: all False."""
    centres = np.atleast_2d(np.asarray(centres))
    if not hasattr(feature_map, "centred_kernel_error"):
        return np.zeros(centres.shape[0], dtype=bool)
    ratios = local_truncation_ratios(feature_map, kernel, noise_variance, X_train, centres)
    bad = ~(ratios <= LOCAL_TAIL_LIMIT)            # NaN (an overflowed variance) too
    if np.any(bad):
        variance = float(kernel.variance)
        degree = feature_map.degree
        first = int(np.flatnonzero(bad)[0])
        warnings.warn(ApproximationWarning(
            f"{feature_map.name} features of degree p = {degree} cannot resolve the local "
            f"model at {int(bad.sum())} of {bad.size} {what}(s) (first: {what} {first}): "
            f"training rows within the reach of {math.sqrt(_reach2(variance, noise_variance)):.3g}"
            f" length scales (prior correlation >= (s2/s)^{REACH_FACTOR / 2:g}) lie beyond "
            f"the {resolved_radius(degree, variance, noise_variance):.3g} length scales the "
            f"truncation resolves, where the missing prior variance s P(p+1, r^2) (plus the "
            f"sketch's standard deviation) reaches {ratios[first]:.3g} x the noise variance s2 "
            f"(limit {LOCAL_TAIL_LIMIT:g} x s2; "
            f"s = {variance:.4g}, s2 = {noise_variance:.4g}); predictions there can be many "
            "standard deviations from the exact GP's: raise the degree (the 1-D explicit map "
            "has p = n_components - 1; sketches: approximation_options max_degree and "
            "n_components), or use another approximation"), stacklevel=3)
    return bad
