"""Cost models of the candidate configurations of ``approximation="auto"`` (issue 26).

Each candidate's fit is counted in floating-point operations, likelihood evaluations and
bytes, and priced in seconds as

    seconds = factor slowdown (flops / (EFFICIENCY rate) + entries / entry_rate)
              + evaluations EVALUATION_SECONDS + loops LOOP_SECONDS,

with entries the elementwise matrix work (kernel matrices and their gradients: distances,
exp and products, bound by memory traffic, not by GEMM's rate; :func:`machine_entry_rate`
measures it), rate the machine's GEMM rate, measured once per process (:func:`machine_rate`: the best
of three square float64 GEMMs, as the benchmarks measure it, ``benchmarks/machine.py``),
factor the family's measured correction (:data:`FAMILY_FACTORS`), EFFICIENCY the share of
it a fit's BLAS-3 work reaches (Cholesky and kernel matrices with
their exp run below GEMM's rate), and slowdown the pilot's measured seconds over its predicted
ones (:func:`calibrate`, at least 1: the kernel's exp, small arrays and the load of a shared
machine slow every candidate's arithmetic alike; an overhead per evaluation measured on the
exact pilot would charge its n^2 kernel work to every candidate's evaluations, hundreds of
them for Nystrom with learned knots). The Python loops of the local and Vecchia models are priced by
:data:`LOOP_SECONDS` (an order of magnitude, not measured here).

Counts, with n rows, d inputs, p = d + 2 hyperparameters (ARD) and E likelihood evaluations
of learning (the pilot's own count):

- exact GP: per evaluation a Cholesky factorization n^3 / 3 and the inverse K^{-1} for the
  gradient n^3, the squared distances twice and the p gradient traces by GEMM 6 n^2 d
  (:meth:`scalegp.kernels.Kernel.gradient_inner_and_input_contraction`), and
  EXACT_PAIR_ENTRIES n^2 elementwise entries; memory (EXACT_MATRICES + p) n^2 float64.
- Nystrom, VFE bound, m knots, L knot-learning steps (each about one evaluation): per
  evaluation 3 n m^2 (the features K_XZ L^{-T}, their statistics and the sensitivity
  B = W L^{-1}), (2 p + 1/3) m^3 (K_ZZ's Cholesky factor and the p derivatives
  L^{-1} dK_ZZ,j L^{-T}, two triangular solves each), 4 n m d (distances and the gradient
  contractions by GEMM, :meth:`scalegp.kernels.Kernel.gradient_inner_and_input_contraction`)
  and NYSTROM_PAIR_ENTRIES n m elementwise entries; memory the engine's m x m matrices and
  chunks (``scalegp._memory.required_bytes``).
- Gauss-Legendre features, s columns: one pass n s^2, then E (s^3 / 3 + p s^2) on the
  s x s statistics; memory the engine's s x s matrices.
- neighbourhood-local exact GPs, k neighbours, C learning neighbourhoods: learning
  E C (4 k^3 / 3 + k^2 (d + 2 p)), fitting N_c k^3 / 3 with N_c = CENTRES_PER_ROW n / k
  centres (the demo's cover: 3,260 centres for 77,800 rows at k = 300); memory N_c k^2.
- Vecchia, m neighbours per point: per evaluation n (m^3 / 3 + m^2 (d + 2 p)); memory n m
  indices and values; one loop step per point and evaluation. On a learning schedule
  (:func:`vecchia_schedule_cost`), the same per point, summed over the stages' sampled
  points and evaluations.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from .._memory import ENGINE_MATRICES, required_bytes

__all__ = ["CostModel", "fastest", "machine_rate", "calibrate", "calibrate_exact",
           "exact_cost", "nystrom_cost", "glf_cost", "neighbors_cost", "vecchia_cost",
           "vecchia_schedule_cost"]

#: Side of the square GEMM that measures the machine (about 0.27 GFLOP, tens of ms).
RATE_MATRIX = 512
#: n x n float64 matrices an exact likelihood-and-gradient evaluation holds beyond one per
#: hyperparameter (K, its Cholesky factor, K^{-1}, alpha alpha^T - K^{-1}).
EXACT_MATRICES = 4
#: Elementwise entries of an exact likelihood-and-gradient evaluation per pair of rows: the
#: kernel matrix (distances, exp, noise) twice, alpha alpha^T - K^{-1}, the triangle of the
#: inverse and the gradient's weights (E o g and its sums): about a dozen passes over n^2
#: values, independent of d (the traces are GEMMs).
EXACT_PAIR_ENTRIES = 12
#: Centres of a neighbourhood cover per training row, times the neighbourhood size k (the
#: demo's cover on the relief map: 3,260 centres, 77,800 rows, k = 300: 12.6).
CENTRES_PER_ROW = 12.6
#: Seconds of Python work per neighbourhood or per Vecchia point that the flop count misses
#: (a loop iteration with small factorizations; order of magnitude, not measured here).
LOOP_SECONDS = 2e-5
#: Share of the GEMM rate a fit's dense work reaches.
EFFICIENCY = 0.25
#: Seconds of an optimizer step beyond the arithmetic (L-BFGS-B, the interpreter, checks).
EVALUATION_SECONDS = 2e-3
#: Measured over predicted seconds that the counts miss, per family, from
#: ``benchmarks/bench_auto_costs.py`` (3,000 2-D rows, the evaluations each fit made, two runs
#: on the shared machine, benchmarks/results/auto-costs.md): Gauss-Legendre features 3.5 and
#: 4.8 (the feature pass and the s x s statistics run far below the GEMM rate); the exact GP
#: (1.0 to 1.3) and Vecchia (0.44 to 1.04) need none. Priced in, the factor keeps a GLF
#: choice from overrunning the budget. Nystrom has none since its counts include the
#: derivatives of K_ZZ's factor (session 11): one likelihood-and-gradient evaluation
#: measured over predicted 0.47 to 0.72 (two runs) for n = 4,000, d = 2 to 50, m = 256 to 2,048
#: (``bench_auto_costs.py --nystrom``; its dense work runs nearer the GEMM rate than
#: EFFICIENCY, so the price errs high, as the budget wants). Its counts had charged
#: 2 (p + 1) n m d elementwise entries an evaluation: sml's fit (3,724 rows, 26 inputs,
#: m = 256, 150 knot steps, 601 evaluations) was priced 46,365 s, measured 94 s (now 142 s),
#: and no Nystrom candidate of the pilot path fitted a minute's budget beyond a few inputs.
FAMILY_FACTORS = {"glf": 4.0}
#: Elementwise entries of a Nystrom likelihood-and-gradient evaluation per row and knot
#: (K_XZ's exp and the sensitivity's products: a few passes over n m values; the traces over
#: the p parameters are GEMMs).
NYSTROM_PAIR_ENTRIES = 4
#: Work of one Vecchia conditional and its gradient beyond its m^2 (4 + d / 6) kernel entries
#: (gathering its rows, the batched factorizations' bookkeeping), in entries: fitted with the
#: m^2 coefficient to likelihood-and-gradient evaluations of 5,000 points, d = 2 to 26,
#: m = 15 to 60, batched by GEMM from 4 inputs (about 1e-5 s a point at m = 15).
VECCHIA_POINT_ENTRIES = 2000
#: Loop steps (LOOP_SECONDS) per point of one Vecchia structure (ordering, neighbour search,
#: grouping) up to VECCHIA_DIMENSION_SCALE inputs: about 3e-5 s a point (the relief map's
#: 77,800 points in 2-D; 32 us a point at 1e6 ETOPO5 points).
STRUCTURE_LOOPS = 1.5
#: A Vecchia structure's tree searches approach brute force as the dimension grows (3.8 s
#: for pol's 9,600 points in 26-D: 4e-4 s a point), priced as (d /
#: VECCHIA_DIMENSION_SCALE)^2 times the low-dimensional cost. Before the kernel blocks were
#: batched by GEMM (``Kernel.stacked``) that factor priced the whole fit (measured over
#: predicted 7.3 at d = 18, 5.6 at d = 22 on the auto panel); the likelihood's evaluations
#: now grow with d only through the m^2 d / 6 entries (0.11 s at d = 2 and 0.26 s at d = 26,
#: m = 30, 5,000 points).
VECCHIA_DIMENSION_SCALE = 8


#: Structures a scheduled Vecchia fit is assumed to build (scaled Vecchia rebuilds them as the
#: length scales move; :data:`scalegp.vecchia.learning.MAX_STRUCTURES` at most): measured 3 on
#: pol and 2 to 3 on the UCI sets (benchmarks/results/vecchia-uci.md).
SCHEDULE_STRUCTURES = 3
#: Evaluations of a schedule's first stage, over all its structures, per evaluation of the
#: pilot (at the stage tolerance 0.01): on pol at m = 30, 49, 79 and 67 in three structures
#: against the pilot's 154.
FIRST_STAGE_EVALUATIONS = 1.5
#: Evaluations of each stage after the first, which starts near its optimum: measured 12 to
#: 41 on the UCI sets at a stage tolerance of 0.01 (17 and 25 on pol at m = 30).
LATER_STAGE_EVALUATIONS = 30


def fastest(call, repeats: int) -> float:
    """The least wall time of ``repeats`` calls of ``call()``, in seconds."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


@functools.lru_cache(maxsize=1)
def machine_rate() -> float:
    """GEMM rate of this machine in flops per second, measured once per process: the best of
    three ``A @ B`` of RATE_MATRIX x RATE_MATRIX float64 (2 n^3 flops each), in wall time."""
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((RATE_MATRIX, RATE_MATRIX)), rng.standard_normal(
        (RATE_MATRIX, RATE_MATRIX))
    return 2.0 * RATE_MATRIX ** 3 / max(fastest(lambda: A @ B, 3), 1e-9)


@functools.lru_cache(maxsize=1)
def machine_entry_rate() -> float:
    """Kernel-matrix entries per second of this machine, measured once per process: the best
    of three ``exp(-0.5 (A * A))`` of RATE_MATRIX^2 entries (a Gaussian kernel's work per
    entry and input), in wall time."""
    A = np.random.default_rng(1).standard_normal((RATE_MATRIX, RATE_MATRIX))
    return RATE_MATRIX ** 2 / max(fastest(lambda: np.exp(-0.5 * (A * A)), 3), 1e-9)


@dataclass(frozen=True)
class CostModel:
    """Flops, likelihood evaluations and bytes of one candidate's fit, and the loop steps
    the flops do not count."""

    flops: float
    memory_bytes: float
    evaluations: float
    loops: float = 0.0
    entries: float = 0.0
    factor: float = 1.0         # the family's measured correction (FAMILY_FACTORS)

    def seconds(self, rate: float, slowdown: float = 1.0,
                entry_rate: float | None = None) -> float:
        """factor slowdown (flops / (EFFICIENCY rate) + entries / entry_rate) + evaluations
        EVALUATION_SECONDS + loops LOOP_SECONDS (entry_rate: :func:`machine_entry_rate`)."""
        entry_rate = machine_entry_rate() if entry_rate is None else entry_rate
        return (self.factor * slowdown * (self.flops / (EFFICIENCY * rate)
                                          + self.entries / entry_rate)
                + self.evaluations * EVALUATION_SECONDS + self.loops * LOOP_SECONDS)


def calibrate_vecchia(X, y, kernel, noise_variance: float, m: int, rate: float) -> float:
    """Vecchia's slowdown: the seconds of one likelihood-and-gradient evaluation on (X, y) (the
    pilot's rows, a structure of m neighbours; the best of two) over those its cost model
    predicts. Its constants were fitted on one machine, and its arithmetic (small batched
    factorizations) does not slow as the exact pilot's does, so it is measured on its own."""
    from ..engine.hyperparameters import Hyperparameters
    from ..vecchia import VecchiaLikelihood, build_structure
    m = max(1, min(m, X.shape[0] - 1))
    likelihood = VecchiaLikelihood(Hyperparameters(kernel, noise_variance), X, y,
                                   build_structure(X, kernel.length_scale, m))
    best = fastest(lambda: likelihood(likelihood.hyperparameters.theta), 2)
    predicted = _vecchia_cost(X.shape[0], X.shape[1], m, float(X.shape[0]), 1, 0).seconds(rate)
    return best / max(predicted, 1e-9)


def calibrate_exact(X, y, kernel, noise_variance: float, rate: float) -> float:
    """The exact GP's slowdown: the seconds of one likelihood-and-gradient evaluation on
    (X, y) (the best of two) over those :func:`exact_cost` predicts. The counts' EFFICIENCY
    and entry costs were fitted on one machine; on another the ratio is far from 1 (0.19 s
    measured against 0.78 s predicted for wine's 1,440 rows in 11-D, on a machine whose GEMM
    rate measured 41 GFLOP/s), and the validated choice (:mod:`.auto_validation`) ordered and
    admitted its candidates by the uncalibrated price."""
    from ..engine.exact import ExactMarginalLikelihood
    from ..engine.hyperparameters import Hyperparameters
    likelihood = ExactMarginalLikelihood(Hyperparameters(kernel, noise_variance), X, y)
    best = fastest(lambda: likelihood(likelihood.hyperparameters.theta), 2)
    predicted = exact_cost(X.shape[0], X.shape[1], 0).seconds(rate)
    return best / max(predicted, 1e-9)


def calibrate_nystrom(X, y, kernel, noise_variance: float, m: int, rate: float) -> float:
    """Nystrom-VFE's slowdown: the seconds of one likelihood-and-gradient evaluation on
    (X, y) at m random knots (the best of two) over those :func:`nystrom_cost` predicts.
    Uncalibrated, the validated choice charged it the largest ratio any other kind had shown
    (2.3 after a Vecchia fit on skillcraft), and priced it out of a budget it fitted."""
    from ..engine.hyperparameters import Hyperparameters
    from .configuration import Nystrom
    from .lowrank import LowRankGPRegressor
    m = max(1, min(m, X.shape[0]))
    model = LowRankGPRegressor(
        kernel=kernel, noise_variance=noise_variance, optimize=False, normalize_X=False,
        normalize_y=False, random_state=0,
        approximation=Nystrom(n_components=m, knots="random", objective="vfe")).fit(X, y)
    theta = Hyperparameters(model.kernel_, model.noise_variance_).theta
    best = fastest(lambda: model.log_marginal_likelihood(theta, eval_gradient=True), 2)
    predicted = nystrom_cost(X.shape[0], X.shape[1], m, 0,
                             n_params=kernel.n_params + 1).seconds(rate)
    return best / max(predicted, 1e-9)


def calibrate(pilot_rows: int, n_dims: int, evaluations: int, seconds: float,
              rate: float) -> float:
    """The slowdown: the pilot's measured seconds over the seconds
    ``exact_cost(pilot).seconds(rate)`` predicts, at least 1."""
    predicted = exact_cost(pilot_rows, n_dims, evaluations).seconds(rate)
    return max(seconds / predicted, 1.0)


def _parameters(n_dims: int) -> int:
    return n_dims + 2


def exact_cost(n: int, n_dims: int, evaluations: int,
               n_params: int | None = None) -> CostModel:
    """E (4 n^3 / 3 + 6 n^2 d) flops and E EXACT_PAIR_ENTRIES n^2 entries,
    (EXACT_MATRICES + p) n^2 float64 (p = ``n_params``, default d + 2: one length scale per
    input)."""
    p = _parameters(n_dims) if n_params is None else n_params
    n2 = float(n) ** 2
    return CostModel((evaluations + 1) * (4.0 * n ** 3 / 3.0 + 6.0 * n2 * n_dims),
                     8.0 * (EXACT_MATRICES + p) * n2, evaluations + 1,
                     entries=(evaluations + 1) * n2 * EXACT_PAIR_ENTRIES)


def nystrom_cost(n: int, n_dims: int, m: int, evaluations: int,
                 learn_iterations: int = 0, n_params: int | None = None,
                 known_noise: bool = False) -> CostModel:
    """(E + L + 1) (3 n m^2 + (2 p + 1/3) m^3 + 4 n m d) flops and (E + L + 1)
    NYSTROM_PAIR_ENTRIES n m entries (L knot-learning steps; p = ``n_params``, default
    d + 2: one length scale per input). With ``known_noise`` (rows with known variances)
    each step takes 5 n m^2 in place of 3 n m^2: the map's own gradient pass leaves the noise
    part to one more pass over the features, Psi M^{-1} (docs/engine.md, "Gradient paths")."""
    p = _parameters(n_dims) if n_params is None else n_params
    steps = evaluations + learn_iterations + 1
    dense = (5.0 if known_noise else 3.0) * n * m * m
    flops = steps * (dense + (2.0 * p + 1.0 / 3.0) * float(m) ** 3 + 4.0 * n * m * n_dims)
    return CostModel(flops, required_bytes(m, n_matrices=ENGINE_MATRICES["cholesky"]),
                     steps, entries=steps * NYSTROM_PAIR_ENTRIES * float(n) * m)


def glf_cost(n: int, n_dims: int, s: int, evaluations: int) -> CostModel:
    """n s^2 + E (s^3 / 3 + p s^2) flops and n s d entries (the features, once); the
    engine's s x s matrices."""
    p = _parameters(n_dims)
    flops = float(n) * s * s + (evaluations + 1) * (s ** 3 / 3.0 + p * float(s) ** 2)
    return CostModel(flops, required_bytes(s, n_matrices=ENGINE_MATRICES["cholesky"]),
                     evaluations + 1, entries=float(n) * s * n_dims,
                     factor=FAMILY_FACTORS["glf"])


def neighbors_cost(n: int, n_dims: int, k: int, evaluations: int,
                   learning_centres: int = 32) -> CostModel:
    """E C 4 k^3 / 3 + N_c k^3 / 3 flops and (E C + N_c) k^2 (d + 2 p) entries, N_c k^2
    float64."""
    p = _parameters(n_dims)
    k = min(k, n)
    centres = max(1.0, CENTRES_PER_ROW * n / k)
    fits = evaluations * learning_centres
    return CostModel(fits * 4.0 * k ** 3 / 3.0 + centres * k ** 3 / 3.0,
                     8.0 * centres * k * k, evaluations + 1,
                     loops=fits + centres,
                     entries=(fits + centres) * float(k) ** 2 * (n_dims + 2 * p))


def _vecchia_cost(n: int, n_dims: int, m: int, point_evaluations: float, steps: float,
                  structures: float) -> CostModel:
    """Vecchia's fit from its counts: ``point_evaluations`` conditionals evaluated with
    their gradients (m^3 / 3 flops and VECCHIA_POINT_ENTRIES + m^2 (4 + d / 6) entries
    each) and ``structures`` orderings and neighbour searches of n points
    (STRUCTURE_LOOPS loop steps per point, times (d / VECCHIA_DIMENSION_SCALE)^2 above
    that dimension)."""
    per_point = VECCHIA_POINT_ENTRIES + float(m) ** 2 * (4.0 + n_dims / 6.0)
    searches = structures * n * STRUCTURE_LOOPS * max(1.0, n_dims / VECCHIA_DIMENSION_SCALE) ** 2
    return CostModel(point_evaluations * m ** 3 / 3.0, 16.0 * n * m, steps, loops=searches,
                     entries=point_evaluations * per_point)


def vecchia_cost(n: int, n_dims: int, m: int, evaluations: int) -> CostModel:
    """E + 1 evaluations of the whole likelihood (n conditionals each) and one structure
    (:func:`_vecchia_cost`); n m indices and values."""
    return _vecchia_cost(n, n_dims, m, (evaluations + 1) * float(n), evaluations + 1, 1)


def vecchia_schedule_cost(n: int, n_dims: int, m: int, evaluations: int,
                          schedule: tuple) -> CostModel:
    """Vecchia learned on a schedule of sampled conditionals (``learning_schedule``): the
    first stage, on min(n_1, n) points, takes FIRST_STAGE_EVALUATIONS E evaluations over
    its :data:`SCHEDULE_STRUCTURES` structures (scaled Vecchia's rebuilds start it again),
    every later stage :data:`LATER_STAGE_EVALUATIONS` on its n_k points
    (:func:`_vecchia_cost`)."""
    sizes = [n if size is None else min(int(size), n) for size in schedule]
    first = FIRST_STAGE_EVALUATIONS * evaluations
    point_evaluations = first * sizes[0] + LATER_STAGE_EVALUATIONS * float(sum(sizes[1:]))
    steps = first + LATER_STAGE_EVALUATIONS * (len(sizes) - 1)
    return _vecchia_cost(n, n_dims, m, point_evaluations, steps, SCHEDULE_STRUCTURES)
