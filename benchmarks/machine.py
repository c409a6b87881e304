"""What the benchmarks measure of the machine itself, in the same run as the work they time."""

from __future__ import annotations

import time

import numpy as np


def gemm_rate(n: int, repeats: int = 3, clock=time.perf_counter) -> float:
    """Best rate of a square n x n float64 ``A @ B``, 2 n^3 flops, in GFLOP/s, timed by
    ``clock`` (wall time by default; ``time.process_time``: this process's CPU time, which
    other processes on a shared machine disturb far less, and equal to wall time with one
    BLAS thread on an idle machine)."""
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    best = np.inf
    for _ in range(repeats):
        start = clock()
        A @ B
        best = min(best, clock() - start)
    return 2 * n**3 / best / 1e9
