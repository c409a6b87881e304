"""Shared fixtures: small data sets, the kernels every test family is run over, and the
registry cases of the estimator-level tests (which maps, kernels and budgets they use)."""

import functools
import os

# One BLAS thread for the whole suite and the commands it starts (set before numpy loads; the
# threadpool limit below covers a numpy another plugin loaded first). The suite is thousands
# of small problems, where OpenBLAS's second thread costs more than it gives on the 2-core CI
# machine: an exact likelihood-and-gradient evaluation of 200 to 1,000 rows took 2.4, 2.1 and
# 1.8 times as long with two threads as with one (n = 200, 500, 1,000; d = 10; 2026-12-05),
# and the GPRegressor scikit-learn checks four times as long. Results do not depend on it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

import scalegp as sg  # noqa: E402
from scalegp import features, kernels  # noqa: E402
from scalegp.estimators.transformers import _build_feature_map  # noqa: E402

threadpool_limits(limits=1, user_api="blas")


def central_differences(function, theta, step=1e-6) -> np.ndarray:
    """(f(theta + h e_i) - f(theta - h e_i)) / (2 h) for each coordinate i."""
    theta = np.asarray(theta, dtype=float)
    return np.array([(function(theta + shift) - function(theta - shift)) / (2 * step)
                     for shift in np.eye(theta.size) * step])


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


def map_kernel_cases():
    """(map name, kernel) for every registered map and every kernel of ``all_kernels`` (2-D ARD,
    and the first isotropic) it supports, as pytest params."""
    for name in features.names():
        cls = features.get(name)
        for kernel in all_kernels(2, ard=True) + all_kernels(2, ard=False)[:1]:
            if cls.supports(kernel):
                yield pytest.param(name, kernel, id=f"{name}-{kernel_id(kernel)}")


@pytest.fixture
def regression_data():
    rng = np.random.default_rng(12345)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(60)
    return X, y


# ------------------------------------------------- the registry in estimator-level tests

#: scikit-learn checks that set ``n_components = 1`` (a PCA-like rank). A feature map may
#: reject it (a quadrature rule's smallest rule has several columns; the Monte-Carlo maps
#: accept it: one phase-shifted cosine); those checks are then rerun with the instance's own
#: n_components by :func:`test_checks_that_set_one_component`.
ONE_COMPONENT_CHECKS = (
    "check_dont_overwrite_parameters", "check_fit2d_1feature", "check_fit2d_1sample",
    "check_fit2d_predict1d", "check_methods_sample_order_invariance",
    "check_methods_subset_invariance",
)


def one_component_failures(estimator) -> dict:
    """``expected_failed_checks``: the checks above, if the estimator's map rejects m = 1."""
    if not hasattr(estimator, "n_components"):
        return {}
    X = np.random.default_rng(0).uniform(size=(20, 3))
    try:
        _build_feature_map(estimator.approximation, X, kernels.get(estimator.kernel), 1,
                           estimator.approximation_options, np.random.default_rng(0))
    except (ValueError, TypeError) as error:
        reason = (f"the check sets n_components=1, which {estimator.approximation!r} rejects "
                  f"({error}); rerun with a valid n_components in "
                  "test_checks_that_set_one_component")
        return {name: reason for name in ONE_COMPONENT_CHECKS}
    return {}


def keeping_n_components(estimator):
    """A copy of ``estimator`` on which setting n_components = 1 keeps the current value.

    Test-only: it lets the checks in ONE_COMPONENT_CHECKS test what they are about (one
    sample, one feature, 1-D input, sample order, subsets) with a map that needs m >= 2.
    """
    class KeepsNComponents(type(estimator)):
        def __setattr__(self, name, value):
            if name == "n_components" and value == 1 and "n_components" in self.__dict__:
                return
            super().__setattr__(name, value)

    KeepsNComponents.__name__ = type(estimator).__name__
    return KeepsNComponents(**estimator.get_params(deep=False))


#: One kernel per family (the Matern nu only changes the spectral density's tail).
KERNEL_FAMILIES = ("gaussian", "matern32", "cauchy", "laplacian")
#: Maps of kernels outside the stationary families: a semigroup kernel needs inputs >= 0,
#: which scikit-learn's checks do not give; they are tested in their own test files.
NON_STATIONARY_MAPS = {"glf-semigroup"}
STATIONARY_MAPS = [name for name in features.names() if name not in NON_STATIONARY_MAPS]
#: Build options for maps that need some (none so far); passed as approximation_options.
OPTIONS = {}


def supported_kernels(name):
    """The kernel families the map ``name`` supports."""
    return [k for k in KERNEL_FAMILIES if features.get(name).supports(kernels.get(k))]


@functools.lru_cache(maxsize=None)
def smallest_n_components(name, kernel, n_dims):
    """The smallest budget in (20, 32, 64, ...) that the map accepts in n_dims dimensions.

    Deterministic rules (tensor grids, sparse grids, fully symmetric sets) have a minimum
    size that grows with n_dims; random maps accept the first candidate.
    """
    X = np.random.default_rng(0).uniform(size=(20, n_dims))
    errors = []
    for n_components in (20, 32, 64, 128, 256, 512, 1024, 2048):
        try:
            _build_feature_map(name, X, kernels.get(kernel), n_components, OPTIONS.get(name),
                               np.random.default_rng(0))
        except ValueError as error:
            errors.append(str(error))
            continue
        return n_components
    raise AssertionError(f"{name} accepts no n_components up to 2048 in {n_dims}-D: {errors}")


#: The flat estimator parameters the older tests are written with, and the configuration
#: object and option each one now belongs to (scalegp.estimators.configuration).
FLAT_APPROXIMATION = {"n_components": "n_components", "approximation_options": "options",
                      "objective": "objective", "solver": "solver",
                      "signed_rule": "signed_rule", "learn_knots": "learn_knots"}
FLAT_LOCAL = {"local_threshold": "threshold", "local_lazy": "lazy",
              "local_reoptimize": "reoptimize", "local_neighbors": "n_neighbors",
              "local_learning_centres": "learning_centers"}


def low_rank(approximation="rff", **params):
    """A LowRankGPRegressor from flat parameters (``n_components=``, ``local_threshold=`` ...):
    each is given to the configuration object that owns it (an option the configuration does
    not have is refused, as the estimator refuses it); raw inputs and targets unless
    ``normalize_X`` / ``normalize_y`` are given (the defaults these tests were written for)."""
    from scalegp.estimators.configuration import make_approximation, make_local
    approximation_options = {FLAT_APPROXIMATION[name]: params.pop(name)
                             for name in list(params) if name in FLAT_APPROXIMATION}
    local_options = {FLAT_LOCAL[name]: params.pop(name)
                     for name in list(params) if name in FLAT_LOCAL}
    params.setdefault("normalize_X", False)
    params.setdefault("normalize_y", False)
    if approximation_options:
        if not isinstance(approximation, str):
            raise TypeError(f"flat options {sorted(approximation_options)} with a "
                            f"configuration object {approximation!r}")
        approximation = make_approximation(approximation, **approximation_options)
    local = params.pop("local", None)
    if local_options:
        local = make_local(local, **local_options)
    return sg.LowRankGPRegressor(approximation=approximation, local=local, **params)


def gibbs(approximation="rff", **params):
    """A GibbsGPRegressor from flat parameters (``n_components=``, ``approximation_options=``
    given to the approximation's configuration object); raw inputs unless ``normalize_X``
    is given (the default these tests were written for)."""
    from scalegp.estimators.configuration import make_approximation
    options = {FLAT_APPROXIMATION[name]: params.pop(name)
               for name in list(params) if name in FLAT_APPROXIMATION}
    params.setdefault("normalize_X", False)
    if options and isinstance(approximation, str):
        approximation = make_approximation(approximation, **options)
    return sg.GibbsGPRegressor(approximation, **params)
