"""Can the approximation resolve this setting? Cheap checks that warn once, naming the limit.

Two checks (docs/local-models.md, "Where the truncation resolves a local model";
docs/engine.md, "Where a map cannot resolve a setting"):

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

* **global maps** (docs/engine.md, "Where a map cannot resolve a setting"): at fit, the
  relative Frobenius error of the approximate training kernel matrix K~ against K,
  estimated from the fit's probe rows (:func:`training_kernel_error`, limit
  ``KERNEL_ERROR_LIMIT``); at prediction, a latent variance below the least the exact GP can
  have at that test row (:func:`exact_variance_floor`, from the training box), by more than
  ``VARIANCE_LIMIT`` of the prior (:func:`overconfident_rows`): a model confident far from
  the data (random features aliasing, a collapsed Nystrom prior).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy.special import gammaincinv

from ..errors import ApproximationWarning

__all__ = ["LOCAL_TAIL_LIMIT", "REACH_FACTOR", "KERNEL_ERROR_LIMIT", "VARIANCE_LIMIT",
           "local_truncation_ratios", "resolved_radius", "warn_unresolved_local",
           "warn_unresolved_routed", "centre_ratios",
           "training_kernel_error", "exact_variance_floor", "overconfident_rows"]

#: The unmodelled (truncated) prior variance a resolved centre allows on its rows within
#: reach, as a share of the noise variance.
LOCAL_TAIL_LIMIT = 0.01
#: The reach of a centre: rows with r^2 <= REACH_FACTOR ln(s / s2).
REACH_FACTOR = 3.0
#: The largest relative Frobenius error of the training kernel matrix K a global fit accepts
#: silently.
KERNEL_ERROR_LIMIT = 0.5
#: A prediction is overconfident when its latent variance is below the exact GP's least
#: possible one by more than this share of the prior variance k(x, x).
VARIANCE_LIMIT = 0.5
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
    return _warn_unresolved(feature_map, kernel, noise_variance, ratios, what)


def warn_unresolved_routed(feature_map, kernel, noise_variance: float, X_train, centres,
                           X, route, centre_ratios: dict) -> np.ndarray:
    """:func:`warn_unresolved_local` for test rows routed to shared centres (cluster-local
    models, Algorithm 1): a row is resolved when its centre c is (the training rows within
    reach of c) and the truncation resolves the row itself, e_x / s2 <= ``LOCAL_TAIL_LIMIT``
    with e_x the map's ``centred_kernel_error`` at x - c (a test row beyond r_p of its centre
    has psi(x - c) missing more of k(x, x) than the noise can hide). ``centre_ratios`` caches
    the centres' ratios between calls (index -> ratio; filled at fit, see
    :func:`centre_ratios`); a centre missing from it is computed from ``X_train``, or, when the
    training rows are not kept (``X_train=None``: a loaded model), judged by the row's own
    truncation only. Returns the mask of unresolved rows."""
    route = np.asarray(route)
    if not hasattr(feature_map, "centred_kernel_error"):
        return np.zeros(route.size, dtype=bool)
    missing = [int(j) for j in np.unique(route) if int(j) not in centre_ratios]
    if missing and X_train is not None:
        ratios = local_truncation_ratios(feature_map, kernel, noise_variance, X_train,
                                         np.asarray(centres)[missing])
        centre_ratios.update(zip(missing, ratios.tolist()))
    at_centre = np.array([centre_ratios.get(int(j), 0.0) for j in route])
    own = feature_map.centred_kernel_error(
        np.asarray(X, dtype=np.float64) - np.asarray(centres)[route], kernel) / noise_variance
    return _warn_unresolved(feature_map, kernel, noise_variance,
                            np.fmax(at_centre, own), "test row")


def centre_ratios(feature_map, kernel, noise_variance: float, X_train, centres) -> dict:
    """index -> :func:`local_truncation_ratios` of every centre (empty for maps without a
    truncation): the cache of :func:`warn_unresolved_routed`, filled when the rows are at
    hand."""
    if not hasattr(feature_map, "centred_kernel_error"):
        return {}
    ratios = local_truncation_ratios(feature_map, kernel, noise_variance, X_train, centres)
    return dict(enumerate(ratios.tolist()))


def _warn_unresolved(feature_map, kernel, noise_variance: float, ratios: np.ndarray,
                     what: str) -> np.ndarray:
    """The warning of :func:`warn_unresolved_local` for the entries of ``ratios`` above
    ``LOCAL_TAIL_LIMIT`` (NaN, an overflowed variance, too); returns their mask."""
    bad = ~(ratios <= LOCAL_TAIL_LIMIT)
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
            "has p = n_components - 1; sketches: the options max_degree and n_components "
            "of Features('maclaurin', ...)), or use another approximation"), stacklevel=4)
    return bad


# ============================================================================ global maps
def training_kernel_error(posterior, rows, n_samples: int) -> float:
    """The relative Frobenius error of the n x n training kernel matrix, ||K~ - K||_F / ||K||_F
    with K~ = Psi S Psi^T the map's (in the system's features), estimated from ``rows`` (the
    fit's probe rows, a sample of the n = ``n_samples`` training rows): with the means over the
    sample's diagonal (d) and off-diagonal (o) entries,

        E^2 = (d_E + (n - 1) o_E) / (d_K + (n - 1) o_K),

    unbiased numerator and denominator for the full matrix whatever the sample's size (a
    sample's own relative error would weigh the diagonal n / len(rows) times too much).
    O(len(rows)^2 (d + m)).
    """
    rows = np.asarray(rows, dtype=np.float64)
    Psi = posterior.features(rows)
    signs = posterior.system.signs
    approx = Psi @ (Psi.T if signs is None else signs[:, None] * Psi.T)
    exact = posterior.kernel(rows)
    error = approx - exact
    count = rows.shape[0]
    off = ~np.eye(count, dtype=bool)
    weight = (n_samples - 1) if count > 1 else 0.0

    def total(matrix):
        diagonal = float(np.mean(np.diag(matrix) ** 2))
        return diagonal + (weight * float(np.mean(matrix[off] ** 2)) if count > 1 else 0.0)

    return math.sqrt(total(error) / total(exact))


def warn_training_kernel_error(posterior, rows, n_samples: int) -> list:
    """[(message, ApproximationWarning)] when :func:`training_kernel_error` exceeds
    ``KERNEL_ERROR_LIMIT``, naming the map, m, the error and the limit; else []."""
    error = training_kernel_error(posterior, rows, n_samples)
    if error <= KERNEL_ERROR_LIMIT:
        return []
    fmap = posterior.feature_map
    return [(f"{fmap.name} with m = {fmap.n_components} columns cannot resolve this kernel on "
             f"these data: its training kernel matrix Psi S Psi^T is {100 * error:.3g} % off "
             f"K in relative Frobenius norm (estimated from {len(rows)} of the {n_samples} "
             f"rows at the fitted {posterior.kernel!r}; limit {100 * KERNEL_ERROR_LIMIT:g} %), "
             "so it is the GP of another kernel and its "
             "predictions can be far from the exact GP's: raise n_components, or use another "
             "approximation (nystrom, or exact for small n)", ApproximationWarning)]


def exact_variance_floor(kernel, X, box, n_samples: int, noise_variance: float) -> np.ndarray:
    """A lower bound on the exact GP's latent variance at each row of X, from the training
    inputs' bounding box ``box`` = (low, high) only:

        var(x) >= k(x, x) - k_*^T (K + s2 I)^{-1} k_* >= k(x, x) - n k(x, b(x))^2 / s2,

    since (K + s2 I)^{-1} <= I / s2 and every k(x, x_i) <= k(x, b(x)), b(x) the point of the
    box nearest x in length scales (the clip of x into the box: the kernels decrease in the
    scaled distance). Floored at 0; about k(x, x) only far from the data."""
    X = np.asarray(X, dtype=np.float64)
    low, high = (np.asarray(b, dtype=np.float64) for b in box)
    nearest = np.clip(X, low, high)
    k_near = kernel.paired(X, nearest)
    prior = kernel.diag(X)
    return np.maximum(prior - n_samples * k_near**2 / noise_variance, 0.0)


def overconfident_rows(posterior, X, box, n_samples: int, predict_var) -> tuple:
    """(mask, floor, variance): the rows of X whose latent variance ``predict_var(rows)``
    is below :func:`exact_variance_floor` minus ``VARIANCE_LIMIT`` k(x, x). Only rows where
    that can happen (floor > VARIANCE_LIMIT k(x, x): far from the data) are predicted."""
    floor = exact_variance_floor(posterior.kernel, X, box, n_samples,
                                 posterior.noise_variance)
    slack = VARIANCE_LIMIT * posterior.kernel.diag(X)
    candidates = np.flatnonzero(floor > slack)
    mask = np.zeros(X.shape[0], dtype=bool)
    variance = np.full(X.shape[0], np.nan)
    if candidates.size:
        variance[candidates] = predict_var(X[candidates])
        mask[candidates] = variance[candidates] < floor[candidates] - slack[candidates]
    return mask, floor, variance


def warn_overconfident(posterior, X, box, n_samples: int, predict_var) -> np.ndarray:
    """Warn once (:class:`ApproximationWarning`) when :func:`overconfident_rows` finds rows,
    naming the map, their count, the first one's std against the exact GP's least, and the
    limit; return the mask."""
    mask, floor, variance = overconfident_rows(posterior, X, box, n_samples, predict_var)
    if np.any(mask):
        first = int(np.flatnonzero(mask)[0])
        fmap = posterior.feature_map
        warnings.warn(ApproximationWarning(
            f"{fmap.name} (m = {fmap.n_components}) is confident where the exact GP cannot be, "
            f"at {int(mask.sum())} of {mask.size} test row(s), far from the training data "
            f"(first: test row {first}, latent std {math.sqrt(max(variance[first], 0.0)):.3g} "
            f"where the exact GP's is at least {math.sqrt(floor[first]):.3g}, prior "
            f"{math.sqrt(posterior.kernel.diag(X[first:first + 1])[0]):.3g}; limit: a variance "
            f"more than {VARIANCE_LIMIT:g} k(x, x) below that bound, which follows from the "
            "training inputs' bounding box); its mean there is no more trustworthy: use "
            "diag_correction=True (Nystrom-type maps), more columns, or another approximation"),
            stacklevel=3)
    return mask
