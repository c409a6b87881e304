"""``scalegp fit --approximation vecchia`` and ``scalegp predict`` through ``scalegp.cli.main``:
the model the command line fits is the estimator's, its file predicts as the estimator does,
and the flags it would ignore, a per-row noise column and --dask-scheduler are refused."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import cli


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 3, size=(200, 2))
    y = np.sin(3 * X[:, 0]) + np.cos(2 * X[:, 1]) + 0.1 * rng.standard_normal(200)
    path = tmp_path / "train.csv"
    lines = ["a,b,y"] + [f"{float(u)!r},{float(v)!r},{float(w)!r}" for (u, v), w in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path, X, y


def run(capsys, *argv):
    code = cli.main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_fit_and_predict_are_the_estimators(tmp_path, table, capsys):
    path, X, y = table
    model = tmp_path / "vecchia.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "vecchia",
                       "--n-neighbors", 12, "--ordering", "random", "--kernel", "matern32",
                       "--ard", "--out", model)
    assert code == 0, err
    assert "fitted vecchia on 200 rows x 2 inputs" in err
    loaded = sg.load(model)
    assert type(loaded) is sg.VecchiaGPRegressor
    assert (loaded.n_neighbors, loaded.ordering, loaded.random_state) == (12, "random", 0)
    # the same model in Python: the command line's defaults are the estimator's (seed 0)
    direct = sg.VecchiaGPRegressor(kernel=sg.Matern(nu=1.5, length_scale=[1.0, 1.0]),
                                   n_neighbors=12, ordering="random", random_state=0).fit(X, y)
    assert loaded.log_marginal_likelihood_value_ == direct.log_marginal_likelihood_value_
    np.testing.assert_array_equal(loaded.kernel_.theta, direct.kernel_.theta)
    out = tmp_path / "pred.csv"
    code, _, err = run(capsys, "predict", model, path, "--out", out)
    assert code == 0, err
    written = np.loadtxt(out, delimiter=",", skiprows=1)
    mean, std = direct.predict(X, return_std=True)
    np.testing.assert_allclose(written[:, 0], mean, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(written[:, 1], std, rtol=1e-14, atol=1e-14)
    assert np.sqrt(np.mean((mean - y) ** 2)) < 0.15


def test_the_vecchia_flags_reach_the_estimator(tmp_path, table, capsys):
    from scalegp.cli.fit import _make_estimator
    args = cli.build_parser().parse_args([
        "fit", "data.csv", "--target", "y", "--out", "m.npz", "--approximation", "Vecchia",
        "--n-neighbors", "7", "--n-neighbors-predict", "40", "--ordering", "grid-maximin",
        "--optimizer", "fisher", "--n-jobs", "2", "--no-optimize", "--noise-variance", "0.2",
        "--learning-schedule", "2000", "8000", "ALL", "--learning-tolerance", "0.01"])
    built = _make_estimator(args, n_dims=2, n_samples=100)
    assert isinstance(built, sg.VecchiaGPRegressor)
    params = built.get_params()
    assert {name: params[name] for name in ("n_neighbors", "n_neighbors_predict", "ordering",
                                            "optimizer", "n_jobs", "optimize",
                                            "noise_variance", "learning_schedule",
                                            "learning_tolerance")} == {
        "n_neighbors": 7, "n_neighbors_predict": 40, "ordering": "grid-maximin",
        "optimizer": "fisher", "n_jobs": 2, "optimize": False, "noise_variance": 0.2,
        "learning_schedule": (2000, 8000, None), "learning_tolerance": 0.01}


def test_a_learning_schedule_from_the_command_line_is_the_estimators(tmp_path, table,
                                                                     capsys):
    path, X, y = table
    model = tmp_path / "staged.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "vecchia",
                       "--n-neighbors", 10, "--learning-schedule", 60, "all",
                       "--learning-tolerance", 0.01, "--out", model)
    assert code == 0, err
    loaded = sg.load(model)
    assert (loaded.learning_schedule, loaded.learning_tolerance) == ((60, None), 0.01)
    direct = sg.VecchiaGPRegressor(n_neighbors=10, learning_schedule=(60, None),
                                   learning_tolerance=0.01, random_state=0).fit(X, y)
    assert [stage["n_points"] for stage in direct.learning_history_][-1] == 200
    assert loaded.log_marginal_likelihood_value_ == direct.log_marginal_likelihood_value_
    np.testing.assert_array_equal(loaded.kernel_.theta, direct.kernel_.theta)
    code, out, err = run(capsys, "info", model)
    assert code == 0, err
    assert "prediction neighbours: 10 training points per test point" in out


def test_auto_prediction_neighbours_from_the_command_line():
    from scalegp.cli.fit import _make_estimator
    args = cli.build_parser().parse_args([
        "fit", "data.csv", "--target", "y", "--out", "m.npz", "--approximation", "vecchia",
        "--n-neighbors-predict", "AUTO"])
    assert _make_estimator(args, n_dims=2, n_samples=100).n_neighbors_predict == "auto"


@pytest.mark.parametrize("value", ["0", "-3", "half"])
def test_a_bad_learning_schedule_is_refused(tmp_path, table, capsys, value):
    path, _, _ = table
    with pytest.raises(SystemExit) as stopped:
        run(capsys, "fit", path, "--target", "y", "--approximation", "vecchia",
            "--learning-schedule", value, "all", "--out", tmp_path / "m.npz")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"must be an integer >= 1 or 'all', got '{value}'" in err, err
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("extra, message", [
    (("--n-components", "64"), "--n-components applies to feature maps / "
                               "--approximation nystrom; with --approximation vecchia it would "
                               "be ignored"),
    (("--local", "neighbors"), "--local applies to low-rank and local models"),
    (("--dtype", "float32"), "--dtype applies to low-rank and local models"),
    (("--sampler", "gibbs"), "--sampler gibbs does not take --approximation vecchia"),
    (("--dask-scheduler", "tcp://127.0.0.1:1"), "the Vecchia model holds its training rows, "
                                                "and its Dask path is the likelihood over row "
                                                "blocks only (scalegp.vecchia.distributed"),
])
def test_what_the_vecchia_model_would_ignore_is_refused(tmp_path, table, capsys, extra,
                                                        message):
    path, _, _ = table
    model = tmp_path / "refused.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "vecchia",
                       *extra, "--out", model)
    assert code == 2
    assert message in err, err
    assert not model.exists()


def test_the_vecchia_flags_are_refused_with_other_models(tmp_path, table, capsys):
    path, _, _ = table
    for extra in (("--approximation", "exact"), ("--approximation", "rff")):
        code, _, err = run(capsys, "fit", path, "--target", "y", *extra, "--n-neighbors", 5,
                           "--out", tmp_path / "m.npz")
        assert code == 2
        assert "--n-neighbors applies to --approximation vecchia" in err, err
