"""Accuracy and calibration metrics for Gaussian-process predictions and kernel approximations.

Predictive metrics (:func:`rmse`, :func:`nlpd`, :func:`msll`, :func:`coverage`) take 1-D
vectors of one value per test point and cost O(n). Kernel-approximation metrics build
dense ``m x m`` kernel matrices and are meant for small samples: use
:func:`sample_kernel_approximation_error` on large data sets. :func:`kl_divergence`
factorizes dense test-set covariances and is likewise meant for small test sets;
:func:`kl_divergence_factorized` is its O(n) counterpart for marginal variances.

Every function validates its inputs (1-D, finite, equal lengths, positive variances)
and returns a Python ``float``.
"""

from __future__ import annotations

import numpy as np
import scipy.stats

from scalegp import linalg
from scalegp._memory import check_bytes
from scalegp._validation import (as_generator, check_level, check_matrix, check_positive_int,
                                 check_vector)
from scalegp.errors import NotPositiveDefiniteError

__all__ = [
    "rmse",
    "nlpd",
    "msll",
    "coverage",
    "gaussian_log_density",
    "central_interval",
    "kernel_approximation_error",
    "sample_kernel_approximation_error",
    "kl_divergence_factorized",
    "kl_divergence",
]

_NORMS = ("fro", "spectral")
_LOG_2PI = float(np.log(2.0 * np.pi))


# ----------------------------------------------------------------------------- helpers


def _check_same_length(reference: np.ndarray, reference_name: str,
                       other: np.ndarray, other_name: str) -> None:
    if other.shape[0] != reference.shape[0]:
        raise ValueError(
            f"{other_name} must have {reference.shape[0]} entries (one per entry of "
            f"{reference_name}), got {other.shape[0]}"
        )


def _check_strictly_positive(values: np.ndarray, name: str, what: str) -> None:
    bad = np.flatnonzero(values <= 0)
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name} must be strictly positive ({what}), got {name}[{i}] = {float(values[i])!r}"
            + (f" and {bad.size - 1} other non-positive value(s)" if bad.size > 1 else "")
        )


def _check_norm(norm) -> str:
    if not isinstance(norm, str) or norm not in _NORMS:
        raise ValueError(f"norm must be one of {_NORMS}, got {norm!r}")
    return norm


def _matrix_norm(A: np.ndarray, norm: str) -> float:
    return float(np.linalg.norm(A, "fro" if norm == "fro" else 2))


def _check_square(A: np.ndarray, name: str) -> None:
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {A.shape}")


def _relative_error(K_exact: np.ndarray, K_approx: np.ndarray, norm: str,
                    exact_name: str = "K_exact") -> float:
    denominator = _matrix_norm(K_exact, norm)
    if denominator == 0.0:
        raise ValueError(
            f"{exact_name} must have a non-zero {norm} norm for a relative error, "
            "got the zero matrix"
        )
    return _matrix_norm(K_exact - K_approx, norm) / denominator


def _as_rng(rng) -> np.random.Generator:
    # as_generator names the parameter "random_state"; here it is called "rng".
    try:
        return as_generator(rng)
    except (TypeError, ValueError) as error:
        raise type(error)(str(error).replace("random_state", "rng", 1)) from None


def _cholesky_lower(S: np.ndarray, name: str) -> np.ndarray:
    # small dense test-set covariances: no jitter, definiteness is part of the question
    try:
        return linalg.cholesky(S, name=name, allow_jitter=False)[0]
    except NotPositiveDefiniteError:
        raise NotPositiveDefiniteError(
            f"{name} must be symmetric positive definite, got a matrix whose Cholesky "
            "factorization failed; no jitter is added here, regularize the "
            "covariance before calling if it is only numerically singular"
        ) from None


# ----------------------------------------------------------------------------- predictive


def rmse(y_true, y_pred) -> float:
    r"""Root mean squared error.

    .. math:: \mathrm{RMSE} = \sqrt{\frac{1}{n}\sum_{i=1}^n (y_i - \hat y_i)^2}

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    y_pred : array-like of shape (n,)
        Point predictions (e.g. the predictive mean).

    Returns
    -------
    float
        The root mean squared error (same units as ``y_true``).
    """
    y_true = check_vector(y_true, "y_true")
    y_pred = check_vector(y_pred, "y_pred")
    _check_same_length(y_true, "y_true", y_pred, "y_pred")
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def _validate_predictive(y_true, mean, var):
    y_true = check_vector(y_true, "y_true")
    mean = check_vector(mean, "mean")
    var = check_vector(var, "var")
    _check_same_length(y_true, "y_true", mean, "mean")
    _check_same_length(y_true, "y_true", var, "var")
    _check_strictly_positive(var, "var", "a predictive variance including the noise variance")
    return y_true, mean, var


def gaussian_log_density(errors, variances) -> np.ndarray:
    """log N(e; 0, v), row by row, for errors e = y - mu and variances v (unchecked: the
    public scores validate their inputs first)."""
    return -0.5 * (_LOG_2PI + np.log(variances)) - errors ** 2 / (2.0 * variances)


def _gaussian_nll(y: np.ndarray, mean, var) -> np.ndarray:
    return -gaussian_log_density(y - mean, var)


def central_interval(mean, std, level: float) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) = mean -+ z std, z = Phi^-1((1 + level) / 2): the central ``level``
    interval of Gaussian predictions."""
    half = float(scipy.stats.norm.ppf(0.5 + 0.5 * check_level(level))) * np.asarray(std)
    return mean - half, mean + half


def nlpd(y_true, mean, var) -> float:
    r"""Mean negative log predictive density under independent Gaussian predictions.

    .. math::

        \mathrm{NLPD} = \frac{1}{n}\sum_{i=1}^n
            \left[\tfrac12 \log(2\pi\sigma_i^2) + \frac{(y_i - \mu_i)^2}{2\sigma_i^2}\right]

    Lower is better. Each test point is scored with its own marginal
    :math:`\mathcal N(\mu_i, \sigma_i^2)`; correlations between test points are ignored.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed (noisy) targets.
    mean : array-like of shape (n,)
        Predictive means :math:`\mu_i`.
    var : array-like of shape (n,)
        Predictive variances :math:`\sigma_i^2` of the *observations*, i.e. the latent
        variance **plus the noise variance**. Passing the latent (noise-free) variance
        scores noisy targets against an over-confident distribution and inflates the NLPD.
        Must be strictly positive.

    Returns
    -------
    float
        The mean negative log predictive density (nats per test point).

    Raises
    ------
    ValueError
        If the inputs are not finite 1-D vectors of equal length or ``var`` has an entry
        ``<= 0``.
    """
    y_true, mean, var = _validate_predictive(y_true, mean, var)
    return float(np.mean(_gaussian_nll(y_true, mean, var)))


def msll(y_true, mean, var, y_train) -> float:
    r"""Mean standardized log loss (Rasmussen & Williams, 2006, eq. 2.34).

    The negative log predictive density of each test point minus that of the trivial
    model :math:`\mathcal N(\bar y, s^2)` fitted to the training targets, averaged:

    .. math::

        \mathrm{MSLL} = \frac{1}{n}\sum_{i=1}^n \left[
            -\log p(y_i \mid \mu_i, \sigma_i^2) + \log p(y_i \mid \bar y, s^2) \right],
        \qquad
        -\log p(y \mid \mu, \sigma^2) = \tfrac12\log(2\pi\sigma^2)
            + \frac{(y-\mu)^2}{2\sigma^2},

    where :math:`\bar y` and :math:`s^2 = \frac1m\sum_j (y^{train}_j - \bar y)^2` are the
    mean and (population) variance of ``y_train``. The trivial model scores 0; a useful
    model scores below 0.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed test targets.
    mean : array-like of shape (n,)
        Predictive means.
    var : array-like of shape (n,)
        Predictive variances including the noise variance (see :func:`nlpd`); > 0.
    y_train : array-like of shape (m,)
        Training targets defining the trivial model; needs at least 2 distinct values.

    Returns
    -------
    float
        The mean standardized log loss (nats per test point).
    """
    y_true, mean, var = _validate_predictive(y_true, mean, var)
    y_train = check_vector(y_train, "y_train")
    train_var = float(np.var(y_train))
    if not train_var > 0.0:
        raise ValueError(
            "y_train must have a non-zero variance (at least 2 distinct values) to define "
            f"the trivial model, got {y_train.shape[0]} value(s) with variance {train_var!r}"
        )
    model_loss = _gaussian_nll(y_true, mean, var)
    trivial_loss = _gaussian_nll(y_true, float(np.mean(y_train)), train_var)
    return float(np.mean(model_loss - trivial_loss))


def coverage(y_true, mean, var, level=0.95) -> float:
    r"""Fraction of targets inside the central ``level`` predictive interval.

    .. math::

        \frac{1}{n}\sum_{i=1}^n \mathbf 1\!\left[\,|y_i - \mu_i| \le z\,\sigma_i\right],
        \qquad z = \Phi^{-1}\!\left(\tfrac{1 + \text{level}}{2}\right)

    with :math:`\Phi^{-1}` the standard normal quantile (``scipy.stats.norm.ppf``).
    A calibrated model has coverage close to ``level``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Observed targets.
    mean : array-like of shape (n,)
        Predictive means.
    var : array-like of shape (n,)
        Predictive variances (including noise when ``y_true`` is noisy); > 0.
    level : float, default=0.95
        Nominal probability of the central interval, in (0, 1).

    Returns
    -------
    float
        The empirical coverage, in [0, 1].
    """
    check_level(level)
    y_true, mean, var = _validate_predictive(y_true, mean, var)
    lower, upper = central_interval(mean, np.sqrt(var), level)
    return float(np.mean((lower <= y_true) & (y_true <= upper)))


# ----------------------------------------------------------------------------- kernels


def kernel_approximation_error(K_exact, K_approx, norm="fro") -> float:
    r"""Relative error of a kernel-matrix approximation.

    .. math::

        \frac{\lVert K - \tilde K \rVert}{\lVert K \rVert}

    with the Frobenius norm (``norm="fro"``) or the spectral norm, the largest singular
    value (``norm="spectral"``, computed with ``numpy.linalg.norm(..., 2)``, an O(n^3)
    SVD). The matrices are dense: use it on small samples, see
    :func:`sample_kernel_approximation_error`.

    Parameters
    ----------
    K_exact : array-like of shape (n, n)
        Exact kernel matrix :math:`K`; must not be the zero matrix.
    K_approx : array-like of shape (n, n)
        Approximation :math:`\tilde K`.
    norm : {"fro", "spectral"}, default="fro"
        Matrix norm.

    Returns
    -------
    float
        The relative error (0 for an exact approximation).
    """
    norm = _check_norm(norm)
    K_exact = check_matrix(K_exact, "K_exact")
    K_approx = check_matrix(K_approx, "K_approx")
    _check_square(K_exact, "K_exact")
    if K_approx.shape != K_exact.shape:
        raise ValueError(
            f"K_approx must have the shape of K_exact {K_exact.shape}, got {K_approx.shape}"
        )
    return _relative_error(K_exact, K_approx, norm)


def sample_kernel_approximation_error(kernel_fn, features_fn, X, n_sample=1000, rng=None,
                                      norm="fro") -> float:
    r"""Relative kernel-approximation error on a random subsample of the inputs.

    Draws :math:`m = \min(\text{n\_sample}, n)` rows :math:`X_s` of ``X`` uniformly without
    replacement and returns

    .. math::

        \frac{\lVert K_{ss} - P S P^\top \rVert}{\lVert K_{ss} \rVert},
        \qquad K_{ss} = k(X_s, X_s), \quad P = \phi(X_s),

    where :math:`S = \mathrm{diag}(s)` when ``features_fn`` returns a pair ``(P, s)`` with
    a sign vector :math:`s \in \{-1, +1\}^r` (features of an indefinite approximation),
    and :math:`S = I` when it returns ``P`` alone. Only ``m x m`` matrices are formed.

    Parameters
    ----------
    kernel_fn : callable
        ``kernel_fn(A, B)`` returns the exact kernel matrix of shape
        ``(len(A), len(B))``.
    features_fn : callable
        ``features_fn(A)`` returns the feature matrix ``P`` of shape ``(len(A), r)``, or a
        tuple ``(P, signs)`` with ``signs`` of shape ``(r,)`` and entries +-1.
    X : array-like of shape (n, d)
        Inputs to sample from.
    n_sample : int, default=1000
        Number of rows to sample (all rows when ``n <= n_sample``).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, default=None
        Source of randomness for the subsample (coerced with ``as_generator``).
    norm : {"fro", "spectral"}, default="fro"
        Matrix norm, see :func:`kernel_approximation_error`.

    Returns
    -------
    float
        The relative error on the subsample.
    """
    norm = _check_norm(norm)
    if not callable(kernel_fn):
        raise TypeError(f"kernel_fn must be a callable kernel_fn(A, B), got {kernel_fn!r}")
    if not callable(features_fn):
        raise TypeError(f"features_fn must be a callable features_fn(A), got {features_fn!r}")
    X = check_matrix(X, "X")
    n_sample = check_positive_int(n_sample, "n_sample")
    generator = _as_rng(rng)

    n = X.shape[0]
    m = min(n_sample, n)
    # the m x m kernel matrix, its approximation and their difference, before any work
    check_bytes(3 * 8 * m * m, f"the kernel matrices of a subsample of {m} rows",
                "choose a smaller n_sample")
    rows = np.sort(generator.choice(n, size=m, replace=False))
    X_sample = X[rows]

    K = check_matrix(kernel_fn(X_sample, X_sample), "kernel_fn(X_sample, X_sample)")
    if K.shape != (m, m):
        raise ValueError(
            f"kernel_fn(X_sample, X_sample) must return a matrix of shape ({m}, {m}), "
            f"got {K.shape}"
        )

    output = features_fn(X_sample)
    signs = None
    if isinstance(output, tuple):
        if len(output) != 2:
            raise ValueError(
                "features_fn must return P or a pair (P, signs), got a tuple of length "
                f"{len(output)}"
            )
        output, signs = output
    P = check_matrix(output, "features_fn(X_sample)")
    if P.shape[0] != m:
        raise ValueError(
            f"features_fn(X_sample) must return {m} rows (one per sampled input), "
            f"got shape {P.shape}"
        )
    if signs is None:
        K_approx = P @ P.T
    else:
        signs = check_vector(signs, "signs")
        if signs.shape[0] != P.shape[1]:
            raise ValueError(
                f"signs must have {P.shape[1]} entries (one per feature column), "
                f"got {signs.shape[0]}"
            )
        if not np.all(np.abs(signs) == 1.0):
            bad = int(np.flatnonzero(np.abs(signs) != 1.0)[0])
            raise ValueError(
                f"signs must contain only +1 and -1, got signs[{bad}] = {float(signs[bad])!r}"
            )
        K_approx = (P * signs) @ P.T
    return _relative_error(K, K_approx, norm, exact_name="kernel_fn(X_sample, X_sample)")


# ----------------------------------------------------------------------------- divergences


def kl_divergence_factorized(mean_p, var_p, mean_q, var_q) -> float:
    r"""KL divergence between two products of independent univariate Gaussians.

    .. math::

        \mathrm{KL}(p \,\|\, q) = \sum_{i=1}^n \tfrac12\left[
            \log\frac{\sigma_{q,i}^2}{\sigma_{p,i}^2}
            + \frac{\sigma_{p,i}^2 + (\mu_{p,i} - \mu_{q,i})^2}{\sigma_{q,i}^2} - 1\right]

    for :math:`p = \prod_i \mathcal N(\mu_{p,i}, \sigma_{p,i}^2)` and likewise :math:`q`.
    It equals :func:`kl_divergence` with diagonal covariances and is not symmetric: to
    measure an approximate predictive distribution against the exact one, pass the
    **approximation as p** and the **exact distribution as q**, i.e.
    :math:`\mathrm{KL}(\text{approx} \,\|\, \text{exact})`.

    Parameters
    ----------
    mean_p, var_p : array-like of shape (n,)
        Means and (strictly positive) variances of p.
    mean_q, var_q : array-like of shape (n,)
        Means and (strictly positive) variances of q.

    Returns
    -------
    float
        The divergence in nats (>= 0, 0 iff p == q), summed over the n test points.
    """
    mean_p = check_vector(mean_p, "mean_p")
    var_p = check_vector(var_p, "var_p")
    mean_q = check_vector(mean_q, "mean_q")
    var_q = check_vector(var_q, "var_q")
    for vector, name in ((var_p, "var_p"), (mean_q, "mean_q"), (var_q, "var_q")):
        _check_same_length(mean_p, "mean_p", vector, name)
    _check_strictly_positive(var_p, "var_p", "a variance")
    _check_strictly_positive(var_q, "var_q", "a variance")
    ratio = var_p / var_q
    terms = -np.log(ratio) + ratio + (mean_p - mean_q) ** 2 / var_q - 1.0
    return float(0.5 * np.sum(terms))


def _check_covariance(cov, name: str, n: int, mean_name: str) -> np.ndarray:
    cov = check_matrix(cov, name)
    if cov.shape != (n, n):
        raise ValueError(
            f"{name} must have shape ({n}, {n}) (the length of {mean_name}), got {cov.shape}"
        )
    scale = float(np.max(np.abs(cov)))
    asymmetry = float(np.max(np.abs(cov - cov.T)))
    if asymmetry > 1e-10 * scale:
        raise ValueError(
            f"{name} must be symmetric, got max |{name} - {name}.T| = {asymmetry:.3g} "
            f"(max |{name}| = {scale:.3g})"
        )
    return cov


def kl_divergence(mean_p, cov_p, mean_q, cov_q) -> float:
    r"""KL divergence between two multivariate normal distributions.

    .. math::

        \mathrm{KL}(p \,\|\, q) = \tfrac12\left[
            \operatorname{tr}(\Sigma_q^{-1}\Sigma_p)
            + (\mu_q - \mu_p)^\top \Sigma_q^{-1} (\mu_q - \mu_p) - n
            + \log\det\Sigma_q - \log\det\Sigma_p \right]

    for :math:`p = \mathcal N(\mu_p, \Sigma_p)`, :math:`q = \mathcal N(\mu_q, \Sigma_q)`.
    It is computed from the Cholesky factors :math:`\Sigma = L L^\top` and triangular
    solves, without forming an inverse:
    :math:`\operatorname{tr}(\Sigma_q^{-1}\Sigma_p) = \lVert L_q^{-1} L_p \rVert_F^2`,
    the Mahalanobis term is :math:`\lVert L_q^{-1}(\mu_q - \mu_p)\rVert^2` and
    :math:`\log\det\Sigma = 2\sum_i \log L_{ii}`.

    To compare an approximate predictive distribution with the exact one, pass the
    approximation as p and the exact distribution as q (see
    :func:`kl_divergence_factorized`). The covariances are dense ``n x n`` matrices and
    cost O(n^3): this is for small test sets. No jitter is added.

    Parameters
    ----------
    mean_p : array-like of shape (n,)
        Mean of p.
    cov_p : array-like of shape (n, n)
        Symmetric positive definite covariance of p.
    mean_q : array-like of shape (n,)
        Mean of q.
    cov_q : array-like of shape (n, n)
        Symmetric positive definite covariance of q.

    Returns
    -------
    float
        The divergence in nats (>= 0 up to rounding, 0 iff p == q).

    Raises
    ------
    scalegp.errors.NotPositiveDefiniteError
        (a ``ValueError``) if a covariance is not positive definite.
    ValueError
        If shapes disagree, a covariance is not symmetric or an input is not finite.
    """
    mean_p = check_vector(mean_p, "mean_p")
    mean_q = check_vector(mean_q, "mean_q")
    _check_same_length(mean_p, "mean_p", mean_q, "mean_q")
    n = mean_p.shape[0]
    cov_p = _check_covariance(cov_p, "cov_p", n, "mean_p")
    cov_q = _check_covariance(cov_q, "cov_q", n, "mean_p")

    L_p = _cholesky_lower(cov_p, "cov_p")
    L_q = _cholesky_lower(cov_q, "cov_q")
    A = linalg.solve_lower(L_q, L_p)
    b = linalg.solve_lower(L_q, mean_q - mean_p)
    trace_term = float(np.sum(A * A))
    mahalanobis = float(b @ b)
    logdet_q = 2.0 * float(np.sum(np.log(np.diag(L_q))))
    logdet_p = 2.0 * float(np.sum(np.log(np.diag(L_p))))
    return float(0.5 * (trace_term + mahalanobis - n + logdet_q - logdet_p))
