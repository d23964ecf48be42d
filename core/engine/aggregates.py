"""A run's summary kept as running totals (``EngineConfig.record == "summary"``; :mod:`.recorder`)."""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED


class SummaryAggregates:
    """What a run's summary (:func:`shepherd.core.metrics.summary_row`) needs, kept as the rows become final
    instead of the rows (``EngineConfig.record == "summary"``, the compiled fast paths): outcome counts,
    first and last arrival, the served requests' latencies and queueing delays (the exact quantiles need
    every value: int32 where they fit), the completed batches' sizes as counts per size, the preempted
    batches and the last batch end."""

    __slots__ = ("n", "first", "last", "end", "good", "late", "dropped", "preempted_requests", "lat", "queue",
                 "sizes", "n_pre", "n_batches")

    def __init__(self, n: int) -> None:
        self.n = n
        self.first: int | None = None
        self.last: int | None = None
        self.end = 0
        self.good = self.late = self.dropped = self.preempted_requests = 0
        self.lat: list[np.ndarray] = []
        self.queue: list[np.ndarray] = []
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
        counts = np.bincount(outcome, minlength=4)
        self.good += int(counts[SERVED])
        self.late += int(counts[LATE])
        self.dropped += int(counts[DROPPED]) + int(counts[0])  # never served: dropped (Engine.run)
        self.preempted_requests += int(np.count_nonzero(preempt))
        served = finish >= 0
        for out, col in ((self.lat, finish), (self.queue, start)):
            v = col[served] - arrival[served]
            if len(v) and -(1 << 31) <= v.min() and v.max() < (1 << 31):
                v = v.astype(np.int32)
            out.append(v)
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

    def values(self, which: str) -> np.ndarray:
        """The kept latencies (``"lat"``) or queueing delays (``"queue"``) as one array (int32 where every
        part is)."""
        parts = getattr(self, which)
        if not parts:
            return np.empty(0, np.int64)
        wide = any(p.dtype != np.int32 for p in parts)
        return np.concatenate([p.astype(np.int64, copy=False) for p in parts] if wide else parts)

    def done_sizes(self) -> pl.Series:
        """The completed batches' sizes (sorted: only counts were kept)."""
        return pl.Series("size", np.repeat(np.arange(len(self.sizes), dtype=np.int32), self.sizes))
