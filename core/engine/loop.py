"""The discrete-event loop: pops the clock's events and hands them to the policies.

Requests are integer indices into the trace's numpy columns; no per-request
Python object outlives its stay in a policy queue. Arrivals are streamed per
serving group in chunks (:mod:`.feed`, ``EngineConfig.chunk``), and a policy
consumes a whole *run* of arrivals in its own tight loop
(:meth:`Policy.on_arrivals`) up to the clock's ``until`` — the time of the
next queued event — so the heap is touched once per run of arrivals, not
once per request. With admission control on (:mod:`.admission`) a run is
handed only as far as its arrivals are certainly admitted; shed arrivals
never reach the policy.

The engine is composed of one part per concept, each declared once, here:
the :class:`~.clock.Clock`, the :class:`~.recorder.Recorder`, the
:class:`~.resources.Resources` with :class:`~.allocations.Allocations` and
:class:`~.paths.Paths`, the groups' scheduler clocks with
:class:`~.admission.Admission`, and the arrival feeds. Policies never see it:
they act through :class:`~.actions.Actions`. The loop never looks inside a
policy, so a new policy is a new module, not a change here.
"""

from __future__ import annotations

import time as _time
from heapq import heappop
from typing import TYPE_CHECKING, Callable

import numpy as np

from shepherd.core.engine.admission import Admission
from shepherd.core.engine.allocations import Allocations
from shepherd.core.engine.clock import ARRIVAL, BOOKED, COMPLETION, NEVER, Clock
from shepherd.core.engine.config import EngineConfig
from shepherd.core.engine.feed import Feed
from shepherd.core.engine.outcomes import DROPPED, LATE, OUTCOMES, PENDING, SERVED
from shepherd.core.engine.overhead import OverheadConfig, SchedulerClock
from shepherd.core.engine.paths import Paths
from shepherd.core.engine.recorder import Recorder
from shepherd.core.engine.resources import Resources

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.policies.base import Policy

_LAST = (NEVER + 1,)  #: sorts after every heap entry

__all__ = ["DROPPED", "LATE", "OUTCOMES", "PENDING", "SERVED", "Engine"]


class Engine:
    """One run: trace columns, the parts (module docstring), the policies, and the loop."""

    __slots__ = ("arrival", "deadline", "model", "stream", "columns", "config", "overhead", "emulate",
                 "clock", "rec", "res", "allocs", "paths", "sched", "sched_active", "admission", "feeds",
                 "group_ids", "group_of", "policies", "progress")

    def __init__(self, arrival: np.ndarray, deadline: np.ndarray, model: np.ndarray, stream: np.ndarray,
                 group_of: np.ndarray | None, n_groups: int, groups: list[int], hardware: list[int],
                 nodes: list[int], names: list[str], lat: list[list[list[int]]], overhead: OverheadConfig,
                 config: EngineConfig, summary_only: bool = False) -> None:
        self.arrival, self.deadline, self.model, self.stream = arrival, deadline, model, stream
        #: optional per-request trace columns (e.g. Accordion's ``instances``, ``priority``)
        self.columns: dict[str, np.ndarray] = {}
        config.validate()
        overhead.validate()
        self.config, self.overhead = config, overhead
        self.emulate = overhead.mode == "emulation"
        self.clock = Clock(config.quiet_lag_us)
        self.rec = Recorder(arrival, deadline, len(groups), config.reserved == "record", summary_only)
        sizes = [sum(1 for g in groups if g == i) for i in range(n_groups)]
        self.sched = [SchedulerClock(overhead, size) for size in sizes]
        self.sched_active = any(s.active for s in self.sched)  # False: decisions cost nothing
        #: each request's serving group (None: one group, or no routing)
        self.group_of = group_of if n_groups > 1 else None
        if group_of is None or n_groups == 1:
            self.group_ids: list[np.ndarray | None] = [None] * n_groups
        else:
            self.group_ids = group_order(group_of, n_groups)
        self.feeds = [Feed(ids, arrival, deadline, model, stream, config.chunk) for ids in self.group_ids]
        if n_groups > 1 and group_of is None:  # pragma: no cover - simulate() always routes
            raise ValueError("several groups need a routing of requests")
        self.admission = Admission(self.sched, self.feeds, self.clock, self.rec.r_outcome)
        self.res = Resources(self.clock, self.rec, lat, groups, hardware, nodes, names,
                             self.admission.decide, self.sched_active, n_groups)
        self.allocs = Allocations(self.res)
        self.paths = Paths(self.res, self.rec, self.clock, config.reserved == "record",
                           lambda g: self.sched[g].emulate)
        self.policies: list["Policy"] = []
        self.progress: Callable[[int], None] | None = None

    # ------------------------------------------------------------------ loop

    def _arrivals(self, g: int) -> None:
        feed, pol, clock = self.feeds[g], self.policies[g], self.clock
        sched = self.sched[g]
        admit = sched.admit
        while True:
            clock.until = clock.arrival_horizon()
            if feed.t[feed.pos] >= clock.until:
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
                    lim = self.admission.admit(g, feed)
                feed.lim = lim
            if feed.pos < lim:
                feed.pos = pol.on_arrivals(feed.t, feed.d, feed.m, feed.s, feed.r, feed.pos, lim)
            if self.emulate:
                sched.charge_measured(feed.t[feed.pos - 1] if feed.pos else clock.now)
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
        clock.push(feed.t[feed.pos], ARRIVAL, g)

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """Run until no event is left; requests never served end as dropped."""
        self.progress = progress
        clock = self.clock
        for p in self.policies:
            p.on_start(0)
        for g, feed in enumerate(self.feeds):
            if feed.refill():
                clock.push(feed.t[0], ARRIVAL, g)
        heap, quiet = clock.heap, clock.quiet
        emulate = self.emulate
        policies = self.policies
        res = self.res
        w_group, w_batch, w_alloc = res.w_group, res.w_batch, res.w_alloc
        complete, complete_alloc = res.complete, self.allocs.complete
        drain, complete_booked = self.paths.drain, self.paths.complete
        horizon = clock.arrival_horizon
        while True:
            if quiet and (not heap or quiet[0] < heap[0]):  # quiet events come first (see .clock)
                drain(heap[0] if heap else _LAST)
            if not heap:
                break
            entry = heappop(heap)
            t, prio, _, who, arg = entry
            clock.now = t
            if prio == ARRIVAL:
                self._arrivals(who)
                continue
            if prio == COMPLETION:
                if who == BOOKED:  # a booked batch with notify (see .paths)
                    w = complete_booked(entry)
                    clock.until = horizon()
                else:
                    if w_batch[who] != arg:
                        continue  # a preempted batch's stale completion
                    a = w_alloc[who]
                    if a is not None and not complete_alloc(a, who, t):
                        continue  # a resized allocation's stale completion
                    clock.until = horizon()
                    if a is None:
                        complete(who, t)
                    w = who
                if emulate:
                    self.sched[w_group[w]].t0 = _time.perf_counter_ns()
                policies[w_group[w]].on_completion(t, w)
            else:  # a timer: ``arg`` is its handle
                if arg.cancelled:
                    continue
                clock.until = horizon()
                if emulate:
                    self.sched[who].t0 = _time.perf_counter_ns()
                policies[who].on_timer(t, arg.payload)
        for p in policies:
            p.on_finish(clock.now)
        self.rec.flush()
        out = self.rec.r_outcome
        out[out == PENDING] = DROPPED


def group_order(group_of: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Each serving group's request ids, in id order: a stable sort of the groups (numpy's radix sort where
    the group fits 16 bits); a request routed outside ``[0, n_groups)`` is an error."""
    if len(group_of) and (int(group_of.min()) < 0 or int(group_of.max()) >= n_groups):
        raise ValueError("a request routed to no serving group")
    key = group_of.astype(np.int16, copy=False) if n_groups <= np.iinfo(np.int16).max else group_of
    order = np.argsort(key, kind="stable").astype(np.int64, copy=False)
    return list(np.split(order, np.cumsum(np.bincount(group_of, minlength=n_groups))[:-1]))
