"""Reservation tables and their per-pool index (PPipe §5.4, Appendix A.3: ``earliestSlot``, ``markReserved``).

Resources are integers: virtual GPUs ``0 … W−1``, then per server ``n`` its
NIC uplink ``W + 2n`` and downlink ``W + 2n + 1`` (a server's GPUs share one
NIC, §4 C3). Each resource keeps its reserved intervals ``[start, end)`` as
two sorted Python lists (non-overlapping by construction, so both are
sorted). Intervals that ended before the scheduler's clock are pruned
lazily. Each resource also keeps ``busy_from``: it is reserved without a gap
from there to its last reservation's end, so a query starting inside that
block is answered without scanning (exact; maintained in O(1) per reserve:
an interval appended after a gap restarts the block, any other insert fills
a gap before it). A reservation never moves ``last_end`` except when it is
appended after every other one (an insert that ended later would overlap the
last interval and is refused).

*Pool index* (a speed-up of Algorithm 2's ``probe()``, same answers): a
pool — the vGPUs of one pipeline stage — registered with
:meth:`Reservations.index_pool` keeps its vGPUs sorted by ``last_end`` as one
sorted list of integer keys ``last_end << shift | position`` (position in
pool order, so equal ends sort in pool order: Algorithm 2's tie-break), and
the largest ``busy_from`` of its vGPUs (``busy_from`` never decreases, so a
running maximum is exact). Both are updated on every append, so the keys list
always equals ``sorted(last_end[w] << shift | i for i, w in enumerate(pool))``
(``tests/test_ppipe_probe_index.py``). :func:`~.reservations.probe` walks
these keys from the earliest-free vGPU instead of scanning the pool.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from shepherd.core.rules.ppipe import earliest_slot, insert_at

#: reserve() prunes a resource's finished intervals once it keeps more than this many
PRUNE = 32


class Reservations:
    """Per-resource reserved intervals, with optional per-pool indices (module docstring).

    ``index=False`` registers no pool, so :func:`~.reservations.probe` runs
    the plain scan of Algorithm 2 everywhere (the reference the index is
    tested against).
    """

    __slots__ = ("starts", "ends", "last_end", "busy_from", "n_gpus", "index",
                 "member", "pool_bf", "views")

    def __init__(self, n_gpus: int, n_nodes: int, index: bool = True) -> None:
        n = n_gpus + 2 * n_nodes
        self.n_gpus = n_gpus
        self.starts: list[list[int]] = [[] for _ in range(n)]
        self.ends: list[list[int]] = [[] for _ in range(n)]
        self.last_end = [0] * n
        #: the resource is reserved without a gap over [busy_from, last_end)
        self.busy_from = [0] * n
        self.index = index
        #: per resource: (its pool's sorted keys, its position, the pool's shift, pool id), or None
        self.member: list[tuple[list[int], int, int, int] | None] = [None] * n
        #: per indexed pool: the largest busy_from of its vGPUs
        self.pool_bf: list[int] = []
        #: probe's per-pipeline constants (see reservations.stage_views), by id(pipeline)
        self.views: dict[int, tuple] = {}

    def uplink(self, node: int) -> int:
        return self.n_gpus + 2 * node

    def downlink(self, node: int) -> int:
        return self.n_gpus + 2 * node + 1

    # ------------------------------------------------------------------ pool index

    def index_pool(self, ids: list[int]) -> tuple[list[int], int, int] | None:
        """Index the pool ``ids`` (vGPUs in pool order): (sorted keys, pool id, shift).

        ``None`` (the pool is left to the plain scan) when indexing is off, the
        pool is empty, or a vGPU already belongs to an indexed pool (a vGPU has
        one key, so pools must not share vGPUs).
        """
        member = self.member
        if not self.index or not ids or len(set(ids)) != len(ids) or any(member[w] for w in ids):
            return None
        shift = max(len(ids) - 1, 1).bit_length()
        keys = sorted((self.last_end[w] << shift) | i for i, w in enumerate(ids))
        pid = len(self.pool_bf)
        self.pool_bf.append(max(self.busy_from[w] for w in ids))
        for i, w in enumerate(ids):
            member[w] = (keys, i, shift, pid)
        return keys, pid, shift

    def _appended(self, r: int, last: int, start: int, end: int) -> None:
        """Index upkeep after ``[start, end)`` was appended to ``r`` (whose reservations ended at ``last``)."""
        m = self.member[r]
        if m is not None:
            keys, i, shift, pid = m
            insort(keys, (end << shift) | i)  # the larger key first: the list is never empty
            del keys[bisect_left(keys, (last << shift) | i)]
            if start > last and start > self.pool_bf[pid]:
                self.pool_bf[pid] = start

    # ------------------------------------------------------------------ earliestSlot / markReserved

    def fit(self, r: int, t: int, length: int) -> int:
        """Earliest ``s ≥ t`` at which resource ``r`` alone is free for ``length``."""
        return earliest_slot(self.starts, self.ends, r, 0, len(self.ends[r]), self.last_end[r], self.busy_from[r], t,
                             length)  # (:mod:`shepherd.core.rules.ppipe`)

    def earliest(self, res: tuple[int, ...] | list[int], t: int, length: int) -> int:
        """``earliestSlot(res, t, l)`` of Algorithm 2."""
        while True:
            moved = False
            for r in res:
                s = self.fit(r, t, length)
                if s != t:
                    t, moved = s, True
            if not moved:
                return t

    def reserve(self, r: int, start: int, length: int, now: int) -> None:
        """``markReserved(res, start, dur)``; raises if it would double-book ``r``.

        Appending after the last reservation (the common case: stage GPUs and
        links are booked in time order) needs no search and no overlap check.
        Intervals over by ``now`` are pruned once more than :data:`PRUNE` are
        kept (lazily: queries never start before ``now``, so the pruned
        intervals never change an answer).
        """
        if length <= 0:
            return
        starts, ends = self.starts[r], self.ends[r]
        if len(ends) > PRUNE and ends[0] <= now:  # prune intervals already over
            k = bisect_right(ends, now)
            del starts[:k]
            del ends[:k]
        end = start + length
        last = self.last_end[r]
        if start >= last:  # after every reservation: append
            starts.append(start)
            ends.append(end)
            if start > last:  # appended after a gap: the gap-free block restarts here
                self.busy_from[r] = start
            self.last_end[r] = end
            self._appended(r, last, start, end)
            return
        i = insert_at(starts, ends, 0, len(starts), start, end)
        if i < 0:
            raise RuntimeError(f"resource {r}: [{start}, {end}) overlaps a reservation")
        starts.insert(i, start)  # into a gap before the last reservation: last_end is unchanged
        ends.insert(i, end)

    def intervals(self, r: int) -> list[tuple[int, int]]:
        return list(zip(self.starts[r], self.ends[r]))
