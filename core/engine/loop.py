"""The discrete-event loop and the actions policies call.

Requests are integer indices into the trace's numpy columns; no per-request
Python object outlives its stay in a policy queue. Arrivals are streamed per
serving group in chunks of :data:`CHUNK` (converted to Python lists once), and
a policy consumes a whole run of arrivals in its own tight loop
(:meth:`Policy.on_arrivals`) up to ``engine.until`` — the time of the next
queued event — so the heap is touched once per run of arrivals, not once per
request. Outcomes go straight into preallocated numpy arrays, one vectorised
write per batch; batch records go into compact ``array('q')`` columns.

Actions (called by policies): :meth:`Engine.start_batch`, :meth:`Engine.preempt`,
:meth:`Engine.drop`, :meth:`Engine.set_timer`, and for batches a reserving policy
has scheduled exactly :meth:`~.reserved.ReservedBatches.book_path` (engine-executed)
or :meth:`~.reserved.ReservedBatches.record_batch` / ``record_path`` (recorded at
dispatch), in :mod:`.reserved`. Events: arrival, completion, timer (tie order in
:mod:`.events`). Arrival feeds are in :mod:`.feed`. The loop never looks inside
a policy, so a new policy (Symphony's timers, PPipe's pipelines, Accordion's
malleable allocations) is a new module, not a change here.
"""

from __future__ import annotations

import time as _time
from array import array
from bisect import bisect_left
from dataclasses import dataclass
from heapq import heappop
from typing import TYPE_CHECKING, Callable

import numpy as np

from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine.events import ARRIVAL, COMPLETION, NEVER, TIMER, EventQueue
from shepherd.core.engine.feed import Feed
from shepherd.core.engine.outcomes import DROPPED, LATE, OUTCOMES, PENDING, SERVED
from shepherd.core.engine.overhead import OverheadConfig, SchedulerClock
from shepherd.core.engine.reserved import DONE_CHUNK, RECORD_CHUNK, ReservedBatches

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.policies.base import Policy

CHUNK = 1 << 15  #: arrivals per feed chunk (read when an Engine is made)

__all__ = ["CHUNK", "DROPPED", "LATE", "OUTCOMES", "PENDING", "RECORD_CHUNK", "SERVED", "TIMER",
           "Engine", "Feed", "GroupContext"]


@dataclass
class GroupContext:
    """What a policy instance sees of its serving group."""

    engine: "Engine"
    group: int  # index into engine groups
    group_id: int  # the plan's group label
    workers: list[int]  # global worker ids
    hardware: list[int]  # hardware index of each worker (aligned with ``workers``)
    lat: list[list[list[int]]]  # lat[hardware][model][batch] in µs, batch 0…max_batch
    models: list[str]
    exit_points: list[int]  # per model (Shepherd Table 4); 0 where unknown
    max_batch: int
    rng: np.random.Generator
    request_ids: np.ndarray | None  # this group's global request ids (None: all)

    def arrivals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(arrival_us, deadline_us, model, stream) of this group's requests, numpy."""
        e, ids = self.engine, self.request_ids
        if ids is None:
            return e.arrival, e.deadline, e.model, e.stream
        return e.arrival[ids], e.deadline[ids], e.model[ids], e.stream[ids]


class Engine(ReservedBatches):
    """Clock, event queue, worker state, outcome arrays and the loop."""

    def __init__(self, arrival: np.ndarray, deadline: np.ndarray, model: np.ndarray,
                 stream: np.ndarray, group_of: np.ndarray | None, cluster: Cluster,
                 hardware_of_worker: list[int], lat: list[list[list[int]]],
                 overhead: OverheadConfig) -> None:
        n = len(arrival)
        self.arrival, self.deadline, self.model, self.stream = arrival, deadline, model, stream
        self.cluster = cluster
        self.lat = lat
        # per-request outcomes
        self.r_start = np.full(n, -1, np.int64)
        self.r_finish = np.full(n, -1, np.int64)
        self.r_worker = np.full(n, -1, np.int32)
        self.r_batch = np.full(n, -1, np.int64)
        self.r_outcome = np.zeros(n, np.int8)
        self.r_preempt = np.zeros(n, np.int16)
        # workers
        nw = len(cluster.workers)
        gpos = {g: i for i, g in enumerate(cluster.groups)}
        self.w_group = [gpos[w.group] for w in cluster.workers]
        self.w_hw = list(hardware_of_worker)
        self.w_batch = [-1] * nw
        self.w_start = [0] * nw
        self.w_end = [0] * nw
        self.w_free = [0] * nw
        self.w_model = [-1] * nw
        self.w_reqs: list[list[int] | None] = [None] * nw
        self.w_final = [True] * nw
        self.w_busy = [0] * nw
        self.w_waste = [0] * nw
        # batches
        self.b_worker, self.b_model, self.b_size = array("q"), array("q"), array("q")
        self.b_start, self.b_end, self.b_pre = array("q"), array("q"), array("q")
        # scheduler overhead, one scheduler per group
        overhead.validate()
        self.overhead = overhead
        self.emulate = overhead.mode == "emulation"
        ng = len(cluster.groups)
        sizes = [sum(1 for g in self.w_group if g == i) for i in range(ng)]
        self.sched = [SchedulerClock(overhead, size) for size in sizes]
        self.sched_active = any(s.active for s in self.sched)  # False: decisions cost nothing
        # feeds
        if group_of is None or ng == 1:
            self.group_ids: list[np.ndarray | None] = [None]
        else:
            order = np.argsort(group_of, kind="stable")
            counts = np.bincount(group_of, minlength=ng)
            self.group_ids = list(np.split(order.astype(np.int64), np.cumsum(counts)[:-1]))
        self.feeds = [Feed(ids, arrival, deadline, model, stream, CHUNK) for ids in self.group_ids]
        self.events = EventQueue()
        self.until = NEVER
        self.now = 0
        #: optional per-request trace columns (e.g. Accordion's ``instances``, ``priority``)
        self.columns: dict[str, np.ndarray] = {}
        self._init_reserved()
        self.policies: list["Policy"] = []
        self.policy_of: list["Policy"] = []

    # ------------------------------------------------------------------ actions

    def start_batch(self, worker: int, model: int, rids: list[int], now: int, *,
                    duration_us: int | None = None, at: int = 0, final: bool = True) -> int:
        """Run ``rids`` (all of ``model``) on an idle ``worker``; returns the end time.

        The batch starts once the group's scheduler has made the decision
        (overhead model), the worker has reached its free time (a preempted
        batch stops at its next exit point) and not before ``at`` (a reserved
        slot, a non-work-conserving ``sched_at``). Its latency is the profile's
        ℓ(|rids|) on the worker's hardware unless ``duration_us`` is given (a
        pipeline stage, an MPS share, a malleable allocation). With
        ``final=False`` the completion frees the worker but records no request
        outcome: the requests stay in flight for the policy's next stage.
        """
        if self.w_batch[worker] >= 0:
            raise RuntimeError(f"worker {worker} is busy: a policy started two batches on it")
        if self.rec_paths or self.bk_paths:  # keep batch ids in call order
            self._flush_rows()
        start = self.w_free[worker]
        if self.sched_active:
            g = self.w_group[worker]
            sched = self.sched[g]
            if sched.arrival_ns:
                self._charge_until(g, now)
            disp = sched.decide(now, len(rids))
            if start < disp:
                start = disp
        elif start < now:
            start = now
        if start < at:
            start = at
        if duration_us is None:
            end = start + self.lat[self.w_hw[worker]][model][len(rids)]
        else:
            end = start + duration_us
        self.w_final[worker] = final
        bid = self._append_batch(worker, model, len(rids), start, end)
        self.w_batch[worker] = bid
        self.w_start[worker] = start
        self.w_end[worker] = end
        self.w_model[worker] = model
        self.w_reqs[worker] = rids
        self.events.push(end, COMPLETION, worker, bid)
        if end < self.until:
            self.until = end
        return end

    def _append_batch(self, worker: int, model: int, size: int, start: int, end: int) -> int:
        """Add a row to the batch table; returns its batch id."""
        bid = len(self.b_worker)
        self.b_worker.append(worker)
        self.b_model.append(model)
        self.b_size.append(size)
        self.b_start.append(start)
        self.b_end.append(end)
        self.b_pre.append(0)
        return bid

    def preempt(self, worker: int, now: int, delay_us: int) -> tuple[int, list[int]]:
        """Stop ``worker``'s batch ``delay_us`` from now (its next exit point).

        Returns (stop time, the batch's request ids). The time the batch ran is
        recorded as waste; the worker is free again at the stop time.
        """
        bid = self.w_batch[worker]
        if bid < 0:
            raise RuntimeError(f"worker {worker} has no batch to preempt")
        start = self.w_start[worker]
        stop = start if start >= now else min(now + delay_us, self.w_end[worker])
        self.b_end[bid] = stop
        self.b_pre[bid] = 1
        self.w_waste[worker] += stop - start
        rids = self.w_reqs[worker]
        assert rids is not None
        self.r_preempt[np.array(rids, dtype=np.int64)] += 1
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = stop
        return stop, rids

    def drop(self, rids: list[int], now: int) -> None:
        """Give up on ``rids`` (they will never be served)."""
        if rids:
            self.r_outcome[np.array(rids, dtype=np.int64)] = DROPPED

    def set_timer(self, group: int, at: int, payload: object = None) -> None:
        """Wake ``group``'s policy at ``at`` with ``payload`` (``on_timer``)."""
        self.events.push(at, TIMER, group, payload)
        if at < self.until:
            self.until = at

    def busy(self, worker: int) -> bool:
        return self.w_batch[worker] >= 0

    def decision_time(self, group: int, now: int) -> int:
        """The scheduler's own clock for a decision made at ``now`` (≥ now; see overhead)."""
        sched = self.sched[group]
        if sched.arrival_ns:
            self._charge_until(group, now)
        return sched.ready_us(now)

    def _charge_until(self, g: int, now: int) -> None:
        """Charge the group's scheduler for the arrivals before ``now`` not yet charged."""
        feed = self.feeds[g]
        upto = bisect_left(feed.t, now, feed.charged, feed.hi)
        if upto > feed.charged:
            self.sched[g].charge_arrivals(feed.tn[feed.charged:upto])
            feed.charged = upto

    # ------------------------------------------------------------------ loop

    def _complete(self, worker: int, now: int) -> None:
        rids = self.w_reqs[worker]
        start = self.w_start[worker]
        if not self.w_final[worker]:  # an intermediate stage: the requests stay in flight
            self.w_busy[worker] += now - start
            self.w_batch[worker] = -1
            self.w_reqs[worker] = None
            self.w_free[worker] = now
            return
        if len(rids) == 1:  # scalar writes: much cheaper than fancy indexing
            r = rids[0]
            self.r_start[r] = start
            self.r_finish[r] = now
            self.r_worker[r] = worker
            self.r_batch[r] = self.w_batch[worker]
            self.r_outcome[r] = SERVED if self.deadline[r] >= now else LATE
        else:
            idx = np.array(rids, dtype=np.int64)
            self.r_start[idx] = start
            self.r_finish[idx] = now
            self.r_worker[idx] = worker
            self.r_batch[idx] = self.w_batch[worker]
            self.r_outcome[idx] = LATE - (self.deadline[idx] >= now)
        self.w_busy[worker] += now - start
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = now

    def _arrivals(self, g: int) -> None:
        feed, pol, events = self.feeds[g], self.policies[g], self.events
        while True:
            self.until = events.arrival_horizon()
            if feed.t[feed.pos] >= self.until:
                break
            sched = self.sched[g]
            if self.emulate:
                sched.t0 = _time.perf_counter_ns()
            feed.pos = pol.on_arrivals(feed.t, feed.d, feed.m, feed.s, feed.r, feed.pos, feed.hi)
            if self.emulate:
                sched.charge_measured(feed.t[feed.pos - 1] if feed.pos else self.now)
            if feed.pos < feed.hi:
                break
            if sched.arrival_ns and feed.charged < feed.hi:  # arrivals are charged lazily, before
                sched.charge_arrivals(feed.tn[feed.charged:])  # a decision or a chunk change
                feed.charged = feed.hi
            if not feed.refill():
                return
            if self.progress is not None:
                self.progress(feed.t[0])
        events.push(feed.t[feed.pos], ARRIVAL, g)

    progress: Callable[[int], None] | None = None

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """Run until no event is left; requests never served end as dropped."""
        self.progress = progress
        events = self.events
        for p in self.policies:
            p.on_start(0)
        for g, feed in enumerate(self.feeds):
            if feed.refill():
                events.push(feed.t[0], ARRIVAL, g)
        heap, quiet = events.heap, events.quiet
        emulate = self.emulate
        policy_of = self.policy_of
        w_free, w_busy, w_batch, w_start = self.w_free, self.w_busy, self.w_batch, self.w_start
        done_rids, done_bids = self.done_rids, self.done_bids
        while True:
            if quiet and (not heap or quiet[0] < heap[0]):  # a quiet event comes first (see .events)
                # the completion of a booked batch: _complete_booked, inlined (PPipe's hot path)
                t, _, _, who, (w, start, rids) = heappop(quiet)
                self.now = t
                if start < w_free[w] or (w_batch[w] >= 0 and w_start[w] < t):
                    self._overlap(w, ~who, t, start)
                w_free[w] = t
                w_busy[w] += t - start
                if who & 1 == 0:  # ~who odd: a final batch
                    done_rids += rids
                    done_bids += [~who >> 1] * len(rids)
                    if len(done_rids) >= DONE_CHUNK:
                        self._flush_done()
                continue
            if not heap:
                break
            t, prio, _, who, arg = heappop(heap)
            self.now = t
            if prio == ARRIVAL:
                self._arrivals(who)
                continue
            self.until = events.arrival_horizon()
            if prio == COMPLETION:
                if who < 0:  # a booked batch with notify (see .reserved)
                    w = self._complete_booked(~who, t, arg)
                    if emulate:
                        self.sched[self.w_group[w]].t0 = _time.perf_counter_ns()
                    policy_of[w].on_completion(t, w)
                    continue
                if self.w_batch[who] != arg:
                    continue  # a preempted batch's stale completion
                if emulate:
                    self.sched[self.w_group[who]].t0 = _time.perf_counter_ns()
                self._complete(who, t)
                policy_of[who].on_completion(t, who)
            else:
                if emulate:
                    self.sched[who].t0 = _time.perf_counter_ns()
                self.policies[who].on_timer(t, arg)
        for p in self.policies:
            p.on_finish(self.now)
        self._flush_rows()
        self._flush_done()
        self.r_outcome[self.r_outcome == PENDING] = DROPPED
