"""Experiment (not a library feature): choosing between one length scale per input (ARD) and
one for all by nested cross-validation, on UCI sets' test folds.

For each training part: the exact GP of one kernel family is learned with one length scale
per input (started at 1) and with one for all (started at sqrt(d)), both from noise 0.01 in
the standardized units. Each is scored by nested 5-fold cross-validation: on each fold its
hyperparameters are learned again on the other rows from its optimum on all rows, and the
held-out rows' log predictive densities (noise included) recorded, row by row. The rule
picks one length scale where the mean of the rows' paired differences d_i = log p_one(y_i) -
log p_ARD(y_i) exceeds z standard errors, t = mean(d) / (sd(d) / sqrt(n)) > z. Printed per
fold as a JSON line (the rows' densities included); ``--summary FILE ...`` prints the table:
mean test RMSE / NLPD over the folds of ARD, of one scale and of the rule's pick at each z in
``Z_VALUES``, with the count of folds it switched. ::

    OPENBLAS_NUM_THREADS=1 python benchmarks/one_scale_experiment.py yacht,servo matern32 0,1,2,3,4 > rows.jsonl
    python benchmarks/one_scale_experiment.py --summary rows.jsonl

Results: benchmarks/results/auto-panel.md, session 20.
"""

from __future__ import annotations

import collections
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_auto  # noqa: E402

import scalegp as sg  # noqa: E402

#: The rule's thresholds, in standard errors of the paired differences.
Z_VALUES = (0, 1, 2, 3)
FOLDS = 5


def learned(X, y, family, one_scale, start=None):
    """The exact GP learned from ``start``'s optimum, or from the default start."""
    if start is not None:
        kernel, noise = start.kernel_, start.noise_variance_
    else:
        d = X.shape[1]
        kernel = sg.kernels.get(family).with_params(
            length_scale=math.sqrt(d) if one_scale else np.ones(d))
        noise = 1e-2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sg.ExactGPRegressor(kernel=kernel, noise_variance=max(noise, 1e-6)).fit(X, y)


def log_densities(model, X, y):
    """The rows' log predictive densities of a new observation and their errors."""
    mean, std = model.predict(X, return_std=True, include_noise=True)
    variance = std ** 2
    return -(0.5 * np.log(2 * np.pi * variance) + 0.5 * (y - mean) ** 2 / variance), y - mean


def nested(model, X, y, folds):
    """Each row's log density under the model learned again without its fold."""
    found = np.empty(y.size)
    for held in folds:
        train = np.setdiff1d(np.arange(y.size), held)
        found[held] = log_densities(learned(X[train], y[train], None, None, model),
                                    X[held], y[held])[0]
    return found


def run(names, family, test_folds):
    for name in names:
        for k in test_folds:
            X, y, X_test, y_test = bench_auto.load_split(name, bench_auto.DATA_DIR, test_fold=k)
            folds = np.array_split(np.random.default_rng(0).permutation(y.size), FOLDS)
            began = time.perf_counter()
            ard, one = learned(X, y, family, False), learned(X, y, family, True)
            row = dict(name=name, fold=k, family=family, n=int(y.size), d=int(X.shape[1]),
                       nested_ard=nested(ard, X, y, folds).tolist(),
                       nested_one=nested(one, X, y, folds).tolist())
            for label, model in (("ard", ard), ("one", one)):
                density, errors = log_densities(model, X_test, y_test)
                row[f"{label}_rmse"] = float(np.sqrt(np.mean(errors ** 2)))
                row[f"{label}_nlpd"] = float(-density.mean())
            row["seconds"] = time.perf_counter() - began
            print(json.dumps(row), flush=True)


def summary(files):
    rows = collections.defaultdict(list)
    for file in files:
        for line in open(file):
            record = json.loads(line)
            rows[record["name"]].append(record)
    print("| data set | n x d | folds | ARD | one scale | "
          + " | ".join(f"pick at z = {z} (switches)" for z in Z_VALUES) + " |")
    print("|---" * (5 + len(Z_VALUES)) + "|")
    for name, records in rows.items():
        def mean_of(label):
            return (np.mean([r[f"{label}_rmse"] for r in records]),
                    np.mean([r[f"{label}_nlpd"] for r in records]))
        cells = []
        for z in Z_VALUES:
            picks = []
            for r in records:
                d = np.array(r["nested_one"]) - np.array(r["nested_ard"])
                picks.append("one" if d.mean() / (d.std(ddof=1) / math.sqrt(d.size)) > z
                             else "ard")
            rmse = np.mean([r[f"{p}_rmse"] for r, p in zip(records, picks)])
            nlpd = np.mean([r[f"{p}_nlpd"] for r, p in zip(records, picks)])
            cells.append(f"{rmse:.4f} / {nlpd:.3f} ({picks.count('one')})")
        first = records[0]
        print(f"| {name} | {first['n']} x {first['d']} | {len(records)} | "
              "{:.4f} / {:.3f} | {:.4f} / {:.3f} | ".format(*mean_of("ard"), *mean_of("one"))
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    if sys.argv[1] == "--summary":
        summary(sys.argv[2:])
    else:
        run(sys.argv[1].split(","), sys.argv[2], [int(k) for k in sys.argv[3].split(",")])
