"""Local (centred) models (scalegp.local.centered, docs/local-models.md): test-point and cluster centring.

Shift-invariant Fourier maps are unchanged by centring (their features of x - c are a rotation
of those of x). The non-trivial behaviour is tested with a map defined here, the truncated
Taylor (Maclaurin) features of the 1-D Gaussian kernel,

    psi_n(x) = s^{1/2} exp(-u^2 / 2) u^n / sqrt(n!),  u = x / l,  n = 0..p,

which is accurate near the origin only, with psi(0) = s^{1/2} e_0: its local kernel is exact at
the centre, and its vanilla (uncentred) predictions collapse far from the data (Theorem 3.1).
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV

import scalegp as sg
from tests.conftest import low_rank
from scalegp import features
from scalegp import engine
from scalegp import local
from scalegp._validation import check_matrix
from scalegp.local.clustering import farthest_point_centres, nearest_centres
from scalegp.data.base import ArraySource
from scalegp.errors import InsufficientMemoryError
from scalegp.features.base import FeatureMap, _REGISTRY
from scalegp.engine.hyperparameters import Hyperparameters

NAME = "test-taylor-gaussian"


def _define_map():
    @dataclass(frozen=True, eq=False)
    class TaylorGaussianFeatures(FeatureMap, name=NAME):
        degree: int

        description = "test map: truncated Taylor features of the 1-D Gaussian kernel"

        @classmethod
        def supports(cls, kernel):
            return isinstance(kernel, sg.Gaussian)

        @classmethod
        def build(cls, X, kernel, n_components, rng=None, **options):
            X = check_matrix(X, "X")
            if X.shape[1] != 1:
                raise ValueError("the test map is 1-D")
            return cls(n_dims=1, degree=int(n_components) - 1)

        @property
        def n_components(self):
            return self.degree + 1

        def _terms(self, X, kernel):
            X = self.check_input(X, kernel)
            u = X[:, 0].astype(np.float64) / kernel.length_scale[0]
            n = np.arange(self.degree + 1)
            norm = np.sqrt([float(math.factorial(k)) for k in n])
            psi = (math.sqrt(kernel.variance) * np.exp(-0.5 * u**2)[:, None]
                   * u[:, None] ** n / norm)
            return u, n, psi

        def features(self, X, kernel):
            return self._terms(X, kernel)[2]

        def features_grad(self, X, kernel):
            # d u / d log l = -u: d psi_n / d log l = psi_n (u^2 - n); d psi / d log s = psi / 2
            u, n, psi = self._terms(X, kernel)
            return np.stack([psi * (u[:, None] ** 2 - n), 0.5 * psi])

    return TaylorGaussianFeatures


@pytest.fixture
def taylor():
    cls = _define_map()
    yield cls
    _REGISTRY.pop(NAME)


def sinc_data(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    return X, np.sinc(X[:, 0]) + 0.05 * rng.standard_normal(n)


def data_2d(n=80, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X).sum(axis=1) + 0.1 * rng.standard_normal(n)


def context(feature_map, X, y, **options):
    return local.LocalContext(feature_map, ArraySource(X, y), **{"threshold": 1.0, **options})


# ----------------------------------------------------------------------------- shift invariance


@pytest.mark.parametrize("name", ["rff", "orf", "qmc", "glf"])
def test_centring_changes_nothing_for_shift_invariant_fourier_maps(name):
    """cos/sin pairs of x - c are a block rotation of those of x, so the local GP is the
    global one: both kinds predict as the global model (measured: 3e-14)."""
    X, y = data_2d()
    kernel = sg.Gaussian(length_scale=[0.5, 0.7])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # glf's resolution warning at the box's ends
        fmap = features.get(name).build(X - X.mean(axis=0), kernel, 64,
                                        np.random.default_rng(1))
    Xs = np.random.default_rng(2).uniform(-3, 3, size=(15, 2))
    mean, var = engine.Posterior.fit(fmap, kernel, 0.05, X, y).predict(Xs, return_var=True)
    clusters = local.ClusterLocalModel.fit(context(fmap, X, y), kernel, 0.05)
    assert clusters.n_centres > 5
    for model in (clusters, local.TestPointLocalModel.fit(context(fmap, X, y), kernel, 0.05)):
        local_mean, local_var = model.predict(Xs, return_var=True)
        np.testing.assert_allclose(local_mean, mean, rtol=0, atol=1e-10)
        np.testing.assert_allclose(local_var, var, rtol=0, atol=1e-10)
    assert clusters.log_marginal_likelihood == pytest.approx(
        engine.Posterior.fit(fmap, kernel, 0.05, X, y).log_marginal_likelihood, abs=1e-10)


# ----------------------------------------------------------------------------- the local kernel


def test_local_kernel_is_exact_at_the_centre(taylor):
    """k_c(c, y) = psi(0)^T psi(y - c) = s exp(-|y - c|^2 / (2 l^2)) = k(c, y) for every y,
    while the truncated kernel itself is far off away from the origin."""
    kernel = sg.Gaussian(length_scale=0.4, variance=1.7)
    fmap = taylor.build(np.zeros((1, 1)), kernel, 6)
    Y = np.linspace(-5, 5, 41)[:, None]
    for centre in (np.array([0.0]), np.array([2.5]), np.array([-4.0])):
        np.testing.assert_allclose(local.local_kernel(fmap, kernel, centre[None], Y, centre),
                                   kernel(centre[None], Y), rtol=0, atol=1e-12)
    vanilla = fmap.features(np.array([[2.5]]), kernel) @ fmap.features(Y, kernel).T
    assert np.max(np.abs(vanilla - kernel(np.array([[2.5]]), Y))) > 0.5


def test_far_from_the_data_local_predictions_return_to_the_prior(taylor):
    """Theorem 3.1: the vanilla map (centred at the training mean) has psi(x*) -> 0 far away,
    so its mean and variance collapse to 0; the local ones return to the prior N(0, s)."""
    X, y = sinc_data()
    kernel = sg.Gaussian(length_scale=0.5, variance=1.3)
    fmap = taylor.build(X, kernel, 10)
    far = np.array([[12.0], [-15.0]])                 # over 18 length scales from the data
    mean, var = local.TestPointLocalModel.fit(context(fmap, X, y), kernel, 0.01).predict(
        far, return_var=True)
    # the training features psi(x - x*) are below e^{-18^2/2} 18^p: G ~ 0, M ~ s2 I
    np.testing.assert_allclose(mean, 0.0, atol=1e-12)
    np.testing.assert_allclose(var, kernel.variance, rtol=1e-12)
    vanilla = engine.Posterior.fit(fmap, kernel, 0.01, X - X.mean(axis=0), y)
    v_mean, v_var = vanilla.predict(far - X.mean(axis=0), return_var=True)
    assert np.all(np.abs(v_mean) < 1e-12) and np.all(v_var < 1e-12)


def test_test_point_centring_equals_a_dense_gp_per_test_point(taylor):
    """For each x*, the GP with kernel psi(x - x*)^T psi(y - x*) + s2 I on every training row,
    computed densely (N x N), predicts what the blocked, batched local model does (1e-10)."""
    X, y = sinc_data(50)
    kernel = sg.Gaussian(length_scale=0.6, variance=0.9)
    s2 = 0.02
    fmap = taylor.build(X, kernel, 8)
    Xs = np.linspace(-4, 4, 13)[:, None]
    model = local.TestPointLocalModel.fit(context(fmap, X, y, chunk_size=7), kernel, s2)
    mean, var = model.predict(Xs, return_var=True)
    for i, x in enumerate(Xs):
        Psi = fmap.features(X - x, kernel)
        psi0 = fmap.features(np.zeros((1, 1)), kernel)[0]
        K = Psi @ Psi.T + s2 * np.eye(len(X))
        k_star = Psi @ psi0
        assert mean[i] == pytest.approx(k_star @ np.linalg.solve(K, y), abs=1e-10)
        assert var[i] == pytest.approx(psi0 @ psi0 - k_star @ np.linalg.solve(K, k_star),
                                       abs=1e-10)


def test_one_huge_cluster_is_the_vanilla_map_on_mean_centred_data(taylor):
    X, y = sinc_data()
    kernel = sg.Gaussian(length_scale=0.7)
    fmap = taylor.build(X, kernel, 7)
    model = local.ClusterLocalModel.fit(context(fmap, X, y, threshold=1e6), kernel, 0.05)
    np.testing.assert_array_equal(model.centres, X.mean(axis=0)[None])
    vanilla = engine.Posterior.fit(fmap, kernel, 0.05, X - X.mean(axis=0), y)
    Xs = np.linspace(-4, 4, 9)[:, None]
    for got, want in zip(model.predict(Xs, return_var=True),
                         vanilla.predict(Xs - X.mean(axis=0), return_var=True)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    assert model.log_marginal_likelihood == pytest.approx(vanilla.log_marginal_likelihood,
                                                          rel=1e-12)


def test_local_models_beat_vanilla_with_a_short_length_scale(taylor):
    """The data span 20 length scales; the vanilla map (centred at the mean) is accurate near
    the mean only, the local ones everywhere (the exact GP is the reference). Measured max
    errors: vanilla 0.177, clusters 0.058, test points 0.037 (p = 10)."""
    X, y = sinc_data(120)
    kernel = sg.Gaussian(length_scale=0.3)
    fmap = taylor.build(X, kernel, 11)
    Xs = np.linspace(-2.8, 2.8, 50)[:, None]
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.01, optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    reference = exact.predict(Xs)
    vanilla = engine.Posterior.fit(fmap, kernel, 0.01, X - X.mean(axis=0), y)
    vanilla_error = np.max(np.abs(vanilla.predict(Xs - X.mean(axis=0)) - reference))
    for model in (local.ClusterLocalModel.fit(context(fmap, X, y, threshold=0.5), kernel, 0.01),
                  local.TestPointLocalModel.fit(context(fmap, X, y), kernel, 0.01)):
        assert np.max(np.abs(model.predict(Xs) - reference)) < 0.5 * vanilla_error


# ----------------------------------------------------------------------------- one pass


def test_one_pass_equals_a_pass_per_centre():
    X, y = data_2d(90)
    kernel = sg.Matern(nu=1.5, length_scale=[0.8, 1.2])
    fmap = features.get("rff").build(X, kernel, 24, np.random.default_rng(0))
    at_map = fmap.at(kernel)
    centres = X[[0, 5, 17, 40, 63]]
    together = local.centred_statistics((at_map,) * len(centres), ArraySource(X, y), centres,
                                        chunk_size=16)
    for centre, statistics in zip(centres, together):
        alone = engine.accumulate_statistics(at_map, ArraySource(X - centre, y), chunk_size=16)
        np.testing.assert_allclose(statistics.gram, alone.gram, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(statistics.projection, alone.projection, rtol=1e-12,
                                   atol=1e-13)
        assert statistics.y_norm2 == pytest.approx(alone.y_norm2, rel=1e-12)
        assert statistics.n_samples == alone.n_samples == len(y)


def test_the_pass_reads_each_chunk_once():
    X, y = data_2d(100)
    kernel = sg.Gaussian(length_scale=[0.8, 1.2])
    fmap = features.get("rff").build(X, kernel, 16, np.random.default_rng(0))
    reads = []

    class CountingSource(ArraySource):
        def chunks(self, rows):
            for chunk in super().chunks(rows):
                reads.append(chunk.start)
                yield chunk

    local.centred_statistics((fmap.at(kernel),) * 7, CountingSource(X, y), X[:7],
                             chunk_size=30)
    assert reads == [0, 30, 60, 90]


# ----------------------------------------------------------------------------- clustering


def brute_force_centres(X, threshold, length_scale):
    """Algorithm 1 as the authors' code runs it: every round recomputes all distances,
    O(N N_C^2)."""
    U = X / length_scale
    centres = [U.mean(axis=0)]
    while True:
        distance = cdist(U, np.array(centres)).min(axis=1)
        if distance.max() <= threshold:
            return np.array(centres) * length_scale
        centres.append(U[np.argmax(distance)])


def test_farthest_point_clustering_equals_the_brute_force_version():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3)) * [1.0, 3.0, 0.5]
    scale = np.array([0.5, 2.0, 0.3])          # ARD: distances in x / l
    centres = farthest_point_centres(X, 1.5, length_scale=scale)
    np.testing.assert_allclose(centres, brute_force_centres(X, 1.5, scale), rtol=1e-14)
    assert 10 < len(centres) < 300
    radius = cdist(X / scale, centres / scale).min(axis=1).max()
    assert radius <= 1.5
    np.testing.assert_array_equal(centres[0], X.mean(axis=0))


def test_the_cap_on_centres_warns():
    X = np.random.default_rng(0).uniform(size=(200, 2))
    with pytest.warns(UserWarning, match=r"stopped at max_centres = 4 centres with a covering "
                                         r"radius of .* length scales, above the threshold"):
        centres = farthest_point_centres(X, 0.01, length_scale=1.0, max_centres=4)
    assert centres.shape == (4, 2)


def test_routing_is_to_the_nearest_centre_in_length_scales():
    rng = np.random.default_rng(1)
    X, centres = rng.normal(size=(500, 2)), rng.normal(size=(30, 2))
    scale = np.array([0.2, 3.0])
    np.testing.assert_array_equal(nearest_centres(X, centres, length_scale=scale),
                                  np.argmin(cdist(X / scale, centres / scale), axis=1))
    # in x units the nearest centre differs for many rows: the scaling matters
    assert np.mean(np.argmin(cdist(X, centres), axis=1)
                   != nearest_centres(X, centres, length_scale=scale)) > 0.1


@pytest.mark.parametrize("bad, match", [
    (dict(threshold=0.0), r"threshold must be a finite number > 0"),
    (dict(first="median"), r"first must be 'mean' or 'point'"),
    (dict(length_scale=[1.0, 2.0, 3.0]), r"length_scale must have 1 or 2 entries"),
])
def test_clustering_validates_its_parameters(bad, match):
    X = np.zeros((5, 2))
    with pytest.raises(ValueError, match=match):
        farthest_point_centres(X, **{"threshold": 1.0, "length_scale": 1.0, **bad})


# ----------------------------------------------------------------------------- lazy, memory


def test_lazy_and_eager_predict_identically():
    X, y = data_2d(120)
    kernel = sg.Matern(nu=2.5, length_scale=[0.4, 0.6])
    fmap = features.get("rff").build(X, kernel, 32, np.random.default_rng(0))
    eager = local.ClusterLocalModel.fit(context(fmap, X, y), kernel, 0.03)
    lazy = local.ClusterLocalModel.fit(context(fmap, X, y, lazy=True), kernel, 0.03)
    assert lazy.memory_bytes == 0 and math.isnan(lazy.log_marginal_likelihood)
    Xs = np.random.default_rng(5).uniform(-0.5, 0.5, size=(10, 2))
    first = lazy.predict(Xs, return_var=True)
    needed = np.unique(lazy.route(Xs)).size
    assert len(lazy.systems) == needed < eager.n_centres
    assert lazy.memory_bytes == needed * 8 * (32 * 32 + 32)
    for got, want in zip(first, eager.predict(Xs, return_var=True)):
        np.testing.assert_array_equal(got, want)
    Xs_all = np.random.default_rng(6).uniform(-2, 2, size=(40, 2))
    for got, want in zip(lazy.predict(Xs_all, return_var=True),
                         eager.predict(Xs_all, return_var=True)):
        np.testing.assert_array_equal(got, want)


def test_memory_is_reported_and_refused_when_it_does_not_fit(monkeypatch):
    X, y = data_2d(60)
    kernel = sg.Gaussian(length_scale=[0.5, 0.5])
    fmap = features.get("rff").build(X, kernel, 16, np.random.default_rng(0))
    model = local.ClusterLocalModel.fit(context(fmap, X, y), kernel, 0.1)
    assert model.memory_bytes == model.n_centres * 8 * (16 * 16 + 16)
    monkeypatch.setattr("scalegp.local.centered.available_bytes", lambda: 1000)
    with pytest.raises(InsufficientMemoryError, match=rf"needs about .* for {model.n_centres} "
                                                      r"centres of 16 x 16 systems.*Clusters\(lazy=True\)"):
        local.ClusterLocalModel.fit(context(fmap, X, y), kernel, 0.1)
    # a lazy fit holds no system
    local.ClusterLocalModel.fit(context(fmap, X, y, lazy=True), kernel, 0.1)


# ----------------------------------------------------------------------------- learning


@pytest.mark.parametrize("name", ["taylor", "rff", "glf"])
def test_learning_objective_gradient_matches_finite_differences(name, taylor):
    """The mean over centres of log p_c and its analytic gradient: streaming passes (taylor,
    rff) and the fixed-basis path (glf, no pass per evaluation)."""
    if name == "taylor":
        X, y = sinc_data(40)
        kernel = sg.Gaussian(length_scale=0.6, variance=1.2)
        fmap = taylor.build(X, kernel, 7)
    else:
        X, y = data_2d(50)
        kernel = sg.Gaussian(length_scale=[0.6, 0.9], variance=1.2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fmap = features.get(name).build(X - X.mean(axis=0), kernel, 32,
                                            np.random.default_rng(0))
    hyperparameters = Hyperparameters(kernel, 0.05, (1e-4, 1.0))
    objective = local.ClusterLocalModel.learning_objective(
        context(fmap, X, y, threshold=0.8), hyperparameters)
    theta = hyperparameters.theta + 0.1
    value, gradient = objective(theta)
    assert objective.centres.shape[0] > 2
    assert (objective.basis_statistics is not None) == (name == "glf")
    assert value == pytest.approx(np.mean([
        engine.Posterior.fit(fmap, *hyperparameters.decode(theta), X - c, y).log_marginal_likelihood
        for c in objective.centres]), rel=1e-12)
    h = 1e-5
    numeric = [(objective.value(theta + h * e) - objective.value(theta - h * e)) / (2 * h)
               for e in np.eye(theta.size)]
    # central differences: O(h^2) truncation plus O(eps |value| / h) rounding, ~1e-9 here
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-6)


def test_reoptimize_builds_one_map_per_centre_from_its_own_rows():
    X, y = data_2d(80)
    kernel = sg.Gaussian(length_scale=[0.7, 0.7])
    fmap = features.get("rff").build(X, kernel, 256, np.random.default_rng(0))
    calls = []

    def build_map(rows, centre, rng):
        calls.append((rows, centre))
        return features.get("rff").build(X[rows] - centre, kernel, 256, rng)

    ctx = context(fmap, X, y, reoptimize=True, build_map=build_map, map_seed=7)
    model = local.ClusterLocalModel.fit(ctx, kernel, 0.05)
    route = nearest_centres(X, model.centres, length_scale=kernel.length_scale)
    assert len(calls) == model.n_centres == len(model.maps)
    for j, (rows, centre) in enumerate(calls):
        np.testing.assert_array_equal(rows, np.flatnonzero(route == j))
        np.testing.assert_array_equal(centre, model.centres[j])
    omegas = [m.omega for m in model.maps]
    assert not np.array_equal(omegas[0], omegas[1])            # independent streams
    # each centre's own draw is as good an approximation (measured max error 0.048)
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.05, optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    assert np.max(np.abs(model.predict(X[:20]) - exact.predict(X[:20]))) < 0.1
    # the same seed builds the same maps again (what a loaded model relies on)
    again = ctx.maps(model.centres, kernel)
    assert all(np.array_equal(a.omega, b.omega) for a, b in zip(model.maps, again))


# ----------------------------------------------------------------------------- estimator


def estimator(**params):
    """The low-rank estimator with m = 16 and, for the centred kinds, threshold 1 (flat
    parameters given to their configuration objects: tests/conftest.py ``low_rank``)."""
    params = {"n_components": 16, "random_state": 0, **params}
    if params.get("local") in ("clusters", "test-points"):
        params.setdefault("local_threshold", 1.0)
    return low_rank(**params)


def test_estimator_clusters_learn_predict_and_report():
    X, y = data_2d(100)
    model = estimator(local="clusters", normalize_y=True, n_components=64).fit(X, y)
    assert model.local_model_ is model.posterior_
    np.testing.assert_allclose(
        model.local_model_.centres,
        farthest_point_centres(X, 1.0, length_scale=model.kernel_.length_scale))
    assert model.n_centres_ == model.local_model_.n_centres > 1
    assert model.local_memory_bytes_ == model.n_centres_ * 8 * (64 * 64 + 64)
    mean, std = model.predict(X[:10], return_std=True)
    # measured 0.081 (noise std 0.1)
    assert np.sqrt(np.mean((mean - y[:10]) ** 2)) < 0.15 and np.all(std > 0)
    assert model.optimization_result_.log_marginal_likelihood > -200
    with pytest.raises(NotImplementedError, match="no joint posterior"):
        model.sample_y(X[:3])
    with pytest.raises(NotImplementedError, match="no joint predictive covariance"):
        model.predict(X[:3], return_cov=True)


def test_estimator_log_marginal_likelihood_is_the_mean_over_centres():
    X, y = data_2d(60)
    model = estimator(local="clusters", optimize=False).fit(X, y)
    at = model.feature_map_
    want = np.mean([engine.Posterior.fit(at, model.kernel_, model.noise_variance_, X - c, y)
                    .log_marginal_likelihood for c in model.local_model_.centres])
    assert model.log_marginal_likelihood_value_ == pytest.approx(want, rel=1e-12)
    theta = np.append(model.kernel_.theta, math.log(model.noise_variance_))
    value, gradient = model.log_marginal_likelihood(theta, eval_gradient=True)
    assert value == pytest.approx(want, rel=1e-12) and gradient.shape == theta.shape


def test_estimator_test_points_learn_on_the_cluster_objective():
    X, y = data_2d(60)
    model = estimator(local="test-points").fit(X, y)
    clusters = estimator(local="clusters").fit(X, y)
    assert model.kernel_ == clusters.kernel_                   # the same objective and start
    assert math.isnan(model.log_marginal_likelihood_value_) and model.n_centres_ is None
    # rff is shift invariant: the two kinds predict alike
    np.testing.assert_allclose(model.predict(X[:5]), clusters.predict(X[:5]), atol=1e-10)


@pytest.mark.parametrize("params, error, match", [
    (dict(local="bogus"), ValueError,
     r"local must be None, one of \['clusters', 'neighbors', 'test-points'\]"),
    (dict(local=sg.Clusters(threshold=0.0)), ValueError, r"threshold must be a number > 0"),
    (dict(local="clusters", solver="qr", approximation="glf"), NotImplementedError,
     r"solver='cholesky'"),
    (dict(local="clusters", approximation="sfs", optimize=False), NotImplementedError,
     r"unsigned map"),
])
def test_estimator_validates_the_local_parameters(params, error, match):
    X, y = data_2d(30)
    with pytest.raises(error, match=match):
        estimator(**params).fit(X, y)


def test_an_option_of_another_local_kind_cannot_be_given():
    """Laziness and per-centre maps are options of Clusters only: the other kinds have no
    such option (before the configuration objects, local_lazy=True with test points was
    refused at fit, local_neighbors with clusters silently ignored)."""
    with pytest.raises(TypeError, match=r"TestPoints \(test-points\) has no option lazy"):
        estimator(local="test-points", local_lazy=True)
    with pytest.raises(TypeError, match="takes no options"):
        estimator(local_reoptimize=True)
    with pytest.raises(TypeError, match=r"Clusters \(clusters\) has no option n_neighbors"):
        estimator(local="clusters", local_neighbors=10)


def test_estimator_refuses_known_noise_variances_locally():
    X, y = data_2d(30)
    with pytest.raises(NotImplementedError, match="takes one noise variance for all rows"):
        estimator(local="clusters").fit(X, y, sample_noise_variance=np.full(30, 0.1))


def test_clone_and_grid_search_over_local_settings():
    X, y = data_2d(80)
    base = estimator(local="clusters", optimize=False, noise_variance=0.05,
                     kernel=sg.Gaussian(length_scale=0.5))
    copy = clone(base)
    assert copy.get_params()["local"] == sg.Clusters(threshold=1.0)
    assert copy.get_params()["local__threshold"] == 1.0
    search = GridSearchCV(base, {"local__threshold": [0.5, 3.0], "optimize": [False]},
                          cv=3).fit(X, y)
    assert set(search.cv_results_["param_local__threshold"]) == {0.5, 3.0}
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_estimator_runs_a_registered_map_locally(taylor):
    """Through the estimator, test-point centring with the Taylor map predicts as the exact GP
    where the series has converged on every shifted pair (|x - x*| / l <= 3, p = 29:
    measured 3.5e-11)."""
    X, y = sinc_data(40)
    kernel = sg.Gaussian(length_scale=2.0)
    exact = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.05, optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    model = estimator(approximation=NAME, n_components=30, kernel=kernel, noise_variance=0.05,
                      optimize=False, local="test-points").fit(X, y)
    Xs = np.array([[-2.5], [0.3], [2.9]])
    for got, want in zip(model.predict(Xs, return_std=True), exact.predict(Xs, return_std=True)):
        np.testing.assert_allclose(got, want, atol=1e-9)


# ----------------------------------------------------------------------------- model files, CLI


@pytest.mark.parametrize("params", [dict(local="clusters"), dict(local="test-points"),
                                    dict(local="clusters", local_lazy=True)],
                         ids=["clusters", "test-points", "lazy"])
def test_local_models_save_and_load_to_identical_predictions(params, tmp_path):
    X, y = data_2d(70)
    model = estimator(normalize_y=True, normalize_X=True, optimize=False, **params).fit(X, y)
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    assert loaded.local == model.local and loaded.n_centres_ == model.n_centres_
    Xs = np.random.default_rng(4).uniform(-2, 2, size=(12, 2))
    for got, want in zip(loaded.predict(Xs, return_std=True), model.predict(Xs, return_std=True)):
        np.testing.assert_array_equal(got, want)
    with np.load(tmp_path / "m.npz") as npz:
        stored = {key for key in npz.files if key.startswith("local.")}
    want = {"clusters": {"local.centres", "local.beta", "local.cholesky_factor"},
            "test-points": {"local.X_train", "local.y_train"},
            "lazy": {"local.X_train", "local.y_train"}}
    assert stored == want["lazy" if params.get("local_lazy") else params["local"]]


@pytest.mark.parametrize("approximation, lazy", [("rff", False), ("maclaurin", False),
                                                 ("rff", True)])
def test_a_reoptimized_model_saves_and_loads_to_identical_predictions(approximation, lazy,
                                                                      tmp_path):
    """One map per centre: the file stores the rows and the maps' seed, and the loaded model
    rebuilds the same maps (Maclaurin: each centre's own allocation too)."""
    X, y = data_2d(90)
    model = estimator(approximation=approximation, local="clusters", local_reoptimize=True,
                      local_lazy=lazy, normalize_X=True, normalize_y=True,
                      n_components=24).fit(X, y)
    sg.save(model, tmp_path / "m.npz")
    loaded = sg.load(tmp_path / "m.npz")
    Xs = np.random.default_rng(5).uniform(-2, 2, size=(15, 2))
    for got, want in zip(loaded.predict(Xs, return_std=True), model.predict(Xs, return_std=True)):
        np.testing.assert_array_equal(got, want)
    assert loaded.local_model_.reoptimized and len(loaded.local_model_.maps) == model.n_centres_
    with np.load(tmp_path / "m.npz") as npz:
        stored = {key for key in npz.files if key.startswith("local.")}
    assert {"local.X_train", "local.y_train"} <= stored


def test_a_model_file_claiming_reoptimized_maps_without_rows_is_refused(tmp_path):
    """A re-optimized model rebuilds its maps from its rows: a file that says it is one but
    stores no rows is refused by name; an older file without the key loads as before."""
    from tests.test_io import read_raw, write_raw
    X, y = data_2d(50)
    model = estimator(local="clusters", optimize=False).fit(X, y)
    sg.save(model, tmp_path / "m.npz")
    arrays, metadata = read_raw(tmp_path / "m.npz")
    assert metadata["local"]["reoptimized"] is False
    metadata["local"]["reoptimized"] = True
    write_raw(tmp_path / "crafted.npz", arrays, metadata)
    with pytest.raises(ValueError, match="is missing the array 'local.X_train'"):
        sg.load(tmp_path / "crafted.npz")
    del metadata["local"]["reoptimized"], metadata["local"]["map_seed"]
    write_raw(tmp_path / "older.npz", arrays, metadata)
    np.testing.assert_array_equal(sg.load(tmp_path / "older.npz").predict(X), model.predict(X))


def test_a_reoptimized_float32_model_is_not_saved(tmp_path):
    X, y = data_2d(40)
    model = estimator(local="clusters", local_reoptimize=True, optimize=False,
                      dtype="float32").fit(X, y)
    with pytest.raises(NotImplementedError, match="fit it in float64 to save it"):
        sg.save(model, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("kind, flags", [("clusters", []), ("test-points", []),
                                         ("clusters", ["--local-reoptimize"])])
def test_cli_fits_and_predicts_a_local_model(kind, flags, tmp_path):
    from scalegp.cli import main
    X, y = data_2d(60)
    np.savetxt(tmp_path / "train.csv", np.column_stack([X, y]), delimiter=",", header="a,b,y",
               comments="")
    np.savetxt(tmp_path / "test.csv", X[:7], delimiter=",", header="a,b", comments="")
    model, out = tmp_path / "m.npz", tmp_path / "p.csv"
    assert main(["fit", "--approximation", "rff", str(tmp_path / "train.csv"), "--target", "y", "--local", kind,
                 "--local-threshold", "1.5", "--n-components", "16", "--kernel", "gaussian",
                 "--no-optimize", "--out", str(model), "--quiet", *flags]) == 0
    assert main(["predict", str(model), str(tmp_path / "test.csv"), "--out", str(out),
                 "--quiet"]) == 0
    loaded = sg.load(model)
    assert loaded.local.kind == kind and loaded.local.threshold == 1.5
    assert getattr(loaded.local, "reoptimize", False) == bool(flags)
    predicted = np.loadtxt(out, delimiter=",", skiprows=1)
    mean, std = loaded.predict(X[:7], return_std=True)
    np.testing.assert_allclose(predicted, np.column_stack([mean, std]), rtol=1e-12)
