"""The Vecchia likelihood against the exact GP and finite differences.

Exactness: at m = N - 1 every point conditions on all points before it, so the Vecchia
factorization is the chain rule and must equal the exact log likelihood (any ordering,
grouped or not) to rounding: 1e-8 relative.

Accuracy in m: with y ~ N(0, S) the Vecchia density q has, per point, the exact conditional
regression b_i and variance v_i on its set h(i), so

    KL(p || q) = 1/2 (sum_i log v_i - log det S) = log p(0) - log q(0),

which never increases when the sets grow: nested sets (m nearest within m + 1 nearest)
lower every v_i, and grouping enlarges h(i) (it contains c(i)). Both are tested exactly.
"""

from dataclasses import replace

import numpy as np
import pytest

from scalegp.errors import NotPositiveDefiniteError
from scalegp.engine.exact import ExactMarginalLikelihood, log_marginal_likelihood
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.kernels import Gaussian, Matern
from scalegp.vecchia import VecchiaLikelihood, build_structure, likelihood, vecchia_log_likelihood

KERNELS = [
    Gaussian(length_scale=0.4, variance=1.7),
    Gaussian(length_scale=[0.3, 0.6], variance=1.2),
    Matern(nu=0.5, length_scale=[0.5, 0.8], variance=1.3),
    Matern(nu=1.5, length_scale=0.5, variance=0.8),
    Matern(nu=1.5, length_scale=[0.3, 0.7], variance=0.8),
    Matern(nu=2.5, length_scale=[0.4, 0.9], variance=1.1),
]
IDS = ["gaussian-iso", "gaussian-ard", "matern12-ard", "matern32-iso", "matern32-ard",
       "matern52-ard"]
NOISE = 0.03


def data(n=70, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2)) * [1.0, 2.0]
    y = np.sin(4 * X[:, 0]) * np.cos(2 * X[:, 1]) + 0.15 * rng.standard_normal(n)
    return X, y - y.mean()


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
@pytest.mark.parametrize("ordering", ["maximin", "random", "coordinate"])
@pytest.mark.parametrize("grouping", [False, True])
def test_full_conditioning_sets_give_the_exact_likelihood(kernel, ordering, grouping):
    X, y = data()
    structure = build_structure(X, kernel.length_scale, len(y) - 1, ordering=ordering,
                                grouping=grouping, rng=3)
    value, gradient = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)
    exact_value, exact_gradient = log_marginal_likelihood(kernel, NOISE, X, y,
                                                          eval_gradient=True)
    assert value == pytest.approx(exact_value, rel=1e-8)
    np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-8,
                               atol=1e-8 * np.abs(exact_gradient).max())


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
@pytest.mark.parametrize("grouping", [False, True])
@pytest.mark.parametrize("known_noise", [False, True], ids=["s2", "s2+v"])
def test_gradient_matches_finite_differences(kernel, grouping, known_noise):
    # central differences, step h = 1e-5 in log units: truncation h^2 |f'''| / 6 and
    # rounding eps |f| / h are both below 1e-8 here (|f| ~ 50); measured agreement ~1e-8.
    # Known per-row noise variances v add to s2 on the diagonal and leave the gradient's form
    X, y = data()
    v = np.random.default_rng(7).uniform(0.0, 0.1, len(y)) if known_noise else None
    structure = build_structure(X, kernel.length_scale, 6, grouping=grouping)
    theta = np.append(kernel.theta, np.log(NOISE))

    def f(t):
        return vecchia_log_likelihood(kernel.with_theta(t[:-1]), np.exp(t[-1]), X, y,
                                      structure, sample_noise_variance=v)

    _, gradient = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True,
                                         sample_noise_variance=v)
    h = 1e-5
    numeric = [(f(theta + h * e) - f(theta - h * e)) / (2 * h) for e in np.eye(theta.size)]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-6)


def kl_to_exact(kernel, X, structure):
    """KL(exact || Vecchia) = log p(0) - log q(0) (module docstring)."""
    zero = np.zeros(len(X))
    return (log_marginal_likelihood(kernel, NOISE, X, zero)
            - vecchia_log_likelihood(kernel, NOISE, X, zero, structure))


def test_accuracy_never_decreases_with_m_nor_with_grouping():
    # a smooth 2-D field (Gaussian kernel), 300 points
    X, _ = data(300, seed=1)
    kernel = Gaussian(length_scale=[0.3, 0.5], variance=1.0)
    kl = {}
    for grouping in (False, True):
        kl[grouping] = [kl_to_exact(kernel, X, build_structure(X, kernel.length_scale, m,
                                                               grouping=grouping))
                        for m in (1, 2, 5, 10, 20, 40)]
    # measured (maximin; nats): ungrouped 139, 71.3, 22.7, 11.1, 5.76, 1.94;
    # grouped 139, 65.6, 19.1, 8.15, 2.88, 0.525 (random and coordinate orderings: worse
    # at every m >= 2, coordinate the worst: 3.7 and 1.08 at m = 40)
    for values in kl.values():
        assert np.all(np.diff(values) < 0) and values[-1] > 0
    assert np.all(np.array(kl[True]) <= np.array(kl[False]) + 1e-9)
    assert kl[True][-1] < 0.5 * kl[False][-1]


def test_objective_mirrors_the_exact_objective():
    X, y = data()
    kernel = KERNELS[4]
    hyperparameters = Hyperparameters(kernel, NOISE, (1e-4, 1.0))
    objective = VecchiaLikelihood(hyperparameters, X, y,
                                  build_structure(X, kernel.length_scale, len(y) - 1))
    exact = ExactMarginalLikelihood(hyperparameters, X, y)
    theta = hyperparameters.theta + 0.1
    value, gradient = objective(theta)
    exact_value, exact_gradient = exact(theta)
    assert value == pytest.approx(exact_value, rel=1e-8)
    np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-8, atol=1e-8)
    assert objective.value(theta) == pytest.approx(value, rel=1e-12)
    assert objective.n_evaluations == 1


@pytest.mark.parametrize("grouping", [False, True])
def test_threads_give_the_serial_result(grouping, monkeypatch):
    X, y = data(2000, seed=2)
    kernel = KERNELS[5]
    structure = build_structure(X, kernel.length_scale, 10, grouping=grouping)
    serial = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)
    # many small batches: the threads share them, and the sum keeps the serial order
    monkeypatch.setattr(likelihood, "ELEMENTS_PER_BATCH", 2000)
    assert len(likelihood._batches(structure.blocks)) > 20
    small = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)
    threaded = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True,
                                      n_jobs=3)
    assert threaded[0] == small[0]
    np.testing.assert_array_equal(threaded[1], small[1])
    # other batches sum in another order: equal to rounding
    assert small[0] == pytest.approx(serial[0], rel=1e-12)
    np.testing.assert_allclose(small[1], serial[1], rtol=1e-12)


def test_batches_cover_every_block_once():
    X, y = data(500, seed=4)
    structure = build_structure(X, [0.3, 0.5], 12)
    blocks = structure.blocks
    seen = []
    for positions, rows, weight in likelihood._batches(blocks):
        assert positions.shape[0] == rows.shape[0] == weight.shape[0]
        members = [sorted(p[r[w > 0]].tolist()) for p, r, w in zip(positions, rows, weight)]
        seen.extend(members)
        for p, r, w in zip(positions, rows, weight):      # padding points at row 0, weight 0
            assert np.all(r[w == 0] == 0) and np.all(np.diff(p) > 0)
    expected = [sorted(blocks.block(b)[0][blocks.block(b)[1]].tolist())
                for b in range(blocks.n_blocks)]
    assert sorted(map(tuple, seen)) == sorted(map(tuple, expected))
    assert sum(len(m) for m in seen) == len(y)


def test_a_subset_of_blocks_sums_its_members_terms():
    X, y = data(400, seed=5)
    kernel = KERNELS[4]
    structure = build_structure(X, kernel.length_scale, 8)
    n = structure.blocks.n_blocks
    parts = [np.arange(0, n, 2), np.arange(1, n, 2)]
    whole = vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)
    halves = [vecchia_log_likelihood(kernel, NOISE, X, y,
                                     replace(structure, blocks=structure.blocks.subset(ids)),
                                     eval_gradient=True) for ids in parts]
    assert sum(h[0] for h in halves) == pytest.approx(whole[0], rel=1e-12)
    np.testing.assert_allclose(halves[0][1] + halves[1][1], whole[1], rtol=1e-10)
    assert sum(structure.blocks.subset(ids).n_members for ids in parts) == len(y)
    with pytest.raises(ValueError, match="block ids"):
        structure.blocks.subset([n])


def test_bad_input_is_refused():
    X, y = data()
    kernel = KERNELS[0]
    structure = build_structure(X, kernel.length_scale, 5)
    with pytest.raises(ValueError, match="structure"):
        vecchia_log_likelihood(kernel, NOISE, X[:-1], y[:-1], structure)
    with pytest.raises(ValueError, match="noise_variance"):
        vecchia_log_likelihood(kernel, 0.0, X, y, structure)
    with pytest.raises(ValueError, match="y"):
        vecchia_log_likelihood(kernel, NOISE, X, y[:-1], structure)
    with pytest.raises(ValueError, match="n_jobs"):
        vecchia_log_likelihood(kernel, NOISE, X, y, structure, n_jobs=0)
    duplicated = np.repeat(X[:10], 3, axis=0)
    with pytest.raises(NotPositiveDefiniteError, match="Vecchia block"):
        vecchia_log_likelihood(kernel, 1e-300, duplicated, np.zeros(30),
                               build_structure(duplicated, 0.4, 5))


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_stacked_kernel_matrices_and_gradient_contractions(kernel):
    rng = np.random.default_rng(6)
    X = rng.uniform(size=(5, 9, 2))
    W = rng.standard_normal((5, 9, 9))
    _check_stacked(kernel, X, W, (1e-12, 1e-14), (1e-11, 0.0))
    with pytest.raises(ValueError, match="stack"):
        kernel.stacked(X[0])


def _check_stacked(kernel, X, W, matrix_tolerance, inner_tolerance):
    """``kernel.stacked(X)`` against k(X_b) block by block, and its gradient contraction
    with W against sum_b <W_b, dk(X_b)>, at the (rtol, atol) given for each."""
    K, inner = kernel.stacked(X, eval_gradient=True)
    np.testing.assert_allclose(kernel.stacked(X), K, rtol=1e-13, atol=1e-15)
    expected = np.zeros(kernel.n_params)
    for b in range(X.shape[0]):
        np.testing.assert_allclose(K[b], kernel(X[b]), rtol=matrix_tolerance[0],
                                   atol=matrix_tolerance[1])
        expected += np.einsum("ij,pij->p", W[b], kernel.gradient(X[b]))
    contraction = inner(W.copy())
    assert contraction.shape == (kernel.n_params,)
    np.testing.assert_allclose(contraction, expected, rtol=inner_tolerance[0],
                               atol=inner_tolerance[1])


def _in_dims(kernel, d):
    """The kernel with its parameters in d input dimensions (ARD scales spread over d)."""
    scales = np.atleast_1d(kernel.length_scale)
    scale = scales[0] if scales.size == 1 else np.geomspace(scales[0], scales[-1], d)
    return type(kernel)(**{**kernel.get_params(), "length_scale": scale})


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_stacked_by_gemm_in_higher_dimensions(kernel):
    """From d = STACKED_GEMM_MIN_DIMS on, smooth kernels form r^2 and the length-scale
    contractions by GEMMs: the same matrices and contractions as k(X_b) and its gradient,
    also for a far offset and for repeated points (r = 0 off the diagonal)."""
    from scalegp.kernels import values

    d = 9
    assert d >= values.STACKED_GEMM_MIN_DIMS
    kernel = _in_dims(kernel, d)
    rng = np.random.default_rng(8)
    X = rng.uniform(size=(6, 11, d)) + 50.0 * rng.standard_normal(d)
    X[:, 3] = X[:, 7]
    W = rng.standard_normal((6, 11, 11))
    _check_stacked(kernel, X, W, (1e-11, 1e-12), (1e-9, 1e-10))


@pytest.mark.parametrize("size", [1, 5, 16, 17, 40, 97])
def test_batched_triangular_inverse(size):
    from scalegp import linalg

    rng = np.random.default_rng(size)
    G = rng.standard_normal((3, size, 2 * size))
    L = np.linalg.cholesky(G @ G.transpose(0, 2, 1) / size + 0.1 * np.eye(size))
    R = linalg.batched_triangular_inverse(L)
    assert np.all(np.triu(R, 1) == 0)
    np.testing.assert_allclose(R @ L, np.broadcast_to(np.eye(size), L.shape), atol=1e-10)


@pytest.mark.parametrize("kernel", KERNELS, ids=IDS)
def test_stacked_gradient_stacks(kernel):
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(4, 7, 2))
    K, dK = kernel.stacked_gradient(X)
    assert dK.shape == (kernel.n_params, 4, 7, 7) and np.shares_memory(K, dK)
    for b in range(4):
        np.testing.assert_allclose(dK[:, b], kernel.gradient(X[b]), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kernel", [KERNELS[1], KERNELS[3], KERNELS[2]],
                         ids=["gaussian-ard", "matern32-iso", "matern12-ard"])
@pytest.mark.parametrize("grouping", [False, True])
def test_fisher_information_at_full_sets_is_the_exact_gps(kernel, grouping):
    X, y = data(60)
    structure = build_structure(X, kernel.length_scale, len(y) - 1, grouping=grouping)
    value, gradient, fisher = vecchia_log_likelihood(kernel, NOISE, X, y, structure,
                                                     eval_fisher=True)
    assert (value, *gradient) == pytest.approx(
        (*[vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)[0]],
         *vecchia_log_likelihood(kernel, NOISE, X, y, structure, eval_gradient=True)[1]),
        rel=1e-10)
    K = kernel(X) + NOISE * np.eye(len(y))
    dK = list(kernel.gradient(X)) + [NOISE * np.eye(len(y))]
    K_inv = np.linalg.inv(K)
    exact = np.array([[0.5 * np.trace(K_inv @ a @ K_inv @ b) for b in dK] for a in dK])
    np.testing.assert_allclose(fisher, exact, rtol=1e-8, atol=1e-8 * np.abs(exact).max())


def test_fisher_information_is_the_expected_outer_product_of_gradients():
    # at m < N - 1 the information is that of the Vecchia density q: E_q[g g^T], checked by
    # drawing y from q (its sparse inverse Cholesky factor: y_i = b_i^T y_h + sqrt(v_i) e)
    X, _ = data(40, seed=8)
    kernel = KERNELS[4]
    structure = build_structure(X, kernel.length_scale, 4, grouping=False)
    order, neighbors = structure.order, structure.neighbors
    Xo = X[order]
    rng = np.random.default_rng(9)
    n_draws = 4000
    Y = np.zeros((n_draws, len(X)))
    for i in range(len(X)):
        h = neighbors[i][neighbors[i] >= 0]
        b, v = np.zeros(0), kernel.variance + NOISE
        if h.size:
            k = kernel(Xo[h], Xo[i:i + 1])[:, 0]
            b = np.linalg.solve(kernel(Xo[h]) + NOISE * np.eye(h.size), k)
            v -= k @ b
        Y[:, i] = Y[:, h] @ b + np.sqrt(v) * rng.standard_normal(n_draws)
    grads = np.empty((n_draws, kernel.n_params + 1))
    y_rows = np.empty_like(Y)
    y_rows[:, order] = Y
    for j in range(n_draws):
        grads[j] = vecchia_log_likelihood(kernel, NOISE, X, y_rows[j], structure,
                                          eval_gradient=True)[1]
    _, _, fisher = vecchia_log_likelihood(kernel, NOISE, X, y_rows[0], structure,
                                          eval_fisher=True)
    empirical = grads.T @ grads / n_draws
    assert np.abs(grads.mean(axis=0)).max() < 5 * np.sqrt(np.diag(fisher) / n_draws).max()
    # Monte Carlo error of E[g g^T]: a few per cent at 4000 draws
    np.testing.assert_allclose(empirical, fisher, rtol=0.15, atol=0.05 * np.abs(fisher).max())
