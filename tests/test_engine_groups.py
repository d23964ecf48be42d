"""Serving groups simulated apart and merged (core/engine/groups.py): the single loop's tables, byte for byte."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.errors import UserError
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

#: each test compares a compiled fast path with the reference engine (conftest.py: re-records it verified)
pytestmark = pytest.mark.agreement

PROF = load_builtin("shepherd-v100")
#: what these tests check is the reference engine's groups apart (the fast paths run groups apart on their own)
REF = EngineConfig(path="reference")
APART = EngineConfig(path="reference", groups="apart")
MODELS = ["ResNet18", "ResNet50", "ResNet101", "DenseNet121", "ResNeSt50"]


def plan_frame(sizes: list[int], stream_group: list[int]) -> pl.DataFrame:
    rows, w = [], 0
    for g, k in enumerate(sizes):
        for _ in range(k):
            rows.append((g, "worker", f"w{w}", None))
            w += 1
    rows += [(g, "stream", str(s), None) for s, g in enumerate(stream_group)]
    return pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                      "hardware": pl.String}, orient="row")


def workload(seed: int, sizes: list[int], n_streams: int, horizon_us: int, rate: float):
    rng = np.random.default_rng(seed)
    arrs = [poisson(rng, rate * (0.5 + rng.random()), horizon_us) for _ in range(n_streams)]
    # equal arrival times across groups (the tie order is what the merge must reproduce): stream 0 is in
    # group 0, stream n - 2 in the last group; with three groups or more, stream 1 too (group 1)
    arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-2][: len(arrs[-2]) // 2]]))
    arrs[1] = np.sort(np.concatenate([arrs[1], arrs[-2][len(arrs[-2]) // 4:]]))
    models = [MODELS[s % len(MODELS)] for s in range(n_streams)]
    slos = [int(x) for x in rng.choice([20_000, 40_000, 90_000, 250_000], n_streams)]
    stream_group = [s % len(sizes) for s in range(n_streams)]
    return assemble(arrs, models, slos), plan_frame(sizes, stream_group)


def tables(res) -> tuple[pl.DataFrame, ...]:
    return res.requests_frame(), res.batches_frame(), res.workers_frame(), res.summary_frame()


def assert_same(a, b) -> None:
    for x, y in zip(tables(a), tables(b)):
        assert x.equals(y)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(1, 3), min_size=2, max_size=4),
       policy=st.sampled_from(["flex", "flex-np", "clockwork"]), rate=st.sampled_from([300.0, 1500.0, 6000.0]),
       predictive=st.booleans())
def test_groups_apart_equal_one_loop(seed, sizes, policy, rate, predictive):
    trace, plan = workload(seed, sizes, 2 * len(sizes) + 1, 150_000, rate)
    cfg = {"admission": "predictive"} if policy == "clockwork" and predictive else None
    one = simulate(trace, PROF, policy, cfg, plan=plan, seed=seed, engine=REF)
    apart = simulate(trace, PROF, policy, cfg, plan=plan, seed=seed, engine=APART)
    assert_same(one, apart)


def test_groups_apart_with_overhead_ties_and_preemption():
    """A larger overloaded run: preemptions (stale completions), many equal-time arrivals across groups,
    scheduler overhead with admission control shedding."""
    trace, plan = workload(7, [2, 3, 1, 2], 11, 2_000_000, 4000.0)
    from shepherd.core.engine import OverheadConfig

    ovh = OverheadConfig(base_us=30.0, per_worker_us=5.0, arrival_us=150.0, max_lag_us=2_000.0)
    one = simulate(trace, PROF, "flex", plan=plan, seed=0, overhead=ovh, engine=REF)
    apart = simulate(trace, PROF, "flex", plan=plan, seed=0, overhead=ovh, engine=APART)
    assert one.shed > 0 and int((one.requests_frame()["preemptions"] > 0).sum()) > 0  # the cases are exercised
    assert_same(one, apart)
    assert one.shed == apart.shed


@pytest.mark.parametrize("case", ["ties", "everywhere"])
def test_batch_ids_are_canonical_in_every_engine(case):
    """Every run numbers its batches by (start, worker, the worker's own order) at its end (issue 30 item 1):
    the one loop, the groups apart and the fast path give the same whole tables — with preemptions, and
    equal arrival times across and within groups — and a request's batch is a row that served it."""
    if case == "everywhere":
        base = np.sort(np.random.default_rng(4).integers(0, 300_000, 400)).astype(np.int64)
        base = np.sort(np.concatenate([base, base[::3]]))  # equal times inside a group as well
        trace = assemble([base, base, base, base[::2], base[1::2]], ["ResNet18"] * 5, [30_000] * 5)
        plan = plan_frame([1, 2, 1], [0, 1, 2, 0, 1])
    else:
        trace, plan = workload(7, [2, 3, 1, 2], 11, 1_000_000, 4000.0)
    for policy, cfg in (("flex", None), ("flex", {"lam": 1.5, "exit_points": 1}), ("clockwork", None)):
        one = simulate(trace, PROF, policy, cfg, plan=plan, seed=0, engine=REF)
        b = one.batches_frame()
        key = list(zip(b["start_us"].to_list(), b["worker"].to_list()))
        assert key == sorted(key) and b.height > 0
        req = one.requests_frame().filter(pl.col("batch_id").is_not_null())
        rows = b[req["batch_id"].to_numpy()]
        assert (rows["worker"] == req["worker"]).all() and (rows["end_us"] >= req["finish_us"]).all()
        for eng in (APART, EngineConfig(path="fast")):
            assert_same(one, simulate(trace, PROF, policy, cfg, plan=plan, seed=0, engine=eng))


@pytest.mark.parametrize("policy", ["flex", "clockwork"])
def test_groups_apart_equal_time_everywhere(policy):
    """Every arrival time occurs in every group, and completions coincide too (one model, one SLO)."""
    rng = np.random.default_rng(4)
    base = np.sort(rng.integers(0, 300_000, 400)).astype(np.int64)
    base = np.sort(np.concatenate([base, base[::3]]))  # equal times inside a group as well
    arrs = [base, base, base, base[::2], base[1::2]]
    trace = assemble(arrs, ["ResNet18"] * 5, [30_000] * 5)
    plan = plan_frame([1, 2, 1], [0, 1, 2, 0, 1])
    one = simulate(trace, PROF, policy, plan=plan, seed=0, engine=REF)
    apart = simulate(trace, PROF, policy, plan=plan, seed=0, engine=APART)
    assert_same(one, apart)


def test_jobs_in_processes_equal_one_loop():
    trace, plan = workload(3, [2, 2, 1], 7, 600_000, 2000.0)
    one = simulate(trace, PROF, "clockwork", plan=plan, seed=0, engine=REF)
    two = simulate(trace, PROF, "clockwork", plan=plan, seed=0, engine=EngineConfig(path="reference", jobs=2))
    assert_same(one, two)


def test_coupled_policy_falls_back_to_one_loop():
    """Nexus draws from the run's generator and sets timers: its groups stay in one loop, same tables."""
    trace, plan = workload(5, [2, 2], 5, 400_000, 1000.0)
    one = simulate(trace, PROF, "nexus", plan=plan, seed=0, engine=REF)
    apart = simulate(trace, PROF, "nexus", plan=plan, seed=0, engine=APART)
    assert_same(one, apart)


def test_cli_groups_apart_writes_byte_identical_artifacts(cli, tmp_path):
    trace, plan = workload(11, [2, 1, 2], 7, 500_000, 2500.0)
    write_artifact(trace, tmp_path / "trace.parquet", "trace", make_provenance())
    write_artifact(plan, tmp_path / "plan.parquet", "plan", make_provenance())
    outs = {}
    for name, extra in (("one", ["--engine", "reference"]), ("apart", ["--engine", "reference", "--groups", "apart"]),
                        ("jobs", ["--engine", "reference", "--jobs", "2"]), ("fast", [])):
        out = tmp_path / name
        r = cli("simulate", "--policy", "flex", "--trace", tmp_path / "trace.parquet", "--plan",
                tmp_path / "plan.parquet", "-o", out, *extra)
        assert r.code == 0, r.err
        outs[name] = {p.name: p.read_bytes() for p in sorted(out.glob("*.parquet"))}
    assert len(outs["one"]) == 4
    assert outs["one"] == outs["apart"] == outs["jobs"] == outs["fast"]


def test_bad_engine_group_options():
    with pytest.raises(UserError, match="groups"):
        EngineConfig(groups="sideways").validate()
    with pytest.raises(UserError, match="jobs"):
        EngineConfig(jobs=0).validate()


@pytest.mark.parametrize("args", [["--jobs", "0"], ["--groups", "sideways"]])
def test_cli_bad_group_options_exit_2(cli, tmp_path, args):
    trace, _ = workload(1, [1, 1], 3, 100_000, 500.0)
    write_artifact(trace, tmp_path / "trace.parquet", "trace", make_provenance())
    assert_user_error(cli("simulate", "--trace", tmp_path / "trace.parquet", "--gpus", "2", "-o",
                          tmp_path / "o", *args))


@pytest.mark.slow
def test_groups_on_ray_equal_one_loop():
    pytest.importorskip("ray")
    trace, plan = workload(9, [1, 2, 1], 7, 400_000, 2000.0)
    one = simulate(trace, PROF, "flex", plan=plan, seed=0, engine=REF)
    ray_run = simulate(trace, PROF, "flex", plan=plan, seed=0,
                       engine=EngineConfig(path="reference", executor="ray", jobs=2))
    assert_same(one, ray_run)


def test_cli_bad_executor_exit_2(cli, tmp_path):
    trace, _ = workload(1, [1, 1], 3, 100_000, 500.0)
    write_artifact(trace, tmp_path / "trace.parquet", "trace", make_provenance())
    assert_user_error(cli("simulate", "--trace", tmp_path / "trace.parquet", "--gpus", "2", "-o",
                          tmp_path / "o", "--executor", "spark"), "executor")
