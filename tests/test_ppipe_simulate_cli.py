"""`shepherd simulate` over a pooled-pipeline plan (PPipe §5.4 data plane) through the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import PPIPE_DATA, needs_ppipe, assert_user_error
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.pipelines import blocks
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

DATA = PPIPE_DATA
pytestmark = needs_ppipe


@pytest.fixture
def planned(cli, tmp_path):
    models = blocks.model_list(DATA)[:2]
    profs = blocks.read_ppipe_dir(DATA, models)
    bp = tmp_path / "blocks.parquet"
    write_artifact(blocks.to_frame(profs), bp, "block_profiles", make_provenance({}, 0))
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 50.0, 2_000_000), poisson(rng, 50.0, 2_000_000)], models,
                     [p.slo_us() for p in profs])
    tp = tmp_path / "trace.parquet"
    write_artifact(trace, tp, "trace", make_provenance({}, 0))
    pp = tmp_path / "pp.parquet"
    r = cli("plan", "--trace", tp, "--planner", "ppipe", "--profiles", bp, "--cluster", "HC1-S", "-o", pp)
    assert r.code == 0, r.err
    return bp, tp, pp, trace.height


@pytest.mark.parametrize("policy", ["ppipe", "reactive"])
def test_simulate_a_pipeline_plan(cli, planned, tmp_path, policy):
    bp, tp, pp, n = planned
    out = tmp_path / policy
    r = cli("simulate", "--policy", policy, "--trace", tp, "--plan", pp, "--profiles", bp, "--record", "requests",
            "-o", out)
    assert r.code == 0, r.err
    summary = read_artifact(out / "summary.parquet", "summary").frame.row(0, named=True)
    requests = read_artifact(out / "requests.parquet", "requests").frame
    assert summary["requests"] == requests.height == n
    assert summary["good"] > 0.5 * n  # a light load on a plan sized for it


def test_pipeline_plan_needs_a_pipeline_policy(cli, planned, tmp_path):
    bp, tp, pp, _ = planned
    assert_user_error(cli("simulate", "--policy", "flex", "--trace", tp, "--plan", pp, "--profiles", bp,
                          "-o", tmp_path / "x"), "ppipe or reactive")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("policy", ["ppipe", "reactive"])
def test_a_pipeline_policy_without_a_pipeline_plan_is_one_line_exit_2(cli, planned, tmp_path, policy):
    """The data planes declare ``requires = (pipeline_plan, block_profiles)``: simulate() says what is missing."""
    bp, tp, _, _ = planned
    assert_user_error(cli("simulate", "--policy", policy, "--trace", tp, "--gpus", "2", "-o", tmp_path / "x"),
                      policy, "pipeline plan")
    assert_user_error(cli("simulate", "--policy", policy, "--trace", tp, "--gpus", "2", "--profiles", bp,
                          "-o", tmp_path / "x"), policy, "pipeline plan")
    assert not (tmp_path / "x").exists()


def test_simulate_a_pipeline_plan_through_the_api_is_the_cli_run(cli, planned, tmp_path):
    """``shepherd simulate --plan pp.parquet --policy ppipe`` is ``simulate(trace, blocks, "ppipe", plan=…)``."""
    from shepherd.core.engine import simulate
    from shepherd.core.pipelines.plan import from_frame

    bp, tp, pp, _ = planned
    out = tmp_path / "cli"
    assert cli("simulate", "--policy", "ppipe", "--trace", tp, "--plan", pp, "--profiles", bp, "--set", "wait=false",
               "-o", out).code == 0
    art = read_artifact(pp, "pipeline_plan")
    trace = read_artifact(tp, "trace").frame
    models = sorted(trace["model"].unique().to_list())
    profs = blocks.from_frame(read_artifact(bp, "block_profiles").frame, models)
    res = simulate(trace, profs, "ppipe", {"wait": False}, plan=from_frame(art.frame, art.extra))
    cli_req = read_artifact(out / "requests.parquet", "requests").frame
    assert cli_req["finish_us"].to_list() == res.requests_frame()["finish_us"].to_list()
    assert cli_req["outcome"].cast(str).to_list() == res.requests_frame()["outcome"].cast(str).to_list()


@pytest.mark.agreement
def test_simulate_a_pipeline_plan_engine_fast_reference_and_default_agree(cli, planned, tmp_path):
    """``--engine fast`` (PPipe's compiled data plane), ``--engine reference`` (every stage an engine event) and
    the default write the same bytes; ``reactive`` has no fast path: ``--engine fast`` is one error line."""
    bp, tp, pp, _ = planned
    outs = {}
    for eng in ("reference", "fast", "default"):
        out = tmp_path / eng
        r = cli("simulate", "--policy", "ppipe", "--trace", tp, "--plan", pp, "--profiles", bp, "--record", "requests",
                *(["--engine", eng] if eng != "default" else []), "-o", out)
        assert r.code == 0, r.err
        outs[eng] = {p.name: p.read_bytes() for p in sorted(out.glob("*.parquet"))}
    assert len(outs["fast"]) >= 3 and outs["fast"] == outs["reference"] == outs["default"]
    assert_user_error(cli("simulate", "--policy", "reactive", "--trace", tp, "--plan", pp, "--profiles", bp,
                          "--engine", "fast", "-o", tmp_path / "x"), "no fast path", "ppipe")
    assert not (tmp_path / "x").exists()
