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
  gradient n^3, the kernel matrix and the p gradient traces n^2 (d + 2 p); memory
  (EXACT_MATRICES + p) n^2 float64.
- Nystrom, VFE bound, m knots, L knot-learning steps (each about one evaluation plus
  n m d): per evaluation 2 n m^2 + 2 (p + 1) n m d + m^3; memory the engine's m x m
  matrices and chunks (``scalegp._memory.required_bytes``).
- Gauss-Legendre features, s columns: one pass n s^2, then E (s^3 / 3 + p s^2) on the
  s x s statistics; memory the engine's s x s matrices.
- neighbourhood-local exact GPs, k neighbours, C learning neighbourhoods: learning
  E C (4 k^3 / 3 + k^2 (d + 2 p)), fitting N_c k^3 / 3 with N_c = CENTRES_PER_ROW n / k
  centres (the demo's cover: 3,260 centres for 77,800 rows at k = 300); memory N_c k^2.
- Vecchia, m neighbours per point: per evaluation n (m^3 / 3 + m^2 (d + 2 p)); memory n m
  indices and values; one loop step per point and evaluation.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from .._memory import ENGINE_MATRICES, required_bytes

__all__ = ["CostModel", "machine_rate", "calibrate", "exact_cost", "nystrom_cost",
           "glf_cost", "neighbors_cost", "vecchia_cost"]

#: Side of the square GEMM that measures the machine (about 0.27 GFLOP, tens of ms).
RATE_MATRIX = 512
#: n x n float64 matrices an exact likelihood-and-gradient evaluation holds beyond one per
#: hyperparameter (K, its Cholesky factor, K^{-1}, alpha alpha^T - K^{-1}).
EXACT_MATRICES = 4
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
#: 4.8 (the feature pass and the s x s statistics run far below the GEMM rate), Nystrom with
#: learned knots 6.6 and 2.8 (each knot step costs more than a likelihood evaluation); the
#: exact GP (1.0 to 1.3) and Vecchia (0.44 to 1.04) need none. Priced in, these factors keep
#: a Nystrom or GLF choice from overrunning the budget as it did on the auto panel (wine,
#: skillcraft and sml: 96, 299 and 473 s against 60).
FAMILY_FACTORS = {"glf": 4.0, "nystrom": 4.0}
#: Vecchia's measured over predicted seconds grow with the input dimension beyond
#: VECCHIA_DIMENSION_SCALE inputs (neighbour sets overlap less, so the grouped blocks' union
#: sets grow, and tree searches near brute force): on the auto panel (validated choice, m = 30,
#: learning on all rows, loaded machine) 1.15 at d = 11 (wine), 7.3 at d = 18 (skillcraft),
#: 5.6 at d = 22 (sml), against 0.3 to 2.2 at d = 8 (concrete, idle and loaded); priced as
#: (d / VECCHIA_DIMENSION_SCALE)^2 above it.
VECCHIA_DIMENSION_SCALE = 8


@functools.lru_cache(maxsize=1)
def machine_rate() -> float:
    """GEMM rate of this machine in flops per second, measured once per process: the best of
    three ``A @ B`` of RATE_MATRIX x RATE_MATRIX float64 (2 n^3 flops each), in wall time."""
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((RATE_MATRIX, RATE_MATRIX)), rng.standard_normal(
        (RATE_MATRIX, RATE_MATRIX))
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        A @ B
        best = min(best, time.perf_counter() - start)
    return 2.0 * RATE_MATRIX ** 3 / max(best, 1e-9)


@functools.lru_cache(maxsize=1)
def machine_entry_rate() -> float:
    """Kernel-matrix entries per second of this machine, measured once per process: the best
    of three ``exp(-0.5 (A * A))`` of RATE_MATRIX^2 entries (a Gaussian kernel's work per
    entry and input), in wall time."""
    A = np.random.default_rng(1).standard_normal((RATE_MATRIX, RATE_MATRIX))
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        np.exp(-0.5 * (A * A))
        best = min(best, time.perf_counter() - start)
    return RATE_MATRIX ** 2 / max(best, 1e-9)


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


def calibrate(pilot_rows: int, n_dims: int, evaluations: int, seconds: float,
              rate: float) -> float:
    """The slowdown: the pilot's measured seconds over the seconds
    ``exact_cost(pilot).seconds(rate)`` predicts, at least 1."""
    predicted = exact_cost(pilot_rows, n_dims, evaluations).seconds(rate)
    return max(seconds / predicted, 1.0)


def _parameters(n_dims: int) -> int:
    return n_dims + 2


def exact_cost(n: int, n_dims: int, evaluations: int) -> CostModel:
    """E 4 n^3 / 3 flops and E n^2 (d + 2 p) entries, (EXACT_MATRICES + p) n^2 float64."""
    p = _parameters(n_dims)
    return CostModel((evaluations + 1) * 4.0 * n ** 3 / 3.0,
                     8.0 * (EXACT_MATRICES + p) * float(n) ** 2, evaluations + 1,
                     entries=(evaluations + 1) * float(n) ** 2 * (n_dims + 2 * p))


def nystrom_cost(n: int, n_dims: int, m: int, evaluations: int,
                 learn_iterations: int = 0) -> CostModel:
    """(E + L) (2 n m^2 + m^3) flops and (E + L) 2 (p + 1) n m d + L n m d entries (L
    knot-learning steps)."""
    p = _parameters(n_dims)
    steps = evaluations + learn_iterations + 1
    flops = steps * (2.0 * n * m * m + float(m) ** 3)
    entries = steps * 2.0 * (p + 1) * n * m * n_dims + learn_iterations * n * m * n_dims
    return CostModel(flops, required_bytes(m, n_matrices=ENGINE_MATRICES["cholesky"]),
                     steps, entries=entries,
                     factor=FAMILY_FACTORS["nystrom"] if learn_iterations else 1.0)


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


def vecchia_cost(n: int, n_dims: int, m: int, evaluations: int) -> CostModel:
    """E n m^3 / 3 flops and E n m^2 (d + 2 p) entries; n m indices and values; the
    dimension's factor (:data:`VECCHIA_DIMENSION_SCALE`)."""
    p = _parameters(n_dims)
    steps = evaluations + 1
    return CostModel(steps * n * m ** 3 / 3.0, 16.0 * n * m, steps, loops=steps * n,
                     entries=steps * n * float(m) ** 2 * (n_dims + 2 * p),
                     factor=max(1.0, n_dims / VECCHIA_DIMENSION_SCALE) ** 2)
