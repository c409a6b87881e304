"""The demo's Vecchia model (``scalegp demo --model vecchia``, the default): scalegp.vecchia's
own API behind the few attributes the demo reads of a fitted model.

Inputs are standardised by the training mean and standard deviation and the targets by theirs
(as ``normalize_X=True, normalize_y=True`` do for the estimators), the kernel is learned by
:class:`scalegp.vecchia.VecchiaGP` with a schedule of nested block samples (1,000, then
5,000 of the 77,224 conditionals, each sample keeping the data's density:
docs/vecchia.md, "Learning: scaled Vecchia (`learning.py`, `fisher.py`)"), and predictions
condition each point on its ``M_PREDICT`` nearest training points in the learned scaling,
with the variance of a new response (docs/vecchia.md, "Prediction (`prediction.py`)").

The constants are set by benchmarks/results/demo-speed.md (``scalegp demo`` under 15 s and
500 MB on the 2-core machine at a test RMSE of at most 50 m).
"""

from __future__ import annotations

import os

import numpy as np

from ..vecchia import VecchiaGP

#: Neighbours per training point in the likelihood (GpGp's default).
M = 30
#: Training neighbours per predicted point (GpGp's m, as in the likelihood). At the demo's
#: learned hyperparameters m = 30, 45 and 60 reach 49.72, 49.68 and 49.73 m (NLPD -1.592 for
#: all three), and predicting the 82,800 grid points with variance took 1.7, 3.9 and 6.8 CPU
#: s (benchmarks/results/demo-speed.md); with the hyperparameters learned on 20,000
#: conditionals 45 had reached 50.0 m where 30 and 60 reached 50.2 m (docs/vecchia.md).
M_PREDICT = 30
#: Conditionals sampled by the learning stages (None: all): every L-BFGS-B step is taken at
#: 1.3 % and then 6.5 % of the full likelihood's cost. Measured on the demo's split
#: (benchmarks/results/demo-speed.md, seed 0; test RMSE at m_predict 30): (1000, 5000) 49.72 m
#: in 35 + 10 evaluations and 3.4 learning CPU s; (2000, 8000, 20000), the schedule before,
#: 49.94 m in 33 + 16 + 13 evaluations and 12.6 CPU s; learning on all 77,800 reached 50.20 m
#: (docs/vecchia.md). The sample's draw moves the RMSE by about 0.2 m (random_state 1 and 2:
#: 49.99 and 50.07 m), as much as the schedule does.
SCHEDULE = (1000, 5000)
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
