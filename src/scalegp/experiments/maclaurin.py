"""Experiments of the local Maclaurin paper (Wacker & Filippone 2022; docs/maclaurin.md):

- ``maclaurin-kernel`` (Fig. 1): the truncated kernel k_p against k for p = 3, as a function
  of |x~| = |y~| at several angles, and the collapse of Theorem 3.1: k_p(x, x) -> 0 far from
  the origin, with our reconstruction of its bound (docs/maclaurin.md, "Options and limits");
- ``maclaurin-sinc`` (Fig. 2): RFF, vanilla and test-point-centred Maclaurin (D = 10, p = 9)
  against the exact GP on a sinc example, including far from the data, with the summed KL
  to the exact GP (KL(approximation || exact) of the noisy predictive distributions).

The paper's figures keep no numbers; the data, length scale and noise are ours and each
output says so.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..estimator import ExactGPRegressor, LowRankGPRegressor
from ..kernels import Gaussian
from . import register, write_figure, write_text

CONSTANTS_NOTE = ("Paper setting, constants ours: the paper's figures keep no numbers, so the "
                  "inputs, length scale, noise and grids below are ours.")


def truncated_series(t, degree: int):
    """sum_{n <= p} t^n / n!."""
    return sum(np.asarray(t, float) ** n / math.factorial(n) for n in range(degree + 1))


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


@register("maclaurin-kernel", "local Maclaurin paper Fig. 1: k_p against k for p = 3 and the "
          "collapse of Theorem 3.1", outputs=("maclaurin-kernel.png", "maclaurin-kernel.md"))
def run_kernel(output_dir: Path, quick: bool) -> list[Path]:
    radius = np.linspace(0.0, 4.0, 41 if quick else 201)
    angles = (0.0, math.pi / 3, math.pi / 2)
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    rows = []
    for angle, color in zip(angles, ("C0", "C1", "C2")):
        # |x~| = |y~| = r at angle theta: |x~ - y~|^2 = 2 r^2 (1 - cos theta), x~^T y~ = r^2 cos
        t = radius**2 * math.cos(angle)
        k = np.exp(-radius**2 * (1 - math.cos(angle)))
        k3 = np.exp(-radius**2) * truncated_series(t, 3)
        left.plot(radius, k, color=color, label=f"k, theta = {angle:.2f}")
        left.plot(radius, k3, color=color, ls="--", label=f"k_3, theta = {angle:.2f}")
        rows += [(angle, r, a, b) for r, a, b in zip(radius[::len(radius) // 8],
                                                        k[::len(radius) // 8],
                                                        k3[::len(radius) // 8])]
    left.set(xlabel="|x~| = |y~|", ylabel="k / s", title="k_3 against k")
    left.legend(fontsize=7)
    far = np.linspace(0.0, 8.0, 81 if quick else 401)
    for degree in (3, 9):
        right.plot(far, np.exp(-far**2) * truncated_series(far**2, degree),
                   label=f"k_{degree}(x, x) / s")
    right.axhline(1.0, color="k", lw=0.8, label="k(x, x) / s")
    right.set(xlabel="|x~|", ylabel="k / s", title="Theorem 3.1: collapse far from the origin")
    right.legend(fontsize=7)
    fig.tight_layout()
    paths = [write_figure(fig, output_dir / "maclaurin-kernel.png", dpi=110)]
    plt.close(fig)
    lines = ["# maclaurin-kernel", "", CONSTANTS_NOTE, "",
             "k and k_3 for |x~| = |y~| = r at angle theta (s = 1):", "",
             "| theta | r | k | k_3 |", "|---|---|---|---|"]
    lines += [f"| {a:.3f} | {r:.2f} | {k:.4g} | {k3:.4g} |" for a, r, k, k3 in rows]
    lines += ["", "k_p(x, x) = e^{-|x~|^2} sum_{n<=p} |x~|^{2n} / n! at |x~| = 2, 4, 6, 8:", "",
              "| p | 2 | 4 | 6 | 8 |", "|---|---|---|---|---|"]
    for degree in (3, 9):
        values = [math.exp(-r * r) * float(truncated_series(r * r, degree)) for r in (2, 4, 6, 8)]
        lines.append(f"| {degree} | " + " | ".join(f"{v:.3g}" for v in values) + " |")
    paths.append(write_text(output_dir / "maclaurin-kernel.md", "\n".join(lines) + "\n"))
    return paths


def summed_kl(mean, var, mean_ref, var_ref) -> float:
    """sum over points of KL(N(mean, var) || N(mean_ref, var_ref))."""
    return float(0.5 * np.sum(np.log(var_ref / var) + (var + (mean - mean_ref) ** 2) / var_ref
                              - 1))


@register("maclaurin-sinc", "local Maclaurin paper Fig. 2: RFF, vanilla and local Maclaurin "
          "(D = 10, p = 9) against the exact GP on sinc data, including far from the data",
          outputs=("maclaurin-sinc.png", "maclaurin-sinc.md"))
def run_sinc(output_dir: Path, quick: bool) -> list[Path]:
    rng = np.random.default_rng(0)
    n = 100 if quick else 300
    X = rng.uniform(-3, 3, size=(n, 1))
    y = np.sinc(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)
    grid = np.linspace(-8, 8, 161 if quick else 801)[:, None]
    inside = np.abs(grid[:, 0]) <= 3
    kernel, noise = Gaussian(length_scale=0.3), 0.01
    exact = ExactGPRegressor(kernel=kernel, noise_variance=noise, optimize=False).fit(X, y)
    mean_ref, std_ref = exact.predict(grid, return_std=True)
    var_ref = std_ref**2 + noise
    methods = {"RFF": dict(approximation="rff"),
               "Maclaurin": dict(approximation="maclaurin"),
               "local Maclaurin": dict(approximation="maclaurin", local="test-points")}
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), sharey=True)
    lines = ["# maclaurin-sinc", "", CONSTANTS_NOTE,
             f"Data: y = sinc(2x) + N(0, 0.1^2), {n} inputs uniform on [-3, 3]; Gaussian "
             "kernel l = 0.3, s = 1, noise variance 0.01 fixed; D = 10 (Maclaurin: p = 9, "
             "the explicit map); test grid on [-8, 8].", "",
             "| method | D | summed KL in [-3, 3] | summed KL outside | mean std outside |",
             "|---|---|---|---|---|"]
    for ax, (name, options) in zip(axes, methods.items()):
        model = LowRankGPRegressor(n_components=10, kernel=kernel, noise_variance=noise,
                                   optimize=False, random_state=0, **options).fit(X, y)
        mean, std = model.predict(grid, return_std=True)
        var = std**2 + noise
        kl_in = summed_kl(mean[inside], var[inside], mean_ref[inside], var_ref[inside])
        kl_out = summed_kl(mean[~inside], var[~inside], mean_ref[~inside], var_ref[~inside])
        lines.append(f"| {name} | 10 | {kl_in:.4g} | {kl_out:.4g} | {std[~inside].mean():.3f} |")
        ax.plot(grid[:, 0], mean_ref, "k", lw=1, label="exact GP")
        ax.fill_between(grid[:, 0], mean_ref - 2 * std_ref, mean_ref + 2 * std_ref, color="k",
                        alpha=0.1)
        ax.plot(grid[:, 0], mean, "C1", label=name)
        ax.fill_between(grid[:, 0], mean - 2 * std, mean + 2 * std, color="C1", alpha=0.2)
        ax.plot(X[:, 0], y, ".", ms=2, color="C0")
        ax.set(title=name, xlabel="x")
        ax.legend(fontsize=7)
    fig.tight_layout()
    paths = [write_figure(fig, output_dir / "maclaurin-sinc.png", dpi=110)]
    plt.close(fig)
    lines += ["", "Far from the data the vanilla Maclaurin mean and variance collapse to zero "
              "(Theorem 3.1); the test-point-centred model returns to the prior N(0, s)."]
    paths.append(write_text(output_dir / "maclaurin-sinc.md", "\n".join(lines) + "\n"))
    return paths
