"""The live engine's mechanics (issue 34): outcomes, the decision log replayed in the simulator, a lost worker,
the validate command's help and bad input. No timing is asserted: the tests run on any (shared) machine."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests.conftest import assert_user_error

torch = pytest.importorskip("torch")

from shepherd.core import profiles as prof  # noqa: E402
from shepherd.core.engine import simulate  # noqa: E402
from shepherd.core.engine.live import LiveRunFailed, decisions_frame, run_live  # noqa: E402
from shepherd.core.engine.live.replay import replay  # noqa: E402
from shepherd.core.engine.outcomes import DROPPED, LATE, SERVED  # noqa: E402
from shepherd.core.policies import registry  # noqa: E402


def tiny_trace(n: int, gap_us: float, slo_us: int = 60_000, seed: int = 0) -> pl.DataFrame:
    arr = np.cumsum(np.random.default_rng(seed).exponential(gap_us, n)).astype(np.int64)
    return pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["TinyCNN"] * n,
                         "slo_us": np.full(n, slo_us), "deadline_us": arr + slo_us})


def tiny_profile() -> pl.DataFrame:
    meas = pl.DataFrame({"model": ["TinyCNN"] * 4, "hardware": ["cpu-1t"] * 4, "batch": [1, 2, 4, 8],
                         "latency_ms": [0.5, 0.7, 1.1, 1.9]})
    return prof.fit_measurements(meas, source="test")


@pytest.fixture(scope="module")
def live_run():
    trace = tiny_trace(150, 4000)
    return trace, run_live(trace, tiny_profile(), "clockwork", workers=1, max_batch=8, drain_s=5.0)


def test_every_request_gets_exactly_one_outcome(live_run):
    trace, res = live_run
    r = res.recorder
    assert len(r.r_outcome) == trace.height
    assert set(np.unique(r.r_outcome)) <= {SERVED, LATE, DROPPED}
    assert res.good + res.late + res.dropped == trace.height
    assert res.extra["engine"] == "live" and not res.extra["live"]["failures"]
    done = r.r_finish >= 0
    assert (r.r_finish[done] >= r.r_start[done]).all()
    # each served request sits in exactly one completed batch, whose size counts it
    b = res.batches_frame().filter(~pl.col("preempted"))
    assert int(b["size"].sum()) == int(done.sum())
    served = res.requests_frame().filter(pl.col("batch_id").is_not_null())
    assert served.group_by("batch_id").len().join(b, on="batch_id").filter(pl.col("len") != pl.col("size")).height == 0


def test_live_decisions_replay_in_the_simulator(live_run):
    trace, res = live_run
    log = decisions_frame(res)
    assert log.height and set(log["action"]) <= {"start", "book", "preempt"}
    sim = replay(res, log, trace, tiny_profile(), max_batch=8)
    assert "live-replay" not in registry.names()  # registered only while it runs
    decided = {rid for rids in log["requests"] for rid in rids}
    out = sim.recorder.r_outcome
    assert all(out[i] in (SERVED, LATE) for i in decided)  # each live decision is made again
    undecided = np.setdiff1d(np.arange(trace.height), np.fromiter(decided, np.int64))
    assert (out[undecided] == DROPPED).all()
    # the same batches: request sets per batch, as the live run dispatched them
    live_sets = sorted(tuple(sorted(r)) for r in log.filter(pl.col("action") != "preempt")["requests"])
    q = sim.requests_frame().filter(pl.col("batch_id").is_not_null())
    sim_sets = sorted(tuple(sorted(g)) for g in q.group_by("batch_id").agg("request")["request"])
    assert sim_sets == live_sets


def test_a_killed_worker_is_reported_and_the_run_ends():
    trace = tiny_trace(400, 10_000)  # ~4 s of arrivals; the worker dies at 0.5 s
    with pytest.raises(LiveRunFailed, match="worker 0 died") as failed:
        run_live(trace, tiny_profile(), "flex", workers=1, max_batch=8, drain_s=2.0, kill_at=(0, 0.5))
    assert "SIGKILL" in str(failed.value) and "\n" not in str(failed.value)
    res = failed.value.result  # the partial run, for inspection only
    live = res.extra["live"]
    assert live["failures"] and "worker 0 died" in live["failures"][0]
    assert live["ended_by"].startswith("worker failure")
    assert res.good + res.late + res.dropped == trace.height  # the run ends with what it has
    assert res.dropped > 0


def test_the_same_trace_simulates_with_the_live_profile():
    trace = tiny_trace(50, 4000)
    sim = simulate(trace, tiny_profile(), "clockwork", gpus=1, max_batch=8)
    assert sim.good + sim.late + sim.dropped == trace.height


def test_validate_help_explains_the_setup(cli):
    r = cli("validate", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    for needle in ("pinned to one CPU core", "one PyTorch thread", "No GPU is needed", "profile --measure",
                   "--overhead measured"):
        assert needle in text


def test_validate_bad_input_is_one_line(cli, tmp_path):
    assert_user_error(cli("validate", "--overhead", "guessed", "-o", tmp_path / "v"), "--overhead")
    assert_user_error(cli("validate", "--policy", "nosuch", "-o", tmp_path / "v"), "nosuch")
    assert not (tmp_path / "v").exists()
