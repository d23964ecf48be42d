"""The clock: a binary heap of ``(time, priority, seq, target, arg)`` events and cancellable timers.

STYLE.md pattern 4: explicit priorities and a sequence counter make tie order
deterministic. At equal time the order is

1. ``COMPLETION`` — a batch finishes (or reaches a preemption exit point), so a
   worker freed at ``t`` is visible to everything else that happens at ``t``;
2. ``TIMER`` — a policy's ``sched_at``-style wake-up (Symphony §4.3 and
   Appendix C, PPipe's wait-till-last-moment, epochs);
3. ``ARRIVAL`` — requests arriving at ``t``, in trace order.

Events of equal time and priority pop in insertion (``seq``) order. The
``target`` of an event names what it is about (documented once, here): a
completion's target is a worker id ≥ 0 (a started batch or allocation;
``arg`` its batch id) or :data:`BOOKED` for a batch booked on a reserved path
(:mod:`.paths`; ``arg`` = ``(worker, start, request ids or None, batch id)``);
a timer's target is its serving group and ``arg`` a :class:`Timer`; an
arrival's target is its serving group.

*Timers* (:meth:`Clock.set_timer`) return a :class:`Timer` handle;
:meth:`Clock.cancel` marks it cancelled. A cancelled timer never fires and
never cuts a run of arrivals short: it is skipped where it is popped and
discarded from the top of the heap before :meth:`Clock.arrival_horizon` reads
the next event's time (lazy deletion).

*Quiet* events live in a second heap, :attr:`Clock.quiet`, with the same
entries and the same ``seq`` counter: the engine pops them in the same total
order as the others, but no policy handler sees them (the completion of a
booked batch without ``notify``: bookkeeping only), so
:meth:`Clock.arrival_horizon` ignores them and a run of arrivals is not cut at
each of them. Whether arrivals are handed to a policy before or after a quiet
event cannot change what the policy decides; a run still stops
``EngineConfig.quiet_lag_us`` after the earliest pending quiet event, so that
the quiet heap holds little more than the batches in flight.

``until`` is the end of the current run of arrivals: the policy handles
arrivals strictly before it. Queuing an event earlier lowers it
(:meth:`Clock.push`, :meth:`Clock.set_timer`; a quiet event lowers it to its
time plus the lag, :mod:`.paths`); the loop sets it afresh before each hand-over.
"""

from __future__ import annotations

import heapq
from typing import Any

COMPLETION = 0
TIMER = 1
ARRIVAL = 2

NEVER = 1 << 62  #: a time later than any simulated time (µs)
BOOKED = -1  #: the target of a booked batch's completion (:mod:`.paths`)

Entry = tuple[int, int, int, int, Any]


class Timer:
    """A handle of a policy timer (:meth:`Clock.set_timer`); ``payload`` is handed to ``on_timer``."""

    __slots__ = ("at", "payload", "cancelled")

    def __init__(self, at: int, payload: Any) -> None:
        self.at = at
        self.payload = payload
        self.cancelled = False

    def __repr__(self) -> str:
        state = " cancelled" if self.cancelled else ""
        return f"Timer(at={self.at}, payload={self.payload!r}{state})"


class Clock:
    """Min-heap of events with deterministic tie order (see module docstring)."""

    __slots__ = ("heap", "quiet", "seq", "quiet_lag", "until", "now")

    def __init__(self, quiet_lag_us: int) -> None:
        self.heap: list[Entry] = []
        self.quiet: list[Entry] = []  # events no policy sees (module docstring)
        self.seq = 0
        self.quiet_lag = quiet_lag_us
        self.until = NEVER  #: end of the current run of arrivals (exclusive)
        self.now = 0  #: time of the event being handled

    def push(self, time: int, priority: int, target: int, arg: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, priority, self.seq, target, arg))
        if time < self.until:
            self.until = time

    def set_timer(self, group: int, at: int, payload: Any = None) -> Timer:
        """Wake ``group``'s policy at ``at`` with ``payload``; returns a handle for :meth:`cancel`."""
        timer = Timer(at, payload)
        self.seq += 1
        heapq.heappush(self.heap, (at, TIMER, self.seq, group, timer))
        if at < self.until:
            self.until = at
        return timer

    def cancel(self, timer: Timer) -> None:
        """The timer will not fire. If it was what ended the current run of arrivals, the run
        goes on to the next live event."""
        if timer.cancelled:
            return
        timer.cancelled = True
        if timer.at == self.until:
            horizon = self.arrival_horizon()
            if horizon > self.until:
                self.until = horizon

    def pop(self) -> Entry:
        return heapq.heappop(self.heap)

    def __len__(self) -> int:
        """Events :meth:`pop` can return (the quiet heap is the engine's to drain)."""
        return len(self.heap)

    def arrival_horizon(self) -> int:
        """Arrivals strictly before this time may be handled before the next queued (non-quiet) event.

        An arrival at ``t`` goes after a completion or timer at ``t`` but before
        (or together with) another group's arrivals at ``t``. Cancelled timers at
        the top of the heap are discarded first.
        """
        heap = self.heap
        while heap and heap[0][1] == TIMER and heap[0][4].cancelled:
            heapq.heappop(heap)
        if heap:
            time, priority = heap[0][0], heap[0][1]
            horizon = time + 1 if priority >= ARRIVAL else time
        else:
            horizon = NEVER
        if self.quiet and self.quiet[0][0] + self.quiet_lag < horizon:
            return self.quiet[0][0] + self.quiet_lag
        return horizon
