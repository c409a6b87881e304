"""Neighbourhood-local exact GPs (``local="neighbors"``) on a UCI set, Wang et al.'s split: the
cover, the fit, the prediction and the peak memory of one process (issue 27, item 2).

Run it once per version of the package (the one first on ``PYTHONPATH``), each in its own
process so that the peak resident memory is that run's:

    for src in /work/main/src src; do OPENBLAS_NUM_THREADS=1 PYTHONPATH=$src \\
        SCALEGP_UCI_DIR=/work/shared/data/uci .venv/bin/python benchmarks/bench_local_fast.py \\
        kin40k --n-neighbors 300 --learning-centers 32; done

``relief`` as the dataset fits the model of ``scalegp demo --model neighbors`` on the demo's
split (77,224 training points; :func:`scalegp.cli.demo._fit_low_rank`), and predicts its
5,000 test points and the 82,800-point grid with std, without the demo's exact-GP
comparison.

``--cover-only`` times the cover alone (the tree search against the brute-force one), with
``--max-centres`` as a cap (the code before capped it at 20,000). Split, standardisation
and scores as ``bench_uci_sgpr.py`` (64/16/20, seed 0, Matern-3/2 with one length scale per
input starting at sqrt(d), noise 0.1); prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_uci_sgpr import DATA_DIR, load_split, scores  # noqa: E402

import scalegp as sg  # noqa: E402
from scalegp.local import cover as cv  # noqa: E402


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--n-neighbors", type=int, default=300)
    parser.add_argument("--learning-centers", type=int, default=32)
    parser.add_argument("--cover-only", action="store_true")
    parser.add_argument("--max-centres", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("SCALEGP_UCI_DIR", DATA_DIR)))
    args = parser.parse_args(argv)
    if args.dataset == "relief":
        relief(args)
        return
    X, y, X_test, y_test = load_split(args.dataset, args.data_dir, args.seed)
    d = X.shape[1]
    start_scale = np.full(d, float(np.sqrt(d)))
    out = {"version": str(Path(sg.__file__).parents[1]), "dataset": args.dataset,
           "n_train": len(y), "n_test": len(y_test), "k": args.n_neighbors}
    if args.cover_only:
        # None: the version's own default (20,000 before, no cap after)
        options = {} if args.max_centres is None else {"max_centres": args.max_centres}
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cover = cv.cover(X, args.n_neighbors, scale=start_scale, **options)
        out.update(cover_seconds=time.perf_counter() - start, n_centres=cover.n_centres,
                   max_centres=options.get("max_centres", cv.MAX_CENTRES), peak_mb=peak_mb())
        print(json.dumps(out))
        return
    kernel = sg.kernels.get("matern32", length_scale=start_scale)
    model = sg.LowRankGPRegressor(
        approximation="exact", kernel=kernel, noise_variance=0.1, random_state=args.seed,
        local=sg.Neighbors(n_neighbors=args.n_neighbors,
                           learning_centers=args.learning_centers))
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    fit_seconds = time.perf_counter() - start
    fit_peak = peak_mb()
    start = time.perf_counter()
    mean, std = model.predict(X_test, return_std=True, include_noise=True)
    predict_seconds = time.perf_counter() - start
    rmse, nll = scores(mean, std**2, y_test)
    out.update(n_centres=model.n_centres_, fit_seconds=fit_seconds,
               predict_seconds=predict_seconds, rmse=rmse, nll=nll,
               model_bytes=model.local_model_.memory_bytes, fit_peak_mb=fit_peak,
               peak_mb=peak_mb(), length_scale=np.round(model.kernel_.length_scale, 3).tolist(),
               noise_variance=model.noise_variance_,
               warnings=sorted({str(w.message)[:100] for w in caught}))
    print(json.dumps(out))


def relief(args) -> None:
    """The demo's neighbourhood model on the relief map: fit, test and grid predictions."""
    from scalegp.cli import demo
    from scalegp.datasets import load_east_africa_relief
    from scalegp.metrics import nlpd, rmse

    data = load_east_africa_relief()
    region = demo.in_held_out_region(data.X) if hasattr(demo, "in_held_out_region") else None
    available = len(data.y) - demo.N_TEST - (0 if region is None else int(region.sum()))
    train, test = demo.split(data.X, args.seed, available)
    y_km = data.y / 1000.0
    local = sg.Neighbors(n_neighbors=args.n_neighbors, learning_centers=args.learning_centers)
    model, _, fit_seconds = demo._fit_low_rank(
        data.X[train], y_km[train], demo._start_kernel("matern52", 2), "exact", 2048,
        args.seed, local=local)
    fit_peak = peak_mb()
    start = time.perf_counter()
    mean, std = model.predict(data.X[test], return_std=True, include_noise=True)
    predict_seconds = time.perf_counter() - start
    start = time.perf_counter()
    model.predict(data.X, return_std=True)
    grid_seconds = time.perf_counter() - start
    out = {"version": str(Path(sg.__file__).parents[1]), "dataset": "relief",
           "n_train": len(train), "n_test": len(test), "k": args.n_neighbors,
           "n_centres": model.n_centres_, "fit_seconds": fit_seconds,
           "predict_seconds": predict_seconds, "grid_predict_seconds": grid_seconds,
           "rmse_m": 1000.0 * rmse(y_km[test], mean), "nlpd_km": nlpd(y_km[test], mean, std**2),
           "model_bytes": model.local_model_.memory_bytes, "fit_peak_mb": fit_peak,
           "peak_mb": peak_mb()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
