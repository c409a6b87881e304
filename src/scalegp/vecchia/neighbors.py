"""Conditioning sets and their grouping into blocks.

Positions, not row numbers: everything here refers to the points in the Vecchia ordering,
position 0 first (:mod:`scalegp.vecchia.ordering`).

**Conditioning sets** c(i): the m nearest points, in the scaled inputs u = x / l, among the
points ordered before i (all of them for i <= m). Stored as an (N, m) int array, nearest
first, padded with -1 (memory O(N m)). Found without an O(N^2) step, in doubling stages:
the points at positions [s, 2s) query a cKDTree of the points at positions [0, 2s) for
their k nearest neighbours (k = 2 m + 2 at first) and keep those ordered before them; a
point that keeps fewer than m asks again with k doubled (at most the tree's size, where
the search is exhaustive, so the sets are exact). For an ordering that spreads every stage
over the domain (maximin, random), about half of a point's neighbours in its stage's tree
precede it, so one query of 2 m + 2 neighbours nearly always suffices: O(N m log N) in all.

**Blocks** (Guinness 2018, "grouping"): a partition of the positions into blocks B; a block
is factorized once, on its *union set* T(B) = B united with c(i) for i in B, sorted by
position, and each member i is conditioned on every point of T(B) ordered before it,

    h(i) = {j in T(B) : j < i}  contains  c(i),

so the grouped approximation is again a Vecchia approximation in the same ordering, with
larger conditioning sets (at least as accurate in Kullback-Leibler divergence: Guinness 2018,
Schaefer, Katzfuss & Owhadi 2021), at the cost of one Cholesky factor of |T(B)| rows per block
instead of one of m + 1 rows per point. Ungrouped Vecchia is the partition into singletons.

The greedy grouping here follows Guinness's rule: leaders are taken from the last position
down; a leader's block absorbs its not yet grouped conditioning points j, nearest first,
while that costs no more flops than factorizing separately:
|T(B) + S_j|^e <= |T(B)|^e + |S_j|^e, S_j = {j} united with c(j), e = ``exponent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.spatial import cKDTree

from .._validation import check_matrix, check_positive_int


#: Query points per cKDTree call of :func:`ordered_neighbors`: its (points, k) distance and
#: index arrays stay at 2^17 x 62 x 16 bytes = 130 MB however large N is (9.3 million points
#: at once would take 9 GB).
QUERY_CHUNK = 1 << 17


def index_dtype(n: int):
    """The integer type of positions among n points: int32 when n < 2^31 (half the memory of
    the neighbour sets, 1.1 GB instead of 2.2 GB for 9.3 million points and m = 30), else
    intp."""
    return np.int32 if n < 2**31 - 1 else np.intp


def ordered_neighbors(U_ordered, m: int, *, n_jobs: int = 1) -> np.ndarray:
    """c(i) of every position i of the ordered scaled inputs, shape (N, m), -1 padded, in
    :func:`index_dtype` (int32 below 2^31 points).

    Row i holds the (at most) m nearest points among positions 0..i-1, nearest first
    (ties in distance broken by the tree). ``n_jobs`` threads share each stage's tree
    queries (the same sets), asked ``QUERY_CHUNK`` points at a time (memory O(N m))."""
    U = check_matrix(U_ordered, "U_ordered")
    m = check_positive_int(m, "m")
    n_jobs = check_positive_int(n_jobs, "n_jobs")
    n = U.shape[0]
    neighbors = np.full((n, m), -1, dtype=index_dtype(n))
    head = min(n, m + 1)
    for i in range(1, head):                   # the first points condition on all before
        d = np.einsum("ij,ij->i", U[:i] - U[i], U[:i] - U[i])
        neighbors[i, :i] = np.argsort(d, kind="stable")
    start = head
    while start < n:
        stop = min(n, 2 * start)
        tree = cKDTree(U[:stop])
        for chunk in range(start, stop, QUERY_CHUNK):
            _stage_queries(tree, U, np.arange(chunk, min(stop, chunk + QUERY_CHUNK)), m,
                           neighbors, n_jobs)
        start = stop
    return neighbors


def _stage_queries(tree, U, todo, m: int, neighbors, n_jobs: int) -> None:
    """Fill ``neighbors[todo]`` from ``tree`` (the points at positions [0, stop)): k = 2 m + 2
    neighbours first, doubled for the points that keep fewer than m before them."""
    stop = tree.n
    k = min(stop, 2 * m + 2)
    while todo.size:
        _, idx = tree.query(U[todo], k=k, workers=n_jobs)
        idx = idx.reshape(todo.size, k)
        before = idx < todo[:, None]
        enough = before.sum(axis=1) >= m
        if k >= stop:                           # exhaustive: every earlier point was seen
            enough[:] = True
        rows = todo[enough]
        first = np.argsort(~before[enough], axis=1, kind="stable")[:, :m]
        neighbors[rows] = np.take_along_axis(idx[enough], first, axis=1)
        todo = todo[~enough]
        k = min(stop, 2 * k)


@dataclass(frozen=True)
class Blocks:
    """A partition of the positions into blocks and each block's union set, in CSR form.

    Block b's union set is ``sets[set_ptr[b]:set_ptr[b+1]]`` (positions, increasing), and
    ``is_member[set_ptr[b]:set_ptr[b+1]]`` marks its members (the rest are conditioning
    points). Memory O(sum |T(B)|) = O(N m).
    """

    set_ptr: np.ndarray
    sets: np.ndarray
    is_member: np.ndarray

    @property
    def n_blocks(self) -> int:
        return self.set_ptr.size - 1

    def block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(union set positions, member mask) of block b."""
        s = slice(self.set_ptr[b], self.set_ptr[b + 1])
        return self.sets[s], self.is_member[s]

    @property
    def n_members(self) -> int:
        """Points whose conditional term the blocks hold (N for a partition)."""
        return int(np.count_nonzero(self.is_member))

    def subset(self, ids) -> "Blocks":
        """The blocks ``ids`` (in increasing order) alone: their union sets and members. Their
        terms sum to a part of the Vecchia log likelihood (the conditionals of their members),
        as learning on a sample of the blocks uses it."""
        ids = np.unique(np.asarray(ids, dtype=np.intp))
        if ids.size and not 0 <= ids[0] <= ids[-1] < self.n_blocks:
            raise ValueError(f"block ids must lie in [0, {self.n_blocks})")
        sizes = self.sizes[ids]
        positions = np.concatenate([np.arange(self.set_ptr[b], self.set_ptr[b + 1])
                                    for b in ids]) if ids.size else np.zeros(0, np.intp)
        set_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
        return Blocks(set_ptr, self.sets[positions], self.is_member[positions])

    @property
    def sizes(self) -> np.ndarray:
        """|T(B)| of every block."""
        return np.diff(self.set_ptr)

    @cached_property
    def by_size(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The blocks grouped by union-set size s, for batched arithmetic: one triple
        (positions (B, s), member rows (B, M), member weights (B, M)) per size, where row b
        lists block b's union set, its members' rows in it (padded to the size's largest
        member count M by row 0) and 1.0 for a member, 0.0 for padding. Sizes in increasing
        order, blocks in their order. Memory O(sum |T(B)|), computed once per structure."""
        sizes = self.sizes
        groups = []
        for s in np.unique(sizes):
            ids = np.flatnonzero(sizes == s)
            positions = self.set_ptr[ids][:, None] + np.arange(s)
            member = self.is_member[positions]
            counts = member.sum(axis=1)
            width = int(counts.max())
            # member rows first (stable), padding after: row 0 with weight 0
            rows = np.argsort(~member, axis=1, kind="stable")[:, :width]
            weight = (np.arange(width) < counts[:, None]).astype(float)
            rows = np.where(weight > 0, rows, 0)
            groups.append((self.sets[positions], rows, weight))
        return groups

    def flops(self) -> float:
        """sum |T(B)|^3 / 3: the Cholesky flops of one likelihood evaluation."""
        return float(np.sum(self.sizes.astype(float) ** 3) / 3.0)


def singleton_blocks(neighbors: np.ndarray) -> Blocks:
    """Ungrouped Vecchia: block {i} with union set c(i) + {i}, vectorized (no Python step per
    point: 0.2 s at 1e6 points, 11.0 s before), positions in the dtype of ``neighbors``."""
    neighbors = np.asarray(neighbors)
    n, m = neighbors.shape
    union = np.empty((n, m + 1), dtype=neighbors.dtype)
    union[:, :m] = neighbors
    union[:, m] = np.arange(n, dtype=neighbors.dtype)
    union.sort(axis=1)                          # the -1 padding first, then increasing
    keep = union >= 0
    counts = keep.sum(axis=1)
    set_ptr = np.zeros(n + 1, dtype=np.intp)
    np.cumsum(counts, out=set_ptr[1:])
    sets = union[keep]                           # row by row, increasing within a row
    del keep
    # each row's own position is its largest (every neighbour precedes it)
    is_member = np.zeros(sets.size, dtype=bool)
    is_member[set_ptr[1:] - 1] = True
    return Blocks(set_ptr, sets, is_member)


def grouped_blocks(neighbors: np.ndarray, *, exponent: float = 2.0) -> Blocks:
    """Guinness's greedy grouping (module docstring) of the conditioning sets ``neighbors``."""
    if not exponent >= 1.0:
        raise ValueError(f"exponent must be >= 1, got {exponent!r}")
    n = neighbors.shape[0]
    grouped = np.zeros(n, dtype=bool)
    stamp = np.full(n, -1, dtype=np.intp)        # stamp[j] == leader: j is in T(leader)
    sets, members = [], []
    for leader in range(n - 1, -1, -1):
        if grouped[leader]:
            continue
        grouped[leader] = True
        own = neighbors[leader]
        own = own[own >= 0]
        union = [leader, *own.tolist()]
        stamp[union] = leader
        size = len(union)
        block = [leader]
        for j in own.tolist():
            if grouped[j]:
                continue
            cj = neighbors[j]
            cj = cj[cj >= 0]
            new = cj[stamp[cj] != leader]        # j itself is already in T (it is in c(leader))
            if (size + new.size) ** exponent > size ** exponent + (cj.size + 1) ** exponent:
                continue
            grouped[j] = True
            block.append(j)
            stamp[new] = leader
            union.extend(new.tolist())
            size += new.size
        sets.append(np.sort(np.asarray(union, dtype=np.intp)))
        members.append(np.asarray(block, dtype=np.intp))
    return _blocks_from_sets(sets[::-1], members[::-1])


def _blocks_from_sets(sets, members) -> Blocks:
    sizes = np.array([s.size for s in sets], dtype=np.intp)
    set_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
    flat = np.concatenate(sets).astype(np.intp) if sets else np.zeros(0, dtype=np.intp)
    is_member = np.zeros(flat.size, dtype=bool)
    for b, block in enumerate(members):
        s = flat[set_ptr[b]:set_ptr[b + 1]]
        is_member[set_ptr[b] + np.searchsorted(s, block)] = True
    return Blocks(set_ptr, flat, is_member)
