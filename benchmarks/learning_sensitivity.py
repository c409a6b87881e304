"""How far a learned optimum moves when the gradient changes by rounding alone.

    .venv/bin/python benchmarks/learning_sensitivity.py [MAP ...]      # default: sorf

For the learning entries of ``engine_reference.py`` (an estimator with m = 32 learns from 200
points), the gradient of the engine's objective is multiplied by (1 + eps) for eps = 1e-15 ...
1e-13, far below its accuracy, and the learned log-parameters are compared with the unperturbed
run and with the recorded reference. L-BFGS-B stops where its tests first hold, so where the
likelihood is flat the stopping point moves with the last bits of the gradient: a difference to
the reference of the size this prints is a different stopping point, not a different model.
Run it on the code before and after an engine change (``PYTHONPATH=<checkout>/src``).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import scalegp as sg  # noqa: E402
from scalegp import engine  # noqa: E402
from scalegp.estimators.configuration import make_approximation  # noqa: E402

from benchmarks.engine_reference import DEFAULT_FILE  # noqa: E402

EPSILONS = (0.0, 1e-15, 1e-14, 1e-13)


def learned_theta(name: str, eps: float) -> np.ndarray:
    """The learning entry of ``engine_reference.learning_numbers`` with the gradient scaled."""
    original = engine.MarginalLikelihood.__call__

    def scaled(self, theta):
        value, gradient = original(self, theta)
        return value, gradient * (1 + eps)

    engine.MarginalLikelihood.__call__ = scaled
    try:
        rng = np.random.default_rng(7)
        X = rng.uniform(-2, 2, size=(200, 2))
        y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(200)
        kernel = sg.Gaussian(length_scale=[1.0, 1.0], length_scale_bounds=(0.1, 10.0),
                             variance_bounds=(0.01, 100.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sg.LowRankGPRegressor(kernel=kernel,
                                          noise_variance=0.1, random_state=0, approximation=make_approximation(name, n_components=32)).fit(X, y)
    finally:
        engine.MarginalLikelihood.__call__ = original
    return np.append(model.kernel_.theta, np.log(model.noise_variance_))


def main() -> int:
    names = sys.argv[1:] or ["sorf"]
    reference = json.loads(DEFAULT_FILE.read_text())["learning"]
    for name in names:
        recorded = np.array(reference[name]["theta"])
        unperturbed = learned_theta(name, 0.0)
        for eps in EPSILONS:
            theta = learned_theta(name, eps) if eps else unperturbed
            scale = np.abs(recorded).max()
            print(f"{name}: gradient x (1 + {eps:g}): learned theta moves "
                  f"{np.abs(theta - unperturbed).max() / scale:.2e} from the unperturbed run, "
                  f"{np.abs(theta - recorded).max() / scale:.2e} from the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
