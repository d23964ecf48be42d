"""A run's summary statistics from its arrays, compiled (:func:`shepherd.core.metrics.summarize`, issue 18):
one pass over the request columns, one over the batch columns, and exact order statistics without a sort.

The summary's quantiles are polars' ``interpolation="nearest"``: the value of rank
``floor((n − 1)·q + 0.5)`` (0-based; the half rounds up, as Rust's ``f64::round`` does for a non-negative
number) in sorted order. :func:`nearest` finds that rank's value by a radix select — a histogram of the
values' top 16 bits (relative to the minimum), then of the next bits within the one bucket that holds the
rank, and so on — so every pass is a linear read and nothing is sorted or copied; the value found is the
rank's value itself, so the result is identical to a sort's.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def rank(n: int, q: float) -> int:
    """The 0-based rank polars' ``quantile(q, interpolation="nearest")`` reads among ``n`` values."""
    return int(np.floor((n - 1) * q + 0.5))


@njit(cache=True)
def request_stats(arrival, start, finish, outcome, preempt, lat, queue):
    """Per outcome code the requests (``counts``, 4 codes), the requests preempted at least once, and the
    served ones' (``finish ≥ 0``) latency ``finish − arrival`` and queueing delay ``start − arrival`` written
    to ``lat[:k]``, ``queue[:k]`` in request order; returns (counts, preempted, k, first arrival, last
    arrival, whether every latency and delay fits ``lat``'s dtype — else the caller passes wider arrays)."""
    n = len(arrival)
    counts = np.zeros(4, np.int64)
    pre = 0
    k = 0
    lo = arrival[0] if n else 0
    hi = lo
    vmin, vmax = np.iinfo(lat.dtype).min, np.iinfo(lat.dtype).max
    fits = True
    for i in range(n):
        counts[outcome[i]] += 1
        if preempt[i] != 0:
            pre += 1
        a = arrival[i]
        if a < lo:
            lo = a
        if a > hi:
            hi = a
        f = finish[i]
        if f >= 0:
            v = f - a
            w = start[i] - a
            if v < vmin or v > vmax or w < vmin or w > vmax:
                fits = False
            lat[k] = v
            queue[k] = w
            k += 1
    return counts, pre, k, lo, hi, fits


@njit(cache=True)
def batch_stats(size, end, pre):
    """The completed (not preempted) batches per size, the preempted batches and the latest end (−1 when
    there is no batch)."""
    top = 0
    for i in range(len(size)):
        if size[i] > top:
            top = size[i]
    counts = np.zeros(top + 1, np.int64)
    n_pre = 0
    last = -1
    for i in range(len(size)):
        if pre[i] != 0:
            n_pre += 1
        else:
            counts[size[i]] += 1
        if end[i] > last:
            last = end[i]
    return counts, n_pre, last


@njit(cache=True)
def _select(values, k, lo, bits):
    """The ``k``-th smallest (0-based) of ``values``, all in ``[lo, lo + 2**bits)``: a radix select."""
    base = 0  # the window [lo + base, lo + base + 2**bits) holds the rank
    while True:
        shift = bits - 16 if bits > 16 else 0
        hist = np.zeros(1 << (bits - shift), np.int64)
        width = np.int64(1) << bits
        for v in values:
            d = v - lo - base
            if d >= 0 and d < width:
                hist[d >> shift] += 1
        b = 0
        while hist[b] <= k:
            k -= hist[b]
            b += 1
        base += np.int64(b) << shift
        if shift == 0:
            return lo + base
        bits = shift


@njit(cache=True)
def _nearest(values, ks):
    lo = values[0]
    hi = lo
    for v in values:
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    span = hi - lo
    bits = 0
    while bits < 63 and (np.int64(1) << bits) <= span:
        bits += 1
    out = np.empty(len(ks), np.int64)
    if bits > 60:  # a span this wide (never a latency): sort
        srt = np.sort(values)
        for j in range(len(ks)):
            out[j] = srt[ks[j]]
        return out
    for j in range(len(ks)):
        out[j] = _select(values, ks[j], lo, bits)
    return out


def nearest(values: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """Polars' ``quantile(q, interpolation="nearest")`` of integer ``values`` (int32 or int64) for each ``q`` (as floats; None
    when there are none)."""
    if not len(values):
        return [None] * len(qs)
    ks = np.array([rank(len(values), q) for q in qs], np.int64)
    return [float(v) for v in _nearest(values, ks)]


def nearest_counts(counts: np.ndarray, qs: tuple[float, ...]) -> list[float | None]:
    """The same quantiles of the values ``0, 1, …`` repeated ``counts[v]`` times (a histogram: exact)."""
    n = int(counts.sum())
    if not n:
        return [None] * len(qs)
    cum = np.cumsum(counts)
    return [float(np.searchsorted(cum, rank(n, q), side="right")) for q in qs]
