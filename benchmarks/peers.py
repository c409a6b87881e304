"""Peer implementations for the benchmarks: scikit-learn's exact GP regression and GPyTorch's
SGPR and RFF kernels, learning the same isotropic Gaussian-kernel model as scalegp.

Each function returns a :class:`PeerRun`. GPyTorch is optional (``pip install torch==2.13.0
gpytorch``: the CPU build); without it the runs say so instead of failing. GPyTorch learns
with Adam (its documented practice, ``ADAM_STEPS`` steps at learning rate ``ADAM_RATE``),
scikit-learn and scalegp with L-BFGS-B, so the step counts are not comparable; the times are.
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass

import scipy.optimize

#: Adam steps and learning rate of the GPyTorch runs (GPyTorch's tutorials use 50-100 at 0.1).
ADAM_STEPS = 100
ADAM_RATE = 0.1


@dataclass(frozen=True)
class PeerRun:
    """One learning run of a peer.

    Attributes
    ----------
    label : str
    n_columns : int
        Inducing points (SGPR), real RFF columns, or n (exact).
    seconds : float
        Wall time of learning (model construction included).
    n_evaluations : int
        Objective evaluations (L-BFGS-B) or Adam steps done.
    log_marginal_likelihood : float
        The peer's objective at the end: log p(y) (exact, RFF) or the collapsed evidence lower
        bound (SGPR), in nats for the whole data set; nan when not available.
    finished : bool
        False when the run stopped at the time limit.
    note : str
    """

    label: str
    n_columns: int
    seconds: float
    n_evaluations: int
    log_marginal_likelihood: float
    finished: bool = True
    note: str = ""


def sklearn_exact(X, y, *, length_scale, length_scale_bounds, variance_bounds, noise_variance,
                  noise_bounds) -> PeerRun:
    """scikit-learn's GaussianProcessRegressor: C * RBF + White, L-BFGS-B, no restarts."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = (ConstantKernel(1.0, variance_bounds) * RBF(length_scale, length_scale_bounds)
              + WhiteKernel(noise_variance, noise_bounds))
    evaluations = []

    def optimizer(objective, initial_theta, bounds):
        """scikit-learn's own L-BFGS-B call, with the evaluation count kept."""
        result = scipy.optimize.minimize(objective, initial_theta, method="L-BFGS-B",
                                         jac=True, bounds=bounds)
        evaluations.append(result.nfev)
        return result.x, result.fun

    start = time.perf_counter()
    model = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=optimizer,
                                     n_restarts_optimizer=0).fit(X, y)
    seconds = time.perf_counter() - start
    return PeerRun("scikit-learn exact", X.shape[0], seconds, sum(evaluations),
                   float(model.log_marginal_likelihood_value_))


def gpytorch_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "gpytorch"))


def gpytorch_learning(X, y, method: str, n_columns: int, *, length_scale: float,
                      noise_variance: float, time_limit: float, seed: int = 0) -> PeerRun:
    """GPyTorch SGPR (``InducingPointKernel``, Titsias' collapsed bound) or an exact GP with
    ``RFFKernel`` (n_columns / 2 frequencies), Adam on the (bound on the) log likelihood.
    Stops after ``ADAM_STEPS`` steps or when ``time_limit`` seconds have passed."""
    label = {"sgpr": "GPyTorch SGPR", "rff": "GPyTorch RFF"}[method]
    if not gpytorch_available():
        return PeerRun(label, n_columns, float("nan"), 0, float("nan"), False,
                       "not installed (pip install torch==2.13.0 gpytorch)")
    import gpytorch
    import torch

    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count())))
    torch.manual_seed(seed)
    start = time.perf_counter()
    train_x = torch.as_tensor(X, dtype=torch.float64)
    train_y = torch.as_tensor(y, dtype=torch.float64)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()

    class Model(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(train_x, train_y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            if method == "sgpr":
                rows = torch.randperm(train_x.shape[0])[:n_columns]
                self.covar_module = gpytorch.kernels.InducingPointKernel(
                    gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel()),
                    inducing_points=train_x[rows].clone(), likelihood=likelihood)
                self.base = self.covar_module.base_kernel
            else:
                self.covar_module = gpytorch.kernels.ScaleKernel(
                    gpytorch.kernels.RFFKernel(num_samples=n_columns // 2))
                self.base = self.covar_module

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = Model().double()
    model.base.base_kernel.lengthscale = length_scale
    model.base.outputscale = 1.0
    likelihood.noise = noise_variance
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=ADAM_RATE)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    steps, value, finished = 0, float("nan"), True
    for steps in range(1, ADAM_STEPS + 1):
        optimizer.zero_grad()
        loss = -mll(model(train_x), train_y)
        loss.backward()
        optimizer.step()
        value = -float(loss.item()) * train_x.shape[0]    # GPyTorch divides by n
        if time.perf_counter() - start > time_limit and steps < ADAM_STEPS:
            finished = False
            break
    note = "" if finished else f"stopped at the {time_limit:.0f} s limit"
    return PeerRun(label, n_columns, time.perf_counter() - start, steps, value, finished, note)


def summary(run: PeerRun) -> str:
    status = "" if run.finished else f" ({run.note})"
    return (f"{run.label} (s = {run.n_columns}): {run.seconds:.2f} s, {run.n_evaluations} "
            f"steps, objective {run.log_marginal_likelihood:.2f}{status}")
