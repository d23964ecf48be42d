"""Issue 17, the rules rebuilt here: artifact rule (d) ``stage_servers``, the planner's
``gpu_sharing=False`` (with the knapsack start on its own GPU variables) and the artifact's DART-r
split of the GPUs NP leaves unused — each against a hand-built case the paper rule decides differently."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.engine import SERVED, simulate
from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import custom_cluster
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage, physical_gpus, place, verify
from shepherd.core.pipelines.runtime import build, stage_links
from shepherd.core.policies.ppipe import PPipeDataPlaneConfig
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_baselines import artifact_dart_shares
from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines
from shepherd.traces.synthetic import assemble

EXACT = SolverConfig("highs", 30.0, 0.0)


# --------------------------------------------------------------------------- (d) per-stage servers

def _profile(model: str, lat: list[int], cut_bytes: int = 1000, levels: tuple[int, ...] = (1,),
             hardware: tuple[str, ...] = ("L4", "T4"), mps_gain: float = 1.0) -> BlockProfile:
    """Two blocks of half ``lat[b-1]`` each; at MPS level k a block takes ``k/mps_gain`` times as long."""
    arr = np.array([[v // 2 for v in lat]] * 2, dtype=np.int64)
    table = {(h, k): (arr * k / (mps_gain if k > 1 else 1.0)).astype(np.int64) for h in hardware for k in levels}
    return BlockProfile(model, 2, table, np.array([cut_bytes]), float(lat[0]))


def _two_pipelines() -> tuple[PipelinePlan, BlockProfile]:
    """One DNN, two L4 → T4 pipelines of one vGPU per stage; 2 L4 and 2 T4 per server, so the paper's
    placement puts both first stages on one server (one uplink) and both last stages on one server."""
    prof = _profile("m", [200], cut_bytes=500_000)  # 400 µs per sample at 10 Gbit/s
    cluster = custom_cluster({"L4": 2, "T4": 2}, 10.0, per_server={"L4": 2, "T4": 2})
    pipe = Pipeline("m", 1, (Stage("L4", 1, 0, 1, 1, 100, 400, 1e4), Stage("T4", 1, 1, 2, 1, 100, 0, 1e4)))
    return PipelinePlan([pipe, pipe], cluster, {"m": 1.0}, {"m": 700}, 0.0, "test"), prof


def _served(plan: PipelinePlan, prof: BlockProfile, arrivals: list[int], slo: int, **cfg) -> int:
    trace = assemble([np.array(arrivals, dtype=np.int64)], ["m"], [slo])
    res = simulate(trace, {"m": prof}, "ppipe", PPipeDataPlaneConfig(**cfg), plan=plan, seed=0)
    return int((res.recorder.r_outcome == SERVED).sum())


def test_stage_servers_give_each_pipeline_stage_links_of_its_own():
    plan, prof = _two_pipelines()
    # paper: the second request's transfer waits for the first on the shared uplink (finish 1000 > 700)
    assert _served(plan, prof, [0, 0], 700) == 1
    assert _served(plan, prof, [0, 0], 700, slot_receive=True) == 1  # (c) alone: the uplink is still shared
    assert _served(plan, prof, [0, 0], 700, stage_servers=True) == 2  # (d): one server per pipeline stage


def test_stage_links_follow_the_artifact_grouping():
    cluster = custom_cluster({"L4": 8, "T4": 8}, 10.0, per_server={"L4": 1, "T4": 2})
    p = Pipeline("m", 1, (Stage("L4", 2, 0, 1, 5, 1, 1, 1.0), Stage("T4", 1, 1, 2, 3, 1, 0, 1.0)))
    first, last = stage_links(p, cluster)
    assert first == [0, 0, 0, 0, 1]  # max(1, 2) GPUs per server × k = 2: four vGPUs per link
    assert last == [0, 0, 1]  # the last stage: its own type's servers (rule (c) then splits them)
    plan = PipelinePlan([p, p], cluster, {"m": 1.0}, {"m": 10**6}, 0.0, "test")
    prof = _profile("m", [2], levels=(1, 2))
    _, pipes, nodes = build(plan, {"m": prof}, ["m"], stage_servers=True)
    servers = max(v.node for v in place(plan)) + 1
    links = [n for pr in pipes for stage in pr.nodes for n in stage]
    assert min(links) >= servers and nodes == servers + 2 * (2 + 2)  # no link shared across stages or pipelines
    assert pipes[0].nodes[0] == [servers] * 4 + [servers + 1]


@given(st.lists(st.tuples(st.sampled_from(["L4", "T4"]), st.integers(1, 4), st.integers(1, 9)), min_size=1,
                max_size=3), st.integers(1, 4), st.integers(1, 4))
@settings(max_examples=60, deadline=None)
def test_stage_links_never_exceed_a_server(stages, per_l4, per_t4):
    cluster = custom_cluster({"L4": 40, "T4": 40}, 10.0, per_server={"L4": per_l4, "T4": per_t4})
    p = Pipeline("m", 1, tuple(Stage(h, k, j, j + 1, n, 1, 1, 1.0) for j, (h, k, n) in enumerate(stages)))
    for j, (groups, s) in enumerate(zip(stage_links(p, cluster), p.stages)):
        size = cluster.per_server(s.hardware)
        if j + 1 < len(p.stages):
            size = max(size, cluster.per_server(p.stages[j + 1].hardware))
        assert len(groups) == s.vgpus and groups == sorted(groups)
        assert all(groups.count(g) <= size * s.k for g in set(groups))
        assert len(set(groups)) == -(-s.vgpus // (size * s.k))  # as few links as the grouping allows


# --------------------------------------------------------------------------- planner: gpu_sharing=False

def _sharing_instance() -> tuple[list[BlockProfile], dict[str, float]]:
    # a 1/2 vGPU serves 0.75 of a whole GPU: two halves beat a whole GPU, so the planner wants halves
    profs = [_profile(m, [1000, 1800], levels=(1, 2), hardware=("L4",), mps_gain=1.5) for m in ("a", "b")]
    return profs, {"a": 0.5, "b": 0.5}


def test_without_gpu_sharing_every_dnn_partition_has_whole_gpus():
    profs, w = _sharing_instance()
    cluster = custom_cluster({"L4": 3}, 10.0)
    cfg = PPipePlanConfig(slo_margin=0.0, slo_scale=3.0, max_partitions=1, candidates=0, formulation="counts")
    shared = solve_pipelines(profs, w, cluster, cfg, EXACT)
    whole = solve_pipelines(profs, w, cluster, PPipePlanConfig(**{**cfg.__dict__, "gpu_sharing": False}), EXACT)
    # paper (Eq. 23): 3 halves per DNN share the middle GPU — more than the cluster if each kept its own
    assert physical_gpus(shared, sharing=True)["L4"] <= 3 < physical_gpus(shared, sharing=False)["L4"]
    # artifact: whole GPUs per DNN partition fit the cluster, at a lower max-min throughput
    assert physical_gpus(whole, sharing=False)["L4"] <= 3 and whole.meta["gpu_sharing"] is False
    assert whole.normalized_xput < shared.normalized_xput - 1e-6
    assert verify(whole, {p.model: p for p in profs}) == []
    per_partition: dict[tuple, float] = {}
    for p in whole.pipelines:
        for d, s in enumerate(p.stages):
            per_partition[(p.model, d, s.hardware, s.k)] = per_partition.get((p.model, d, s.hardware, s.k), 0) + s.gpus
    assert sum(-(-v // 1) for v in per_partition.values()) <= 3


def test_verify_flags_a_shared_gpu_in_a_plan_planned_without_sharing():
    profs, w = _sharing_instance()
    cluster = custom_cluster({"L4": 3}, 10.0)
    cfg = PPipePlanConfig(slo_margin=0.0, slo_scale=3.0, max_partitions=1, candidates=0, formulation="counts")
    plan = solve_pipelines(profs, w, cluster, cfg, EXACT)
    assert verify(plan, {p.model: p for p in profs}) == []
    plan.meta["gpu_sharing"] = False
    assert any("needs" in b for b in verify(plan, {p.model: p for p in profs}))


@pytest.mark.parametrize("sharing", [True, False])
def test_knapsack_start_sets_the_milps_own_gpu_variables(sharing):
    """Two GPU types (the knapsack path), MPS levels 1–2: the knapsack formulation solves with either
    keying of the physical GPUs and reaches the plain counts optimum."""
    profs = [_profile(m, [600, 1000, 1400], cut_bytes=2000, levels=(1, 2), mps_gain=1.3) for m in ("a", "b")]
    profs[1].lat[("T4", 1)] = profs[1].lat[("T4", 1)] * 2  # b is slower on T4
    profs[1].lat[("T4", 2)] = profs[1].lat[("T4", 2)] * 2
    w = {"a": 0.4, "b": 0.6}
    cluster = custom_cluster({"L4": 3, "T4": 5}, 10.0, per_server={"L4": 1, "T4": 2})
    base = dict(slo_margin=0.0, slo_scale=4.0, max_partitions=2, candidates=0, gpu_sharing=sharing)
    knap = solve_pipelines(profs, w, cluster, PPipePlanConfig(**base, formulation="knapsack"), EXACT)
    plain = solve_pipelines(profs, w, cluster, PPipePlanConfig(**base, formulation="counts"), EXACT)
    assert knap.meta["knapsack_start"] is True and knap.meta["gpu_sharing"] is sharing  # the start was set
    assert knap.normalized_xput == pytest.approx(plain.normalized_xput, rel=1e-6)
    assert verify(knap, {p.model: p for p in profs}) == []
    assert all(physical_gpus(knap, sharing)[h] <= cluster.count(h) for h in ("L4", "T4"))


# --------------------------------------------------------------------------- DART-r (artifact)

def test_artifact_dart_divides_the_gpus_np_leaves_unused():
    cluster = custom_cluster({"V100": 10, "T4": 20}, 10.0)
    st_ = lambda h, n: Stage(h, 1, 0, 2, n, 1, 0, 1.0)  # noqa: E731
    np_plan = PipelinePlan([Pipeline("a", 1, (st_("V100", 6),)), Pipeline("a", 1, (st_("T4", 4),)),
                            Pipeline("b", 1, (st_("T4", 11),))], cluster, {"a": 0.5, "b": 0.5}, {}, 0.0, "np")
    shares = artifact_dart_shares(np_plan, ["a", "b", "c"])
    # unused: 4 V100 and 5 T4, floor-divided over three DNNs (1 each; 1 V100 and 2 T4 stay idle)
    assert shares == {"a": {"V100": 7, "T4": 5}, "b": {"V100": 1, "T4": 12}, "c": {"V100": 1, "T4": 1}}


# --------------------------------------------------------------------------- planner: spare GPUs kept in stages

def test_fill_spare_gives_idle_gpus_to_non_bottleneck_stages_only():
    from shepherd.solvers.ppipe_milp import fill_spare

    cluster = custom_cluster({"L4": 2, "T4": 10}, 10.0, per_server={"L4": 1, "T4": 2})
    # a: T4 stage 300 req/s (load 250/300) feeding its L4 bottleneck (250); c: T4 stage 2×60 (load 100/120)
    a = Pipeline("a", 1, (Stage("T4", 1, 0, 1, 3, 1, 1, 100.0), Stage("L4", 1, 1, 2, 1, 1, 0, 250.0)))
    c = Pipeline("c", 1, (Stage("T4", 2, 0, 1, 2, 1, 1, 60.0), Stage("L4", 1, 1, 2, 1, 1, 0, 100.0)))
    b = Pipeline("b", 1, (Stage("T4", 1, 0, 2, 1, 1, 0, 50.0),))  # a whole DNN: its own bottleneck
    for sharing in (True, False):
        got = fill_spare([a, c, b], cluster, sharing)
        plan = PipelinePlan(got, cluster, {}, {}, 0.0, "t", {"gpu_sharing": sharing})
        assert physical_gpus(plan, sharing) == {"T4": 10, "L4": 2}  # the 5 idle T4 all handed out
        assert [p.xput for p in got] == [a.xput, c.xput, b.xput]  # no pipeline's throughput moves
        assert got[2] == b and got[0].stages[1] == a.stages[1] and got[1].stages[1] == c.stages[1]
        # greedy by load, one GPU a step: a and c tie at 0.83 → a (plan order) to 250/400; c → 100/240;
        # a → 250/500, then 250/600, which ties c's 0.417 → a again: a gets 4 GPUs, c one (2 vGPUs at 1/2)
        assert got[0].stages[0].vgpus == 3 + 4 and got[1].stages[0].vgpus == 2 + 2
    assert fill_spare([a, c, b], custom_cluster({"L4": 2, "T4": 5}, 10.0), True) == [a, c, b]  # nothing idle


# --------------------------------------------------------------------------- planner: link_share

def test_link_share_stage_plans_for_the_links_rules_c_and_d_build():
    from shepherd.solvers.ppipe_configs import enumerate_configs, link_shares

    cluster = custom_cluster({"L4": 4, "T4": 8}, 10.0, per_server={"L4": 4, "T4": 2})
    tpl, levels = ("T4", "L4"), (1, 2)
    assert link_shares(cluster, tpl, levels, 0, "server") == (2, 2)  # the artifact MILP: a T4 server's NIC
    assert link_shares(cluster, tpl, levels, 0, "stage") == (4, 4)  # its simulator: max(2, 4) T4 per link
    assert link_shares(cluster, tpl, levels, 1, "server") == (8, 8)
    assert link_shares(cluster, tpl, levels, 1, "stage")[0] == 1  # rule (c): a receive link per last-stage vGPU
    prof = _profile("m", [400], cut_bytes=400_000, levels=(1, 2))  # 320 µs per sample at 10 Gbit/s
    key = lambda c: (c.template, c.levels, c.bounds, c.batch)  # noqa: E731
    server = {key(c): c for c in enumerate_configs(prof, cluster, 10**6, 2, prune=False, link_share="server")}
    stage = {key(c): c for c in enumerate_configs(prof, cluster, 10**6, 2, prune=False, link_share="stage")}
    assert server.keys() == stage.keys()
    c_server, c_stage = server[(tpl, levels, (0, 1, 2), 1)], stage[(tpl, levels, (0, 1, 2), 1)]
    assert c_stage.xput[0] < c_server.xput[0]  # the T4 uplink shared by 4 instead of 2 caps the first stage
    assert c_stage.xput[1] >= c_server.xput[1]  # the L4 stage receives on its own link
    with pytest.raises(UserError, match="link-share"):
        PPipePlanConfig(link_share="nic").validate()
    with pytest.raises(UserError, match="spare"):
        PPipePlanConfig(spare="keep").validate()
