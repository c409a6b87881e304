"""S-FS variance against its peers, measured over independently built maps: scrambled Sobol
points against i.i.d. frequencies (Liu et al. Remark 3), and S-FS against RFF with the same
number of real columns, where condition (18) holds.

Statistics: R replicates k~_r(x_0, x_i) per setting, each from its own seed. Two estimators
a and b built from the same seed form a pair; their variance difference is estimated by the
mean of u_r = (a_r - mean a)^2 - (b_r - mean b)^2, whose standard error std(u) / sqrt(R) is
valid whatever the correlation within a pair (pairs are i.i.d. over r). Every comparison asks
for 4 such standard errors; R = 3000 makes every difference tested at least 5 standard errors
wide (measured values in each test)."""

import functools

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.features import fully_symmetric

N_REPLICATES = 3000
N_STDERR = 4.0


def scaled_difference_points(n_dims):
    """Scaled differences z = x_i - x_0 (l = 1): three of size about 0.3 sqrt(d), where
    condition (18) holds, and diagonal ones from small to where (18) fails."""
    rng = np.random.default_rng(n_dims)
    return np.vstack([0.3 * rng.standard_normal((3, n_dims)),
                      np.full((4, n_dims), [[0.1], [0.5], [0.75], [1.2]])])


@functools.lru_cache(maxsize=None)
def replicates(name, n_dims, n_components, **options):
    """k~(x_0, x_i), i >= 1, for N_REPLICATES maps seeded 0, 1, ..., shape (R, 7)."""
    Z = scaled_difference_points(n_dims)
    X = np.vstack([np.zeros(n_dims), Z])
    kernel = sg.Gaussian(length_scale=1.0)
    cls = features.get(name)
    rows = []
    for seed in range(N_REPLICATES):
        fmap = cls.build(X, kernel, n_components, np.random.default_rng(seed), **options)
        signs = np.ones(fmap.n_components) if fmap.signs is None else fmap.signs
        rows.append((fmap.features(X[:1], kernel) * signs) @ fmap.features(X[1:], kernel).T)
    return np.vstack(rows)


def sfs_columns(n_dims, n_frequencies):
    return 2 * n_frequencies + 2 * n_dims + 2


def variance_difference(a, b):
    """(V[a] - V[b], its standard error) per column from paired replicates."""
    u = (a - a.mean(axis=0)) ** 2 - (b - b.mean(axis=0)) ** 2
    return u.mean(axis=0), u.std(axis=0, ddof=1) / np.sqrt(u.shape[0])


# ----------------------------------------------------------------------------- QMC (Remark 3)


@pytest.mark.parametrize("n_dims, n_frequencies", [(2, 8), (4, 32)])
def test_sfs_with_qmc_points_has_smaller_variance_than_with_iid_points(n_dims, n_frequencies):
    """Remark 3: the control variate corrects scrambled Sobol points as well as i.i.d. ones,
    and the low-discrepancy points lower the variance at every z, inside and outside
    condition (18). Measured (R = 3000): V_qmc / V_mc = 0.31-0.57 (d = 2, D = 8) and
    0.09-0.33 (d = 4, D = 32), at least 10 standard errors below 1."""
    m = sfs_columns(n_dims, n_frequencies)
    qmc = replicates("sfs", n_dims, m, sampling="qmc")
    mc = replicates("sfs", n_dims, m)
    difference, stderr = variance_difference(qmc, mc)
    assert np.all(difference + N_STDERR * stderr < 0), (qmc.var(axis=0) / mc.var(axis=0))


@pytest.mark.xfail(strict=True, reason=(
    "measured (R = 3000): with D = 8 scrambled Sobol points in d = 4 the S-FS variance is "
    "above the i.i.d. one at 4 of 7 points (V_qmc / V_mc = 1.28, 1.06, 1.18, 1.12; +7.6, "
    "+1.7, +4.2, +3.2 standard errors) and below at 3 (0.48, 0.90, 0.55): 8 points of a 4-D "
    "net are too few for Remark 3's reduction, which holds at D = 32 (and at D = 8 with "
    "scrambled Halton points instead of Sobol: then this test passes)"))
def test_sfs_with_eight_qmc_points_in_four_dimensions_reduces_variance():
    m = sfs_columns(4, 8)
    difference, stderr = variance_difference(replicates("sfs", 4, m, sampling="qmc"),
                                             replicates("sfs", 4, m))
    assert np.all(difference < 0)


# ----------------------------------------------------------------------------- equal columns


@pytest.mark.parametrize("n_dims, n_frequencies, sfs_wins",
                         [(2, 8, True), (4, 8, False), (4, 32, True)])
def test_sfs_against_rff_with_equal_columns_follows_theorem_2(n_dims, n_frequencies,
                                                               sfs_wins):
    """With m = 2D + 2d + 2 columns S-FS has D frequencies and RFF D + d + 1, so condition
    (18) (S-FS below RFF at equal D) is not enough: by Theorem 2 S-FS wins at equal columns
    iff V_SFS(D) < V_RFF(D + d + 1), for small z about iff D > d^2 - 1. Where (18) holds the
    theory predicts a win for d = 2, D = 8 (V ratio 0.69-0.73), a loss for d = 4, D = 8
    (1.22-1.36) and a win again for d = 4, D = 32 (0.87-0.97); the measured variances must
    take the predicted side, by 4 standard errors, wherever the prediction is at least 10 %
    from a tie (then at least 5 standard errors at R = 3000). Measured where (18) holds:
    0.68-0.75, 1.22-1.41 and 0.85-0.95. The RFF map of seed r shares the first D frequencies
    with S-FS's (a paired comparison)."""
    Z = scaled_difference_points(n_dims)
    m = sfs_columns(n_dims, n_frequencies)
    predicted = (fully_symmetric.sfs_variance(Z, n_frequencies)
                 / fully_symmetric.rff_variance(Z, m // 2))
    holds = fully_symmetric.variance_reduction_margin(Z) < 0
    assert holds.sum() >= 4 and np.all((predicted[holds] < 1) == sfs_wins)
    decided = np.abs(predicted - 1) >= 0.1
    assert (decided & holds).sum() >= 4
    difference, stderr = variance_difference(replicates("sfs", n_dims, m),
                                             replicates("rff", n_dims, m))
    z_score = difference / stderr
    np.testing.assert_array_equal(np.sign(z_score[decided]), np.sign(predicted[decided] - 1))
    assert np.all(np.abs(z_score[decided]) > N_STDERR), z_score
