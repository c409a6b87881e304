"""Polynomial sketches (docs/maclaurin.md, "Polynomial
sketches"): unbiased for (u^T v)^n, and the empirical variance matches the closed form (Table 1; the exact TensorSketch formula of A.3.2) within 5 %.

The number of draws R is derived, not chosen: the relative standard error of a sample
variance is sqrt((kappa - 1) / R) (kappa the kurtosis of the estimate), so a 5 % tolerance at
4 standard errors needs R = (4 / 0.05)^2 (kappa - 1); kappa is estimated on a pilot run with
its own seed. The Gaussian sketches of degree 3 have kappa ~ 190 (real) and ~ 75 (complex) at
D = 6, so they take 1.7 and 0.47 million draws (about 3 s each).
"""

import math

import numpy as np
import pytest

from scalegp.features import sketches as sk

U = np.array([0.7, -0.4, 0.5])
V = np.array([0.3, 0.8, -0.6])
Z = 4.0
REL_TOL = 0.05
PILOT = 20_000
MAX_DRAWS = 3_000_000
CASES = [(s, 2, 8) for s in sk.SKETCHES] + [(s, 3, 6) for s in sk.SKETCHES]


def estimates(sketch, degree, n_features, n_draws, seed, chunk=50_000):
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_draws, chunk):
        W = sk.draw_projections(sketch, degree, 3, n_features, rng,
                                batch=(min(chunk, n_draws - start),))
        F = sk.apply(sketch, W, np.stack([U, V]))
        out.append(np.sum(F[:, 0] * F[:, 1], axis=-1))
    return np.concatenate(out)


@pytest.mark.parametrize("sketch, degree, n_features", CASES)
def test_unbiased_and_variance_matches_closed_form(sketch, degree, n_features):
    pilot = estimates(sketch, degree, n_features, PILOT, seed=1)
    kurtosis = np.mean((pilot - pilot.mean()) ** 4) / pilot.var() ** 2
    n_draws = math.ceil((Z / REL_TOL) ** 2 * (kurtosis - 1))
    assert n_draws <= MAX_DRAWS, f"kurtosis {kurtosis:.1f} needs {n_draws} draws"
    k = estimates(sketch, degree, n_features, n_draws, seed=2)
    variance = sk.sketch_variance(sketch, degree, n_features, U, V)
    target = (U @ V) ** degree
    assert abs(k.mean() - target) <= Z * math.sqrt(variance / n_draws)
    assert abs(k.var() / variance - 1) <= REL_TOL


def test_complex_sketch_real_columns_give_real_part_of_complex_product():
    rng = np.random.default_rng(3)
    W = sk.draw_projections("complex-gaussian", 2, 3, 5, rng)
    F = sk.apply("complex-gaussian", W, np.stack([U, V]))
    complex_u, complex_v = (np.prod(U @ W, axis=0) / math.sqrt(5),
                            np.prod(V @ W, axis=0) / math.sqrt(5))
    assert F.shape == (2, 10)
    np.testing.assert_allclose(F[0] @ F[1], np.real(complex_u @ np.conj(complex_v)),
                               rtol=1e-12)


def test_tensorsketch_degree_one_is_countsketch_variance():
    t, N, S = sk.pair_moments(U, V)
    np.testing.assert_allclose(sk.sketch_variance("tensorsketch", 1, 7, U, V),
                               (N + t**2 - 2 * S) / 7, rtol=1e-12)


def test_srht_matrix_is_hadamard_rows_with_signs():
    W = sk.draw_projections("srht", 1, 3, 6, np.random.default_rng(4))[0]
    assert W.shape == (3, 6) and set(np.unique(W)) <= {-1.0, 1.0}
    # within a block of 4 rows the columns are distinct rows of H S: mutually orthogonal in R^4
    # (restricted to 3 inputs they are not, but their Gram on R^4 is 4 I); check the first block
    full = sk.draw_projections("srht", 1, 4, 4, np.random.default_rng(4))[0]
    np.testing.assert_array_equal(full.T @ full, 4 * np.eye(4))


def test_variances_vanish_at_zero_input_and_bad_sketch_rejected():
    for sketch in sk.SKETCHES:
        assert sk.sketch_variance(sketch, 3, 5, np.zeros(3), V) == 0
    with pytest.raises(ValueError, match="sketch must be one of"):
        sk.check_sketch("fourier")
