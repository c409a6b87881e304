"""The command line through a subprocess: round trips, and one-line errors with exit code 2."""

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import scalegp as sg
from scalegp import features


def scalegp(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "scalegp", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def csv_file(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(120, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(120)
    path = tmp_path / "train.csv"
    lines = ["a,b,target"] + [f"{u},{v},{w}" for (u, v), w in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_predict_round_trip(tmp_path, csv_file):
    model = tmp_path / "model.npz"
    fit = scalegp("fit", csv_file, "--target", "target", "--approximation", "rff",
                  "--n-components", 64, "--out", model, "--quiet")
    assert fit.returncode == 0, fit.stderr
    predictions = tmp_path / "pred.csv"
    result = scalegp("predict", model, csv_file, "--out", predictions, "--quiet")
    assert result.returncode == 0, result.stderr
    header, *rows = predictions.read_text().strip().splitlines()
    assert header == "mean,std" and len(rows) == 120
    values = np.array([[float(v) for v in row.split(",")] for row in rows])
    truth = np.loadtxt(csv_file, delimiter=",", skiprows=1)[:, 2]
    assert np.sqrt(np.mean((values[:, 0] - truth) ** 2)) < 0.2
    assert np.all(values[:, 1] > 0)


def test_n_jobs_threads_fit_the_serial_model_and_bad_counts_are_refused(tmp_path, csv_file):
    models = {}
    for n_jobs in (None, 2):
        models[n_jobs] = tmp_path / f"model-{n_jobs}.npz"
        flags = [] if n_jobs is None else ["--n-jobs", n_jobs]
        fit = scalegp("fit", csv_file, "--target", "target", "--approximation", "glf",
                      "--n-components", 64, "--out", models[n_jobs], "--quiet", *flags)
        assert fit.returncode == 0, fit.stderr
    X = np.loadtxt(csv_file, delimiter=",", skiprows=1)[:, :2]
    serial, threaded = (sg.load(models[n_jobs]).predict(X) for n_jobs in (None, 2))
    np.testing.assert_allclose(threaded, serial, rtol=1e-8, atol=1e-10)
    refused = scalegp("fit", "--approximation", "rff", csv_file, "--target", "target", "--n-jobs", 0,
                      "--out", tmp_path / "bad.npz")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "argument --n-jobs: must be a nonzero integer" in refused.stderr.splitlines()[-1]
    assert not (tmp_path / "bad.npz").exists()


def test_noise_variance_bounds_reach_the_model_and_are_checked(tmp_path, csv_file):
    model = tmp_path / "glf.npz"
    fit = scalegp("fit", csv_file, "--target", "target", "--approximation", "glf",
                  "--n-components", 64, "--noise-variance-bounds", 0.05, 0.5,
                  "--out", model, "--quiet")
    assert fit.returncode == 0, fit.stderr
    loaded = sg.load(model)
    assert 0.05 <= loaded.noise_variance_ <= 0.5
    assert loaded.noise_variance_bounds == (0.05, 0.5)
    bad = scalegp("fit", "--approximation", "rff", csv_file, "--target", "target", "--noise-variance-bounds", 1.0, 0.1,
                  "--out", tmp_path / "bad.npz", "--quiet")
    assert bad.returncode == 2
    assert "noise_variance_bounds must satisfy lower < upper" in bad.stderr
    assert not (tmp_path / "bad.npz").exists()


def test_target_by_index_and_exact(tmp_path, csv_file):
    result = scalegp("fit", csv_file, "--target", "2", "--approximation", "exact",
                     "--out", tmp_path / "m.npz", "--quiet")
    assert result.returncode == 0, result.stderr


def test_missing_file(tmp_path):
    assert_one_line_error(scalegp("fit", "--approximation", "rff", tmp_path / "nope.csv", "--target", "y",
                                  "--out", tmp_path / "m.npz"),
                          "nope.csv: no such file")


def test_non_numeric_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,city,y\n1,Paris,2\n2,Rome,3\n")
    assert_one_line_error(scalegp("fit", "--approximation", "rff", path, "--target", "y", "--out", tmp_path / "m.npz"),
                          "column 'city' is not numeric", "line 2", "'Paris'")


def test_nan_rows_error_or_dropped(tmp_path, csv_file):
    lines = csv_file.read_text().splitlines()
    lines[5] = "1.0,,0.5"
    lines[9] = "nan,1.0,0.5"
    csv_file.write_text("\n".join(lines) + "\n")
    assert_one_line_error(scalegp("fit", "--approximation", "rff", csv_file, "--target", "target",
                                  "--out", tmp_path / "m.npz"),
                          "data row 5 has a missing", "2 such row(s)", "--drop-missing")
    result = scalegp("fit", "--approximation", "rff", csv_file, "--target", "target", "--drop-missing",
                     "--n-components", 32, "--out", tmp_path / "m.npz")
    assert result.returncode == 0, result.stderr
    assert "dropped 2 row(s) with missing values" in result.stderr


def test_unknown_target(csv_file, tmp_path):
    assert_one_line_error(scalegp("fit", "--approximation", "rff", csv_file, "--target", "price",
                                  "--out", tmp_path / "m.npz"),
                          "no column 'price'", "a, b, target")


def test_unknown_approximation(csv_file, tmp_path):
    assert_one_line_error(scalegp("fit", csv_file, "--target", "target",
                                  "--approximation", "magic", "--out", tmp_path / "m.npz"),
                          "approximation must be one of", "rff", "got 'magic'")


def test_model_file_of_another_version(tmp_path, csv_file):
    model = tmp_path / "model.npz"
    assert scalegp("fit", "--approximation", "rff", csv_file, "--target", "target", "--n-components", 16,
                   "--out", model, "--quiet").returncode == 0
    with np.load(model, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    key = next(k for k, v in arrays.items() if v.dtype == np.uint8 or v.dtype.kind == "U")
    text = (arrays[key].tobytes().decode() if arrays[key].dtype == np.uint8
            else str(arrays[key]))
    metadata = json.loads(text)
    metadata["schema_version"] = 999
    encoded = json.dumps(metadata)
    arrays[key] = (np.frombuffer(encoded.encode(), dtype=np.uint8)
                   if arrays[key].dtype == np.uint8 else np.array(encoded))
    np.savez(model, **arrays)
    assert_one_line_error(scalegp("predict", model, csv_file, "--out", tmp_path / "p.csv"),
                          "version")


def test_corrupt_model_file(tmp_path, csv_file):
    model = tmp_path / "model.npz"
    model.write_bytes(b"this is not a model")
    assert_one_line_error(scalegp("predict", model, csv_file), "not a scalegp model")


def test_list_names_every_approximation():
    result = scalegp("list")
    assert result.returncode == 0
    for name in features.names():
        assert f"  {name} " in result.stdout


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_demo_smoke(tmp_path):
    out = tmp_path / "demo.png"
    result = scalegp("demo", "--subsample", 600, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "vecchia: test RMSE" in result.stderr and "NLPD" in result.stderr
    assert png_size(out) == (1500, 500)
    out.unlink()
    result = scalegp("demo", "--model", "neighbors", "--subsample", 600, "--local-neighbors",
                     60, "--out", out)
    assert result.returncode == 0, result.stderr
    assert "neighbors: test RMSE" in result.stderr and "NLPD" in result.stderr
    out.unlink()
    result = scalegp("demo", "--model", "global", "--subsample", 600, "--n-components", 64,
                     "--out", out)
    assert result.returncode == 0, result.stderr
    assert "glf: test RMSE" in result.stderr
    assert png_size(out) == (1500, 500)


def test_python_dash_m_and_version():
    result = scalegp("--version")
    assert result.returncode == 0 and result.stdout.startswith("scalegp ")
