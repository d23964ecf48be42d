"""Smooth weighted round-robin (core/policies/wrr.py): the numpy scan picks as the Python scan does,
and the picks follow the weights."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.policies import wrr

weights = st.lists(st.floats(0.01, 10.0), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(weights, st.integers(1, 300), st.booleans())
def test_numpy_scan_picks_like_the_python_scan(ws, picks, random_start):
    start = [w * ((i * 7919) % 13) / 13 for i, w in enumerate(ws)] if random_start else None
    seqs = []
    for threshold in (0, 10**9):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(wrr, "VECTOR_MIN_ENTRIES", threshold)
            rr = wrr.SmoothWeightedRoundRobin(ws, start)
            seqs.append([rr.pick() for _ in range(picks)])
    assert seqs[0] == seqs[1]


@settings(max_examples=60, deadline=None)
@given(weights, st.integers(1, 500))
def test_picks_follow_the_weights(ws, picks):
    rr = wrr.SmoothWeightedRoundRobin(ws)
    counts = [0] * len(ws)
    for _ in range(picks):
        counts[rr.pick()] += 1
    # With current weights c_i = n·w_i − picks_i·W summing to 0: a pick happens at the
    # maximum (≥ 0), so c_i > −W always (never a whole pick ahead of its share), and
    # hence c_i < (N − 1)·W (never N − 1 picks behind).
    total = sum(ws)
    for c, w in zip(counts, ws):
        ahead = c - picks * w / total
        assert ahead < 1 + 1e-6 * picks
        assert ahead > -(len(ws) - 1) - 1e-6 * picks


def test_equal_weights_alternate_in_order():
    rr = wrr.SmoothWeightedRoundRobin([1.0, 1.0, 1.0])
    assert [rr.pick() for _ in range(6)] == [0, 1, 2, 0, 1, 2]
