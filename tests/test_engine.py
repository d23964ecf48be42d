"""Engine mechanics: event tie order, actions, overhead model, clusters and plans."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.engine import (
    ARRIVAL, COMPLETION, TIMER, Clock, EngineConfig, OverheadConfig, cluster_from_plan, simulate,
)
from shepherd.core.errors import UserError
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")


def lat_us(model: str, b: int) -> int:
    row = PROF.filter((pl.col("model") == model) & (pl.col("batch") == b))
    return int(round(row["latency_ms"][0] * 1000))


def test_event_queue_tie_order_is_completion_timer_arrival_then_fifo():
    q = Clock(0)
    q.push(10, ARRIVAL, 0, "a1")
    q.push(10, TIMER, 0, "t1")
    q.push(5, ARRIVAL, 0, "early")
    q.push(10, COMPLETION, 3, "c1")
    q.push(10, ARRIVAL, 1, "a2")
    q.push(10, COMPLETION, 1, "c2")
    order = [q.pop()[4] for _ in range(len(q))]
    assert order == ["early", "c1", "c2", "t1", "a1", "a2"]


def test_arrival_horizon_lets_arrivals_pass_other_arrivals_but_not_completions():
    q = Clock(0)
    assert q.arrival_horizon() > 10**15
    q.push(100, ARRIVAL, 1)
    assert q.arrival_horizon() == 101  # an arrival at 100 may go before another group's arrival at 100
    q.push(100, COMPLETION, 0)
    assert q.arrival_horizon() == 100  # but not before a completion at 100


def test_a_cancelled_timer_is_skipped_by_the_horizon_and_lifts_the_run_end():
    q = Clock(0)
    q.push(100, ARRIVAL, 0)
    early = q.set_timer(0, 40, "early")
    late = q.set_timer(0, 70, "late")
    assert q.until == 40 and q.arrival_horizon() == 40
    q.cancel(early)
    assert q.until == 70 and q.arrival_horizon() == 70  # the run now ends at the next live event
    q.cancel(late)
    assert q.arrival_horizon() == 101
    assert [e[4] for e in (q.pop(),)] == [None] and len(q) == 0  # cancelled timers were discarded


def test_arrival_at_completion_time_sees_the_freed_worker():
    """A request arriving exactly when the only worker finishes starts at once (completion first)."""
    l1 = lat_us("ResNet50", 1)
    trace = assemble([np.array([0, l1], dtype=np.int64)], ["ResNet50"], [10**6])
    res = simulate(trace, PROF, "clockwork", gpus=1, overhead=OverheadConfig(mode="none"))
    b = res.batches_frame()
    assert b["start_us"].to_list() == [0, l1]
    assert b["size"].to_list() == [1, 1]


def test_overhead_model_delays_dispatch_and_queues_decisions():
    """Decisions cost base + per_worker·G µs and queue behind each other on one scheduler."""
    trace = assemble([np.zeros(1, np.int64), np.zeros(1, np.int64)], ["ResNet18", "ResNet50"], [10**6, 10**6])
    ovh = OverheadConfig(mode="model", base_us=100.0, per_worker_us=50.0)  # 100 + 50·2 = 200 µs
    res = simulate(trace, PROF, "flex", gpus=2, overhead=ovh)
    starts = sorted(res.batches_frame()["start_us"].to_list())
    assert starts == [200, 400]


def test_emulation_overhead_runs_and_charges_nonnegative_time():
    trace = assemble([np.arange(0, 50_000, 1000, dtype=np.int64)], ["ResNet18"], [100_000])
    res = simulate(trace, PROF, "flex", gpus=1, overhead=OverheadConfig(mode="emulation"))
    assert res.good > 0
    assert res.engine.sched[0].busy_ns > 0


def test_unknown_overhead_mode_is_a_user_error():
    trace = assemble([np.zeros(1, np.int64)], ["ResNet18"], [10**6])
    with pytest.raises(UserError, match="overhead mode"):
        simulate(trace, PROF, "flex", gpus=1, overhead=OverheadConfig(mode="fast"))


def two_group_plan(streams_in_plan=(0, 1)) -> pl.DataFrame:
    rows = [(0, "worker", "gpu-a", "V100"), (1, "worker", "gpu-b", "V100"), (1, "worker", "gpu-c", "V100")]
    rows += [(i % 2, "stream", str(s), None) for i, s in enumerate(streams_in_plan)]
    return pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                      "hardware": pl.String}, orient="row")


def test_plan_groups_route_streams_to_their_own_workers():
    a = np.arange(0, 200_000, 2_000, dtype=np.int64)
    trace = assemble([a, a], ["ResNet18", "ResNet50"], [100_000, 100_000])
    res = simulate(trace, PROF, "flex", plan=two_group_plan())
    req = res.requests_frame().filter(pl.col("worker").is_not_null())
    used = {s: set(w) for s, w in req.group_by("stream").agg(pl.col("worker").unique()).iter_rows()}
    assert used[0] == {0}
    assert used[1] <= {1, 2} and used[1]
    assert res.workers_frame()["group"].to_list() == [0, 1, 1]
    assert res.workers_frame()["name"].to_list() == ["gpu-a", "gpu-b", "gpu-c"]


def test_plan_missing_a_stream_is_a_user_error():
    a = np.arange(0, 10_000, 1_000, dtype=np.int64)
    trace = assemble([a, a, a], ["ResNet18", "ResNet50", "ResNet18"], [100_000] * 3)
    with pytest.raises(UserError, match="stream 2"):
        simulate(trace, PROF, "flex", plan=two_group_plan((0, 1)))


def test_plan_group_without_workers_is_a_user_error():
    plan = pl.DataFrame({"group": [0, 1], "role": ["worker", "stream"], "name": ["w", "0"]},
                        schema={"group": pl.Int32, "role": pl.String, "name": pl.String})
    with pytest.raises(UserError, match="group 1 has no workers"):
        cluster_from_plan(plan, "V100")


def test_zero_gpus_is_a_user_error():
    trace = assemble([np.zeros(1, np.int64)], ["ResNet18"], [10**6])
    with pytest.raises(UserError, match="--gpus"):
        simulate(trace, PROF, "flex", gpus=0)


def test_load_time_compresses_arrivals_and_keeps_slo():
    a = np.array([0, 1000, 3000], dtype=np.int64)
    trace = assemble([a], ["ResNet18"], [50_000])
    res = simulate(trace, PROF, "flex", gpus=1, load=2.0)
    assert res.engine.arrival.tolist() == [0, 500, 1500]
    assert (res.engine.deadline - res.engine.arrival).tolist() == [50_000] * 3
    with pytest.raises(UserError, match="--load"):
        simulate(trace, PROF, "flex", gpus=1, load=-1.0)


def test_slo_override_sets_every_deadline():
    trace = assemble([np.array([0, 10], dtype=np.int64)], ["ResNet18"], [50_000])
    res = simulate(trace, PROF, "flex", gpus=1, slo_ms=7.5)
    assert (res.engine.deadline - res.engine.arrival).tolist() == [7_500, 7_500]


def test_profile_missing_a_model_is_a_user_error():
    trace = assemble([np.zeros(1, np.int64)], ["NoSuchNet"], [10**6])
    with pytest.raises(UserError, match="NoSuchNet"):
        simulate(trace, PROF, "flex", gpus=1)


def test_arrivals_are_streamed_in_chunks():
    """Chunked feeding (chunk boundaries inside a run of arrivals) changes nothing."""
    from shepherd.core.engine import EngineConfig

    rng = np.random.default_rng(3)
    a = np.sort(rng.integers(0, 2_000_000, 3000)).astype(np.int64)
    b = np.sort(rng.integers(0, 2_000_000, 3000)).astype(np.int64)
    trace = assemble([a, b], ["ResNet18", "ResNet50"], [60_000, 80_000])
    whole = simulate(trace, PROF, "flex", gpus=2).requests_frame()
    chunked = simulate(trace, PROF, "flex", gpus=2, engine=EngineConfig(chunk=7)).requests_frame()
    assert whole.equals(chunked)


# --------------------------------------------------------------------------- extension without touching the loop

def test_a_new_policy_module_can_pipeline_stages_and_use_timers(monkeypatch):
    """A PPipe/Symphony-style policy: wait for a timer (non-work-conserving), run stage 1 on
    worker 0 (``final=False``), then stage 2 on worker 1 — all through the public actions."""
    from dataclasses import dataclass

    from shepherd.core.policies import registry
    from shepherd.core.policies.base import Policy

    @dataclass(frozen=True)
    class TwoStageConfig:
        wait_us: int = 500

    class TwoStage(Policy):
        def __init__(self, ctx, config):
            super().__init__(ctx, config)
            self.pending, self.stage2 = [], {}

        def on_arrival(self, now, rid, model, deadline, stream):
            self.pending.append((rid, model))
            self.act.set_timer(now + self.config.wait_us, None)

        def on_timer(self, now, payload):
            if self.pending and not self.act.busy(0):
                batch = [r for r, _ in self.pending]
                model = self.pending[0][1]
                self.pending = []
                self.act.start(0, model, batch, now, duration_us=1_000, final=False)
                self.stage2[0] = (model, batch)

        def on_completion(self, now, worker):
            if worker == 0 and 0 in self.stage2:
                model, batch = self.stage2.pop(0)
                self.act.start(1, model, batch, now, duration_us=2_000, at=now + 300)

    monkeypatch.setitem(registry.POLICIES, "two-stage", registry.PolicySpec("two-stage", TwoStage, TwoStageConfig, ""))
    trace = assemble([np.array([0, 100], dtype=np.int64)], ["ResNet18"], [10_000])
    res = simulate(trace, PROF, "two-stage", gpus=2, overhead=OverheadConfig(mode="none"))
    bt = res.batches_frame().sort("batch_id")
    # both requests wait for the first timer (t = 500) and travel together
    assert bt.select("worker", "size", "start_us", "end_us").rows() == [(0, 2, 500, 1500), (1, 2, 1800, 3800)]
    req = res.requests_frame()
    assert req["outcome"].to_list() == ["served", "served"]
    assert req["finish_us"].to_list() == [3800, 3800] and req["worker"].to_list() == [1, 1]
    assert res.workers_frame()["busy_us"].to_list() == [1000, 2000]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 5_000), min_size=0, max_size=40), st.integers(1, 3_000), st.integers(0, 10_000_000))
def test_vectorised_arrival_charge_equals_the_single_server_recursion(times, cost_ns, free_ns):
    from shepherd.core.engine.overhead import SchedulerClock

    clock = SchedulerClock(OverheadConfig(mode="model", arrival_us=cost_ns / 1000), workers=1)
    clock.free_ns = free_ns
    times = sorted(times)
    clock.charge_arrivals(np.array(times, dtype=np.int64))
    expected = free_ns
    for t in times:
        expected = max(expected, t * 1000) + clock.arrival_ns
    assert clock.free_ns == expected


def test_arrival_costs_beyond_scheduler_capacity_collapse_goodput():
    """Arrivals every 50 µs, 100 µs of scheduler time each, admission control off: the backlog
    grows, decisions lag the clock and requests expire (with it on: tests/test_admission.py)."""
    trace = assemble([np.arange(0, 200_000, 50, dtype=np.int64)], ["ResNet18"], [20_000])
    free = simulate(trace, PROF, "flex", gpus=8, overhead=OverheadConfig(mode="none"))
    costly = OverheadConfig(mode="model", arrival_us=100.0, max_lag_us=float("inf"))
    # the reference engine, whose scheduler clock this inspects (the fast path keeps its clock in the kernel)
    slow = simulate(trace, PROF, "flex", gpus=8, overhead=costly, engine=EngineConfig(path="reference"))
    assert free.good > 0.9 * trace.height
    assert slow.good < 0.5 * free.good
    assert slow.engine.sched[0].free_ns >= 100_000 * trace.height  # the server did all the work
    assert simulate(trace, PROF, "flex", gpus=8, overhead=costly).good == slow.good  # the default engine agrees
