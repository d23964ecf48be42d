"""``shepherd plan-import``: a plan in the PPipe artifact's JSON format → pipeline_plan, then simulate it
with ``--rules artifact`` end to end; malformed or inconsistent files are exit 2 naming the field."""

from __future__ import annotations

import copy
import json

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.plan import from_frame
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import PPIPE_DATA, needs_ppipe, assert_user_error

DATA = PPIPE_DATA
pytestmark = needs_ppipe
MODEL = "repvgg-b3"


def _partition(layers, gpu, mps, num_gpu, per_server, lat, trans, xput):
    return {"dnn": MODEL, "layers": layers, "gpu": gpu, "mps": mps, "bs": 1, "num_gpu_per_server": per_server,
            "num_gpu": num_gpu, "lat_infer": lat, "lat_trans": trans, "xput": xput}


#: hand-written in the artifact's format: one DNN, one pipeline L4 (2 GPUs at MPS level 1: 4 vGPUs) → P4
PLAN = [{
    "xput": 300.0,
    "config": {"dnn_name": MODEL, "gpu_name_arr": ["L4", "P4"], "sla": 47539.9, "num_mps_levels": [4, 4],
               "max_num_parts": 2, "bs_same": True, "est_xput": 250.0, "batch_build_factor": 1.3,
               "hist_adjustment": 19016, "num_gpu_per_server_arr": [1, 1], "bw_gbps": 6},
    "sla": 47539.9,
    "pipelines": [{"xput": 300.0, "partitions": [
        _partition([0, 5], "L4", 1, 2.0, 1, 9000.0, 1605.6, 420.0),
        _partition([5, 10], "P4", 0, 6.0, 1, 14000.0, 0.0, 300.0)]}],
}]


@pytest.fixture
def files(tmp_path):
    path = tmp_path / f"{MODEL}_1.0_L4-P4_4-12_bw-gbps-6_sla-multiplier-5_v4.json"
    path.write_text(json.dumps(PLAN))
    profs = blocks.read_ppipe_dir(DATA, [MODEL])
    bp = tmp_path / "blocks.parquet"
    write_artifact(blocks.to_frame(profs), bp, "block_profiles", make_provenance({}, 0))
    rng = np.random.default_rng(0)
    trace = assemble([poisson(rng, 150.0, 2_000_000)], [MODEL], [profs[0].slo_us()])
    tp = tmp_path / "trace.parquet"
    write_artifact(trace, tp, "trace", make_provenance({}, 0))
    return path, bp, tp


def test_import_then_simulate_with_artifact_rules(cli, files, tmp_path):
    path, bp, tp = files
    out = tmp_path / "pp.parquet"
    r = cli("plan-import", path, "--profiles", bp, "-o", out)
    assert r.code == 0, r.err
    art = read_artifact(out, "pipeline_plan")
    plan = from_frame(art.frame, art.extra)
    assert plan.cluster.name == "HC1-S" and plan.cluster.bandwidth_gbps == 6.0  # types + "4-12"; bw_gbps
    assert plan.weights == {MODEL: 1.0} and plan.slo_us == {MODEL: 47540} and abs(plan.margin - 0.4) < 1e-3
    (pipe,) = plan.pipelines
    assert [(s.hardware, s.k, s.start, s.end, s.vgpus) for s in pipe.stages] == [("L4", 2, 0, 5, 4),
                                                                                ("P4", 1, 5, 10, 6)]
    sim = tmp_path / "sim"
    r = cli("simulate", "--trace", tp, "--plan", out, "--policy", "ppipe", "--rules", "artifact",
            "--profiles", bp, "--record", "summary", "-o", sim)
    assert r.code == 0, r.err
    summary = pl.read_parquet(sim / "summary.parquet")
    assert summary["requests"][0] > 200 and summary["slo_attainment"][0] > 0.9
    cfg = read_artifact(sim / "summary.parquet", "summary").provenance["config"]["policy_config"]
    assert cfg["uplink_score"] and cfg["head_drop"] and cfg["slot_receive"]


def _broken(edit):
    plan = copy.deepcopy(PLAN)
    edit(plan)
    return plan


@pytest.mark.parametrize("edit, field", [
    (lambda p: p[0].pop("config"), "[0].config is missing"),
    (lambda p: p[0]["config"].update(sla=-1), "[0].config.sla"),
    (lambda p: p[0]["pipelines"][0]["partitions"][1].update(layers=[6, 10]), "partitions[1].layers"),
    (lambda p: p[0]["pipelines"][0]["partitions"][0].update(num_gpu=1.25), "partitions[0].num_gpu"),
    (lambda p: p[0]["pipelines"][0]["partitions"][1].update(bs=2), "partitions[1].bs"),
    (lambda p: p[0]["pipelines"][0]["partitions"][1].update(gpu="A100"), "partitions[1].gpu"),
    (lambda p: p[0]["pipelines"][0]["partitions"][1].update(num_gpu=40.0), "P4 GPUs"),
    (lambda p: p[0]["pipelines"][0]["partitions"][1].update(layers=[5, 9]), "partitions end at layer 9"),
    (lambda p: p[0]["pipelines"][0]["partitions"][0].update(mps="one"), "partitions[0].mps"),
    (lambda p: p[0]["pipelines"][0]["partitions"][0].update(mps=999999999), "partitions[0].mps must be ≤"),
    (lambda p: p[0]["pipelines"][0]["partitions"][0].update(bs=1e12), "partitions[0].bs must be ≤"),
])
def test_malformed_or_inconsistent_plan_is_exit_2_naming_the_field(cli, files, tmp_path, edit, field):
    path, bp, _ = files
    path.write_text(json.dumps(_broken(edit)))
    r = cli("plan-import", path, "--profiles", bp, "-o", tmp_path / "x.parquet")
    assert_user_error(r, field)
    assert not (tmp_path / "x.parquet").exists()


def test_not_json_is_exit_2(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert_user_error(cli("plan-import", bad, "-o", tmp_path / "x.parquet"), "not JSON")
