"""Peer implementations for the benchmarks: scikit-learn's exact GP regression, its random-
feature pipelines, and GPyTorch's exact GP, SGPR, RFF kernel and SVGP, learning the same
zero-mean GP models as scalegp.

GPyTorch is optional (``pip install torch==2.13.0 gpytorch``: the CPU build); without it the
runs say so instead of failing. GPyTorch learns with Adam (its documented practice,
``ADAM_STEPS`` steps at learning rate ``ADAM_RATE``), scikit-learn and scalegp with L-BFGS-B,
so the step counts are not comparable; the times are.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from dataclasses import dataclass

import numpy as np
import scipy.optimize

#: Adam steps and learning rate of the GPyTorch runs (GPyTorch's tutorials use 50-100 at 0.1).
ADAM_STEPS = 100
ADAM_RATE = 0.1
#: SVGP: minibatch rows, epochs and Adam rate (GPyTorch's SVGP tutorial: 1024, 4, 0.01), and
#: the bounds on the Adam steps (small sets need more than 4 epochs, large ones fewer).
SVGP_BATCH = 1024
SVGP_EPOCHS = 4
SVGP_RATE = 0.01
SVGP_STEPS = (300, 600)
NOT_INSTALLED = "not installed (pip install torch==2.13.0 gpytorch)"


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


def sklearn_exact_fit(X, y, *, length_scale, length_scale_bounds, variance_bounds,
                      noise_variance, noise_bounds):
    """scikit-learn's GaussianProcessRegressor, C * RBF + White, fitted by L-BFGS-B with no
    restarts: (the fitted regressor, the number of objective evaluations). Its predictive
    std includes the White noise, so it is that of a new observation."""
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

    model = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=optimizer,
                                     n_restarts_optimizer=0).fit(X, y)
    return model, sum(evaluations)


def sklearn_exact(X, y, **options) -> PeerRun:
    """:func:`sklearn_exact_fit` timed, as a :class:`PeerRun`."""
    start = time.perf_counter()
    model, evaluations = sklearn_exact_fit(X, y, **options)
    seconds = time.perf_counter() - start
    return PeerRun("scikit-learn exact", X.shape[0], seconds, evaluations,
                   float(model.log_marginal_likelihood_value_))


def gpytorch_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "gpytorch"))


def _torch():
    """(torch, gpytorch), with torch on the BLAS thread count of the environment."""
    import gpytorch
    import torch

    torch.set_num_threads(int(os.environ.get("OPENBLAS_NUM_THREADS", os.cpu_count())))
    return torch, gpytorch


def _base_kernel(gpytorch, kernel: str):
    return {"rbf": gpytorch.kernels.RBFKernel,
            "matern32": lambda: gpytorch.kernels.MaternKernel(nu=1.5)}[kernel]()


def gpytorch_model(X, y, method: str, n_columns: int, *, kernel: str = "rbf",
                   length_scale=None, noise_variance=None):
    """A GPyTorch regression model with a zero mean and a scaled ``kernel`` ("rbf" or
    "matern32") on float64 tensors: (model, likelihood, train_x, train_y).

    method: "exact" (``ExactGP``), "sgpr" (``InducingPointKernel``, Titsias' collapsed bound,
    ``n_columns`` inducing inputs learned, started at random training rows) or "rff"
    (``RFFKernel`` with n_columns / 2 frequencies, so n_columns real features; RBF only).
    ``length_scale`` and ``noise_variance`` are the starting values (None: GPyTorch's
    defaults; the output scale starts at 1 when a length scale is given). Draws use the torch
    generator: call ``torch.manual_seed`` first."""
    torch, gpytorch = _torch()
    train_x = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    train_y = torch.as_tensor(np.asarray(y), dtype=torch.float64)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()

    class Model(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(train_x, train_y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            if method == "rff":
                self.scaled = gpytorch.kernels.ScaleKernel(
                    gpytorch.kernels.RFFKernel(num_samples=n_columns // 2))
                self.covar_module = self.scaled
            else:
                self.scaled = gpytorch.kernels.ScaleKernel(_base_kernel(gpytorch, kernel))
                self.covar_module = self.scaled
            if method == "sgpr":
                rows = torch.randperm(train_x.shape[0])[:n_columns]
                self.covar_module = gpytorch.kernels.InducingPointKernel(
                    self.scaled, inducing_points=train_x[rows].clone(), likelihood=likelihood)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = Model().double()
    if length_scale is not None:
        model.scaled.base_kernel.lengthscale = length_scale
        model.scaled.outputscale = 1.0
    if noise_variance is not None:
        likelihood.noise = noise_variance
    return model, likelihood, train_x, train_y


def gpytorch_adam(model, likelihood, train_x, train_y, *, steps: int = ADAM_STEPS,
                  rate: float = ADAM_RATE, time_limit: float = math.inf):
    """Adam on GPyTorch's exact marginal log likelihood (for SGPR: its collapsed bound), until
    ``steps`` steps or ``time_limit`` seconds: (steps done, the objective in nats for the
    whole data set, whether all steps were done)."""
    torch, gpytorch = _torch()
    start = time.perf_counter()
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=rate)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    done, value = 0, float("nan")
    for done in range(1, steps + 1):
        optimizer.zero_grad()
        loss = -mll(model(train_x), train_y)
        loss.backward()
        optimizer.step()
        value = -float(loss.item()) * train_x.shape[0]    # GPyTorch divides by n
        if time.perf_counter() - start > time_limit and done < steps:
            return done, value, False
    return done, value, True


def gpytorch_predict(model, likelihood, X, block: int = 10_000):
    """Predictive mean and variance of a new observation (noise included) at X, in blocks
    of ``block`` rows (``fast_pred_var``: GPyTorch's LOVE variances for exact GPs)."""
    torch, gpytorch = _torch()
    model.eval()
    likelihood.eval()
    means, variances = [], []
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        for begin in range(0, len(X), block):
            rows = torch.as_tensor(np.asarray(X[begin:begin + block]), dtype=torch.float64)
            predictive = likelihood(model(rows))
            means.append(predictive.mean.numpy())
            variances.append(predictive.variance.numpy())
    return np.concatenate(means), np.concatenate(variances)


def gpytorch_learning(X, y, method: str, n_columns: int, *, length_scale: float,
                      noise_variance: float, time_limit: float, seed: int = 0) -> PeerRun:
    """GPyTorch SGPR or an exact GP with ``RFFKernel`` (:func:`gpytorch_model`, RBF kernel),
    Adam on the (bound on the) log likelihood for ``ADAM_STEPS`` steps or until
    ``time_limit`` seconds have passed."""
    label = {"sgpr": "GPyTorch SGPR", "rff": "GPyTorch RFF"}[method]
    if not gpytorch_available():
        return PeerRun(label, n_columns, float("nan"), 0, float("nan"), False, NOT_INSTALLED)
    torch, _ = _torch()
    torch.manual_seed(seed)
    start = time.perf_counter()
    model, likelihood, train_x, train_y = gpytorch_model(
        X, y, method, n_columns, length_scale=length_scale, noise_variance=noise_variance)
    steps, value, finished = gpytorch_adam(model, likelihood, train_x, train_y,
                                           time_limit=time_limit - (time.perf_counter() - start))
    note = "" if finished else f"stopped at the {time_limit:.0f} s limit"
    return PeerRun(label, n_columns, time.perf_counter() - start, steps, value, finished, note)


def gpytorch_sgpr_split(X, y, X_test, *, n_columns: int, steps: int, kernel: str = "matern32",
                        seed: int = 0):
    """GPyTorch SGPR from GPyTorch's default starting values, ``steps`` Adam steps at rate
    0.1, then the predictive mean and variance (noise included) at X_test:
    (mean, variance, seconds of all of it)."""
    torch, _ = _torch()
    torch.manual_seed(seed)
    start = time.perf_counter()
    model, likelihood, train_x, train_y = gpytorch_model(X, y, "sgpr", n_columns, kernel=kernel)
    gpytorch_adam(model, likelihood, train_x, train_y, steps=steps, rate=0.1)
    mean, var = gpytorch_predict(model, likelihood, X_test)
    return mean, var, time.perf_counter() - start


def gpytorch_svgp(X, y, n_inducing: int, *, length_scale=None, noise_variance=None,
                  time_limit: float = math.inf, seed: int = 0):
    """GPyTorch SVGP (Hensman et al. 2013): ``ApproximateGP`` with a Cholesky variational
    distribution over ``n_inducing`` learned inducing inputs (started at random training
    rows), a scaled RBF kernel, Adam at ``SVGP_RATE`` on the variational ELBO over shuffled
    minibatches of ``SVGP_BATCH`` rows (all rows when fewer) for ``SVGP_EPOCHS`` epochs,
    clipped to the step bounds ``SVGP_STEPS``, or until ``time_limit`` seconds:
    (model, likelihood, steps done, whether all steps were done)."""
    torch, gpytorch = _torch()
    torch.manual_seed(seed)
    train_x = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    train_y = torch.as_tensor(np.asarray(y), dtype=torch.float64)
    n = train_x.shape[0]
    inducing = train_x[torch.randperm(n)[:n_inducing]].clone()

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            distribution = gpytorch.variational.CholeskyVariationalDistribution(n_inducing)
            strategy = gpytorch.variational.VariationalStrategy(
                self, inducing, distribution, learn_inducing_locations=True)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    start = time.perf_counter()
    model = Model().double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    if length_scale is not None:
        model.covar_module.base_kernel.lengthscale = length_scale
        model.covar_module.outputscale = 1.0
    if noise_variance is not None:
        likelihood.noise = noise_variance
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()],
                                 lr=SVGP_RATE)
    elbo = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=n)
    batch = min(SVGP_BATCH, n)
    per_epoch = n // batch
    total = min(max(SVGP_EPOCHS * per_epoch, SVGP_STEPS[0]), SVGP_STEPS[1])
    for step in range(total):
        if step % per_epoch == 0:
            order = torch.randperm(n)
        rows = order[(step % per_epoch) * batch:(step % per_epoch + 1) * batch]
        optimizer.zero_grad()
        loss = -elbo(model(train_x[rows]), train_y[rows])
        loss.backward()
        optimizer.step()
        if time.perf_counter() - start > time_limit:
            return model, likelihood, step + 1, False
    return model, likelihood, total, True


def summary(run: PeerRun) -> str:
    status = "" if run.finished else f" ({run.note})"
    return (f"{run.label} (s = {run.n_columns}): {run.seconds:.2f} s, {run.n_evaluations} "
            f"steps, objective {run.log_marginal_likelihood:.2f}{status}")
