"""`shepherd plan` → `shepherd simulate --plan` through the CLI, and a stopped-early plan."""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact


def test_herd_plan_then_simulate_runs_three_groups_of_twelve(cli, tmp_path):
    trace = tmp_path / "trace.parquet"
    assert cli("traces", "maf", "maf-synthetic", "-o", trace).code == 0
    short = read_artifact(trace, "trace").frame.filter(pl.col("arrival_us") < 2_000_000)
    write_artifact(short, trace, "trace", make_provenance({"synthetic": True}, 0))
    plan = tmp_path / "plan.parquet"
    r = cli("plan", "--trace", trace, "--planner", "herd", "--gpus", "36", "-o", plan)
    assert r.code == 0, r.err
    out = tmp_path / "sim"
    r = cli("simulate", "--policy", "flex", "--trace", trace, "--plan", plan, "-o", out)
    assert r.code == 0, r.err
    workers = read_artifact(out / "workers.parquet", "workers").frame
    assert sorted(workers.group_by("group").len()["len"].to_list()) == [12, 12, 12]
    summary = read_artifact(out / "summary.parquet", "summary").frame.row(0, named=True)
    assert summary["groups"] == 3 and 0 < summary["good"] <= summary["requests"] == short.height


def test_a_plan_stopped_with_a_feasible_solution_is_written_with_its_gap(cli, tmp_path):
    """--max-solutions 1 stops HiGHS at its first incumbent: deterministic 'feasible' status."""
    rng = np.random.default_rng(3)
    n = 30
    arr = np.sort(rng.integers(0, 60, n)).astype(np.int64) * 1000
    frame = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["ResNet18"] * n,
                          "slo_us": np.full(n, 12_000, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    trace = tmp_path / "t.parquet"
    write_artifact(frame, trace, "trace", make_provenance({}, 0))
    out = tmp_path / "p.parquet"
    r = cli("plan", "--trace", trace, "--planner", "offline-optimal", "--gpus", "1", "--gap", "0",
            "--max-solutions", "1", "-o", out)
    assert r.code == 0, r.err
    extra = read_artifact(out, "plan").extra
    assert extra["status"] == "feasible" and extra["gap"] > 0
    assert f"feasible, gap {100 * extra['gap']:.2f}%" in r.out
