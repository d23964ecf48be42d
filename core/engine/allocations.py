"""Malleable allocations: one batch held by several workers, resized mid-run (Accordion).

Accordion holds one query on k execution places and shrinks it to k−1
mid-run, "resuming from instance X+1": the work already done is kept. An
:class:`Allocation` is a batch's set of workers over time *segments*:

* :meth:`Allocations.start` — run ``rids`` on idle ``workers``; the batch
  needs ``duration_us`` on that set, i.e. ``work = duration · k``
  worker-µs (linear speed-up over the set; a policy with another speed-up
  model passes the remaining time at each resize);
* :meth:`Allocations.resize` — at ``t`` the current segment ends: its time
  counts as useful busy time on every worker of the set, the work done is
  ``(t − segment start) · k``, and the remaining work continues on the new
  set from ``t`` (``ceil(remaining / k′)`` µs, or ``remaining_us``). Workers
  leaving the set are free at ``t``; workers joining must be idle;
* completion — the last segment is recorded, the requests' outcomes written
  (worker = the set's first worker), every worker freed (a batch booked on
  one of them starts), and the policy's ``on_completion`` called once with
  the set's first worker.

Each segment is a row of the recorder's segment table (so the busy time of a
worker is the sum of its segments: no work lost or counted twice), and the
batch's row ends at the completion.
"""

from __future__ import annotations

from shepherd.core.engine.clock import COMPLETION
from shepherd.core.engine.resources import Resources


class Allocation:
    """A batch held by a set of workers (module docstring)."""

    __slots__ = ("bid", "model", "rids", "workers", "seg_start", "work", "end", "final")

    def __init__(self, bid: int, model: int, rids: list[int], workers: list[int], start: int, work: int,
                 end: int, final: bool) -> None:
        self.bid, self.model, self.rids, self.workers = bid, model, rids, workers
        self.seg_start = start  #: start of the current segment
        self.work = work  #: worker-µs still to do at ``seg_start``
        self.end = end  #: when the current segment completes the batch
        self.final = final

    def __repr__(self) -> str:
        return f"Allocation(batch={self.bid}, workers={self.workers}, end={self.end})"


class Allocations:
    """The allocation actions over a :class:`~.resources.Resources` (module docstring)."""

    __slots__ = ("res",)

    def __init__(self, res: Resources) -> None:
        self.res = res

    def start(self, workers: list[int], model: int, rids: list[int], now: int, duration_us: int, *,
              final: bool = True) -> Allocation:
        res = self.res
        if not workers or len(set(workers)) != len(workers):
            raise RuntimeError(f"an allocation needs distinct workers, got {workers}")
        for w in workers:
            if res.w_batch[w] >= 0 or not res.w_alive[w]:
                raise RuntimeError(f"worker {w} is busy or removed: it cannot join an allocation")
        start = max(max(res.w_free[w] for w in workers), now)
        if res.sched_active:
            start = max(start, res.decide(res.w_group[workers[0]], now, len(rids)))
        end = start + duration_us
        bid = res.rec.batch(workers[0], model, len(rids), start, end)
        a = Allocation(bid, model, rids, list(workers), start, duration_us * len(workers), end, final)
        self._hold(a, a.workers, start)
        self._schedule(a)
        return a

    def resize(self, a: Allocation, workers: list[int], now: int, remaining_us: int | None = None) -> int:
        """Move ``a`` to ``workers`` at ``now`` keeping the work done; returns its new end."""
        res = self.res
        if res.w_alloc[a.workers[0]] is not a:
            raise RuntimeError(f"{a} has completed: it cannot be resized")
        if not workers or len(set(workers)) != len(workers):
            raise RuntimeError(f"an allocation needs distinct workers, got {workers}")
        old = set(a.workers)
        for w in workers:
            if w not in old and (res.w_batch[w] >= 0 or not res.w_alive[w]):
                raise RuntimeError(f"worker {w} is busy or removed: it cannot join an allocation")
        t = max(now, a.seg_start)
        k = len(a.workers)
        for w in a.workers:
            if t > a.seg_start:
                res.rec.segment(a.bid, w, a.seg_start, t)
        a.work -= (t - a.seg_start) * k
        new = set(workers)
        leaving = [w for w in a.workers if w not in new]
        for w in leaving:
            res.w_batch[w] = -1
            res.w_alloc[w] = None
            res.w_reqs[w] = None
            res.w_free[w] = t
        a.workers = list(workers)
        a.seg_start = t
        a.end = t + (remaining_us if remaining_us is not None else -(-a.work // len(workers)))
        if remaining_us is not None:
            a.work = remaining_us * len(workers)
        self._hold(a, [w for w in workers if w not in old], t)
        for w in workers:
            res.w_end[w] = a.end
        res.rec.end_batch(a.bid, a.end)
        self._schedule(a)
        for w in leaving:  # a batch booked on a worker that left starts now
            if res.w_next[w]:
                res.start_booked(w, t)
        return a.end

    def complete(self, a: Allocation, who: int, now: int) -> bool:
        """The completion event of ``a`` at ``now``, targeted at ``who``; False if it is stale (resized)."""
        if now != a.end or who != a.workers[0]:
            return False
        res = self.res
        for w in a.workers:
            if now > a.seg_start:
                res.rec.segment(a.bid, w, a.seg_start, now)
        if a.final:
            res.rec.served(a.rids, res.rec.b_start[a.bid], now, a.workers[0], a.bid)
        for w in a.workers:
            res.w_batch[w] = -1
            res.w_alloc[w] = None
            res.w_reqs[w] = None
            res.w_free[w] = now
            if res.w_next[w]:  # a batch booked on a worker of the set starts now
                res.start_booked(w, now)
        return True

    def _hold(self, a: Allocation, workers: list[int], start: int) -> None:
        res = self.res
        for w in workers:
            res.w_batch[w] = a.bid
            res.w_alloc[w] = a
            res.w_start[w] = start
            res.w_end[w] = a.end
            res.w_model[w] = a.model
            res.w_reqs[w] = a.rids
            res.w_final[w] = a.final

    def _schedule(self, a: Allocation) -> None:
        self.res.clock.push(a.end, COMPLETION, a.workers[0], a.bid)
