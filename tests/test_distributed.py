"""The engine over Dask collections (scalegp.data.distributed): the statistics, gradients and
summary of a DaskSource against the serial passes over the same rows, on the threaded
scheduler and on a LocalCluster of two worker processes, one of them killed mid-run."""

import os
import signal
import sys
import time

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
from scalegp import features
from scalegp import engine
from scalegp.data.base import ArraySource
from scalegp.engine.hyperparameters import Hyperparameters

da = pytest.importorskip("dask.array", reason="the dask extra is part of the test install")
from scalegp.data.distributed import DaskSource  # noqa: E402

KERNEL = sg.Gaussian(length_scale=[0.7, 0.9])
#: Float64 sums of the same terms in another order: relative differences of a few 1e-16 per
#: term's magnitude; 1e-10 of the largest entry leaves a margin of 10^5.
RTOL = 1e-10


def data(n=5000, seed=0, noise=False):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    v = rng.uniform(0.0, 0.05, size=n) if noise else None
    return X, y, v


def dask_source(X, y, v=None, block=700, **options):
    return DaskSource(da.from_array(X, chunks=(block, X.shape[1])), da.from_array(y, chunks=block),
                      None if v is None else da.from_array(v, chunks=block), **options)


def assert_statistics_equal(a, b):
    scale = np.max(np.abs(b.gram))
    assert np.max(np.abs(a.gram - b.gram)) <= RTOL * scale
    assert np.max(np.abs(a.projection - b.projection)) <= RTOL * np.max(np.abs(b.projection))
    assert a.y_norm2 == pytest.approx(b.y_norm2, rel=RTOL)
    assert a.n_samples == b.n_samples
    assert a.log_weight_sum == pytest.approx(b.log_weight_sum, rel=RTOL, abs=1e-12)


@pytest.mark.parametrize("block", [333, 1000, 5000])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_statistics_and_summary_equal_the_serial_pass(block, dtype):
    X, y, _ = data()
    fmap = features.get("rff").build(X, KERNEL, 64, np.random.default_rng(0))
    # the serial pass in the same chunks, so that float32 chunk Grams are the same: what
    # differs is the float64 order of their sum
    serial = engine.accumulate_statistics(fmap.at(KERNEL), ArraySource(X, y, dtype=dtype),
                                      dtype=dtype, chunk_size=block)
    source = dask_source(X, y, block=block, dtype=dtype)
    assert_statistics_equal(engine.accumulate_statistics(fmap.at(KERNEL), source, dtype=dtype),
                            serial)
    ours, theirs = source.summary(), ArraySource(X, y, dtype=dtype).summary()
    # merged in another grouping: rounding of a few eps of the data's magnitude (3)
    for field in ("X_min", "X_max", "X_mean", "X_std"):
        np.testing.assert_allclose(getattr(ours, field), getattr(theirs, field), rtol=0,
                                   atol=1e-14 * np.max(np.abs(X)))
    assert ours.n_samples == theirs.n_samples
    assert ours.y_mean == pytest.approx(theirs.y_mean, abs=1e-14 * np.max(np.abs(y)))


@pytest.mark.parametrize("approximation", ["rff", "glf"])
def test_likelihood_gradient_and_posterior_over_dask(approximation):
    """rff: two distributed passes per evaluation; glf: the basis statistics once."""
    X, y, _ = data()
    fmap = features.get(approximation).build(X, KERNEL, 64, np.random.default_rng(0))
    hyper = Hyperparameters(KERNEL, 0.02)
    distributed = engine.MarginalLikelihood(fmap, hyper, dask_source(X, y))
    serial = engine.MarginalLikelihood(fmap, hyper, X, y)
    theta = hyper.theta + 0.1
    (value, grad), (ref_value, ref_grad) = distributed(theta), serial(theta)
    assert value == pytest.approx(ref_value, rel=RTOL)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=RTOL * np.max(np.abs(ref_grad)))
    X_test = X[:50] + 0.01
    np.testing.assert_allclose(distributed.posterior(theta).predict(X_test),
                               serial.posterior(theta).predict(X_test), rtol=1e-9, atol=1e-12)


def test_vfe_bound_with_known_noise_variances_over_dask(monkeypatch):
    """Nystrom's VFE bound with known variances (docs/nystrom.md, Eq. V.4): the weighted
    kernel trace sum_i w^_i k(x_i, x_i) is summed on the workers, not by pulling the rows
    through the driver; value and gradient equal the serial ones."""
    X, y, v = data(noise=True)
    fmap = features.get("nystrom").build(X, KERNEL, 24, np.random.default_rng(0),
                                         knots="random")
    hyper = Hyperparameters(KERNEL, 0.02)
    source = dask_source(X, y, v)
    monkeypatch.setattr(type(source), "chunks", lambda *a, **k: pytest.fail("rows pulled"))
    distributed = engine.MarginalLikelihood(fmap, hyper, source, variational=True)
    serial = engine.MarginalLikelihood(fmap, hyper, X, y, sample_noise_variance=v,
                                       variational=True)
    theta = hyper.theta + 0.1
    (value, grad), (ref_value, ref_grad) = distributed(theta), serial(theta)
    assert value == pytest.approx(ref_value, rel=RTOL)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-8, atol=RTOL * np.max(np.abs(ref_grad)))


def test_known_noise_variances_and_the_fitc_diagonal_travel_with_the_blocks():
    from scalegp.engine.noise import FITC
    X, y, v = data(noise=True)
    fmap = features.get("rff").build(X, KERNEL, 32, np.random.default_rng(1))
    at_map = fmap.at(KERNEL)
    for noise in (engine.HOMOSCEDASTIC, FITC):
        serial = engine.accumulate_statistics(at_map, ArraySource(X, y, v), noise=noise,
                                          noise_variance=0.01)
        ours = engine.accumulate_statistics(at_map, dask_source(X, y, v), noise=noise,
                                        noise_variance=0.01)
        assert_statistics_equal(ours, serial)
        assert ours.log_weight_sum != 0.0


def test_local_fallback_rechunks_the_rows_through_the_driver():
    X, y, v = data(1000, noise=True)
    chunks = list(dask_source(X, y, v, block=300).chunks(256))
    assert [c.start for c in chunks] == [0, 256, 512, 768]
    np.testing.assert_array_equal(np.concatenate([c.X for c in chunks]), X)
    np.testing.assert_array_equal(np.concatenate([c.sample_noise_variance for c in chunks]), v)


def test_bad_input_is_refused_with_the_rows_named():
    X, y, _ = data(1000)
    X[612, 1] = np.nan
    fmap = features.get("rff").build(X[:10], KERNEL, 8, np.random.default_rng(0))
    with pytest.raises(ValueError, match="Dask block of rows 600 to 899"):
        engine.accumulate_statistics(fmap.at(KERNEL), dask_source(X, y, block=300))
    with pytest.raises(ValueError, match="X has 1000 rows but y has 999"):
        DaskSource(da.from_array(X), da.from_array(y[:-1]))
    with pytest.raises(ValueError, match="2-D"):
        DaskSource(da.from_array(y), da.from_array(y))
    unknown = da.from_array(X, chunks=(100, 2))
    unknown = unknown[unknown[:, 0] > 0]                 # rows per block not known
    with pytest.raises(ValueError, match="unknown block sizes"):
        DaskSource(unknown, unknown[:, 1])


def test_from_dataframe_selects_columns_and_refuses_text():
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd
    X, y, _ = data(400)
    frame = pd.DataFrame({"lon": X[:, 0], "lat": X[:, 1], "z": y, "name": ["a"] * 400})
    ddf = dd.from_pandas(frame, npartitions=3)
    source = DaskSource.from_dataframe(ddf, "z", ["lon", "lat"])
    np.testing.assert_array_equal(np.concatenate([c.X for c in source.chunks(400)]), X)
    with pytest.raises(ValueError, match="column 'name' is not numeric"):
        DaskSource.from_dataframe(ddf, "z")
    with pytest.raises(ValueError, match="no column 'height'"):
        DaskSource.from_dataframe(ddf, "height")


# ----------------------------------------------------------------------------- a cluster


class SlowStatistics:
    """chunk_statistics that takes 0.2 s per block: time to kill a worker mid-run."""

    def __init__(self, at_map):
        self.at_map = at_map

    def __call__(self, chunk):
        time.sleep(0.2)
        return engine.chunk_statistics(self.at_map, chunk)


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    import cloudpickle
    cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers need not import it
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None,
                                  silence_logs=50) as local_cluster:
        with distributed.Client(local_cluster) as client:
            yield local_cluster, client


def test_a_cluster_of_two_processes_gives_the_serial_statistics_and_survives_a_kill(cluster):
    local_cluster, client = cluster
    X, y, _ = data(4000)
    at_map = features.get("rff").build(X, KERNEL, 48, np.random.default_rng(2)).at(KERNEL)
    serial = engine.accumulate_statistics(at_map, ArraySource(X, y))
    source = dask_source(X, y, block=250, client=client)          # 16 blocks
    assert len(client.scheduler_info()["workers"]) == 2
    calm = source.map_reduce(SlowStatistics(at_map))
    assert_statistics_equal(calm, serial)

    victim = next(iter(client.scheduler_info()["workers"]))
    pid = client.run(os.getpid, workers=[victim])[victim]
    future = client.compute(source._tree(SlowStatistics(at_map)))
    time.sleep(0.5)                                 # some blocks done, others running
    os.kill(pid, signal.SIGKILL)                    # the nanny starts a new worker
    killed = future.result(timeout=120)
    assert victim not in client.scheduler_info()["workers"]
    # the tree is fixed by the blocks' order: the retried blocks give the same bits
    np.testing.assert_array_equal(killed.gram, calm.gram)
    np.testing.assert_array_equal(killed.projection, calm.projection)
    assert killed.n_samples == len(y)


@pytest.mark.parametrize("approximation, optimize", [("rff", False), ("glf", True)])
def test_the_estimator_fits_dask_arrays_like_numpy_arrays(approximation, optimize):
    X, y, _ = data(3000)
    params = dict(approximation=approximation, n_components=64, kernel=KERNEL,
                  noise_variance=0.02, optimize=optimize, normalize_X=True, normalize_y=True,
                  random_state=0)
    ours = low_rank(**params).fit(da.from_array(X, chunks=(700, 2)),
                                               da.from_array(y, chunks=700))
    theirs = low_rank(**params).fit(X, y)
    assert ours.log_marginal_likelihood_value_ == pytest.approx(
        theirs.log_marginal_likelihood_value_, rel=RTOL)
    # measured: learned log-parameters within 3e-13, predictions within 7e-14
    np.testing.assert_allclose(ours.kernel_.theta, theirs.kernel_.theta, rtol=0, atol=1e-10)
    np.testing.assert_allclose(ours.predict(X[:20]), theirs.predict(X[:20]), rtol=0,
                               atol=1e-10)
