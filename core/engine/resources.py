"""Resources: the workers and what runs on them — start, preempt, book, complete; workers added and removed.

A worker is one execution place (a GPU, an MPS virtual GPU — PPipe §5.1 — or
a CPU execution place — Accordion) with a hardware type, a serving group and
a node (its server, for link reservations). Each worker runs at most one
batch at a time:

* :meth:`Resources.start` — run a batch on an idle worker now (after the
  scheduler's decision takes effect, the worker's free time and ``at``);
* :meth:`Resources.book` — the same on a *busy* worker: the batch starts the
  moment the worker frees (Symphony Appendix C grants a GPU its next batch
  before it is free); on an idle worker it is :meth:`start`;
* :meth:`Resources.preempt` — stop the running batch at its next exit point
  (Shepherd Flex, §5.2); the time it ran is waste;
* completion (:meth:`Resources.complete`, called by the loop) — outcomes are
  written (``final`` batches), busy time added, the next booked batch started.

Multi-worker allocations (``start``/``resize`` over several workers) are in
:mod:`.allocations`; batches scheduled exactly on reserved paths in
:mod:`.paths`. Workers can be added and removed during a run
(:meth:`Resources.add_worker`, :meth:`Resources.remove_worker`: Symphony §4.4
autoscaling); a removed worker finishes what it runs and takes nothing new.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable

from shepherd.core.engine.clock import COMPLETION, Clock
from shepherd.core.engine.recorder import Recorder

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.engine.allocations import Allocation
    from shepherd.core.engine.execution import ExecutionDraws


class Resources:
    """Per-worker state (parallel lists indexed by worker id) and the actions on one worker."""

    __slots__ = ("clock", "rec", "lat", "decide", "sched_active", "execution",
                 "w_group", "w_hw", "w_node", "w_name", "w_batch", "w_start", "w_end", "w_free", "w_model",
                 "w_reqs", "w_final", "w_next", "w_alloc", "w_alive", "group_workers")

    def __init__(self, clock: Clock, rec: Recorder, lat: list[list[list[int]]], groups: list[int],
                 hardware: list[int], nodes: list[int], names: list[str],
                 decide: Callable[[int, int, int], int], sched_active: bool, n_groups: int) -> None:
        self.clock, self.rec, self.lat = clock, rec, lat
        #: the group's scheduler-overhead clock: ``decide(group, now, size)`` → when the decision takes effect
        self.decide = decide
        self.sched_active = sched_active
        #: drawn execution times (:mod:`.execution`, ``--exec-time measured``); None: the profile's latency
        self.execution: "ExecutionDraws | None" = None
        n = len(groups)
        self.w_group, self.w_hw, self.w_node, self.w_name = list(groups), list(hardware), list(nodes), list(names)
        self.w_batch = [-1] * n  #: running batch id, −1 idle
        self.w_start = [0] * n
        self.w_end = [0] * n
        self.w_free = [0] * n  #: when the worker is free (a preempted batch stops at its exit point)
        self.w_model = [-1] * n
        self.w_reqs: list[list[int] | None] = [None] * n
        self.w_final = [True] * n
        self.w_next: list[deque | None] = [None] * n  #: batches booked to start when the worker frees
        self.w_alloc: list["Allocation | None"] = [None] * n  #: the allocation the worker is part of
        self.w_alive = [True] * n
        #: per group: its live workers' ids (the list a policy sees as ``act.workers``)
        self.group_workers: list[list[int]] = [[] for _ in range(n_groups)]
        for w, g in enumerate(groups):
            self.group_workers[g].append(w)

    # ------------------------------------------------------------------ one worker's batch

    def start(self, worker: int, model: int, rids: list[int], now: int, *,
              duration_us: int | None = None, at: int = 0, final: bool = True) -> int:
        """Run ``rids`` (all of ``model``) on an idle ``worker``; returns the end time.

        The batch starts once the group's scheduler has made the decision
        (overhead model), the worker has reached its free time and not before
        ``at`` (a reserved slot, a non-work-conserving ``sched_at``). Its
        latency is the prepared table's ℓ(|rids|) on the worker's hardware
        unless ``duration_us`` is given (a pipeline stage, an MPS share). With
        ``final=False`` the completion frees the worker but records no request
        outcome: the requests stay in flight for the policy's next stage.
        """
        if self.w_batch[worker] >= 0:
            raise RuntimeError(f"worker {worker} is busy: a policy started two batches on it")
        if not self.w_alive[worker]:
            raise RuntimeError(f"worker {worker} was removed")
        start = self.w_free[worker]
        if self.sched_active:
            disp = self.decide(self.w_group[worker], now, len(rids))
            if start < disp:
                start = disp
        elif start < now:
            start = now
        if start < at:
            start = at
        return self._occupy(worker, model, rids, start, duration_us, final)

    def book(self, worker: int, model: int, rids: list[int], now: int, *,
             duration_us: int | None = None, final: bool = True) -> None:
        """Run ``rids`` on ``worker`` the moment it frees (now, if it is idle): Symphony Appendix C.

        Booked batches of a worker start in booking order, each at the
        completion of the one before; the scheduler's decision is charged now.
        """
        if self.w_batch[worker] < 0 and not self.w_next[worker]:
            self.start(worker, model, rids, now, duration_us=duration_us, final=final)
            return
        if not self.w_alive[worker]:
            raise RuntimeError(f"worker {worker} was removed")
        at = self.decide(self.w_group[worker], now, len(rids)) if self.sched_active else now
        if self.w_next[worker] is None:
            self.w_next[worker] = deque()
        self.w_next[worker].append((model, rids, duration_us, final, at))

    def preempt(self, worker: int, now: int, delay_us: int) -> tuple[int, list[int]]:
        """Stop ``worker``'s batch ``delay_us`` from now (its next exit point).

        Returns (stop time, the batch's request ids). The time the batch ran is
        recorded as waste; the worker is free again at the stop time.
        """
        bid = self.w_batch[worker]
        if bid < 0 or self.w_alloc[worker] is not None:
            raise RuntimeError(f"worker {worker} has no one-worker batch to preempt")
        start = self.w_start[worker]
        stop = start if start >= now else min(now + delay_us, self.w_end[worker])
        rids = self.w_reqs[worker]
        assert rids is not None
        self.rec.preempted(bid, stop, rids)
        self.rec.w_waste[worker] += stop - start
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = stop
        return stop, rids

    def busy(self, worker: int) -> bool:
        return self.w_batch[worker] >= 0

    def running(self, worker: int) -> tuple[int, int, int]:
        """(start, end, model) of the worker's running batch: ``end`` is its completion as the policy knows
        it — the profile's, also when the batch's drawn execution time (:mod:`.execution`) differs."""
        if self.execution is not None and self.w_alloc[worker] is None:
            return self.w_start[worker], self.execution.planned_end[worker], self.w_model[worker]
        return self.w_start[worker], self.w_end[worker], self.w_model[worker]

    def complete(self, worker: int, now: int) -> None:
        """The running batch of ``worker`` completes at ``now`` (called by the loop)."""
        start = self.w_start[worker]
        if self.w_final[worker]:  # an intermediate stage's requests stay in flight
            self.rec.served(self.w_reqs[worker], start, now, worker, self.w_batch[worker])
        self.rec.w_busy[worker] += now - start
        self.w_batch[worker] = -1
        self.w_reqs[worker] = None
        self.w_free[worker] = now
        if self.w_next[worker]:
            self.start_booked(worker, now)

    def start_booked(self, worker: int, now: int) -> None:
        """Start the worker's next booked batch at ``max(now, at)`` (its decision was charged when it
        was booked); the worker has just freed."""
        model, rids, duration, final, at = self.w_next[worker].popleft()
        self._occupy(worker, model, rids, now if now >= at else at, duration, final)

    def _occupy(self, worker: int, model: int, rids: list[int], start: int, duration_us: int | None,
                final: bool) -> int:
        """Run a batch on ``worker`` from ``start`` (profile latency unless ``duration_us``): record it and
        queue its completion, which ends the run of arrivals at its end if earlier. Returns the end (with
        drawn execution times, :mod:`.execution`, the drawn end; the policy plans on the profile's)."""
        if duration_us is not None:
            end = start + duration_us
            if self.execution is not None:
                self.execution.planned_end[worker] = end
        elif self.execution is None:
            end = start + self.lat[self.w_hw[worker]][model][len(rids)]
        else:
            end = start + self.execution.duration(worker, self.w_hw[worker], model, len(rids), start,
                                                 start - self.w_free[worker])
        self.w_final[worker] = final
        bid = self.rec.batch(worker, model, len(rids), start, end)
        self.w_batch[worker] = bid
        self.w_start[worker] = start
        self.w_end[worker] = end
        self.w_model[worker] = model
        self.w_reqs[worker] = rids
        self.clock.push(end, COMPLETION, worker, bid)
        return end

    # ------------------------------------------------------------------ workers added / removed

    def add_worker(self, group: int, hardware: int, node: int, name: str, now: int) -> int:
        """A new idle worker of ``group`` from ``now``; returns its id."""
        w = len(self.w_group)
        for col, value in ((self.w_group, group), (self.w_hw, hardware), (self.w_node, node), (self.w_name, name),
                           (self.w_batch, -1), (self.w_start, 0), (self.w_end, 0), (self.w_free, now),
                           (self.w_model, -1), (self.w_reqs, None), (self.w_final, True), (self.w_next, None),
                           (self.w_alloc, None), (self.w_alive, True)):
            col.append(value)
        self.group_workers[group].append(w)
        self.rec.add_worker(now)
        return w

    def remove_worker(self, worker: int, now: int) -> None:
        """``worker`` takes no new batch from ``now``; a batch it runs finishes (and is counted)."""
        if not self.w_alive[worker]:
            raise RuntimeError(f"worker {worker} was removed twice")
        if self.w_next[worker]:
            raise RuntimeError(f"worker {worker} has booked batches: it cannot be removed")
        self.w_alive[worker] = False
        self.group_workers[self.w_group[worker]].remove(worker)
        end = self.w_end[worker] if self.w_batch[worker] >= 0 else now
        self.rec.w_removed[worker] = max(now, end)
