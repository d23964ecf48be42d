"""PPipe's named rule sets (issue 17): each artifact rule against a hand-built case the paper rule
decides differently; the planner switches; ``--rules`` on the CLI."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from shepherd.core.engine import SERVED, simulate
from shepherd.core.errors import UserError
from shepherd.core.pipelines import rules
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import custom_cluster
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
from shepherd.core.pipelines.reservations import PipeRuntime, Reservations, probe, probe_scored
from shepherd.core.policies.ppipe import PPipeDataPlaneConfig
from shepherd.solvers.ppipe_configs import enumerate_configs
from shepherd.traces.synthetic import assemble


# --------------------------------------------------------------------------- (a) uplink-aware GPU choice

def _two_stage_runtime() -> tuple[Reservations, PipeRuntime]:
    """Stage 0: vGPUs 0 (server 0) and 1 (server 1); stage 1: vGPU 2 (server 2). 100 µs per stage,
    50 µs transfer. Server 0's uplink is busy until 1000 while its GPU is free; vGPU 1 is busy until 20."""
    res = Reservations(3, 3, index=False)
    pipe = PipeRuntime(0, 1, [[0, 1], [2]], [[0, 1], [2]], [[0, 100], [0, 100]], [[0, 0], [0, 50]], 1)
    res.reserve(res.uplink(0), 0, 1000, 0)
    res.reserve(1, 0, 20, 0)
    return res, pipe


def test_uplink_score_picks_the_gpu_whose_uplink_is_free():
    res, pipe = _two_stage_runtime()
    paper = probe(res, pipe, 1, 0)
    art = probe_scored(res, pipe, 1, 0, uplink_score=True)
    assert paper[2][0][0] == 0 and paper[0] == 1150  # GPU time only: the free GPU, then waits for the uplink
    assert art[2][0][0] == 1 and art[0] == 270  # the later of GPU finish and uplink: vGPU 1
    # without the score the scan is Algorithm 2 itself: the same answer as probe()
    assert probe_scored(res, pipe, 1, 0, uplink_score=False) == paper


# --------------------------------------------------------------------------- data-plane cases through the engine

def _profile(lat_by_batch: list[int], cut_bytes: int = 1000) -> BlockProfile:
    """Two blocks, each taking half of ``lat_by_batch[b-1]`` on L4 and T4."""
    arr = np.array([[v // 2 for v in lat_by_batch]] * 2, dtype=np.int64)
    return BlockProfile("m", 2, {("L4", 1): arr, ("T4", 1): arr.copy()}, np.array([cut_bytes]), 100.0)


def _run(plan: PipelinePlan, prof: BlockProfile, arrivals: list[int], slo: int, **cfg) -> int:
    trace = assemble([np.array(arrivals, dtype=np.int64)], ["m"], [slo])
    res = simulate(trace, {"m": prof}, "ppipe", PPipeDataPlaneConfig(**cfg), plan=plan, seed=0)
    return int((res.recorder.r_outcome == SERVED).sum())


def test_head_drop_drops_what_the_paper_would_serve_in_a_smaller_batch():
    prof = _profile([100, 300, 600, 1000])  # batch 4 takes 1000 µs, the SLO is 500 µs
    cluster = custom_cluster({"L4": 1}, 10.0)
    plan = PipelinePlan([Pipeline("m", 4, (Stage("L4", 1, 0, 2, 1, 1000, 0, 4000.0),))], cluster,
                        {"m": 1.0}, {"m": 500}, 0.0, "test")
    assert _run(plan, prof, [0, 0, 0, 0], 500) == 4  # paper: shrinks to batches of 2 and 1
    assert _run(plan, prof, [0, 0, 0, 0], 500, head_drop=True) == 0  # artifact: bs 4 misses: drop


def test_slot_receive_gives_each_last_stage_vgpu_its_own_link():
    # 400 µs per sample at 10 Gbit/s; two L4 servers feed two T4 vGPUs on one server
    prof = _profile([200], cut_bytes=500_000)
    cluster = custom_cluster({"L4": 2, "T4": 2}, 10.0, per_server={"L4": 1, "T4": 2})
    stages = (Stage("L4", 1, 0, 1, 2, 100, 400, 1e4), Stage("T4", 1, 1, 2, 2, 100, 0, 1e4))
    plan = PipelinePlan([Pipeline("m", 1, stages)], cluster, {"m": 1.0}, {"m": 700}, 0.0, "test")
    # paper: one NIC per server — the second transfer waits for the first (finish 1000 > 700): dropped
    assert _run(plan, prof, [0, 0], 700) == 1
    assert _run(plan, prof, [0, 0], 700, slot_receive=True) == 2


def _batches(plan: PipelinePlan, prof: BlockProfile, arrivals: list[int], slo: int, **cfg) -> list[list[int]]:
    """The requests of each batch (by start time) and whether each was served."""
    trace = assemble([np.array(arrivals, dtype=np.int64)], ["m"], [slo])
    res = simulate(trace, {"m": prof}, "ppipe", PPipeDataPlaneConfig(**cfg), plan=plan, seed=0)
    r = res.recorder
    assert (r.r_outcome == SERVED).all()
    starts = sorted(set(r.r_start.tolist()))
    return [sorted(np.flatnonzero(r.r_start == t).tolist()) for t in starts]


def _one_l4(batch: int) -> PipelinePlan:
    return PipelinePlan([Pipeline("m", batch, (Stage("L4", 1, 0, 2, 1, 100 * batch, 0, 1e4),))],
                        custom_cluster({"L4": 1}, 10.0), {"m": 1.0}, {"m": 1000}, 0.0, "test")


def test_fill_wait_keeps_waiting_while_a_larger_batch_still_fits():
    # (e) batch b takes 100·b µs, planned bs 4, SLO 1000; arrivals at 0, 650, 680
    prof = _profile([100, 200, 300, 400])
    plan = _one_l4(4)
    # paper: the head waits until 600 (the last moment a batch of 4 fits), then goes alone;
    # the next head waits for its own last moment and takes the third request with it
    assert _batches(plan, prof, [0, 650, 680], 1000) == [[0], [1, 2]]
    # artifact: at 650 a batch of 3 still fits (650 + 300 ≤ 1000), so it waits; at 680 three are
    # queued and three is the largest batch that fits: one batch of 3
    assert _batches(plan, prof, [0, 650, 680], 1000, fill_wait=True) == [[0, 1, 2]]


def test_fill_wait_wakes_when_one_more_request_would_miss():
    # (e) a lone request: the artifact waits until a batch of 2 misses on an idle pipeline
    # (1000 − 200 + 1 = 801) and then sends it; the paper sends it at 600 (1000 − 400)
    prof = _profile([100, 200, 300, 400])
    trace = assemble([np.array([0], dtype=np.int64)], ["m"], [1000])
    paper = simulate(trace, {"m": prof}, "ppipe", PPipeDataPlaneConfig(), plan=_one_l4(4), seed=0)
    art = simulate(trace, {"m": prof}, "ppipe", PPipeDataPlaneConfig(fill_wait=True), plan=_one_l4(4), seed=0)
    assert paper.recorder.r_start.tolist() == [600]
    assert art.recorder.r_start.tolist() == [801]
    assert art.recorder.r_finish.tolist() == [901]  # still within the SLO


def test_transfer_round_rounds_the_per_request_transfer_then_multiplies():
    # (f) 1 250 bytes at 10 Gbit/s = 1.0 µs per request; 1 562 bytes = 1.2496 µs
    from shepherd.core.pipelines.runtime import build

    prof = _profile([100, 200, 300, 400], cut_bytes=1562)
    cluster = custom_cluster({"L4": 1, "T4": 1}, 10.0)
    stages = (Stage("L4", 1, 0, 1, 1, 100, 2, 1e4), Stage("T4", 1, 1, 2, 1, 100, 0, 1e4))
    plan = PipelinePlan([Pipeline("m", 4, stages)], cluster, {"m": 1.0}, {"m": 5000}, 0.0, "test")
    paper = build(plan, {"m": prof}, ["m"])[1][0].transfer_in[1]
    art = build(plan, {"m": prof}, ["m"], transfer_round=True)[1][0].transfer_in[1]
    assert paper == [0, 2, 3, 4, 5]  # ceil(b · 1.2496)
    assert art == [0, 1, 2, 3, 4]  # b · round(1.2496)


# --------------------------------------------------------------------------- planner switches

def test_batch_build_term_excludes_batches_the_paper_budget_admits():
    prof = _profile([100, 150, 200, 250])
    cluster = custom_cluster({"L4": 1}, 10.0)
    plain = enumerate_configs(prof, cluster, 300.0, 1, prune=False, mps=False)
    built = enumerate_configs(prof, cluster, 300.0, 1, prune=False, mps=False, build_us=60.0)
    assert max(c.batch for c in plain) == 4
    # 1.3·10⁶·(b−1)/est_xput = 60 µs per extra request: b = 3 needs 200 + 120 > 300
    assert max(c.batch for c in built) == 2


def test_rule_sets_name_every_switch_and_the_artifact_bandwidths():
    assert rules.dataplane_fields("paper") == {"uplink_score": False, "head_drop": False, "slot_receive": False,
                                               "stage_servers": False, "fill_wait": False,
                                               "transfer_round": False}
    assert all(rules.dataplane_fields("artifact").values())
    assert rules.planner_fields("artifact") == {"batch_build": 1.3, "max_partitions": 2, "np_mps": False,
                                                "dart": "artifact", "gpu_sharing": False, "spare": "fill"}
    assert rules.planner_fields("paper")["gpu_sharing"] is True
    assert PPipeDataPlaneConfig() == PPipeDataPlaneConfig(**rules.dataplane_fields("paper"))
    assert rules.bandwidth_gbps("HC2-L", "artifact") == 10.0 and rules.bandwidth_gbps("HC4-S", "artifact") == 10.0
    assert rules.bandwidth_gbps("HC1-L", "artifact") == 6.0 and rules.bandwidth_gbps("HC3-L", "artifact") == 6.0
    assert rules.bandwidth_gbps("HC2-L", "paper") is None
    with pytest.raises(UserError, match="--rules"):
        rules.check("gurobi")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from shepherd.core.pipelines.reservations import reserve  # noqa: E402
from conftest import needs_ppipe  # noqa: E402
from test_ppipe_dataplane import pipelines  # noqa: E402


@given(pipelines(), st.lists(st.tuples(st.integers(0, 1), st.integers(1, 4), st.integers(0, 20)), max_size=30),
       st.booleans())
@settings(max_examples=80, deadline=None)
def test_scored_probe_never_double_books_and_without_the_score_is_probe(pipes, steps, score):
    res = Reservations(12, 3)
    now = 0
    for which, bs, dt in steps:
        now += dt
        pipe = pipes[which]
        got = probe_scored(res, pipe, bs, now, uplink_score=score)
        if not score:
            assert got == probe(res, pipe, bs, now)
        reserve(res, got[2], now)  # raises on any overlap
        assert got[1] >= 0


def test_report_shows_paper_and_both_rule_sets(tmp_path):
    """A PPipe section over rows of both rule sets: one headline table with paper | ours (paper rules) |
    ours (artifact rules); the artifact claims marked."""
    import polars as pl

    from shepherd.experiments.ppipe.fig10_reactive import EXPERIMENT
    from shepherd.experiments.report import render

    rows = [dict(group=g, data_plane=d, seed=0, max_lf=lf, rules=r)
            for r, base in (("paper", 0.8), ("artifact", 0.9)) for g in (1, 2)
            for d, lf in (("ppipe", base), ("reactive", base - 0.3))]
    sec = EXPERIMENT.report(pl.DataFrame(rows), tmp_path / "figures")
    text = render([sec], tmp_path)
    assert "| what | paper | ours (paper rules) | ours (artifact rules) |" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("| PPipe: average max load factor"))
    assert "| 0.8 |" in line and "| 0.9 |" in line
    assert any(cl.text.startswith("[artifact rules]") for cl in sec.claims)
    assert (tmp_path / "figures" / "artifact-rules" / "ppipe-fig10.png").exists()


@needs_ppipe
def test_experiment_groups_are_the_authors():
    from shepherd.experiments.ppipe import common as c

    gs = c.groups()
    assert len(gs) == 6 and len({m for g in gs for m in g}) == 18
    assert gs[2] == ("colorization-v2", "googlenet-v3-pytorch", "repvgg-b3") and gs[3] == c.G1
