"""The fuzz suite of the command line, the readers and the loader (issue 24, "Must show").

Every case runs ``scalegp.cli.main`` in-process in a fresh folder and is classified by the
rule of :mod:`tests.fuzzing` (ok, clean error, crash, silent wrong, data loss, hang, refused
valid); the families and their oracles are in :mod:`tests.fuzz_cases`. The default suite
runs a fixed seeded slice of every family (under a minute); ``-m slow`` runs the full
generators, and the data files through a Dask cluster too, and prints the count table.

The cases that met the bugs of issue 24 before their fixes are also run one by one below,
each held to the one verdict it must now get.
"""

import os
import warnings

import numpy as np
import pytest

from . import fuzz_cases, fuzzing
from .fuzzing import CLEAN_ERROR, OK, Tally, run_case

#: Cases per family in the default slice (None: all of them).
SLICE = {"fit-data": None, "predict-data": None, "options": 60, "paths": None, "model-files": 60}
FULL = {"options": 1500}
SEED = 20261204


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


#: Models whose metadata mutants the default slice draws from (the full run: all models).
METADATA_OF = ("lazy", "neighbors-glf", "gibbs")


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    """The saved models of test_model_file_fuzz."""
    from .test_model_file_fuzz import MODELS, Saved, data
    folder = tmp_path_factory.mktemp("models")
    X, y = data(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: Saved(make().fit(X, y), folder / f"{name}.npz")
                for name, make in MODELS.items()}


@pytest.fixture(scope="module")
def dask_scheduler():
    """The address of a LocalCluster whose worker is a thread of this process (so it reads
    the case folder's files by the relative paths of the command line)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                                  protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def family_cases(family, work, saved_models=None, n_options=None, metadata_of=METADATA_OF,
                 scheduler=None):
    if family == "fit-data":
        return list(fuzz_cases.fit_data_cases(work / "references"))
    if family == "dask-data":
        return list(fuzz_cases.fit_data_cases(work / "references", scheduler=scheduler))
    if family == "predict-data":
        return list(fuzz_cases.predict_data_cases(work / "model"))
    if family == "options":
        return list(fuzz_cases.options_cases(n_options))
    if family == "paths":
        return list(fuzz_cases.paths_cases(work / "model"))
    mutants = fuzz_cases.model_mutants(saved_models, metadata_of)
    return list(fuzz_cases.model_file_cases(saved_models, mutants))


def run_all(cases, work, name):
    tally = Tally()
    for index, case in enumerate(cases):
        tally.add(case, run_case(case, work / name / str(index)))
    return tally


def sample(cases, size, seed=SEED):
    if size is None or size >= len(cases):
        return cases
    chosen = np.random.default_rng(seed).choice(len(cases), size=size, replace=False)
    return [cases[i] for i in sorted(chosen)]


@pytest.mark.parametrize("family", sorted(SLICE))
def test_default_slice(family, work, request):
    saved = request.getfixturevalue("saved_models") if family == "model-files" else None
    cases = family_cases(family, work, saved, n_options=SLICE["options"])
    tally = run_all(sample(cases, SLICE[family]), work, family)
    counts = tally.counts[family]
    assert counts[OK] > 0, tally.table()
    assert not tally.bad, tally.table() + "\n" + tally.report(tally.bad)


@pytest.mark.slow
def test_full_run(work, saved_models, dask_scheduler, capsys):
    """Every case of every family; prints the count table and the bad cases."""
    tally = Tally()
    for family in sorted(SLICE) + ["dask-data"]:
        cases = family_cases(family, work, saved_models, n_options=FULL["options"],
                             metadata_of=None, scheduler=dask_scheduler)
        for index, case in enumerate(cases):
            tally.add(case, run_case(case, work / "full" / family / str(index)))
    with capsys.disabled():
        print("\n" + tally.table())
        print(tally.report(tally.bad))
    assert not tally.bad, tally.table() + "\n" + tally.report(tally.bad)


# ------------------------------------------------------------------- the bugs of issue 24
# The generated cases that met a bug of issue 24 before its fix, each with the verdict it
# must get now (the section of the issue in the comment).


def by_name(cases, name):
    return next(case for case in cases if case.name == name)


def describe(case, verdict):
    """The verdict with the case's reproduction."""
    return f"{verdict.outcome}: {case.command()}: {verdict.detail} {verdict.stderr}"


@pytest.mark.parametrize("family, name, outcome", [
    ("paths", "fit without --out", CLEAN_ERROR),                              # §4
    ("paths", "predict without --out: to standard output (ok)", OK),          # §4
    ("paths", "fit --out read-only", CLEAN_ERROR),                 # §4, also for root
    ("paths", "predict --out read-only", CLEAN_ERROR),                        # §4
    ("fit-data", ".npz fortran-ordered X", OK),                               # §3
    ("fit-data", ".csv huge text field", CLEAN_ERROR),                        # §3
    ("fit-data", ".parquet int64 above 2**53", OK),                           # §3
    ("predict-data", ".npz header claims more rows", CLEAN_ERROR),            # §3
    ("predict-data", ".csv a far row", OK),                                   # §1
    ("predict-data", ".csv extreme magnitude", OK),                           # §1
    ("model-files", "lazy: metadata local.reoptimized = True", CLEAN_ERROR),  # §6
])
def test_fixed_generated_case(family, name, outcome, work, request):
    saved = request.getfixturevalue("saved_models") if family == "model-files" else None
    case = by_name(family_cases(family, work, saved, metadata_of=("lazy",)), name)
    verdict = run_case(case, work / "fixed" / family / name.replace(" ", "-"))
    assert verdict.outcome == outcome, describe(case, verdict)


@pytest.mark.slow
@pytest.mark.parametrize("name, outcome", [
    (".csv ragged long row", CLEAN_ERROR),          # §5: was trained on, truncated
    (".csv a row of empty cells", OK),              # §5: was read as missing values
])
def test_fixed_dask_case(name, outcome, work, dask_scheduler):
    """The Dask workers read a CSV by the serial reader's grammar (issue 24 §5)."""
    case = by_name(family_cases("dask-data", work, scheduler=dask_scheduler), name)
    verdict = run_case(case, work / "fixed" / "dask" / name.replace(" ", "-"))
    assert verdict.outcome == outcome, describe(case, verdict)


def fit_case(*flags, timeout=20.0):
    return fuzz_cases.Case("fixed", "fit", ["fit", "--approximation", "rff", "d.csv", "--target", "y", "--out", "m.npz",
                                           "--quiet", *flags],
                           setup=fuzz_cases.write_option_data,
                           oracle=fuzz_cases.fitted_model_oracle(), timeout=timeout)


@pytest.mark.parametrize("flags, outcome", [
    pytest.param(["--objective", "fitc", "--n-components", "16"], OK, id="fitc-rff"),   # §3
    pytest.param(["--objective", "fitc", "--n-components", "16",
                  "--noise-variance-column", "v"], OK, id="fitc-noise-column"),         # §3
    pytest.param(["--kernel", "gaussian", "--approximation", "sfs", "--n-components", "32",
                  "--option", "signed_rule=keep"], CLEAN_ERROR, id="signed-rule-option"),  # §3
    pytest.param(["--sampler", "gibbs", "--n-iter", "11", "--burn-in", "10",
                  "--n-components", "16"], CLEAN_ERROR, id="gibbs-one-draw"),           # §2
    pytest.param(["--n-restarts", "100000000", "--n-components", "16"], CLEAN_ERROR,
                 id="n-restarts-1e8"),                                                  # §3
])
def test_fit_flags_that_met_a_bug(flags, outcome, work):
    """Each ends within 1 s (a count without a limit ran for minutes) in ok (oracle: finite
    row-wise predictions with std > 0) or in the clean error it must give."""
    case = fit_case(*flags, timeout=1.0)
    verdict = run_case(case, work / "fixed" / "fit" / "-".join(flags))
    assert verdict.outcome == outcome, describe(case, verdict)


# ------------------------------------------------------------------- found by this suite


def test_a_fifo_as_data_is_refused_without_opening_it(tmp_path):
    """Was: fit and predict waited forever for a writer (the fuzz case "fit data a FIFO")."""
    from scalegp.data.readers import TableError, open_reader
    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)
    with pytest.raises(TableError, match=r"data\.csv: is not a regular file \(a FIFO, socket "
                                         r"or device\); a data file is read in several passes"), \
            fuzzing.time_limit(5):
        open_reader(fifo)


@pytest.mark.parametrize("where", ["first line", "after the sniffed start"])
def test_a_csv_that_is_not_utf8_is_refused_by_name(tmp_path, where):
    """Was: the raw "'utf-8' codec can't decode byte 0xff" without the file name, from the
    sniffing (a bad byte in the first 64 KiB) or from a later pass."""
    from scalegp.data.readers import SNIFF_BYTES, TableError, open_reader
    rows = "".join(f"{i},{i}\n" for i in range(SNIFF_BYTES // 4))
    content = ("a,b\n" + rows).encode() + b"1,\xff\n"
    if where == "first line":
        content = b"a,\xff\n" + rows.encode()
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    line = 1 if where == "first line" else SNIFF_BYTES // 4 + 2
    with pytest.raises(TableError, match=rf"data\.csv: line {line} is not UTF-8 text "
                                         r"\(byte 0xff\)"):
        for _ in open_reader(path).blocks(1000):
            pass


def test_loading_a_folder_or_fifo_says_what_it_is(tmp_path):
    """Was: "does not exist" for a model path that exists but is not a regular file."""
    import scalegp as sg
    from scalegp.errors import InvalidModelFileError
    os.mkfifo(tmp_path / "model.npz")
    for path in (tmp_path, tmp_path / "model.npz"):
        with pytest.raises(InvalidModelFileError, match="is not a regular file"):
            sg.load(path)
    with pytest.raises(InvalidModelFileError, match="does not exist"):
        sg.load(tmp_path / "missing.npz")


# ------------------------------------------------------------------- the rule itself


def _writes(name, content=b"new"):
    def main(argv):
        with open(name, "wb") as handle:
            handle.write(content)
        return 0
    return main


def _prints(text, code):
    def main(argv):
        import sys
        print(text, file=sys.stderr)
        return code
    return main


def _raises(argv):
    raise RuntimeError("boom")


def _sleeps(argv):
    import time
    time.sleep(5)
    return 0


def _read_only_out(folder):
    (folder / "out.npz").write_bytes(b"old")
    os.chmod(folder / "out.npz", 0o444)


@pytest.mark.parametrize("main, setup, oracle, must_succeed, outcome", [
    (_writes("out.npz"), None, lambda f, s: None, False, "ok"),
    (_writes("out.npz"), None, lambda f, s: "wrong", False, "silent wrong"),
    (_writes("out.npz"), None, None, False, "silent wrong"),
    (_writes("model.npz"), None, lambda f, s: None, False, "data loss"),     # a decoy
    (_writes("stray.tmp"), None, lambda f, s: None, False, "data loss"),     # unnamed
    (_writes("out.npz"), _read_only_out, lambda f, s: None, False, "data loss"),
    (_prints("scalegp fit: error: data.csv: line 3 has 4 fields", 2), None, None, False,
     "clean error"),
    (_prints("scalegp fit: error: data.csv: line 3 has 4 fields", 2), None, None, True,
     "refused valid"),
    (_prints("scalegp fit: error: internal error (KeyError): 'a'", 2), None, None, False,
     "crash"),
    (_prints("scalegp fit: error: f() got an unexpected keyword argument 'x'", 2), None, None,
     False, "crash"),
    (_prints("scalegp fit: error: no file named", 2), None, None, False, "crash"),  # no name
    (_prints("a warning only", 2), None, None, False, "crash"),
    (_prints("", 3), None, None, False, "crash"),
    (_raises, None, None, False, "crash"),
    (_sleeps, None, None, False, "hang"),
])
def test_the_classification_rule(monkeypatch, tmp_path, main, setup, oracle, must_succeed,
                                 outcome):
    """Each outcome of the rule in tests/fuzzing.py, on a stand-in for ``cli.main``."""
    from scalegp import cli
    monkeypatch.setattr(cli, "main", main)
    case = fuzz_cases.Case("rule", "rule", ["fit", "--approximation", "rff", "data.csv", "--out", "out.npz"],
                           setup=setup or (lambda folder: None), oracle=oracle,
                           must_mention="data.csv", must_succeed=must_succeed, timeout=0.2)
    assert run_case(case, tmp_path / "case").outcome == outcome
