"""A run's summary kept as running totals (``EngineConfig.record == "summary"``; :mod:`.recorder`)."""

from __future__ import annotations

import numpy as np

from shepherd.core.engine.outcomes import DROPPED, LATE, PENDING, SERVED
from shepherd.core.summary_stats import Tally


class SummaryAggregates:
    """What a run's summary (:func:`shepherd.core.metrics.summary_row`) needs, kept as the rows become final
    instead of the rows (``EngineConfig.record == "summary"``, the compiled fast paths): outcome counts,
    first and last arrival, the served requests' latencies and queueing delays (as counts per µs value,
    :class:`~shepherd.core.summary_stats.Tally`: the exact quantiles and mean without keeping the values),
    the completed batches' sizes as counts per size, the preempted batches and the last batch end."""

    __slots__ = ("n", "first", "last", "end", "good", "late", "dropped", "preempted_requests", "lat", "queue",
                 "sizes", "n_pre", "n_batches")

    def __init__(self, n: int) -> None:
        self.n = n
        self.first: int | None = None
        self.last: int | None = None
        self.end = 0
        self.good = self.late = self.dropped = self.preempted_requests = 0
        self.lat = Tally()
        self.queue = Tally()
        self.sizes = np.zeros(0, np.int64)
        self.n_pre = self.n_batches = 0

    def requests(self, arrival: np.ndarray, start: np.ndarray, finish: np.ndarray, outcome: np.ndarray,
                 preempt: np.ndarray) -> None:
        """Add final requests (in request order)."""
        if not len(arrival):
            return
        lo, hi = int(arrival.min()), int(arrival.max())
        self.first = lo if self.first is None else min(self.first, lo)
        self.last = hi if self.last is None else max(self.last, hi)
        # one comparison per code: cheaper than a bincount of a million codes (summary_stats.request_stats)
        self.good += int(np.count_nonzero(outcome == SERVED))
        self.late += int(np.count_nonzero(outcome == LATE))
        # never served: dropped (Engine.run)
        self.dropped += int(np.count_nonzero(outcome == DROPPED)) + int(np.count_nonzero(outcome == PENDING))
        self.preempted_requests += int(np.count_nonzero(preempt))
        served = finish >= 0
        every = np.count_nonzero(served) == len(served)  # a served workload's chunks: no gathers
        arrived = arrival if every else arrival[served]
        self.lat.add((finish if every else finish[served]) - arrived)
        self.queue.add((start if every else start[served]) - arrived)
        if int(self.end) < hi:
            self.end = hi

    def batches(self, size: np.ndarray, end: np.ndarray, preempted: np.ndarray) -> None:
        """Add final batches."""
        if not len(size):
            return
        done = size[preempted == 0]
        counts = np.bincount(done, minlength=len(self.sizes))
        counts[:len(self.sizes)] += self.sizes
        self.sizes = counts
        self.n_pre += len(size) - len(done)
        self.n_batches += len(size)
        self.end = max(self.end, int(end.max()))

    def counts(self) -> dict[str, int]:
        return {"good": self.good, "late": self.late, "dropped": self.dropped,
                "preempted_requests": self.preempted_requests}
