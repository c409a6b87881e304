"""The demo's Vecchia model (``scalegp demo --model vecchia``, the default): scalegp.vecchia's
own API behind the few attributes the demo reads of a fitted model.

Inputs are standardised by the training mean and standard deviation and the targets by theirs
(as ``normalize_X=True, normalize_y=True`` do for the estimators), the kernel is learned by
:class:`scalegp.vecchia.VecchiaGP` with a schedule of nested block samples (2,000, then
8,000, then 20,000 of the 77,800 conditionals, each sample keeping the data's density:
docs/vecchia.md, "Learning: scaled Vecchia (`learning.py`, `fisher.py`)"), and predictions
condition each point on its ``M_PREDICT`` nearest training points in the learned scaling,
with the variance of a new response (docs/vecchia.md, "Prediction (`prediction.py`)").
"""

from __future__ import annotations

import os

import numpy as np

from ..vecchia import VecchiaGP

#: Neighbours per training point in the likelihood (GpGp's default).
M = 30
#: Training neighbours per predicted point: on the relief map 45 reached 50.0 m where 30
#: and 60 reached 50.2 m with the same learned hyperparameters (docs/vecchia.md).
M_PREDICT = 45
#: Conditionals sampled by the learning stages (None: all): most L-BFGS-B steps are taken
#: at a few per cent of the full likelihood's cost, and the last stage at a quarter of it
#: (with all 77,800 it took 14 more evaluations of about 1.7 CPU s each and moved the test
#: RMSE by less than 0.1 m: docs/vecchia.md).
SCHEDULE = (2000, 8000, 20000)
#: Stop a learning stage when an iteration gains less than this many nats per 1 nat of log
#: likelihood per point (VecchiaGP's tolerance).
TOLERANCE = 0.01
#: The ordering: approximate maximin, vectorized (0.7 s instead of 3 s for the exact one).
ORDERING = "grid-maximin"


class VecchiaDemoModel:
    """A :class:`scalegp.vecchia.VecchiaGP` on standardised inputs and targets, with the
    attributes the demo reads: ``X_train_mean_``, ``X_train_scale_``, ``kernel_`` and
    ``noise_variance_`` (standardised units), ``feature_map_``, ``local_model_`` and
    ``n_centres_`` (None: no features, no local models), ``history`` and ``predict``."""

    feature_map_ = None
    local_model_ = None
    n_centres_ = None

    def __init__(self, kernel, noise_variance: float, *, seed: int = 0,
                 n_jobs: int | None = None):
        self.n_jobs = n_jobs or min(4, os.cpu_count() or 1)
        self.gp = VecchiaGP(kernel, noise_variance, M, m_predict=M_PREDICT, ordering=ORDERING,
                            schedule=SCHEDULE, tolerance=TOLERANCE, random_state=seed, n_jobs=self.n_jobs)

    def fit(self, X, y) -> VecchiaDemoModel:
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        self.X_train_mean_, self.X_train_scale_ = X.mean(axis=0), X.std(axis=0)
        self.y_train_mean_, self.y_train_scale_ = float(y.mean()), float(y.std())
        self.gp.fit((X - self.X_train_mean_) / self.X_train_scale_,
                    (y - self.y_train_mean_) / self.y_train_scale_)
        return self

    @property
    def kernel_(self):
        return self.gp.kernel_

    @property
    def noise_variance_(self) -> float:
        return self.gp.noise_variance_

    @property
    def history(self) -> list:
        return self.gp.history

    def predict(self, X, *, return_std: bool = False, include_noise: bool = False):
        """Mean (and standard deviation) in the targets' units."""
        U = (np.asarray(X, dtype=float) - self.X_train_mean_) / self.X_train_scale_
        mean, var = self.gp.predict(U, return_var=True, include_noise=include_noise)
        mean = self.y_train_mean_ + self.y_train_scale_ * mean
        if not return_std:
            return mean
        return mean, self.y_train_scale_ * np.sqrt(var)

    def describe(self, kernel_name: str) -> str:
        """The demo's "method:" line."""
        stages = ", ".join(f"{record['n_points']:,}" for record in self.history)
        evaluations = sum(record["n_evaluations"] for record in self.history)
        return (f"method: Vecchia approximation (scalegp.vecchia) with the {kernel_name} "
                f"kernel, one length scale per input, default bounds: each training point "
                f"conditioned on its {M} nearest predecessors in a {ORDERING} ordering of "
                f"the scaled inputs, grouped into blocks; hyperparameters learned by L-BFGS-B "
                f"on nested samples of the blocks ({stages} conditionals; {evaluations} "
                f"evaluations); each prediction conditioned on its {M_PREDICT} nearest "
                f"training points, with variance (docs/vecchia.md)")
