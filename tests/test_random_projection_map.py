"""The random-projection map itself (scalegp.features.random_projection) against the
properties docs/random-projection.md, section 1, states for k_RP: the map builds Phi^T as an
orthonormal basis of range(K Omega), so a sketch Omega chosen to make that range known pins
down Phi and the map must give

* the predictive process with knots at the data points S when range(K Omega) = range(E_S)
  (Phi made of rows of a permutation): k_RP(x, z) = k(x, X_S) K_SS^{-1} k(X_S, z), at the
  training points and at new points, equal to the library's Nystrom map at knots X_S;
* the best rank-m approximation K_m = U_m Lambda_m U_m^T when range(K Omega) = range(U_m)
  (Phi = U_m^T): ||K - Q^RP||_F = (sum_{i > m} lambda_i^2)^{1/2} (Eckart-Young);
* for any sketch, K - Q^RP positive semi-definite and ||K - Q^RP||_F no smaller than that
  optimum, and k_RP depending on range(Phi^T) only (a sketch times an invertible matrix gives
  the same map).

Tolerances: K (Gaussian kernel, l = 0.5 on 14 equispaced points in [0, 6]) has cond(K) =
1.2e2 (measured), so a solve with K loses about eps cond(K) ~ 3e-14; 1e-10 absolute leaves
over 1,000 times that for the products of entries of size <= 1.
"""

import numpy as np
import pytest

import scalegp as sg
from scalegp.features.nystrom import NystromFeatures
from scalegp.features.random_projection import RandomProjectionFeatures

KERNEL = sg.Gaussian(length_scale=0.5)
TOL = 1e-10


@pytest.fixture
def points():
    X = np.linspace(0, 6, 14)[:, None]
    return X, np.random.default_rng(5).uniform(-1, 7, (9, 1))


def projection(X, probes, rank=None):
    """The map with the given sketch (fixed rank, Algorithm 1), at KERNEL."""
    rank = probes.shape[1] if rank is None else rank
    fmap = RandomProjectionFeatures(n_dims=X.shape[1], inputs=X, probes=probes, rank=rank,
                                    oversampling=probes.shape[1] - rank)
    return fmap.at(KERNEL)


def test_condition_number_behind_the_tolerance(points):
    X, _ = points
    assert np.linalg.cond(KERNEL(X)) < 200


@pytest.mark.parametrize("knots", [[0, 5, 9], [2, 3, 4, 11, 13], [7]])
def test_rows_of_a_permutation_give_the_predictive_process(points, knots):
    """Omega = K^{-1} E_S makes range(K Omega) = range(E_S): Phi = E_S^T up to rotation."""
    X, X_new = points
    K = KERNEL(X)
    E = np.eye(X.shape[0])[:, knots]
    at = projection(X, np.linalg.solve(K, E))
    Z = X[knots]
    K_ss = KERNEL(Z)
    for A, B in ((X, X), (X_new, X), (X_new, X_new)):
        pp = KERNEL(A, Z) @ np.linalg.solve(K_ss, KERNEL(Z, B))
        np.testing.assert_allclose(at.features(A) @ at.features(B).T, pp, atol=TOL)
    nystrom = NystromFeatures(n_dims=1, knots=Z, selection="given").at(KERNEL)
    np.testing.assert_allclose(at.features(X_new) @ at.features(X_new).T,
                               nystrom.features(X_new) @ nystrom.features(X_new).T, atol=TOL)


@pytest.mark.parametrize("m, oversampling", [(1, 0), (3, 0), (6, 0), (3, 2), (1, 5)])
def test_leading_eigenvectors_give_the_best_rank_m_approximation(points, m, oversampling):
    """Omega = U_m: K U_m = U_m Lambda_m, so Phi = U_m^T and Q^RP = K_m. With oversampling
    p, Omega = U_{m+p} and Algorithm 1 keeps the m leading left singular vectors of
    K Omega = U_{m+p} Lambda_{m+p}: U_m again."""
    X, _ = points
    K = KERNEL(X)
    eigenvalues, U = np.linalg.eigh(K)
    eigenvalues, U = eigenvalues[::-1], U[:, ::-1]
    at = projection(X, U[:, :m + oversampling], rank=m)
    Psi = at.features(X)
    np.testing.assert_allclose(Psi @ Psi.T, (U[:, :m] * eigenvalues[:m]) @ U[:, :m].T,
                               atol=TOL)
    np.testing.assert_allclose(np.linalg.norm(K - Psi @ Psi.T),
                               np.sqrt(np.sum(eigenvalues[m:] ** 2)), atol=TOL)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("m, oversampling", [(2, 0), (4, 0), (4, 3)])
def test_any_sketch_is_a_nystrom_residual_no_better_than_eckart_young(points, seed, m,
                                                                      oversampling):
    X, _ = points
    K = KERNEL(X)
    probes = np.random.default_rng(seed).standard_normal((X.shape[0], m + oversampling))
    Psi = projection(X, probes, rank=m).features(X)
    residual = K - Psi @ Psi.T
    assert np.linalg.eigvalsh(residual).min() > -TOL
    eigenvalues = np.linalg.eigvalsh(K)[::-1]
    assert np.linalg.norm(residual) >= np.sqrt(np.sum(eigenvalues[m:] ** 2)) - TOL


def test_only_the_range_of_the_sketch_matters(points):
    """Omega and Omega G (G invertible) span the same range(K Omega): the same k_RP."""
    X, X_new = points
    rng = np.random.default_rng(9)
    probes = rng.standard_normal((X.shape[0], 4))
    G = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    a, b = projection(X, probes), projection(X, probes @ G)
    np.testing.assert_allclose(a.features(X_new) @ a.features(X_new).T,
                               b.features(X_new) @ b.features(X_new).T, atol=TOL)
