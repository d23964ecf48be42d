"""A run's summary statistics from its arrays (:func:`shepherd.core.metrics.summarize`, issue 18), in numpy:
a few vectorised passes over the request columns and the batch columns, and exact order statistics by a
partial partition, not a sort.

The summary's quantiles are polars' ``interpolation="nearest"``: the value of rank
``floor((n − 1)·q + 0.5)`` (0-based; the half rounds up, as Rust's ``f64::round`` does for a non-negative
number) in sorted order. :func:`nearest` reads those ranks' values from a histogram of the values (a
latency's span is small) or after ``np.partition`` (introselect: linear time), so the result is identical
to a sort's. Plain numpy, so the reference engine's summaries need
no compiler (``tests/test_summary_stats.py``: equal to polars on any values).
"""

from __future__ import annotations

import numpy as np


#: the widest span of values :func:`nearest` counts in a histogram (8 bytes a value of the span)
HISTOGRAM_SPAN = 1 << 24


def rank(n: int, q: float) -> int:
    """The 0-based rank polars' ``quantile(q, interpolation="nearest")`` reads among ``n`` values."""
    return int(np.floor((n - 1) * q + 0.5))


def request_stats(arrival, start, finish, outcome, preempt, lat, queue) -> tuple:
    """Per outcome code the requests (``counts``, 4 codes), the requests preempted at least once, and the
    served ones' (``finish ≥ 0``) latency ``finish − arrival`` and queueing delay ``start − arrival`` written
    to ``lat[:k]``, ``queue[:k]`` in request order; returns (counts, preempted, k, first arrival, last
    arrival, whether every latency and delay fits ``lat``'s dtype — else nothing is written and the caller
    passes wider arrays)."""
    arrival = np.asarray(arrival, np.int64)
    outcome = np.asarray(outcome)
    # one comparison per code: ten times cheaper than a bincount of a million codes
    counts = np.array([np.count_nonzero(outcome == code) for code in range(4)], np.int64)
    pre = int(np.count_nonzero(preempt))
    served = np.asarray(finish) >= 0
    k = int(np.count_nonzero(served))
    lo, hi = (int(arrival.min()), int(arrival.max())) if len(arrival) else (0, 0)
    v, w = np.subtract(finish, arrival), np.subtract(start, arrival)
    if k < len(arrival):  # a mask keeps the served ones (cheaper than gathering them by index)
        v, w = v[served], w[served]
    info = np.iinfo(lat.dtype)
    # a served request starts before it finishes: its delay is at most its latency, so the delays' minimum
    # and the latencies' maximum bound both
    fits = not k or bool(int(w.min()) >= info.min and int(v.max()) <= info.max)
    if fits:
        lat[:k], queue[:k] = v, w
    return counts, pre, k, lo, hi, fits


def batch_stats(size, end, pre) -> tuple:
    """The completed (not preempted) batches per size, the preempted batches and the latest end (−1 when
    there is no batch)."""
    size, end, pre = np.asarray(size, np.int64), np.asarray(end, np.int64), np.asarray(pre) != 0
    if not len(size):
        return np.zeros(1, np.int64), 0, -1
    n_pre = int(np.count_nonzero(pre))
    counts = np.bincount(size[~pre] if n_pre else size, minlength=int(size.max()) + 1).astype(np.int64)
    return counts, n_pre, int(end.max())


def nearest(values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Polars' ``quantile(q, interpolation="nearest")`` of integer ``values`` for each ``q`` (as floats; None
    when there are none): from a histogram where the values span at most :data:`HISTOGRAM_SPAN` (latencies
    in µs: one counting pass), else by a partial partition."""
    if not len(values):
        return [None] * len(qs)
    lo, hi = int(values.min()), int(values.max())
    if 0 <= lo and hi <= HISTOGRAM_SPAN:  # latencies, delays: count them as they are (no shifted copy)
        return nearest_counts(np.bincount(values), qs)
    if hi - lo <= HISTOGRAM_SPAN:
        return [v + lo for v in nearest_counts(np.bincount(values - values.dtype.type(lo)), qs)]
    ks = [rank(len(values), q) for q in qs]
    part = np.partition(values, sorted(set(ks)))
    return [float(part[k]) for k in ks]


def nearest_counts(counts: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """The same quantiles of the values ``0, 1, …`` repeated ``counts[v]`` times (a histogram: exact)."""
    n = int(counts.sum())
    if not n:
        return [None] * len(qs)
    cum = np.cumsum(counts)
    return [float(np.searchsorted(cum, rank(n, q), side="right")) for q in qs]


class Tally:
    """Integer values kept as they come for :func:`nearest`'s quantiles and their mean (issue 43: a summary
    without full-size temporaries): counts per value while every value lies in ``0 … HISTOGRAM_SPAN`` (a
    latency or a queueing delay in µs: one ``bincount`` per part, no value kept), with their exact sum; the
    values themselves once one falls outside. The quantiles are :func:`nearest`'s of all the values, the mean
    polars' ``Series.mean()`` of them (``tests/test_summary_stats.py``)."""

    __slots__ = ("counts", "n", "total", "parts")

    def __init__(self) -> None:
        self.counts = np.zeros(0, np.int64)
        self.n = 0
        self.total = 0
        self.parts: list[np.ndarray] | None = None  # the values, once one is outside the histogram

    def add(self, values: np.ndarray) -> None:
        if not len(values):
            return
        self.n += len(values)
        self.total += int(values.sum(dtype=np.int64))
        if self.parts is None and 0 <= int(values.min()) and int(values.max()) <= HISTOGRAM_SPAN:
            got = np.bincount(values)
            if len(got) > len(self.counts):
                got[:len(self.counts)] += self.counts
                self.counts = got
            else:
                self.counts[:len(got)] += got
            return
        if self.parts is None:  # the values counted so far, as values (their order changes no statistic)
            self.parts = [np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)]
            self.counts = np.zeros(0, np.int64)
        self.parts.append(np.asarray(values, np.int64))

    def nearest(self, qs: tuple[float, ...]) -> list[float | None]:
        """:func:`nearest` of the values."""
        if self.parts is None:
            return nearest_counts(self.counts, qs)
        return nearest(np.concatenate(self.parts), qs)

    def mean(self) -> float | None:
        """The values' mean as polars' ``Series.mean()`` gives it (None when there are none): the exact sum over
        the count while it is exact in a float, else polars' own."""
        if not self.n:
            return None
        if self.parts is None or abs(self.total) < (1 << 53):
            return self.total / self.n
        import polars as pl

        return pl.Series("v", np.concatenate(self.parts)).mean()
