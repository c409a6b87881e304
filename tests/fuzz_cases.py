"""The fuzz cases of the command line: families of :class:`tests.fuzzing.Case`, each a
seeded, deterministic list, with the oracle each case's result is held to.

- ``fit-data``: ``scalegp fit`` of malformed CSV, .npy, .npz and Parquet files
  (:mod:`tests.fuzz_files`); oracle: the model equals the CLI's fit of the table a correct
  reader returns, written as a plain CSV (its predictions at probe points, to 1e-8);
- ``dask-data`` (``-m slow``): the same files through ``fit --dask-scheduler``, whose
  workers read them; the same oracle;
- ``predict-data``: ``scalegp predict`` of the same malformations as prediction inputs;
  oracle: each written row equals the API's prediction of that row alone;
- ``options``: random argument lists of fit, evaluate and predict (absurd counts, bounds,
  values and combinations); oracle of a fit: the model loads and predicts finite means and
  a latent std > 0 at probes inside and outside the data, row-wise (a batch of probes equals
  each probe alone, to 1e-8); of predict: each row equals the API's of that row alone; of
  evaluate: a table of finite numbers with one row per method;
- ``paths``: outputs, inputs and models that are missing, folders, links, FIFOs, read-only,
  the same file twice; oracle: a written file is a complete model / prediction table;
- ``model-files``: ``scalegp predict`` with the mutated model files of
  ``tests/test_model_file_fuzz.py``; oracle: a mutant that must be refused never predicts,
  one that may load predicts exactly what the original predicts.
"""

from __future__ import annotations

import io
import itertools
import os
import warnings
from pathlib import Path

import numpy as np

import scalegp as sg
from scalegp import features

from . import fuzz_files
from .fuzzing import Case, call_main, differs, finite_problem

QUIET = "--quiet"
#: Probe points of the fit oracles: inside the data's box [-2, 2]^2 and outside it.
PROBES = np.array([[0.0, 0.0], [1.5, -1.0], [-1.9, 1.9], [0.3, 0.7], [4.0, -4.0]])
#: Model options of the fit-data family, cycled over the cases.
FIT_OPTIONS = (["--approximation", "exact", "--no-optimize"], ["--approximation", "exact"],
               ["--n-components", "16", "--no-optimize"],
               ["--approximation", "nystrom", "--n-components", "8"])
SUFFIXES = (".csv", ".npz", ".npy", ".parquet")


def predict_rows(model, X, include_noise=False):
    """(mean, std) of each row of X predicted alone: the row-wise reference."""
    rows = [model.predict(X[i:i + 1], return_std=True, include_noise=include_noise)
            for i in range(len(X))]
    return np.concatenate([r[0] for r in rows]), np.concatenate([r[1] for r in rows])


def load_quietly(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sg.load(path)


def read_predictions(folder: Path, out: str, stdout: str):
    """The (mean, std) rows that ``scalegp predict --out OUT`` wrote: to the file ``OUT`` in
    ``folder``, or to standard output when ``OUT`` is "-" (predict's default)."""
    source = io.StringIO(stdout) if out == "-" else folder / out
    return np.loadtxt(source, delimiter=",", skiprows=1, ndmin=2)


# ------------------------------------------------------------------------- fit-data

_REFERENCES = {}


def reference_fit(values, options, folder: Path):
    """(mean, std) at PROBES of ``scalegp fit`` on ``values`` written as a plain CSV (a, b, y),
    or None when that fit fails; cached."""
    key = (values.tobytes(), values.shape, tuple(options))
    if key not in _REFERENCES:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "reference.csv").write_text(fuzz_files.csv_text(["a", "b", "y"], values))
        code, _, _, _ = call_main(["fit", "reference.csv", "--target", "y", "--out", "r.npz",
                                   "--approximation", "rff",
                                   QUIET, *options], folder, 60)
        _REFERENCES[key] = (predict_rows(load_quietly(folder / "r.npz"), PROBES)
                            if code == 0 else None)
    return _REFERENCES[key]


def fit_oracle(expected, options, reference_folder):
    def oracle(folder, stdout):
        reference = reference_fit(expected, options, reference_folder)
        if reference is None:
            return "exit 0, but the fit of the same table as a plain CSV fails"
        mean, std = predict_rows(load_quietly(folder / "m.npz"), PROBES)
        return (differs("mean at the probes", mean, reference[0])
                or differs("std at the probes", std, reference[1]))
    return oracle


#: Model options of the dask-data family: a map built from the bounding box (what streams).
DASK_OPTIONS = ["--approximation", "glf", "--n-components", "16", "--no-optimize"]
#: What fit --dask-scheduler reads (docs/distributed.md): not .npz.
DASK_SUFFIXES = (".csv", ".npy", ".parquet")


def fit_data_cases(reference_folder: Path, scheduler=None):
    """The fit-data family, or with ``scheduler`` (a Dask scheduler's address whose workers
    share this process's working directory) the dask-data family: the same files read by the
    workers, held to the same oracle (the serial fit of the table a correct reader returns)."""
    names, values = fuzz_files.table(seed=3, n=24, n_inputs=2, target=True)
    options = itertools.cycle([DASK_OPTIONS] if scheduler else FIT_OPTIONS)
    engine = ["--dask-scheduler", scheduler] if scheduler else []
    for suffix in DASK_SUFFIXES if scheduler else SUFFIXES:
        for mutation, mutate in fuzz_files.mutations(suffix, target=True).items():
            mutant = mutate(names, values)
            path = "data" + suffix
            target = "y" if mutant.header or suffix == ".npz" else "2"
            chosen = next(options)
            valid = mutant.kind == fuzz_files.VALID
            yield Case(
                "dask-data" if scheduler else "fit-data", f"{suffix} {mutation}",
                ["fit", path, "--target", target, "--out", "m.npz", "--approximation", "rff",
                 QUIET, *chosen,
                 *mutant.extra, *engine],
                setup=lambda folder, p=path, c=mutant.content: (folder / p).write_bytes(c),
                oracle=(None if mutant.expected is None
                        else fit_oracle(mutant.expected, chosen, reference_folder)),
                must_mention=None if valid else path, must_succeed=valid and len(values) > 1,
                timeout=60 if scheduler else 20)


# ------------------------------------------------------------------------- predict-data

_MODEL = {}


def prediction_model(folder: Path) -> bytes:
    """The bytes of an exact GP fitted by the CLI to a 30-row table (inputs a, b)."""
    if "bytes" not in _MODEL:
        folder.mkdir(parents=True, exist_ok=True)
        names, values = fuzz_files.table(seed=1, n=30, n_inputs=2, target=True)
        (folder / "train.csv").write_text(fuzz_files.csv_text(names, values))
        code, _, err, _ = call_main(["fit", "train.csv", "--target", "y", "--approximation",
                                     "exact", "--out", "model-a-b.npz", QUIET], folder, 60)
        assert code == 0, err
        _MODEL["bytes"] = (folder / "model-a-b.npz").read_bytes()
    return _MODEL["bytes"]


def rowwise_oracle(model_name, expected_X, out="p.csv"):
    def oracle(folder, stdout):
        model = load_quietly(folder / model_name)
        mean, std = predict_rows(model, expected_X)
        got = read_predictions(folder, out, stdout)
        if got.shape[0] != len(expected_X):
            return f"{got.shape[0]} predictions for {len(expected_X)} rows"
        return (differs("mean", got[:, 0], mean) or differs("std", got[:, 1], std)
                or (None if np.all(got[:, 1] > 0) else "a predicted std is not > 0"))
    return oracle


def predict_data_cases(model_folder: Path):
    model = prediction_model(model_folder)
    names, values = fuzz_files.table(seed=5, n=12, n_inputs=2, target=False)
    for suffix in SUFFIXES:
        for mutation, mutate in fuzz_files.mutations(suffix, target=False).items():
            mutant = mutate(names, values)
            if mutant.extra:                      # --drop-missing is a fit flag
                continue
            path = "x" + suffix

            def setup(folder, p=path, c=mutant.content):
                (folder / p).write_bytes(c)
                (folder / "model-a-b.npz").write_bytes(model)
            valid = mutant.kind == fuzz_files.VALID
            yield Case("predict-data", f"{suffix} {mutation}",
                       ["predict", "model-a-b.npz", path, "--out", "p.csv", QUIET],
                       setup=setup,
                       oracle=(None if mutant.expected is None
                               else rowwise_oracle("model-a-b.npz", mutant.expected)),
                       must_mention=None if valid else path, must_succeed=valid)


# ------------------------------------------------------------------------- options

#: Values of each kind of option: (ordinary ones, absurd or malformed ones).
COUNTS = (["1", "2", "3", "8", "16"], ["0", "-3", "1.5", "1e3", "x", "", str(10**12)])
SMALL_COUNTS = (["0", "1", "2"], ["-1", "x", "1.5"])
POSITIVE = (["0.5", "1", "2", "0.05"],
            ["1e-300", "1e300", "0", "-1", "nan", "inf", "-inf", "x", "1e-20"])
BOUNDS = ([("1e-3", "1e3"), ("2", "10"), ("0.1", "0.2"), ("1e-5", "1e2")],
          [("10", "2"), ("1", "1"), ("0", "1"), ("-1", "1"), ("1e-300", "1e300"), ("nan", "1"),
           ("1", "inf"), ("x", "1")])
KERNELS = (["gaussian", "matern12", "matern32", "matern52", "cauchy", "laplacian", "rbf",
            "reciprocal_semigroup"], ["nope", "Gaussian"])
OPTIONS = (["n_nodes=auto", "epsilon=0.1"],
           ["n_nodes=3", "epsilon=-1", "foo=bar", "=", "novalue", "n_nodes=[1,2]",
            "n_nodes=null", "n_nodes=NaN", "epsilon=1e400", "epsilon=Infinity",
            'n_nodes={"a": 1}', "n_nodes=99999999999999999999"])
SEEDS = (["0", "7"], ["-1", str(2**70), "x"])
TARGETS = (["y"], ["3", "-1", "99", "nope", "v"])
SWITCH = None
#: Flags of fit with the values they draw from (None: a switch).
FIT_FLAGS = {
    "--approximation": (features.names() + ["exact"], ["EXACT", "nope", ""]),
    "--n-components": COUNTS, "--kernel": KERNELS,
    "--ard": SWITCH, "--no-optimize": SWITCH, "--no-normalize-y": SWITCH,
    "--no-standardize": SWITCH,
    "--length-scale": POSITIVE, "--variance": POSITIVE, "--noise-variance": POSITIVE,
    "--length-scale-bounds": BOUNDS, "--variance-bounds": BOUNDS,
    "--noise-variance-bounds": BOUNDS, "--n-restarts": SMALL_COUNTS,
    "--header": (["auto", "yes", "no"], ["maybe"]), "--option": OPTIONS,
    "--dtype": (["auto", "float64", "float32"], ["float16"]),
    "--solver": (["cholesky", "qr"], ["lu"]),
    "--objective": (["dtc", "fitc", "vfe"], ["elbo"]),
    "--local": (["clusters", "test-points", "neighbors"], ["everywhere"]),
    "--local-threshold": POSITIVE, "--local-neighbors": COUNTS,
    "--local-learning-centers": SMALL_COUNTS, "--local-lazy": SWITCH,
    "--local-reoptimize": SWITCH,
    "--noise-variance-column": (["v"], ["y", "a", "nope", "2", "9"]),
    "--drop-missing": SWITCH, "--n-jobs": (["1", "2", "-1"], ["0", "x", "-7"]),
    "--sampler": (["optimize", "gibbs"], ["metropolis"]),
    "--n-iter": (["20", "40"], ["1", "0", "x"]), "--burn-in": (["0", "5", "19"], ["50", "-1"]),
    "--thin": (["1", "3"], ["0", "100"]),
    "--theta1-grid": ([("0.1", "2", "10"), ("0.1", "2", "1"), ("2", "0.1", "5")],
                      [("0", "1", "5"), ("-1", "1", "5"), ("0.1", "2", "0"),
                       ("0.1", "2", "2.5"), ("nan", "1", "3")]),
    "--tau-prior": ([("1", "0.1")], [("0", "1"), ("1e300", "1e-300")]),
    "--theta2-prior": ([("1", "1")], [("-1", "1")]),
    "--no-collapsed": SWITCH, "--diag-correction": SWITCH, "--seed": SEEDS, "--target": TARGETS,
    "--signed-rule": (["repair", "keep"], ["maybe"]),
    "--knots": (["pivoted_cholesky", "random", "grid", "kmeans"], ["everywhere"]),
    "--learn-knots": (["0", "3"], ["-1", "x"]), "--map-per-atom": SWITCH,
    "--feature-cache-bytes": (["0", "1000000"], ["-5", "x"]),
}
EVALUATE_FLAGS = {
    "--approximations": (["rff", "rff,glf", "nystrom,orf"], ["exact", "nope", "", "rff,,rff"]),
    "--n-components": COUNTS,
    "--subsample": (["3", "10", "30"], ["1", "0", str(10**12), "x"]),
    "--test-fraction": (["0.2", "0.5", "0.99"], ["0", "1", "x"]), "--learn": SWITCH,
    "--kernel": KERNELS, "--length-scale": POSITIVE, "--noise-variance": POSITIVE,
    "--length-scale-bounds": BOUNDS, "--noise-variance-bounds": BOUNDS,
    "--no-optimize": SWITCH, "--no-standardize": SWITCH, "--option": OPTIONS,
    "--target": TARGETS, "--drop-missing": SWITCH, "--seed": SEEDS,
}
#: Chance that a flag is given, and that a given value is drawn from the absurd ones.
P_FLAG, P_ABSURD = 0.15, 0.15


def write_option_data(folder: Path):
    rng = np.random.default_rng(11)
    X = rng.uniform(-2, 2, size=(40, 2))
    v = rng.uniform(0, 0.05, size=40)
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * rng.standard_normal(40)
    (folder / "d.csv").write_text(fuzz_files.csv_text(["a", "b", "v", "y"],
                                                      np.column_stack([X[:, 0], X[:, 1], v, y])))


def _draw_flags(rng, flags, forced):
    """An argument list giving each flag with probability P_FLAG (the forced ones always),
    with an absurd value with probability P_ABSURD."""
    def draw(pool):
        values = pool[1] if rng.random() < P_ABSURD else pool[0]
        return values[rng.integers(len(values))]
    argv = []
    for flag, pool in flags.items():
        if flag not in forced and rng.random() >= P_FLAG:
            continue
        if pool is SWITCH:
            argv.append(flag)
            continue
        value = draw(pool)
        argv += [flag, *value] if isinstance(value, tuple) else [flag, value]
        if flag == "--length-scale" and rng.random() < 0.3:
            argv.append(draw(pool))                     # one per input (with --ard)
    return argv


def _flag(argv, name, default=None):
    argv = [str(a) for a in argv]
    return argv[argv.index(name) + 1] if name in argv[:-1] else default


def fitted_model_oracle(out="m.npz"):
    """The written model loads and predicts, at the probes, finite means and std > 0 (of the
    latent function: no model is certain at a test point), each row of the batch equal to
    that row predicted alone."""
    def oracle(folder, stdout):
        model = load_quietly(folder / out)
        n = model.n_features_in_
        probes = np.column_stack([PROBES[:, j % 2] for j in range(n)])
        probes[:, 2:] = np.abs(probes[:, 2:]) * 0.01     # a noise-variance-like column
        mean, std = model.predict(probes, return_std=True)
        row_mean, row_std = predict_rows(model, probes)
        return (differs("mean of the batch against each row alone", mean, row_mean)
                or differs("std of the batch against each row alone", std, row_std)
                or (None if np.all(std > 0) else
                    f"a predicted std is not > 0: {std.tolist()} at {probes.tolist()}"))
    return oracle


def evaluate_oracle(argv):
    methods = (_flag(argv, "--approximations", "rff") or "").split(",")

    def oracle(folder, stdout):
        rows = [line for line in stdout.splitlines()
                if line.startswith("| ") and not line.startswith("| method")]
        if len(rows) != 1 + len(methods):
            return f"{len(rows)} result rows for exact and {len(methods)} method(s)"
        for line in rows:
            cells = [cell.strip() for cell in line.strip("|").split("|")][1:]
            problem = finite_problem(f"row {line!r}", [float(c) for c in cells])
            if problem:
                return problem
        return None
    return oracle


def options_cases(n_cases: int, seed: int = 2024):
    """``n_cases`` random argument lists of fit (60 %), evaluate (30 %) and predict."""
    rng = np.random.default_rng(seed)
    for index in range(n_cases):
        draw = rng.random()
        if draw < 0.6:
            argv = ["fit", "d.csv", *_draw_flags(rng, FIT_FLAGS, {"--target"})]
            if "--approximation" not in argv:           # the low-rank flags' estimator
                argv += ["--approximation", "rff"]
            if "--sampler" in argv and _flag(argv, "--sampler") == "gibbs":
                argv += ["--n-iter", "30", "--burn-in", "10"] if "--n-iter" not in argv else []
            argv += ["--out", "m.npz"] if rng.random() < 0.95 else []
            if "--n-components" not in argv:
                argv += ["--n-components", "16"]
            oracle = fitted_model_oracle()
        elif draw < 0.9:
            argv = ["evaluate", "d.csv", *_draw_flags(rng, EVALUATE_FLAGS, {"--target"}),
                    "--subsample", "30"] + (["--n-components", "16"] if rng.random() < 0.7
                                             else [])
            oracle = evaluate_oracle(argv)
        else:
            argv = ["predict", "m.npz", "d.csv"]
            argv += ["--include-noise"] if rng.random() < 0.5 else []
            argv += ["--header", ["auto", "yes", "no", "x"][rng.integers(4)]]
            argv += ["--out", "p.csv"] if rng.random() < 0.9 else []
        argv = argv + [QUIET] if rng.random() < 0.9 else argv
        if argv[0] == "predict":
            yield _predict_option_case(index, argv)
            continue
        yield Case("options", f"#{index}", argv, setup=write_option_data, oracle=oracle)


def _predict_option_case(index, argv):
    def setup(folder):
        write_option_data(folder)
        code, _, err, _ = call_main(["fit", "d.csv", "--target", "y", "--approximation",
                                     "exact", "--no-optimize", "--out", "fitted.npz", QUIET],
                                    folder, 60)
        assert code == 0, err
        os.replace(folder / "fitted.npz", folder / "m.npz")

    def oracle(folder, stdout):
        out = _flag(argv, "--out", "-")
        table = np.loadtxt(folder / "d.csv", delimiter=",", skiprows=1)
        mean, std = predict_rows(load_quietly(folder / "m.npz"), table[:, :3],    # a, b, v
                                 include_noise="--include-noise" in argv)
        got = read_predictions(folder, out, stdout)
        return differs("mean", got[:, 0], mean) or differs("std", got[:, 1], std)
    return Case("options", f"#{index}", argv, setup=setup, oracle=oracle)


# ------------------------------------------------------------------------- paths

VICTIM = "elsewhere/victim.txt"


def _train(folder):
    write_option_data(folder)
    (folder / "elsewhere").mkdir(exist_ok=True)
    (folder / VICTIM).write_text("precious\n")


def _out_kinds():
    """{kind: (make(folder, path), must succeed)} of output paths."""
    def regular(folder, path):
        (folder / path).write_text("old output\n")

    def read_only(folder, path):
        regular(folder, path)
        os.chmod(folder / path, 0o444)

    def a_folder(folder, path):
        (folder / path).mkdir()
        (folder / path / "inside.txt").write_text("kept\n")

    def link(folder, path):
        os.symlink(VICTIM, folder / path)

    def dangling(folder, path):
        os.symlink("elsewhere/created-by-a-link", folder / path)

    def fifo(folder, path):
        os.mkfifo(folder / path)

    def read_only_folder(folder, path):
        (folder / "locked").mkdir()
        os.chmod(folder / "locked", 0o555)

    # a new file in a folder without write permission: refused, or (as root, who may write
    # there) created, either way nothing is lost
    return {"missing": (lambda f, p: None, True), "regular": (regular, True),
            "read-only": (read_only, False), "folder": (a_folder, False),
            "symlink": (link, False), "dangling symlink": (dangling, False),
            "fifo": (fifo, False), "in a read-only folder": (read_only_folder, None)}


def paths_cases(model_folder: Path):
    model = prediction_model(model_folder)
    for command in ("fit", "predict"):
        suffix = ".npz" if command == "fit" else ".csv"
        for kind, (make, succeeds) in _out_kinds().items():
            path = ("locked/out" if kind == "in a read-only folder" else "out") + suffix

            def setup(folder, make=make, path=path):
                _train(folder)
                (folder / "model-a-b.npz").write_bytes(model)
                make(folder, path)
            argv = (["fit", "d.csv", "--target", "y", "--approximation", "exact",
                     "--no-optimize"] if command == "fit"
                    else ["predict", "model-a-b.npz", "d.csv"]) + ["--out", path, QUIET]
            oracle = (fitted_model_oracle(path) if command == "fit"
                      else _d_csv_rowwise(path)) if succeeds is not False else None
            yield Case("paths", f"{command} --out {kind}", argv, setup=setup, oracle=oracle,
                       must_succeed=bool(succeeds), timeout=5)
    oracles = {"list": lambda folder, stdout: (None if "approximations (use with" in stdout
                                               else f"unexpected listing {stdout!r}"),
               "version": lambda folder, stdout: (None if stdout.startswith("scalegp ")
                                                  else f"unexpected version {stdout!r}")}
    for kind, argv in _input_cases():
        oracle = (_d_csv_rowwise(_flag(argv, "--out", "-")) if "(ok)" in kind
                  else oracles.get(kind))
        yield Case("paths", kind, argv, setup=lambda folder: _inputs(folder, model),
                   oracle=oracle, must_succeed=oracle is not None, timeout=5)


def _d_csv_rowwise(out):
    def oracle(folder, stdout):
        table = np.loadtxt(folder / "d.csv", delimiter=",", skiprows=1)
        return rowwise_oracle("model-a-b.npz", table[:, :2], out)(folder, stdout)
    return oracle


def _inputs(folder, model):
    _train(folder)
    (folder / "model-a-b.npz").write_bytes(model)
    (folder / "a-folder.csv").mkdir()
    os.symlink("d.csv", folder / "link.csv")
    os.mkfifo(folder / "fifo.csv")
    (folder / "empty.npz").write_bytes(b"")
    (folder / "readonly.csv").write_bytes((folder / "d.csv").read_bytes())
    os.chmod(folder / "readonly.csv", 0o444)


def _input_cases():
    predict = ["predict", "model-a-b.npz"]
    fit = ["fit", "--target", "y", "--approximation", "exact", "--no-optimize",
           "--out", "m.npz", QUIET]
    yield "fit data missing", fit + ["missing.csv"]
    yield "fit data a folder", fit + ["a-folder.csv"]
    yield "fit data a FIFO", fit + ["fifo.csv"]
    yield "fit data a character device", fit + ["/dev/null"]
    yield "fit data equal to --out", fit[:-3] + ["--out", "d.csv", QUIET, "d.csv"]
    yield "predict data via a symlink (ok)", predict + ["link.csv", "--out", "p.csv", QUIET]
    yield "predict read-only data (ok)", predict + ["readonly.csv", "--out", "p.csv", QUIET]
    yield "predict model missing", ["predict", "missing.npz", "d.csv", "--out", "p.csv"]
    yield "predict model a folder", ["predict", "a-folder.csv", "d.csv", "--out", "p.csv"]
    yield "predict model empty", ["predict", "empty.npz", "d.csv", "--out", "p.csv"]
    yield "predict model is the data", ["predict", "d.csv", "d.csv", "--out", "p.csv"]
    yield "predict model a FIFO", ["predict", "fifo.csv", "d.csv", "--out", "p.csv"]
    yield "predict --out the model", predict + ["d.csv", "--out", "model-a-b.npz"]
    yield "predict --out the data", predict + ["d.csv", "--out", "d.csv"]
    yield "predict --out through a link to the data", predict + ["d.csv", "--out", "link.csv"]
    yield "demo --out a folder", ["demo", "--out", "a-folder.csv"]
    yield "demo --out wrong suffix", ["demo", "--out", "figure.txt"]
    yield "experiment unknown name", ["experiment", "nope", "--out-dir", "exp"]
    yield "experiment --out-dir a file", ["experiment", "rp-table1", "--out-dir", "d.csv"]
    yield "no command", []
    yield "unknown command", ["train", "d.csv"]
    yield "list", ["list"]
    yield "version", ["--version"]
    yield "fit without --out", fit[:-3] + [QUIET, "d.csv"]
    yield "predict without --out: to standard output (ok)", predict + ["d.csv", QUIET]


# ------------------------------------------------------------------------- model files


def model_mutants(saved, metadata_of=None):
    """(model, description, field, build, verdict) of test_model_file_fuzz's generators: the
    array and archive mutants of every model, the metadata mutants (20,000 of the 23,000, 6 s
    to enumerate) of the models ``metadata_of`` (None: all)."""
    from .test_model_file_fuzz import archive_mutants, array_mutants, metadata_mutants
    for model, entry in saved.items():
        generators = (array_mutants, archive_mutants)
        if metadata_of is None or model in metadata_of:
            generators += (metadata_mutants,)
        for generator in generators:
            for description, field, build, verdict in generator(entry):
                yield model, description, (model, field), build, verdict


def model_file_cases(saved, mutants):
    """``scalegp predict`` of each mutant (:func:`model_mutants`) on its probes."""
    from .test_model_file_fuzz import MAY_LOAD, X_TEST
    probes = fuzz_files.csv_text(["x0", "x1"], X_TEST, header=False)
    for model, description, _, build, verdict in mutants:
        expected = saved[model].predictions

        def setup(folder, build=build):
            (folder / "mutant.npz").write_bytes(build())
            (folder / "x.csv").write_text(probes)

        def oracle(folder, stdout, expected=expected):
            got = read_predictions(folder, "p.csv", stdout)
            return (differs("mean", got[:, 0], expected[0], tolerance=0)
                    or differs("std", got[:, 1], expected[1], tolerance=0))
        yield Case("model-files", f"{model}: {description}",
                   ["predict", "mutant.npz", "x.csv", "--out", "p.csv", QUIET], setup=setup,
                   oracle=oracle if verdict == MAY_LOAD else None, must_mention="mutant.npz")

