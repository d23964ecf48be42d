"""Clockwork as Symphony §5 ran it (schedule-ahead and SLO buffer of the Clockwork release; issue 14)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_user_error
from shepherd.core.artifacts import write_artifact
from shepherd.core.engine import simulate
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.errors import UserError
from shepherd.experiments.symphony import common as c
from shepherd.traces.arrivals import gamma
from shepherd.traces.synthetic import assemble

NO_OVERHEAD = OverheadConfig(mode="none")


def _run(trace, prof, gpus, **cfg):
    return simulate(trace, prof, "clockwork", cfg, gpus=gpus, max_batch=c.MAX_BATCH, overhead=NO_OVERHEAD)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.floats(0.3, 3.0), st.floats(1.0, 10.0), st.floats(2.0, 6.0), st.floats(200, 3000),
       st.integers(1, 4), st.sampled_from([0.0, 3.0, 10.0]), st.sampled_from([0.0, 5.0]), st.integers(0, 99))
def test_schedule_ahead_never_runs_a_request_past_its_execution_deadline(n, alpha, beta, slack, rate, gpus, ahead,
                                                                         buffer, seed):
    models = [f"m{i}" for i in range(n)]
    slo_ms = (alpha + beta) * slack + ahead + 2 * buffer
    rng = np.random.default_rng(seed)
    trace = assemble([gamma(rng, rate, 1.0, 200_000) for _ in models], models, [int(slo_ms * 1000)] * n)
    res = _run(trace, c.linear_profiles([(m, alpha, beta) for m in models]), gpus,
               schedule_ahead_ms=ahead, slo_buffer_ms=buffer)
    rq = res.requests_frame()
    served = rq.filter(pl.col("outcome") == "served")
    # every batch is sized at its start time for the execution deadline = deadline − buffer
    assert (served["finish_us"] <= served["deadline_us"] - int(buffer * 1000)).all()
    assert (rq["outcome"] == "late").sum() == 0
    # each worker runs one batch at a time, back to back at most
    b = res.batches_frame().sort("worker", "start_us")
    for _, part in b.group_by("worker"):
        s, e = part["start_us"].to_numpy(), part["end_us"].to_numpy()
        assert (s[1:] >= e[:-1]).all()


def test_schedule_ahead_books_the_next_batch_before_the_worker_frees():
    wl = c.workload(["a"], 25.0, duration_s=1.0)
    prof = c.linear_profiles([("a", 1.053, 5.072)])
    trace = wl.trace(3000, 0)
    now = _run(trace, prof, 8)
    ahead = _run(trace, prof, 8, schedule_ahead_ms=10.0)
    rq = ahead.requests_frame().filter(pl.col("outcome") == "served")
    # some batch started the moment its worker freed although its last request arrived earlier: booked ahead
    b = ahead.batches_frame().sort("worker", "start_us")
    last_arrival = rq.group_by("batch_id").agg(pl.col("arrival_us").max().alias("last"))
    b = b.join(last_arrival, on="batch_id").with_columns(
        pl.col("end_us").shift(1).over("worker").alias("prev_end"))
    booked = b.filter((pl.col("start_us") == pl.col("prev_end")) & (pl.col("last") < pl.col("prev_end")))
    assert booked.height > 0
    # built earlier from fewer queued requests, its batches are smaller than deciding at the worker's free time
    assert ahead.batches_frame()["size"].mean() < now.batches_frame()["size"].mean()


def test_defaults_keep_the_shared_clockwork_unchanged():
    wl = c.workload(["a", "b"], 30.0, duration_s=0.5)
    prof = c.linear_profiles([("a", 1.0, 5.0), ("b", 2.0, 3.0)])
    trace = wl.trace(2000, 1)
    plain = simulate(trace, prof, "clockwork", {}, gpus=3, max_batch=c.MAX_BATCH)
    explicit = simulate(trace, prof, "clockwork", {"schedule_ahead_ms": 0.0, "slo_buffer_ms": 0.0}, gpus=3,
                        max_batch=c.MAX_BATCH)
    assert plain.requests_frame().equals(explicit.requests_frame())


@pytest.mark.parametrize("cfg, needle", [({"schedule_ahead_ms": -1.0}, "schedule_ahead_ms"),
                                         ({"slo_buffer_ms": -0.5}, "slo_buffer_ms"),
                                         ({"schedule_ahead_ms": 10.0, "admission": "predictive"}, "admission")])
def test_bad_clockwork_options_are_user_errors(cfg, needle):
    wl = c.workload(["a"], 30.0, duration_s=0.2)
    with pytest.raises(UserError, match=needle):
        simulate(wl.trace(500, 0), c.linear_profiles([("a", 1.0, 5.0)]), "clockwork", cfg, gpus=1)


def test_negative_schedule_ahead_on_the_cli_is_one_line_exit_2(cli, tmp_path):
    wl = c.workload(["a"], 30.0, duration_s=0.2)
    tp, pp = tmp_path / "t.parquet", tmp_path / "p.parquet"
    write_artifact(wl.trace(500, 0), tp, "trace")
    write_artifact(c.linear_profiles([("a", 1.0, 5.0)]), pp, "profiles")
    out = tmp_path / "never"
    r = cli("simulate", "--policy", "clockwork", "--trace", tp, "--profiles", pp, "--gpus", "1",
            "--set", "schedule_ahead_ms=-3", "-o", out)
    assert_user_error(r, "schedule_ahead_ms")
    assert not out.exists()
