"""TEMPORARY minimal data source (replaced by the wt-data branch)."""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from ._validation import check_dtype, check_matrix, check_vector


@dataclass(frozen=True)
class Chunk:
    X: np.ndarray
    y: np.ndarray
    noise_variance: np.ndarray | None
    start: int


class ArraySource:
    def __init__(self, X, y, noise_variance=None, dtype=None):
        self.X = check_matrix(X, "X", dtype=check_dtype(dtype))
        self.y = check_vector(y, "y", n_samples=self.X.shape[0])
        self.noise_variance = (None if noise_variance is None else
                               check_vector(noise_variance, "noise_variance", n_samples=self.X.shape[0]))

    @property
    def n_samples(self): return self.X.shape[0]
    @property
    def n_dims(self): return self.X.shape[1]

    def chunks(self, rows):
        for start in range(0, self.n_samples, rows):
            stop = min(start + rows, self.n_samples)
            nv = None if self.noise_variance is None else self.noise_variance[start:stop]
            yield Chunk(self.X[start:stop], self.y[start:stop], nv, start)


def as_source(X, y=None, *, noise_variance=None, dtype=None):
    if hasattr(X, "chunks"):
        return X
    return ArraySource(X, y, noise_variance=noise_variance, dtype=dtype)
ArraySource.has_noise_variance = property(lambda self: self.noise_variance is not None)
