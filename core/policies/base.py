"""The :class:`Policy` interface: react to events by calling engine actions.

Events: ``on_arrivals`` (a run of arrivals that all happen before the next
queued event), ``on_completion`` (a worker finished its batch and is idle),
``on_timer`` (a wake-up the policy asked for with ``engine.set_timer``).
Actions: ``engine.start_batch``, ``engine.preempt``, ``engine.drop``,
``engine.set_timer`` (see :mod:`shepherd.core.engine.loop`).

Contract of ``on_arrivals(ts, ds, ms, ss, rs, lo, hi)``: the lists hold the
arrival time, deadline, model index, stream and global request id of a chunk
of this group's arrivals; handle them from index ``lo`` while
``ts[i] < engine.until`` and return the first index not handled. Any action
may lower ``engine.until`` (a batch that completes, a timer) — re-read it after
acting. The default implementation calls :meth:`Policy.on_arrival` per request.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shepherd.core.engine.loop import GroupContext
from shepherd.core.engine.overhead import OverheadConfig


class Policy:
    """Base class of every online policy (one instance per serving group)."""

    #: default scheduler-overhead model of this policy (see core.engine.overhead)
    default_overhead: ClassVar[OverheadConfig] = OverheadConfig()

    def __init__(self, ctx: GroupContext, config: Any) -> None:
        self.ctx = ctx
        self.engine = ctx.engine
        self.config = config

    # events ---------------------------------------------------------------
    def on_start(self, now: int) -> None:
        """Called once before the first event (set initial timers here)."""

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        eng = self.engine
        for i in range(lo, hi):
            t = ts[i]
            if t >= eng.until:
                return i
            self.on_arrival(t, rs[i], ms[i], ds[i], ss[i])
        return hi

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        raise NotImplementedError

    def on_completion(self, now: int, worker: int) -> None:
        """``worker`` finished its batch and is idle."""

    def on_timer(self, now: int, payload: Any) -> None:
        """A timer set with ``engine.set_timer`` fired."""

    def on_finish(self, now: int) -> None:
        """No events left; requests still queued end as dropped (the engine marks them)."""
