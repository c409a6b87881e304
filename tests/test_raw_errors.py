"""Inputs that reached users as raw internal errors (issue 24, section 3): ``evaluate`` with
targets near 1e300 ("var must be finite", from squaring the predictive std), and a map option
that the map does not take (``--option signed_rule=keep``: "build() got an unexpected keyword
argument")."""

import math

import numpy as np
import pytest

import scalegp as sg
from scalegp import features
from scalegp.cli import main


def evaluate_table(path, capsys):
    assert main(["evaluate", str(path), "--target", "y", "--quiet", "--subsample", "60",
                 "--approximations", "rff",
                 "--n-components", "32"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| exact") or line.startswith("| rff")]
    return {cells[0].strip(): [float(cell) for cell in cells[1:4]] for cells in rows}


def test_evaluate_scores_targets_near_1e300(tmp_path, capsys):
    """y and y * 2^996 (about 6.7e299) give the same fits in normalized units, so RMSE
    scales by 2^996, NLPD shifts by 996 log 2 and the KL divergence does not change (to the
    rounding of the printed digits and of the fit)."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(60)
    tables = {}
    for name, scale in (("unit", 1.0), ("huge", 2.0**996)):
        path = tmp_path / f"{name}.csv"
        path.write_text("a,b,y\n" + "".join(f"{a!r},{b!r},{v * scale!r}\n" for a, b, v in
                                            zip(X[:, 0].tolist(), X[:, 1].tolist(),
                                                y.tolist())))
        tables[name] = evaluate_table(path, capsys)
    for method in ("exact", "rff"):
        (rmse, nlpd, kl), (big_rmse, big_nlpd, big_kl) = tables["unit"][method], \
            tables["huge"][method]
        assert math.isfinite(big_rmse) and math.isfinite(big_nlpd)
        assert big_rmse / 2.0**996 == pytest.approx(rmse, rel=1e-3)
        assert big_nlpd - 996 * math.log(2) == pytest.approx(nlpd, abs=2e-3)
        assert big_kl == pytest.approx(kl, rel=1e-2, abs=1e-6)


@pytest.mark.parametrize("name", features.names())
def test_an_option_the_map_does_not_take_is_refused_by_name(name):
    X = np.random.default_rng(0).uniform(size=(20, 2))
    with pytest.raises(TypeError) as error:
        sg.FeatureMapTransformer(
            approximation=name, n_components=32, approximation_options={"signed_rule": "keep"},
            kernel="reciprocal_semigroup" if name == "glf-semigroup" else "gaussian").fit(X)
    text = str(error.value)
    assert "signed_rule" in text and "unexpected keyword" not in text


def test_the_command_line_names_the_maps_options(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("a,y\n" + "".join(f"{0.1 * i!r},{math.sin(i)!r}\n" for i in range(30)))
    assert main(["fit", str(path), "--target", "y", "--kernel", "gaussian", "--approximation",
                 "sgq", "--option", "signed_rule=keep", "--out", str(tmp_path / "m.npz"),
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["scalegp fit: error: approximation 'sgq' has no option 'signed_rule' (its "
                   "options: level); the estimator's own settings, such as signed_rule, solver "
                   "or objective, are not map options"]
