"""Numbers the engine redesign (issue 10) must keep: record them before, compare after.

    .venv/bin/python benchmarks/engine_reference.py record   # writes the reference (~1 min)
    .venv/bin/python benchmarks/engine_reference.py compare  # exit 1 if any differs > 1e-10

The reference is ``benchmarks/results/engine-reference.json`` (``--file`` to change it). For
every registered feature map and every kernel it supports (the kernels of the test suite:
tests/conftest.py ``all_kernels``, 2-D ARD and one isotropic), on the contract tests' data
(60 points in [-2, 2]^2, seed 12345) with the map built from seed 0:

* the log marginal likelihood and its gradient at the kernel's theta and noise 0.3 (for a
  signed map: the positive-part repair, and the signed system where it is positive definite);
* the posterior mean and latent variance at 15 test points;
* the same for the signed rules in 5-D (m = 64) where they have negative weights, kept as signed
  (noise 2) and repaired (noise 0.05).

And for every map plus the exact GP, an estimator that learns (``LowRankGPRegressor`` with
m = 32, ``random_state=0``, 200 points of a 2-D function, a Gaussian ARD kernel with bounds
(0.1, 10)), and GLF with solver="qr", RFF in float32 and RFF with normalize_y and normalize_X:
learned log-parameters, log marginal likelihood and test predictions; the three local models
and the Gibbs estimator (30 sweeps) on the same data: test predictions. Each number
is compared with relative tolerance 1e-10 against its own array's largest magnitude (so an
entry near zero is judged on its array's scale).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

#: The recorded estimators condition on the raw inputs and targets (the defaults before the
#: estimators standardized by default).
RAW = dict(normalize_X=False, normalize_y=False)

ROOT = Path(__file__).resolve().parents[1]
if (ROOT / "src" / "scalegp").is_dir():
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

import scalegp as sg  # noqa: E402
from scalegp import features  # noqa: E402
from scalegp.errors import NotPositiveDefiniteError  # noqa: E402
from scalegp.engine.likelihood import MarginalLikelihood, Posterior  # noqa: E402
from scalegp.estimators.configuration import make_approximation, make_local  # noqa: E402
from tests.conftest import all_kernels, kernel_id  # noqa: E402

DEFAULT_FILE = ROOT / "benchmarks" / "results" / "engine-reference.json"
TOLERANCE = 1e-10
NOISE = 0.3
N_COMPONENTS = 24


def contract_data():
    rng = np.random.default_rng(12345)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(60)
    return X, y, np.random.default_rng(1).uniform(-2, 2, size=(15, 2))


def engine_numbers() -> dict:
    X, y, Xs = contract_data()
    out = {}
    for name in features.names():
        cls = features.get(name)
        for kernel in all_kernels(2, ard=True) + all_kernels(2, ard=False)[:1]:
            if not cls.supports(kernel):
                continue
            fmap = cls.build(X, kernel, N_COMPONENTS, np.random.default_rng(0))
            rules = ["keep"] if fmap.signs is None else ["keep", "repair"]
            for rule in rules:
                out[f"{name}/{kernel_id(kernel)}/{rule}"] = conditioned(
                    fmap, kernel, X, y, Xs, NOISE, rule)
    return out


def conditioned(fmap, kernel, X, y, Xs, noise, rule):
    """Log ML, gradient, mean and variance at (kernel, noise), or why there are none."""
    try:
        value, gradient = MarginalLikelihood(fmap, kernel, X, y, signed_rule=rule)(
            np.append(kernel.theta, np.log(noise)))
        mean, var = Posterior.fit(fmap, kernel, noise, X, y,
                                  signed_rule=rule).predict(Xs, return_var=True)
    except NotPositiveDefiniteError:
        return "not positive definite"
    return {"value": [value], "gradient": gradient.tolist(), "mean": mean.tolist(),
            "var": var.tolist()}


def signed_numbers() -> dict:
    """The signed rules where they have negative weights (5-D, m = 64), kept and repaired."""
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, size=(150, 5))
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.standard_normal(150)
    Xs = rng.uniform(-2, 2, size=(15, 5))
    kernel = sg.Gaussian(length_scale=np.linspace(1.5, 2.5, 5))
    out = {}
    for name in ("sgq", "dfs", "sfs", "ssr"):
        fmap = features.get(name).build(X, kernel, 64, np.random.default_rng(0))
        for rule, noise in (("keep", 2.0), ("repair", 0.05)):
            out[f"{name}/{rule}/noise{noise:g}"] = conditioned(fmap, kernel, X, y, Xs, noise,
                                                               rule)
    return out


def learning_numbers() -> dict:
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(200)
    Xs = rng.uniform(-2, 2, size=(20, 2))
    kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.1, 10.0),
                         variance_bounds=(0.01, 100.0))
    models = {name: sg.LowRankGPRegressor(make_approximation(name, n_components=32),
                                          kernel=kernel, noise_variance=0.1, random_state=0,
                                          **RAW)
              for name in features.names() if features.get(name).supports(kernel)}
    models["exact"] = sg.ExactGPRegressor(kernel=kernel, noise_variance=0.1, **RAW)
    models["glf-qr"] = sg.LowRankGPRegressor(
        make_approximation("glf", n_components=64, solver="qr"), kernel=kernel,
        noise_variance=0.1, **RAW)
    models["rff-float32"] = sg.LowRankGPRegressor(
        make_approximation("rff", n_components=32), kernel=kernel, noise_variance=0.1,
        dtype="float32", random_state=0, **RAW)
    models["rff-normalized"] = sg.LowRankGPRegressor(
        make_approximation("rff", n_components=32), kernel=kernel, noise_variance=0.1,
        normalize_y=True, normalize_X=True, random_state=0)
    out = {}
    for name, model in models.items():
        try:
            model.fit(X, y)
        except (ValueError, TypeError) as error:
            out[name] = f"refused: {type(error).__name__}"
            continue
        mean, std = model.predict(Xs, return_std=True)
        theta = np.append(model.kernel_.theta, np.log(model.noise_variance_))
        out[name] = {"theta": theta.tolist(),
                     "log_marginal_likelihood": [model.log_marginal_likelihood_value_],
                     "mean": mean.tolist(), "std": std.tolist()}
    return out


def local_and_gibbs_numbers() -> dict:
    """The local models (test points, clusters, neighbourhoods) and the Gibbs estimator on the
    learning data (added before the wings regrouping moved local.py and gibbs.py)."""
    rng = np.random.default_rng(7)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(200)
    Xs = rng.uniform(-2, 2, size=(20, 2))
    kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.1, 10.0),
                         variance_bounds=(0.01, 100.0))
    models = {f"local-{local}": sg.LowRankGPRegressor(
        make_approximation("rff", n_components=32), kernel=kernel, noise_variance=0.1,
        random_state=0, local=make_local(local, n_neighbors=40) if local == "neighbors" else local,
        **RAW)
              for local in ("test-points", "clusters", "neighbors")}
    models["gibbs"] = sg.GibbsGPRegressor(make_approximation("rff", n_components=16),
                                          kernel="gaussian", n_iter=30, burn_in=10, collapsed=False,
                                          random_state=0, normalize_X=False)
    out = {}
    for name, model in models.items():
        model.fit(X, y)
        mean, std = model.predict(Xs, return_std=True)
        out[name] = {"mean": mean.tolist(), "std": std.tolist()}
    return out


def numbers() -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"engine": engine_numbers(), "signed": signed_numbers(),
                "learning": learning_numbers(), "local_and_gibbs": local_and_gibbs_numbers()}


def differences(reference: dict, current: dict, path="") -> list[str]:
    """Lines naming each entry that differs beyond the tolerance (or changed kind)."""
    lines = []
    for key in sorted(set(reference) | set(current)):
        where = f"{path}/{key}" if path else key
        if key not in current or key not in reference:
            lines.append(f"{where}: only in the {'reference' if key in reference else 'current run'}")
            continue
        a, b = reference[key], current[key]
        if isinstance(a, dict) and isinstance(b, dict):
            lines += differences(a, b, where)
        elif isinstance(a, list) and isinstance(b, list):
            a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
            scale = max(float(np.max(np.abs(a))), 1e-300)
            error = float(np.max(np.abs(a - b))) / scale if a.shape == b.shape else np.inf
            if not error <= TOLERANCE:
                lines.append(f"{where}: relative difference {error:.3e}")
        elif a != b:
            lines.append(f"{where}: {a!r} -> {b!r}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("record", "compare"))
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE)
    args = parser.parse_args()
    current = numbers()
    if args.action == "record":
        args.file.parent.mkdir(parents=True, exist_ok=True)
        args.file.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
        print(f"recorded {sum(len(v) for v in current.values())} entries in {args.file}")
        return 0
    lines = differences(json.loads(args.file.read_text()), current)
    for line in lines:
        print(line)
    print(f"{len(lines)} entr{'y' if len(lines) == 1 else 'ies'} differ beyond {TOLERANCE:g}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
