"""The discrete-event loop and the actions policies call.

Requests are integer indices into the trace's numpy columns; no per-request
Python object outlives its stay in a policy queue. Arrivals are streamed per
serving group in chunks of :data:`CHUNK` (converted to Python lists once), and
a policy consumes a whole run of arrivals in its own tight loop
(:meth:`Policy.on_arrivals`) up to ``engine.until`` — the time of the next
queued event — so the heap is touched once per run of arrivals, not once per
request. With admission control on (:mod:`.admission`) a run is handed only
as far as its arrivals are certainly admitted; shed arrivals never reach the
policy. Outcomes go straight into preallocated numpy arrays, one vectorised
write per batch; batch records go into compact ``array('q')`` columns.

Actions (called by policies): :meth:`Engine.drop`, :meth:`Engine.set_timer`,
:meth:`Engine.decision_time`; a worker's current batch —
:meth:`~.started.StartedBatches.start_batch`, ``preempt``, ``busy`` — in
:mod:`.started`; and for batches a reserving policy
has scheduled exactly :meth:`~.reserved.ReservedBatches.book_path` (engine-executed)
or :meth:`~.reserved.ReservedBatches.record_batch` / ``record_path`` (recorded at
dispatch), in :mod:`.reserved`. Events: arrival, completion, timer (tie order in
:mod:`.events`). Arrival feeds are in :mod:`.feed`; what a policy sees of its
group in :mod:`.context`; outcome codes in :mod:`.outcomes` (all re-exported
here). The loop never looks inside
a policy, so a new policy (Symphony's timers, PPipe's pipelines, Accordion's
malleable allocations) is a new module, not a change here.
"""

from __future__ import annotations

import time as _time
from array import array
from bisect import bisect_left
from heapq import heappop
from typing import TYPE_CHECKING, Callable

import numpy as np

from shepherd.core.engine.admission import Admission
from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine.context import GroupContext
from shepherd.core.engine.events import ARRIVAL, COMPLETION, NEVER, TIMER, EventQueue
from shepherd.core.engine.feed import Feed
from shepherd.core.engine.outcomes import DROPPED, LATE, OUTCOMES, PENDING, SERVED
from shepherd.core.engine.overhead import OverheadConfig, SchedulerClock
from shepherd.core.engine.reserved import RECORD_CHUNK, ReservedBatches
from shepherd.core.engine.started import StartedBatches

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.policies.base import Policy

CHUNK = 1 << 15  #: arrivals per feed chunk (read when an Engine is made)
_LAST = (NEVER + 1,)  #: sorts after every heap entry

__all__ = ["CHUNK", "DROPPED", "LATE", "OUTCOMES", "PENDING", "RECORD_CHUNK", "SERVED", "TIMER",
           "Engine", "Feed", "GroupContext"]


class Engine(StartedBatches, ReservedBatches, Admission):
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
        self.shed_ids = array("q")  #: requests shed by admission control (:mod:`.admission`), in order
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

    def drop(self, rids: list[int], now: int) -> None:
        """Give up on ``rids`` (they will never be served)."""
        if rids:
            self.r_outcome[np.array(rids, dtype=np.int64)] = DROPPED

    def set_timer(self, group: int, at: int, payload: object = None) -> None:
        """Wake ``group``'s policy at ``at`` with ``payload`` (``on_timer``)."""
        self.events.push(at, TIMER, group, payload)
        if at < self.until:
            self.until = at

    def decision_time(self, group: int, now: int) -> int:
        """The scheduler's own clock for a decision made at ``now`` (≥ now; see overhead)."""
        sched = self.sched[group]
        if sched.arrival_ns:
            self._charge_until(group, now)
        return sched.ready_us(now)

    def _decide(self, g: int, now: int, size: int) -> int:
        """Charge group ``g``'s scheduler for a decision about a batch of ``size`` made at ``now``
        (the arrivals before it first, then admission's recheck); returns when it takes effect, µs."""
        sched = self.sched[g]
        if sched.arrival_ns:
            self._charge_until(g, now)
        disp = sched.decide(now, size)
        if sched.admit:
            self._recheck(g, now)
        return disp

    def _charge_until(self, g: int, now: int) -> None:
        """Charge the group's scheduler for the arrivals before ``now`` not yet charged."""
        feed = self.feeds[g]
        upto = bisect_left(feed.t, now, feed.charged, feed.hi)
        if upto > feed.charged:
            self.sched[g].charge_arrivals(feed.tn[feed.charged:upto])
            feed.charged = upto

    # ------------------------------------------------------------------ loop

    def _arrivals(self, g: int) -> None:
        feed, pol, events = self.feeds[g], self.policies[g], self.events
        sched = self.sched[g]
        admit = sched.admit
        while True:
            self.until = events.arrival_horizon()
            if feed.t[feed.pos] >= self.until:
                break
            if self.emulate:
                sched.t0 = _time.perf_counter_ns()
            lim = feed.hi
            if admit:  # hand the policy only arrivals that are admitted (see .admission)
                free, c = sched.free_ns, sched.arrival_ns
                lag = free - feed.t[feed.pos] * 1000
                slack = sched.max_lag_ns - (lag if lag > 0 else 0)
                if slack >= 0 and c:
                    lim = feed.charged + 1 + slack // c
                    if lim > feed.hi:
                        lim = feed.hi
                if slack < 0 or lim <= feed.pos:
                    lim = self._admit(g, feed)
                feed.lim = lim
            if feed.pos < lim:
                feed.pos = pol.on_arrivals(feed.t, feed.d, feed.m, feed.s, feed.r, feed.pos, lim)
            if self.emulate:
                sched.charge_measured(feed.t[feed.pos - 1] if feed.pos else self.now)
            if feed.pos < feed.hi:
                if admit:  # the run may have stopped at ``lim`` or at a re-check: the loop decides
                    continue
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
        drain = self._drain_quiet
        while True:
            if quiet and (not heap or quiet[0] < heap[0]):  # quiet events come first (see .events)
                drain(heap[0] if heap else _LAST)
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
