"""Up-front memory checks: refuse an ``n_components``, a predictive covariance or a set of
posterior draws the machine cannot hold, before any work (:func:`check_memory`,
:func:`check_prediction_memory`; :func:`check_bytes` for any other count's cost).

The estimate (:func:`required_bytes`) counts the m x m float64 matrices and the chunk-sized
buffers of features that are alive at once at the engine's peak (the engine streams the data in
chunks of :func:`default_chunk_size` rows, so n_samples does not enter). Data,
inputs and the fitted model's O(m d) state are not counted. It is compared with
:func:`available_bytes`, the memory the operating system can give without swapping.
"""

from __future__ import annotations

import os

from .errors import InsufficientMemoryError

#: Bytes of one chunk of features (rows are chosen so a chunk of Psi is about this size).
#: 16 MiB keeps a chunk's Psi and the feature map's temporaries below glibc's largest dynamic
#: mmap threshold (32 MiB), so their memory is reused from the heap instead of being mapped and
#: page-faulted anew for every chunk (at 32 MiB that cost ~15 % of the RFF feature time), while
#: a chunk stays long enough (>= 2048 rows up to m = 1024) for the per-chunk O(m^2) work to be
#: small next to the syrk (benchmarks/bench_accumulate.py).
CHUNK_BYTES = 16 * 2**20


def default_chunk_size(n_components: int, itemsize: int = 8) -> int:
    """Rows per chunk so that one chunk of Psi takes about ``CHUNK_BYTES``."""
    return max(256, CHUNK_BYTES // (itemsize * max(n_components, 1)))


#: m x m float64 matrices alive at once at the engine's peak, per path of the fit (upper bounds).
#: "cholesky" (normal equations, every unsigned map but GLF with solver="qr"): the cached
#: Phi^T Phi of a fixed-basis map, G(theta) = diag(h) Phi^T Phi diag(h), M = s2 I + G(theta),
#: and on a retry with jitter the identity, jitter * I and M + jitter * I, whose factor is L: 6
#: (a map whose features depend on theta holds G's upper triangle, the per-chunk Gram and the
#: two triangles summed into G instead: at most 5). "eigen" (a signed rule kept as it is):
#: G, s2 S, M = G + s2 S, (M + M^T) / 2, LAPACK's copy of it, its eigenvectors and the syevd
#: workspace (2 m^2): 8. "qr" (:mod:`scalegp.engine.qr`): R_V, B = R_V diag(h), the 2m x m stack
#: [B; sqrt(s2) I] and LAPACK's copy of it, and its 2m x m R-factor: 8. "positive_part" (a
#: signed rule with ``signed_rule="repair"``, :mod:`scalegp.engine.positive_part`): G and its
#: eigenvectors V, R = D^{1/2} V^T, R S, R S R^T and its eigenvectors U, the bases
#: V D^{-1/2} U and V D^{1/2} U, the syevd workspace, and in the gradient H_U, the divided
#: differences F and N1: 12.
#: Measured peaks (tracemalloc, m = 2000-2500, n = 3000): 3.6 (rff), 4.8 (glf), 7.9 (glf,
#: qr) m^2 float64 besides the chunks; growth of the resident set (m = 3000, sfs in 8-D, which
#: also counts LAPACK's workspaces): 7.6 (kept) and 11.4 (repaired) m^2.
ENGINE_MATRICES = {"cholesky": 6, "eigen": 8, "qr": 8, "positive_part": 12}
#: Chunk-sized buffers alive at once in a fit (a chunk has :func:`default_chunk_size`
#: rows, about :data:`CHUNK_BYTES`): Psi and the map's temporaries (phases); in the
#: gradient pass, whose rows are chosen so that Psi and dPsi together take one chunk, Psi,
#: Psi M^{-1}, dPsi and the per-parameter blocks that ``features_grad`` stacks into it; for
#: solver="qr" the block of [Phi | y], the stack [R; block], LAPACK's copy of it and its
#: R-factor: 4. Measured (tracemalloc, n = 12,000, ARD 8-D, m = 256-300): 3.1 (rff) and 3.4
#: (sfs, repaired) chunks besides 6 m^2. Whole estimates against traced peaks (a fit and a
#: gradient evaluation, 2-D, n = 9000, m = 1024; tests/test_model_selection.py), measured when
#: the gradient pass still formed dPsi: rff 67 of 112 MiB, sfs (repaired) 64 of 160 MiB, glf
#: with solver="qr" 107 of 128 MiB; Fourier maps now apply dPsi as an operator (sfs: 43 MiB),
#: while a map without one still forms it, which the 4 chunks keep room for. Not counted here:
#: the features a likelihood-and-gradient evaluation keeps for its gradient pass,
#: :class:`scalegp.engine.statistics.KeptFeatures` (n m float64 within
#: :func:`scalegp.engine.statistics.feature_cache_budget`: 1 GiB and a quarter of the available
#: memory).
ENGINE_CHUNKS = 4
#: Chunk-sized buffers of a transformer's features: Psi and the phases (``transform`` computes
#: all its rows at once; the check asks for a chunk of rows at least).
FEATURE_CHUNKS = 2


def required_bytes(n_components: int, *, n_matrices: int, n_chunks: int = ENGINE_CHUNKS,
                   itemsize: int = 8) -> int:
    """Peak bytes of ``n_matrices`` m x m float64 matrices and ``n_chunks`` chunks of features.

    Parameters
    ----------
    n_components : int
        m.
    n_matrices : int
        m x m float64 matrices alive at once: ``ENGINE_MATRICES[path]`` for a fit, 0 for a
        transformer (which only computes features).
    n_chunks : int, default=ENGINE_CHUNKS
        Chunk-sized buffers alive at once (``FEATURE_CHUNKS`` for a transformer).
    itemsize : int, default=8
        Bytes per feature (4 for float32 features).

    Returns
    -------
    int
        n_matrices * 8 m^2 + n_chunks * default_chunk_size(m, itemsize) * m * itemsize.
    """
    m = int(n_components)
    return n_matrices * 8 * m * m + n_chunks * default_chunk_size(m, itemsize) * m * itemsize


def available_bytes() -> int | None:
    """Memory available to this process without swapping, or None where it cannot be read.

    Linux: ``MemAvailable`` of /proc/meminfo (free memory plus the reclaimable page cache).
    Elsewhere: free physical pages times the page size (``os.sysconf``), which omits the
    reclaimable cache and so errs on the side of refusing. A container's memory limit
    (cgroup) is not consulted.
    """
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024          # the value is in kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


#: n_test x n_test float64 matrices alive at once in ``predict(return_cov=True)``: the test
#: points' prior covariance, the part the data explain, the predictive covariance and its
#: copy in target units; ``sample_y`` from a covariance (the exact GP, a signed rule kept as
#: it is) holds the covariance, its eigenvectors and eigh's workspace instead: 4, and 1 for
#: the n_train x n_test cross-covariances and rounding. Measured (tracemalloc, n_test = 1500,
#: n_train = 200, tests/test_counts.py): exact predict 3.3, exact sample_y 4.0 (besides the
#: 3 n_test x n_samples arrays), low-rank predict 2.1.
COVARIANCE_MATRICES = 5
#: float64 arrays of n_samples columns alive at once in ``sample_y``: in weight space 2 of m
#: rows (the standard normals and the weights drawn from them) and, like every path, 3 of
#: n_test rows (the draws, the normals of FITC's diagonal correction, the draws in target
#: units).
SAMPLE_WEIGHT_ARRAYS, SAMPLE_DRAW_ARRAYS = 2, 3


def check_bytes(needed: int, what: str, advice: str) -> None:
    """Raise :class:`InsufficientMemoryError` if ``needed`` bytes exceed
    :func:`available_bytes` (``what`` needs them; ``advice`` says what to change)."""
    available = available_bytes()
    if available is not None and needed > available:
        raise InsufficientMemoryError(
            f"{what} needs about {format_bytes(needed)} of memory, but only "
            f"{format_bytes(available)} is available; {advice}")


def check_prediction_memory(n_test: int, *, covariance: bool = False, n_samples: int = 0,
                            n_components: int = 0) -> None:
    """Refuse, before any work, a predictive covariance or a set of posterior draws that
    cannot be held: 8 [COVARIANCE_MATRICES n_test^2 (if ``covariance``) + n_samples
    (SAMPLE_WEIGHT_ARRAYS m + SAMPLE_DRAW_ARRAYS n_test)] bytes.

    Parameters
    ----------
    n_test : int
        Rows predicted at.
    covariance : bool
        Whether an n_test x n_test covariance is formed (``return_cov``, or draws from it).
    n_samples : int
        Posterior draws (0 for ``predict``).
    n_components : int
        m of draws made in weight space (0 when they come from the covariance).
    """
    needed = 8 * (COVARIANCE_MATRICES * n_test * n_test * bool(covariance)
                  + n_samples * (SAMPLE_WEIGHT_ARRAYS * n_components
                                 + SAMPLE_DRAW_ARRAYS * n_test))
    if n_samples:
        what = (f"sample_y with n_samples={n_samples} at {n_test} rows"
                + (" (from their covariance)" if covariance else ""))
        advice = "draw fewer samples, or at fewer rows at a time"
    else:
        what = f"the predictive covariance of {n_test} rows ({n_test} x {n_test})"
        advice = "ask for return_std instead, or predict fewer rows at a time"
    check_bytes(needed, what, advice)


def check_memory(n_components: int, *, n_matrices: int, n_chunks: int = ENGINE_CHUNKS,
                 itemsize: int = 8, what: str = "the fit",
                 advice: str = "choose a smaller n_components") -> None:
    """Raise :class:`InsufficientMemoryError` if :func:`required_bytes` exceeds what is available.

    Parameters
    ----------
    n_components : int
        m, already validated as a positive integer.
    n_matrices, n_chunks, itemsize
        As :func:`required_bytes`.
    what : str
        What needs the memory, for the message.
    advice : str
        What to change, for the message.
    """
    needed = required_bytes(n_components, n_matrices=n_matrices, n_chunks=n_chunks,
                            itemsize=itemsize)
    available = available_bytes()
    if available is not None and needed > available:
        chunks = (f"{n_chunks} chunks of {default_chunk_size(n_components, itemsize)} rows of "
                  "features")
        parts = (f"{n_matrices} float64 matrices of {n_components} x {n_components} and {chunks}"
                 if n_matrices else chunks)
        raise InsufficientMemoryError(
            f"n_components={n_components} needs about {format_bytes(needed)} of memory for "
            f"{what} ({parts}), but only {format_bytes(available)} is available; {advice}"
        )


def format_bytes(n_bytes: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{n_bytes / 2**10:.3g} KiB"


def peak_resident_bytes() -> int | None:
    """The peak resident set of this process (``VmHWM`` of /proc/self/status: anonymous
    memory and the file pages mapped at once), or None where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024          # the value is in kB
    except (OSError, ValueError, IndexError):
        pass
    return None
