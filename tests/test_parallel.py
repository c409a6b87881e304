"""Threads over chunks (scalegp.parallel, docs/engine.md, "Threads over chunks"): chunk j goes
to accumulator j mod p in order, the pass's statistics, gradient and fitted model agree with
the serial ones to rounding and are reproducible for a given p, errors in a thread reach the
caller, BLAS's threads are restored, and the estimator's ``n_jobs`` is validated."""

import threading

import numpy as np
import pytest
from sklearn.base import clone
from threadpoolctl import threadpool_info

import scalegp as sg
from scalegp import features, parallel
from scalegp.data.base import ArraySource
from scalegp.engine.likelihood import MarginalLikelihood
from scalegp.engine.statistics import Statistics
from scalegp.engine.hyperparameters import Hyperparameters
from scalegp.engine.noise import FITC
from scalegp.estimators.configuration import make_approximation

SEEDS = (0, 1, 2)


def _data(seed, n=700):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)


def test_resolve_n_jobs_follows_scikit_learn():
    cores = parallel.available_cores()
    assert parallel.resolve_n_jobs(None) == 1
    assert parallel.resolve_n_jobs(3) == 3
    assert parallel.resolve_n_jobs(-1) == cores
    assert parallel.resolve_n_jobs(-cores - 5) == 1
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="n_jobs must be a nonzero integer"):
            parallel.resolve_n_jobs(bad)


class _Chunk:
    def __init__(self, j, rows):
        self.j, self.X = j, np.zeros((rows, 1))


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_chunk_j_goes_to_accumulator_j_mod_p_in_order_and_progress_counts_rows(n_threads):
    chunks = [_Chunk(j, rows) for j, rows in enumerate([5, 3, 7, 1, 4, 4, 2])]
    busy = [threading.Lock() for _ in range(n_threads)]

    def add(seen, chunk):
        slot = chunk.j % n_threads
        assert busy[slot].acquire(blocking=False), "an accumulator took two chunks at once"
        seen.append(chunk.j)
        busy[slot].release()

    rows_done = []
    totals = parallel.reduce_chunks(iter(chunks), add, [[] for _ in range(n_threads)],
                                    progress=rows_done.append)
    assert totals == [list(range(slot, len(chunks), n_threads)) for slot in range(n_threads)]
    assert rows_done == sorted(rows_done) and rows_done[-1] == 26 and len(rows_done) == 7


def test_an_error_in_a_thread_reaches_the_caller_and_blas_threads_are_restored():
    before = [(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()]

    def add(total, chunk):
        if chunk.j == 4:
            raise FloatingPointError("chunk 4 is bad")
        total.append(chunk.j)

    with pytest.raises(FloatingPointError, match="chunk 4 is bad"):
        parallel.reduce_chunks((_Chunk(j, 2) for j in range(9)), add, [[], []])
    assert [(lib["internal_api"], lib["num_threads"]) for lib in threadpool_info()] == before


def _relative_error(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name,noise,dtype", [("glf", None, "float64"),
                                              ("rff", FITC, "float64"),
                                              ("rff", None, "float32")])
def test_threaded_statistics_equal_serial_ones_and_repeat_exactly(name, noise, dtype, seed):
    X, y = _data(seed)
    kernel = sg.Gaussian(length_scale=[0.8, 1.1])
    fmap = features.get(name).build(X, kernel, 40, np.random.default_rng(seed))
    options = dict(chunk_size=37, dtype=dtype)
    if noise is not None:
        options.update(noise=noise, noise_variance=0.3)
    serial = Statistics.accumulate(fmap, kernel, X, y, **options)
    threaded = [Statistics.accumulate(fmap, kernel, X, y, n_jobs=3, **options)
                for _ in range(2)]
    # float64: rounding of sums of 19 chunks in another order; float32 chunks, float64 sums
    tolerance = 1e-13 if dtype == "float64" else 1e-6
    for field in ("gram", "projection"):
        assert _relative_error(getattr(threaded[0], field), getattr(serial, field)) < tolerance
        np.testing.assert_array_equal(getattr(threaded[0], field), getattr(threaded[1], field))
    assert threaded[0].n_samples == serial.n_samples == len(y)
    assert threaded[0].y_norm2 == pytest.approx(serial.y_norm2, rel=1e-14)
    assert threaded[0].log_weight_sum == pytest.approx(serial.log_weight_sum, rel=1e-13)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("objective", ["dtc", "vfe"])
@pytest.mark.parametrize("out_of_core", [False, True], ids=["kept-features", "second-pass"])
def test_threaded_value_and_gradient_of_a_data_dependent_map(objective, out_of_core, seed):
    X, y = _data(seed)
    kernel = sg.kernels.get("matern32", length_scale=np.array([0.7, 1.2]))
    fmap = features.get("nystrom").build(X, kernel, 30, np.random.default_rng(seed),
                                         knots="kmeans")
    hp = Hyperparameters(kernel, 0.05)
    source = ArraySource(X, y)
    if out_of_core:             # no features kept: the gradient pass recomputes them
        source.out_of_core = True
    values = [MarginalLikelihood(fmap, hp, source, chunk_size=41, n_jobs=n_jobs,
                                 variational=objective == "vfe")(hp.theta)
              for n_jobs in (None, 2, 2)]
    assert values[1][0] == pytest.approx(values[0][0], rel=1e-13)
    assert _relative_error(values[1][1], values[0][1]) < 1e-12
    assert values[1][0] == values[2][0]
    np.testing.assert_array_equal(values[1][1], values[2][1])


@pytest.mark.parametrize("approximation,options", [("glf", {}),
                                                   ("nystrom", {"knots": "kmeans"})])
def test_estimator_with_threads_learns_the_serial_model(approximation, options):
    X, y = _data(3, n=2000)
    models = [sg.LowRankGPRegressor(kernel="matern52",
                                    random_state=0,
                                    n_jobs=n_jobs, approximation=make_approximation(approximation, n_components=64, options=options), normalize_X=False, normalize_y=False).fit(X, y)
              for n_jobs in (None, 2)]
    X_test = _data(4, n=50)[0]
    (mean0, std0), (mean1, std1) = (model.predict(X_test, return_std=True) for model in models)
    # the optimizer sees the same objective to rounding, so it takes the same path
    assert _relative_error(mean1, mean0) < 1e-8 and _relative_error(std1, std0) < 1e-8
    assert (models[1].log_marginal_likelihood_value_
            == pytest.approx(models[0].log_marginal_likelihood_value_, rel=1e-10))


def test_estimator_n_jobs_is_a_parameter_and_refused_where_not_threaded():
    model = sg.LowRankGPRegressor(n_jobs=2, approximation=make_approximation("glf", n_components=16), normalize_X=False, normalize_y=False)
    assert clone(model).get_params()["n_jobs"] == 2
    X, y = _data(0, n=100)
    with pytest.raises(ValueError, match="n_jobs must be a nonzero integer"):
        sg.LowRankGPRegressor(n_jobs=0, approximation=make_approximation("glf", n_components=16), normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(NotImplementedError, match="solver='qr'"):
        sg.LowRankGPRegressor(n_jobs=2, approximation=make_approximation("glf", n_components=16, solver="qr"), normalize_X=False, normalize_y=False).fit(X, y)
    with pytest.raises(NotImplementedError, match="local='clusters'"):
        sg.LowRankGPRegressor(local="clusters", n_jobs=2, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False).fit(X, y)


def test_memory_checks_count_each_threads_accumulator_chunk_gram_and_chunks():
    from scalegp._memory import ENGINE_CHUNKS
    assert parallel.threaded_pass_buffers(1) == (0, ENGINE_CHUNKS)
    # p accumulators and p chunk Grams in place of the serial pass's one accumulator
    assert parallel.threaded_pass_buffers(3) == (5, 3 * ENGINE_CHUNKS)
