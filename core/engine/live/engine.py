"""The live engine: the reference engine's parts with the wall clock as the Clock (DESIGN.md "A third clock").

Time is ``time.monotonic_ns`` in µs since the run's origin ``t0`` (a moment
just after every worker reported ready). The same policy objects decide,
through the same :class:`~shepherd.core.engine.actions.Actions`; what changes
is where events come from:

* arrivals — from the sender process (:mod:`.sender`), which replays the
  trace in real time; a policy is handed them with the time they were
  *received* as ``now`` (the recorder keeps the trace's arrival, so a
  request's latency includes the frontend hop);
* completions — from the worker processes' reports (:mod:`.worker`): the
  measured start and end are written, then the reference completion runs and
  the policy's ``on_completion`` is called at the time the report was read;
* timers — the clock's heap holds only timers here; one fires once the wall
  clock reaches it (``on_timer`` gets the wall time, ≥ its time).

The loop waits on the sender's and workers' pipes and on the worker
processes' sentinels, never longer than until the next timer. The run ends
when the trace has been sent, no batch is running or booked and no timer is
pending — or ``drain_s`` after the last arrival, or when a worker (or the
sender) dies or fails, or a worker still runs a long-overdue batch at the drain
limit (stopped or stuck: :meth:`LiveEngine._hung`) (the run then ends with what it has, the process
named in :attr:`LiveEngine.failures`; :func:`~shepherd.core.engine.live.run_live`
refuses such a run rather than let it be read as the simulator's error). Decisions are the policy's own; the scheduler's
overhead is real, hence the overhead model is off (``mode="none"``).
"""

from __future__ import annotations

import time
from heapq import heappop
from multiprocessing.connection import wait
from typing import Any, Callable

import numpy as np

from shepherd.core.engine.clock import NEVER
from shepherd.core.engine.live.resources import LiveResources
from shepherd.core.engine.loop import Engine
from shepherd.core.engine.outcomes import DROPPED, PENDING
from shepherd.core.errors import UserError


class _Unsupported:
    """Multi-worker allocations and reserved paths have no live form yet."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def refuse(*_a: Any, **_k: Any) -> Any:
            raise UserError(f"the live engine does not run {self.what} (whole-model batches on one worker only)")
        return refuse


class LiveEngine(Engine):
    """One live run (module docstring); ``pool`` is the started :class:`~.pool.Pool` of processes."""

    __slots__ = ("pool", "drain_us", "failures", "timings", "ended_by", "kill_at", "received")

    def __init__(self, pool: Any, drain_s: float, arrival: np.ndarray, deadline: np.ndarray, model: np.ndarray,
                 stream: np.ndarray, group_of: np.ndarray | None, n_groups: int, groups: list[int],
                 hardware: list[int], nodes: list[int], names: list[str], lat: list[list[list[int]]],
                 overhead: Any, config: Any, summary_only: bool = False) -> None:
        """``pool`` and ``drain_s``, then :class:`~shepherd.core.engine.loop.Engine`'s own parameters."""
        super().__init__(arrival, deadline, model, stream, group_of, n_groups, groups, hardware, nodes, names, lat,
                         overhead, config, summary_only)
        self.pool = pool
        self.res = LiveResources(pool, self.clock, self.rec, lat, groups, hardware, nodes, names,
                                 self.admission.decide, False, n_groups)
        self.allocs = _Unsupported("multi-worker allocations")
        self.paths = _Unsupported("batches on reserved paths")
        self.drain_us = int(drain_s * 1e6)
        self.failures: list[str] = []  #: one line per worker (or the sender) that died or failed, with when
        #: per handler call: (kind 0 arrivals / 1 completion / 2 timer, perf_counter ns spent in the policy)
        self.timings: list[tuple[int, int]] = []
        self.ended_by = ""
        #: per request: when the engine received it from the sender (µs; −1 never)
        self.received = np.full(len(self.arrival), -1, np.int64)
        self.kill_at: tuple | None = None  #: tests: (worker, seconds[, signal]) — kill it (or signal it) then

    # ------------------------------------------------------------------ events

    def _hand_arrivals(self, g: int, feed: dict[str, list[int]], pos: int) -> int:
        pol, clock = self.policies[g], self.clock
        hi = len(feed["r"])
        while pos < hi:
            clock.until = NEVER
            t = time.perf_counter_ns()
            pos = pol.on_arrivals(feed["t"], feed["d"], feed["m"], feed["s"], feed["r"], pos, hi)
            self.timings.append((0, time.perf_counter_ns() - t))
            if pos < hi:  # the policy stopped at a timer it set: fire what is due, then go on
                self._timers(feed["t"][pos])
        return pos

    def _timers(self, now: int) -> None:
        heap, clock = self.clock.heap, self.clock
        while heap and heap[0][0] <= now:
            _, _, _, g, timer = heappop(heap)
            if timer.cancelled:
                continue
            clock.until = NEVER
            clock.now = now
            t = time.perf_counter_ns()
            self.policies[g].on_timer(now, timer.payload)
            self.timings.append((2, time.perf_counter_ns() - t))

    def _completion(self, w: int, msg: tuple) -> None:
        _, bid, start_ns, end_ns, _cancelled, cpu_ns = msg
        t0 = self.pool.t0_ns
        if not self.res.finish(w, bid, (start_ns - t0) // 1000, (end_ns - t0) // 1000, cpu_ns // 1000):
            return  # a preempted batch's report
        now = self.pool.now()
        self.clock.until = NEVER
        self.clock.now = now
        t = time.perf_counter_ns()
        self.policies[self.res.w_group[w]].on_completion(now, w)
        self.timings.append((1, time.perf_counter_ns() - t))

    def _in_flight(self) -> bool:
        res = self.res
        return any(b >= 0 for b in res.w_batch) or any(res.w_next)

    def _hung(self, now: int) -> list[str]:
        """Workers whose running batch is long overdue at the drain limit — alive but stopped or stuck (a
        worker that died is reported by its sentinel): more than 1 s, and 10× its predicted time, past its
        planned start."""
        res, out = self.res, []
        for w, bid in enumerate(res.w_batch):
            if bid < 0:
                continue
            late = now - res.w_start[w]
            if late > max(1_000_000, 10 * (res.w_end[w] - res.w_start[w])):
                out.append(f"worker {w} has not finished a batch it was sent {late / 1e6:.1f} s ago "
                           "(stopped or stuck?)")
        return out

    def _timer_pending(self) -> bool:
        return any(not e[4].cancelled for e in self.clock.heap)

    # ------------------------------------------------------------------ loop

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        pool, clock = self.pool, self.clock
        n_groups = len(self.policies)
        feeds = [{"t": [], "d": [], "m": [], "s": [], "r": []} for _ in range(n_groups)]
        pos = [0] * n_groups
        group_of = self.group_of
        deadline, model, stream = self.deadline.tolist(), self.model.tolist(), self.stream.tolist()
        last = int(self.arrival.max()) if len(self.arrival) else 0
        pool.begin(self.arrival)
        for p in self.policies:
            p.on_start(0)
        sent_all = False
        while True:
            now = pool.now()
            self._timers(now)
            if self.kill_at is not None and now >= self.kill_at[1] * 1e6:
                pool.kill(*self.kill_at[:1], *self.kill_at[2:])
                self.kill_at = None
            if sent_all and not self._in_flight() and not self._timer_pending():
                self.ended_by = "drained"
                break
            if now > last + self.drain_us:
                self.ended_by = f"drain limit ({self.drain_us / 1e6:g} s after the last arrival)"
                self.failures.extend(self._hung(now))
                if self.failures:
                    self.ended_by = "worker failure: " + "; ".join(self.failures)
                break
            nxt = clock.heap[0][0] if clock.heap else NEVER
            timeout = max(0.0, min((nxt - now) / 1e6, 0.05))
            events = pool.poll(timeout)
            for kind, who, msg in events:
                if kind == "dead":
                    self.failures.append(f"{msg} {max(pool.now(), 0) / 1e6:.2f} s into the run")
                elif kind == "arrivals":
                    if msg is None:
                        sent_all = True
                        continue
                    now = pool.now()
                    touched = set()
                    self.received[msg] = now
                    for rid in msg:
                        g = 0 if group_of is None else int(group_of[rid])
                        f = feeds[g]
                        f["t"].append(now)
                        f["d"].append(deadline[rid])
                        f["m"].append(model[rid])
                        f["s"].append(stream[rid])
                        f["r"].append(rid)
                        touched.add(g)
                    for g in sorted(touched):
                        pos[g] = self._hand_arrivals(g, feeds[g], pos[g])
                    if progress is not None:
                        progress(now)
                else:
                    self._completion(who, msg)
            if self.failures:
                self.ended_by = "worker failure: " + "; ".join(self.failures)
                break
        end = pool.now()
        for p in self.policies:
            p.on_finish(end)
        self.rec.flush()
        out = self.rec.r_outcome
        out[out == PENDING] = DROPPED
        clock.now = end

    def timing_table(self) -> dict[str, np.ndarray]:
        """The policy's handler times (ns) by kind: the scheduler's decision time, measured."""
        if not self.timings:
            return {"kind": np.empty(0, np.int8), "ns": np.empty(0, np.int64)}
        arr = np.array(self.timings, dtype=np.int64)
        return {"kind": arr[:, 0].astype(np.int8), "ns": arr[:, 1]}
