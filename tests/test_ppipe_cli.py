"""``shepherd plan --planner ppipe|np|dart-r`` end to end, and its bad-input contract."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.plan import from_frame, verify
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import PPIPE_DATA, needs_ppipe, assert_user_error

DATA = PPIPE_DATA
pytestmark = needs_ppipe
MODELS = ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "repvgg-b3"]


@pytest.fixture
def inputs(tmp_path):
    profs = blocks.read_ppipe_dir(DATA, MODELS)
    frame = blocks.to_frame(profs)
    bp = tmp_path / "blocks.parquet"
    write_artifact(frame, bp, "block_profiles", make_provenance({}, 0))
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 100.0, 1_000_000), poisson(rng, 300.0, 1_000_000)], MODELS,
                     [p.slo_us() for p in profs])
    tp = tmp_path / "trace.parquet"
    write_artifact(trace, tp, "trace", make_provenance({}, 0))
    return bp, tp, frame


@pytest.mark.parametrize("planner", ["ppipe", "np", "dart-r"])
def test_plan_writes_a_verified_pipeline_plan(cli, inputs, tmp_path, planner):
    bp, tp, frame = inputs
    out = tmp_path / "pp.parquet"
    r = cli("plan", "--trace", tp, "--planner", planner, "--profiles", bp, "--cluster", "HC1-S", "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "pipeline_plan")
    assert {"solver", "status", "objective", "bound", "gap"} <= set(art.extra)
    assert art.run["timing"]["solve_s"] >= 0  # wall clock: in pp.run.json, not in the hashed artifact
    plan = from_frame(art.frame, art.extra)
    assert plan.planner == planner and plan.cluster.name == "HC1-S"
    assert abs(plan.weights[MODELS[1]] - 0.75) < 0.05  # shares from the trace (100 vs 300 req/s)
    assert verify(plan, blocks.from_frame(frame)) == []
    assert plan.normalized_xput > 0


def _write_blocks(frame: pl.DataFrame, path) -> None:
    write_artifact(frame, path, "block_profiles", make_provenance({}, 0))


def _plan(cli, tp, bp, out, *extra):
    return cli("plan", "--trace", tp, "--planner", "ppipe", "--profiles", bp, "-o", out, *extra)


def test_profile_missing_a_gpu_type(cli, inputs, tmp_path):
    bp, tp, frame = inputs
    bad = tmp_path / "nop4.parquet"
    _write_blocks(frame.filter(pl.col("hardware") != "P4"), bad)
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bad, out, "--cluster", "HC1-S"), "no P4")
    assert not out.exists()


def test_profile_missing_a_batch_size(cli, inputs, tmp_path):
    bp, tp, frame = inputs
    bad = tmp_path / "nob3.parquet"
    _write_blocks(frame.filter(~((pl.col("hardware") == "L4") & (pl.col("mps") == 0) & (pl.col("batch") == 3))), bad)
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bad, out, "--cluster", "HC1-S"), "missing batch sizes")
    assert not out.exists()


def test_slo_below_fastest_latency(cli, inputs, tmp_path):
    bp, tp, _ = inputs
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bp, out, "--cluster", "HC1-S", "--slo-scale", "0.5"), "no feasible pipeline")
    assert not out.exists()


def test_zero_bandwidth(cli, inputs, tmp_path):
    bp, tp, _ = inputs
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bp, out, "--cluster", "HC1-S", "--bandwidth-gbps", "0"), "bandwidth")
    assert not out.exists()


def test_unknown_cluster_and_bad_margin(cli, inputs, tmp_path):
    bp, tp, _ = inputs
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bp, out, "--cluster", "HC7-L"), "unknown cluster")
    assert_user_error(_plan(cli, tp, bp, out, "--cluster", "HC1-S", "--slo-margin", "1.5"), "--slo-margin")
    assert not out.exists()


def test_points_formulation_plans_the_same_throughput(cli, inputs, tmp_path):
    """--milp-formulation points is an exact reformulation: same planned throughput (to the gap), verified plan."""
    bp, tp, frame = inputs
    xput = {}
    for form in ("counts", "points"):
        out = tmp_path / f"{form}.parquet"
        r = cli("plan", "--trace", tp, "--planner", "ppipe", "--profiles", bp, "--cluster", "HC1-S",
                "--gap", "0", "--milp-formulation", form, "-o", out)
        assert r.code == 0, r.err
        art = read_artifact(out, "pipeline_plan")
        plan = from_frame(art.frame, art.extra)
        assert verify(plan, blocks.from_frame(frame)) == []
        xput[form] = plan.normalized_xput
    assert xput["points"] == pytest.approx(xput["counts"], rel=1e-6)


def test_unknown_milp_formulation(cli, inputs, tmp_path):
    bp, tp, _ = inputs
    out = tmp_path / "o.parquet"
    assert_user_error(_plan(cli, tp, bp, out, "--cluster", "HC1-S", "--milp-formulation", "columns"),
                      "unknown MILP formulation")
    assert not out.exists()


def test_ppipe_needs_block_profiles(cli, inputs, tmp_path):
    _, tp, _ = inputs
    out = tmp_path / "o.parquet"
    assert_user_error(cli("plan", "--trace", tp, "--planner", "ppipe", "-o", out), "--profiles")
    other = tmp_path / "prof.parquet"
    assert cli("profile", "--table", "shepherd-v100", "-o", other).code == 0
    assert_user_error(_plan(cli, tp, other, out, "--cluster", "HC1-S"), "block_profiles")
    assert not out.exists()


def test_reproduce_and_report_ppipe_fig2_and_fig10_cell(cli, tmp_path, monkeypatch):
    """End to end through the experiment framework: cells → results → figures + REPORT.md rows."""
    monkeypatch.setenv("SHEPHERD_PPIPE_DATA", str(DATA))  # wherever this clone found the shared data
    out = tmp_path / "results"
    r = cli("reproduce", "ppipe-fig2", "--quick", "--jobs", "1", "-o", out)
    assert r.code == 0, r.err
    r = cli("report", "ppipe-fig2", "-o", out)
    assert r.code == 0, r.err
    text = (out / "REPORT.md").read_text()
    assert "P4 / L4 latency" in text and (out / "figures" / "ppipe-fig2.png").exists()
    from shepherd.experiments.ppipe.fig10_reactive import EXPERIMENT

    row = EXPERIMENT.run_cell({"group": 1, "data_plane": "ppipe", "seed": 0, "seconds": 0.5, "step": 0.5})
    v = float(row["max_lf"][0])  # mean over 3 DNNs of factors from the grid {1.0, 0.5} (0 if neither)
    assert 0.0 <= v <= 1.0 and abs(6 * v - round(6 * v)) < 1e-9


@pytest.mark.parametrize("planner", ["ppipe", "np", "dart-r"])
def test_plan_with_artifact_rules(cli, inputs, tmp_path, planner):
    """--rules artifact: their bandwidth (6 Gbit/s on P4 clusters), ≤ 2 partitions, NP on whole GPUs,
    DART-r within NP's GPU split, and the batch-build term recorded."""
    bp, tp, frame = inputs
    out = tmp_path / "pp.parquet"
    r = cli("plan", "--trace", tp, "--planner", planner, "--profiles", bp, "--cluster", "HC1-S",
            "--rules", "artifact", "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "pipeline_plan")
    plan = from_frame(art.frame, art.extra)
    assert art.extra["rules"] == "artifact" and plan.cluster.bandwidth_gbps == 6.0
    assert art.extra["batch_build"] == 1.3
    assert all(len(p.stages) <= 2 for p in plan.pipelines)
    if planner != "ppipe":
        assert all(s.k == 1 for p in plan.pipelines for s in p.stages)  # whole GPUs
    assert verify(plan, blocks.from_frame(frame)) == []


def test_rules_must_be_named(cli, inputs, tmp_path):
    bp, tp, _ = inputs
    r = cli("plan", "--trace", tp, "--planner", "ppipe", "--profiles", bp, "--rules", "gurobi",
            "-o", tmp_path / "x.parquet")
    assert_user_error(r, "--rules")
    r = cli("simulate", "--trace", tp, "--policy", "flex", "--gpus", "2", "--rules", "artifact",
            "-o", tmp_path / "sim")
    assert_user_error(r, "no rule switches")
