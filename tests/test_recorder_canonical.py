"""Canonical batch ids (issue 30 item 1): the sort of the misplaced rows alone equals a stable sort of all."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from shepherd.core.engine.numbering import misplaced as _misplaced, renumbered as _renumbered


@st.composite
def nearly_sorted(draw):
    """Sorted keys with some rows displaced (and ties), as a one-group run's batch log."""
    n = draw(st.integers(1, 300))
    key = np.sort(np.array(draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), np.int64))
    for _ in range(draw(st.integers(0, 12))):
        i, j = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        key[[i, j]] = key[[j, i]]
    return key


@settings(max_examples=300, deadline=None)
@given(nearly_sorted())
def test_misplaced_rows_give_the_stable_sort(key):
    order = np.argsort(key, kind="stable")
    moved, src = _misplaced(key)
    got = np.arange(len(key))
    got[moved] = src
    assert np.array_equal(got, order)
    assert np.all(np.diff(moved) > 0)


@settings(max_examples=200, deadline=None)
@given(nearly_sorted(), st.integers(0, 2**32 - 1))
def test_renumbered_ids_follow_their_batch(key, seed):
    n = len(key)
    moved, src = _misplaced(key)
    rng = np.random.default_rng(seed)
    ids = rng.integers(-1, n, 500).astype(np.int64)
    remap = np.append(np.arange(n, dtype=np.int64), -1)
    remap[src] = moved
    want = remap[ids]
    assert np.array_equal(_renumbered(ids.copy(), src, moved, n), want)
    assert np.all(want[ids == -1] == -1)
