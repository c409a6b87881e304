"""The random-projection GP (Banerjee, Dunson & Tokdar 2013; docs/random-projection.md):
exactness at m = n, the projection formula and Algorithm 1's SVD identity, Algorithm 2 on the
paper's Table-2 matrices against pivoted Cholesky (20 seeds), the fixed-accuracy map and its
gradient at a rank fixed at build, row blocks, the cap, the transductive option, bad input and
model files."""

import numpy as np
import pytest

import scalegp as sg
from scalegp.engine import exact
from scalegp import features
from scalegp.features import projections as sketching
from scalegp.features import random_projection as rp
from scalegp.engine.likelihood import MarginalLikelihood, Posterior
from scalegp.linalg import pivoted_cholesky
from scalegp.testing import check_engine_equals_dense, check_features_grad
from scalegp.estimators.configuration import make_approximation

RP = features.get("random-projection")


def dense_projection(K, basis):
    """K Phi^T (Phi K Phi^T)^{-1} Phi K (docs/random-projection.md, section 1), densely."""
    K1 = K @ basis
    return K1 @ np.linalg.solve(basis.T @ K1, K1.T)


def table2_matrix(n, lam, seed):
    """K = E D E^T, E orthonormalized Gaussian, d_ii = exp(-i lambda) (the RP paper's Table 2)."""
    E, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    d = np.exp(-lam * np.arange(1, n + 1))
    K = (E * d) @ E.T
    return 0.5 * (K + K.T), d


def optimal_rank(d, epsilon):
    """The smallest m with (sum_{i > m} d_i^2)^{1/2} <= epsilon (Eckart-Young)."""
    tails = np.sqrt(np.append(np.cumsum((d**2)[::-1])[::-1], 0.0))
    return int(np.argmax(tails <= epsilon))


def pivoted_cholesky_rank(K, epsilon, certificate):
    """PP2's rank at the target: exact ||K - L_k L_k^T||_F, or its bound tr(K - L_k L_k^T)."""
    F, _ = pivoted_cholesky(np.diag(K).copy(), lambda i: K[:, i], max_rank=K.shape[0])
    traces = np.trace(K) - np.cumsum(np.sum(F**2, axis=0))
    for k in range(1, F.shape[1] + 1):
        error = (np.linalg.norm(K - F[:, :k] @ F[:, :k].T) if certificate == "frobenius"
                 else traces[k - 1])
        if error <= epsilon:
            return k
    raise AssertionError("pivoted Cholesky did not reach the target")


@pytest.fixture
def data_1d():
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(0, 6, size=(30, 1)), axis=0)
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(30), rng.uniform(0, 6, size=(9, 1))


# ----------------------------------------------------------------------------- exactness


def test_full_rank_reproduces_the_exact_gp(data_1d):
    """m = n: Q^RP = K (docs/random-projection.md, section 1), so likelihood, gradient and
    mean are the exact GP's, and so is the variance once the Nystrom residual
    k(x, x) - |psi(x)|^2 is added at new points (diag_correction). K of this Matern-1/2
    kernel has cond(K) = 6.2e2: the tolerances are eps cond(K) n ~ 4e-12 (times the size of
    the quantity; measured: 1e-15 for Psi Psi^T, the mean and the variance, 7e-14 for the
    gradient)."""
    X, y, X_test = data_1d
    kernel, noise = sg.Matern(nu=0.5, length_scale=0.7, variance=1.3), 0.05
    fmap = RP.build(X, kernel, X.shape[0], np.random.default_rng(0))
    Psi = fmap.features(X, kernel)
    np.testing.assert_allclose(Psi @ Psi.T, kernel(X), atol=1e-11)
    theta = np.append(kernel.theta, np.log(noise))
    value, gradient = MarginalLikelihood(fmap, kernel, X, y)(theta)
    exact_value, exact_gradient = exact.log_marginal_likelihood(kernel, noise, X, y,
                                                                eval_gradient=True)
    np.testing.assert_allclose(value, exact_value, rtol=1e-11)
    np.testing.assert_allclose(gradient, exact_gradient, rtol=0,
                               atol=1e-11 * np.abs(exact_gradient).max())
    posterior = Posterior.fit(fmap, kernel, noise, X, y)
    reference = exact.ExactPosterior.fit(kernel, noise, X, y)
    mean, var = posterior.predict(X_test, return_var=True, diag_correction=True)
    exact_mean, exact_var = reference.predict(X_test, return_var=True)
    np.testing.assert_allclose(mean, exact_mean, atol=1e-11)
    np.testing.assert_allclose(var, exact_var, atol=1e-11)


@pytest.mark.parametrize("options", [{}, {"oversampling": 5}, {"sketch": "rademacher"},
                                     {"sketch": "sphere"}])
def test_features_are_the_projection_and_algorithm_1_identity(options, regression_data):
    """Psi Psi^T = K Phi^T (Phi K Phi^T)^{-1} Phi K with Phi^T the m leading left singular
    vectors of K Omega (docs/random-projection.md, section 2, step 2), which is the reduced
    SVD U S^2 U^T of steps 3-7 (the paper's appendix). Tolerance: eps cond(Phi K Phi^T)
    ||K||_2 ~ 2e-13 (cond <= 1e2 here); measured 4e-15."""
    X, _ = regression_data
    kernel = sg.Gaussian(length_scale=[0.8, 1.2], variance=1.4)
    fmap = RP.build(X, kernel, 15, np.random.default_rng(1), **options)
    assert fmap.probes.shape == (60, 15 + options.get("oversampling", 0))
    K = kernel(X)
    U, _, _ = np.linalg.svd(K @ fmap.probes, full_matrices=False)
    Q = dense_projection(K, U[:, :15])
    Psi = fmap.features(X, kernel)
    np.testing.assert_allclose(Psi @ Psi.T, Q, atol=1e-12)
    approximation, _ = sketching.fixed_rank(sketching.DenseOperator(K), 15,
                                            np.random.default_rng(1), **options)
    U, s = approximation.U, approximation.singular_values
    np.testing.assert_allclose((U * s**2) @ U.T, dense_projection(K, approximation.basis),
                               atol=1e-12)


def test_sketch_kinds():
    rng = np.random.default_rng(0)
    assert set(np.unique(sketching.draw_sketch(rng, 50, 4, "rademacher"))) == {-1.0, 1.0}
    np.testing.assert_allclose(np.linalg.norm(sketching.draw_sketch(rng, 50, 4, "sphere"),
                                              axis=0), 1.0)
    with pytest.raises(ValueError, match="sketch must be one of gaussian, rademacher, sphere"):
        sketching.draw_sketch(rng, 5, 2, "cauchy")


# ----------------------------------------------------------------------------- Algorithm 2


@pytest.mark.parametrize("certificate", ["frobenius", "trace"])
def test_algorithm_2_on_table_2_matrices(certificate):
    """Algorithm 2 reaches the target in >= 90 % of 20 seeds (its certificate makes it every
    seed: the trace bounds the Frobenius error,
    docs/random-projection.md, "The certificate") and its rank is no larger than
    pivoted Cholesky's (PP2) with the same certificate, on K = E D E^T (n = 200)."""
    n, seeds = 200, range(20)
    for lam, epsilon in ((0.5, 1e-2), (0.08, 1e-1), (0.08, 1e-2), (0.04, 1e-1)):
        reached, ranks = 0, []
        for seed in seeds:
            K, d = table2_matrix(n, lam, seed)
            result = sketching.fixed_accuracy(sketching.DenseOperator(K), epsilon,
                                              np.random.default_rng([seed, 1]), max_rank=n,
                                              certificate=certificate)
            U, s = result.approximation.U[:, :result.rank], \
                result.approximation.singular_values[:result.rank]
            error = np.linalg.norm(K - (U * s**2) @ U.T)
            reached += error <= epsilon
            assert error <= result.error * (1 + 1e-6) + 1e-12     # the certificate holds
            pp2 = pivoted_cholesky_rank(K, epsilon, certificate)
            assert optimal_rank(d, epsilon) <= result.rank <= pp2, (lam, epsilon, seed)
            ranks.append((result.rank, pp2))
        assert reached >= 0.9 * len(seeds)
        if certificate == "frobenius":                 # measured: RP is at the optimum
            assert all(r == optimal_rank(d, epsilon) for r, _ in ranks)


def test_range_finder_reaches_halko_threshold_and_reorthogonalises():
    K, _ = table2_matrix(200, 0.08, 0)
    finder = sketching.RangeFinder(sketching.DenseOperator(K), np.random.default_rng(0),
                                   max_rank=200)
    assert finder.n_probes == sketching.probe_count(200) == 4
    assert finder.extend(1e-3)
    basis = finder.basis
    np.testing.assert_allclose(basis.T @ basis, np.eye(basis.shape[1]), atol=1e-13)
    # the basis spans K omega_1..omega_j (the probes kept for learning)
    Q, _ = np.linalg.qr(K @ np.array(finder.probes).T)
    np.testing.assert_allclose(np.abs(np.linalg.svd(Q.T @ basis)[1]), 1.0, atol=1e-12)
    assert finder.largest_probe_norm <= 1e-3


# ----------------------------------------------------------------------------- the map


def test_fixed_accuracy_map_reports_rank_and_condition(regression_data):
    """The map of Algorithm 2 keeps the probes and the truncated rank: at the build theta
    its features give the Algorithm-2 approximation, certified within epsilon; the rank and
    cond(Phi K Phi^T) are reported."""
    X, _ = regression_data
    kernel = sg.Gaussian(length_scale=0.9, variance=1.2)
    fmap = RP.build(X, kernel, 60, np.random.default_rng(2), epsilon=1e-3)
    assert fmap.reduction == "nystrom" and fmap.target_error == 1e-3
    assert fmap.n_components == fmap.rank < fmap.probes.shape[1] < 60
    Psi = fmap.features(X, kernel)
    K = kernel(X)
    assert np.linalg.norm(K - Psi @ Psi.T) <= 1e-3
    # the map's basis (QR of K times the probes) equals the range finder's to rounding,
    # amplified by cond(Phi K Phi^T) = 8e5: measured 1e-7 relative
    np.testing.assert_allclose(np.linalg.norm(K - Psi @ Psi.T), fmap.certified_error,
                               rtol=1e-5)
    at = fmap.at(kernel)
    basis, _ = np.linalg.qr(K @ fmap.probes)
    np.testing.assert_allclose(at.condition_number, np.linalg.cond(basis.T @ K @ basis),
                               rtol=1e-9)                               # measured 2e-15
    np.testing.assert_allclose(at.trace_certificate, np.trace(K - Psi @ Psi.T),
                               atol=1e-12)                              # measured 1e-14
    # learning keeps the rank fixed at build: another theta, the same number of columns
    other = kernel.with_theta(kernel.theta - 0.5)
    assert fmap.features(X, other).shape == (60, fmap.rank)


@pytest.mark.parametrize("options", [{"oversampling": 6}, {"epsilon": 1e-1},
                                     {"epsilon": 1e-1, "certificate": "trace"}])
@pytest.mark.parametrize("kernel", [sg.Gaussian(length_scale=[0.7, 1.3], variance=1.5),
                                    sg.Matern(nu=1.5, length_scale=0.9)],
                         ids=["gaussian-ard", "matern32"])
def test_reduced_maps_gradient_and_engine(options, kernel, regression_data):
    """The contract (tests/test_contract.py runs r = m) for the two reductions m < r: the
    singular-vector and eigenvector derivatives match finite differences, and the engine
    equals the dense GP of the map's own Psi."""
    X, y = regression_data
    fmap = RP.build(X, kernel, 60 if "epsilon" in options else 30, np.random.default_rng(4),
                    **options)
    assert fmap.rank < fmap.probes.shape[1]
    check_features_grad(fmap, kernel, X[:20])
    check_engine_equals_dense(fmap, kernel, X, y, 0.2,
                              np.random.default_rng(5).uniform(-2, 2, size=(8, 2)))


def test_rank_is_clipped_to_n_and_float32(data_1d):
    X, _, X_test = data_1d
    kernel = sg.Matern(nu=0.5)
    fmap = RP.build(X, kernel, 100, np.random.default_rng(0))
    assert fmap.n_components == X.shape[0]
    Psi32 = fmap.features(X_test.astype(np.float32), kernel)
    assert Psi32.dtype == np.float32
    np.testing.assert_allclose(Psi32, fmap.features(X_test, kernel), atol=1e-5)


def test_row_blocks_equal_one_block(monkeypatch, regression_data):
    """K V and dK V in blocks of a few rows equal the dense products (O(n r) memory)."""
    X, _ = regression_data
    kernel = sg.Matern(nu=2.5, length_scale=[0.8, 1.1])
    V = np.random.default_rng(0).standard_normal((60, 5))
    operator = sketching.KernelOperator(kernel, X)
    monkeypatch.setattr(sketching, "BLOCK_ELEMENTS", 7 * 60 * 3)
    monkeypatch.setattr(sketching, "BLOCK_ROWS", 1)         # whole blocks of one row
    monkeypatch.setattr(sketching, "DENSE_BYTES", 0)        # blocks, not the kept K
    assert len(list(sketching.row_blocks(60, 60, 3))) == 9
    KV, dKV = operator.matmat(V, grad_V=V[:, :2])
    # atol: entries of K V that cancel to ~1e-3 keep the products' rounding (~1e-16)
    np.testing.assert_allclose(KV, kernel(X) @ V, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(dKV, kernel.gradient(X) @ V[:, :2], rtol=1e-12, atol=1e-14)
    KV, squared = operator.matmat_and_squared_frobenius(V)
    np.testing.assert_allclose(KV, kernel(X) @ V, rtol=1e-13, atol=1e-14)
    assert operator._dense is None
    kept = sketching.KernelOperator(kernel, X)
    monkeypatch.setattr(sketching, "DENSE_BYTES", 8 * 60 * 60)
    np.testing.assert_allclose(kept.matmat(V), kernel(X) @ V, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(kept._dense, kernel(X))
    assert kept.matmat_and_squared_frobenius(V)[1] == pytest.approx(squared, rel=1e-13)
    np.testing.assert_allclose(squared, np.sum(kernel(X) ** 2), rtol=1e-13)


def test_transductive_inputs_build_the_projection_over_all_points(data_1d):
    """The paper's formulation (docs/random-projection.md, "The transductive option"): Phi
    over observed and prediction points, so the features at the prediction points are rows
    of Q^RP over all of them."""
    X, _, X_test = data_1d
    kernel = sg.Gaussian(length_scale=0.8)
    fmap = RP.build(X, kernel, 12, np.random.default_rng(0), transductive_inputs=X_test)
    everything = np.vstack([X, X_test])
    np.testing.assert_array_equal(fmap.inputs, everything)
    K = kernel(everything)
    U, _, _ = np.linalg.svd(K @ fmap.probes, full_matrices=False)
    Psi = fmap.features(everything, kernel)
    np.testing.assert_allclose(Psi @ Psi.T, dense_projection(K, U[:, :12]), atol=1e-12)


def test_cap_refuses_with_alternatives(monkeypatch, regression_data):
    X, _ = regression_data
    monkeypatch.setattr(rp, "MAX_TRAINING_POINTS", 50)
    with pytest.raises(ValueError, match=r"limited to n <= 50, got n = 60; use pivoted "
                                         r"Cholesky knots \(approximation='nystrom'.*'glf'"):
        RP.build(X, sg.Gaussian(), 10, np.random.default_rng(0))


@pytest.mark.parametrize("options, error, message", [
    ({"sketch": "cauchy"}, ValueError, "sketch must be one of"),
    ({"epsilon": 0.0}, ValueError, "epsilon must be a positive number"),
    ({"epsilon": 1e-2, "certificate": "spectral"}, ValueError,
     "certificate must be one of frobenius, trace"),
    ({"epsilon": 1e-2, "oversampling": 3}, TypeError, "oversampling applies to the fixed"),
    ({"oversampling": -1}, ValueError, "oversampling"),
    ({"epsilon": 1e-12}, ValueError, r"epsilon = 1e-12 was not reached within rank 5"),
])
def test_bad_options(options, error, message, regression_data):
    X, _ = regression_data
    with pytest.raises(error, match=message):
        RP.build(X, sg.Gaussian(), 5, np.random.default_rng(0), **options)


def test_bad_state(regression_data):
    X, _ = regression_data
    sketch = np.ones((60, 4))
    with pytest.raises(ValueError, match=r"probes \(the sketch\) must have one row per input"):
        RP(n_dims=2, inputs=X, probes=sketch[:50], rank=4)
    for rank, oversampling in ((5, 0), (2, 1), (3, 2)):
        with pytest.raises(ValueError, match=f"the sketch must have rank . oversampling = "
                                             f"{rank + oversampling} columns"):
            RP(n_dims=2, inputs=X, probes=sketch, rank=rank, oversampling=oversampling)
    with pytest.raises(ValueError, match="oversampling must be an integer >= 0"):
        RP(n_dims=2, inputs=X, probes=sketch, rank=5, oversampling=-1)
    with pytest.raises(ValueError, match="reduction must be one of range, nystrom"):
        RP(n_dims=2, inputs=X, probes=sketch, rank=2, oversampling=2, reduction="svd")
    for report in ((0.1, None, "trace"), (0.0, 0.01, "trace"), (0.1, -1.0, "trace"),
                   (0.1, 0.01, "spectral"), (10**400, 0.01, "trace"), (True, 0.0, "trace")):
        with pytest.raises(ValueError, match="must all be None .fixed rank. or a positive"):
            RP(n_dims=2, inputs=X, probes=sketch, rank=2, oversampling=2,
               target_error=report[0], certified_error=report[1], certificate=report[2])
    assert RP(n_dims=2, inputs=X, probes=sketch, rank=2, oversampling=2, target_error=0.1,
              certified_error=0.0, certificate="trace").n_components == 2


def test_estimator_learns_saves_and_loads(tmp_path, regression_data):
    """Learning at the rank fixed at build; the model file keeps inputs, sketch and rank,
    and the loaded model predicts bit-identically."""
    X, y = regression_data
    model = sg.LowRankGPRegressor(random_state=0, approximation=make_approximation("random-projection", n_components=40, options={"epsilon": 1e-2}), normalize_X=False, normalize_y=False).fit(X, y)
    fmap = model.feature_map_
    assert fmap.target_error == 1e-2 and fmap.rank < 40
    report = fmap.report(model.kernel_)
    assert report["rank"] == fmap.rank and report["sketch_columns"] == fmap.probes.shape[1]
    assert report["condition_number"] >= 1 and report["trace_certificate"] > 0
    assert report["target_error"] == 1e-2 and report["certificate"] == "frobenius"
    assert report["certified_error"] <= 1e-2
    sg.save(model, tmp_path / "rp.npz")
    loaded = sg.load(tmp_path / "rp.npz")
    assert loaded.feature_map_.rank == fmap.rank
    np.testing.assert_array_equal(loaded.feature_map_.probes, fmap.probes)
    X_new = np.random.default_rng(9).uniform(-2, 2, size=(7, 2))
    for a, b in zip(model.predict(X_new, return_std=True), loaded.predict(X_new,
                                                                          return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_uncertified_range_is_extended(monkeypatch):
    """When the range finder stops before the Nystrom error is certified (forced here by a
    threshold of 100 epsilon instead of epsilon / 7.98), the range grows at ten times smaller
    thresholds until the certificate holds: the result is still within epsilon."""
    calls = []
    extend = sketching.RangeFinder.extend
    monkeypatch.setattr(sketching.RangeFinder, "extend",
                        lambda self, threshold: calls.append(threshold) or extend(self,
                                                                                  threshold))
    monkeypatch.setattr(sketching, "HALKO_FACTOR", 1e-2)
    K, d = table2_matrix(200, 0.08, 0)
    result = sketching.fixed_accuracy(sketching.DenseOperator(K), 1e-2,
                                      np.random.default_rng(0), max_rank=200)
    U = result.approximation.U[:, :result.rank]
    s = result.approximation.singular_values[:result.rank]
    assert np.linalg.norm(K - (U * s**2) @ U.T) <= 1e-2
    assert result.rank == optimal_rank(d, 1e-2)
    assert len(calls) > 1
    np.testing.assert_allclose(calls, [1.0 * 10.0**-i for i in range(len(calls))], rtol=1e-12)


@pytest.mark.parametrize("kernel", [sg.Gaussian(length_scale=[0.7, 1.3], variance=1.5),
                                    sg.Matern(nu=2.5, length_scale=0.9), sg.Cauchy(),
                                    sg.Laplacian(length_scale=[1.1, 0.6])],
                         ids=["gaussian", "matern52", "cauchy", "laplacian"])
def test_cross_kernel_gradient_matches_finite_differences(kernel):
    """Kernel.gradient(X, Y), which the map's gradient uses, against central differences
    (step 1e-6: truncation error ~1e-12, rounding ~1e-10 relative)."""
    rng = np.random.default_rng(0)
    X, Y = rng.uniform(-2, 2, size=(7, 2)), rng.uniform(-2, 2, size=(5, 2))
    analytic = kernel.gradient(X, Y)
    assert analytic.shape == (kernel.n_params, 7, 5)
    step = 1e-6
    for p in range(kernel.n_params):
        shift = np.zeros(kernel.n_params)
        shift[p] = step
        numeric = (kernel.with_theta(kernel.theta + shift)(X, Y)
                   - kernel.with_theta(kernel.theta - shift)(X, Y)) / (2 * step)
        np.testing.assert_allclose(analytic[p], numeric, rtol=1e-6, atol=1e-9)
