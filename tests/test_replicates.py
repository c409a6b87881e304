"""Repeated inputs: the nugget split into micro-scale variation and measurement error
(scalegp.estimators.replicates, Eqs. R.1-R.3) and GPRegressor's use of it under auto."""

import numpy as np
import pytest

import scalegp as sg
from scalegp.estimators import replicates
from scalegp.estimators.exact import ExactGPRegressor


def _field(X):
    return np.sin(2 * X[:, 0]) + 0.5 * np.cos(3 * X[:, 1])


def _repeated(seed=0, distinct=120, rows=260, micro=0.3, measurement=0.01, copies=0.8):
    """Rows drawn from ``distinct`` inputs: smooth field + micro-scale value of the input +
    measurement error of the row, a repeated row being a copy of its input's first row
    (the same target) with probability ``copies``. Returns (X, y, distinct inputs, field +
    micro there)."""
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(-2, 2, size=(distinct, 2))
    values = _field(inputs) + rng.normal(scale=micro, size=distinct)
    first = values + rng.normal(scale=measurement, size=distinct)
    extra = rng.integers(0, distinct, rows - distinct)
    again = np.where(rng.random(rows - distinct) < copies, first[extra],
                     values[extra] + rng.normal(scale=measurement, size=rows - distinct))
    index = np.concatenate([np.arange(distinct), extra])
    y = np.concatenate([first, again])
    order = rng.permutation(rows)
    return inputs[index[order]], y[order], inputs, values


def test_groups_means_counts_and_pooled_within_variance():
    X, y, _, _ = _repeated()
    grouped = replicates.group_rows(X, y)
    inputs, index, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    index = index.ravel()
    order = np.lexsort(grouped.inputs.T[::-1])          # np.unique's row order
    np.testing.assert_array_equal(grouped.inputs[order], inputs)
    np.testing.assert_array_equal(grouped.counts[order], counts)
    np.testing.assert_allclose(grouped.means[order],
                               np.bincount(index, weights=y) / counts, rtol=1e-12)
    within = sum(np.sum((y[index == g] - y[index == g].mean()) ** 2)
                 for g in range(len(inputs)))
    assert grouped.degrees_of_freedom == len(y) - len(inputs)
    np.testing.assert_allclose(grouped.measurement_variance,
                               within / (len(y) - len(inputs)), rtol=1e-10)
    # pooled over 140 degrees of freedom, the copies' included
    np.testing.assert_allclose(grouped.known_variances(),
                               grouped.measurement_variance / grouped.counts)


def test_no_repeated_input_and_signed_zero():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    assert replicates.group_rows(X, rng.normal(size=50)) is None
    X[1] = X[0]
    X[0, 1], X[1, 1] = 0.0, -0.0                          # equal inputs, different bits
    inputs, index, counts = replicates._distinct(X)
    assert len(inputs) == 49 and index[0] == index[1] and counts[index[0]] == 2


def test_identical_targets_take_the_floor_and_no_known_variances():
    X, _, inputs, values = _repeated(measurement=0.0)
    # copies: every repeated row's target equals its input's value exactly
    index = np.array([np.flatnonzero((inputs == row).all(axis=1))[0] for row in X])
    y = values[index]
    grouped = replicates.group_rows(X, y)
    assert grouped.within == 0.0 and grouped.known_variances() is None
    np.testing.assert_allclose(grouped.measurement_variance,
                               replicates.MIN_MEASUREMENT_VARIANCE * np.var(y))
    assert "identical" in grouped.note()


def test_no_split_where_repeated_rows_disagree():
    """The rows are fitted as they are where the repeated rows' targets differ (no copies:
    a continuous noise), or where they disagree as much as neighbouring inputs do
    (measurement errors of sd 1 on a field that varies by 0.1 between neighbours: tau^2
    over half the nearest semivariance)."""
    X, y, _, _ = _repeated(copies=0.0)
    grouped = replicates._distinct(X)
    assert replicates.identical_share(grouped[1], y, grouped[2]) == 0.0
    assert replicates.group_rows(X, y) is None
    # a noise-free field on 300 distinct inputs; 20 of them repeated, 12 as copies and 8
    # with a second measurement off by sd 3: tau^2 = 9 * 8 / 20 against nu of about 0.1
    rng = np.random.default_rng(2)
    inputs = rng.uniform(-2, 2, size=(300, 2))
    X = np.vstack([inputs, inputs[:20]])
    y = np.concatenate([_field(inputs), _field(inputs[:20])
                        + np.where(np.arange(20) < 12, 0.0, rng.normal(scale=3.0, size=20))])
    grouped = replicates._distinct(X)
    assert replicates.identical_share(grouped[1], y, grouped[2]) == 0.6
    means = np.bincount(grouped[1], weights=y) / grouped[2]
    tau2 = np.sum((y - means[grouped[1]]) ** 2) / 20
    assert tau2 > replicates.MAX_SPLIT_SHARE * replicates.nearest_semivariance(grouped[0], means)
    assert replicates.group_rows(X, y) is None
    X, y, _, _ = _repeated()
    assert replicates.group_rows(X, y) is not None
    # 5 copies among 125 rows: 4 % of the rows repeat an input
    _, _, inputs, values = _repeated()
    X, y = np.vstack([inputs, inputs[:5]]), np.concatenate([values, values[:5]])
    assert replicates._distinct(X) is not None and replicates.group_rows(X, y) is None


def _dense_prediction(X, y, Xt, kernel, micro, tau2):
    """The GP of all rows with the covariance K + s_m^2 [x_i = x_j] + tau^2 I, by dense
    algebra: (mean, variance of a new observation) at Xt."""
    same = (X[:, None, :] == X[None, :, :]).all(axis=2)
    same_test = (Xt[:, None, :] == X[None, :, :]).all(axis=2)
    K = kernel(X) + micro * same + tau2 * np.eye(len(X))
    cross = kernel(Xt, X) + micro * same_test
    L = np.linalg.cholesky(K)
    W = np.linalg.solve(L, cross.T)
    mean = W.T @ np.linalg.solve(L, y)
    variance = kernel.variance + micro + tau2 - (W ** 2).sum(axis=0)
    return mean, variance


def test_equation_r3_is_the_gp_of_all_rows():
    """The group means' GP (known variances tau^2 / n_g, noise s_m^2) with Eq. R.3 at the
    training inputs predicts what the GP of every row with the micro-scale term does, at
    training inputs and new ones, to rounding."""
    X, y, inputs, _ = _repeated(distinct=60, rows=150, measurement=0.05)
    grouped = replicates.group_rows(X, y)
    kernel = sg.kernels.get("matern52").with_params(length_scale=[0.8, 1.1], variance=0.7)
    micro = 0.09
    model = ExactGPRegressor(kernel=kernel, noise_variance=micro, optimize=False,
                             normalize_X=False, normalize_y=False).fit(
        grouped.inputs, grouped.means, sample_noise_variance=grouped.known_variances())
    rng = np.random.default_rng(3)
    Xt = np.vstack([inputs[:20], rng.uniform(-2, 2, size=(20, 2))])
    latent_mean, latent_std = model.predict(Xt, return_std=True)
    mean, variance = grouped.new_observation(Xt, latent_mean, latent_std ** 2, micro)
    expected_mean, expected_variance = _dense_prediction(X, y, Xt, kernel, micro,
                                                         grouped.measurement_variance)
    np.testing.assert_allclose(mean, expected_mean, atol=1e-9)
    np.testing.assert_allclose(variance, expected_variance, rtol=1e-7)


def test_gp_regressor_learns_the_split_and_round_trips(tmp_path):
    X, y, inputs, values = _repeated(seed=4, distinct=100, rows=240, micro=0.3,
                                     measurement=0.01)
    model = sg.GPRegressor(random_state=0, time_budget=20).fit(X, y)
    grouped = model.replicates_
    assert grouped is not None and "repeat an input" in model.selection_.notes[0]
    # the micro-scale variance (0.09) is the learned noise, within a factor of two
    assert 0.045 < model.noise_variance_ < 0.18
    # at the training inputs a new observation is the input's value to the measurement
    # error (sd 0.01): RMSE below 0.03 where the smooth GP alone is off by the micro-scale
    mean, std = model.predict(inputs, return_std=True, include_noise=True)
    assert np.sqrt(np.mean((mean - values) ** 2)) < 0.03
    smooth = model.estimator_.predict(inputs)
    assert np.sqrt(np.mean((smooth - values) ** 2)) > 0.1
    assert np.all(std < 0.05)
    # the mean alone (no std computed) is the same mean
    np.testing.assert_array_equal(model.predict(inputs), mean)
    # the latent std leaves out the measurement error only
    _, latent = model.predict(inputs, return_std=True)
    np.testing.assert_allclose(latent ** 2, std ** 2 - grouped.measurement_variance,
                               atol=1e-12)
    lower, upper = model.predict_interval(inputs, 0.9, include_noise=True)
    assert np.all(lower < mean) and np.all(mean < upper)
    with pytest.raises(NotImplementedError, match="repeated inputs"):
        model.predict(inputs, return_cov=True)
    with pytest.raises(NotImplementedError, match="repeated inputs"):
        model.sample_y(inputs)
    path = tmp_path / "model.npz"
    sg.io.save(model, path)
    loaded = sg.io.load(path)
    np.testing.assert_allclose(loaded.predict(inputs, return_std=True, include_noise=True)[1],
                               std, rtol=1e-12)
    np.testing.assert_allclose(loaded.log_predictive_density(X[:30], y[:30]),
                               model.log_predictive_density(X[:30], y[:30]), rtol=1e-12)


def test_known_noise_variances_explicit_models_and_tolerances_keep_the_rows():
    """They fit the rows as given, and the copies' identical targets drive the noise to its
    floor, which the fit says."""
    X, y, _, _ = _repeated(seed=5)
    with pytest.warns(sg.errors.FitQualityWarning, match="Repeated inputs"):
        model = sg.GPRegressor(random_state=0, time_budget=10).fit(
            X, y, sample_noise_variance=np.full(len(y), 1e-4))
    assert model.replicates_ is None
    with pytest.warns(sg.errors.FitQualityWarning, match="repeat an earlier row"):
        model = sg.GPRegressor(approximation="exact").fit(X, y)
    assert model.replicates_ is None
    model = sg.GPRegressor(random_state=0, time_budget=10, tolerance=1.1).fit(X, y)
    assert model.replicates_ is None


def test_predictions_follow_the_targets_units():
    """Targets times 10: means and stds times 10, at training inputs and new ones (the
    micro-scale variance is the estimator's standardized noise variance in target units)."""
    X, y, inputs, _ = _repeated(seed=6, distinct=80, rows=200)
    Xt = np.vstack([inputs[:10], np.random.default_rng(7).uniform(-2, 2, size=(10, 2))])
    found = []
    for scale in (1.0, 10.0):
        model = sg.GPRegressor(random_state=0, time_budget=10, calibrate_variance=False,
                               kernel="gaussian").fit(X, scale * y)
        mean, std = model.predict(Xt, return_std=True, include_noise=True)
        found.append((mean / scale, std / scale))
    np.testing.assert_allclose(found[1][0], found[0][0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(found[1][1], found[0][1], rtol=1e-6)


def test_rows_sharing_a_hash_key_are_told_apart(monkeypatch):
    """Every key equal (a mixing function that maps all to 0): the groups come from
    comparing the rows themselves, and distinct rows are not grouped."""
    monkeypatch.setattr(replicates, "_mix", lambda z: np.zeros_like(z))
    X, y, _, _ = _repeated(seed=8)
    inputs, index, counts = replicates._distinct(X)
    expected_inputs, expected_index, expected_counts = np.unique(
        X, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(inputs, expected_inputs)
    np.testing.assert_array_equal(index, expected_index.ravel())
    np.testing.assert_array_equal(counts, expected_counts)
    assert replicates._distinct(np.random.default_rng(9).normal(size=(40, 3))) is None
    grouped = replicates.group_rows(X, y)
    others = np.random.default_rng(9).normal(size=(5, 2))
    expected = np.concatenate([expected_index.ravel()[:20], np.full(5, -1)])
    np.testing.assert_array_equal(grouped.groups_of(np.vstack([X[:20], others])), expected)


def test_groups_of_finds_training_inputs_and_only_them():
    X, y, inputs, _ = _repeated(seed=13)
    grouped = replicates.group_rows(X, y)
    rng = np.random.default_rng(14)
    queries = np.vstack([X, rng.uniform(-2, 2, size=(50, 2)), X[:5] + 1e-12])
    lookup = {row.tobytes(): g for g, row in enumerate(grouped.inputs)}
    expected = [lookup.get(row.tobytes(), -1) for row in queries]
    np.testing.assert_array_equal(grouped.groups_of(queries), expected)
    assert np.all(grouped.groups_of(X) >= 0) and np.all(grouped.groups_of(queries[-55:]) < 0)


def test_a_model_file_with_a_broken_grouping_is_refused(tmp_path):
    X, y, _, _ = _repeated(seed=10, distinct=60, rows=140)
    model = sg.GPRegressor(random_state=0, time_budget=10).fit(X, y)
    path = tmp_path / "model.npz"
    sg.io.save(model, path)
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["replicates.counts"] = arrays["replicates.counts"] + 1.0     # rows not in the fit
    broken = tmp_path / "broken.npz"
    np.savez(broken, **arrays)
    with pytest.raises(sg.errors.InvalidModelFileError, match="grouping of repeated inputs"):
        sg.io.load(broken)
    del arrays["replicates.means"]
    np.savez(broken, **arrays)
    with pytest.raises(sg.errors.InvalidModelFileError, match="replicates"):
        sg.io.load(broken)


def test_split_nugget_forces_or_forbids_the_split():
    X, y, _, _ = _repeated(seed=11, copies=0.0)             # the rules say no (no copies)
    assert sg.GPRegressor(random_state=0, time_budget=10).fit(X, y).replicates_ is None
    forced = sg.GPRegressor(random_state=0, time_budget=10, split_nugget=True).fit(X, y)
    assert forced.replicates_ is not None and "repeat an input" in forced.selection_.notes[0]
    X, y, _, _ = _repeated(seed=11)                          # the rules say yes
    assert sg.GPRegressor(random_state=0, time_budget=10, split_nugget=False,
                          calibrate_variance=False).fit(X, y).replicates_ is None
    for extra in ({"sample_noise_variance": np.full(len(y), 1e-4)},):
        with pytest.raises(ValueError, match="split_nugget=True"):
            sg.GPRegressor(time_budget=10, split_nugget=True).fit(X, y, **extra)
    with pytest.raises(ValueError, match="split_nugget=True"):
        sg.GPRegressor(time_budget=10, split_nugget=True, tolerance=1.1).fit(X, y)
    with pytest.raises(ValueError, match="split_nugget only apply"):
        sg.GPRegressor(approximation="exact", split_nugget=True).fit(X, y)


def test_command_line_splits_and_can_be_told_not_to(tmp_path):
    """``scalegp fit`` (auto) splits the nugget of repeated inputs, says so, stores the
    groups and predicts from them; ``--no-nugget-split`` fits the rows as given."""
    import subprocess
    import sys
    X, y, _, _ = _repeated(seed=12, distinct=80, rows=180)
    table = tmp_path / "train.csv"
    table.write_text("a,b,target\n" + "".join(f"{float(u)!r},{float(v)!r},{float(w)!r}\n"
                                              for (u, v), w in zip(X, y)))
    found = {}
    for name, extra in (("split", ()), ("rows", ("--no-nugget-split",))):
        model = tmp_path / f"{name}.npz"
        result = subprocess.run(
            [sys.executable, "-m", "scalegp", "fit", str(table), "--target", "target",
             "--time-budget", "10", "--seed", "0", "--out", str(model), *extra],
            capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        found[name] = (result.stdout + result.stderr, sg.io.load(model))
    assert "repeat an input" in found["split"][0]
    assert found["split"][1].replicates_ is not None
    distinct = len(found["split"][1].replicates_.inputs)
    assert f"log marginal likelihood (of the {distinct} inputs' means)" in found["split"][0]
    assert "inputs' means" not in found["rows"][0]
    assert "repeat an input" not in found["rows"][0]
    assert found["rows"][1].replicates_ is None and found["rows"][1].split_nugget is False


def test_a_small_spread_against_a_large_signal_is_measured_not_floored():
    """Targets spread within the groups by far less than the floor of the targets' variance
    (a signal of sd 700, a measurement error of sd 0.5 on a fifth of the repeated rows):
    tau^2 is their pooled within-group variance (Eq. R.2), not the floor of identical
    targets, 17 times larger."""
    rng = np.random.default_rng(15)
    inputs = rng.uniform(-2, 2, size=(150, 2))
    values = 1000 * np.sin(inputs[:, 0]) + rng.normal(size=150)
    extra = rng.integers(0, 150, 150)
    y = np.concatenate([values, values[extra] + np.where(
        rng.random(150) < 0.8, 0.0, rng.normal(scale=0.5, size=150))])
    X = np.vstack([inputs, inputs[extra]])
    grouped = replicates.group_rows(X, y)
    _, index, counts = replicates._distinct(X)
    means = np.bincount(index, weights=y) / counts
    pooled = np.sum((y - means[index]) ** 2) / (len(y) - len(counts))
    assert pooled < replicates.MIN_MEASUREMENT_VARIANCE * np.var(y)
    assert grouped.within > 0 and "identical" not in grouped.note()
    np.testing.assert_allclose(grouped.measurement_variance, pooled, rtol=1e-9)


def test_a_model_file_with_an_inconsistent_grouping_is_refused(tmp_path):
    """Counts that are not whole, distinct inputs that repeat, a measurement-error variance
    that is not Eq. R.2's for the stored groups, and a group too few for the fitted model."""
    import json
    X, y, _, _ = _repeated(seed=16, distinct=60, rows=140, measurement=0.05)
    model = sg.GPRegressor(random_state=0, time_budget=5, calibrate_variance=False).fit(X, y)
    assert model.replicates_.within > 0
    path = tmp_path / "model.npz"
    sg.io.save(model, path)
    with np.load(path) as stored:
        arrays = dict(stored)
    metadata = json.loads(bytes(arrays["metadata"]).decode())
    counts = arrays["replicates.counts"]
    single, double = np.flatnonzero(counts == 1)[0], np.flatnonzero(counts >= 2)[0]

    def fractional(a, m):
        a["replicates.counts"][[single, double]] += [0.5, -0.5]

    def repeated(a, m):
        a["replicates.inputs"][1] = a["replicates.inputs"][0]

    def measurement(a, m):
        m["front_door"]["replicates"]["measurement_variance"] *= 100

    def floored(a, m):
        m["front_door"]["replicates"]["within"] = 0.0

    def dropped(a, m):
        for name in ("inputs", "means", "counts"):
            a["replicates." + name] = np.delete(a["replicates." + name], single, axis=0)
            m["arrays"]["replicates." + name]["shape"][0] -= 1

    for change, match in ((fractional, "whole numbers"), (repeated, "distinct rows"),
                          (measurement, "Eq. R.2"), (floored, "Eq. R.2"),
                          (dropped, "59 distinct inputs")):
        broken_arrays = {name: value.copy() for name, value in arrays.items()}
        broken_metadata = json.loads(json.dumps(metadata))
        change(broken_arrays, broken_metadata)
        broken_arrays["metadata"] = np.frombuffer(json.dumps(broken_metadata).encode(),
                                                  dtype=np.uint8)
        broken = tmp_path / f"{change.__name__}.npz"
        np.savez(broken, **broken_arrays)
        with pytest.raises(sg.errors.InvalidModelFileError, match=match):
            sg.io.load(broken)


def test_targets_whose_variance_is_not_a_float_are_not_split():
    """Targets of 1e-160 (their variance below the smallest normal float: tau^2 was floored
    at 2e-314, the predictive std of a training input 1,500 times the targets' scale) or of
    1e160 (an infinite variance): the rules fit the rows as given, and split_nugget=True
    says why it cannot split."""
    X, y, _, _ = _repeated(seed=17, distinct=60, rows=140)
    assert replicates.group_rows(X, y) is not None
    for scale in (1e-160, 1e160):
        assert replicates.group_rows(X, scale * y) is None
        with pytest.raises(ValueError, match="too large or too small"):
            replicates.group_rows(X, scale * y, rules=False)
    with pytest.raises(ValueError, match="too large or too small"):
        sg.GPRegressor(time_budget=5, split_nugget=True).fit(X, 1e-160 * y)
    constant = replicates.group_rows(X, np.full(len(y), 1e-160), rules=False)
    assert constant.within == 0 and constant.measurement_variance > 0
