"""One shape for "one map or one per part" (scalegp.features.base.MapSequence): the local models'
centres and the Gibbs atoms receive a sequence, the shared case the one map repeated, made at
the boundary; a shared map is evaluated once."""

import numpy as np
import pytest

import scalegp as sg
from scalegp import features, local
from scalegp.data.base import ArraySource
from scalegp.features import MapSequence
from scalegp.inference.gibbs import sample_posterior
from scalegp.inference.gibbs_model import AtomMaps
from scalegp.local.centered import LocalContext
from scalegp.estimators.configuration import make_approximation

KERNEL = sg.Gaussian(length_scale=[0.8, 1.1])


def rff(X, seed=0, m=12):
    return features.get("rff").build(X, KERNEL, m, np.random.default_rng(seed))


def test_the_boundary_makes_one_shape():
    X = np.random.default_rng(0).uniform(-1, 1, (30, 2))
    a, b, c = rff(X, 0), rff(X, 1), rff(X, 2, m=16)
    shared = MapSequence.of(a, 3)
    assert shared.shared and len(shared) == 3 and all(fmap is a for fmap in shared)
    several = MapSequence.of([a, b, c], 3)
    assert not several.shared and list(several) == [a, b, c]
    np.testing.assert_array_equal(several.ranks, [12, 12, 16])
    assert several.n_components == 16 and several.n_dims == 2 and several.signs is None
    assert MapSequence.of(several, 3) is several
    assert type(AtomMaps.of(a, 4)) is AtomMaps and AtomMaps.of(a, 4).shared
    with pytest.raises(ValueError, match="has 2 maps for 3 centres: give one map per centre"):
        MapSequence.of([a, b], 3, "centre")
    with pytest.raises(TypeError, match="one built FeatureMap per part"):
        MapSequence(())
    with pytest.raises(ValueError, match="repeats one map"):
        MapSequence((a, b), shared=True)
    with pytest.raises(ValueError, match="same n_dims"):
        MapSequence((a, features.get("rff").build(X[:, :1], sg.Gaussian(), 12,
                                                  np.random.default_rng(0))))
    taken = several.take([2, 0])
    assert list(taken) == [c, a] and not taken.shared
    assert MapSequence.repeat(a, 5).take([4, 1]).shared


def test_a_shared_map_is_evaluated_once_per_theta():
    X = np.random.default_rng(0).uniform(-1, 1, (30, 2))
    a, b = rff(X, 0), rff(X, 1)
    calls = []

    def count(fmap):
        calls.append(fmap)
        return fmap.at(KERNEL)
    at_maps = MapSequence.repeat(a, 4).each(count)
    assert len(calls) == 1 and len(at_maps) == 4 and all(m is at_maps[0] for m in at_maps)
    calls.clear()
    at_maps = MapSequence((a, b, a)).each(count)
    assert calls == [a, b, a] and len({id(m) for m in at_maps}) == 3


def test_local_models_receive_one_map_per_centre():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (80, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(80)
    fmap = rff(X)
    context = LocalContext(fmap, ArraySource(X, y), threshold=1.0)
    centres = context.centres(KERNEL)
    maps = context.maps(centres, KERNEL)
    assert isinstance(maps, MapSequence) and maps.shared and len(maps) == centres.shape[0]
    with pytest.raises(ValueError, match="one per centre"):
        local.centred_statistics((fmap.at(KERNEL),) * 2, ArraySource(X, y), centres[:3])
    model = sg.LowRankGPRegressor(kernel=KERNEL, local="clusters",
                                  optimize=False, random_state=0, approximation=make_approximation("rff", n_components=12)).fit(X, y)
    assert model.local_model_.maps.shared and not model.local_model_.reoptimized
    assert len(model.local_model_.maps) == model.local_model_.centres.shape[0]


def test_gibbs_keeps_the_given_map_and_samples_on_its_atoms():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, (20, 1))
    y = np.sin(6 * X[:, 0]) + 0.2 * rng.standard_normal(20)
    kernel = sg.Gaussian()
    fmap = features.get("rff").build(X, kernel, 8, np.random.default_rng(1))
    grid = np.array([2.0, 5.0, 12.5])
    samples = sample_posterior(fmap, kernel, X, y, theta1_grid=grid, n_iter=20, burn_in=5,
                               rng=0)
    assert samples.feature_map is fmap                     # what the model file stores
    assert type(samples.atoms) is AtomMaps and samples.atoms.shared
    assert len(samples.atoms) == grid.size and samples.atoms[0] is fmap
    np.testing.assert_array_equal(samples.ranks, np.full(samples.n_draws, 8))
