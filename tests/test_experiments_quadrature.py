"""The quadrature experiments: smoke runs in quick mode (files exist, PNGs valid, the
constants note present), data discovery errors, and the sign-aware ridge classifier."""

import struct

import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier

from scalegp import experiments, features
from scalegp.experiments import quadrature as experiment


needs_uci = pytest.mark.skipif(not experiment.uci_available(),
                               reason="UCI CSV files not found (../shared/data/uci or "
                                      "SCALEGP_UCI_DIR); the experiments need them")


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@needs_uci
@pytest.mark.parametrize("name", ["quadrature-kernel-error", "quadrature-learning"])
def test_quick_run_writes_table_and_figure(name, tmp_path):
    assert name in experiments.names()
    paths = experiments.run(name, tmp_path, quick=True)
    assert {p.suffix for p in paths} == {".md", ".png"} and all(p.exists() for p in paths)
    for path in paths:
        if path.suffix == ".png":
            width, height = png_size(path)
            assert width > 100 and height > 100
    text = next(p for p in paths if p.suffix == ".md").read_text()
    assert "Paper setting, constants ours" in text
    for dataset in experiment.UCI_SETS:
        assert f"## {dataset}" in text
    assert "| rff |" in text and "| gq (subsampled) |" in text


def test_missing_uci_directory_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEGP_UCI_DIR", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="SCALEGP_UCI_DIR must name a directory"):
        experiments.run("quadrature-learning", tmp_path, quick=True)


def test_missing_letter_is_skipped_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("SCALEGP_LETTER_RDA", str(tmp_path / "LetterRecognition.rda"))
    reason = experiment.load_letter()
    assert isinstance(reason, str) and reason.startswith("letter skipped:")


def test_methods_cover_every_gaussian_map_and_the_variants():
    labels = [method.label for method in experiment.gaussian_methods()]
    gaussian = [n for n in features.names() if features.get(n).supports(experiment.Gaussian())]
    assert set(gaussian) <= set(labels)
    assert {"gq (subsampled)", "sgq (largest level)"} <= set(labels)


def test_signed_ridge_equals_ridge_classifier_without_signs_and_kernel_ridge_with_them():
    rng = np.random.default_rng(0)
    Psi, labels = rng.normal(size=(60, 8)), rng.integers(0, 3, size=60)
    Y = experiment.one_vs_rest_targets(labels, 3)
    W = experiment.signed_ridge_fit(Psi, None, Y, 0.5)
    reference = RidgeClassifier(alpha=0.5, fit_intercept=False).fit(Psi, labels)
    np.testing.assert_allclose(W, reference.coef_.T, rtol=1e-10, atol=1e-12)
    signs = np.where(np.arange(8) < 2, -1.0, 1.0)
    W = experiment.signed_ridge_fit(Psi, signs, Y, 0.5)
    K = (Psi * signs) @ Psi.T                      # kernel ridge with K~ = Psi S Psi^T
    np.testing.assert_allclose(Psi @ W, K @ np.linalg.solve(K + 0.5 * np.eye(60), Y),
                               rtol=1e-8, atol=1e-10)
