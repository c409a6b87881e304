"""Maclaurin features (Wacker & Filippone 2022, Eqs. 3-5; docs/maclaurin.md): the explicit 1-D map
is the truncated series, the sketched map is unbiased for it, the optimized allocation beats
a uniform one, and far from the data vanilla Maclaurin collapses while the test-point-centred
local model returns to the prior (Theorem 3.1, our reconstruction; docs/maclaurin.md,
"Options and limits")."""

import math

import numpy as np
import pytest
from scipy.special import gammaincc

import scalegp as sg
from tests.conftest import low_rank
from scalegp import features
from scalegp.features.maclaurin import (AllocationStatistics, optimize_allocation,
                                        uniform_allocation)
from scalegp.features.sketches import SKETCHES

Maclaurin = features.get("maclaurin")


def truncated_kernel(X, Y, kernel, degree):
    """k_p = k Q(p + 1, x~^T y~) (docs/maclaurin.md, "The expansion", for x~^T y~ >= 0) or the series itself."""
    U, V = X / kernel.length_scale, Y / kernel.length_scale
    G = U @ V.T
    series = sum(G**n / math.factorial(n) for n in range(degree + 1))
    def squared_norms(A):
        return np.sum(A * A, axis=1)
    return (kernel.variance * np.exp(-0.5 * (squared_norms(U)[:, None]
                                             + squared_norms(V)[None, :])) * series)


def test_explicit_map_is_the_truncated_series():
    kernel = sg.Gaussian(length_scale=0.7, variance=1.3)
    X = np.linspace(0.0, 3.0, 25)[:, None]
    fmap = Maclaurin.build(X, kernel, 10)
    assert fmap.sketch == "explicit" and fmap.degree == 9 and fmap.n_components == 10
    Psi = fmap.features(X, kernel)
    np.testing.assert_allclose(Psi @ Psi.T, truncated_kernel(X, X, kernel, 9), rtol=1e-12,
                               atol=1e-15)
    # the identity of docs/maclaurin.md, "The expansion" for x~^T y~ >= 0
    G = (X / 0.7) @ (X / 0.7).T
    np.testing.assert_allclose(Psi @ Psi.T, kernel(X, X) * gammaincc(10, G), rtol=1e-12,
                               atol=1e-15)


@pytest.mark.parametrize("sketch", SKETCHES)
def test_randomized_maclaurin_is_unbiased_for_k_p(sketch):
    kernel = sg.Gaussian(length_scale=[0.9, 1.2, 1.5], variance=1.4)
    X = np.random.default_rng(0).uniform(-1, 1, size=(6, 3))
    fmap0 = Maclaurin.build(X, kernel, 33, np.random.default_rng(0), sketch=sketch,
                            allocation=[4, 4, 4, 4])
    pairs_x, pairs_y = np.repeat(X, 6, axis=0), np.tile(X, (6, 1))
    variance = fmap0.kernel_variance(pairs_x, pairs_y, kernel).reshape(6, 6)
    n_seeds = 400
    estimates = np.mean([
        (lambda P: P @ P.T)(Maclaurin.build(X, kernel, 33, np.random.default_rng(seed),
                                            sketch=sketch, allocation=[4, 4, 4, 4])
                            .features(X, kernel))
        for seed in range(n_seeds)], axis=0)
    target = truncated_kernel(X, X, kernel, 4)
    assert np.all(np.abs(estimates - target) <= 4 * np.sqrt(variance / n_seeds) + 1e-12)


def reference_terms(U, sketch, max_degree):
    """The parts of L_p written from its definition (docs/maclaurin.md, "Allocation and
    degree p*"), independently of AllocationStatistics: variance(n, D) = mean_{i > j}
    c_ij^2 Var_n(u_i, u_j; D) / (n!)^2 with c_ij = exp(-(|u_i|^2 + |u_j|^2) / 2) and Var_n
    the closed-form sketch variance; bias[p] the squared truncation error of degree p
    averaged over all pairs (i, j)."""
    from scalegp.features.sketches import sketch_variance
    i, j = np.tril_indices(len(U), k=-1)
    sq = np.sum(U**2, axis=1)

    def variance(n, D):
        return (np.mean(np.exp(-(sq[i] + sq[j])) * sketch_variance(sketch, n, D, U[i], U[j]))
                / math.factorial(n) ** 2)

    G = U @ U.T
    prefactor = np.exp(-0.5 * (sq[:, None] + sq[None, :]))
    series = [sum(G**n / math.factorial(n) for n in range(p + 1))
              for p in range(max_degree + 1)]
    bias = [np.mean((prefactor * np.exp(G) - prefactor * part) ** 2) for part in series]
    return variance, bias


@pytest.mark.parametrize("sketch", ["rademacher", "srht", "complex-srht", "tensorsketch"])
def test_optimized_allocation_is_no_worse_than_uniform(sketch):
    """The score is L_p of the allocation by the definition (reference_terms), and no
    uniform allocation of any degree has a lower L_p by that definition."""
    rng = np.random.default_rng(1)
    U = rng.normal(size=(200, 4)) * 0.8
    stats = AllocationStatistics.from_subsample(U, sketch, 10)
    budget = 63
    allocation, score = optimize_allocation(stats, budget, 2, 10)
    assert sum(allocation) == budget and min(allocation) >= 1
    variance, bias = reference_terms(U, sketch, 10)

    def objective(cut):
        return sum(variance(n, D) for n, D in enumerate(cut, 1)) + bias[len(cut)]

    assert score == pytest.approx(objective(allocation), rel=1e-10)
    for degree in range(2, 11):
        assert score <= objective(uniform_allocation(degree, budget)) * (1 + 1e-12), degree


def test_greedy_allocation_is_the_optimum_for_product_sketches():
    """With a plain product sketch Var_n = a_n / D_n is convex in D_n, so the greedy marginal
    allocation is the exact optimum: checked against every allocation of 12 features (D_n >=
    1) over degrees 2-5, by the definition of L_p."""
    import itertools
    U = np.random.default_rng(4).normal(size=(60, 3)) * 0.7
    stats = AllocationStatistics.from_subsample(U, "rademacher", 5)
    budget = 12
    allocation, score = optimize_allocation(stats, budget, 2, 5)
    variance, bias = reference_terms(U, "rademacher", 5)
    terms = {(n, D): variance(n, D) for n in range(1, 6) for D in range(1, budget + 1)}
    best = min(sum(terms[n, D] for n, D in enumerate(cut, 1)) + bias[len(cut)]
               for degree in range(2, 6)
               for bars in itertools.combinations(range(1, budget), degree - 1)
               for cut in [np.diff((0, *bars, budget)).tolist()])
    assert score == pytest.approx(best, rel=1e-10)


def test_fitted_map_reports_degree_and_expected_error():
    kernel = sg.Gaussian(length_scale=1.0)
    X = np.random.default_rng(2).normal(size=(300, 3))
    fmap = Maclaurin.build(X, kernel, 64, np.random.default_rng(0))
    assert 2 <= fmap.degree <= 15 and fmap.n_components == 64
    assert np.isfinite(fmap.expected_error) and fmap.expected_error > 0


def test_other_kernels_and_bad_options_are_refused():
    X = np.zeros((5, 2))
    with pytest.raises(TypeError, match="Gaussian kernel only"):
        Maclaurin.build(X, sg.Matern(nu=1.5), 16)
    with pytest.raises(ValueError, match="sketch must be one of"):
        Maclaurin.build(X, sg.Gaussian(), 16, sketch="fourier")
    with pytest.raises(ValueError, match="explicit"):
        Maclaurin.build(X, sg.Gaussian(), 16, sketch="explicit")
    with pytest.raises(ValueError, match="summing to at most 15"):
        Maclaurin.build(X, sg.Gaussian(), 16, allocation=[10, 10])


def test_draw_does_not_depend_on_theta():
    X = np.random.default_rng(3).normal(size=(50, 2))
    a = Maclaurin.build(X, sg.Gaussian(length_scale=1.0), 32, np.random.default_rng(0),
                        allocation=[10, 11, 10])
    b = Maclaurin.build(X, sg.Gaussian(length_scale=0.3), 32, np.random.default_rng(0),
                        allocation=[10, 11, 10])
    np.testing.assert_array_equal(a.projections, b.projections)


# ------------------------------------------------------- Theorem 3.1 and the local kernel
def sinc_problem():
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(80, 1))
    return X, np.sinc(X[:, 0]) + 0.05 * rng.standard_normal(80)


def test_far_from_data_vanilla_collapses_and_local_returns_to_prior():
    X, y = sinc_problem()
    kernel = sg.Gaussian(length_scale=0.3, variance=1.0)
    far = np.array([[12.0], [-15.0]])
    common = dict(approximation="maclaurin", n_components=10, kernel=kernel,
                  noise_variance=0.01, optimize=False, random_state=0)
    vanilla = low_rank(**common).fit(X, y)
    mean, std = vanilla.predict(far, return_std=True)
    assert np.all(np.abs(mean) < 1e-12) and np.all(std < 1e-12)
    # the bound of docs/maclaurin.md, "Options and limits", for x = y: k_p(x, x) = s e^{-|x~|^2}
    # sum_{n<=p} |x~|^{2n}/n!
    Psi = vanilla.feature_map_.features(far, kernel)
    bound = np.exp(-(far[:, 0] / 0.3) ** 2) * sum((far[:, 0] / 0.3) ** (2 * n)
                                                 / math.factorial(n) for n in range(10))
    np.testing.assert_allclose(np.sum(Psi**2, axis=1), bound, rtol=1e-10)
    centred = low_rank(**common, local="test-points").fit(X, y)
    mean, std = centred.predict(far, return_std=True)
    np.testing.assert_allclose(mean, 0.0, atol=1e-10)
    np.testing.assert_allclose(std, 1.0, rtol=1e-10)


@pytest.mark.parametrize("n_dims, sketch", [(1, "explicit"), (3, "rademacher"),
                                            (3, "complex-srht"), (3, "tensorsketch")])
def test_local_kernel_is_exact_at_the_centre(n_dims, sketch):
    rng = np.random.default_rng(4)
    kernel = sg.Gaussian(length_scale=np.linspace(0.5, 1.0, n_dims), variance=1.7)
    X = rng.normal(size=(40, n_dims))
    fmap = Maclaurin.build(X, kernel, 10 if n_dims == 1 else 41, np.random.default_rng(0),
                           sketch=sketch)
    centre = rng.normal(size=n_dims)
    at_centre = fmap.features((centre - centre)[None], kernel)
    others = fmap.features(X - centre, kernel)
    np.testing.assert_allclose((others @ at_centre.T)[:, 0], kernel(X, centre[None])[:, 0],
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(at_centre @ at_centre.T, [[1.7]], rtol=1e-12)


def summed_kl(mean, var, mean_ref, var_ref):
    """sum over test points of KL(approx || reference) of the noisy predictive Gaussians."""
    return 0.5 * np.sum(np.log(var_ref / var) + (var + (mean - mean_ref) ** 2) / var_ref - 1)


@pytest.mark.filterwarnings("ignore::scalegp.errors.FitQualityWarning")
@pytest.mark.parametrize("seed", range(5))
def test_short_length_scale_local_beats_vanilla_and_rff(seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(200, 1))
    y = np.sinc(2 * X[:, 0]) + 0.1 * rng.standard_normal(200)
    X_test = np.linspace(-3, 3, 100)[:, None]
    kernel, noise = sg.Gaussian(length_scale=0.2), 0.01
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=noise, optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    mean_ref, std_ref = exact.predict(X_test, return_std=True)
    kl = {}
    for name, options in [("rff", dict(approximation="rff")),
                          ("vanilla", dict(approximation="maclaurin")),
                          ("local", dict(approximation="maclaurin", local="test-points"))]:
        model = low_rank(kernel=kernel, noise_variance=noise, optimize=False,
                         random_state=seed, n_components=10, **options).fit(X, y)
        mean, std = model.predict(X_test, return_std=True)
        kl[name] = summed_kl(mean, std**2 + noise, mean_ref, std_ref**2 + noise)
    assert kl["local"] < kl["vanilla"] and kl["local"] < kl["rff"], kl
