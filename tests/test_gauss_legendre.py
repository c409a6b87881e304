"""Gauss-Legendre features: the 1-D rules, the truncation and node-count numbers of
docs/gauss-legendre.md (sections 5, 6 and 10), the real feature construction and its separable
evaluation, weights and their gradients, the choice of q, the QR variant, the semigroup kernel,
and GLF-GPR against the exact GP (one representative case here, the full grid under
``-m slow``)."""

import warnings

import numpy as np
import pytest
import scipy.integrate

import scalegp as sg
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.engine import exact
from scalegp import engine
from scalegp import metrics
from scalegp.experiments.glf import synthetic_data
from scalegp.features.gauss_legendre import GaussLegendreFeatures
from scalegp.features.glf_semigroup import SemigroupGaussLegendreFeatures
from scalegp.inference.glf_selection import search_node_counts
from scalegp.features.glf_theory import (HyperparameterBox, theoretical_node_counts,
                                truncation_half_widths, truncation_radius)
from scalegp.features.quadrature import gauss_legendre, symmetric_rule
from scalegp.kernels import ReciprocalSemigroup
from scalegp.engine.objectives import low_rank_objective
from scalegp.engine.qr import QRBasisStatistics, QRMarginalLikelihood
from scalegp.estimators.configuration import make_approximation


def build(X, kernel, **options):
    """A GLF map without the 'set your bounds' and 's >= n' warnings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return GaussLegendreFeatures.build(X, kernel, options.pop("n_components", 0), None,
                                           **options)


def boxed(kernel, low=0.2, high=0.8):
    return kernel.with_params(length_scale_bounds=(low, high), variance_bounds=(0.5, 2.0))


FAMILIES = [
    sg.Gaussian(length_scale=[0.3, 0.5], variance=1.3),
    sg.Matern(nu=0.5, length_scale=[0.3, 0.5]),
    sg.Matern(nu=1.5, length_scale=0.4, variance=0.7),
    sg.Matern(nu=2.5, length_scale=[0.3, 0.5], variance=1.3),
    sg.Cauchy(length_scale=[0.3, 0.5], variance=0.9),
    sg.Laplacian(length_scale=0.4, variance=1.1),
]


@pytest.fixture
def data_2d():
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, size=(80, 2))
    return X, np.sin(5 * X[:, 0]) * np.cos(3 * X[:, 1]) + 0.1 * rng.standard_normal(80)


# ----------------------------------------------------------------------------- 1-D rules
@pytest.mark.parametrize("q", [1, 2, 3, 5, 8, 20])
def test_gauss_legendre_is_exact_to_degree_2q_minus_1(q):
    t, omega = gauss_legendre(q)
    assert omega.sum() == pytest.approx(2.0, abs=1e-14)
    np.testing.assert_array_equal(t, -t[::-1])
    for degree in range(2 * q):
        moment = 2.0 / (degree + 1) if degree % 2 == 0 else 0.0
        assert omega @ t**degree == pytest.approx(moment, abs=1e-13)
    if q <= 5:                                  # and not beyond: t^(2q) is missed
        assert abs(omega @ t ** (2 * q) - 2.0 / (2 * q + 1)) > 1e-4


def test_scaled_and_two_panel_rules():
    nodes, weights = symmetric_rule(7, 3.0)
    for degree in range(14):
        moment = 2 * 3.0 ** (degree + 1) / (degree + 1) if degree % 2 == 0 else 0.0
        assert weights @ nodes**degree == pytest.approx(moment, rel=1e-12, abs=1e-10)
    assert 0.0 in nodes                         # odd q: the node 0, exactly
    # Two panels: exact for |eta|^k (k <= q - 1), the kink a single panel cannot integrate.
    nodes, weights = symmetric_rule(10, 3.0, panels=2)
    single_nodes, single_weights = symmetric_rule(10, 3.0)
    for degree in range(10):
        moment = 2 * 3.0 ** (degree + 1) / (degree + 1)
        assert weights @ np.abs(nodes) ** degree == pytest.approx(moment, rel=1e-12)
    assert abs(single_weights @ np.abs(single_nodes) - 9.0) > 1e-3
    with pytest.raises(ValueError, match="n_nodes must be even for a two-panel rule.* got 7"):
        symmetric_rule(7, 3.0, panels=2)


# ----------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("kernel, n_dims, tail, radius", [
    (sg.Gaussian(), 1, 1e-7, 3.8546586),
    (sg.Gaussian(), 2, 1e-7, 3.9408978),
    (sg.Matern(nu=0.5), 1, 1e-4, 12732.3954),
    (sg.Matern(nu=1.5), 1, 1e-4, 20.3792633),
    (sg.Matern(nu=1.5), 2, 1e-4, 27.1257498),
    (sg.Matern(nu=2.5), 3, 1e-4, 8.2875406),
    (sg.Cauchy(), 1, 1e-6, 14.5086577),
    (sg.Laplacian(), 2, 1e-3, 2546.16),
])
def test_truncation_radius_reproduces_the_reference_table(kernel, n_dims, tail, radius):
    # the reference radii (docs/gauss-legendre.md, section 10) have 8 significant digits (6 for
    # the Laplacian)
    assert truncation_radius(kernel, n_dims, tail, variance=2.0) == pytest.approx(radius,
                                                                                 rel=1e-6)


@pytest.mark.parametrize("kernel", [sg.Gaussian(length_scale=0.3, variance=2.0),
                                    sg.Matern(nu=1.5, length_scale=0.4, variance=2.0),
                                    sg.Cauchy(length_scale=0.5, variance=2.0),
                                    sg.Laplacian(length_scale=0.5, variance=2.0)])
def test_mass_outside_the_box_is_the_budget_delta(kernel):
    """Proposition 7 in 1-D: int_{|eta| > Q} p = delta = epsilon lambda / (2 n)."""
    bounded = kernel.with_params(length_scale_bounds="fixed", variance_bounds="fixed")
    box = HyperparameterBox.from_kernel(bounded, 1, noise_variance_lower=0.01)
    Q = truncation_half_widths(bounded, box, n_samples=50, epsilon=0.1)[0]
    tail, _ = scipy.integrate.quad(lambda e: kernel.spectral_density([[e]])[0], Q, np.inf,
                                   epsabs=0, epsrel=1e-10, limit=500)
    assert 2 * tail == pytest.approx(0.1 * 0.01 / (2 * 50), rel=1e-6)
    assert Q == pytest.approx(truncation_radius(kernel, 1, 1e-5, 2.0)
                              / ({"Gaussian": np.sqrt(2) * np.pi, "Matern": np.pi * np.sqrt(4 / 3)}
                                 .get(type(kernel).__name__, 2 * np.pi) * kernel.length_scale[0]))


@pytest.mark.parametrize("kernel, width, low, high, noise, n, Q, q, digits", [
    (sg.Gaussian(), 10, 0.2, 2.0, 1e-2, 800, 3.97, 283, 3),  # docs/gauss-legendre.md, section 10
    (sg.Gaussian(), 10, 0.5, 5.0, 1e-2, 800, 1.59, 209, 3),
    (sg.Gaussian(), 1, 0.05, 1.0, 1e-3, 800, 17.23, 429, 3),
    (sg.Matern(nu=2.5), 1, 0.1, 1.0, 1e-2, 1000, 52.1, 2612, 3),  # second table
    (sg.Matern(nu=1.5), 1, 0.1, 1.0, 1e-2, 1000, 261, 17375, 3),
    (sg.Matern(nu=0.5), 1, 0.1, 1.0, 1e-2, 1000, 2.0e6, 3.3e8, 2),
])
def test_truncation_and_node_count_bound_reproduce_the_reference_numbers(kernel, width, low, high, noise,
                                                          n, Q, q, digits):
    """Q of Proposition 7 and q of the Theorem 11-12 bound, to the digits of the reference
    table (docs/gauss-legendre.md, section 10; q within 1: the minimization over rho that
    produced the table was not exact either)."""
    kernel = kernel.with_params(length_scale=low, length_scale_bounds=(low, high),
                                variance_bounds="fixed")
    box = HyperparameterBox.from_kernel(kernel, 1, noise)
    R = truncation_half_widths(kernel, box, n, 0.1)
    assert R[0] == pytest.approx(Q, rel=0.6 * 10.0 ** (1 - digits))
    counts = theoretical_node_counts(kernel, box, R, np.array([width / 2]), n, 0.1,
                                     np.array([1]))
    assert counts[0] == pytest.approx(q, rel=0.6 * 10.0 ** (1 - digits), abs=1)


# ----------------------------------------------------------------------------- features
def complex_kernel_matrix(fmap, kernel, X):
    """K~ = V D V^* of the full complex tensor rule (docs/gauss-legendre.md, section 1),
    computed directly."""
    rules = [symmetric_rule(q, Q, p) for q, Q, p in
             zip(fmap.n_nodes, fmap.half_width, fmap.panels)]
    eta = np.stack([g.ravel() for g in np.meshgrid(*[r[0] for r in rules], indexing="ij")], 1)
    W = np.prod(np.stack([g.ravel() for g in np.meshgrid(*[r[1] for r in rules],
                                                         indexing="ij")]), axis=0)
    V = np.exp(2j * np.pi * (X - fmap.offset) @ eta.T)
    return (V * (W * kernel.spectral_density(eta))) @ V.conj().T


@pytest.mark.parametrize("n_nodes", [(5, 3, 4), (3, 3, 3), (4, 6, 2), (1, 7, 3)])
def test_real_features_equal_the_complex_tensor_rule(n_nodes):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(40, 3))
    kernel = sg.Matern(nu=1.5, length_scale=[0.5, 0.7, 0.9])
    fmap = build(X, boxed(kernel, 0.3, 1.0), n_nodes=n_nodes)
    assert fmap.n_components == np.prod(n_nodes)
    Psi = fmap.features(X, kernel)
    K = complex_kernel_matrix(fmap, kernel, X)
    assert np.abs(K.imag).max() < 1e-13
    np.testing.assert_allclose(Psi @ Psi.T, K.real, atol=1e-13)


@pytest.mark.parametrize("n_dims, n_nodes", [(1, 9), (1, 8), (2, (6, 5)), (2, (7, 5)),
                                             (3, (3, 4, 5)), (3, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_basis_layout_and_its_statistics(n_dims, n_nodes, dtype):
    """The basis comes Fortran-ordered (the layout the rank-k update reads without a copy) in
    the input's precision, and the statistics of the one pass equal the dense Phi^T Phi and
    Phi^T y."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 5, size=(70, n_dims))
    y = rng.standard_normal(70)
    fmap = build(X, boxed(sg.Gaussian(length_scale=0.5)), n_nodes=n_nodes)
    low = fmap.basis(X.astype(dtype))
    assert low.dtype == dtype and low.flags.f_contiguous
    np.testing.assert_allclose(low, fmap.basis(X), rtol=0,
                               atol=100 * np.finfo(dtype).eps)
    Phi = fmap.basis(X)
    statistics = engine.BasisStatistics.accumulate(fmap, X, y, chunk_size=16).statistics
    np.testing.assert_allclose(statistics.gram, Phi.T @ Phi, rtol=0, atol=1e-12 * len(y))
    np.testing.assert_allclose(statistics.projection, Phi.T @ y, rtol=0, atol=1e-12 * len(y))


@pytest.mark.parametrize("n_dims, n_nodes", [(1, 9), (2, (6, 5)), (3, (3, 4, 5)), (3, 3)])
def test_separable_evaluation_equals_direct_formula(n_dims, n_nodes):
    """Angle addition over per-dimension factors = cos/sin(2 pi eta^T (x - c)) directly."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-3, 5, size=(50, n_dims))
    fmap = build(X, boxed(sg.Gaussian(length_scale=0.5)), n_nodes=n_nodes)
    eta = fmap.nodes
    n_pairs = fmap.n_components // 2
    phase = 2 * np.pi * (X - fmap.offset) @ eta[:n_pairs].T
    direct = np.hstack([np.cos(phase), np.sin(phase)]
                       + [np.ones((50, 1))] * (fmap.n_components % 2))
    np.testing.assert_allclose(fmap.basis(X), direct, atol=1e-12)
    # the representative of each pair has its first nonzero coordinate positive
    first = np.array([row[np.flatnonzero(row)[0]] for row in eta[:n_pairs]])
    assert np.all(first > 0)


def test_separable_kernel_is_the_product_of_half_line_rules():
    """Cauchy (two panels): the 2-D tensor approximation is k~_1(D_1) k~_2(D_2)."""
    rng = np.random.default_rng(2)
    X = rng.uniform(0, 1, size=(30, 2))
    kernel = sg.Cauchy(length_scale=[0.3, 0.6], variance=1.0)
    fmap = build(X, boxed(kernel, 0.25, 0.7), n_nodes=(12, 8))
    Psi = fmap.features(X, kernel)
    product = np.ones((30, 30))
    for j in range(2):
        nodes, weights = symmetric_rule(fmap.n_nodes[j], fmap.half_width[j], panels=2)
        positive = nodes > 0
        p = sg.Cauchy(length_scale=kernel.length_scale[j]).spectral_density(nodes[positive, None])
        D = X[:, j, None] - X[None, :, j]
        product *= np.einsum("l,ijl->ij", 2 * weights[positive] * p,
                             np.cos(2 * np.pi * D[..., None] * nodes[positive]))
    np.testing.assert_allclose(Psi @ Psi.T, product, atol=1e-13)


@pytest.mark.parametrize("kernel", [sg.Gaussian(length_scale=0.3),
                                    sg.Cauchy(length_scale=0.3),
                                    sg.Matern(nu=2.5, length_scale=0.3)])
def test_kernel_error_falls_with_q(kernel):
    X = np.linspace(0, 1, 60)[:, None]
    box = kernel.with_params(length_scale_bounds=(0.2, 0.5), variance_bounds="fixed")
    errors = []
    for q in (32, 128, 256):            # the paper's setting: Q of Proposition 7, q grows
        fmap = build(X, box, n_nodes=q, noise_variance_lower=1e-2, half_width="proposition7")
        Psi = fmap.features(X, kernel)
        errors.append(np.abs(Psi @ Psi.T - kernel(X)).max())
    assert errors[2] <= errors[0]
    assert errors[2] < (2e-6 if isinstance(kernel, sg.Matern) else 1e-7)


def test_basis_is_fixed_and_weights_carry_theta(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Matern(nu=2.5, length_scale=[0.4, 0.6]))
    fmap = build(X, kernel, n_nodes=(7, 6))
    Phi = fmap.basis(X)
    for shift in (-0.3, 0.2):
        other = kernel.with_theta(kernel.theta + shift)
        np.testing.assert_array_equal(fmap.basis(X), Phi)
        np.testing.assert_allclose(fmap.features(X, other), Phi * np.sqrt(fmap.weights(other)),
                                   rtol=1e-14)
    likelihood = engine.MarginalLikelihood(fmap, kernel, X, y)
    likelihood.X = likelihood.y = None            # learning steps never touch the data
    value, grad = likelihood(np.append(kernel.theta + 0.1, np.log(0.05)))
    assert np.isfinite(value) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("kernel", FAMILIES + [sg.Gaussian(length_scale=0.4)],
                         ids=lambda k: repr(k))
def test_weights_and_gradients_match_finite_differences(kernel, data_2d):
    X, _ = data_2d
    fmap = build(X, boxed(kernel, 0.25, 0.8), n_nodes=(6, 5) if not isinstance(
        kernel, sg.Cauchy) else (6, 4))
    weights = fmap.weights(kernel)
    assert weights.shape == (fmap.n_components,) and np.all(weights > 0)
    analytic = fmap.weights_grad(kernel)
    eps = 1e-6
    for i in range(kernel.n_params):
        step = np.zeros(kernel.n_params)
        step[i] = eps
        numeric = (fmap.weights(kernel.with_theta(kernel.theta + step))
                   - fmap.weights(kernel.with_theta(kernel.theta - step))) / (2 * eps)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-6, atol=1e-12)


def test_gradients_stay_finite_where_weights_underflow(data_2d):
    """Large length scales: p(eta) underflows at the outer nodes; d log p does not."""
    X, y = data_2d
    kernel = sg.Gaussian(length_scale=30.0, length_scale_bounds=(0.1, 40.0),
                         variance_bounds=(0.5, 2.0))
    fmap = build(X, kernel, n_nodes=(20, 20))
    assert np.any(fmap.weights(kernel) == 0.0)
    assert np.all(np.isfinite(fmap.log_weights_grad(kernel)))
    value, grad = engine.MarginalLikelihood(fmap, kernel, X, y)(np.append(kernel.theta,
                                                                      np.log(0.1)))
    assert np.isfinite(value) and np.all(np.isfinite(grad))


# ----------------------------------------------------------------------------- build options
def test_budget_split_follows_box_widths_and_panels():
    rng = np.random.default_rng(3)
    X = rng.uniform(0, 1, size=(200, 2)) * [1.0, 4.0]
    fmap = build(X, boxed(sg.Gaussian(length_scale=0.5)), n_components=256)
    assert fmap.n_components <= 256 and fmap.n_components > 200
    assert fmap.n_nodes[1] / fmap.n_nodes[0] == pytest.approx(4.0, rel=0.3)
    cauchy = build(X, boxed(sg.Cauchy(length_scale=0.5)), n_components=100)
    assert np.all(cauchy.n_nodes % 2 == 0) and cauchy.n_components <= 100
    with pytest.raises(ValueError, match="n_components must be at least 4 .* got 3"):
        build(X, boxed(sg.Cauchy(length_scale=0.5)), n_components=3)


def test_state_rebuilds_the_map_and_report_names_q_Q_and_theory(data_2d):
    X, _ = data_2d
    kernel = boxed(sg.Matern(nu=2.5, length_scale=0.5))
    fmap = build(X, kernel, n_components=60)
    again = type(fmap).from_state(fmap.to_state())
    np.testing.assert_array_equal(again.features(X, kernel), fmap.features(X, kernel))
    assert again.report() == fmap.report()
    for field in ("truncation_bound", "theoretical_n_nodes", "epsilon", "selection"):
        assert field in fmap.to_state()
    report = fmap.report()
    assert f"q = [{fmap.n_nodes[0]}, {fmap.n_nodes[1]}]" in report
    assert "Proposition 7: R = " in report and "Theorems 11-12: q = " in report
    assert "budget n_components = 60" in report


def test_theory_mode_uses_proposition7_and_warns_when_s_exceeds_n():
    X = np.linspace(0, 1, 40)[:, None]
    kernel = sg.Gaussian(length_scale=0.3, length_scale_bounds=(0.2, 0.5),
                         variance_bounds="fixed")
    with pytest.warns(UserWarning, match=r"s = \d+ columns for n = 40 samples"):
        fmap = GaussLegendreFeatures.build(X, kernel, 0, None, n_nodes="theory",
                                           noise_variance_lower=1e-2)
    np.testing.assert_array_equal(fmap.n_nodes, fmap.theoretical_n_nodes)
    np.testing.assert_allclose(fmap.half_width, fmap.truncation_bound)
    assert fmap.selection.startswith("theory")
    Psi = fmap.features(X, kernel)
    K = kernel(X)
    eigenvalues = np.linalg.eigvalsh(np.linalg.solve(K + 1e-2 * np.eye(40), Psi @ Psi.T - K))
    assert np.abs(eigenvalues).max() <= 0.1            # epsilon-spectral equivalence holds
    with pytest.raises(ValueError, match="n_nodes='theory' needs q = .* more than 16384"):
        build(X, boxed(sg.Matern(nu=0.5, length_scale=0.3)), n_nodes="theory")


def test_wide_length_scale_bounds_fall_back_with_a_warning():
    kernel = sg.Gaussian(length_scale=0.3, length_scale_bounds=(1e-5, 1e5))
    with pytest.warns(UserWarning) as record:
        box = HyperparameterBox.from_kernel(kernel, 1, 1e-3)
    messages = [str(w.message) for w in record]
    assert any(m.startswith("length_scale_bounds = (1e-05, 100000) spans more than 10000")
               and "set the kernel's bounds" in m for m in messages)
    assert not any(m.startswith("variance_bounds") for m in messages)
    np.testing.assert_allclose([box.length_scale_min[0], box.length_scale_max[0]], [0.03, 3.0])
    assert box.variance_max == pytest.approx(1e5)      # the upper bound: no fallback


def test_auto_grows_q_until_likelihood_and_predictions_settle():
    rng = np.random.default_rng(4)
    X, y = synthetic_data(1, 400, rng)
    kernel = sg.Gaussian(length_scale=0.1, length_scale_bounds=(0.07, 0.14),
                         variance_bounds=(0.5, 2.0))
    fmap = GaussLegendreFeatures.build(X, kernel, 2000, rng, n_nodes="auto", y=y, node_search=search_node_counts,
                                       noise_variance=0.01, noise_variance_lower=1e-3,
                                       tolerance=1e-6)
    assert fmap.selection.startswith("auto, converged")
    assert 20 < fmap.n_components < 400
    value = engine.MarginalLikelihood(fmap, kernel, X, y).value(np.append(kernel.theta,
                                                                      np.log(0.01)))
    assert value == pytest.approx(exact.log_marginal_likelihood(kernel, 0.01, X, y), rel=1e-6)
    with pytest.warns(UserWarning, match="stopped at the budget n_components = 20"):
        GaussLegendreFeatures.build(X, kernel, 20, rng, n_nodes="auto", y=y, node_search=search_node_counts, tolerance=1e-6,
                                    noise_variance_lower=1e-3)


@pytest.mark.parametrize("options, message", [
    (dict(n_nodes=(3, 4, 5)), r"n_nodes must be a positive integer or one per input "
                              r"dimension \(2\), got \(3, 4, 5\)"),
    (dict(n_nodes=0), r"n_nodes must contain positive integers, got \[0, 0\]"),
    (dict(n_nodes=2.5), r"n_nodes must contain positive integers"),
    (dict(n_nodes="many"), r"n_nodes must be a positive integer or one per input dimension"),
    (dict(n_nodes="auto"), r"n_nodes='auto' compares likelihoods, so y .* got y=None"),
    (dict(epsilon=-1.0, n_nodes=3), r"epsilon must be a finite positive number, got -1.0"),
    (dict(n_nodes=3, half_width=[1.0, -2.0]), r"half_width must be None, 'proposition7', a "
                                              r"positive number or one per input dimension"),
    (dict(n_nodes=3, noise_variance_lower=0.0), r"noise_variance_lower must be a finite "
                                                r"positive number, got 0.0"),
])
def test_bad_options_name_parameter_expectation_and_value(options, message, data_2d):
    X, _ = data_2d
    with pytest.raises((ValueError, TypeError), match=message):
        build(X, boxed(sg.Gaussian(length_scale=0.4)), **options)


def test_captured_mass_is_the_rules_prior_variance_and_warns_at_the_ends_of_theta():
    X = np.random.default_rng(3).uniform(0, 10, size=(200, 2))   # 10 units wide
    kernel = sg.Matern(nu=2.5, length_scale=1.0, length_scale_bounds=(0.8, 1.25),
                       variance=1.7, variance_bounds=(0.5, 2.0))
    fine = build(X, kernel, n_nodes=48)
    Psi = fine.features(X[:5], kernel)
    np.testing.assert_allclose(np.sum(Psi**2, axis=1), 1.7 * fine.captured_mass(kernel),
                               rtol=1e-12)
    assert abs(fine.captured_mass(kernel) - 1) < 0.02
    # 8 x 8 nodes resolve the phases only for |eta| <= 8 / (1.5 pi 10): the tails are cut
    coarse = build(X, kernel, n_nodes=8)
    assert coarse.captured_mass(kernel.with_params(length_scale=0.8)) < 0.9
    with pytest.warns(UserWarning, match=r"reproduce \d+ % of the prior variance at the "
                                         r"smallest length scales of Theta \(\[0.8\]\): the "
                                         r"truncation box drops"):
        GaussLegendreFeatures.build(X, kernel, 0, None, n_nodes=8)
    # a narrow box that resolves the phases but not the peak of a long length scale
    with pytest.warns(UserWarning, match="at the largest length scales .* do not resolve"):
        GaussLegendreFeatures.build(X, kernel.with_params(length_scale_bounds=(0.8, 20.0)),
                                    0, None, n_nodes=8, half_width=0.5)


def test_unsupported_kernel_and_odd_cauchy_nodes_are_refused(data_2d):
    X, _ = data_2d
    assert not GaussLegendreFeatures.supports(ReciprocalSemigroup())
    with pytest.raises(ValueError, match=r"ReciprocalSemigroup\(.*\) is not supported by glf: "
                                         "it is not shift-invariant .* use 'glf-semigroup'"):
        build(X, ReciprocalSemigroup(length_scale=0.5), n_nodes=3)
    assert not SemigroupGaussLegendreFeatures.supports(sg.Gaussian())
    with pytest.raises(ValueError, match="not supported by glf-semigroup: it has no Laplace "
                                         "representation"):
        SemigroupGaussLegendreFeatures.build(np.abs(X), sg.Gaussian(), 16)
    with pytest.raises(ValueError, match="n_nodes must be even for a two-panel rule"):
        build(X, boxed(sg.Cauchy(length_scale=0.4)), n_nodes=5)


# ----------------------------------------------------------------------------- QR variant
@pytest.mark.parametrize("n_samples, n_nodes", [(400, (8, 7)), (40, (9, 8))])
def test_qr_variant_equals_normal_equations(n_samples, n_nodes):
    rng = np.random.default_rng(5)
    X = rng.uniform(0, 1, size=(n_samples, 2))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.1 * rng.standard_normal(n_samples)
    kernel = boxed(sg.Matern(nu=2.5, length_scale=[0.3, 0.4]), 0.1, 1.0)
    fmap = build(X, kernel, n_nodes=n_nodes)          # n = 40 < s = 72 too
    qr = low_rank_objective(fmap, kernel, X, y, solver="qr", chunk_size=64)
    assert isinstance(qr, QRMarginalLikelihood)
    normal = engine.MarginalLikelihood(fmap, kernel, X, y)
    for theta in (np.append(kernel.theta, np.log(0.01)),
                  np.append(kernel.theta + 0.4, np.log(0.2))):
        value, grad = qr(theta)
        value_ref, grad_ref = normal(theta)
        assert value == pytest.approx(value_ref, rel=1e-10)
        np.testing.assert_allclose(grad, grad_ref, rtol=1e-8,
                                   atol=1e-10 * np.abs(grad_ref).max())
    one_shot = QRBasisStatistics.accumulate(fmap, X, y, chunk_size=n_samples)
    R, R_one = qr.statistics.basis_factor, one_shot.basis_factor
    np.testing.assert_allclose(R.T @ R, R_one.T @ R_one, atol=1e-10)
    np.testing.assert_allclose(R.T @ R, fmap.basis(X).T @ fmap.basis(X), atol=1e-10)


def test_qr_gradient_matches_finite_differences(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Gaussian(length_scale=[0.4, 0.6]))
    objective = QRMarginalLikelihood(build(X, kernel, n_nodes=(7, 7)), kernel, X, y)
    theta = np.append(kernel.theta, np.log(0.05))
    _, grad = objective(theta)
    eps = 1e-6
    numeric = [(objective.value(theta + eps * e) - objective.value(theta - eps * e)) / (2 * eps)
               for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)


def test_qr_posterior_equals_normal_equations_posterior(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Matern(nu=1.5, length_scale=[0.3, 0.5]), 0.1, 1.0)
    fmap = build(X, kernel, n_nodes=(9, 8))
    X_test = np.random.default_rng(8).uniform(0, 1, size=(30, 2))
    qr_posterior = QRMarginalLikelihood(fmap, kernel, X, y).posterior(
        Hyperparameters(kernel, 0.03))
    normal = engine.Posterior.fit(fmap, kernel, 0.03, X, y)
    assert qr_posterior.log_marginal_likelihood == pytest.approx(
        normal.log_marginal_likelihood, rel=1e-11)
    for got, expected in zip(qr_posterior.predict(X_test, return_var=True),
                             normal.predict(X_test, return_var=True)):
        np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12)


def test_qr_refuses_float32_and_theta_dependent_maps(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Gaussian(length_scale=0.4))
    with pytest.raises(ValueError, match="solver='qr' computes in float64"):
        QRMarginalLikelihood(build(X, kernel, n_nodes=6), kernel, X, y, dtype="float32")
    rff = sg.features.get("rff").build(X, kernel, 16, np.random.default_rng(0))
    with pytest.raises(TypeError, match="QR variant needs a fixed-basis feature map"):
        QRMarginalLikelihood(rff, kernel, X, y)
    assert isinstance(low_rank_objective(rff, kernel, X, y), engine.MarginalLikelihood)
    with pytest.raises(ValueError, match=r"solver must be one of \('cholesky', 'qr'\), got 'lu'"):
        low_rank_objective(rff, kernel, X, y, solver="lu")


def test_estimator_learns_through_the_qr_solver_and_passes_the_data_once(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Gaussian(length_scale=0.4), 0.1, 1.0)
    fits = {}
    for solver in ("cholesky", "qr"):
        rows_seen = []
        model = sg.LowRankGPRegressor(
            kernel=kernel, noise_variance=0.05, noise_variance_bounds=(1e-3, 1.0), approximation=make_approximation("glf", options={"n_nodes": (10, 10)}, solver=solver), normalize_X=False, normalize_y=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            model.fit(X, y, progress=rows_seen.append)
        assert rows_seen[-1] == X.shape[0] and rows_seen.count(X.shape[0]) == 1
        fits[solver] = model
    cholesky, qr = fits["cholesky"], fits["qr"]
    assert qr.log_marginal_likelihood_value_ == pytest.approx(
        cholesky.log_marginal_likelihood_value_, rel=1e-7)
    np.testing.assert_allclose(qr.kernel_.theta, cholesky.kernel_.theta, atol=1e-4)
    np.testing.assert_allclose(qr.predict(X[:20]), cholesky.predict(X[:20]), atol=1e-4)


def test_estimator_gives_the_map_its_noise_bound_targets_and_starting_noise(data_2d):
    X, y = data_2d
    kernel = boxed(sg.Gaussian(length_scale=0.4), 0.1, 1.0)
    model = sg.LowRankGPRegressor(kernel=kernel,
                                  noise_variance=0.05, noise_variance_bounds=(1e-3, 1.0),
                                  optimize=False, approximation=make_approximation("glf", n_components=400), normalize_X=False, normalize_y=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model.fit(X, y)
        direct = build(X, kernel, n_components=400, noise_variance_lower=1e-3)
        default = build(X, kernel, n_components=400)
    np.testing.assert_array_equal(model.feature_map_.half_width, direct.half_width)
    np.testing.assert_array_equal(model.feature_map_.truncation_bound, direct.truncation_bound)
    # the bound matters: lambda_min = 1e-6 (the map's own default) truncates further out
    assert np.all(default.truncation_bound > direct.truncation_bound)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # 80 samples: stops at the budget
        auto = sg.LowRankGPRegressor(
            kernel=kernel, noise_variance=0.05,
            noise_variance_bounds=(1e-3, 1.0), optimize=False, approximation=make_approximation("glf", n_components=400, options={"n_nodes": "auto"}), normalize_X=False, normalize_y=False).fit(X, y)
    assert auto.feature_map_.selection.startswith("auto")
    assert "noise variance 0.05" in auto.feature_map_.selection

# ----------------------------------------------------------------------------- semigroup kernel
def test_reciprocal_semigroup_kernel_values_laplace_form_and_gradient():
    kernel = ReciprocalSemigroup(length_scale=[0.7, 1.3], variance=2.0)
    X = np.random.default_rng(6).uniform(0, 3, size=(6, 2))
    K = kernel(X)
    c = np.array([0.7, 1.3])
    np.testing.assert_allclose(K, 2 * np.prod(c / (X[:, None] + X[None] + c), axis=-1),
                               rtol=1e-14)
    np.testing.assert_allclose(kernel.diag(X), np.diag(K), rtol=1e-14)
    one_d = ReciprocalSemigroup(length_scale=0.7, variance=2.0)
    laplace, _ = scipy.integrate.quad(
        lambda e: np.exp(-e * 1.9) * one_d.spectral_density([[e]])[0], 0, np.inf)
    assert laplace == pytest.approx(one_d([[0.4]], [[1.5]])[0, 0], rel=1e-10)
    eps = 1e-6
    for i, grad in enumerate(kernel.gradient(X)):
        step = eps * np.eye(3)[i]
        numeric = (kernel.with_theta(kernel.theta + step)(X)
                   - kernel.with_theta(kernel.theta - step)(X)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="X must be non-negative for a semigroup kernel"):
        kernel(-X)
    with pytest.raises(NotImplementedError, match="not shift-invariant.* 'glf-semigroup'"):
        kernel.sample_standard_frequencies(4, 2)


def test_semigroup_features_reach_the_reference_error():
    """docs/gauss-legendre.md, section 10: d = 2, c = 0.7, Q = 30, q = 40: max |k~ - k| ~
    2.6e-10 on [0, 3]^2."""
    kernel = ReciprocalSemigroup(length_scale=0.7)
    fmap = SemigroupGaussLegendreFeatures(n_dims=2, n_nodes=[40, 40], half_width=[30, 30])
    X = np.random.default_rng(0).uniform(0, 3, size=(300, 2))
    Psi = fmap.features(X, kernel)
    assert np.abs(Psi @ Psi.T - kernel(X)).max() < 5e-10
    direct = np.exp(-X @ fmap.nodes.T)                   # separable evaluation = direct form
    np.testing.assert_allclose(fmap.basis(X), direct, rtol=1e-13)


def test_semigroup_map_build_weights_and_engine():
    rng = np.random.default_rng(8)
    X = rng.uniform(0, 2, size=(60, 2))
    y = 1.0 / (1.0 + X.sum(axis=1)) + 0.01 * rng.standard_normal(60)
    kernel = ReciprocalSemigroup(length_scale=[0.8, 1.2], length_scale_bounds=(0.5, 2.0),
                                 variance_bounds=(0.5, 2.0))
    fmap = SemigroupGaussLegendreFeatures.build(X, kernel, 1600, None,
                                                noise_variance_lower=1e-3)
    assert fmap.n_components == 1600 and np.all(fmap.half_width == fmap.truncation_bound)
    Psi = fmap.features(X, kernel)
    assert np.abs(Psi @ Psi.T - kernel(X)).max() < 1e-8
    eps = 1e-6
    analytic = fmap.weights_grad(kernel)
    for i in range(kernel.n_params):
        step = eps * np.eye(kernel.n_params)[i]
        numeric = (fmap.weights(kernel.with_theta(kernel.theta + step))
                   - fmap.weights(kernel.with_theta(kernel.theta - step))) / (2 * eps)
        np.testing.assert_allclose(analytic[i], numeric, rtol=1e-6, atol=1e-14)
    value = engine.MarginalLikelihood(fmap, kernel, X, y).value(np.append(kernel.theta,
                                                                      np.log(1e-3)))
    assert value == pytest.approx(exact.log_marginal_likelihood(kernel, 1e-3, X, y), rel=1e-5)
    with pytest.raises(ValueError, match="X must be non-negative for glf-semigroup"):
        fmap.basis(-X)


def test_semigroup_kernel_by_name_in_the_estimator_with_a_model_file(tmp_path):
    rng = np.random.default_rng(9)
    X = rng.uniform(0, 2, size=(80, 2))
    y = 1.0 / (1.0 + X.sum(axis=1)) + 0.01 * rng.standard_normal(80)
    X_test = rng.uniform(0, 2, size=(500, 2))
    y_test = 1.0 / (1.0 + X_test.sum(axis=1)) + 0.01 * rng.standard_normal(500)
    kernel = sg.kernels.get("reciprocal_semigroup", length_scale=1.0,
                            length_scale_bounds=(0.5, 2.0), variance_bounds=(0.5, 2.0))
    assert isinstance(kernel, ReciprocalSemigroup) and not kernel.shift_invariant
    # the Fourier maps refuse a kernel that is not shift-invariant, with the reason
    assert not sg.features.get("rff").supports(kernel)
    with pytest.raises(ValueError, match="'rff' does not support the kernel"):
        sg.LowRankGPRegressor("rff", kernel=kernel, normalize_X=False, normalize_y=False).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        model = sg.LowRankGPRegressor(kernel=kernel,
                                      noise_variance=1e-3,
                                      noise_variance_bounds=(1e-4, 1e-1), approximation=make_approximation("glf-semigroup", n_components=400), normalize_X=False, normalize_y=False).fit(X, y)
    # the noise bound reached the map: its truncation box is that of lambda_min = 1e-4
    direct = SemigroupGaussLegendreFeatures.build(X, kernel, 400, None,
                                                  noise_variance_lower=1e-4)
    np.testing.assert_array_equal(model.feature_map_.truncation_bound, direct.truncation_bound)
    # Against the exact GP learning on the same data, on 500 held-out points. Measured (data
    # seeds 9, 1, 2, 3): test RMSE ratio 0.998-1.005, rms gap of the means 0.011-0.021 of the
    # exact test RMSE; asked: within 2 % and 0.1 (four times the largest deviation).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        exact_model = sg.ExactGPRegressor(kernel=kernel, noise_variance=1e-3,
                                          noise_variance_bounds=(1e-4, 1e-1), normalize_X=False, normalize_y=False).fit(X, y)
    exact_mean = exact_model.predict(X_test)
    exact_rmse = metrics.rmse(y_test, exact_mean)
    assert metrics.rmse(y_test, model.predict(X_test)) == pytest.approx(exact_rmse, rel=0.02)
    assert metrics.rmse(exact_mean, model.predict(X_test)) <= 0.1 * exact_rmse
    sg.save(model, tmp_path / "semigroup.npz")
    loaded = sg.load(tmp_path / "semigroup.npz")
    assert isinstance(loaded.kernel_, ReciprocalSemigroup)
    np.testing.assert_array_equal(loaded.predict(X[:10]), model.predict(X[:10]))


# ----------------------------------------------------------------------------- against exact GP
def compare_with_exact(kernel, n_samples, n_dims, seed, ratio):
    """Learn with the exact GP and with GLF (n_nodes="auto"); return the relative gaps."""
    rng = np.random.default_rng(seed)
    X, y = synthetic_data(n_dims, n_samples, rng)
    X_test, y_test = synthetic_data(n_dims, 500, rng)
    scale = kernel.length_scale[0]
    kernel = kernel.with_params(length_scale_bounds=(scale / np.sqrt(ratio),
                                                     scale * np.sqrt(ratio)),
                                variance_bounds=(0.1, 10.0))
    noise_bounds = (1e-3, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sg.BoundaryWarning)
        exact_learned, exact_result = sg.learn_hyperparameters(
            exact.ExactMarginalLikelihood(kernel, X, y), Hyperparameters(kernel, 0.03,
                                                                         noise_bounds))
        exact_kernel, exact_noise = exact_learned.kernel, exact_learned.noise_variance
        fmap = GaussLegendreFeatures.build(X, kernel, 6000, rng, n_nodes="auto", y=y,
                                           node_search=search_node_counts,
                                           noise_variance=0.03,
                                           noise_variance_lower=noise_bounds[0])
        objective = engine.MarginalLikelihood(fmap, kernel, X, y)
        glf_learned, glf_result = sg.learn_hyperparameters(
            objective, Hyperparameters(kernel, 0.03, noise_bounds))
        glf_kernel, glf_noise = glf_learned.kernel, glf_learned.noise_variance
    exact_rmse = metrics.rmse(y_test, exact.ExactPosterior.fit(
        exact_kernel, exact_noise, X, y).predict(X_test))
    glf_rmse = metrics.rmse(y_test, objective.posterior(glf_learned.theta).predict(X_test))
    learned = np.exp(np.append(glf_kernel.theta, np.log(glf_noise))
                     - np.append(exact_kernel.theta, np.log(exact_noise)))
    exact_at_glf = exact.log_marginal_likelihood(glf_kernel, glf_noise, X, y)
    return dict(rmse=abs(glf_rmse / exact_rmse - 1),
                lml=abs(glf_result.log_marginal_likelihood / exact_result.log_marginal_likelihood
                        - 1),
                hyperparameters=np.abs(learned - 1).max(),
                exact_loss=exact_result.log_marginal_likelihood - exact_at_glf,
                s=fmap.n_components)


def assert_close_to_exact(gaps):
    """Test RMSE within 1 %, log p(y) at the optimum within 1e-3 relative, and the learned
    hyperparameters within 5 % of the exact GP's (the issue's criterion, not relaxed).

    Measured misses are declared as strict expected failures in KNOWN_MISSES, with their
    numbers (issue 4's note); ``exact_loss`` is in the printed gaps."""
    assert gaps["rmse"] < 0.01, gaps
    assert gaps["lml"] < 1e-3, gaps
    assert gaps["hyperparameters"] < 0.05, gaps


def test_glf_learning_matches_the_exact_gp():
    """Representative case (1-D Gaussian, n = 600); the full grid is the slow test below."""
    assert_close_to_exact(compare_with_exact(sg.Gaussian(length_scale=0.09), 600, 1, 0, 4.0))


#: Length scales near the exact GP's optimum on ``synthetic_data`` (ours); Theta is a box of
#: ratio 4 (1-D) or 2 (2-D) around them: q grows with l_max / l_min (docs/gauss-legendre.md,
#: section 4).
SLOW_CASES = [(sg.Gaussian(length_scale=0.086), 1), (sg.Matern(nu=2.5, length_scale=0.14), 1),
              (sg.Matern(nu=1.5, length_scale=0.21), 1), (sg.Gaussian(length_scale=0.165), 2),
              (sg.Matern(nu=2.5, length_scale=0.33), 2), (sg.Matern(nu=1.5, length_scale=0.485), 2)]
SEEDS = (0, 1, 2)
#: (kernel, n_dims, seed) cases measured to miss the 5 % hyperparameter criterion, and why.
#: Every other criterion holds for them; the criterion itself is the issue's, unchanged.
KNOWN_MISSES = {
    ("Matern(nu=1.5, length_scale=0.485, variance=1)", 2, seed):
        "'auto' stops at the 6,000 budget (q = 77 x 77) unconverged; RMSE within 0.08 %, "
        "log p(y) within 6e-4, hyperparameters 18-30 % off (seeds 0, 1, 2) at an exact-GP "
        "log p(y) loss of 0.05-0.09 nat: Matern 3/2's slow spectral decay in 2-D needs Q "
        "near 10 for the tails and more nodes than the budget to resolve the peak there"
    for seed in SEEDS}
KNOWN_MISSES[("Matern(nu=2.5, length_scale=0.33, variance=1)", 2, 2)] = (
    "hyperparameters 21 % off at an exact-GP log p(y) loss of 0.067 nat (s = 2256); the gap "
    "is not monotone in s: with auto tolerance 3e-4 (s = 5929) this seed is within 1.1 % but "
    "seeds 0 and 1 drift to 13 % and 8 % (at 1e-3: 2.0 % and 1.1 %), a flat ridge of the "
    "likelihood in (length scale, variance)")


def slow_cases():
    for kernel, n_dims in SLOW_CASES:
        for seed in SEEDS:
            reason = KNOWN_MISSES.get((repr(kernel), n_dims, seed))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(kernel, n_dims, seed, marks=marks,
                               id=f"{kernel!r}-d{n_dims}-seed{seed}")


@pytest.mark.slow
@pytest.mark.parametrize("kernel, n_dims, seed", list(slow_cases()))
def test_glf_learning_matches_the_exact_gp_on_2000_points(kernel, n_dims, seed):
    gaps = compare_with_exact(kernel, 2000, n_dims, seed, 4.0 if n_dims == 1 else 2.0)
    print(f"{kernel!r} d={n_dims} seed={seed}: {gaps}")     # shown with -s: the numbers
    assert_close_to_exact(gaps)
