"""The exact likelihood's gradient: the kernel's contraction against the stack of dK/d theta.

One likelihood-and-gradient evaluation of the exact GP (:func:`scalegp.engine.exact.
log_marginal_likelihood`, ARD kernel, p = d + 2 hyperparameters) at n rows and d inputs, timed
three ways in the same run, one BLAS thread:

- ``contraction``: what the engine does, the traces <alpha alpha^T - K^{-1}, dK/d theta_p>
  from :meth:`~scalegp.kernels.Kernel.gradient_inner_and_input_contraction` (one GEMM over the
  inputs for the smooth radial kernels);
- ``stack``: the same traces from the (p, n, n) stack of :meth:`~scalegp.kernels.Kernel.
  gradient` (the engine before 2026-12-05);
- ``scikit-learn``: ``GaussianProcessRegressor``'s ``log_marginal_likelihood(theta,
  eval_gradient=True)`` with an ARD ``RBF`` (or ``Matern``) kernel plus a ``WhiteKernel``, the
  peer, which forms its (n, n, p) gradient stack too.

and against the machine's floor: the evaluation's GEMM-rate flops (Cholesky n^3 / 3, the
inverse n^3, the distances and the traces 6 n^2 d) at the rate of a square GEMM measured in the
same run. The gradients of the first two agree to rounding (checked on every row).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_exact_gradient.py
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as skk

import scalegp as sg
from scalegp import linalg
from scalegp.engine import exact
from scalegp.estimators.auto_costs import fastest

from machine import gemm_rate


def _stack_gradient(kernel, noise_variance, X, y):
    """The engine's evaluation with the traces from the stack of dK/d theta."""
    n = X.shape[0]
    K = kernel(X)
    K[np.diag_indices(n)] += noise_variance
    L, _ = linalg.cholesky(K)
    alpha = linalg.cho_solve(L, y)
    inner = np.outer(alpha, alpha) - linalg.inverse_from_cholesky(L)
    return 0.5 * np.einsum("ij,pji->p", inner, kernel.gradient(X))


def _sklearn(family: str, d: int, X, y):
    base = (skk.RBF(np.full(d, 1.5)) if family == "gaussian"
            else skk.Matern(np.full(d, 1.5), nu={"matern52": 2.5, "matern32": 1.5}[family]))
    model = GaussianProcessRegressor(skk.ConstantKernel(1.0) * base + skk.WhiteKernel(0.1),
                                     optimizer=None).fit(X, y)
    theta = model.kernel_.theta
    return lambda: model.log_marginal_likelihood(theta, eval_gradient=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[500, 1000, 2000])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 26])
    parser.add_argument("--family", default="gaussian",
                        choices=["gaussian", "matern52", "matern32"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rate = gemm_rate(1024) * 1e9
    print(f"GEMM rate {rate / 1e9:.1f} GFLOP/s; kernel {args.family} (ARD); one evaluation "
          "of the exact log likelihood and its gradient, best of "
          f"{args.repeats}\n")
    print("| n | d | contraction s | stack s | scikit-learn s | stack / contraction | "
          "scikit-learn / contraction | floor s | contraction / floor |")
    print("|---|---|---|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n in args.rows:
        for d in args.dims:
            X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
            kernel = sg.kernels.get(args.family).with_params(length_scale=np.full(d, 1.5))
            _, grad = exact.log_marginal_likelihood(kernel, 0.1, X, y, eval_gradient=True)
            stacked = _stack_gradient(kernel, 0.1, X, y)
            if not np.allclose(grad[:-1], stacked, rtol=1e-9, atol=1e-9 * np.abs(stacked).max()):
                raise SystemExit(f"n {n} d {d}: the two gradients differ: {grad[:-1]} "
                                 f"against {stacked}")
            contraction = fastest(lambda: exact.log_marginal_likelihood(
                kernel, 0.1, X, y, eval_gradient=True), args.repeats)
            stack = fastest(lambda: _stack_gradient(kernel, 0.1, X, y), args.repeats)
            peer = fastest(_sklearn(args.family, d, X, y), args.repeats)
            floor = (4.0 * n**3 / 3.0 + 6.0 * n * n * d) / rate
            print(f"| {n} | {d} | {contraction:.4f} | {stack:.4f} | {peer:.4f} | "
                  f"{stack / contraction:.1f} | {peer / contraction:.1f} | {floor:.4f} | "
                  f"{contraction / floor:.1f} |", flush=True)


if __name__ == "__main__":
    main()
