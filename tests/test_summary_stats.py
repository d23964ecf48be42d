"""The summary's statistics (:mod:`shepherd.core.summary_stats`) equal polars' on any values."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.summary_stats import batch_stats, nearest, nearest_counts, request_stats

QS = st.lists(st.sampled_from([0.0, 0.5, 0.99, 1.0]) | st.floats(0.0, 1.0), min_size=1, max_size=3)


def _polars(values: np.ndarray, q: float):
    return pl.Series("v", values).to_frame().select(pl.col("v").quantile(q, interpolation="nearest")).item()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 40), 1 << 40) | st.integers(0, 300), max_size=300), QS,
       st.sampled_from([np.int64, np.int32]))
def test_nearest_is_polars_nearest(values, qs, dtype):
    v = np.array(values, np.int64)
    if dtype is np.int32:
        v = (v % (1 << 30)).astype(np.int32)
    got = nearest(v, tuple(qs))
    assert got == [_polars(v, q) for q in qs]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 140), max_size=400), QS)
def test_sizes_from_counts_are_polars(sizes, qs):
    v = np.array(sizes, np.int64)
    counts = np.bincount(v) if len(v) else np.zeros(0, np.int64)
    assert nearest_counts(counts, tuple(qs)) == [_polars(v, q) for q in qs]
    if len(v):  # the summary's batch mean: the exact integer sum over the count
        assert int(np.dot(np.arange(len(counts)), counts)) / len(v) == pl.Series(v.astype(np.int32)).mean()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(-1, 5000), st.integers(0, 3), st.integers(0, 2)),
                max_size=200))
def test_request_and_batch_stats(rows):
    n = len(rows)
    a = np.array([r[0] for r in rows], np.int64)
    fin = np.array([r[0] + r[1] if r[1] >= 0 else -1 for r in rows], np.int64)
    start = np.where(fin >= 0, a + np.array([max(0, r[1] // 2) for r in rows], np.int64), -1)
    out = np.array([r[2] for r in rows], np.int8)
    pre = np.array([r[3] for r in rows], np.int16)
    lat, queue = np.empty(n, np.int64), np.empty(n, np.int64)
    counts, n_pre, k, lo, hi, fits = request_stats(a, start, fin, out, pre, lat, queue)
    assert fits
    narrow = np.empty(n, np.int16), np.empty(n, np.int16)  # a latency over 32767 µs does not fit int16
    assert request_stats(a, start, fin, out, pre, *narrow)[5] == bool((fin - a)[fin >= 0].max(initial=0) < 1 << 15)
    served = fin >= 0
    assert counts.tolist() == np.bincount(out, minlength=4).tolist()
    assert n_pre == np.count_nonzero(pre) and k == served.sum()
    assert lat[:k].tolist() == (fin - a)[served].tolist() and queue[:k].tolist() == (start - a)[served].tolist()
    if n:
        assert (lo, hi) == (a.min(), a.max())
    size = (a % 7 + 1).astype(np.int64)
    sizes, b_pre, last = batch_stats(size, fin, pre.astype(np.int64))
    done = size[pre == 0]
    assert sizes.tolist()[1:] == np.bincount(done, minlength=len(sizes)).tolist()[1:len(sizes)]
    assert sizes.sum() == len(done) and b_pre == np.count_nonzero(pre)
    assert last == (fin.max() if n else -1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 400) | st.integers(0, 1 << 20) | st.integers(-(1 << 40), 1 << 45),
                         max_size=60), max_size=6), QS)
def test_a_tally_of_parts_is_polars_on_all_the_values(parts, qs):
    """A summary-only run keeps its latencies and delays as a Tally, part after part (issue 43: no full-size
    temporaries): the same quantiles and mean as polars of all the values, also once a part holds a value
    outside the histogram's span (then the values are kept)."""
    from shepherd.core.summary_stats import Tally

    tally = Tally()
    for part in parts:
        tally.add(np.array(part, np.int64))
    v = np.array([x for part in parts for x in part], np.int64)
    assert tally.n == len(v)
    assert tally.nearest(tuple(qs)) == ([_polars(v, q) for q in qs] if len(v) else [None] * len(qs))
    assert tally.mean() == (pl.Series("v", v).mean() if len(v) else None)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40))
def test_the_batch_size_distribution_of_counts_is_that_of_the_batches(counts):
    """A summary-only run prints the batch sizes from its counts per size (issue 43): the frame the batches
    themselves give, types included."""
    from shepherd.core.metrics import batch_size_distribution, batch_size_distribution_of_counts

    c = np.array(counts, np.int64)
    sizes = pl.Series("size", np.repeat(np.arange(len(c), dtype=np.int32), c))
    want = batch_size_distribution(pl.DataFrame({"size": sizes, "preempted": np.zeros(len(sizes), bool)}))
    assert batch_size_distribution_of_counts(c).equals(want)
