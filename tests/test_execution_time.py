"""Drawn execution times (issue 40, ``--exec-time measured``): each batch's time comes from the calibrated
sample of its size and its worker's condition, reproducibly from the seed, while the policy plans on the
profile; the compiled engine declines. Mechanics only, no live run."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core import profiles as prof
from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.engine.execution import ExecutionModel
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.errors import UserError

MODEL = "m"
BUSY = {1: (4.0, 5.0, 6.0), 2: (7.0, 9.0), 3: (10.0, 11.0), 4: (12.0, 13.0, 14.0)}
IDLE = {1: (20.0,), 2: (21.0,), 3: (22.0,), 4: (23.0,)}


def _profile() -> pl.DataFrame:
    return prof.fit_measurements(pl.DataFrame({"model": [MODEL] * 4, "hardware": ["cpu-1t"] * 4,
                                                "batch": [1, 2, 3, 4], "latency_ms": [5.0, 8.0, 10.5, 13.0]}),
                                 source="test")


def _trace(n: int, gap_us: float, seed: int = 0, slo_us: int = 80_000, regular: bool = False) -> pl.DataFrame:
    gaps = np.full(n, gap_us) if regular else np.random.default_rng(seed).exponential(gap_us, n)
    arr = np.cumsum(gaps).astype(np.int64)
    return pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": [MODEL] * n,
                         "slo_us": np.full(n, slo_us), "deadline_us": arr + slo_us})


def _model(seed: int = 0, scale: float = 1.0) -> ExecutionModel:
    return ExecutionModel("measured", {(MODEL, b): xs for b, xs in BUSY.items()}, scale, seed,
                          idle_samples_ms={(MODEL, b): xs for b, xs in IDLE.items()})


def _run(trace, execution, policy="clockwork", seed=0, path="reference"):
    return simulate(trace, _profile(), policy, gpus=2, seed=seed, max_batch=4, overhead=OverheadConfig(mode="none"),
                    engine=EngineConfig(path=path), execution=execution)


def _batches(result) -> pl.DataFrame:
    return result.batches_frame()


@pytest.mark.parametrize("policy", ["clockwork", "flex", "nexus"])
def test_every_batch_runs_a_sampled_time_of_its_size(policy):
    frame = _batches(_run(_trace(600, 2500), _model(), policy))
    done = frame.filter(~pl.col("preempted"))
    assert done.height > 50
    allowed = {b: {round(x * 1000) for x in BUSY[b] + IDLE[b]} for b in BUSY}
    for size, start, end in done.select("size", "start_us", "end_us").iter_rows():
        assert end - start in allowed[size]


def test_draws_are_reproducible_from_the_seed_and_change_with_it():
    trace = _trace(600, 2500)
    a, b, c = (_batches(_run(trace, _model(seed=s))) for s in (3, 3, 4))
    assert a.equals(b)
    assert not a.equals(c)


def test_a_worker_idle_before_a_batch_draws_from_the_idle_sample():
    sparse = _batches(_run(_trace(40, 200_000, regular=True), _model()))  # 200 ms apart: every batch after an idle gap
    idle = {round(x * 1000) for xs in IDLE.values() for x in xs}
    assert set((sparse["end_us"] - sparse["start_us"]).to_list()) <= idle
    dense = _batches(_run(_trace(2000, 1500), _model()))  # over capacity: workers run back to back
    busy = {round(x * 1000) for xs in BUSY.values() for x in xs}
    assert len(set((dense["end_us"] - dense["start_us"]).to_list()) & busy) >= 5


def test_scale_stretches_every_drawn_time():
    trace = _trace(40, 200_000, regular=True)
    one, stretched = _batches(_run(trace, _model())), _batches(_run(trace, _model(scale=1.5)))
    ratio = ((stretched["end_us"] - stretched["start_us"]) / (one["end_us"] - one["start_us"])).unique()
    assert ratio.to_list() == [1.5]


def test_mean_mode_at_scale_one_is_the_profile():
    trace = _trace(600, 2500)
    plain = _batches(_run(trace, None, path="reference"))
    mean = _batches(_run(trace, ExecutionModel("mean")))
    assert plain.equals(mean)


def test_the_policy_plans_on_the_profile_not_on_the_draw():
    """Flex's preemption reads the running batch's end: the profile's, as a live worker's policy does."""
    from shepherd.core.engine.resources import Resources

    trace = _trace(300, 2000)
    result = _run(trace, _model(), "flex")
    res: Resources = result.engine.res
    assert res.execution is not None
    # after the run every worker's last expected end is start + the profile's latency of its last batch
    frame = _batches(result).sort("start_us")
    lat = result.engine.res.lat[0][0]
    for w, (start, size) in enumerate(frame.group_by("worker").agg(pl.col("start_us").last(),
                                                                   pl.col("size").last()).sort("worker")
                                      .select("start_us", "size").rows()):
        assert res.execution.planned_end[w] == start + lat[size]


def test_fast_engine_refuses_and_auto_runs_the_reference_with_a_note(capsys):
    trace = _trace(300, 2500)
    with pytest.raises(UserError, match="exec-time measured"):
        _run(trace, _model(), "flex", path="fast")
    auto = _batches(_run(trace, _model(), "flex", path="auto"))
    assert "runs on the reference engine" in capsys.readouterr().err
    assert auto.equals(_batches(_run(trace, _model(), "flex", path="reference")))


def test_a_size_without_a_sample_is_a_user_error():
    model = ExecutionModel("measured", {(MODEL, 1): (5.0,)}, 1.0, 0)
    with pytest.raises(UserError, match="no sample for 'm' at batch 2"):
        _run(_trace(50, 2500), model)


def test_cli_exec_time_measured_needs_a_calibrated_profile(cli, tmp_path):
    from tests.conftest import assert_user_error

    trace = tmp_path / "t.parquet"
    from shepherd.core.artifacts import write_artifact

    write_artifact(_trace(50, 2500), trace, "trace")
    profiles = tmp_path / "p.parquet"
    write_artifact(_profile(), profiles, "profiles")
    res = cli("simulate", "--trace", trace, "--profiles", profiles, "--gpus", "1", "--max-batch", "4",
              "--exec-time", "measured", "-o", tmp_path / "out")
    assert_user_error(res, "calibrated profile")
    assert not (tmp_path / "out").exists()
    res = cli("simulate", "--trace", trace, "--profiles", profiles, "--gpus", "1", "--exec-time", "sometimes",
              "-o", tmp_path / "out")
    assert_user_error(res, "--exec-time must be mean or measured")
