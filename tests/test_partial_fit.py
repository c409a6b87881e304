"""LowRankGPRegressor.partial_fit: rows added by their sums equal a fit on all rows (same map,
same hyperparameters, same standardization), and what cannot be updated so is refused."""

import numpy as np
import pytest

from scalegp import Features, LowRankGPRegressor, Nystrom, kernels

TOL = 1e-10


def _data(n=600, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, d))
    # the first rows hold the corners of the box, so every prefix has the box of all rows
    X[0], X[1] = -2.0, 2.0
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, -1] ** 2 + 0.1 * rng.standard_normal(n)
    return X, 3.0 * y + 10.0, rng.uniform(-1.9, 1.9, (50, d))


def _assert_same(updated, reference, X_test):
    mean_u, std_u = updated.predict(X_test, return_std=True)
    mean_r, std_r = reference.predict(X_test, return_std=True)
    scale = np.max(np.abs(mean_r))
    assert np.max(np.abs(mean_u - mean_r)) <= TOL * scale
    assert np.max(np.abs(std_u - std_r)) <= TOL * np.max(std_r)
    assert updated.log_marginal_likelihood_value_ == pytest.approx(
        reference.log_marginal_likelihood_value_, rel=TOL)
    assert updated.posterior_.n_samples == reference.posterior_.n_samples


def _fixed(approximation, **kwargs):
    kernel = kernels.Gaussian(length_scale=[0.7, 1.3])
    return LowRankGPRegressor(approximation, kernel=kernel, noise_variance=0.05,
                              optimize=False, normalize_X=False, normalize_y=False,
                              random_state=3, **kwargs)


@pytest.mark.parametrize("approximation", [
    Features("rff", n_components=128),
    Features("glf", n_components=144),
    Features("rff", n_components=128, objective="fitc"),
    Features("ssr", n_components=200, signed_rule="keep"),     # a signed rule kept as it is
    "nystrom-fixed-knots",
    "nystrom-vfe-fixed-knots",
])
def test_batches_equal_fit_on_all_rows(approximation):
    X, y, X_test = _data()
    if isinstance(approximation, str):
        knots = np.random.default_rng(9).uniform(-2, 2, (60, 2))
        objective = "vfe" if "vfe" in approximation else "dtc"
        approximation = Nystrom(n_components=60, knots=knots, objective=objective)
    model = _fixed(approximation).fit(X[:200], y[:200])
    model.partial_fit(X[200:450], y[200:450]).partial_fit(X[450:], y[450:])
    reference = _fixed(approximation).fit(X, y)
    _assert_same(model, reference, X_test)


def test_positive_part_agrees_as_far_as_the_fit_itself_is_reproducible():
    """The positive part of a signed rule (signed_rule="repair") is an eigen-decomposition
    of a rank-deficient G (cond ~1e24 here): the fit on all rows itself changes by ~1e-9
    relative when its rows are merely permuted, so 1e-10 is out of reach for any update;
    the update agrees with the fit to that level."""
    X, y, X_test = _data()
    approximation = Features("ssr", n_components=100)
    reference = _fixed(approximation).fit(X, y)
    order = np.r_[0, 1, np.random.default_rng(1).permutation(np.arange(2, X.shape[0]))]
    permuted = _fixed(approximation).fit(X[order], y[order])
    model = _fixed(approximation).fit(X[:200], y[:200])
    model.partial_fit(X[200:450], y[200:450]).partial_fit(X[450:], y[450:])
    scale = np.max(np.abs(reference.predict(X_test)))
    row_order = np.max(np.abs(permuted.predict(X_test) - reference.predict(X_test))) / scale
    update = np.max(np.abs(model.predict(X_test) - reference.predict(X_test))) / scale
    assert row_order > TOL              # the path's own reproducibility is above 1e-10
    assert update < 1e-7


@pytest.mark.parametrize("approximation", [
    Features("rff", n_components=128),
    # the VFE bound's trace sum_i w^_i k(x_i, x_i) is a row sum too (docs/nystrom.md, Eq. V.4)
    Nystrom(knots=np.random.default_rng(5).uniform(-2, 2, (40, 2)), objective="vfe")],
    ids=["rff", "nystrom-vfe"])
def test_known_noise_variances_add(approximation):
    X, y, X_test = _data()
    noise = np.random.default_rng(4).uniform(0.0, 0.3, X.shape[0])
    model = _fixed(approximation).fit(X[:300], y[:300], sample_noise_variance=noise[:300])
    model.partial_fit(X[300:], y[300:], sample_noise_variance=noise[300:])
    reference = _fixed(approximation).fit(X, y, sample_noise_variance=noise)
    _assert_same(model, reference, X_test)


def test_standardization_is_the_first_fits():
    """With normalize_X / normalize_y the constants stay the first fit's: the update equals
    a fit on all rows standardized with them (constructed here), not a fit that standardizes
    all rows anew."""
    X, y, X_test = _data()
    model = LowRankGPRegressor(Features("rff", n_components=128), noise_variance=0.05,
                               optimize=False, random_state=3).fit(X[:250], y[:250])
    constants = (model.X_train_mean_.copy(), model.X_train_scale_.copy(),
                 model.y_train_mean_, model.y_train_std_)
    model.partial_fit(X[250:], y[250:])
    assert np.array_equal(model.X_train_mean_, constants[0])
    assert model.y_train_std_ == constants[3]
    Z = (X - constants[0]) / constants[1]
    reference = LowRankGPRegressor(Features("rff", n_components=128),
                                   kernel=model.kernel_, noise_variance=model.noise_variance_,
                                   optimize=False, normalize_X=False, normalize_y=False,
                                   random_state=3).fit(Z, (y - constants[2]) / constants[3])
    Z_test = (X_test - constants[0]) / constants[1]
    mean_r, std_r = reference.predict(Z_test, return_std=True)
    mean_u, std_u = model.predict(X_test, return_std=True)
    np.testing.assert_allclose(mean_u, mean_r * constants[3] + constants[2], rtol=0,
                               atol=TOL * np.max(np.abs(mean_u)))
    np.testing.assert_allclose(std_u, std_r * constants[3], rtol=0, atol=TOL * np.max(std_u))
    # a fit that standardizes all rows anew is another model (its constants differ)
    anew = LowRankGPRegressor(Features("rff", n_components=128), noise_variance=0.05,
                              optimize=False, random_state=3).fit(X, y)
    assert not np.array_equal(anew.X_train_mean_, constants[0])


def test_noise_only_likelihood_is_of_all_rows():
    X, y, _ = _data()
    model = _fixed(Features("rff", n_components=64)).fit(X[:100], y[:100]).partial_fit(
        X[100:], y[100:])
    reference = _fixed(Features("rff", n_components=64)).fit(X, y)
    assert model.noise_only_log_marginal_likelihood_ == pytest.approx(
        reference.noise_only_log_marginal_likelihood_, rel=1e-12)


def test_first_call_fits():
    X, y, X_test = _data()
    model = LowRankGPRegressor(Features("rff", n_components=64), random_state=1)
    model.partial_fit(X, y)
    reference = LowRankGPRegressor(Features("rff", n_components=64), random_state=1).fit(X, y)
    np.testing.assert_array_equal(model.predict(X_test), reference.predict(X_test))
    assert model.optimization_result_ is not None      # learned, as fit does with optimize


def test_glf_relearns_from_the_sums():
    """relearn=True on a fixed basis: the hyperparameters learned from the basis statistics
    of all rows equal those of a fit on all rows (same start, box, standardization)."""
    X, y, X_test = _data(n=800)
    kernel = kernels.Gaussian(length_scale=[1.0, 1.0])

    def estimator():
        return LowRankGPRegressor(Features("glf", n_components=144), kernel=kernel,
                                  noise_variance=0.1, normalize_X=False, normalize_y=False,
                                  random_state=0)
    model = estimator().fit(X[:300], y[:300])
    first = model.kernel_.theta.copy()
    model.partial_fit(X[300:], y[300:], relearn=True)
    reference = estimator().fit(X, y)
    assert not np.allclose(first, reference.kernel_.theta, rtol=1e-3)   # learning moved
    np.testing.assert_allclose(model.kernel_.theta, reference.kernel_.theta, rtol=1e-8)
    assert model.noise_variance_ == pytest.approx(reference.noise_variance_, rel=1e-8)
    np.testing.assert_allclose(model.predict(X_test), reference.predict(X_test), rtol=1e-7)
    assert model.optimization_result_.converged


@pytest.mark.parametrize("approximation, local, reason", [
    (Features("rff", n_components=32), "clusters", "local='clusters'"),
    (Nystrom(n_components=32), None, "chose its map from the rows"),
    (Features("glf", n_components=64, solver="qr"), None, "solver='qr'"),
    (Features("random-projection", n_components=32), None, "chose its map from the rows"),
])
def test_refused_with_the_reason(approximation, local, reason):
    # scikit-learn's available_if: no partial_fit on such a configuration, fitted or not
    # (so scikit-learn's checks do not call it), and the AttributeError's cause names why
    X, y, _ = _data(n=200)
    model = LowRankGPRegressor(approximation, local=local, optimize=False, random_state=0)
    assert not hasattr(model, "partial_fit")
    model.fit(X[:150], y[:150])
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'") as refused:
        model.partial_fit(X[150:], y[150:])
    assert reason in str(refused.value.__cause__)


def test_fixed_basis_refuses_rows_outside_its_box():
    X, y, _ = _data(n=200)
    model = _fixed(Features("glf", n_components=64)).fit(X, y)
    with pytest.raises(ValueError, match="outside the input box"):
        model.partial_fit(X[:5] * 1.5, y[:5])
    before = model.posterior_.n_samples
    assert before == 200                                   # refused before any change


def test_relearn_needs_basis_statistics():
    X, y, _ = _data(n=200)
    model = _fixed(Features("rff", n_components=32)).fit(X[:150], y[:150])
    with pytest.raises(ValueError, match="basis statistics"):
        model.partial_fit(X[150:], y[150:], relearn=True)


def test_loaded_model_is_refused(tmp_path):
    import scalegp
    X, y, _ = _data(n=200)
    model = _fixed(Features("rff", n_components=32)).fit(X[:150], y[:150])
    path = tmp_path / "model.npz"
    scalegp.save(model, path)
    loaded = scalegp.load(path)
    with pytest.raises(ValueError, match="model file"):
        loaded.partial_fit(X[150:], y[150:])


def test_log_marginal_likelihood_of_theta_refuses_after_update():
    X, y, _ = _data(n=200)
    model = _fixed(Features("rff", n_components=32)).fit(X[:150], y[:150])
    model.partial_fit(X[150:], y[150:])
    with pytest.raises(ValueError, match="partial_fit"):
        model.log_marginal_likelihood(np.zeros(model.kernel_.n_params + 1))


def test_updated_model_saves_and_loads(tmp_path):
    import scalegp
    X, y, X_test = _data()
    model = _fixed(Features("rff", n_components=64)).fit(X[:300], y[:300]).partial_fit(
        X[300:], y[300:])
    path = tmp_path / "model.npz"
    scalegp.save(model, path)
    loaded = scalegp.load(path)
    np.testing.assert_array_equal(loaded.predict(X_test), model.predict(X_test))
    assert loaded.posterior_.n_samples == X.shape[0]
