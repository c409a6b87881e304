"""The spectral laws kernels carry for the feature maps (docs/conventions.md, "Spectral laws
the maps ask for"): scale mixtures and inverse-CDF constructions reproduce the kernel, and
the maps decide support by asking the kernel, never by testing its class (the Gauss-Legendre
map too: decay class, tail radius, density bound and panels)."""

import warnings

import numpy as np
import pytest

from scalegp import features, kernels

from .conftest import all_kernels, kernel_id

FOURIER_KERNELS = [k for k in all_kernels(2, ard=True) if k.shift_invariant]
#: The maps that ask the kernel for a spectral law.
ASKING_MAPS = ("rff", "orf", "sorf", "ssr", "qmc", "dfs", "sfs", "gq", "sgq", "glf")
DELTAS = (np.array([0.3, -0.2]), np.array([1.0, 0.8]))


def _assert_reproduces_kernel(kernel, omega):
    """E[cos(omega^T delta / l)] = kappa(delta), Monte-Carlo mean within 5 standard errors."""
    for delta in DELTAS:
        samples = np.cos(omega @ (delta / kernel.length_scale))
        expected = kernel(delta[None, :], np.zeros((1, 2)))[0, 0] / kernel.variance
        stderr = samples.std() / np.sqrt(samples.size)
        assert abs(samples.mean() - expected) < 5 * stderr


@pytest.mark.parametrize("kernel", FOURIER_KERNELS, ids=kernel_id)
def test_scale_mixture_reproduces_kernel(kernel):
    """omega = t * g with g ~ N(0, I) and the kernel's scales t has the kernel's law."""
    scale_rng, normal_rng = np.random.default_rng(11).spawn(2)
    t = kernel.sample_mixture_scales(200_000, 2, scale_rng)
    assert t.shape == ((200_000, 1) if kernel.scale_mixture == "radial" else (200_000, 2))
    _assert_reproduces_kernel(kernel, t * normal_rng.standard_normal((200_000, 2)))


@pytest.mark.parametrize("kernel", FOURIER_KERNELS, ids=kernel_id)
def test_inverse_cdf_of_uniform_points_reproduces_kernel(kernel):
    """omega = F^{-1}(U) for U uniform on (0, 1)^(d + e) has the kernel's law."""
    U = np.random.default_rng(12).uniform(size=(200_000, 2 + kernel.uniform_extra_dims))
    omega = kernel.frequencies_from_uniform(U)
    assert omega.shape == (200_000, 2)
    _assert_reproduces_kernel(kernel, omega)


def test_kernel_without_laws_says_so():
    """The semigroup kernel has no frequency law: every map refuses it, the methods raise."""
    kernel = kernels.ReciprocalSemigroup()
    assert (kernel.scale_mixture, kernel.uniform_extra_dims) == (None, None)
    assert not kernel.spectral_measure_is_standard_normal
    for name in ASKING_MAPS[1:]:
        assert not features.get(name).supports(kernel), name
    with pytest.raises(NotImplementedError, match="scale-mixture"):
        kernel.sample_mixture_scales(3, 2, np.random.default_rng(0))
    with pytest.raises(NotImplementedError, match="inverse-CDF"):
        kernel.frequencies_from_uniform(np.full((3, 2), 0.5))
    with pytest.raises(ValueError, match="not supported by qmc: no inverse-CDF"):
        features.get("qmc").build(np.ones((4, 2)), kernel, 8, np.random.default_rng(0))
    assert kernel.spectral_decay_class is None
    for law in (lambda: kernel.spectral_decay_rate(), lambda: kernel.spectral_tail_radius(0.1, 2),
                lambda: kernel.log_spectral_density_bound(np.ones(2), 1.0, 0, 1.0, 2.0)):
        with pytest.raises(NotImplementedError, match="no known decay class"):
            law()
    with pytest.raises(NotImplementedError, match="no known Laplace representation"):
        kernels.Gaussian().laplace_tail_radius(0.1, 2)


class _UnrelatedGaussian(kernels.Kernel):
    """The Gaussian kernel written as a new class (not a subclass of ``Gaussian``): a kernel
    added in one file, whose maps must follow from the laws it declares."""

    name = "unrelated_gaussian"
    separable = True
    spectral_measure_is_standard_normal = True
    scale_mixture = "radial"
    uniform_extra_dims = 0
    _correlation = kernels.Gaussian._correlation
    _correlation_grad_log_scale = kernels.Gaussian._correlation_grad_log_scale
    _log_base_density = kernels.Gaussian._log_base_density
    _log_base_density_grad_log = kernels.Gaussian._log_base_density_grad_log
    _sample_base = kernels.Gaussian._sample_base
    sample_mixture_scales = kernels.Gaussian.sample_mixture_scales
    frequencies_from_uniform = kernels.Gaussian.frequencies_from_uniform
    spectral_decay_class = "F4"
    spectral_decay_rate = kernels.Gaussian.spectral_decay_rate
    spectral_tail_radius = kernels.Gaussian.spectral_tail_radius
    log_spectral_density_bound = kernels.Gaussian.log_spectral_density_bound


class _UnrelatedGaussianWithoutDecayClass(_UnrelatedGaussian):
    """The same kernel without the Gauss-Legendre laws: the Fourier maps still apply."""

    spectral_decay_class = None
    spectral_decay_rate = kernels.Kernel.spectral_decay_rate
    spectral_tail_radius = kernels.Kernel.spectral_tail_radius
    log_spectral_density_bound = kernels.Kernel.log_spectral_density_bound


@pytest.mark.parametrize("name", ASKING_MAPS)
def test_maps_ask_the_kernel_not_its_class(name):
    """A kernel class unknown to the maps gets exactly the Gaussian kernel's features."""
    X = np.random.default_rng(3).uniform(-1.0, 1.0, (30, 2))
    new, gaussian = (cls(length_scale=[0.7, 1.2], variance=1.5)
                     for cls in (_UnrelatedGaussian, kernels.Gaussian))
    fmap_class = features.get(name)
    assert fmap_class.supports(new)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)    # GLF: the rule at the ends of Theta
        maps = [fmap_class.build(X, k, 41, np.random.default_rng(9)) for k in (new, gaussian)]
    np.testing.assert_array_equal(maps[0].features(X, new), maps[1].features(X, gaussian))
    np.testing.assert_array_equal(maps[0].features_grad(X, new),
                                  maps[1].features_grad(X, gaussian))


def test_glf_asks_the_kernel_for_its_decay_laws():
    """The rule (truncation, theoretical node counts, auto's resolution) of a kernel class
    unknown to GLF equals the Gaussian kernel's; without a decay class GLF refuses with the
    kernel's reason while the Fourier maps still apply."""
    X = np.random.default_rng(4).uniform(-1.0, 1.0, (40, 2))
    new, gaussian = (cls(length_scale=0.6, length_scale_bounds=(0.3, 1.2),
                         variance_bounds=(0.5, 2.0)) for cls in (_UnrelatedGaussian,
                                                                  kernels.Gaussian))
    glf = features.get("glf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        maps = [glf.build(X, k, 64, None) for k in (new, gaussian)]
    for field, value in maps[1].to_state().items():
        np.testing.assert_array_equal(maps[0].to_state()[field], value, err_msg=field)
    np.testing.assert_array_equal(maps[0].valid_log_bounds(new),
                                  maps[1].valid_log_bounds(gaussian))
    without = _UnrelatedGaussianWithoutDecayClass(length_scale=0.6)
    assert not glf.supports(without) and features.get("rff").supports(without)
    with pytest.raises(ValueError, match="not supported by glf: kernel .* has no known decay "
                                         "class of its spectral density"):
        glf.build(X, without, 64, None)

