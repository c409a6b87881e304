"""Model files written before the components declared their sections (issue 25, "io by
declaration") still load, bit-identically.

``tests/model_files_v1/`` holds one small file per kind of model (every family of feature
map's storage: Fourier arrays, SORF's diagonals, Gauss-Legendre's integer and reported arrays,
Maclaurin's complex sketch, Nystrom's knots, random projection's nullable scalars; signed eigen
and repaired systems; input standardization; the exact GP; each local kind; the Gibbs
sampler), written by the scalegp of commit 75122de with ``tests/model_files_v1/make.py``, and
the predictions that model made at six test inputs (equal bit for bit when this test was
written).
"""

from pathlib import Path

import numpy as np
import pytest

import scalegp as sg

FOLDER = Path(__file__).resolve().parent / "model_files_v1"
KINDS = sorted(path.stem for path in FOLDER.glob("*.npz") if path.stem != "expected")


def test_every_kind_is_there():
    assert len(KINDS) == 15


@pytest.mark.parametrize("kind", KINDS)
def test_an_old_model_file_loads_and_predicts_as_it_did(kind):
    with np.load(FOLDER / "expected.npz") as expected:
        X_test, mean, std = (expected["X_test"], expected[f"{kind}.mean"],
                             expected[f"{kind}.std"])
    model = sg.load(FOLDER / f"{kind}.npz")
    got_mean, got_std = model.predict(X_test, return_std=True)
    # bit-identical when written (same machine, same code); a tolerance of 1e-12 leaves room
    # for a later change of the prediction's rounding, far below any misread array
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_std, std, rtol=1e-12, atol=1e-14)
