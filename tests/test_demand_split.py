"""The router's split of heavy streams into sub-streams (solvers/demand.split_streams)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.errors import UserError
from shepherd.solvers.demand import split_cap, split_streams


@settings(max_examples=60, deadline=None, derandomize=True)
@given(counts=st.lists(st.integers(1, 80), min_size=1, max_size=12), cap=st.floats(0.5, 30.0),
       seed=st.integers(0, 2**16))
def test_split_keeps_every_request_and_caps_each_sub_stream(counts, cap, seed):
    rng = np.random.default_rng(seed)
    stream = np.repeat(np.arange(len(counts)) * 3, counts)  # sparse ids: fresh ids must not collide
    rng.shuffle(stream)
    arrival = np.sort(rng.integers(0, 10**6, stream.size))
    trace = pl.DataFrame({"arrival_us": arrival, "deadline_us": arrival + 250_000, "stream": stream.astype(np.int32),
                          "model": ["m"] * stream.size})
    demand = {int(s): float(k) for s, k in zip(np.arange(len(counts)) * 3, counts)}  # n_i ∝ requests
    out = split_streams(trace, demand, cap)
    assert out.drop("stream").equals(trace.drop("stream")) and out["stream"].dtype == trace["stream"].dtype
    origin = {}
    for old, new in zip(trace["stream"], out["stream"]):
        assert origin.setdefault(new, old) == old  # a sub-stream belongs to exactly one stream
    for (s, n), requests in zip(demand.items(), counts):
        parts = math.ceil(n / cap) if n > cap else 1
        subs = [k for k, o in origin.items() if o == s]
        assert len(subs) == min(parts, requests)  # a sub-stream with no request never shows
        assert s in subs  # sub-stream 0 keeps the id
        sizes = out.filter(pl.col("stream").is_in(subs)).group_by("stream").len()["len"]
        assert sizes.max() - sizes.min() <= 1  # round-robin: balanced sub-streams
        assert n / parts <= cap + 1e-9


def test_light_streams_are_left_alone_and_bad_caps_refused():
    trace = pl.DataFrame({"arrival_us": [0, 1, 2], "deadline_us": [9, 9, 9], "stream": [5, 5, 7], "model": ["m"] * 3})
    assert split_streams(trace, {5: 1.0, 7: 0.5}, 2.0).equals(trace)
    with pytest.raises(UserError):
        split_streams(trace, {5: 1.0}, 0.0)
    with pytest.raises(UserError):
        split_cap(10.0, 0, 12)
    assert split_cap(40.0, 400, 12) == pytest.approx(40.0 * 12 / 400 / 4)
    assert split_cap(40.0, 6, 12) == pytest.approx(40.0 / 4)  # a cluster smaller than Ḡ is one group
