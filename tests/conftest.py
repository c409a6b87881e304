"""Shared fixtures: small data sets and the kernels every test family is run over."""

import numpy as np
import pytest

import scalegp as sg


def all_kernels(n_dims: int = 2, ard: bool = True):
    """One instance of each kernel family (ARD when asked), with distinct length scales."""
    scale = np.linspace(0.6, 1.4, n_dims) if ard else 0.9
    return [
        sg.Gaussian(length_scale=scale, variance=1.7),
        sg.Matern(nu=0.5, length_scale=scale, variance=1.3),
        sg.Matern(nu=1.5, length_scale=scale, variance=0.8),
        sg.Matern(nu=2.5, length_scale=scale, variance=1.1),
        sg.Cauchy(length_scale=scale, variance=1.2),
        sg.Laplacian(length_scale=scale, variance=0.9),
    ]


def kernel_id(kernel) -> str:
    nu = getattr(kernel, "nu", None)
    suffix = f"{nu}" if nu is not None else ""
    return f"{type(kernel).__name__}{suffix}-{'ard' if kernel.anisotropic else 'iso'}"


@pytest.fixture
def regression_data():
    rng = np.random.default_rng(12345)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(60)
    return X, y
