"""One row never changes another row's prediction (issue 24, section 1; docs/decisions.md,
"Row-wise predictions").

For every model kind the estimators build (every registered map, the exact GP, the local
kinds test-points / clusters / lazy clusters / neighbourhoods, the Gibbs estimator), the
prediction of a row (mean, std; the Gibbs interval) is bitwise that of the row alone,
whatever else is in the batch (ordinary rows, rows at 1e8 ... 1e308, in any order and
number) and however the batch is chunked. A row the model cannot evaluate raises
NonFiniteResultError naming exactly the rows that cannot be evaluated, and no others.
"""

import math
import warnings

import numpy as np
import pytest

import scalegp as sg
from tests.conftest import low_rank
from scalegp import cli, features, linalg, rowwise
from scalegp.inference import gibbs
from scalegp import local
from scalegp.errors import NonFiniteResultError
from scalegp.estimators.configuration import Clusters, Neighbors, as_local, make_approximation

ORDINARY = np.random.default_rng(7).uniform(-2.5, 2.5, size=(10, 2))
#: Rows far from the training inputs: farther than any length scale, than float64's squares
#: (1.3e154), than its largest value's half.
EXTREME = np.array([[1e8, 0.3], [-1e9, 1.0], [0.2, 1e150], [1e300, -0.5], [-1e300, 1e300],
                    [1.7e308, 0.0], [6.0, -7.0]])
#: The semigroup kernel's inputs are >= 0.
NON_NEGATIVE = np.abs


def training_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.05 * rng.standard_normal(n)


def _map_models():
    for name in features.names():
        options = ({"approximation_options": {"epsilon": 0.2}} if name == "random-projection"
                   else {})
        kernel = "reciprocal_semigroup" if name == "glf-semigroup" else "gaussian"
        yield name, lambda name=name, kernel=kernel, options=options: low_rank(
            name, kernel=kernel, optimize=False, random_state=0, n_components=16, **options)


#: name -> a fresh estimator; each is fitted once (module fixture), on small data.
MODELS = {
    **dict(_map_models()),
    "signed-sfs": lambda: low_rank(noise_variance=0.5, optimize=False,
                                                random_state=0, approximation=make_approximation("sfs", n_components=32, signed_rule="keep"), normalize_X=False, normalize_y=False),
    "nystrom-fitc": lambda: low_rank(optimize=False,
                                                  random_state=0, approximation=make_approximation("nystrom", n_components=12, objective="fitc"), normalize_X=False, normalize_y=False),
    "rff-normalized": lambda: low_rank(normalize_X=True,
                                                    normalize_y=True, optimize=False,
                                                    random_state=0, approximation=make_approximation("rff", n_components=16)),
    "rff-float32": lambda: low_rank(dtype="float32",
                                                 optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False),
    "exact": lambda: sg.ExactGPRegressor(normalize_y=True, optimize=False, normalize_X=False),
    "exact-matern-ard": lambda: sg.ExactGPRegressor(
        kernel=sg.Matern(nu=2.5, length_scale=[0.7, 1.3]), optimize=False, normalize_X=False, normalize_y=False),
    "exact-laplacian": lambda: sg.ExactGPRegressor(kernel="laplacian", optimize=False, normalize_X=False, normalize_y=False),
    "test-points": lambda: low_rank(local="test-points",
                                                 optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False),
    "clusters": lambda: low_rank(optimize=False,
                                              random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0), normalize_X=False, normalize_y=False),
    "clusters-lazy": lambda: low_rank(optimize=False, random_state=0, approximation=make_approximation("rff", n_components=16), local=Clusters(threshold=1.0, lazy=True), normalize_X=False, normalize_y=False),
    "neighbors": lambda: low_rank(approximation="exact", optimize=False,
                                               random_state=0, local=Neighbors(n_neighbors=12), normalize_X=False, normalize_y=False),
    "neighbors-glf": lambda: low_rank(optimize=False, random_state=0, approximation=make_approximation("glf", n_components=16), local=Neighbors(n_neighbors=12), normalize_X=False, normalize_y=False),
    "maclaurin-test-points": lambda: low_rank(
        local="test-points", optimize=False,
        random_state=0, approximation=make_approximation("maclaurin", n_components=16), normalize_X=False, normalize_y=False),
    "gibbs": lambda: sg.GibbsGPRegressor(theta1_grid=[0.2, 0.5, 1.0, 2.0],
                                         n_iter=30, burn_in=10, diag_correction=True,
                                         random_state=0, approximation=make_approximation("rff", n_components=8), normalize_X=False),
    "gibbs-maclaurin": lambda: sg.GibbsGPRegressor(theta1_grid=[0.5, 1.0], n_iter=20,
                                                   burn_in=5, random_state=0, approximation=make_approximation("maclaurin", n_components=8), normalize_X=False),
}


def test_every_kind_the_estimators_accept_is_covered():
    covered = {name for name in MODELS if name in features.names()}
    assert covered == set(features.names())
    kinds = {getattr(as_local(MODELS[name]().local), "kind", None) for name in MODELS
             if hasattr(MODELS[name](), "local")}
    assert set(local.LOCAL_KINDS) <= kinds


def rows_of(name):
    pool = np.vstack([ORDINARY, EXTREME])
    return NON_NEGATIVE(pool) if name == "glf-semigroup" else pool


def outputs(model, X):
    """Every per-row output: mean and std (and the Gibbs interval), stacked as columns."""
    mean, std = model.predict(X, return_std=True)
    columns = [mean, std]
    if hasattr(model, "predict_interval"):
        columns += model.predict_interval(X)
    return np.column_stack(columns)


class Reference:
    """A fitted model and each pool row's outputs alone (None: the row alone raises)."""

    def __init__(self, name):
        X, y = training_data()
        self.X = NON_NEGATIVE(X) if name == "glf-semigroup" else X
        self.model = MODELS[name]().fit(self.X, y)
        self.pool = rows_of(name)
        self.alone = []
        for row in self.pool:
            try:
                self.alone.append(outputs(self.model, row[None, :])[0])
            except NonFiniteResultError as error:
                assert list(error.rows) == [0]
                self.alone.append(None)


@pytest.fixture(scope="module")
def references():
    cache = {}

    def get(name):
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = Reference(name)
        return cache[name]
    return get


def batches(n_pool, seed, count=6):
    """Index batches into the pool: sizes across the 48-row block, repeats, any order."""
    rng = np.random.default_rng(seed)
    for size in rng.choice([1, 2, 5, 47, 48, 49, 97], size=count, replace=False):
        yield rng.integers(0, n_pool, size=size)


@pytest.mark.parametrize("name", list(MODELS))
def test_a_rows_prediction_is_bitwise_its_prediction_alone(name, references):
    """Mutations caught: the exact GP's k(X_train, X*) (shift by the batch's mean: 14 units
    at 1e9); the blocks of rowwise.in_blocks removed (gemv for one row, shape-dependent
    kernels: last-bit differences in every kind); test-point statistics formed for the
    block together; routing by the unshifted expansion in variable blocks."""
    reference = references(name)
    ordinary_rows = [i for i in range(len(ORDINARY)) if reference.alone[i] is not None]
    assert ordinary_rows == list(range(len(ORDINARY)))      # every ordinary row predicts
    for batch in batches(len(reference.pool), seed=hash(name) % 2**32):
        unevaluable = [k for k, i in enumerate(batch) if reference.alone[i] is None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if unevaluable:
                with pytest.raises(NonFiniteResultError) as error:
                    outputs(reference.model, reference.pool[batch])
                assert list(error.value.rows) == unevaluable
                continue
            got = outputs(reference.model, reference.pool[batch])
        expected = np.array([reference.alone[i] for i in batch])
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["neighbors", "test-points", "gibbs", "clusters"])
def test_the_chunk_size_changes_no_prediction(name, references, monkeypatch):
    """The internal chunking of a prediction (neighbourhood blend chunks, test-point blocks,
    Gibbs blocks of draws, centre-routing blocks) and the batch's split into consecutive
    parts (the command line's reading blocks) give the same bits. Mutation caught: the test
    points' training chunks sized by the block (chunk_size // group)."""
    reference = references(name)
    batch = np.arange(len(ORDINARY))
    X = reference.pool[batch]
    expected = outputs(reference.model, X)
    monkeypatch.setattr("scalegp.local.test_points.TEST_POINT_BLOCK_BYTES", 3 * 8 * 16 * 16 * 3)   # 3 points
    monkeypatch.setattr(gibbs, "PREDICTION_BYTES", 1)
    parts = np.concatenate([outputs(reference.model, X[:3]), outputs(reference.model, X[3:])])
    np.testing.assert_array_equal(parts, expected)
    if name == "neighbors":
        posterior = reference.model.local_model_
        Z = rowwise.standardized(X, reference.model.X_train_mean_,
                                 reference.model.X_train_scale_)
        for chunk_size in (1, 3, 7):
            mean, var = posterior.predict(Z, return_var=True, chunk_size=chunk_size)
            want_mean, want_var = posterior.predict(Z, return_var=True)
            np.testing.assert_array_equal(mean, want_mean)
            np.testing.assert_array_equal(var, want_var)
    np.testing.assert_array_equal(outputs(reference.model, X), expected)


def test_test_point_predictions_do_not_depend_on_the_block_they_share():
    """Test-point centring over more training rows than one chunk of a block would hold:
    each point's statistics are summed over the same chunks whether it is predicted alone or
    with 96 others (mutation caught: the chunk sized default // points in the block, which
    splits the 1,400 rows into two chunks for the block and one for a point alone)."""
    X, y = training_data(n=1400, seed=5)
    model = low_rank(local="test-points", optimize=False,
                                  random_state=0, approximation=make_approximation("rff", n_components=16), normalize_X=False, normalize_y=False).fit(X, y)
    T = np.random.default_rng(6).uniform(-2, 2, size=(97, 2))
    together = np.column_stack(model.predict(T, return_std=True))
    alone = np.array([np.column_stack(model.predict(row[None], return_std=True))[0]
                      for row in T[::12]])
    np.testing.assert_array_equal(together[::12], alone)


# ----------------------------------------------------------------------------- the examples


def issue_data(n=120, seed=3):
    """Targets in +-1.5, noise sd 0.02: the setting of the issue's example."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    return X, np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.02 * rng.standard_normal(n)


ISSUE_MODELS = {
    "exact": lambda: sg.ExactGPRegressor(normalize_y=True, normalize_X=False),
    "neighbors": lambda: low_rank(approximation="exact", normalize_y=True,
                                               random_state=0, local=Neighbors(n_neighbors=40), normalize_X=False),
}


@pytest.mark.parametrize("name", list(ISSUE_MODELS))
@pytest.mark.parametrize("far", [1e8, 1e300])
def test_a_far_row_moves_no_other_row_and_predicts_the_prior(name, far):
    """50 ordinary rows and one far row through the API: the 50 are bitwise unchanged (the
    batch-mean shift moved them by up to 3.6 sd (exact) and 21.6 sd (neighbourhoods) at 1e8;
    at 1e300 they became NaN and the error named row 0 or 2, not 20), and the far row, where
    k(x, X) = 0, predicts the prior: the training mean and the prior sd
    sqrt(variance) * y_train_std_."""
    X, y = issue_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ISSUE_MODELS[name]().fit(X, y)
    T = np.random.default_rng(4).uniform(-2.5, 2.5, size=(50, 2))
    mean, std = model.predict(T, return_std=True)
    assert std.max() < 0.1                              # the posterior is confident
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # and no overflow warning either
        far_mean, far_std = model.predict(np.vstack([T[:20], [[far, 0.3]], T[20:]]),
                                          return_std=True)
    np.testing.assert_array_equal(np.delete(far_mean, 20), mean)
    np.testing.assert_array_equal(np.delete(far_std, 20), std)
    assert far_mean[20] == pytest.approx(model.y_train_mean_, abs=1e-12)
    assert far_std[20] == pytest.approx(math.sqrt(model.kernel_.variance) * model.y_train_std_,
                                        rel=1e-12)


@pytest.mark.parametrize("name", ["maclaurin", "maclaurin-test-points", "gibbs-maclaurin"])
def test_a_row_the_map_cannot_evaluate_is_named(name, references):
    """Maclaurin features overflow at 1e300 (exp(-|u|^2 / 2) times a polynomial): the error
    names that row, wherever it sits in the batch, and says why; rows before and after it
    predict alone as they do in the batch (mutation caught: a test point's non-finite Gram
    factorized with the block, which raised a ValueError for the whole block)."""
    reference = references(name)
    X = np.vstack([ORDINARY[:7], [[1e300, 0.5]], ORDINARY[7:]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NonFiniteResultError, match="at test row 7 .1 row.s..: the model "
                                                       "cannot evaluate that input") as error:
            reference.model.predict(X, return_std=True)
    assert list(error.value.rows) == [7]


def test_an_input_that_overflows_its_standardization_is_named():
    X, y = training_data()
    model = low_rank(normalize_X=True, optimize=False,
                                  random_state=0, approximation=make_approximation("rff", n_components=16), normalize_y=False).fit(0.1 * X, y)       # scales below 1
    with pytest.raises(NonFiniteResultError, match="standardized input is not finite at "
                                                   "test row 3 ") as error:
        model.predict(np.vstack([ORDINARY[:3], [[1.7e308, 0.0]], ORDINARY[3:]]))
    assert list(error.value.rows) == [3]


def _cli(*argv):
    return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    """Training and test files of the issue's example, and fitted exact and neighbourhood
    models (through the command line)."""
    folder = tmp_path_factory.mktemp("cli")
    X, y = issue_data()
    np.savetxt(folder / "train.csv", np.column_stack([X, y]), delimiter=",",
               header="x1,x2,y", comments="")
    T = np.random.default_rng(4).uniform(-2.5, 2.5, size=(50, 2))
    for stem, rows in [("test", T), ("far", np.vstack([T[:20], [[1e9, 0.3]], T[20:]])),
                       ("huge", np.vstack([T[:20], [[1e300, 0.3]], T[20:]]))]:
        np.savetxt(folder / f"{stem}.csv", rows, delimiter=",", header="x1,x2",
                   comments="", fmt="%.17g")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _cli("fit", folder / "train.csv", "--target", "y", "--approximation", "exact",
                    "--out", folder / "exact.npz", "--quiet") == 0
        assert _cli("fit", folder / "train.csv", "--target", "y", "--approximation", "exact",
                    "--local", "neighbors", "--local-neighbors", "40", "--out",
                    folder / "neighbors.npz", "--quiet") == 0
        assert _cli("fit", folder / "train.csv", "--target", "y", "--approximation",
                    "maclaurin", "--kernel", "gaussian", "--n-components", "16",
                    "--no-optimize", "--out", folder / "maclaurin.npz", "--quiet") == 0
    return folder


@pytest.mark.parametrize("model", ["exact", "neighbors"])
@pytest.mark.parametrize("far", ["far", "huge"])
def test_scalegp_predict_with_one_far_row(cli_files, model, far):
    """`scalegp predict` of 50 ordinary rows plus one row at 1e9 (1e300): the 50 rows are
    bitwise those predicted without it (before: moved by up to 4.3 (exact) and 21.2
    (neighbourhoods) with targets in +-1.5 and posterior sd below 0.04, exit 0; at 1e300 exit
    1 naming test row 0 or 2 of the 51), and the far row predicts the prior."""
    folder = cli_files
    for stem in ("test", far):
        assert _cli("predict", folder / f"{model}.npz", folder / f"{stem}.csv", "--out",
                    folder / f"{model}-{stem}.csv", "--quiet") == 0
    alone = np.loadtxt(folder / f"{model}-test.csv", delimiter=",", skiprows=1)
    mixed = np.loadtxt(folder / f"{model}-{far}.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(np.delete(mixed, 20, axis=0), alone)
    assert alone[:, 1].max() < 0.1
    assert np.all(np.isfinite(mixed[20])) and mixed[20, 1] > 10 * alone[:, 1].max()


def test_scalegp_predict_names_the_data_row_it_cannot_evaluate(cli_files, capsys):
    folder = cli_files
    code = _cli("predict", folder / "maclaurin.npz", folder / "huge.csv", "--out",
                folder / "maclaurin-huge.csv", "--quiet")
    assert code == cli.EXIT_NON_FINITE
    error = capsys.readouterr().err
    assert "huge.csv: data row 21 (1 row(s) of data rows 1-51)" in error
    assert "cannot evaluate that input" in error
    assert not (folder / "maclaurin-huge.csv").exists()


# ----------------------------------------------------------------------------- kernels


@pytest.mark.parametrize("kernel", [sg.Gaussian(length_scale=[0.7, 1.3]),
                                    sg.Matern(nu=1.5, length_scale=0.9),
                                    sg.Matern(nu=2.5, length_scale=[1.1, 0.6])],
                         ids=["gaussian", "matern32", "matern52"])
def test_distances_by_expansion_stay_accurate_far_from_the_origin(kernel):
    """Points at offset 1e6 with spread 1: r^2 by the shifted expansion agrees with the
    differences within the docstring's bound (d + 4) eps (8 beta^2 + 2 r^2), beta the
    reference set's spread in length scales, while the unshifted expansion's rounding,
    eps |x / l|^2 ~ 2e-4, would be 1e10 times larger (mutation caught: no shift)."""
    rng = np.random.default_rng(0)
    offset = np.array([1e6, -2e6])
    Y = offset + rng.uniform(-1, 1, size=(60, 2))                  # the reference set
    X = offset + rng.uniform(-1.5, 1.5, size=(40, 2))              # rows evaluated against it
    scale = np.broadcast_to(kernel.length_scale, (2,))
    r2, _, B = kernel._scaled_squared_distances(X, Y)
    exact_r2 = np.sum(((X[:, None, :] - Y[None, :, :]) / scale) ** 2, axis=-1)
    beta2 = np.max(np.einsum("ij,ij->i", B, B))
    bound = (2 + 4) * np.finfo(float).eps * (8 * beta2 + 2 * exact_r2)
    assert np.all(np.abs(r2 - exact_r2) <= bound)
    assert bound.max() < 1e-10 * np.finfo(float).eps * np.max(np.sum((X / scale) ** 2, axis=1))
    np.testing.assert_allclose(kernel(X, Y), kernel.by_differences(X, Y), rtol=0, atol=1e-13)


def test_rows_too_far_to_measure_get_kernel_zero_not_nan():
    """A row with |x - c| / l above 1.3e154 (|a|^2 overflows): r^2 = inf, k = 0 for every
    kernel family, the other rows unchanged (mutation caught: inf - inf = NaN in r^2, or
    Matern's (1 + a) e^{-a} = inf * 0)."""
    rng = np.random.default_rng(1)
    # a reference point 1e10 from the others: a^T b of the far rows overflows too
    Y = np.vstack([rng.uniform(-1, 1, size=(30, 2)), [[1e10, -1e10]]])
    X = rng.uniform(-1, 1, size=(5, 2))
    far = np.vstack([X[:2], [[1e300, 0.0]], [[3e200, -3e200]], X[2:]])
    for kernel in [sg.Gaussian(), sg.Matern(nu=0.5), sg.Matern(nu=1.5), sg.Matern(nu=2.5),
                   sg.Cauchy(), sg.Laplacian()]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                  # and no overflow warning
            K = kernel(far, Y)
            K_diff = kernel.by_differences(far, Y)
        assert np.all(K[2:4] == 0.0) and np.all(K_diff[2:4] == 0.0), kernel
        np.testing.assert_allclose(np.delete(K, [2, 3], axis=0), kernel(X, Y), rtol=1e-14,
                                   atol=1e-15)


def test_routing_to_centres_far_from_the_origin():
    """nearest_centres shifts by the centres' mean (a reference of the model, not of the
    batch): 1e8 length scales from the origin, its route is the argmin of the distances from
    the differences, where the unshifted expansion's rounding, eps |u| |v| ~ 2 in squared
    units, misroutes 74 % of these rows (mutation caught: no shift)."""
    rng = np.random.default_rng(3)
    offset = np.array([1e8, -1e8])
    centres = offset + rng.uniform(-3, 3, size=(20, 2))
    X = offset + rng.uniform(-3, 3, size=(200, 2))
    exact = np.argmin(np.sum((X[:, None, :] - centres[None, :, :]) ** 2, axis=-1), axis=1)
    np.testing.assert_array_equal(local.nearest_centres(X, centres, length_scale=1.0), exact)


def test_the_exact_covariance_of_a_batch_with_a_far_row():
    """return_cov's test-test block comes from the differences: the ordinary rows' block is
    unchanged by a far row (to rounding), where the shift by the batch's mean (c = 1e9 / 21)
    put errors of eps c^2 ~ 0.5 into it."""
    X, y = training_data()
    model = sg.ExactGPRegressor(optimize=False, normalize_X=False, normalize_y=False).fit(X, y)
    T = ORDINARY
    _, cov = model.predict(T, return_cov=True)
    _, far_cov = model.predict(np.vstack([T, [[1e9, 0.0]]]), return_cov=True)
    np.testing.assert_allclose(far_cov[:-1, :-1], cov, rtol=0, atol=1e-12)
    assert far_cov[-1, -1] == pytest.approx(model.kernel_.variance * model.y_train_std_ ** 2)


# ----------------------------------------------------------------------------- the helpers


def test_in_blocks_pads_to_whole_blocks_and_drops_the_padding():
    seen = []

    def function(block):
        seen.append(block.shape)
        return block.sum(axis=1), block[:, :1]
    X = np.arange(2 * 100, dtype=float).reshape(100, 2)
    total, first = rowwise.in_blocks(function, X)
    assert seen == [(rowwise.BLOCK_ROWS, 2)] * 3
    np.testing.assert_array_equal(total, X.sum(axis=1))
    np.testing.assert_array_equal(first[:, 0], X[:, 0])


def test_a_kernel_operator_never_splits_a_prediction_block():
    """Random-projection features k(x, X_train) T go through row blocks sized by the
    training set: a prediction block is one of them however large n d is, so its rows meet
    the same products (mutation caught: 41 + 7 rows for n d = 50,000)."""
    from scalegp.features import projections as sketching
    for n_cols, width in [(10, 1), (10_000, 5), (200_000, 8)]:
        sizes = {s.stop - s.start for s in sketching.row_blocks(rowwise.BLOCK_ROWS, n_cols,
                                                                width)}
        assert sizes == {rowwise.BLOCK_ROWS}
    assert all((s.stop - s.start) % rowwise.BLOCK_ROWS == 0
               for s in list(sketching.row_blocks(10_000, 10_000, 5))[:-1])


def test_nested_one_blas_thread_contexts_keep_the_limit_until_the_last_exits():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [pool["num_threads"] for pool in threadpool_info()
                if pool["user_api"] == "blas"]
    before = blas_threads()
    with rowwise.one_blas_thread():
        with rowwise.one_blas_thread():
            assert set(blas_threads()) == {1}
        assert set(blas_threads()) == {1}           # the inner exit did not lift it
    assert blas_threads() == before


def test_a_failing_matrix_leaves_the_others_factors_bitwise():
    """batched_cholesky: a stack with one matrix that needs jitter factorizes the others
    alone by the same LAPACK call, bitwise the batched factors."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((4, 30, 40))
    A = A @ A.transpose(0, 2, 1) + 0.5 * np.eye(30)
    good, _ = linalg.batched_cholesky(A)
    stack = A.copy()
    w = np.linalg.eigvalsh(stack[2])
    stack[2] -= (w[0] + 1e-9 * w[-1]) * np.eye(30)       # smallest eigenvalue -1e-9 |A|
    with pytest.warns(sg.errors.NumericalWarning, match=r"\[2\] was not"):
        L, jitter = linalg.batched_cholesky(stack)
    assert jitter[2] > 0 and not np.any(jitter[[0, 1, 3]])
    for j in (0, 1, 3):
        np.testing.assert_array_equal(L[j], good[j])
