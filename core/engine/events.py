"""The event queue: a binary heap of ``(time, priority, seq, target, arg)`` tuples.

STYLE.md pattern 4: explicit priorities and a sequence counter make tie order
deterministic. At equal time the order is

1. ``COMPLETION`` — a batch finishes (or reaches a preemption exit point), so a
   worker freed at ``t`` is visible to everything else that happens at ``t``;
2. ``TIMER`` — a policy's ``sched_at``-style wake-up (Symphony §4.3, epochs);
3. ``ARRIVAL`` — requests arriving at ``t``, in trace order.

Events of equal time and priority pop in insertion (``seq``) order. ``target``
is a worker id (completions of started batches; ``~batch id`` for booked
batches, :mod:`.reserved`) or a serving-group id (timers, arrivals); ``arg``
is the batch id (completions) or the policy's payload (timers).

*Quiet* events live in a second heap, :attr:`EventQueue.quiet`, with the same
entries and the same ``seq`` counter: the engine pops them in the same total
order as the others, but no policy handler sees them (the completion of a
booked batch without ``notify``: bookkeeping only), so
:meth:`EventQueue.arrival_horizon` ignores them and a run of arrivals is not
cut at each of them. Whether arrivals are handed to a policy before or after
a quiet event cannot change what the policy decides; a run still stops
:data:`QUIET_LAG_US` after the earliest pending quiet event, so that the quiet
heap holds little more than the batches in flight (measured on PPipe G1: a lag of
1 s makes the run ~40 % slower than 20 ms — a larger heap is slower to pop and keeps
more objects alive for the garbage collector; 20 ms already cuts the runs of
arrivals from one per completion to one per 20 ms).
"""

from __future__ import annotations

import heapq
from typing import Any

COMPLETION = 0
TIMER = 1
ARRIVAL = 2

NEVER = 1 << 62  #: a time later than any simulated time (µs)
#: how far (µs) a run of arrivals may go past the earliest pending quiet event; any value gives the
#: same outcomes (stopping a run early is always safe) — it only bounds the quiet heap's size
QUIET_LAG_US = 20_000

Entry = tuple[int, int, int, int, Any]


class EventQueue:
    """Min-heap of events with deterministic tie order (see module docstring)."""

    __slots__ = ("heap", "quiet", "seq", "quiet_lag")

    def __init__(self) -> None:
        self.heap: list[Entry] = []
        self.quiet: list[Entry] = []  # events no policy sees (module docstring)
        self.seq = 0
        self.quiet_lag = QUIET_LAG_US  # read when the queue is made

    def push(self, time: int, priority: int, target: int, arg: Any = None) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (time, priority, self.seq, target, arg))

    def pop(self) -> Entry:
        return heapq.heappop(self.heap)

    def __len__(self) -> int:
        """Events :meth:`pop` can return (the quiet heap is the engine's to drain)."""
        return len(self.heap)

    def arrival_horizon(self) -> int:
        """Arrivals strictly before this time may be handled before the next queued (non-quiet) event.

        An arrival at ``t`` goes after a completion or timer at ``t`` but before
        (or together with) another group's arrivals at ``t``.
        """
        if self.heap:
            time, priority = self.heap[0][0], self.heap[0][1]
            horizon = time + 1 if priority >= ARRIVAL else time
        else:
            horizon = NEVER
        if self.quiet and self.quiet[0][0] + self.quiet_lag < horizon:
            return self.quiet[0][0] + self.quiet_lag
        return horizon
