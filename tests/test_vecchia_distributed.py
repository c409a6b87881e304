"""The Vecchia likelihood over row blocks with halos on a dask.distributed LocalCluster
(in-process workers), against the serial result to 1e-10."""

import numpy as np
import pytest

from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.kernels import Matern
from scalegp.vecchia import VecchiaLikelihood, build_structure, vecchia_log_likelihood
from scalegp.vecchia.distributed import DaskVecchiaLikelihood, partition

distributed = pytest.importorskip("distributed")


def data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, 2)) * [2.0, 1.0]
    y = np.sin(3 * X[:, 0]) * np.cos(5 * X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y - y.mean()


KERNEL = Matern(nu=2.5, length_scale=[0.3, 0.2], variance=0.7)


@pytest.mark.parametrize("n_parts", [1, 3, 7])
def test_parts_and_halos_cover_the_likelihood(n_parts):
    X, y = data(1500)
    structure = build_structure(X, KERNEL.length_scale, 12)
    parts = partition(X, y, structure, n_parts)
    assert len(parts) == n_parts
    members = np.concatenate([part.halo[part.blocks.sets[part.blocks.is_member]]
                              for part in parts])
    np.testing.assert_array_equal(np.sort(members), np.arange(len(y)))
    serial = vecchia_log_likelihood(KERNEL, 0.01, X, y, structure, eval_gradient=True)
    total = sum(part.terms(KERNEL, 0.01, True)[0] for part in parts)
    assert total - 0.5 * len(y) * np.log(2 * np.pi) == pytest.approx(serial[0], rel=1e-12)
    for part in parts:                      # a halo holds exactly what its blocks reach
        np.testing.assert_array_equal(part.X, X[structure.order][part.halo])
        assert part.halo.size == np.unique(part.blocks.sets).size
    with pytest.raises(ValueError, match="structure"):
        partition(X[:-1], y[:-1], structure, 2)


def test_dask_likelihood_equals_the_serial_one_on_a_local_cluster():
    X, y = data()
    structure = build_structure(X, KERNEL.length_scale, 20)
    hyperparameters = Hyperparameters(KERNEL, 0.02, (1e-6, 1e5))
    serial = VecchiaLikelihood(hyperparameters, X, y, structure)
    with distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        dask = DaskVecchiaLikelihood(hyperparameters, X, y, structure, client, n_parts=5)
        assert dask.n_parts == 5 and dask.n_members == len(y)
        assert len(y) < dask.halo_rows < 25 * len(y)        # halos: O(N m / parts) each
        for theta in (hyperparameters.theta, hyperparameters.theta + [0.3, -0.2, 0.1, 0.5]):
            value, gradient = dask(theta)
            expected_value, expected_gradient = serial(theta)
            assert value == pytest.approx(expected_value, rel=1e-10)
            np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-10)
            assert dask.value(theta) == pytest.approx(value, rel=1e-12)
        assert dask.n_evaluations == 2
