"""Threads over chunks: one streaming pass on several cores of one machine (docs/engine.md,
"Threads over chunks").

The engine's passes are sums over chunks of rows (Gram and projection statistics, gradient
shares). With ``n_jobs = p`` threads, chunk j is added to accumulator j mod p, each
accumulator receiving its chunks in order and one chunk at a time, and the caller sums the p
accumulators in order: the result depends on p but not on the threads' timing, so a fit is
reproducible. Every thread computes its chunk's features and its rank-k update itself (numpy
releases the GIL; scipy's BLAS and LAPACK wrappers do not, so a threaded pass forms its Grams
with numpy's matmul), with BLAS held to one thread for the pass, so the feature
computation, which a multi-threaded BLAS alone leaves on one core, runs on all of them. At
most p chunks are in flight (memory: p chunk buffers and p accumulators). ``n_jobs=1`` runs
the plain loop and leaves BLAS's threads alone.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral

from threadpoolctl import threadpool_limits

from ._memory import ENGINE_CHUNKS


def available_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # not on Linux
        return os.cpu_count() or 1


def threaded_pass_buffers(n_threads: int) -> tuple[int, int]:
    """(m x m matrices beyond the serial pass's accumulator, chunk buffers) of a pass on
    ``n_threads`` threads, for the memory checks: a threaded pass holds an accumulator and a
    chunk Gram per thread, and each thread its chunks (``ENGINE_CHUNKS`` of them)."""
    extra = 2 * n_threads - 1 if n_threads > 1 else 0
    return extra, ENGINE_CHUNKS * n_threads


def resolve_n_jobs(n_jobs) -> int:
    """The number of threads for ``n_jobs`` in scikit-learn's convention: None means 1, a
    positive count itself, -1 every core, -k every core but k - 1 (at least 1)."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a nonzero integer or None, got {n_jobs!r}")
    if n_jobs > 0:
        return int(n_jobs)
    return max(1, available_cores() + 1 + int(n_jobs))


def reduce_chunks(chunks, add, accumulators: list, progress=None, rows=None) -> list:
    """Call ``add(accumulators[j % p], chunk)`` for the j-th of ``chunks`` (p =
    len(accumulators)), on p threads when p > 1, and return the accumulators.

    ``add`` updates its accumulator in place. ``progress(rows_done)``, if given, is called in
    the calling thread after each chunk is done, with the rows done so far (``rows(chunk)``
    rows per chunk; by default its ``X``'s).
    An exception in any chunk is raised here, after the chunks in flight finish.
    """
    n_threads = len(accumulators)
    rows = rows or (lambda chunk: chunk.X.shape[0])
    rows_done = 0
    if n_threads == 1:
        for chunk in chunks:
            add(accumulators[0], chunk)
            rows_done += rows(chunk)
            if progress is not None:
                progress(rows_done)
        return accumulators
    in_flight = [None] * n_threads

    def harvest(slot):
        nonlocal rows_done
        future, n_rows = in_flight[slot]
        future.result()
        in_flight[slot] = None
        rows_done += n_rows
        if progress is not None:
            progress(rows_done)

    with threadpool_limits(limits=1, user_api="blas"), \
            ThreadPoolExecutor(max_workers=n_threads, thread_name_prefix="scalegp") as pool:
        try:
            for j, chunk in enumerate(chunks):
                slot = j % n_threads
                if in_flight[slot] is not None:     # its accumulator takes one chunk at a time
                    harvest(slot)
                in_flight[slot] = (pool.submit(add, accumulators[slot], chunk), rows(chunk))
            for slot in range(n_threads):           # the chunks still in flight
                if in_flight[slot] is not None:
                    harvest(slot)
        except BaseException:
            for item in in_flight:
                if item is not None:
                    item[0].cancel()
            raise
    return accumulators
