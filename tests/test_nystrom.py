"""Nystrom / predictive-process features and the DTC / FITC / VFE objectives (docs/nystrom.md).

The registry contract (tests/test_contract.py, test_noise_models.py, test_io.py, the model-file
fuzz) covers "nystrom" like every map; here: the knot rules, the per-theta factorization done
once per evaluation, the gradient operator, the objectives against dense computations written
from kernel matrices, the VFE bound, all-points-as-knots = the exact GP, and the estimator /
model file / command line surface.
"""

import json
import warnings

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
import scalegp.testing
from scalegp.engine import exact
from scalegp import features, kernels, linalg
from scalegp.features import nystrom
from scalegp.engine.likelihood import MarginalLikelihood
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.engine.objectives import low_rank_objective
from scalegp.estimators.configuration import make_approximation

NOISE = 0.05


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(50, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(50)
    return X, y


def matern(length_scale=(0.8, 1.3), variance=1.5):
    return kernels.get("matern32", length_scale=np.array(length_scale), variance=variance)


def build(X, kernel, m=12, knots="pivoted_cholesky", seed=0):
    return nystrom.NystromFeatures.build(X, kernel, m, np.random.default_rng(seed), knots=knots)


def theta_of(kernel, noise=NOISE):
    return np.append(kernel.theta, np.log(noise))


# ------------------------------------------------------------- dense references
def dense_objective(kernel, Z, X, y, noise, objective):
    """log p (or the VFE bound) written from kernel matrices only: Q = K_XZ K_ZZ^{-1} K_ZX."""
    K_XZ = kernel(X, Z)
    Q = K_XZ @ np.linalg.solve(kernel(Z), K_XZ.T)
    missing = kernel.diag(X) - np.diag(Q)
    diagonal = noise + (np.maximum(missing, 0) if objective == "fitc" else np.zeros(len(y)))
    C = Q + np.diag(diagonal)
    value = -0.5 * (y @ np.linalg.solve(C, y) + np.linalg.slogdet(C)[1]
                    + len(y) * np.log(2 * np.pi))
    if objective == "vfe":
        value -= missing.sum() / (2 * noise)
    return value


def dense_value_and_gradient(kernel, Z, X, y, noise, objective, step=1e-5):
    """The dense value and its central differences in theta (error O(step^2))."""
    theta = theta_of(kernel, noise)

    def f(t):
        return dense_objective(kernel.with_theta(t[:-1]), Z, X, y, np.exp(t[-1]), objective)

    grad = np.array([(f(theta + step * e) - f(theta - step * e)) / (2 * step)
                     for e in np.eye(len(theta))])
    return f(theta), grad


# ------------------------------------------------------------- knot rules
def test_random_knots_are_distinct_training_rows(data):
    X, _ = data
    fmap = build(X, matern(), m=10, knots="random")
    assert fmap.selection == "random" and fmap.n_components == 10
    rows = [np.flatnonzero((X == z).all(axis=1)) for z in fmap.knots]
    assert all(len(r) == 1 for r in rows) and len({int(r[0]) for r in rows}) == 10


def test_grid_knots_span_the_bounding_box(data):
    X, _ = data
    fmap = build(X, matern(), m=20, knots="grid")            # floor(sqrt(20)) = 4 per axis
    assert fmap.n_components == 16
    np.testing.assert_array_equal(fmap.knots.min(axis=0), X.min(axis=0))
    np.testing.assert_array_equal(fmap.knots.max(axis=0), X.max(axis=0))
    assert len(np.unique(fmap.knots[:, 0])) == 4


def test_pivoted_cholesky_knots_are_its_pivots_and_beat_random(data):
    X, _ = data
    kernel = matern()
    fmap = build(X, kernel, m=8)
    _, pivots = linalg.pivoted_cholesky(kernel.diag(X), lambda i: kernel(X, X[i:i + 1])[:, 0],
                                        max_rank=8)
    np.testing.assert_array_equal(fmap.knots, X[pivots])

    def missing_trace(fm):
        return np.sum(kernel.diag(X) - np.sum(fm.features(X, kernel) ** 2, axis=1))

    random_traces = [missing_trace(build(X, kernel, m=8, knots="random", seed=s))
                     for s in range(5)]
    assert missing_trace(fmap) < min(random_traces)


def test_kmeans_knots_are_deterministic_centroids(data):
    X, _ = data
    a, b = build(X, matern(), m=6, knots="kmeans"), build(X, matern(), m=6, knots="kmeans")
    np.testing.assert_array_equal(a.knots, b.knots)
    assert a.selection == "kmeans" and a.knots.shape == (6, 2)
    # each centroid is the mean of the rows nearest to it (Lloyd's fixed point)
    nearest = np.argmin(((X[:, None, :] - a.knots[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(a.knots, [X[nearest == k].mean(axis=0) for k in range(6)],
                               atol=1e-4)


def test_given_knots_and_bad_requests(data):
    X, _ = data
    Z = X[:5] + 0.01
    fmap = nystrom.NystromFeatures.build(X, matern(), None, knots=Z)
    assert fmap.selection == "given" and fmap.n_components == 5
    np.testing.assert_array_equal(fmap.knots, Z)
    with pytest.raises(ValueError, match="n_components=7 disagrees with the 5 given knots"):
        nystrom.NystromFeatures.build(X, matern(), 7, knots=Z)
    with pytest.raises(ValueError, match="knots must be one of"):
        build(X, matern(), knots="voronoi")
    with pytest.raises(ValueError, match="selects 60 of the 50 training inputs"):
        build(X, matern(), m=60, knots="random")
    with pytest.raises(ValueError, match="needs n_components >= 2\\^d = 8"):
        build(np.hstack([X, X[:, :1]]), kernels.get("matern32"), m=7, knots="grid")
    with pytest.raises(ValueError, match="column 1 is constant"):
        build(np.column_stack([X[:, 0], np.ones(50)]), matern(), m=9, knots="grid")
    with pytest.raises(ValueError, match="knots must have 2 column"):
        nystrom.NystromFeatures(n_dims=2, knots=np.ones((3, 3)))
    with pytest.raises(TypeError, match="unexpected options"):
        nystrom.NystromFeatures.build(X, matern(), 5, knot="random")


# ------------------------------------------------------------- the map at theta
def test_knot_factorization_once_per_evaluation_not_per_chunk(data, monkeypatch):
    X, y = data
    kernel = matern()
    fmap = build(X, kernel)
    calls = []
    original = linalg.cholesky

    def counting(A, **kw):
        if A.shape == (fmap.n_components, fmap.n_components) and "K_ZZ" in kw.get("name", ""):
            calls.append(1)
        return original(A, **kw)

    monkeypatch.setattr(nystrom.linalg, "cholesky", counting)
    objective = MarginalLikelihood(fmap, kernel, X, y, chunk_size=7)        # 8 chunks
    objective(theta_of(kernel))
    assert len(calls) == 1


def test_gradient_operator_equals_formed_gradient(data):
    X, _ = data
    kernel = matern()
    at = build(X, kernel).at(kernel)
    Psi, dPsi = at.features_and_grad(X)
    Psi_op, op = at.features_and_grad_operator(X)
    np.testing.assert_array_equal(Psi_op, Psi)
    rng = np.random.default_rng(3)
    v, A = rng.standard_normal(Psi.shape[1]), rng.standard_normal(Psi.shape)
    np.testing.assert_allclose(op.matvec(v), dPsi @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(op.row_inner(A), np.einsum("rl,prl->pr", A, dPsi), rtol=1e-12,
                               atol=1e-12)


def test_condition_number_is_reported_and_missing_variance_nonnegative(data):
    X, _ = data
    kernel = matern()
    fmap = build(X, kernel)
    report = fmap.diagnostics(kernel)
    assert report["knots"] == "pivoted_cholesky" and report["n_knots"] == 12
    np.testing.assert_allclose(report["knot_condition_number"],
                               np.linalg.cond(kernel(fmap.knots)), rtol=1e-8)
    X_new = np.random.default_rng(4).uniform(-3, 3, size=(200, 2))
    missing = kernel.diag(X_new) - np.sum(fmap.features(X_new, kernel) ** 2, axis=1)
    # K - Q is PSD: negative entries only at rounding level (eps cond(K_ZZ) s)
    assert missing.min() > -1e-12 * report["knot_condition_number"] * kernel.variance


# ------------------------------------------------------------- objectives vs dense
@pytest.mark.parametrize("objective", ["dtc", "fitc", "vfe"])
def test_objective_equals_dense_computation(objective, data):
    X, y = data
    kernel = matern()
    fmap = build(X, kernel, knots="random")
    engine = low_rank_objective(fmap, kernel, X, y, objective=objective)
    value, grad = engine(theta_of(kernel))
    value_ref, grad_fd = dense_value_and_gradient(kernel, fmap.knots, X, y, NOISE, objective)
    np.testing.assert_allclose(value, value_ref, rtol=1e-10)
    # central differences with step 1e-5: truncation ~1e-10 |f'''|, rounding ~1e-16 |f| / 1e-5
    np.testing.assert_allclose(grad, grad_fd, rtol=1e-6, atol=1e-6 * np.abs(grad_fd).max())
    assert engine.posterior(theta_of(kernel)).log_marginal_likelihood == pytest.approx(
        value, rel=1e-12)


@pytest.mark.parametrize("objective", ["fitc", "vfe"])
def test_objective_gradient_equals_dense_analytic_gradient(objective, data):
    """Value and gradient against the dense formulas on the map's Psi and dPsi (which the
    contract test checks against finite differences): to 1e-10."""
    X, y = data
    kernel = matern()
    fmap = build(X, kernel, knots="random")
    Psi, dPsi = fmap.features(X, kernel), fmap.features_grad(X, kernel)
    diagonal, diagonal_grad = sg.testing.dense_diagonal(fmap, kernel, X, NOISE,
                                                        fitc=objective == "fitc")
    value_ref, grad_ref, _ = sg.testing.dense_gp(Psi, None, dPsi, y, NOISE, diagonal,
                                                 diagonal_grad)
    if objective == "vfe":
        missing = kernel.diag(X) - np.sum(Psi**2, axis=1)
        value_ref -= missing.sum() / (2 * NOISE)
        trace_grad = kernel.diag_gradient(X).sum(axis=1) - 2 * np.einsum("rl,prl->p", Psi, dPsi)
        grad_ref = grad_ref - np.append(trace_grad, -missing.sum()) / (2 * NOISE)
    value, grad = low_rank_objective(fmap, kernel, X, y, objective=objective)(theta_of(kernel))
    np.testing.assert_allclose(value, value_ref, rtol=1e-10)
    np.testing.assert_allclose(grad, grad_ref, rtol=0, atol=1e-10 * np.abs(grad_ref).max())


def test_vfe_is_a_lower_bound_of_the_exact_likelihood(data):
    X, y = data
    rng = np.random.default_rng(11)
    for trial in range(6):
        kernel = matern(length_scale=np.exp(rng.uniform(-1, 1, 2)),
                        variance=float(np.exp(rng.uniform(-1, 1))))
        noise = float(np.exp(rng.uniform(-4, 0)))
        fmap = build(X, kernel, m=int(rng.integers(3, 30)), knots=["random", "kmeans"][trial % 2],
                     seed=trial)
        theta = theta_of(kernel, noise)
        bound = low_rank_objective(fmap, kernel, X, y, objective="vfe").value(theta)
        exact_value = exact.log_marginal_likelihood(kernel, noise, X, y)
        exact_value = exact_value[0] if isinstance(exact_value, tuple) else exact_value
        assert bound <= exact_value
        dtc = low_rank_objective(fmap, kernel, X, y, objective="dtc").value(theta)
        assert bound <= dtc


def test_all_training_points_as_knots_reproduce_the_exact_gp(data):
    X, y = data
    kernel = matern()
    fmap = nystrom.NystromFeatures.build(X, kernel, None, knots=X)
    theta = theta_of(kernel)
    ex = exact.ExactMarginalLikelihood(Hyperparameters(kernel, NOISE), X, y)
    value_ref, grad_ref = ex(theta)
    cond = fmap.diagnostics(kernel)["knot_condition_number"]
    # Q = K up to the rounding of solves with K_ZZ: relative error ~ eps cond(K_ZZ)
    tolerance = 10 * np.finfo(float).eps * cond
    assert tolerance < 1e-8, cond
    X_test = np.random.default_rng(2).uniform(-2, 2, size=(10, 2))
    mean_ref, var_ref = ex.posterior(theta).predict(X_test, return_var=True)
    for objective in ("dtc", "fitc", "vfe"):
        engine = low_rank_objective(fmap, kernel, X, y, objective=objective)
        value, grad = engine(theta)
        np.testing.assert_allclose(value, value_ref, rtol=tolerance)
        np.testing.assert_allclose(grad, grad_ref, rtol=0,
                                   atol=tolerance * np.abs(grad_ref).max())
        mean, var = engine.posterior(theta).predict(X_test, return_var=True,
                                                    diag_correction=True)
        np.testing.assert_allclose(mean, mean_ref, rtol=0, atol=tolerance * np.abs(y).max())
        np.testing.assert_allclose(var, var_ref, rtol=0, atol=tolerance * kernel.variance)


def test_vfe_refuses_maps_that_are_not_bounded(data):
    X, y = data
    kernel = kernels.get("gaussian", length_scale=[1.0, 1.0])
    rff = features.get("rff").build(X, kernel, 12, np.random.default_rng(0))
    with pytest.raises(ValueError, match="'rff' is not one: tr\\(K - Q\\) can be negative"):
        low_rank_objective(rff, kernel, X, y, objective="vfe")
    fmap = build(X, kernel)
    with pytest.raises(NotImplementedError, match="uses solver='cholesky'"):
        low_rank_objective(fmap, kernel, X, y, objective="vfe", solver="qr")
    with pytest.raises(ValueError, match="objective must be one of"):
        low_rank_objective(fmap, kernel, X, y, objective="sor")
    # FITC is defined for a Fourier map: its diagonal floors the over-shoot at 0
    value = low_rank_objective(rff, kernel, X, y, objective="fitc").value(theta_of(kernel))
    assert value == pytest.approx(dense_objective_from_features(rff, kernel, X, y), rel=1e-10)


def dense_objective_from_features(fmap, kernel, X, y):
    Psi = fmap.features(X, kernel)
    C = Psi @ Psi.T + np.diag(NOISE + np.maximum(kernel.diag(X) - np.sum(Psi**2, axis=1), 0))
    return -0.5 * (y @ np.linalg.solve(C, y) + np.linalg.slogdet(C)[1]
                   + len(y) * np.log(2 * np.pi))


def test_float32_objective_close_to_float64(data):
    X, y = data
    kernel = matern()
    fmap = build(X, kernel)
    v64, g64 = low_rank_objective(fmap, kernel, X, y, objective="vfe")(theta_of(kernel))
    v32, g32 = low_rank_objective(fmap, kernel, X, y, objective="vfe",
                                  dtype="float32")(theta_of(kernel))
    # float32 features (rel. 6e-8) amplified by cond(M) of the 12 x 12 system
    np.testing.assert_allclose(v32, v64, rtol=1e-4)
    np.testing.assert_allclose(g32, g64, rtol=0, atol=1e-3 * np.abs(g64).max())


# ------------------------------------------------------------- estimator, files, CLI
def fit(objective, X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return low_rank("nystrom", kernel="matern32", random_state=0, n_components=15,
                        objective=objective, **kw).fit(X, y)


@pytest.mark.parametrize("objective", ["dtc", "fitc", "vfe"])
def test_estimator_objectives_learn_and_report(objective, data):
    X, y = data
    model = fit(objective, X, y)
    report = model.approximation_diagnostics_
    assert report["knots"] == "pivoted_cholesky" and report["n_knots"] == 15
    assert report["knot_condition_number"] >= 1
    assert ("fitc_floored_rows" in report) == (objective == "fitc")
    theta = np.append(model.kernel_.theta, np.log(model.noise_variance_))
    value = model.log_marginal_likelihood(theta)
    assert value == pytest.approx(model.log_marginal_likelihood_value_, rel=1e-10)
    mean, std = model.predict(X[:5], return_std=True)
    _, std_sor = model.predict(X[:5], return_std=True, diag_correction=False)
    _, std_dtc = model.predict(X[:5], return_std=True, diag_correction=True)
    # the Nystrom default is the DTC predictive under every objective (SoR collapses away
    # from the knots: tests/test_predictive_variance.py)
    np.testing.assert_array_equal(std, std_dtc)
    assert np.all(std_dtc >= std_sor)


@pytest.mark.parametrize("objective, diag_correction", [("fitc", None), ("vfe", None),
                                                       ("dtc", None), ("fitc", False),
                                                       ("dtc", True)])
def test_sample_y_has_the_covariance_of_predict(objective, diag_correction, data):
    """sample_y draws with the same diagonal correction as predict (default: with it, for a
    Nystrom map under every objective): the sample covariance of 40,000 draws at 4 points far from
    and near the data against predict(return_cov=True), each entry within 5 of its standard errors
    sqrt((C_ii C_jj + C_ij^2) / N) (Gaussian draws)."""
    X, y = data
    model = fit(objective, X, y)
    Xs = np.array([[0.0, 0.0], [1.0, -1.0], [3.5, 3.5], [-4.0, 1.0]])
    draws = model.sample_y(Xs, n_samples=40_000, random_state=3,
                           diag_correction=diag_correction)
    mean, cov = model.predict(Xs, return_cov=True, diag_correction=diag_correction)
    n = draws.shape[1]
    np.testing.assert_array_less(np.abs(draws.mean(axis=1) - mean),
                                 5 * np.sqrt(np.diag(cov) / n) + 1e-12)
    sample_cov = np.cov(draws)
    error = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    np.testing.assert_array_less(np.abs(sample_cov - cov), 5 * error + 1e-12)
    if objective == "fitc" and diag_correction is None:
        # far from the knots the correction restores most of the prior variance, which the
        # draws without it miss (measured: 0.83 and 0.68 against 4e-7 at the last two points;
        # the VFE fit of these 50 points sits at the noise-only corner, where both are ~1e-5)
        without = model.sample_y(Xs, n_samples=40_000, random_state=3, diag_correction=False)
        assert draws[2:].var(axis=1).min() > 2 * without[2:].var(axis=1).max()


def test_fitc_floored_rows_counts_the_knots_rounding(data):
    X, y = data
    model = fit("fitc", X, y)
    at = model.posterior_.at_map
    Xs = (X - model.X_train_mean_) / model.X_train_scale_
    Psi = at.features(Xs)
    raw = at.kernel.diag(Xs) - np.einsum("ij,ij->i", Psi, Psi)   # the engine's summation
    assert model.approximation_diagnostics_["fitc_floored_rows"] == int(np.sum(raw < 0))


def test_estimator_refuses_vfe_for_fourier_maps_and_exact_diag_correction(data):
    X, y = data
    with pytest.raises(ValueError, match="the VFE objective needs a map"):
        low_rank(approximation=make_approximation("rff", n_components=10, objective="vfe"), normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(ValueError, match="objective"):
        low_rank(approximation=make_approximation("rff", objective="titsias"), normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(NotImplementedError, match="local models use objective='dtc'"):
        low_rank(local="clusters", approximation=make_approximation("nystrom", n_components=10, objective="fitc"), normalize_X=False, normalize_y=False).fit(X, y)
    model = sg.ExactGPRegressor(optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(ValueError, match="diag_correction applies to low-rank models"):
        model.predict(X[:2], return_std=True, diag_correction=True)


def test_model_file_keeps_knots_and_objective(data, tmp_path):
    X, y = data
    model = fit("vfe", X, y, optimize=False, approximation_options={"knots": "kmeans"})
    path = tmp_path / "model.npz"
    sg.save(model, path)
    loaded = sg.load(path)
    assert loaded.approximation.objective == "vfe" and loaded.feature_map_.selection == "kmeans"
    np.testing.assert_array_equal(loaded.feature_map_.knots, model.feature_map_.knots)
    for a, b in zip(loaded.predict(X[:7], return_std=True), model.predict(X[:7],
                                                                          return_std=True)):
        np.testing.assert_array_equal(a, b)


def test_cli_fit_objective(data, tmp_path):
    from scalegp.cli import main
    X, y = data
    table = tmp_path / "train.csv"
    np.savetxt(table, np.column_stack([X, y]), delimiter=",", header="a,b,y", comments="")
    out = tmp_path / "m.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["fit", str(table), "--target", "y", "--approximation", "nystrom",
                     "--n-components", "10", "--objective", "fitc", "--kernel", "matern32",
                     "--option", "knots=random", "--out", str(out), "--quiet"])
    assert code in (0, None)
    model = sg.load(out)
    assert model.approximation.objective == "fitc" and model.feature_map_.selection == "random"
    assert json.loads(json.dumps(model.get_params()["approximation__objective"])) == "fitc"
