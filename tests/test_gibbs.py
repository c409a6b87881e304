"""The Gibbs sampler (scalegp.inference.gibbs; docs/gibbs.md): every full conditional against a dense,
independent computation of the unnormalised joint on a tiny problem, the chain's theta1
marginal against numerical integration, coverage on data with known hyperparameters, the
ESS estimator on AR(1) chains, the predictive mixture and the input checks."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from scalegp import kernels
from scalegp.inference.gibbs_model import (AtomMaps, GammaPrior, _State, check_theta1_grid,
                                           length_scale_of, unit_kernel)
from scalegp.inference.gibbs_sweeps import RowsBackend, StatisticsBackend
from scalegp.inference.gibbs import effective_sample_size, mixture_quantile, sample_posterior
from scalegp.estimators.transformers import _build_feature_map

pytestmark = pytest.mark.filterwarnings("ignore:Gauss-Legendre features with q")
KERNEL = kernels.get("gaussian")
GRID = np.array([2.0, 5.0, 12.5, 30.0])
TAU_PRIOR, THETA2_PRIOR = GammaPrior(2.0, 0.1), GammaPrior(2.0, 1.5)
BACKENDS = {"statistics": StatisticsBackend, "rows": RowsBackend}


def tiny_problem(n=6, m=4, seed=0, approximation="glf"):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 1))
    build_kernel = KERNEL.with_params(length_scale=0.3, length_scale_bounds=(0.1, 1.0))
    fmap = _build_feature_map(approximation, X, build_kernel, m, None,
                              np.random.default_rng(seed + 1), {"noise_variance_lower": 1e-3})
    y = np.sin(6 * X[:, 0]) + 0.3 * rng.standard_normal(n)
    return fmap, X, y


def dense_features(fmap, X, h):
    return fmap.at(unit_kernel(KERNEL, GRID[h])).features(X)


def dense_Q(fmap, X, h, diagonal: bool):
    """Q_h = Psi Psi^T (+ diag(max(1 - |psi|^2, 1e-10))) of the unit-variance kernel."""
    Psi = dense_features(fmap, X, h)
    Q = Psi @ Psi.T
    if diagonal:
        Q += np.diag(np.maximum(1 - np.sum(Psi**2, axis=1), 1e-10))
    return Q


def log_joint(kind, fmap, X, y, latent, tau, theta2, h):
    """log p(y, latent, tau, theta2, h) up to a constant, written densely (Eq. G1-G4)."""
    n = y.size
    prior = TAU_PRIOR.logpdf(tau) + THETA2_PRIOR.logpdf(theta2) - math.log(GRID.size)
    if kind == "statistics":            # latent = w
        Psi = dense_features(fmap, X, h)
        return (stats.multivariate_normal(Psi @ latent, np.eye(n) / tau).logpdf(y)
                + stats.multivariate_normal(np.zeros(latent.size),
                                            np.eye(latent.size) / theta2).logpdf(latent) + prior)
    Q = dense_Q(fmap, X, h, True)       # latent = g
    return (stats.multivariate_normal(latent, np.eye(n) / tau).logpdf(y)
            + stats.multivariate_normal(np.zeros(n), Q / theta2)
            .logpdf(latent) + prior)


def backend_and_state(kind, seed=0):
    fmap, X, y = tiny_problem(seed=seed)
    backend = BACKENDS[kind](AtomMaps.repeat(fmap, GRID.size), KERNEL, GRID, X, y)
    rng = np.random.default_rng(seed + 7)
    size = fmap.n_components if kind == "statistics" else y.size
    state = _State(tau=3.0, theta2=0.8, index=2, latent=0.5 * rng.standard_normal(size))
    return backend, state, fmap, X, y


# ---------------------------------------------------------------- the full conditionals
@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_theta1_conditional_is_the_normalised_joint_over_the_grid(kind):
    """Pr(h | rest) (Eq. G8 / G11) by brute-force enumeration of the dense joint."""
    backend, state, fmap, X, y = backend_and_state(kind)
    joint = np.array([log_joint(kind, fmap, X, y, state.latent, state.tau, state.theta2, h)
                      for h in range(GRID.size)])
    got = backend.theta1_log_probs(state)
    np.testing.assert_allclose(got - logsumexp(got), joint - logsumexp(joint), atol=1e-9)


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_collapsed_theta1_is_the_marginal_likelihood_over_the_grid(kind):
    """Pr(h | y, tau, theta2) ∝ N(y; 0, Q_h / theta2 + I / tau) (latent field integrated out)."""
    backend, state, fmap, X, y = backend_and_state(kind)
    dense = np.array([
        stats.multivariate_normal(np.zeros(y.size),
                                  dense_Q(fmap, X, h, kind == "rows") / state.theta2
                                  + np.eye(y.size) / state.tau).logpdf(y)
        for h in range(GRID.size)])
    got = backend.collapsed_theta1_log_probs(state.tau, state.theta2)
    np.testing.assert_allclose(got - logsumexp(got), dense - logsumexp(dense), atol=1e-9)


@pytest.mark.parametrize("kind", sorted(BACKENDS))
@pytest.mark.parametrize("parameter", ["tau", "theta2"])
def test_gamma_conditionals_are_the_normalised_joint(kind, parameter):
    """The Gamma conditional of tau / theta2 (Eq. G6-G7, G9-G10) against the dense joint
    evaluated on a fine grid and normalised by the trapezoidal rule. The rule's error is
    below 1e-6 of the peak density for 20,001 points over 0.999999 of the mass."""
    backend, state, fmap, X, y = backend_and_state(kind)
    prior = TAU_PRIOR if parameter == "tau" else THETA2_PRIOR
    method = getattr(backend, f"{parameter}_conditional")
    conditional = method(state, prior)
    law = stats.gamma(conditional.shape, scale=1 / conditional.rate)
    values = np.linspace(law.ppf(1e-7), law.ppf(1 - 1e-7), 20001)

    def joint_at(value):
        tau = value if parameter == "tau" else state.tau
        theta2 = value if parameter == "theta2" else state.theta2
        return log_joint(kind, fmap, X, y, state.latent, tau, theta2, state.index)

    log_density = np.array([joint_at(v) for v in values[::50]])
    # the joint is exactly log Gamma + const in the parameter: fit the constant on a subgrid
    offset = np.mean(log_density - conditional.logpdf(values[::50]))
    np.testing.assert_allclose(log_density - offset, conditional.logpdf(values[::50]),
                               atol=1e-8)
    density = np.exp(np.array([joint_at(v) for v in values[::400]]) - offset)
    np.testing.assert_allclose(density, law.pdf(values[::400]), rtol=1e-8)


def test_gamma_prior_draws_are_shape_rate():
    """GammaPrior(a, b).draw follows Ga(a, b) with mean a / b (numpy is shape-scale): KS."""
    prior = GammaPrior(3.0, 20.0)
    rng = np.random.default_rng(0)
    draws = np.array([prior.draw(rng) for _ in range(4000)])
    assert stats.kstest(draws, stats.gamma(3.0, scale=1 / 20.0).cdf).pvalue > 1e-3
    assert stats.kstest(draws, stats.gamma(3.0, scale=20.0).cdf).pvalue < 1e-10


def moment_check(draws, mean, cov):
    """Sample mean and covariance within 5 standard errors of the Gaussian's: se(mean_j) =
    sqrt(S_jj / N), se(cov_ij) = sqrt((S_ii S_jj + S_ij^2) / N)."""
    N = draws.shape[0]
    np.testing.assert_array_less(np.abs(draws.mean(axis=0) - mean),
                                 5 * np.sqrt(np.diag(cov) / N))
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / N)
    np.testing.assert_array_less(np.abs(np.cov(draws.T) - cov), 5 * se)


def test_weight_conditional_without_diagonal():
    """w | y, tau, theta2, h ~ N(tau A^{-1} Psi^T y, A^{-1}), A = tau Psi^T Psi + theta2 I."""
    backend, state, fmap, X, y = backend_and_state("statistics")
    Psi = dense_features(fmap, X, state.index)
    A = state.tau * Psi.T @ Psi + state.theta2 * np.eye(Psi.shape[1])
    cov = np.linalg.inv(A)
    rng = np.random.default_rng(1)
    draws = []
    for _ in range(20000):
        backend.draw_latent(state, rng)
        draws.append(state.latent)
    moment_check(np.array(draws), state.tau * cov @ Psi.T @ y, cov)


def test_field_conditional_with_diagonal():
    """g | y, tau, theta2, h ~ N(tau S y, S), S = (tau I + theta2 Q^{-1})^{-1}."""
    backend, state, fmap, X, y = backend_and_state("rows")
    Q = dense_Q(fmap, X, state.index, True)
    S = np.linalg.inv(state.tau * np.eye(y.size) + state.theta2 * np.linalg.inv(Q))
    rng = np.random.default_rng(2)
    draws = []
    for _ in range(20000):
        backend.draw_latent(state, rng)
        draws.append(state.latent)
    moment_check(np.array(draws), state.tau * S @ y, S)


def test_weights_given_the_field():
    """The stored w | g, theta2, h: w ~ N(0, I / theta2), g | w ~ N(Psi w, C / theta2) give
    precision theta2 (I + Psi^T C^{-1} Psi) and mean (I + Psi^T C^{-1} Psi)^{-1} Psi^T C^{-1} g."""
    backend, state, fmap, X, y = backend_and_state("rows")
    Psi = dense_features(fmap, X, state.index)
    c = np.diag(dense_Q(fmap, X, state.index, True) - Psi @ Psi.T)
    P = np.eye(Psi.shape[1]) + Psi.T @ (Psi / c[:, None])
    rng = np.random.default_rng(3)
    draws = np.array([backend.weights(state, rng) for _ in range(20000)])
    moment_check(draws, np.linalg.solve(P, Psi.T @ (state.latent / c)),
                 np.linalg.inv(P) / state.theta2)


# ---------------------------------------------------------------- the chain
def exact_theta1_posterior(dense_Q_of, y, n_atoms=GRID.size):
    """p(h | y) ∝ ∫∫ N(y; 0, Q_h / theta2 + I / tau) Ga(tau) Ga(theta2), by a 400 x 400
    rule in (log tau, log theta2), Q_h = dense_Q_of(h) for each atom h, over 1e-9..1 - 1e-9 of each
    prior's mass (the posterior lies well inside)."""
    def nodes(prior):
        law = stats.gamma(prior.shape, scale=1 / prior.rate)
        logs = np.linspace(np.log(law.ppf(1e-9)), np.log(law.ppf(1 - 1e-9)), 400)
        return np.exp(logs), prior.logpdf(np.exp(logs)) + logs      # Jacobian of log
    tau, log_p_tau = nodes(TAU_PRIOR)
    theta2, log_p_theta2 = nodes(THETA2_PRIOR)
    out = []
    for h in range(n_atoms):
        q, V = np.linalg.eigh(dense_Q_of(h))
        r2 = (V.T @ y) ** 2
        var = np.maximum(q, 0)[None, None, :] / theta2[None, :, None] + 1 / tau[:, None, None]
        loglik = -0.5 * (np.log(var).sum(-1) + (r2 / var).sum(-1))
        out.append(logsumexp(loglik + log_p_tau[:, None] + log_p_theta2[None, :]))
    out = np.array(out)
    return np.exp(out - logsumexp(out))


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("collapsed", [False, True])
def test_chain_theta1_marginal_matches_numerical_integration(diagonal, collapsed):
    """The fraction of draws at each grid point against the exact marginal posterior, within
    4.5 Monte-Carlo standard errors sqrt(p (1 - p) / ESS) (ESS of the indicator chain)."""
    fmap, X, y = tiny_problem()
    exact = exact_theta1_posterior(lambda h: dense_Q(fmap, X, h, diagonal), y)
    samples = sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, tau_prior=TAU_PRIOR,
                               theta2_prior=THETA2_PRIOR, n_iter=4000, burn_in=200,
                               collapsed=collapsed, diag_correction=diagonal, rng=11)
    for h, p in enumerate(exact):
        indicator = (samples.theta1_index == h).astype(float)
        ess = effective_sample_size(indicator) if 0 < indicator.sum() < indicator.size else 0
        assert ess > 100, (h, ess)
        assert abs(indicator.mean() - p) < 4.5 * math.sqrt(p * (1 - p) / ess), (h, p,
                                                                               indicator.mean())


def test_cost_models_and_recomputed_features_equal_cached():
    """Without the diagonal the statistics ran; with it the cached and recomputed features
    give the same chain (the same random stream, the same arithmetic)."""
    fmap, X, y = tiny_problem()
    common = dict(theta1_grid=GRID, tau_prior=TAU_PRIOR, theta2_prior=THETA2_PRIOR,
                  n_iter=60, burn_in=10, rng=5)
    assert sample_posterior(fmap, KERNEL, X, y, **common).cost_model == "statistics"
    cached = sample_posterior(fmap, KERNEL, X, y, diag_correction=True, **common)
    recomputed = sample_posterior(fmap, KERNEL, X, y, diag_correction=True,
                                  feature_cache_bytes=0, **common)
    assert (cached.cost_model, recomputed.cost_model) == ("rows-cached", "rows-recomputed")
    np.testing.assert_array_equal(cached.theta1_index, recomputed.theta1_index)
    np.testing.assert_allclose(cached.weights, recomputed.weights, rtol=0, atol=1e-12)


def test_nearly_collinear_features_keep_the_chain_proper():
    """Long length scales on [0, 1] make most eigenvalues of G rounding noise; there the
    rotated projections must obey z_l^2 <= lam_l y^T y (the numerical-rank rule; without it
    they break it by up to 1e284 here and the chain of rp-table3 ran away to tau = 1e-20),
    and tau stays where the data put it: 1 / tau about RSS / (n - m) <= y^T y / (n - m),
    below 2 mean(y^2)."""
    from scalegp.experiments.gibbs_simulation import FUNCTIONS, function
    from scalegp.estimators.gibbs import build_kernel
    n = 2000
    x = np.linspace(0, 1, n)[:, None]
    y = function(x[:, 0], *FUNCTIONS[1][1:]) + 0.1 * np.random.default_rng(0).standard_normal(n)
    grid = np.array([0.001, 0.003, 0.007])
    fmap = _build_feature_map("rff", x, build_kernel(KERNEL, grid, GammaPrior(2.0, 20.0)), 64,
                              None, np.random.default_rng(1))
    backend = StatisticsBackend(AtomMaps.repeat(fmap, grid.size), KERNEL, grid, x, y)
    assert np.all(backend.rotated_projection**2
                  <= backend.eigenvalues * backend.y_norm2 * (1 + 1e-9) + 1e-300)
    samples = sample_posterior(fmap, KERNEL, x, y, theta1_grid=grid, tau_prior=(1.0, 10.0),
                               theta2_prior=(2.0, 20.0), n_iter=3000, burn_in=0,
                               collapsed=True, rng=0)
    assert np.max(1 / samples.tau) < 2 * np.mean(y**2), np.max(1 / samples.tau)


def test_fixed_basis_statistics_from_one_pass_equal_a_pass_per_grid_point():
    """For GLF the per-grid-point statistics are a rescaling of Phi^T Phi (one pass). The
    eigenvalues dropped as rounding (<= m eps lam_max) and their z_l (z_l^2 <= lam_l y^T y)
    bound the reconstruction errors by m tol and sqrt(m tol y^T y), tol = m eps lam_max."""
    from scalegp.data.base import ArraySource
    from scalegp.engine.statistics import accumulate_statistics
    fmap, X, y = tiny_problem(n=40, m=12, approximation="glf")
    backend = StatisticsBackend(AtomMaps.repeat(fmap, GRID.size), KERNEL, GRID, X, y)
    m = fmap.n_components
    for h, theta1 in enumerate(GRID):
        stats_h = accumulate_statistics(fmap.at(unit_kernel(KERNEL, theta1)), ArraySource(X, y))
        U, lam = backend.eigenvectors[h], backend.eigenvalues[h]
        tol = m * np.finfo(float).eps * lam.max()
        np.testing.assert_allclose((U * lam) @ U.T, stats_h.gram, rtol=0,
                                   atol=m * tol + 1e-12)
        np.testing.assert_allclose(U @ backend.rotated_projection[h], stats_h.projection,
                                   rtol=0, atol=math.sqrt(m * tol * stats_h.y_norm2) + 1e-12)


@pytest.mark.parametrize("approximation", ["rff", "orf", "qmc", "glf"])
def test_kernel_variance_is_a_rescaling_of_the_features(approximation):
    """psi at variance 1 / theta2 is psi_1 / sqrt(theta2): what makes theta2 a rescaling."""
    fmap, X, _ = tiny_problem(n=20, m=8, approximation=approximation)
    base = unit_kernel(KERNEL, 7.0)
    scaled = base.with_params(variance=0.25)
    np.testing.assert_allclose(fmap.at(scaled).features(X), 0.5 * fmap.at(base).features(X),
                               rtol=1e-13, atol=1e-15)


def coverage_run(seed):
    """Data from the model with known (tau, theta2, theta1); 95 % intervals of each."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (150, 1))
    grid = 1 / (2 * np.geomspace(0.05, 0.8, 16) ** 2)
    truth = {"tau": 50.0, "theta2": 1.0, "theta1": grid[7]}
    build_kernel = KERNEL.with_params(length_scale=0.2, length_scale_bounds=(0.05, 0.8))
    fmap = _build_feature_map("rff", X, build_kernel, 16, None, np.random.default_rng(seed + 1))
    Psi = fmap.at(unit_kernel(KERNEL, truth["theta1"])).features(X)
    w = rng.standard_normal(Psi.shape[1]) / math.sqrt(truth["theta2"])
    y = Psi @ w + rng.standard_normal(X.shape[0]) / math.sqrt(truth["tau"])
    samples = sample_posterior(fmap, KERNEL, X, y, theta1_grid=grid, tau_prior=(1.0, 0.02),
                               theta2_prior=(1.0, 1.0), n_iter=1500, burn_in=300,
                               collapsed=True, rng=seed + 2)
    covered = {}
    for name, value in truth.items():
        lo, hi = np.quantile(getattr(samples, name), [0.025, 0.975])
        covered[name] = lo <= value <= hi
    return covered


def test_posterior_intervals_cover_known_hyperparameters():
    """95 % intervals of tau, theta2 and theta1 cover the truth in >= 18 of 20 data sets."""
    runs = [coverage_run(seed) for seed in range(20)]
    for name in ("tau", "theta2", "theta1"):
        assert sum(run[name] for run in runs) >= 18, (name, [run[name] for run in runs])


# ---------------------------------------------------------------- ESS
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9])
def test_ess_of_ar1_chains(phi):
    """AR(1) x_t = phi x_{t-1} + e_t has tau_int = (1 + phi) / (1 - phi). Over 200 chains of
    4,000 the mean of ESS / (n / tau_int) is within 4 measured standard errors of 1, plus the
    bias of the initial positive sequence: it stops after about one pair sum of pure noise
    past the correlated lags, of standard deviation at most sqrt(4 tau_int / n) relative to
    gamma_0 (Bartlett), which adds 2 E[max(0, Gamma)] = 2 sqrt(4 tau_int / n) / sqrt(2 pi) to
    tau_int: a relative ESS bias of that over tau_int."""
    rng = np.random.default_rng(42)
    n, chains = 4000, 200
    true_ess = n * (1 - phi) / (1 + phi)
    ratios = []
    for _ in range(chains):
        e = rng.standard_normal(n)
        x = np.empty(n)
        x[0] = e[0] / math.sqrt(1 - phi**2)
        for t in range(1, n):
            x[t] = phi * x[t - 1] + e[t]
        ratios.append(effective_sample_size(x) / true_ess)
    ratios = np.array(ratios)
    se = ratios.std(ddof=1) / math.sqrt(chains)
    tau_int = (1 + phi) / (1 - phi)
    bias = 2 * math.sqrt(4 * tau_int / n) / math.sqrt(2 * math.pi) / tau_int
    assert abs(ratios.mean() - 1) < 4 * se + bias, (ratios.mean(), se, bias)


def test_ess_of_a_constant_chain_is_nan_and_short_chains_are_refused():
    assert math.isnan(effective_sample_size(np.ones(50)))
    with pytest.raises(ValueError, match="at least 4"):
        effective_sample_size([1.0, 2.0, 3.0])


# ---------------------------------------------------------------- predictions
def reference_draws(samples, fmap, X_test):
    """(F, V) of every kept draw written out from the draw's own parameters, independently of
    ``latent_draws``: the atom from the drawn theta1 value, F_s = Psi_h(x) w_s and, with the
    diagonal, V_s = (k_h(x, x) - |Psi_h(x)|^2) / theta2_s for the unit kernel (k_h(x, x) = 1),
    plus the noise 1 / tau_s."""
    F = np.empty((X_test.shape[0], samples.n_draws))
    V = np.empty_like(F)
    for s in range(samples.n_draws):
        h = int(np.flatnonzero(GRID == samples.theta1[s])[0])
        Psi = dense_features(fmap, X_test, h)
        F[:, s] = Psi @ samples.weights[s]
        V[:, s] = (1 - np.sum(Psi**2, axis=1)) / samples.theta2[s] + 1 / samples.tau[s]
    return F, V


def test_predictive_mixture_mean_variance_and_quantiles():
    """mean = avg F, var = avg V + var F (Eq. G13); the interval ends have mixture CDF
    0.025 / 0.975 (Eq. G14); without spread they are the empirical quantiles. F and V are
    rebuilt from the draws' parameters (:func:`reference_draws`), not taken from the sampler."""
    fmap, X, y = tiny_problem(n=30)
    samples = sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, n_iter=300, burn_in=50,
                               collapsed=True, diag_correction=True, rng=3)
    X_test = np.linspace(-0.2, 1.2, 7)[:, None]
    F, V = reference_draws(samples, fmap, X_test)
    assert np.unique(samples.theta1).size > 1 and np.all(V > 1 / samples.tau)
    mean, var = samples.predict(X_test, return_var=True, include_noise=True)
    np.testing.assert_allclose(mean, F.mean(axis=1), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(var, V.mean(axis=1) + F.var(axis=1), rtol=1e-12)
    lo, hi = samples.interval(X_test, 0.95, include_noise=True)
    for end, p in ((lo, 0.025), (hi, 0.975)):
        cdf = stats.norm.cdf((end[:, None] - F) / np.sqrt(V)).mean(axis=1)
        np.testing.assert_allclose(cdf, p, atol=1e-10)
    np.testing.assert_allclose(samples.prediction_effective_sample_sizes(X_test),
                               [effective_sample_size(row) for row in F], rtol=1e-9)
    F0 = np.random.default_rng(0).standard_normal((3, 101))
    np.testing.assert_array_equal(mixture_quantile(F0, np.zeros_like(F0), 0.1),
                                  np.quantile(F0, 0.1, axis=1))


def test_predictions_in_blocks_equal_one_block(monkeypatch):
    """Test rows are processed in blocks of PREDICTION_BYTES; the blocks change nothing."""
    import scalegp.inference.gibbs as gibbs_module
    fmap, X, y = tiny_problem(n=30)
    samples = sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, n_iter=100, burn_in=20,
                               collapsed=True, diag_correction=True, rng=4)
    X_test = np.linspace(-0.2, 1.2, 11)[:, None]
    whole = (*samples.predict(X_test, return_var=True), *samples.interval(X_test))
    monkeypatch.setattr(gibbs_module, "PREDICTION_BYTES", 3 * 16 * samples.n_draws)
    blocks = (*samples.predict(X_test, return_var=True), *samples.interval(X_test))
    for a, b in zip(whole, blocks):
        np.testing.assert_array_equal(a, b)


def test_length_scale_mapping():
    """theta1 = 1 / (2 l^2): the unit kernel at theta1 is exp(-theta1 |x - x'|^2)."""
    x, z = np.array([[0.3]]), np.array([[1.1]])
    assert unit_kernel(KERNEL, 2.5)(x, z)[0, 0] == pytest.approx(math.exp(-2.5 * 0.64),
                                                                  rel=1e-14)
    assert length_scale_of(0.5) == pytest.approx(1.0)


# ---------------------------------------------------------------- input checks
@pytest.mark.parametrize("grid, message", [
    ([], "empty"), ([0.0, 1.0], "exclude 0"), ([-1.0, 1.0], "exclude 0"),
    ([1.0, 1.0], "repeated"), ([1.0, np.inf], "finite"), ([[1.0]], "one-dimensional")])
def test_bad_grids_are_refused(grid, message):
    with pytest.raises(ValueError, match=message):
        check_theta1_grid(grid)


@pytest.mark.parametrize("prior, message", [
    ((0.0, 1.0), "shape > 0"), ((1.0, -2.0), "rate > 0"), ((1.0, np.nan), "rate > 0"),
    ((1.0,), "pair"), ("ab", "tau_prior")])
def test_bad_priors_are_refused(prior, message):
    fmap, X, y = tiny_problem()
    with pytest.raises(ValueError, match=message):
        sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, tau_prior=prior, n_iter=5,
                         burn_in=0)


def test_bad_chain_settings_and_kernels_are_refused():
    fmap, X, y = tiny_problem()
    with pytest.raises(ValueError, match="burn_in must be below n_iter"):
        sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, n_iter=10, burn_in=10)
    with pytest.raises(ValueError, match="thin"):
        sample_posterior(fmap, KERNEL, X, y, theta1_grid=GRID, n_iter=10, burn_in=0, thin=0)
    ard = KERNEL.with_params(length_scale=[1.0, 2.0])
    X2 = np.random.default_rng(0).uniform(size=(6, 2))
    fmap2 = _build_feature_map("rff", X2, ard, 4, None, np.random.default_rng(0))
    with pytest.raises(ValueError, match="isotropic"):
        sample_posterior(fmap2, ard, X2, y, theta1_grid=GRID, n_iter=10, burn_in=0)
