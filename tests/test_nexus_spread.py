"""Nexus on a fixed cluster as Symphony ran it (``spare="spread"``, Symphony §2.2, §5 Table 4),
and queues draining after the last epoch."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from shepherd.core import batch_analytics as ba
from shepherd.core.engine import simulate
from shepherd.core.errors import UserError
from shepherd.experiments.symphony import common as c

LIN = ba.Linear(2.050, 5.378)  # Fig. 1's ResNet50-like model
PROF = c.linear_profiles([("R", LIN.alpha_ms, LIN.beta_ms)])
CFG = {"epoch_s": 1.0, "peak_window_s": 1.0, "provision": "oracle"}  # as Symphony runs it


def _cap(slo_ms: float, gpus: int) -> float:
    """Eq. 1's uncoordinated throughput of ``gpus`` GPUs (Table 4's analytic Nexus)."""
    return ba.throughput_rps(LIN, ba.uncoordinated_batch(LIN, slo_ms), gpus)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), frac=st.floats(0.05, 0.6), slo=st.sampled_from([30.0, 50.0, 100.0]))
def test_spread_meets_every_deadline_at_light_load(seed, frac, slo):
    wl = c.workload(["R"], slo, duration_s=1.0)
    trace = wl.trace(frac * _cap(slo, 8), seed)
    res = simulate(trace, PROF, "nexus", {**CFG, "spare": "spread"}, gpus=8, seed=seed, max_batch=c.MAX_BATCH)
    rq = res.requests_frame()
    late = rq.filter(pl.col("finish_us").is_null() | (pl.col("finish_us") > pl.col("deadline_us")))
    assert late.height == 0


def test_idle_keeps_the_peak_plan_and_spread_uses_the_whole_cluster():
    wl = c.workload(["R"], 50.0, duration_s=1.0)
    trace = wl.trace(0.1 * _cap(50.0, 8), 3)
    used = {}
    for spare in ("idle", "spread"):
        res = simulate(trace, PROF, "nexus", {**CFG, "spare": spare}, gpus=8, seed=3, max_batch=c.MAX_BATCH)
        used[spare] = res.batches_frame()["worker"].n_unique()
    assert used["idle"] == 1  # one GPU holds the mean rate (Shepherd's Nexus, unchanged)
    assert used["spread"] == 8


def test_requests_queued_when_the_trace_ends_are_served_not_dropped():
    # every request in the last 20 ms of a single-epoch trace is still queued when the trace
    # ends; no later epoch exists to re-plan, so none is dropped for lack of demand
    wl = c.workload(["R"], 100.0, duration_s=0.95)
    trace = wl.trace(200.0, 1)
    res = simulate(trace, PROF, "nexus", {**CFG, "spare": "spread"}, gpus=2, seed=1, max_batch=c.MAX_BATCH)
    rq = res.requests_frame()
    tail = rq.filter(pl.col("arrival_us") >= int(rq["arrival_us"].max()) - 20_000)
    assert tail.height > 0 and tail["finish_us"].null_count() == 0


def test_bad_spare_is_a_user_error():
    trace = c.workload(["R"], 50.0, duration_s=0.2).trace(100.0, 0)
    with pytest.raises(UserError, match="spare"):
        simulate(trace, PROF, "nexus", {**CFG, "spare": "bogus"}, gpus=2)
