"""VecchiaGPRegressor on UCI sets, Wang et al.'s protocol, against the published exact GP.

Protocol of Wang et al. (NeurIPS 2019, Table 1), as ``bench_uci_sgpr.py``: a random
64/16/20 train/validation/test split (seeded; the validation part is not used), inputs and
targets standardised with the training part's mean and std, Matern-3/2; test RMSE and the
mean Gaussian negative log predictive density (NLL, of a new observation) in standardised
target units. Two kernels per set: one shared length scale (the comparison with their
table) and ARD (one per input). The Vecchia model learns with L-BFGS-B (or ``--optimizer
fisher``), rebuilding its ordering and neighbour sets as the learned length scales change
shape (scaled Vecchia, docs/vecchia.md); it starts at l = sqrt(d) (as bench_uci_sgpr.py).

    OPENBLAS_NUM_THREADS=1 timeout 1500 python benchmarks/bench_vecchia_uci.py pol elevators \\
        --n-jobs 2 --out benchmarks/results/vecchia-uci.md

``--schedule`` (learning stages on nested samples of the blocks, docs/vecchia.md, as the
demo), ``--tolerance`` and ``--ordering`` are the estimator's ``learning_schedule``,
``learning_tolerance`` and ``ordering``. ``--api vecchia`` learns with
:class:`scalegp.vecchia.VecchiaGP` instead, the same likelihood and schedule with fixed
length-scale bounds (``--length-scale-bounds``), where the estimator widens its default box
as it goes.
``--vnngp SECONDS`` adds the peer GPyTorch VNNGP (``NNVariationalStrategy``, Wu et al. 2022)
with its documented setting: every training point an inducing point, k = 256 neighbours,
training batches of 256, a mean-field variational distribution, Adam at 0.01 on the variational
ELBO (the GPyTorch VNNGP example), a Matern-3/2 ARD kernel (as ours), for at most
``--vnngp-epochs`` epochs or SECONDS of training, whichever comes first.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vecchia_uci.py kin40k --kernels ard \
        --api vecchia --n-neighbors 60 --n-neighbors-predict 250 --schedule 2000 8000 all \
        --n-jobs 2 --vnngp 150

``--nystrom``, ``--local`` and ``--sgpr`` add, in the same run and on the same split, the
library's Nystrom + VFE with learned knots, its neighbourhood-local exact GPs and GPyTorch's
SGPR (the settings in ``--help``), so that one invocation gives the whole comparison:

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=/tmp/uci/pylib python benchmarks/bench_vecchia_uci.py \
        pol elevators kin40k protein keggdirected --kernels ard --api vecchia \
        --n-neighbors 60 --n-neighbors-predict 250 --schedule 2000 8000 all --tolerance 0.01 \
        --n-jobs 2 --nystrom --local --sgpr --vnngp 240

Data: ``../shared/data/uci/<name>.csv`` (inputs x1..xd, target y last), or ``--data-dir``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_uci_sgpr import (DATA_DIR, PUBLISHED, load_split, run_gpytorch_sgpr,  # noqa: E402
                            run_scalegp, scores)

import scalegp as sg  # noqa: E402
from scalegp.vecchia import VecchiaGP  # noqa: E402

#: GPyTorch VNNGP's setting (its example): k neighbours, training batch, Adam's rate.
VNNGP_K = 256
VNNGP_BATCH = 256
VNNGP_RATE = 0.01


def run_vecchia(X, y, X_test, y_test, *, ard: bool, m: int, m_predict: int | None,
                optimizer: str, schedule: tuple, tolerance: float | None, ordering: str,
                seed: int, n_jobs: int | None) -> dict:
    """:class:`scalegp.VecchiaGPRegressor` on the standardised split, from l = sqrt(d), s = 1,
    s2 = 0.1, in its default (widening) box; ``schedule`` and ``tolerance`` are its
    ``learning_schedule`` and ``learning_tolerance``."""
    d = X.shape[1]
    start_scale = float(np.sqrt(d))
    kernel = sg.kernels.get("matern32", length_scale=np.full(d, start_scale) if ard
                            else start_scale)
    model = sg.VecchiaGPRegressor(kernel=kernel, noise_variance=0.1, n_neighbors=m,
                                  n_neighbors_predict=m_predict, optimizer=optimizer,
                                  ordering=ordering,
                                  learning_schedule=None if schedule == (None,) else schedule,
                                  learning_tolerance=tolerance, random_state=seed,
                                  n_jobs=n_jobs)

    def predict():
        mean, std = model.predict(X_test, return_std=True, include_noise=True)
        return mean, std**2

    fit_seconds, predict_seconds, rmse, nll, caught, shown = _fit_and_score(
        model, X, y, X_test, y_test, predict)
    stages = "; ".join(f"{h['n_points']}: {h['n_evaluations']}"
                       for h in model.learning_history_)
    return {"method": (f"scalegp VecchiaGPRegressor, {'ARD' if ard else 'shared l'}, "
                       f"{optimizer}, schedule {_named(schedule)}"),
            "m": m if m_predict is None else f"{m} / {m_predict}",
            "seconds": fit_seconds, "predict_seconds": predict_seconds,
            "rmse": rmse, "nll": nll, "evaluations": model.optimization_result_.n_evaluations,
            "note": (f"{shown}, s {model.kernel_.variance:.3g}, s2 "
                     f"{model.noise_variance_:.3g}; {model.n_structures_} structure(s); stages "
                     f"(points: evaluations) {stages}; {len(caught)} warning(s)"
                     + "".join(f" [{str(w.message)[:90]}]" for w in caught[:2]))}


def _fit_and_score(model, X, y, X_test, y_test, predict):
    """Fit ``model`` on (X, y) with its warnings recorded, then ``predict()`` -> (mean,
    variance) on X_test: (fit s, predict s, RMSE, NLL, warnings, length scales shown)."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, y)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mean, var = predict()
    predict_seconds = time.perf_counter() - start
    rmse, nll = scores(mean, var, y_test)
    scales = np.atleast_1d(model.kernel_.length_scale)
    shown = (f"l {scales[0]:.3g}" if scales.size == 1 else
             f"l in [{scales.min():.3g}, {scales.max():.3g}]")
    return fit_seconds, predict_seconds, rmse, nll, caught, shown


def run_vecchia_gp(X, y, X_test, y_test, *, ard: bool, m: int, m_predict: int | None,
                   schedule: tuple, tolerance: float | None, ordering: str,
                   length_scale_bounds: tuple, seed: int, n_jobs: int) -> dict:
    """:class:`scalegp.vecchia.VecchiaGP` (``--api vecchia``) on the standardised split: start
    at l = sqrt(d), s = 1, s2 = 0.1, as :func:`run_vecchia`."""
    d = X.shape[1]
    start_scale = float(np.sqrt(d))
    kernel = sg.kernels.get("matern32", length_scale=np.full(d, start_scale) if ard
                            else start_scale, length_scale_bounds=length_scale_bounds)
    model = VecchiaGP(kernel, 0.1, m, m_predict=m_predict, ordering=ordering,
                      schedule=schedule, tolerance=tolerance, random_state=seed, n_jobs=n_jobs)
    fit_seconds, predict_seconds, rmse, nll, caught, shown = _fit_and_score(
        model, X, y, X_test, y_test,
        lambda: model.predict(X_test, return_var=True, include_noise=True))
    stages = "; ".join(f"{h['n_points']}: {h['n_evaluations']}" for h in model.history)
    n_structures = 1 + sum(later["stage"] == earlier["stage"]
                           for earlier, later in zip(model.history, model.history[1:]))
    return {"method": (f"scalegp VecchiaGP, {'ARD' if ard else 'shared l'}, schedule "
                       f"{_named(schedule)}"),
            "m": m if m_predict is None else f"{m} / {m_predict}",
            "seconds": fit_seconds, "predict_seconds": predict_seconds,
            "rmse": rmse, "nll": nll,
            "evaluations": sum(h["n_evaluations"] for h in model.history),
            "note": (f"{shown}, s {model.kernel_.variance:.3g}, s2 "
                     f"{model.noise_variance_:.3g}; {n_structures} structure(s); stages "
                     f"(points: evaluations) {stages}; {len(caught)} warning(s)"
                     + "".join(f" [{str(w.message)[:70]}]" for w in caught[:2]))}


def _named(schedule: tuple) -> str:
    return "/".join("all" if size is None else str(size) for size in schedule)


def run_local(X, y, X_test, y_test, *, n_neighbors: int, learning_centers: int,
              seed: int) -> dict:
    """The library's neighbourhood-local exact GPs (``local=Neighbors(...)``, ARD Matern-3/2
    from l = sqrt(d), noise 0.1), as ``bench_local_fast.py``."""
    d = X.shape[1]
    kernel = sg.kernels.get("matern32", length_scale=np.full(d, float(np.sqrt(d))))
    model = sg.LowRankGPRegressor(
        approximation="exact", kernel=kernel, noise_variance=0.1, random_state=seed,
        local=sg.Neighbors(n_neighbors=n_neighbors, learning_centers=learning_centers))

    def predict():
        mean, std = model.predict(X_test, return_std=True, include_noise=True)
        return mean, std**2

    fit_seconds, predict_seconds, rmse, nll, caught, shown = _fit_and_score(
        model, X, y, X_test, y_test, predict)
    return {"method": "scalegp neighbourhood-local exact GPs, ARD",
            "m": f"{n_neighbors} neighbours, {learning_centers} learning centres",
            "seconds": fit_seconds, "predict_seconds": predict_seconds, "rmse": rmse,
            "nll": nll, "evaluations": model.optimization_result_.n_evaluations,
            "note": (f"{shown}, s2 {model.noise_variance_:.3g}; {model.n_centres_} centres; "
                     f"{len(caught)} warning(s)"
                     + "".join(f" [{str(w.message)[:70]}]" for w in caught[:2]))}


def run_auto(X, y, X_test, y_test, *, seed: int) -> dict:
    """``sg.GPRegressor(random_state=seed)`` with its defaults (``approximation="auto"``, a
    60 s time budget): the choice, the fit and the prediction, timed together as the fit."""
    model = sg.GPRegressor(random_state=seed)

    def predict():
        mean, std = model.predict(X_test, return_std=True, include_noise=True)
        return mean, std**2

    fit_seconds, predict_seconds, rmse, nll, caught, shown = _fit_and_score(
        model, X, y, X_test, y_test, predict)
    # the NLPD of auto's own predictive distribution (a scale mixture where it calibrated
    # the variance: scalegp.estimators.variance_calibration), not a Gaussian of its std
    nll = -float(np.mean(model.log_predictive_density(X_test, y_test)))
    selection = model.selection_
    calibrated = " (variance calibrated)" if model.variance_calibration_ is not None else ""
    return {"method": f"auto -> {selection.chosen.name}{calibrated}", "m": "-",
            "seconds": fit_seconds, "predict_seconds": predict_seconds, "rmse": rmse,
            "nll": nll, "evaluations": "-",
            "note": (f"{selection.reason}; {shown}; "
                     + "".join(f"{note}; " for note in selection.notes
                               if note.startswith("predictive variance"))
                     + f"{len(caught)} warning(s)"
                     + "".join(f" [{str(w.message)[:70]}]" for w in caught[:2]))}


def run_vnngp(X, y, X_test, y_test, *, seconds: float, epochs: int, seed: int) -> dict:
    """GPyTorch VNNGP (module docstring): train for ``epochs`` epochs or ``seconds``, then
    predict the test points (mean and variance of a new observation)."""
    import torch
    import gpytorch
    from gpytorch.variational import MeanFieldVariationalDistribution, NNVariationalStrategy

    torch.manual_seed(seed)
    train_x = torch.as_tensor(X, dtype=torch.float64)
    train_y = torch.as_tensor(y, dtype=torch.float64)
    n, d = train_x.shape

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self, likelihood):
            strategy = NNVariationalStrategy(self, train_x, MeanFieldVariationalDistribution(n),
                                             k=VNNGP_K, training_batch_size=VNNGP_BATCH)
            super().__init__(strategy)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=d))
            self.likelihood = likelihood

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

        def __call__(self, x, prior=False, **kwargs):
            if x is not None and x.dim() == 1:
                x = x.unsqueeze(-1)
            return self.variational_strategy(x=x, prior=False, **kwargs)

    start = time.perf_counter()
    model = Model(gpytorch.likelihoods.GaussianLikelihood()).double()
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=VNNGP_RATE)
    elbo = gpytorch.mlls.VariationalELBO(model.likelihood, model, num_data=n)
    per_epoch = model.variational_strategy._total_training_batches
    steps, complete = 0, True
    for _ in range(epochs):
        for _ in range(per_epoch):
            optimizer.zero_grad()
            output = model(x=None)
            rows = model.variational_strategy.current_training_indices
            loss = -elbo(output, train_y[..., rows])
            loss.backward()
            optimizer.step()
            steps += 1
            if time.perf_counter() - start > seconds:
                complete = False
                break
        if not complete:
            break
    fit_seconds = time.perf_counter() - start
    model.eval()
    start = time.perf_counter()
    means, variances = [], []
    with torch.no_grad():
        for begin in range(0, len(X_test), 1000):
            block = torch.as_tensor(X_test[begin:begin + 1000], dtype=torch.float64)
            predictive = model.likelihood(model(block))
            means.append(predictive.mean.numpy())
            variances.append(predictive.variance.numpy())
    predict_seconds = time.perf_counter() - start
    rmse, nll = scores(np.concatenate(means), np.concatenate(variances), y_test)
    scales = model.covar_module.base_kernel.lengthscale.detach().numpy().ravel()
    return {"method": "GPyTorch VNNGP, ARD", "m": f"k {VNNGP_K}, inducing = all {n}",
            "seconds": fit_seconds, "predict_seconds": predict_seconds, "rmse": rmse,
            "nll": nll, "evaluations": steps,
            "note": (f"{steps / per_epoch:.2f} epoch(s) of {per_epoch} batches of "
                     f"{VNNGP_BATCH} ({'all' if complete else 'time cap'}), Adam {VNNGP_RATE}; "
                     f"l in [{scales.min():.3g}, {scales.max():.3g}], s2 "
                     f"{float(model.likelihood.noise):.3g}; torch threads "
                     f"{torch.get_num_threads()}")}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", choices=sorted(PUBLISHED))
    parser.add_argument("--n-neighbors", type=int, nargs="+", default=[30])
    parser.add_argument("--n-neighbors-predict", type=int, default=None)
    parser.add_argument("--kernels", nargs="+", default=["shared", "ard"],
                        choices=["shared", "ard"])
    parser.add_argument("--optimizer", default="lbfgs", choices=["lbfgs", "fisher"])
    parser.add_argument("--api", default="estimator", choices=["estimator", "vecchia"],
                        help="VecchiaGPRegressor, or scalegp.vecchia.VecchiaGP (the options "
                             "below)")
    parser.add_argument("--schedule", nargs="+", default=["all"],
                        help="sampled conditionals per learning stage ('all': the whole "
                             "likelihood; the estimator's learning_schedule)")
    parser.add_argument("--tolerance", type=float, default=None)
    parser.add_argument("--ordering", default="maximin")
    parser.add_argument("--length-scale-bounds", type=float, nargs=2, default=[1e-3, 1e5])
    parser.add_argument("--vnngp", type=float, default=0.0, metavar="SECONDS",
                        help="also run GPyTorch VNNGP, training at most SECONDS")
    parser.add_argument("--vnngp-epochs", type=int, default=20)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--nystrom", action="store_true",
                        help="also run the library's Nystrom + VFE with learned knots (512 "
                             "random knots, 150 knot iterations, one shared length scale; "
                             "bench_uci_sgpr.py's best setting)")
    parser.add_argument("--sgpr", action="store_true",
                        help="also run GPyTorch SGPR (512 inducing points, 100 Adam steps at "
                             "0.1; bench_uci_sgpr.py)")
    parser.add_argument("--auto", action="store_true",
                        help="also run sg.GPRegressor() with its defaults (approximation="
                             "'auto', 60 s budget)")
    parser.add_argument("--verdicts", type=Path, metavar="TABLE",
                        help="print the auto panel's verdicts (bench_auto.verdict) of the "
                             "rows in TABLE (a file this script wrote) and stop")
    parser.add_argument("--local", action="store_true",
                        help="also run the library's neighbourhood-local exact GPs (300 "
                             "neighbours, 32 learning centres, ARD; bench_local_fast.py)")
    parser.add_argument("--skip-vecchia", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0, help="the split's seed")
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, help="append the markdown rows to this file")
    args = parser.parse_args(argv)
    if args.verdicts is not None:
        print(verdicts(args.verdicts))
        return
    if args.vnngp > 0 or args.sgpr:
        import torch
        torch.set_num_threads(args.torch_threads)
    header = ("| data | train n x d | method | m | fit s | predict s | evaluations | test RMSE "
              "| test NLL | published exact RMSE / NLL | load before / after | notes |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(header, flush=True)
    if args.out is not None and not args.out.exists():
        args.out.write_text(header + "\n", encoding="utf-8")
    for name in args.datasets:
        X, y, X_test, y_test = load_split(name, args.data_dir, args.seed)
        exact_rmse, exact_nll = PUBLISHED[name][0]
        schedule = tuple(None if size == "all" else int(size) for size in args.schedule)
        runs = []
        for kind in [] if args.skip_vecchia else args.kernels:
            for m in args.n_neighbors:
                if args.api == "vecchia":
                    runs.append(lambda kind=kind, m=m: run_vecchia_gp(
                        X, y, X_test, y_test, ard=kind == "ard", m=m,
                        m_predict=args.n_neighbors_predict, schedule=schedule,
                        tolerance=args.tolerance, ordering=args.ordering,
                        length_scale_bounds=tuple(args.length_scale_bounds), seed=args.seed,
                        n_jobs=args.n_jobs or 1))
                else:
                    runs.append(lambda kind=kind, m=m: run_vecchia(
                        X, y, X_test, y_test, ard=kind == "ard", m=m,
                        m_predict=args.n_neighbors_predict, optimizer=args.optimizer,
                        schedule=schedule, tolerance=args.tolerance, ordering=args.ordering,
                        seed=args.seed, n_jobs=args.n_jobs))
        if args.nystrom:
            runs.append(lambda: run_scalegp(X, y, X_test, y_test, 512, "vfe", args.seed,
                                            learn_knots=150, knots="random",
                                            n_jobs=args.n_jobs))
        if args.local:
            runs.append(lambda: run_local(X, y, X_test, y_test, n_neighbors=300,
                                          learning_centers=32, seed=args.seed))
        if args.auto:
            runs.append(lambda: run_auto(X, y, X_test, y_test, seed=args.seed))
        if args.sgpr:
            runs.append(lambda: run_gpytorch_sgpr(X, y, X_test, y_test, 512, 100, args.seed))
        if args.vnngp > 0:
            runs.append(lambda: run_vnngp(X, y, X_test, y_test, seconds=args.vnngp,
                                          epochs=args.vnngp_epochs, seed=args.seed))
        for job in runs:
            load_before = os.getloadavg()[0]
            run = job()
            line = (f"| {name} | {len(y)} x {X.shape[1]} | {run['method']} | {run['m']} | "
                    f"{run['seconds']:.0f} | {_seconds(run.get('predict_seconds'))} | "
                    f"{run['evaluations']} | {run['rmse']:.3f} | {run['nll']:.3f} | "
                    f"{exact_rmse} / {exact_nll} | {load_before:.1f} / "
                    f"{os.getloadavg()[0]:.1f} | {run['note']} |")
            print(line, flush=True)
            if args.out is not None:    # row by row: a time cap keeps what finished
                with open(args.out, "a", encoding="utf-8") as out:
                    out.write(line + "\n")


def verdicts(table: Path) -> str:
    """The auto panel's rule (``bench_auto.verdict``: auto's RMSE <= 1.05 x the oracle's,
    its NLPD <= the oracle's + 0.05, within 60 s, at or below the best peer's RMSE) on the
    rows of a table this script wrote: the library's explicit configurations ("scalegp
    ...") are the oracle's candidates, GPyTorch's rows the peers, "auto -> ..." auto."""
    from bench_auto import verdict

    found: dict = {}
    for line in table.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 9 or cells[0] in ("data", "---") or cells[0].startswith("-"):
            continue
        name, method, seconds, rmse, nll = cells[0], cells[2], cells[4], cells[7], cells[8]
        label = ("peer: " + method if method.startswith("GPyTorch") else
                 method if method.startswith(("auto", "scalegp")) else None)
        if label is None:
            continue
        found.setdefault(name, {})[label] = (name, label, float(rmse), float(nll),
                                             float(seconds), "")
    lines = ["| data set | numbers (RMSE / NLPD) | verdict |", "|---|---|---|"]
    lines += [verdict(name, list(rows.values())) for name, rows in found.items()]
    return "\n".join(lines)


def _seconds(value) -> str:
    """A predict time, or "-" where the runner times prediction inside its fit."""
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
