"""The command line's inputs: column mapping, headers, argument checks, starting
hyperparameters, standardization, fit diagnostics and exit codes (run in-process)."""

import math

import warnings

import numpy as np
import pytest

import scalegp as sg
from scalegp import cli
from scalegp.data.tables import TableError, read_table


def run(capsys, *args):
    """(exit code, stdout, stderr) of ``scalegp ARGS``; argparse errors exit with 2."""
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def write_csv(path, header, rows):
    lines = ([",".join(header)] if header else []) + [
        ",".join(repr(float(v)) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(60)
    return X, y


@pytest.fixture
def model(tmp_path, data, capsys):
    X, y = data
    train = write_csv(tmp_path / "train.csv", ["a", "b", "target"], np.column_stack([X, y]))
    path = tmp_path / "model.npz"
    code, _, err = run(capsys, "fit", train, "--target", "target", "--approximation", "exact",
                       "--out", path)
    assert code == 0, err
    return path


def predictions(path):
    return np.loadtxt(path, delimiter=",", skiprows=1)


# ----------------------------------------------------------------- predict: columns by name
def test_predict_maps_columns_by_name(tmp_path, data, model, capsys):
    X, _ = data
    plain = write_csv(tmp_path / "plain.csv", ["a", "b"], X)
    reordered = write_csv(tmp_path / "reordered.csv", ["extra", "b", "a"],
                          np.column_stack([np.full(len(X), 9.0), X[:, 1], X[:, 0]]))
    for name, source in (("p1.csv", plain), ("p2.csv", reordered)):
        code, _, err = run(capsys, "predict", model, source, "--out", tmp_path / name)
        assert code == 0, err
    expected = sg.load(model).predict(X, return_std=True)
    np.testing.assert_allclose(predictions(tmp_path / "p1.csv"), np.column_stack(expected),
                               rtol=1e-12)
    np.testing.assert_array_equal(predictions(tmp_path / "p2.csv"),
                                  predictions(tmp_path / "p1.csv"))


def test_predict_missing_name_is_an_error_naming_it(tmp_path, data, model, capsys):
    X, _ = data
    renamed = write_csv(tmp_path / "renamed.csv", ["a", "c"], X)    # same count, other name
    code, _, err = run(capsys, "predict", model, renamed, "--out", tmp_path / "p.csv")
    assert code == 2
    assert "missing input column(s) b" in err
    assert not (tmp_path / "p.csv").exists()


def test_predict_without_header_goes_by_position_and_checks_the_count(tmp_path, data, model,
                                                                      capsys):
    X, _ = data
    headerless = write_csv(tmp_path / "headerless.csv", None, X)
    code, _, err = run(capsys, "predict", model, headerless, "--out", tmp_path / "p.csv")
    assert code == 0, err
    assert "by position" in err
    np.testing.assert_allclose(predictions(tmp_path / "p.csv")[:, 0],
                               sg.load(model).predict(X), rtol=1e-12)
    three = write_csv(tmp_path / "three.csv", None, np.column_stack([X, X[:, 0]]))
    code, _, err = run(capsys, "predict", model, three, "--out", tmp_path / "q.csv")
    assert code == 2
    assert "matched by position" in err and "model's 2 column(s) (a, b)" in err


# ----------------------------------------------------------------- headers
def test_duplicate_header_names_are_refused(tmp_path, data, capsys):
    X, y = data
    path = write_csv(tmp_path / "dup.csv", ["a", "a", "y"], np.column_stack([X, y]))
    with pytest.raises(TableError, match=r"duplicate column name 'a' \(columns 0 and 1"):
        read_table(path)
    code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", "--out", tmp_path / "m.npz")
    assert code == 2 and "duplicate column name 'a'" in err
    assert not (tmp_path / "m.npz").exists()


def test_header_rule(tmp_path, data, capsys):
    X, y = data
    numeric = write_csv(tmp_path / "numeric.csv", ["1990", "1991", "2000"],
                        np.column_stack([X, y]))
    auto = read_table(numeric)
    assert not auto.has_header and auto.values.shape[0] == len(y) + 1    # first line is data
    named = read_table(numeric, header="yes")
    assert named.has_header and named.columns == ("1990", "1991", "2000")
    np.testing.assert_array_equal(named.values, np.column_stack([X, y]))
    with pytest.raises(TableError, match="not numeric"):
        read_table(write_csv(tmp_path / "named.csv", ["a", "b", "y"], X[:, [0, 1, 1]]),
                   header="no")
    # fit says how the first line was read; --header yes keeps the numeric names
    code, _, err = run(capsys, "fit", numeric, "--target", "2", "--approximation", "exact",
                       "--out", tmp_path / "auto.npz")
    assert code == 0 and "no header row" in err and "--header yes" in err
    code, _, err = run(capsys, "fit", numeric, "--target", "2000", "--header", "yes",
                       "--approximation", "exact", "--out", tmp_path / "named.npz")
    assert code == 0, err
    assert sg.io.load_table_columns(tmp_path / "named.npz").inputs == ("1990", "1991")
    # predict under auto recognizes the model's numeric names in the first line
    code, _, err = run(capsys, "predict", tmp_path / "named.npz", numeric,
                       "--out", tmp_path / "p.csv")
    assert code == 0, err
    assert "by name" in err and predictions(tmp_path / "p.csv").shape == (len(y), 2)
    help_text = _help("fit")
    assert "'auto' (default) reads the first line as column names when at least one" in help_text


def _help(command):
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return " ".join(action.choices[command].format_help().split())


# ----------------------------------------------------------------- argument checks
@pytest.mark.parametrize("args, fragment", [
    (["--subsample", "-5"], "argument --subsample: must be an integer >= 2, got -5"),
    (["--subsample", "1"], "argument --subsample: must be an integer >= 2, got 1"),
    (["--test-fraction", "0"], "argument --test-fraction: must lie strictly between 0 and 1"),
    (["--test-fraction", "1"], "argument --test-fraction: must lie strictly between 0 and 1"),
    (["--test-fraction", "1.5"], "argument --test-fraction: must lie strictly between 0 and 1"),
    (["--n-restarts", "-1"], "argument --n-restarts: must be an integer >= 0, got -1"),
    (["--n-components", "0"], "argument --n-components: must be an integer >= 1, got 0"),
    (["--length-scale", "-1"], "argument --length-scale: must be a finite number > 0"),
    (["--noise-variance", "nan"], "argument --noise-variance: must be a finite number > 0"),
])
def test_bad_evaluate_arguments_are_refused(tmp_path, data, capsys, args, fragment):
    X, y = data
    path = write_csv(tmp_path / "d.csv", ["a", "b", "y"], np.column_stack([X, y]))
    code, out, err = run(capsys, "evaluate", path, "--target", "y", *args)
    assert code == 2
    assert fragment in err and out == ""


def test_approximation_names_are_case_insensitive(tmp_path, data, capsys):
    X, y = data
    path = write_csv(tmp_path / "d.csv", ["a", "b", "y"], np.column_stack([X, y]))
    for name, expected in (("RFF", sg.LowRankGPRegressor), ("Exact", sg.ExactGPRegressor)):
        out = tmp_path / f"{name}.npz"
        size = ["--n-components", 32] if name == "RFF" else []     # exact has no features
        code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", name,
                           *size, "--out", out)
        assert code == 0, err
        assert type(sg.load(out)) is expected
    assert sg.load(tmp_path / "RFF.npz").approximation == sg.Features("rff", n_components=32)
    assert sg.features.get("GLF") is sg.features.get("glf")
    code, out, err = run(capsys, "evaluate", path, "--target", "y", "--approximations",
                         "RFF,Orf", "--n-components", 16, "--subsample", 40)
    assert code == 0, err
    assert "| rff |" in out and "| orf |" in out


# ----------------------------------------------------------------- starting hyperparameters
def test_length_scale_per_dimension(tmp_path, data, capsys):
    X, y = data
    path = write_csv(tmp_path / "d.csv", ["a", "b", "y"], np.column_stack([X, y]))
    out = tmp_path / "m.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "exact", "--ard",
                       "--length-scale", 0.5, 2, "--variance", 3, "--noise-variance", 0.2,
                       "--no-optimize", "--out", out)
    assert code == 0, err
    fitted = sg.load(out)
    np.testing.assert_array_equal(fitted.kernel_.length_scale, [0.5, 2.0])
    assert fitted.kernel_.variance == 3.0 and fitted.noise_variance_ == 0.2
    code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", "--length-scale", 0.5, 2,
                       "--out", tmp_path / "x.npz")
    assert code == 2 and "--length-scale got 2 values: give one, or one per input (2) with "\
        "--ard" in err
    code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", "--ard", "--length-scale", 1, 2, 3,
                       "--out", tmp_path / "x.npz")
    assert code == 2 and "--length-scale got 3 values for 2 input(s)" in err


def test_start_outside_the_bounds_names_both(tmp_path, data, capsys):
    X, y = data
    path = write_csv(tmp_path / "d.csv", ["a", "b", "y"], np.column_stack([X, y]))
    for flag, value, bounds_flag in (("--length-scale", "1", "--length-scale-bounds"),
                                     ("--variance", "1", "--variance-bounds"),
                                     ("--noise-variance", "1", "--noise-variance-bounds")):
        code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", flag, value, bounds_flag, 2, 10,
                           "--out", tmp_path / "x.npz")
        assert code == 2
        assert f"{flag} 1 lies outside {bounds_flag} [2, 10]" in err


def test_length_scale_bounds_2_10_work(tmp_path, data, capsys):
    X, y = data
    path = write_csv(tmp_path / "d.csv", ["a", "b", "y"], np.column_stack([X, y]))
    fixed = tmp_path / "fixed.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "exact",
                       "--length-scale-bounds", 2, 10, "--no-optimize", "--out", fixed)
    assert code == 0, err
    assert sg.load(fixed).kernel_.length_scale[0] == pytest.approx(math.sqrt(20), rel=1e-14)
    learned = tmp_path / "learned.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--approximation", "exact",
                       "--length-scale-bounds", 2, 10, "--out", learned)
    assert code == 0, err
    assert 2 <= sg.load(learned).kernel_.length_scale[0] <= 10


# ----------------------------------------------------------------- standardization
def test_inputs_are_standardized_by_default(tmp_path, data, capsys):
    X, y = data
    units = np.array([1e6, 1e-6])
    plain = write_csv(tmp_path / "plain.csv", ["a", "b", "y"], np.column_stack([X, y]))
    scaled = write_csv(tmp_path / "scaled.csv", ["a", "b", "y"],
                       np.column_stack([X * units, y]))
    for name, source in (("plain", plain), ("scaled", scaled)):
        code, _, err = run(capsys, "fit", source, "--target", "y", "--approximation", "exact",
                           "--out", tmp_path / f"{name}.npz")
        assert code == 0, err
        assert "inputs standardized per column, (x - mean) / std" in err
        code, _, err = run(capsys, "predict", tmp_path / f"{name}.npz", source,
                           "--out", tmp_path / f"{name}-pred.csv")
        assert code == 0, err
    np.testing.assert_allclose(predictions(tmp_path / "scaled-pred.csv"),
                               predictions(tmp_path / "plain-pred.csv"), rtol=1e-6, atol=1e-9)
    model = sg.load(tmp_path / "scaled.npz")
    assert model.normalize_X is True
    code, _, err = run(capsys, "fit", scaled, "--target", "y", "--approximation", "exact",
                       "--no-standardize", "--out", tmp_path / "raw.npz")
    assert code == 0, err
    assert "inputs not standardized (--no-standardize)" in err
    assert sg.load(tmp_path / "raw.npz").normalize_X is False


# ----------------------------------------------------------------- diagnostics, exit codes
def test_fit_prints_diagnostics_and_exit_codes(tmp_path, capsys):
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 3, size=(60, 1))
    huge = write_csv(tmp_path / "huge.csv", ["x", "y"], np.column_stack([x, 1e300 * np.sin(x)]))
    code, _, err = run(capsys, "fit", "--approximation", "rff", huge, "--target", "y", "--no-normalize-y",
                       "--n-components", 16, "--out", tmp_path / "bad.npz")
    assert code == cli.EXIT_NON_FINITE == 1
    assert "error: the fit is not usable: non-finite log marginal likelihood" in err
    assert not (tmp_path / "bad.npz").exists()
    code, _, err = run(capsys, "fit", "--approximation", "rff", huge, "--target", "y", "--n-components", 16,
                       "--out", tmp_path / "good.npz")
    assert code == 0, err
    code, _, err = run(capsys, "predict", tmp_path / "good.npz", huge, "--out", tmp_path / "p.csv")
    assert code == 0, err
    assert np.all(np.isfinite(predictions(tmp_path / "p.csv")))
    # a fit worse than the noise-only model is printed as a warning line (exit 0)
    X = np.column_stack([rng.uniform(0, 1, 300) * 1e6, rng.uniform(0, 1, 300) * 1e-6])
    y = np.sin(6 * X[:, 0] / 1e6) + np.cos(4 * X[:, 1] / 1e-6) + 0.1 * rng.standard_normal(300)
    scales = write_csv(tmp_path / "scales.csv", ["a", "b", "y"], np.column_stack([X, y]))
    code, _, err = run(capsys, "fit", "--approximation", "rff", scales, "--target", "y", "--no-standardize",
                       "--n-components", 64, "--out", tmp_path / "s.npz")
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("scalegp fit: warning: ")]
    assert any("below the noise-only model's" in line for line in lines), err
    code, _, err = run(capsys, "fit", "--approximation", "rff", scales, "--target", "y", "--n-components", 64,
                       "--out", tmp_path / "t.npz")
    assert code == 0 and "below the noise-only model's" not in err


# ----------------------------------------------------------------- per-row noise variances
@pytest.mark.parametrize("approximation, estimator", [
    ("exact", sg.ExactGPRegressor), ("vecchia", sg.VecchiaGPRegressor)])
def test_noise_variance_column_is_not_an_input_and_equals_the_estimator(
        tmp_path, data, capsys, approximation, estimator):
    X, y = data
    variances = np.random.default_rng(2).uniform(0, 0.5, size=len(y))
    path = write_csv(tmp_path / "d.csv", ["a", "v", "b", "y"],
                     np.column_stack([X[:, 0], variances, X[:, 1], y]))
    out = tmp_path / "m.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--noise-variance-column", "v",
                       "--approximation", approximation, "--no-optimize", "--out", out)
    assert code == 0, err
    fitted = sg.load(out)
    assert type(fitted) is estimator and fitted.n_features_in_ == 2
    assert sg.io.load_table_columns(out) == sg.io.TableColumns(("a", "b"), "y")
    fixed = dict(kernel=fitted.kernel, noise_variance=fitted.noise_variance, optimize=False,
                 normalize_y=True, normalize_X=True)
    reference = estimator(**fixed).fit(X, y, sample_noise_variance=variances)
    np.testing.assert_allclose(fitted.predict(X[:5]), reference.predict(X[:5]), rtol=1e-12)
    without = estimator(**fixed).fit(X, y)
    assert not np.allclose(fitted.predict(X[:5]), without.predict(X[:5]), rtol=1e-3)


def test_noise_variance_column_with_the_vfe_bound_and_learned_knots(tmp_path, data, capsys):
    """Nystrom-VFE with learned knots takes the column (Eq. V.4 of docs/nystrom.md): the
    model equals the estimator's fit with the same variances, and differs without them."""
    X, y = data
    variances = np.random.default_rng(2).uniform(0, 0.5, size=len(y))
    path = write_csv(tmp_path / "d.csv", ["a", "b", "v", "y"], np.column_stack([X, variances, y]))
    out = tmp_path / "m.npz"
    code, _, err = run(capsys, "fit", path, "--target", "y", "--noise-variance-column", "v",
                       "--approximation", "nystrom", "--objective", "vfe", "--knots", "random",
                       "--n-components", "12", "--learn-knots", "5", "--seed", "0",
                       "--out", out)
    assert code == 0, err
    fitted = sg.load(out)
    approximation = sg.Nystrom(n_components=12, knots="random", objective="vfe", learn_knots=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sg.errors.ConvergenceWarning)    # 5 iterations
        reference = sg.LowRankGPRegressor(approximation=approximation, random_state=0).fit(
            X, y, sample_noise_variance=variances)
        without = sg.LowRankGPRegressor(approximation=approximation, random_state=0).fit(X, y)
    assert fitted.noise_variance_ == pytest.approx(reference.noise_variance_, rel=1e-10)
    np.testing.assert_allclose(fitted.predict(X[:5]), reference.predict(X[:5]), rtol=1e-10)
    assert not np.isclose(without.noise_variance_, reference.noise_variance_, rtol=1e-2)


def test_noise_variance_column_must_be_non_negative(tmp_path, data, capsys):
    X, y = data
    variances = np.full(len(y), 0.1)
    variances[7] = -1.0
    path = write_csv(tmp_path / "d.csv", ["a", "b", "v", "y"], np.column_stack([X, variances, y]))
    code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", "--noise-variance-column", "v",
                       "--out", tmp_path / "m.npz")
    assert code != 0 and "must be >= 0; data row 8 has -1" in err
    code, _, err = run(capsys, "fit", "--approximation", "rff", path, "--target", "y", "--noise-variance-column", "y",
                       "--out", tmp_path / "m.npz")
    assert code != 0 and "is the target column" in err
