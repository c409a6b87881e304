"""The exact GP's hyperparameters integrated out (scalegp.estimators.hyperparameter_average)
and the Hamiltonian Monte Carlo it draws with (scalegp.inference.hamiltonian)."""

import math
import time

import numpy as np
import pytest

import scalegp as sg
from scalegp.errors import InvalidModelFileError, TimeBudgetExceeded
from scalegp.estimators import auto_validation
from scalegp.estimators import hyperparameter_average as average_module
from scalegp.estimators.hyperparameter_average import HyperparameterAverage
from scalegp.inference.hamiltonian import hamiltonian_draws, negative_hessian

COVARIANCE = np.array([[1.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.25]])
CENTRE = np.array([1.0, -2.0, 0.5])


def _gaussian(theta):
    precision = np.linalg.inv(COVARIANCE)
    z = np.asarray(theta) - CENTRE
    return -0.5 * z @ precision @ z, -precision @ z


def test_negative_hessian_of_a_gaussian_is_its_precision():
    np.testing.assert_allclose(negative_hessian(_gaussian, CENTRE + 0.3),
                               np.linalg.inv(COVARIANCE), rtol=1e-6, atol=1e-6)


def test_hamiltonian_draws_have_the_target_moments():
    """4,000 draws of a correlated 3-D Gaussian (unit mass, so that the mass matrix is not
    the whole story): the mean within 5 standard errors of its Monte Carlo spread (counted at
    a quarter of the draws, an effective sample size HMC exceeds here), the covariance within
    15 %."""
    rng = np.random.default_rng(0)
    draws, acceptance = hamiltonian_draws(_gaussian, CENTRE + 1.0, np.eye(3), n_draws=4000,
                                          n_warmup=200, n_steps=8, rng=rng)
    assert draws.shape == (4000, 3) and 0.4 < acceptance <= 1.0
    standard_error = np.sqrt(np.diag(COVARIANCE) / 1000)
    assert np.all(np.abs(draws.mean(axis=0) - CENTRE) < 5 * standard_error)
    np.testing.assert_allclose(np.cov(draws.T), COVARIANCE, atol=0.15 * np.max(COVARIANCE))
    again, _ = hamiltonian_draws(_gaussian, CENTRE + 1.0, np.eye(3), n_draws=4000,
                                 n_warmup=200, n_steps=8, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(draws, again)


def test_hamiltonian_draws_refuse_a_bad_start_and_stop_at_the_deadline():
    with pytest.raises(ValueError, match="not finite at the start"):
        hamiltonian_draws(lambda t: (-np.inf, np.zeros(3)), CENTRE, np.eye(3), n_draws=5,
                          n_warmup=5, n_steps=2, rng=np.random.default_rng(0))
    with pytest.raises(TimeBudgetExceeded):
        hamiltonian_draws(_gaussian, CENTRE, np.eye(3), n_draws=5, n_warmup=5, n_steps=2,
                          rng=np.random.default_rng(0), end=time.perf_counter() - 1.0)


def test_a_trajectory_into_a_non_finite_region_is_rejected():
    """A density that is -inf beyond theta_0 > 1.5: every draw stays inside."""
    def cut(theta):
        if theta[0] > 1.5:
            return -np.inf, np.full(3, np.nan)
        return _gaussian(theta)
    draws, _ = hamiltonian_draws(cut, CENTRE, np.eye(3), n_draws=300, n_warmup=50,
                                 n_steps=8, rng=np.random.default_rng(1))
    assert np.all(draws[:, 0] <= 1.5) and len(np.unique(draws[:, 0])) > 50

    def steep(theta):
        """Finite, but with a gradient whose leapfrog step overflows the momentum (its
        energy is then inf - inf: NaN, which an unguarded min(0, .) reads as acceptance)."""
        if theta[0] > 1.5:
            return -1e6, np.full(3, -1e308)
        return _gaussian(theta)
    draws, _ = hamiltonian_draws(steep, CENTRE, np.eye(3), n_draws=300, n_warmup=50,
                                 n_steps=8, rng=np.random.default_rng(1))
    assert np.all(draws[:, 0] <= 1.5) and np.all(np.isfinite(draws))


def test_log_prior_gradient_matches_finite_differences():
    roles = np.array(["length_scale", "length_scale", "variance", "noise_variance"])
    theta = np.array([0.3, -1.2, 0.7, -5.0])
    value, gradient = average_module.log_prior(theta, roles)
    step = 1e-6
    numeric = [(average_module.log_prior(theta + step * e, roles)[0]
                - average_module.log_prior(theta - step * e, roles)[0]) / (2 * step)
               for e in np.eye(4)]
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)
    assert value == pytest.approx(-0.5 * ((0.3 / 1.5) ** 2 + (1.2 / 1.5) ** 2
                                          + (0.7 / 1.5) ** 2 + (1.0 / 3.0) ** 2))


def _data(seed=0, n=80, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.normal(size=n)
    return X, 3.0 * y + 10.0, rng.uniform(-2, 2, size=(30, d))


def _fitted(X, y):
    kernel = sg.kernels.get("matern52").with_params(length_scale=np.ones(X.shape[1]))
    return sg.ExactGPRegressor(kernel=kernel).fit(X, y)


def _vecchia(X, y):
    kernel = sg.kernels.get("matern32").with_params(length_scale=np.ones(X.shape[1]))
    return sg.VecchiaGPRegressor(kernel=kernel, n_neighbors=8, n_neighbors_predict="auto",
                                 random_state=0).fit(X, y)


def _theta(estimator):
    return np.append(estimator.kernel_.theta, math.log(estimator.noise_variance_))


def test_one_member_at_the_optimum_predicts_as_the_estimator():
    X, y, X_test = _data()
    estimator = _fitted(X, y)
    average = HyperparameterAverage(estimator, _theta(estimator)[None], X, y, 1.0)
    for noise in (False, True):
        expected = estimator.predict(X_test, return_std=True, include_noise=noise)
        found = average.predict(X_test, return_std=True, include_noise=noise)
        np.testing.assert_allclose(found, expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(average.predict(X_test), expected[0], rtol=1e-9)
    with pytest.raises(NotImplementedError, match="joint covariance"):
        average.predict(X_test, return_cov=True)


def test_members_combine_by_eq_a2():
    """Two members: the mean of their means, and the mean of their variances plus the
    variance of their means (each member's from a one-member average)."""
    X, y, X_test = _data(1)
    estimator = _fitted(X, y)
    draws = _theta(estimator) + np.array([[0.0] * 5, [0.4, -0.3, 0.2, 0.5, -0.6]])
    both = HyperparameterAverage(estimator, draws, X, y, 0.8)
    single = [HyperparameterAverage(estimator, d[None], X, y, 1.0).predict(
        X_test, return_std=True, include_noise=True) for d in draws]
    means = np.array([m for m, _ in single])
    variances = np.array([s ** 2 for _, s in single])
    mean, std = both.predict(X_test, return_std=True, include_noise=True)
    np.testing.assert_allclose(mean, means.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std ** 2, variances.mean(axis=0) + means.var(axis=0),
                               rtol=1e-10)
    assert not np.allclose(means[0], means[1])


def test_cross_validated_average_of_one_member_is_the_estimators_cross_validation():
    X, y, _ = _data(2)
    estimator = _fitted(X, y)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    scored = auto_validation.Scored("exact", "exact", estimator, None)
    auto_validation.cross_validate(scored, X, y, folds)
    average = HyperparameterAverage(estimator, _theta(estimator)[None], X, y, 1.0)
    errors, variances = average_module.cross_validated(average, estimator, folds)
    np.testing.assert_allclose(errors, scored.cv_errors, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(variances, scored.cv_variances, rtol=1e-9)


@pytest.mark.parametrize("kind", ["exact", "vecchia"])
def test_integrate_draws_around_the_optimum_and_integrate_validated_scores_it(kind):
    """HMC on the exact GP's likelihood, or Vecchia's, from its optimum; integrate_validated
    scores the average by the same folds and keeps it only where its cross-validated NLPD
    is lower; the price is refused past the end."""
    X, y, _ = _data(3 if kind == "exact" else 6, n=60 if kind == "exact" else 100)
    estimator = _fitted(X, y) if kind == "exact" else _vecchia(X, y)
    average = average_module.integrate(estimator, X, y, np.random.default_rng(0))
    assert average.draws.shape == (average_module.N_MEMBERS, 5)
    assert np.all(np.isfinite(average.draws)) and 0.3 < average.acceptance <= 1.0
    assert len(np.unique(average.draws[:, 0])) > average_module.N_MEMBERS // 2
    assert all(type(m) is type(estimator) for m in average.members)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    best = auto_validation.Scored(f"{kind} matern", kind, estimator, None)
    auto_validation.cross_validate(best, X, y, folds)
    kept, scored, note = average_module.integrate_validated(
        X, y, [best], best, end=math.inf, rng=np.random.default_rng(0))
    assert "cross-validated NLPD" in note
    if kept is None:
        assert "not kept" in note and scored is None
    else:
        assert scored.cv_nlpd < best.cv_nlpd and scored.name.endswith("integrated")
        assert scored.kind == kind
        assert ("exact GPs" if kind == "exact" else "Vecchia GPs") in kept.note()
    none = average_module.integrate_validated(X, y, [best], best, end=time.perf_counter() - 1,
                                              rng=np.random.default_rng(0))
    assert none[0] is None and "priced at" in none[2]
    low_rank = auto_validation.Scored("nystrom", "low-rank", estimator, None)
    low_rank.cv_folds = folds
    assert average_module.integrate_validated(X, y, [low_rank], low_rank, end=math.inf,
                                              rng=np.random.default_rng(0)) == (None, None, "")


def test_the_draws_stay_in_the_estimators_box_where_the_optimum_sits_on_a_bound():
    """Noise-free targets: the noise variance's optimum is its lower bound 1e-6. Before the
    chain was kept on the box, three of six chains drew noise variances below it (seeds 2,
    5 and 6: the members' fit raised "noise_variance must lie inside its bounds"); the
    held-out concreteslump data met it in auto. Every draw is in the box, each member holds
    its draw, and a fixed hyperparameter is refused."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (40, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2
    kernel = sg.kernels.get("matern32").with_params(length_scale=np.ones(2))
    with pytest.warns(sg.BoundaryWarning):
        estimator = sg.ExactGPRegressor(kernel=kernel).fit(X, y)
    assert estimator.noise_variance_ == pytest.approx(1e-6)
    bounds = average_module.box(estimator)
    np.testing.assert_allclose(bounds[-1], np.log([1e-6, 1e5]))
    for seed in (2, 5, 6):
        average = average_module.integrate(estimator, X, y, np.random.default_rng(seed))
        assert np.all(average.draws >= bounds[:, 0] - 1e-12)
        assert np.all(average.draws <= bounds[:, 1] + 1e-12)
        assert average.draws[:, -1].min() < math.log(1e-4)       # near the bound, not shy of it
        for member, theta in zip(average.members, average.draws):
            np.testing.assert_allclose(np.append(member.kernel_.theta,
                                                 math.log(member.noise_variance_)), theta,
                                       rtol=0, atol=1e-12)
    fixed = sg.ExactGPRegressor(kernel=kernel, noise_variance=1e-2,
                                noise_variance_bounds="fixed").fit(X, y)
    with pytest.raises(ValueError, match="fixed noise variance"):
        average_module.integrate(fixed, X, y, np.random.default_rng(0))


def test_the_target_is_the_best_exact_gp_and_competes_with_the_best_candidate(monkeypatch):
    """On at most MAX_ROWS rows the best exact GP is integrated even where a Vecchia GP
    scored better, and its average is kept only where it beats that Vecchia GP; above
    MAX_ROWS the best candidate is integrated only where it is a Vecchia GP."""
    X, y, _ = _data(8, n=80)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    exact = auto_validation.Scored("exact matern52", "exact", _fitted(X, y), None)
    vecchia = auto_validation.Scored("vecchia m=8 matern32", "vecchia", _vecchia(X, y), None)
    worse = auto_validation.Scored("exact gaussian", "exact", sg.ExactGPRegressor().fit(X, y),
                                   None)
    for scored in (exact, vecchia, worse):
        auto_validation.cross_validate(scored, X, y, folds)
    assert worse.cv_nlpd > exact.cv_nlpd
    vecchia.cv_nlpd = exact.cv_nlpd - 10.0         # Vecchia the best by far
    candidates = [worse, exact, vecchia]
    assert average_module.target(candidates, len(y)) is exact
    kept, scored, note = average_module.integrate_validated(
        X, y, candidates, vecchia, end=math.inf, rng=np.random.default_rng(0))
    assert kept is None and scored is None
    assert note.startswith("hyperparameters integrated out and not kept: exact matern52")
    assert "the best candidate, vecchia m=8 matern32" in note
    monkeypatch.setattr(average_module, "MAX_ROWS", len(y) - 1)
    assert average_module.target(candidates, len(y)) is vecchia
    assert average_module.target([worse, exact], len(y)) is None
    assert average_module.target(candidates, auto_validation.MIN_VALIDATED_ROWS - 1) is None


def test_one_vecchia_member_at_the_optimum_predicts_as_the_estimator():
    """A Vecchia member conditions with the estimator's conditioning and prediction
    neighbour counts (the latter as the estimator chose them, not chosen again)."""
    X, y, X_test = _data(5, n=120)
    estimator = _vecchia(X, y)
    average = HyperparameterAverage(estimator, _theta(estimator)[None], X, y, 1.0)
    (member,) = average.members
    assert member.n_neighbors_predict == estimator.prediction_neighbors_
    for noise in (False, True):
        np.testing.assert_allclose(
            average.predict(X_test, return_std=True, include_noise=noise),
            estimator.predict(X_test, return_std=True, include_noise=noise),
            rtol=1e-9, atol=1e-12)
    assert "1 Vecchia GPs" in average.note()


def test_the_members_memory_refuses_an_average_over_the_memory_budget():
    """A Vecchia average needs far less memory than an exact GP's (no n x n factors); a
    memory budget below the members' refuses it before anything is computed."""
    X, y, _ = _data(6, n=100)
    estimator = _vecchia(X, y)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    best = auto_validation.Scored("vecchia m=8 matern32", "vecchia", estimator, None)
    auto_validation.cross_validate(best, X, y, folds)
    needed = average_module.memory_bytes(estimator, len(y))
    assert needed < average_module.memory_bytes(_fitted(X, y), len(y))
    small = average_module.integrate_validated(X, y, [best], best, end=math.inf,
                                               rng=np.random.default_rng(0),
                                               memory_budget=needed / 2)
    assert small[0] is None and "MB" in small[2]

def test_gpregressor_predicts_with_the_average_and_model_files_keep_it(tmp_path):
    """An average attached to auto's exact GP: predict, the interval and the density are
    the average's, return_cov and sample_y refuse, and a model file round-trips it
    bit for bit; broken files are refused (rows other than the model's too)."""
    import json
    X, y, X_test = _data(4, n=70)
    model = sg.GPRegressor(random_state=0, time_budget=10, calibrate_variance=False).fit(X, y)
    assert isinstance(model.estimator_, sg.ExactGPRegressor)
    draws = _theta(model.estimator_) + np.array([[0.0] * 5, [0.3, -0.2, 0.1, 0.2, -0.4]])
    model.hyperparameter_average_ = HyperparameterAverage(model.estimator_, draws, X, y, 0.7)
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    np.testing.assert_array_equal(
        (mean, std), model.hyperparameter_average_.predict(X_test, return_std=True,
                                                           include_noise=True))
    assert not np.allclose(mean, model.estimator_.predict(X_test))
    with pytest.raises(NotImplementedError):
        model.predict(X_test, return_cov=True)
    with pytest.raises(NotImplementedError, match="integrated out"):
        model.sample_y(X_test)
    path = tmp_path / "model.npz"
    sg.io.save(model, path)
    loaded = sg.io.load(path)
    for kwargs in ({}, {"return_std": True}, {"return_std": True, "include_noise": True}):
        np.testing.assert_array_equal(loaded.predict(X_test, **kwargs),
                                      model.predict(X_test, **kwargs))
    np.testing.assert_array_equal(loaded.log_predictive_density(X_test, mean),
                                  model.log_predictive_density(X_test, mean))
    np.testing.assert_array_equal(loaded.predict_interval(X_test), model.predict_interval(X_test))
    from scalegp.cli.info import describe_model
    assert "hyperparameters integrated out: 2 exact GPs" in describe_model(path)

    with np.load(path) as stored:
        arrays = dict(stored)
    metadata = json.loads(bytes(arrays["metadata"]).decode())

    def write(name, change_arrays=None, change_metadata=None):
        broken_arrays = {key: value.copy() for key, value in arrays.items()}
        broken_metadata = json.loads(json.dumps(metadata))
        if change_arrays:
            change_arrays(broken_arrays, broken_metadata)
        if change_metadata:
            change_metadata(broken_metadata)
        broken_arrays["metadata"] = np.frombuffer(json.dumps(broken_metadata).encode(),
                                                  dtype=np.uint8)
        broken = tmp_path / f"{name}.npz"
        np.savez(broken, **broken_arrays)
        return broken

    def narrow(a, m):
        a["hyperparameter_average.draws"] = a["hyperparameter_average.draws"][:, :-1]
        m["arrays"]["hyperparameter_average.draws"]["shape"][1] -= 1

    def infinite(a, m):
        a["hyperparameter_average.draws"][0, 0] = np.inf

    def no_entry(m):
        del m["front_door"]["hyperparameter_average"]

    def outside(m):
        m["front_door"]["hyperparameter_average"]["acceptance"] = 1.5

    def shuffled(a, m):
        a["hyperparameter_average.y"] = a["hyperparameter_average.y"][::-1].copy()

    def shifted(a, m):
        a["hyperparameter_average.X"][3, 0] += 1e-3

    for name, arrays_change, metadata_change, match in (
            ("narrow", narrow, None, "draws must be"), ("infinite", infinite, None, "finite"),
            ("shuffled", shuffled, None, "targets are not"),
            ("shifted", shifted, None, "training inputs"),
            ("no_entry", None, no_entry, "without metadata"),
            ("outside", None, outside, "acceptance")):
        with pytest.raises(InvalidModelFileError, match=match):
            sg.io.load(write(name, arrays_change, metadata_change))


def test_a_vecchia_average_round_trips_through_a_model_file(tmp_path):
    """A Vecchia GP's average in a model file: the loaded model predicts bit for bit, and
    rows other than the Vecchia GP's are refused."""
    X, y, X_test = _data(7, n=90)
    model = sg.GPRegressor(approximation=sg.Vecchia(n_neighbors=8), random_state=0).fit(X, y)
    estimator = model.estimator_
    assert isinstance(estimator, sg.VecchiaGPRegressor)
    theta = _theta(estimator)
    draws = theta + np.array([np.zeros(theta.size), np.resize([0.3, -0.2, 0.4], theta.size)])
    model.hyperparameter_average_ = HyperparameterAverage(estimator, draws, X, y, 0.7)
    path = tmp_path / "vecchia.npz"
    sg.io.save(model, path)
    loaded = sg.io.load(path)
    for kwargs in ({}, {"return_std": True, "include_noise": True}):
        np.testing.assert_array_equal(loaded.predict(X_test, **kwargs),
                                      model.predict(X_test, **kwargs))
    assert not np.allclose(model.predict(X_test), estimator.predict(X_test))
    from scalegp.cli.info import describe_model
    assert "hyperparameters integrated out: 2 Vecchia GPs" in describe_model(path)
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["hyperparameter_average.y"] = arrays["hyperparameter_average.y"][::-1].copy()
    np.savez(tmp_path / "shuffled.npz", **arrays)
    with pytest.raises(InvalidModelFileError, match="targets are not those the Vecchia GP"):
        sg.io.load(tmp_path / "shuffled.npz")


def test_the_price_counts_a_timed_fold_and_the_deadline_stops_the_scoring(monkeypatch):
    """The price adds the members' conditioning at one timed fold's seconds; where the
    gradients alone are over the seconds left no fold is timed (a lower bound); the
    members' cross-validation stops before a member that would end past its deadline."""
    X, y, _ = _data(9, n=60)
    estimator = _fitted(X, y)
    folds = np.array_split(np.random.default_rng(0).permutation(len(y)), 5)
    timed = []
    original = auto_validation.conditioned_residuals
    monkeypatch.setattr(auto_validation, "conditioned_residuals",
                        lambda *a, **k: timed.append(1) or original(*a, **k))
    assert average_module.timed_price(estimator, X, y, folds, left=0.0) > 0 and not timed
    assert average_module.timed_price(estimator, X, y, folds) > 0 and timed == [1]
    average = HyperparameterAverage(estimator, _theta(estimator)[None], X, y, 1.0)
    with pytest.raises(TimeBudgetExceeded, match="next member"):
        average_module.cross_validated(average, estimator, folds, end=time.perf_counter() - 1)
    assert timed == [1]
    per_fold = 0.01
    assert average_module.price(5, 0.001, per_fold) - average_module.price(5, 0.001) == \
        pytest.approx(per_fold * average_module.N_MEMBERS
                      * (1 + auto_validation.VALIDATION_FOLDS))
