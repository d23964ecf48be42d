"""The event queue: a binary heap of ``(time, priority, seq, target, arg)`` tuples.

STYLE.md pattern 4: explicit priorities and a sequence counter make tie order
deterministic. At equal time the order is

1. ``COMPLETION`` — a batch finishes (or reaches a preemption exit point), so a
   worker freed at ``t`` is visible to everything else that happens at ``t``;
2. ``TIMER`` — a policy's ``sched_at``-style wake-up (Symphony §4.3, epochs);
3. ``ARRIVAL`` — requests arriving at ``t``, in trace order.

Events of equal time and priority pop in insertion (``seq``) order. ``target``
is a worker id (completions) or a serving-group id (timers, arrivals); ``arg``
is the batch id (completions) or the policy's payload (timers).
"""

from __future__ import annotations

import heapq
from typing import Any

COMPLETION = 0
TIMER = 1
ARRIVAL = 2

NEVER = 1 << 62  #: a time later than any simulated time (µs)

Entry = tuple[int, int, int, int, Any]


class EventQueue:
    """Min-heap of events with deterministic tie order (see module docstring)."""

    __slots__ = ("heap", "seq")

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.seq = 0

    def push(self, time: int, priority: int, target: int, arg: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, priority, self.seq, target, arg))

    def pop(self) -> Entry:
        return heapq.heappop(self.heap)

    def __len__(self) -> int:
        return len(self.heap)

    def arrival_horizon(self) -> int:
        """Arrivals strictly before this time may be handled before the next queued event.

        An arrival at ``t`` goes after a completion or timer at ``t`` but before
        (or together with) another group's arrivals at ``t``.
        """
        if not self.heap:
            return NEVER
        time, priority = self.heap[0][0], self.heap[0][1]
        return time + 1 if priority >= ARRIVAL else time
