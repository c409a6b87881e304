"""Row-wise prediction: the prediction of a row depends on that row and the fitted model only,
bitwise, whatever else is in the batch.

Mathematically this asks that nothing computed from the other rows of a batch (a mean, a
range, a scale, a clustering) enter a row's prediction: kernel distances are shifted by a
reference of the fitted side (:meth:`scalegp.kernels.Kernel.__call__`), never by the batch.
Bitwise, it asks more, since BLAS rounds a row of a product according to the product's shape:
a one-row product takes the matrix-vector kernel, small products the small-matrix kernels,
a block's last rows a narrower micro-kernel, and threads split the work by shape (measured
on OpenBLAS 0.3.31, SkylakeX: a row of ``A @ B`` differs in the last bits between batches of
1, 2, 17 and 1,000 rows, and between positions 0 and 12 of a 16-row block; docs/decisions.md,
"Row-wise predictions"). So every prediction path computes its rows through
:func:`in_blocks`: blocks of exactly ``BLOCK_ROWS`` rows (the last one padded with copies of
the batch's last row, whose results are dropped), on one BLAS thread. Every row then meets
the same kernels in the same shape, and a multiple of 48 rows fills whole micro-kernel tiles
(4, 8, 16 or 24 rows on the x86 kernels), so its position in the block does not matter either.
"""

from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np
from threadpoolctl import ThreadpoolController

from ._validation import check_matrix
from .errors import NonFiniteResultError

__all__ = ["BLOCK_ROWS", "in_blocks", "one_blas_thread", "check_finite_rows", "standardized"]

#: Why a posterior's own value (before the target scaling) is not finite at a row.
UNEVALUABLE = ("the model cannot evaluate that input in float64 (its kernel values or "
               "features overflow there); check the row for a value far outside the training "
               "inputs")
#: Rows of every prediction block: a multiple of the micro-kernel tiles (module docstring),
#: small enough that padding one row to a block costs little (an exact GP on 3,000 points:
#: 4.9 ms for one row alone, 10.5 ms for its block; docs/decisions.md, "Row-wise predictions").
BLOCK_ROWS = 48


@functools.cache
def _controller() -> ThreadpoolController:
    return ThreadpoolController()


_depth_lock = threading.Lock()
_depth = 0
_limiter = None


@contextlib.contextmanager
def one_blas_thread():
    """A context in which BLAS runs on one thread. Only the outermost of nested (or
    concurrent) contexts sets the limit and the last to exit restores it, so nesting costs
    nothing and one thread's exit does not lift another's limit; the controller is found
    once, not at every entry as by ``threadpool_limits``."""
    global _depth, _limiter
    with _depth_lock:
        if _depth == 0:
            _limiter = _controller().limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _depth_lock:
            _depth -= 1
            if _depth == 0:
                _limiter.restore_original_limits()
                _limiter = None


def in_blocks(function, X, *, block_rows: int = BLOCK_ROWS):
    """``function`` of the rows of X, computed ``block_rows`` rows at a time on one BLAS thread.

    ``function`` maps a (block_rows, ...) array to an array, or a tuple of arrays, whose first
    axis is the rows; the results are concatenated over the blocks. The last block is padded
    to ``block_rows`` with copies of the last row of X (a value the batch holds anyway, so no
    new input reaches the model), and the padding's results are dropped.
    """
    X = np.asarray(X)
    n_rows = X.shape[0]
    if n_rows == 0:
        return function(X)
    outputs, single = None, False
    with one_blas_thread():
        for start in range(0, n_rows, block_rows):
            block = X[start:start + block_rows]
            stop = start + block.shape[0]
            if block.shape[0] < block_rows:
                padding = np.repeat(X[-1:], block_rows - block.shape[0], axis=0)
                block = np.concatenate([block, padding])
            result = function(block)
            if outputs is None:
                single = not isinstance(result, tuple)
                outputs = [np.empty((n_rows,) + part.shape[1:], dtype=part.dtype)
                           for part in ((result,) if single else result)]
            for out, part in zip(outputs, (result,) if single else result):
                out[start:stop] = part[:stop - start]
    return outputs[0] if single else tuple(outputs)


def check_finite_rows(values, what: str, reason: str) -> np.ndarray:
    """``values``, or :class:`~scalegp.errors.NonFiniteResultError` naming the first test row
    (0-based) where ``what`` is not finite, the number of such rows and ``reason``; the error
    carries the rows and the reason (``rows``, ``reason``)."""
    bad = ~np.isfinite(values)
    if np.any(bad):
        rows = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1))
        raise NonFiniteResultError(
            f"the {what} is not finite at test row {rows[0]} ({rows.size} row(s)): {reason}",
            rows=rows, reason=f"the {what} is not finite: {reason}")
    return values


def standardized(X, mean, scale) -> np.ndarray:
    """(X - mean) / scale of finite test inputs X (a non-finite value is a ValueError naming
    its row and column); a row that overflows float64 there (|x| near 1.8e308 and a scale
    below 1) raises :class:`~scalegp.errors.NonFiniteResultError` naming it."""
    X = check_matrix(X, "X")
    with np.errstate(over="ignore"):
        Z = (X - mean) / scale
    return check_finite_rows(Z, "standardized input", "(x - X_train_mean_) / X_train_scale_ "
                                                      "overflows float64 there")
