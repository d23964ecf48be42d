"""Resource reservation tables, ``earliestSlot``, ``probe`` and ``reserve`` (PPipe §5.4, Appendix A.3).

Resources are integers: virtual GPUs ``0 … W−1``, then per server ``n`` its
NIC uplink ``W + 2n`` and downlink ``W + 2n + 1`` (a server's GPUs share one
NIC, §4 C3). Each resource keeps its reserved intervals ``[start, end)`` as
two sorted Python lists (non-overlapping by construction, so both are
sorted). Intervals that ended before the scheduler's clock are pruned
lazily. Each resource also keeps ``busy_from``: it is reserved without a gap
from there to its last reservation's end, so a query starting inside that
block is answered without scanning (exact; maintained in O(1) per reserve:
an interval appended after a gap restarts the block, any other insert fills
a gap before it).

:meth:`Reservations.earliest` is Algorithm 2's ``earliestSlot(res, t, l)``:
the earliest ``s ≥ t`` at which every resource in ``res`` is free for ``l``.
:func:`probe` is Algorithm 2's ``probe()``: stage by stage, every vGPU of the
pool is tried — the feature map must cross the last GPU's uplink and this
GPU's downlink at the same time, then the GPU must be free for the
partition's latency — and the one finishing earliest is kept. A shortcut that
does not change the result: a vGPU whose resources are all free from the
earliest conceivable time finishes at that lower bound, so the scan stops
there (ties go to the first such vGPU in pool order, as in Algorithm 2).

First stage: its vGPUs only ever receive first-stage reservations, each
starting at the earliest free time ≥ the (non-decreasing) scheduler clock, so
their reservations never leave a gap and ``earliestSlot`` on them is
``max(t, last reservation end)``; the vGPU finishing earliest is then the one
whose reservations end first, or the first in pool order among those already
free (Algorithm 2's tie-break) — one pass over ``last_end`` that stops at the
first free vGPU, no slot search. ``tests/test_ppipe_dataplane.py`` checks this
against the general scan.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from dataclasses import dataclass, field

#: reserve() prunes a resource's finished intervals once it keeps more than this many
PRUNE = 32


class Reservations:
    """Per-resource reserved intervals."""

    __slots__ = ("starts", "ends", "last_end", "busy_from", "n_gpus")

    def __init__(self, n_gpus: int, n_nodes: int) -> None:
        n = n_gpus + 2 * n_nodes
        self.n_gpus = n_gpus
        self.starts: list[list[int]] = [[] for _ in range(n)]
        self.ends: list[list[int]] = [[] for _ in range(n)]
        self.last_end = [0] * n
        #: the resource is reserved without a gap over [busy_from, last_end)
        self.busy_from = [0] * n

    def uplink(self, node: int) -> int:
        return self.n_gpus + 2 * node

    def downlink(self, node: int) -> int:
        return self.n_gpus + 2 * node + 1

    def fit(self, r: int, t: int, length: int) -> int:
        """Earliest ``s ≥ t`` at which resource ``r`` alone is free for ``length``."""
        last = self.last_end[r]
        if last <= t or length <= 0:  # a zero-length use (no feature map) needs no slot
            return t
        if t >= self.busy_from[r]:  # inside the final gap-free block: free only after it
            return last
        starts, ends = self.starts[r], self.ends[r]
        i = bisect_right(ends, t)  # first interval ending after t
        n = len(ends)
        while i < n and starts[i] < t + length:
            if ends[i] > t:
                t = ends[i]
            i += 1
        return t

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
            return
        i = bisect_right(starts, start)
        if (i > 0 and ends[i - 1] > start) or (i < len(starts) and starts[i] < end):
            raise RuntimeError(f"resource {r}: [{start}, {end}) overlaps a reservation")
        starts.insert(i, start)
        ends.insert(i, end)
        if end > last:
            self.last_end[r] = end

    def intervals(self, r: int) -> list[tuple[int, int]]:
        return list(zip(self.starts[r], self.ends[r]))


#: a stage as :func:`probe` reads it: latency per batch, inbound transfer per batch, (vGPU, downlink, uplink)
Stage = tuple[list[int], list[int], list[tuple[int, int, int]]]


@dataclass
class PipeRuntime:
    """A pooled pipeline as the data plane sees it: pools of vGPUs and per-batch latencies."""

    model: int
    batch: int  # the MILP's unified batch size bs_i
    workers: list[list[int]]  # vGPU ids per stage
    nodes: list[list[int]]  # server of each vGPU, aligned with ``workers``
    lat: list[list[int]]  # lat[stage][b], µs (index 0 unused)
    transfer_in: list[list[int]]  # transfer into stage j at batch b (stage 0: zeros)
    max_batch: int  # largest batch profiled at every stage
    #: per number of vGPUs (resource numbering): (first stage, later stages), each stage
    #: ``(lat, transfer_in, [(vGPU, its server's downlink, its server's uplink)])``
    _stages: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def stages(self, n_gpus: int) -> tuple[Stage, tuple[Stage, ...]]:
        """Per-stage constants for :func:`probe` with resources numbered after ``n_gpus`` vGPUs (cached)."""
        got = self._stages.get(n_gpus)
        if got is None:
            every = [(self.lat[j], self.transfer_in[j],
                      [(w, n_gpus + 2 * node + 1, n_gpus + 2 * node) for w, node in zip(pool, nodes)])
                     for j, (pool, nodes) in enumerate(zip(self.workers, self.nodes))]
            got = self._stages[n_gpus] = (every[0], tuple(every[1:]))
        return got


def probe(res: Reservations, pipe: PipeRuntime, bs: int, now: int,
          bound: int = 1 << 62) -> tuple[int, int, list[tuple[int, int, int]]] | None:
    """Algorithm 2 ``probe(pipeline, bs)`` → (finish time, wait time, reservations [(res, start, dur)]).

    ``None`` when the wait time is certainly ``≥ bound`` (Algorithm 1 step 1
    only wants a pipeline that waits strictly less than the best so far): the
    wait accumulated by the stages probed so far never decreases.

    The reservations list holds the first stage's vGPU, then per later stage
    (uplink, downlink, vGPU): the GPU slots are ``resv[::3]``. Per later stage
    the previous server's uplink alone gives ``tu``, the earliest a transfer
    can start; every candidate starts its transfer at ≥ ``tu`` (so the search
    starts there, and ``tu + transfer + latency`` is a lower bound that ends
    the scan), and a vGPU whose gap-free reserved block covers that bound is
    skipped unless it could still finish strictly first.
    """
    tg = now
    busy = 0
    fit, last_end, busy_from = res.fit, res.last_end, res.busy_from
    first, later = pipe._stages.get(res.n_gpus) or pipe.stages(res.n_gpus)
    # first stage: no transfer, and its vGPUs never hold gaps (see the module docstring)
    lat, _, cands = first
    li = lat[bs]
    busy += li
    t = 1 << 62
    for w0, _, up0 in cands:  # (a plain loop beats min(key=) on pools this small)
        lw = last_end[w0]
        if lw <= tg:  # free now: Algorithm 2 keeps the first in pool order
            w, t, up = w0, tg, up0
            break
        if lw < t:
            w, t, up = w0, lw, up0
    if t - now >= bound:
        return None
    out: list[tuple[int, int, int]] = [(w, t, li)]
    tg = t + li
    for lat, tin, cands in later:
        li = lat[bs]
        ln = tin[bs]
        busy += li + ln
        # the earliest the transfer can start on the previous server's uplink alone
        tu = fit(up, tg, ln) if last_end[up] > tg else tg
        t_free = tu + ln
        lower = t_free + li  # no vGPU of the pool can finish earlier
        # thr = best_t - li, the GPU start to beat; at first the start at which the wait reaches bound
        thr = now + busy + bound - li if bound < 1 << 62 else 1 << 62
        if t_free >= thr:
            return None
        # thr > t_free from here on (a better start found is ≥ t_free, and = t_free ends the scan),
        # so "busy from t_free without a gap until lw ≥ thr" needs only two tests: lw ≥ sthr
        # (= thr, or never for a zero-latency stage) and busy_from ≤ t_free
        sthr = thr if li > 0 else 1 << 62
        best = None
        for w, down, upw in cands:
            lw = last_end[w]
            if lw >= sthr and t_free >= busy_from[w]:
                continue  # its GPU is busy without a gap until lw: cannot finish first
            if last_end[down] > tu and ln > 0:
                ts = tu
                while True:  # earliestSlot over (uplink, downlink) from tu
                    s = fit(down, ts, ln)
                    if s == ts:
                        break
                    ts = fit(up, s, ln)
                    if ts == s:
                        break
                t = ts + ln
            else:
                ts, t = tu, t_free
            if lw > t:
                if t >= thr:  # cannot beat the best even if the GPU were free
                    continue
                t = lw if t >= busy_from[w] and li > 0 else fit(w, t, li)
            if t < thr:
                best_t, thr, best, best_ts = t + li, t, (w, down, upw), ts
                if best_t == lower:
                    break
                if li > 0:
                    sthr = t
        if best is None:  # every vGPU makes the wait reach bound
            return None
        w, down, upw = best
        out += ((up, best_ts, ln), (down, best_ts, ln), (w, thr, li))
        tg = best_t
        up = upw
    return tg, tg - now - busy, out


def reserve(res: Reservations, resv: list[tuple[int, int, int]], now: int) -> None:
    """Algorithm 2 ``reserve(resv)``: :meth:`Reservations.reserve` of each, appends inlined."""
    starts, ends, last_end, busy_from = res.starts, res.ends, res.last_end, res.busy_from
    for r, start, dur in resv:
        last = last_end[r]
        if start < last or dur <= 0:  # an insert or a no-op: the general path
            res.reserve(r, start, dur, now)
            continue
        s, e = starts[r], ends[r]
        if len(e) > PRUNE and e[0] <= now:
            k = bisect_right(e, now)
            del s[:k]
            del e[:k]
        s.append(start)
        e.append(start + dur)
        if start > last:
            busy_from[r] = start
        last_end[r] = start + dur
