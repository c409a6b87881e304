"""The Vecchia likelihood on a Dask cluster: row blocks with halos.

The blocks (:mod:`scalegp.vecchia.neighbors`) are cut into ``n_parts`` contiguous runs, each
holding about the same number of members. A part needs the inputs and targets of every
position its blocks' union sets reach: its members and their conditioning points, the
*halo*, which lies mostly in earlier rows (a maximin ordering spreads a point's
predecessors over the whole domain, so a halo is up to about m times the part's members,
and O(N m / n_parts) all together). Each part is sent to the cluster once, with its blocks
renumbered into its halo (:func:`partition`); an evaluation then sends only the
hyperparameters, each worker sums its blocks' terms (the same batched arithmetic as the
serial :func:`scalegp.vecchia.likelihood.vecchia_log_likelihood`), and the client adds the
parts in their order. The result is the serial sum regrouped: equal to rounding (tested
to 1e-10 on a ``distributed.LocalCluster``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_matrix, check_positive_int, check_positive_scalar, check_vector
from ..engine.hyperparameters import Hyperparameters
from ..kernels import Kernel
from .likelihood import LOG_2PI, _batch_terms, _batches
from .neighbors import Blocks
from .structure import VecchiaStructure


@dataclass(frozen=True)
class Part:
    """One run of blocks with its halo: ``X`` and ``y`` are the halo's rows (in the
    Vecchia ordering) and ``blocks`` refer to positions in them."""

    X: np.ndarray
    y: np.ndarray
    blocks: Blocks
    halo: np.ndarray            # the halo's positions in the whole ordering

    def terms(self, kernel: Kernel, noise_variance: float, eval_gradient: bool):
        """(value, gradient or None) of the part's blocks, without the 2 pi constant."""
        value, gradient = 0.0, None
        parts = [_batch_terms(kernel, noise_variance, self.X, self.y, batch, eval_gradient)
                 for batch in _batches(self.blocks)]
        value = math.fsum(part[0] for part in parts)
        if eval_gradient:
            gradient = np.sum([part[1] for part in parts], axis=0)
        return value, gradient


def partition(X, y, structure: VecchiaStructure, n_parts: int) -> list[Part]:
    """The blocks of ``structure`` cut into ``n_parts`` contiguous runs of about equal
    member counts, each with its halo (module docstring)."""
    X = check_matrix(X, "X")
    y = check_vector(y, "y", n_samples=X.shape[0])
    n_parts = check_positive_int(n_parts, "n_parts")
    if structure.n_samples != X.shape[0]:
        raise ValueError(f"structure was built for {structure.n_samples} points, X has "
                         f"{X.shape[0]} rows")
    X_ordered, y_ordered = X[structure.order], y[structure.order]
    blocks = structure.blocks
    counts = np.add.reduceat(blocks.is_member.astype(np.intp), blocks.set_ptr[:-1])
    ends = np.searchsorted(np.cumsum(counts), np.linspace(0, counts.sum(), n_parts + 1)[1:],
                           side="left") + 1
    starts = np.concatenate([[0], ends[:-1]])
    parts = []
    for start, end in zip(starts, np.minimum(ends, blocks.n_blocks)):
        if end <= start:
            continue
        run = blocks.subset(np.arange(start, end))
        halo = np.unique(run.sets)
        local = Blocks(run.set_ptr, np.searchsorted(halo, run.sets), run.is_member)
        parts.append(Part(X_ordered[halo], y_ordered[halo], local, halo))
    return parts


def _part_terms(part: Part, kernel: Kernel, noise_variance: float, eval_gradient: bool):
    return part.terms(kernel, noise_variance, eval_gradient)


class DaskVecchiaLikelihood:
    """The Vecchia objective theta -> (log p(y), gradient) of
    :class:`scalegp.vecchia.likelihood.VecchiaLikelihood`, evaluated by the workers of a
    ``distributed.Client``: the parts (:func:`partition`) are scattered once, at
    construction, and each evaluation sends the hyperparameters only."""

    def __init__(self, hyperparameters, X, y, structure: VecchiaStructure, client, *,
                 n_parts: int | None = None):
        self.hyperparameters = Hyperparameters.of(hyperparameters)
        X = check_matrix(X, "X")
        self.hyperparameters.kernel.check_n_dims(X.shape[1])
        if n_parts is None:
            n_parts = max(1, 2 * len(client.scheduler_info()["workers"]))
        parts = partition(X, y, structure, n_parts)
        self.n_parts = len(parts)
        self.n_members = sum(part.blocks.n_members for part in parts)
        self.halo_rows = sum(part.halo.size for part in parts)
        self.client = client
        self._parts = client.scatter(parts)
        self.n_evaluations = 0

    def log_likelihood(self, kernel: Kernel, noise_variance, *, eval_gradient: bool = False):
        """The Vecchia log likelihood (and gradient) at these hyperparameters."""
        noise_variance = check_positive_scalar(noise_variance, "noise_variance")
        futures = [self.client.submit(_part_terms, part, kernel, noise_variance, eval_gradient,
                                      pure=False) for part in self._parts]
        results = self.client.gather(futures)
        value = math.fsum(r[0] for r in results) - 0.5 * self.n_members * LOG_2PI
        if not eval_gradient:
            return float(value)
        return float(value), np.sum([r[1] for r in results], axis=0)

    def value(self, theta) -> float:
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return self.log_likelihood(kernel, noise_variance)

    def __call__(self, theta):
        self.n_evaluations += 1
        kernel, noise_variance = self.hyperparameters.decode(theta)
        return self.log_likelihood(kernel, noise_variance, eval_gradient=True)
