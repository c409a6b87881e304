"""Knots learned by the gradient of the VFE bound (scalegp.inference.knot_learning, docs/nystrom.md,
"Learned knots"): the kernels' input gradient against differences, the knot gradient against
a dense analytic gradient written from kernel matrices (to 1e-10) and that one against
differences, the bound after learning, and the estimator's ``learn_knots``."""

import warnings

import numpy as np
import pytest
from sklearn.base import clone

import scalegp as sg
from tests.conftest import low_rank
from scalegp.engine import exact
from scalegp.engine.likelihood import MarginalLikelihood
from scalegp.engine.statistics import accumulate_gradient, features_by_chunk
from scalegp import kernels
from scalegp.features import nystrom
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.inference.knot_learning import LearnedKnotsObjective, learn_knots

NOISE = 0.05
SMOOTH = ["gaussian", "matern32", "matern52", "cauchy"]


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(60)
    return X, y


def kernel_of(name, length_scale=(0.8, 1.3), variance=1.5):
    return kernels.get(name, length_scale=np.array(length_scale), variance=variance)


def random_knots(X, m=12, seed=0):
    rng = np.random.default_rng(seed)
    return X[rng.choice(len(X), m, replace=False)] + 0.05 * rng.standard_normal((m, 2))


@pytest.mark.parametrize("name", SMOOTH)
def test_input_gradient_contraction_against_differences(name, data):
    X, _ = data
    kernel = kernel_of(name)
    Z = random_knots(X, m=5)
    E = np.random.default_rng(1).standard_normal((len(X), 5))
    got = kernel.input_gradient_contraction(X, Z, E)
    step = 1e-6
    want = np.zeros_like(Z)
    for a in range(5):
        for j in range(2):
            Zp, Zm = Z.copy(), Z.copy()
            Zp[a, j] += step
            Zm[a, j] -= step
            want[a, j] = np.sum(E * (kernel(X, Zp) - kernel(X, Zm))) / (2 * step)
    # central differences: error O(step^2 k''') + rounding O(eps |E| k / step) ~ 1e-9
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7 * np.abs(want).max())


@pytest.mark.parametrize("name", ["matern12", "laplacian"])
def test_input_gradient_refused_for_kernels_with_a_kink(name, data):
    X, _ = data
    with pytest.raises(NotImplementedError, match="not for"):
        kernels.get(name).input_gradient_contraction(X[:3], X[:2], np.ones((3, 2)))
    with pytest.raises(ValueError, match="E must have shape"):
        kernels.get("matern32").input_gradient_contraction(X[:3], X[:2], np.ones((2, 3)))


@pytest.mark.parametrize("length_scale", [1.1, (0.8, 1.3)])
@pytest.mark.parametrize("name", SMOOTH)
def test_fused_gradient_inner_and_contraction_equal_the_separate_ones(name, length_scale, data):
    """One kernel evaluation for <E, dK_j> and the input contraction (smooth radial kernels
    with one length scale) against dK_j formed by ``gradient`` and the contraction alone."""
    X, _ = data
    kernel = kernels.get(name, length_scale=np.atleast_1d(length_scale), variance=1.7)
    Z = random_knots(X, m=7)
    E = np.random.default_rng(2).standard_normal((len(X), 7))
    inner, cross = kernel.gradient_inner_and_input_contraction(X, Z, E)
    want = np.array([np.sum(E * dK_j) for dK_j in kernel.gradient(X, Z)])
    # sums of 420 products of O(1) terms, each exact to a few ulp: rounding ~1e-14
    np.testing.assert_allclose(inner, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cross, kernel.input_gradient_contraction(X, Z, E),
                               rtol=1e-12, atol=1e-12)
    inner_only, none = kernel.gradient_inner_and_input_contraction(X, Z, E,
                                                                   input_contraction=False)
    assert none is None
    np.testing.assert_array_equal(inner_only, inner)


@pytest.mark.parametrize("objective", ["dtc", "vfe"])
@pytest.mark.parametrize("chunk_size, n_jobs", [(None, 1), (7, 1), (7, 3)])
@pytest.mark.parametrize("name, length_scale", [("matern32", 1.1), ("gaussian", 0.9),
                                                ("matern52", (0.8, 1.3)), ("cauchy", 1.2)])
def test_nystrom_gradient_pass_equals_the_general_chunk_gradient(objective, chunk_size, n_jobs,
                                                                 name, length_scale, data):
    """The Nystrom map's own gradient pass (B = dF/dK_XZ in one product, the K_ZZ part from
    the statistics) against the engine's general per-chunk gradient on the same system."""
    X, y = data
    kernel = kernels.get(name, length_scale=np.atleast_1d(length_scale), variance=1.5)
    fmap = nystrom.NystromFeatures(n_dims=2, knots=random_knots(X, m=12),
                                   selection=nystrom.LEARNED)
    engine = MarginalLikelihood(fmap, Hyperparameters(kernel, NOISE), X, y,
                                   variational=objective == "vfe", chunk_size=chunk_size,
                                   n_jobs=n_jobs)
    theta = engine.hyperparameters.theta
    at_map, statistics, _, system, _ = engine.conditioned(theta)
    weight = 1.0 / NOISE if objective == "vfe" else 0.0
    general = accumulate_gradient(at_map, engine.source, system, chunk_size=chunk_size,
                                     trace_weight=weight)[:-1]
    own, knots = at_map.own_gradient(
        features_by_chunk(at_map, engine.source, chunk_size=chunk_size), statistics,
        system, trace_weight=weight, n_jobs=n_jobs)
    assert knots is None
    np.testing.assert_allclose(own, general, rtol=0, atol=1e-10 * np.abs(general).max())
    np.testing.assert_allclose(engine(theta)[1][:-1], general, rtol=0,
                               atol=1e-10 * np.abs(general).max())


def matern32_input_gradient(X, Z, length_scale, variance):
    """dk(x_i, z_a) / dz_a for the Matern-3/2 kernel, written out: -3 s e^{-sqrt3 r}
    (z - x) / l^2, shape (n, m, d)."""
    diff = (Z[None, :, :] - X[:, None, :]) / length_scale**2
    r = np.sqrt(np.sum(((X[:, None, :] - Z[None, :, :]) / length_scale) ** 2, axis=-1))
    return -3 * variance * np.exp(-np.sqrt(3) * r)[..., None] * diff


def dense_vfe_and_knot_gradient(kernel, Z, X, y, noise):
    """F = log N(y; 0, Q + s2 I) - tr(K - Q) / (2 s2), Q = A K_ZZ^{-1} A^T, A = k(X, Z), and
    dF/dZ from dF/dQ = G = (a a^T - C^{-1}) / 2 + I / (2 s2) (a = C^{-1} y): dF/dA =
    2 G A K_ZZ^{-1}, dF/dK_ZZ = -K_ZZ^{-1} A^T G A K_ZZ^{-1}."""
    A, K_ZZ = kernel(X, Z), kernel(Z)
    K_inv = np.linalg.inv(K_ZZ)
    Q = A @ K_inv @ A.T
    C = Q + noise * np.eye(len(y))
    C_inv = np.linalg.inv(C)
    a = C_inv @ y
    value = (-0.5 * (y @ a + np.linalg.slogdet(C)[1] + len(y) * np.log(2 * np.pi))
             - (kernel.diag(X).sum() - np.trace(Q)) / (2 * noise))
    G = 0.5 * (np.outer(a, a) - C_inv) + np.eye(len(y)) / (2 * noise)
    dA = 2 * G @ A @ K_inv
    dK = -K_inv @ A.T @ G @ A @ K_inv
    length_scale, variance = kernel.length_scale, kernel.variance
    grad = (np.einsum("ia,iaj->aj", dA, matern32_input_gradient(X, Z, length_scale, variance))
            + 2 * np.einsum("ba,baj->aj", dK,
                            matern32_input_gradient(Z, Z, length_scale, variance)))
    return value, grad


def test_dense_reference_gradient_against_differences(data):
    X, y = data
    kernel = kernel_of("matern32")
    Z = random_knots(X)
    _, grad = dense_vfe_and_knot_gradient(kernel, Z, X, y, NOISE)
    step = 1e-5
    fd = np.zeros_like(Z)
    for a in range(Z.shape[0]):
        for j in range(2):
            Zp, Zm = Z.copy(), Z.copy()
            Zp[a, j] += step
            Zm[a, j] -= step
            fd[a, j] = (dense_vfe_and_knot_gradient(kernel, Zp, X, y, NOISE)[0]
                        - dense_vfe_and_knot_gradient(kernel, Zm, X, y, NOISE)[0]) / (2 * step)
    np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("chunk_size,n_jobs", [(None, None), (7, None), (7, 3)])
def test_objective_and_knot_gradient_equal_the_dense_analytic_ones(chunk_size, n_jobs, data):
    """Value and dF/dZ to 1e-10 of the dense formulas, also with the chunks shared by three
    threads; the theta part is the engine's VFE gradient (tests/test_nystrom.py checks it
    against the dense one)."""
    X, y = data
    kernel = kernel_of("matern32")
    Z = random_knots(X)
    fmap = nystrom.NystromFeatures(n_dims=2, knots=Z)
    hp = Hyperparameters(kernel, NOISE, (1e-6, 1e5))
    objective = LearnedKnotsObjective(fmap, hp, X, y, chunk_size=chunk_size, n_jobs=n_jobs)
    value, grad = objective(objective.start())
    value_ref, grad_ref = dense_vfe_and_knot_gradient(kernel, Z, X, y, NOISE)
    np.testing.assert_allclose(value, value_ref, rtol=1e-10)
    knot_grad = grad[hp.n_params:].reshape(Z.shape)
    np.testing.assert_allclose(knot_grad, grad_ref, rtol=0, atol=1e-10 * np.abs(grad_ref).max())
    engine_value, engine_grad = sg.engine.objectives.low_rank_objective(
        fmap, hp, X, y, objective="vfe")(hp.theta)
    assert engine_value == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(grad[:hp.n_params], engine_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", SMOOTH)
def test_full_gradient_against_differences_for_each_smooth_kernel(name, data):
    X, y = data
    kernel = kernel_of(name)
    fmap = nystrom.NystromFeatures(n_dims=2, knots=random_knots(X, m=8))
    objective = LearnedKnotsObjective(fmap, Hyperparameters(kernel, NOISE, (1e-6, 1e5)), X, y)
    p = objective.start()
    _, grad = objective(p)
    step = 1e-6
    fd = np.array([(objective.value(p + step * e) - objective.value(p - step * e)) / (2 * step)
                   for e in np.eye(p.size)])
    np.testing.assert_allclose(grad, fd, rtol=0, atol=1e-6 * np.abs(fd).max())


def test_learned_knots_raise_the_bound_which_stays_below_the_exact_likelihood(data):
    X, y = data
    kernel = kernel_of("matern32", length_scale=(1.0, 1.0), variance=1.0)
    hp = Hyperparameters(kernel, 0.1, (1e-6, 1e5))
    fmap = nystrom.NystromFeatures.build(X, kernel, 6, np.random.default_rng(0),
                                         knots="pivoted_cholesky")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = sg.engine.objectives.low_rank_objective(fmap, hp, X, y, objective="vfe").value(hp.theta)
        learned_map, learned_hp, result, objective = learn_knots(fmap, hp, X, y, max_iter=60)
    assert learned_map.selection == "learned" and learned_map.knots.shape == (6, 2)
    assert result.log_marginal_likelihood > start
    theta = learned_hp.theta
    bound = sg.engine.objectives.low_rank_objective(learned_map, learned_hp, X, y,
                                             objective="vfe").value(theta)
    assert bound == pytest.approx(result.log_marginal_likelihood, rel=1e-12)
    kernel_learned, noise_learned = learned_hp.values(theta)
    exact_value = exact.log_marginal_likelihood(kernel_learned, noise_learned, X, y)
    exact_value = exact_value[0] if isinstance(exact_value, tuple) else exact_value
    assert bound <= exact_value


def fit(X, y, **kw):
    params = dict(approximation="nystrom", n_components=8, kernel="matern32", objective="vfe",
                  noise_variance=0.5, random_state=0)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return low_rank(**params).fit(X, y)


def test_estimator_learn_knots(data, tmp_path):
    X, y = data
    fixed = fit(X, y)
    learned = fit(X, y, learn_knots=40)
    assert learned.get_params()["approximation__learn_knots"] == 40
    assert clone(learned).get_params()["approximation__learn_knots"] == 40
    assert learned.feature_map_.selection == "learned"
    assert learned.log_marginal_likelihood_value_ > fixed.log_marginal_likelihood_value_
    assert learned.optimization_result_.n_evaluations > fixed.optimization_result_.n_evaluations
    theta = np.append(learned.kernel_.theta, np.log(learned.noise_variance_))
    assert learned.log_marginal_likelihood(theta) == pytest.approx(
        learned.log_marginal_likelihood_value_, rel=1e-10)
    path = tmp_path / "model.npz"
    sg.save(learned, path)
    loaded = sg.load(path)
    assert loaded.approximation.learn_knots == 40 and loaded.feature_map_.selection == "learned"
    np.testing.assert_array_equal(loaded.feature_map_.knots, learned.feature_map_.knots)
    np.testing.assert_array_equal(loaded.predict(X[:5]), learned.predict(X[:5]))


@pytest.mark.parametrize("params, error, message", [
    ({"approximation": "rff"}, TypeError, r"Features \(rff\) has no option learn_knots"),
    ({"objective": "dtc"}, ValueError, "objective='vfe'"),
    ({"optimize": False}, ValueError, "optimize=True"),
])
def test_estimator_refuses_learn_knots_where_it_does_not_apply(params, error, message, data):
    X, y = data
    with pytest.raises(error, match=message):
        fit(X, y, learn_knots=5, **params)
    with pytest.raises(NotImplementedError, match="matern12"):
        fit(X, y, learn_knots=5, kernel="matern12")
