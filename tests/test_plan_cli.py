"""``shepherd plan`` end to end: real trace → plan artifact (→ engine), and the bad-input contract."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.profiles import load_builtin

META = {"solver", "status", "objective", "bound", "gap"}  # solve_s: in plan.run.json (not hashed)


@pytest.fixture
def small_trace(tmp_path):
    rng = np.random.default_rng(5)
    models = ["ResNet18", "ResNet50", "DenseNet121", "GoogLeNet"]
    n = 400
    arr = np.sort(rng.integers(0, 2_000_000, n)).astype(np.int64)
    stream = rng.integers(0, 12, n).astype(np.int32)
    frame = pl.DataFrame({"arrival_us": arr, "stream": stream,
                          "model": [models[s % 4] for s in stream],
                          "slo_us": np.full(n, 100_000, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    path = tmp_path / "trace.parquet"
    write_artifact(frame, path, "trace", make_provenance({}, 0))
    return path


def test_herd_plan_records_solver_metadata(cli, small_trace, tmp_path):
    out = tmp_path / "plan.parquet"
    r = cli("plan", "--trace", small_trace, "--planner", "herd", "--gpus", "8", "--group-limit", "4", "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "plan")
    assert META <= set(art.extra) and art.extra["status"] == "optimal"
    assert art.run["timing"]["solve_s"] >= 0
    f = art.frame
    sizes = f.filter(pl.col("role") == "worker").group_by("group").len()["len"].to_list()
    assert all(1 <= s <= 4 for s in sizes) and sum(sizes) <= 8
    streams = f.filter(pl.col("role") == "stream")["name"].to_list()
    assert sorted(streams, key=int) == [str(s) for s in range(12)]  # every stream exactly once


def test_plan_is_deterministic(cli, small_trace, tmp_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for out in (a, b):
        assert cli("plan", "--trace", small_trace, "--gpus", "8", "--group-limit", "4", "-o", out).code == 0
    assert read_artifact(a, "plan").frame.equals(read_artifact(b, "plan").frame)


def test_maf_synthetic_herd_36_gpus_runs_three_groups_of_12(cli, tmp_path):
    engine = pytest.importorskip("shepherd.core.engine")
    out = tmp_path / "plan.parquet"
    r = cli("plan", "--trace", "maf-synthetic", "--planner", "herd", "--gpus", "36", "-o", out)
    assert r.code == 0, r.err
    plan = read_artifact(out, "plan").frame
    sizes = plan.filter(pl.col("role") == "worker").group_by("group").len()["len"].sort().to_list()
    assert sizes == [12, 12, 12]
    from shepherd.traces.resolve import load_trace
    trace = load_trace("maf-synthetic").frame
    trace = trace.filter(pl.col("arrival_us") < 1_000_000)
    res = engine.simulate(trace, load_builtin("shepherd-v100"), "flex", plan=plan, seed=0)
    workers = res.workers_frame().group_by("group").len()["len"].sort().to_list()
    assert workers == [12, 12, 12] and res.good > 0


def test_nexus_and_single_group_and_offline_plans(cli, small_trace, tmp_path):
    for planner in ("nexus", "single-group"):
        out = tmp_path / f"{planner}.parquet"
        r = cli("plan", "--trace", small_trace, "--planner", planner, "--gpus", "8", "-o", out)
        assert r.code == 0, r.err
        assert META <= set(read_artifact(out, "plan").extra)


def _assert_user_error(r, out, text):
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0]
    assert not out.exists()


def test_unknown_planner(cli, small_trace, tmp_path):
    out = tmp_path / "p.parquet"
    _assert_user_error(cli("plan", "--trace", small_trace, "--planner", "magic", "-o", out), out, "unknown planner")


def test_missing_solver_backend(cli, small_trace, tmp_path):
    pytest.importorskip("polars")
    import importlib.util
    if importlib.util.find_spec("gurobipy") is not None:
        pytest.skip("gurobipy installed")
    out = tmp_path / "p.parquet"
    _assert_user_error(cli("plan", "--trace", small_trace, "--solver", "gurobi", "--gpus", "8", "-o", out), out, "gurobipy")


def test_model_larger_than_memory_is_infeasible(cli, small_trace, tmp_path):
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", small_trace, "--gpu-memory-mb", "100", "--reserve-mb", "0", "-o", out)
    _assert_user_error(r, out, "infeasible")


def test_too_few_gpus_for_memory_is_infeasible(cli, small_trace, tmp_path):
    out = tmp_path / "p.parquet"
    # 4 models of ≥ 99 MB, a GPU holds 300 MB → ≥ 2 groups, but only 1 GPU
    r = cli("plan", "--trace", small_trace, "--gpus", "1", "--gpu-memory-mb", "300", "--reserve-mb", "0", "-o", out)
    _assert_user_error(r, out, "infeasible")


def test_time_limit_without_solution(cli, tmp_path):
    rng = np.random.default_rng(1)
    n = 40
    arr = np.sort(rng.integers(0, 100_000, n)).astype(np.int64)
    frame = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["ResNet18"] * n,
                          "slo_us": np.full(n, 40_000, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    trace = tmp_path / "t.parquet"
    write_artifact(frame, trace, "trace", make_provenance({}, 0))
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", trace, "--planner", "offline-optimal", "--gpus", "2", "--time-limit", "0.000001",
            "--gap", "0", "-o", out)
    _assert_user_error(r, out, "time limit")


@pytest.mark.parametrize("args,text", [
    (["--gpus", "0"], "--gpus"),
    (["--gap", "2"], "--gap"),
    (["--time-limit", "-1"], "--time-limit"),
    (["--affinity-k", "0.5"], "--affinity-k"),
])
def test_bad_numbers(cli, small_trace, tmp_path, args, text):
    out = tmp_path / "p.parquet"
    _assert_user_error(cli("plan", "--trace", small_trace, *args, "-o", out), out, text)


def test_missing_trace(cli, tmp_path):
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", tmp_path / "nope.parquet", "-o", out)
    assert r.code == 2 and not out.exists()


@pytest.mark.parametrize("args, text", [
    (["--planner", "herd", "--cluster", "HC1-S"], "--cluster does not apply to --planner herd"),
    (["--planner", "nexus", "--milp-formulation", "counts"], "--milp-formulation does not apply"),
    (["--planner", "single-group", "--partitions", "2"], "--partitions does not apply"),
    (["--planner", "herd", "--epoch-s", "30"], "--epoch-s does not apply"),
    (["--planner", "herd", "--hardware", "nope"], "--hardware nope: the profiles cover V100"),
])
def test_options_that_do_not_apply_are_refused_not_ignored(cli, small_trace, tmp_path, args, text):
    """Issue 33 item 9: these were silently ignored."""
    out = tmp_path / "p.parquet"
    _assert_user_error(cli("plan", "--trace", small_trace, "--gpus", "8", *args, "-o", out), out, text)


def test_an_option_at_its_default_spelled_out_for_its_planner_is_fine(cli, small_trace, tmp_path):
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", small_trace, "--planner", "herd", "--gpus", "8", "--group-limit", "4",
            "--hardware", "V100", "-o", out)
    assert r.code == 0, r.err


def _one_stream_trace(path, n):
    """n ResNet50 requests over 2 s in one stream (its Herd demand n_i grows with n)."""
    rng = np.random.default_rng(5)
    arr = np.sort(rng.integers(0, 2_000_000, n)).astype(np.int64)
    frame = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["ResNet50"] * n,
                          "slo_us": np.full(n, 100_000, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    write_artifact(frame, path, "trace", make_provenance({}, 0))
    return path


def test_herd_warns_at_a_burst_tolerance_outside_its_range(cli, tmp_path):
    # issue 44: 287 k requests in 2 s on 1 GPU — Herd's optimum is t ≈ 0.0078, an overloaded cluster: the plan is
    # written (it is optimal) but the planner says the tolerance is outside the range it was meant for
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", _one_stream_trace(tmp_path / "t.parquet", 287_000), "--gpus", "1", "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "plan")
    t = art.extra["objective"]
    assert round(t, 4) == 0.0078 and art.extra["status"] == "optimal"
    warnings = [ln for ln in r.err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and f"min burst tolerance {t:.4g} is below 1" in warnings[0], r.err
    assert "add GPUs" in warnings[0] and "--group-limit" in warnings[0]  # n_i ≈ 128 GPUs > Ḡ = 12
    assert art.extra["warning"] == warnings[0].removeprefix("warning: ")


def test_herd_is_silent_inside_its_range(cli, tmp_path):
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", _one_stream_trace(tmp_path / "t.parquet", 1000), "--gpus", "4", "-o", out)
    assert r.code == 0, r.err
    assert read_artifact(out, "plan").extra["objective"] >= 1
    assert "warning" not in r.err and "warning" not in read_artifact(out, "plan").extra


def test_tolerance_warning_bounds():
    from shepherd.solvers.herd import HerdConfig, tolerance_warning

    cfg = HerdConfig(gpus=4, group_limit=12)
    assert tolerance_warning(1.0, np.array([2.0, 2.0]), cfg) is None
    assert tolerance_warning(float("inf"), np.array([0.0]), cfg) is None
    text = tolerance_warning(0.0078, np.array([200.0, 3.0]), cfg)
    assert "0.0078 is below 1" in text and "≈ 203" in text and "--group-limit" in text
    assert "--group-limit" not in tolerance_warning(0.5, np.array([8.0]), cfg)
