"""PPipe MILP (Appendix A.2), NP and DART-r: constraints, brute force, ordering of planned throughput."""

from __future__ import annotations

import functools
import itertools
import math
import random

import numpy as np
import pytest

from shepherd.core.errors import UserError
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import custom_cluster, make_cluster
from shepherd.core.pipelines.plan import from_frame, place, to_frame, extra_of, verify
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_baselines import solve_dart_r, solve_np
from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines

from conftest import PPIPE_DATA, needs_ppipe

DATA = PPIPE_DATA
pytestmark = needs_ppipe
EXACT = SolverConfig("highs", 60.0, 0.0)
FAST = SolverConfig("highs", 20.0, 0.01)


@functools.lru_cache(maxsize=None)
def profiles() -> dict[str, blocks.BlockProfile]:
    return {p.model: p for p in blocks.read_ppipe_dir(DATA)}


def group(seed: int) -> list[str]:
    names = sorted(profiles())
    random.Random(seed).shuffle(names)
    return names[:3]


def check_constraints(plan, profs) -> None:
    """Independent re-derivation of the A.2 constraints from raw block arrays."""
    c = plan.cluster
    phys: dict[tuple[str, int], int] = {}
    for p in plan.pipelines:
        prof = profs[p.model]
        assert 1 <= len(p.stages) <= 3
        bounds = [p.stages[0].start] + [s.end for s in p.stages]
        assert bounds[0] == 0 and bounds[-1] == prof.blocks and all(a < b for a, b in zip(bounds, bounds[1:]))
        total = 0.0
        for j, s in enumerate(p.stages):
            arr = prof.lat[(s.hardware, s.k)]
            assert p.batch <= arr.shape[1]  # unified batch profiled at every stage's share
            lat = int(arr[s.start:s.end, p.batch - 1].sum())
            assert lat == s.latency_us and s.vgpus >= 1
            tr = 0.0 if j == len(p.stages) - 1 else p.batch * prof.cut_bytes[s.end - 1] * 8 / (c.bandwidth_gbps * 1000)
            total += lat + tr
            assert s.xput_per_vgpu <= p.batch * 1e6 / lat + 1e-6
            phys[(s.hardware, s.k)] = phys.get((s.hardware, s.k), 0) + s.vgpus
        assert total <= plan.slo_us[p.model] * (1 - plan.margin) + 1.0  # Eq. 27 with the margin
    for h in c.hardware:
        assert sum(math.ceil(n / k) for (hh, k), n in phys.items() if hh == h) <= c.count(h)  # Eq. 23
    assert len({p.batch for p in plan.pipelines}) >= 1


@pytest.mark.parametrize("hc", ["HC1-S", "HC4-S"])
def test_ppipe_plan_satisfies_a2_and_beats_baselines(hc):
    profs = profiles()
    g = group(1)
    w = dict(zip(g, [0.30, 0.33, 0.37]))
    cluster = make_cluster(hc)
    cfg = PPipePlanConfig()
    pp = solve_pipelines([profs[m] for m in g], w, cluster, cfg, FAST)
    npl = solve_np([profs[m] for m in g], w, cluster, cfg, FAST)
    dr = solve_dart_r([profs[m] for m in g], w, cluster, cfg, FAST)
    for plan in (pp, npl, dr):
        assert verify(plan, profs) == []
        check_constraints(plan, profs)
        assert len(place(plan)) == sum(s.vgpus for p in plan.pipelines for s in p.stages)
    assert pp.normalized_xput >= npl.normalized_xput * (1 - 0.01) - 1e-6
    assert pp.normalized_xput >= dr.normalized_xput * (1 - 0.01) - 1e-6
    assert all(len(p.stages) == 1 for p in npl.pipelines)
    assert all(s.k == 1 for p in dr.pipelines for s in p.stages)


def test_plan_frame_round_trip():
    profs = profiles()
    g = group(2)[:1]
    plan = solve_pipelines([profs[g[0]]], {g[0]: 1.0}, make_cluster("HC2-S"), PPipePlanConfig(), FAST)
    back = from_frame(to_frame(plan), extra_of(plan))
    assert back.pipelines == plan.pipelines and back.cluster == plan.cluster
    assert abs(back.normalized_xput - plan.normalized_xput) < 1e-9


def _brute_force(prof, cluster, budget, max_parts):
    """Max throughput of one DNN on a cluster of one L4 and one P4, by enumeration from raw arrays."""
    bw = cluster.bandwidth_gbps
    per = prof.cut_bytes * 8 / (bw * 1000)

    def best(template, counts, level):
        """Best min_d X_d·g_d over all partitions/batches of ``template`` (L4 at ``level``)."""
        out = 0.0
        d = len(template)
        for inner in itertools.combinations(range(1, prof.blocks), d - 1):
            bounds = (0, *inner, prof.blocks)
            ks = [level if h == "L4" else 1 for h in template]
            maxb = min(prof.lat[(h, k)].shape[1] for h, k in zip(template, ks))
            for b in range(1, maxb + 1):
                lat = [int(prof.lat[(h, k)][bounds[i]:bounds[i + 1], b - 1].sum()) for i, (h, k) in
                       enumerate(zip(template, ks))]
                trs = [math.ceil(b * per[bounds[i + 1] - 1]) for i in range(d - 1)]
                if sum(lat) + sum(trs) > budget:
                    continue
                xs = []
                for i, (h, k) in enumerate(zip(template, ks)):
                    x = b * 1e6 / lat[i]
                    share = k * cluster.per_server(h)
                    if i > 0:
                        x = min(x, 1e6 / (per[bounds[i] - 1] * share))
                    if i < d - 1:
                        x = min(x, 1e6 / (per[bounds[i + 1] - 1] * share))
                    xs.append(x * counts[i])
                out = max(out, min(xs))
        return out

    tpls = [t for n in range(1, max_parts + 1) for t in itertools.product(["L4", "P4"], repeat=n)]
    top = 0.0
    for level in (1, 2, 3, 4):
        # every template gets a vector of vGPU counts (0 = unused); L4 slots = level, P4 slots = 1
        options = []
        for t in tpls:
            opts = [None] + [c for c in itertools.product(range(1, 5), repeat=len(t))
                             if sum(n for h, n in zip(t, c) if h == "L4") <= level
                             and sum(n for h, n in zip(t, c) if h == "P4") <= 1]
            options.append(opts)
        values = {}
        for combo in itertools.product(*options):
            l4 = sum(n for t, c in zip(tpls, combo) if c for h, n in zip(t, c) if h == "L4")
            p4 = sum(n for t, c in zip(tpls, combo) if c for h, n in zip(t, c) if h == "P4")
            if l4 > level or p4 > 1:
                continue
            total = 0.0
            for t, c in zip(tpls, combo):
                if c:
                    key = (t, c, level)
                    if key not in values:
                        values[key] = best(t, c, level)
                    total += values[key]
            top = max(top, total)
    return top


@pytest.mark.parametrize("model", ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "repvgg-b3"])
def test_milp_matches_brute_force_on_tiny_cluster(model):
    prof = profiles()[model]
    cluster = custom_cluster({"L4": 1, "P4": 1}, 10.0)
    cfg = PPipePlanConfig(max_partitions=2, candidates=0)
    plan = solve_pipelines([prof], {model: 1.0}, cluster, cfg, EXACT)
    brute = _brute_force(prof, cluster, prof.slo_us() * (1 - cfg.slo_margin), 2)
    assert brute > 0
    assert abs(plan.normalized_xput - brute) <= 1e-6 * brute
    check_constraints(plan, profiles())


def test_more_slo_more_throughput():
    prof = profiles()[group(3)[0]]
    c = make_cluster("HC3-S")
    tight = solve_pipelines([prof], {prof.model: 1.0}, c, PPipePlanConfig(slo_margin=0.6), FAST)
    loose = solve_pipelines([prof], {prof.model: 1.0}, c, PPipePlanConfig(slo_margin=0.2), FAST)
    assert loose.normalized_xput >= tight.normalized_xput * 0.99


def test_infeasible_slo_and_missing_gpu_type_are_user_errors():
    prof = profiles()[group(4)[0]]
    with pytest.raises(UserError, match="no feasible pipeline"):
        solve_pipelines([prof], {prof.model: 1.0}, make_cluster("HC1-S"), PPipePlanConfig(slo_scale=0.5), FAST)
    lat = {k: v for k, v in prof.lat.items() if k[0] != "P4"}
    stripped = blocks.BlockProfile(prof.model, prof.blocks, lat, prof.cut_bytes, prof.ref_latency_us)
    with pytest.raises(UserError, match="no P4"):
        solve_pipelines([stripped], {prof.model: 1.0}, make_cluster("HC1-S"), PPipePlanConfig(), FAST)


@pytest.mark.parametrize("model", ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "repvgg-b3"])
def test_points_formulation_matches_brute_force(model):
    """The efficient-point reformulation is exact: same optimum as the enumeration from raw arrays."""
    prof = profiles()[model]
    cluster = custom_cluster({"L4": 1, "P4": 1}, 10.0)
    cfg = PPipePlanConfig(max_partitions=2, candidates=0, formulation="points")
    plan = solve_pipelines([prof], {model: 1.0}, cluster, cfg, EXACT)
    brute = _brute_force(prof, cluster, prof.slo_us() * (1 - cfg.slo_margin), 2)
    assert abs(plan.normalized_xput - brute) <= 1e-6 * brute
    check_constraints(plan, profiles())


def test_points_formulation_agrees_with_counts_on_small_cluster():
    """Both formulations of the same MILP reach the same optimum (exact solves) and satisfy A.2."""
    profs = profiles()
    g = group(5)
    w = dict(zip(g, [0.5, 0.3, 0.2]))
    cluster = make_cluster("HC2-S")
    ps = [profs[m] for m in g]
    a = solve_pipelines(ps, w, cluster, PPipePlanConfig(formulation="counts"), EXACT)
    b = solve_pipelines(ps, w, cluster, PPipePlanConfig(formulation="points"), EXACT)
    for plan in (a, b):
        assert verify(plan, profs) == []
        check_constraints(plan, profs)
    assert abs(a.normalized_xput - b.normalized_xput) <= 1e-6 * a.normalized_xput


def test_efficient_points_are_minimal_and_fit():
    """Each point's vGPU vector is the least serving its throughput, and fits the cluster."""
    from shepherd.solvers.ppipe_configs import efficient_points, enumerate_configs

    prof = profiles()[group(6)[0]]
    cluster = make_cluster("HC1-S")
    counts = {h: cluster.count(h) for h in cluster.hardware}
    cfgs = enumerate_configs(prof, cluster, prof.slo_us() * 0.6)
    for c in cfgs[:: max(1, len(cfgs) // 40)]:
        pts = efficient_points(c, counts)
        assert [p[0] for p in pts] == sorted({p[0] for p in pts})
        for x, g in pts:
            assert abs(x - min(xv * n for xv, n in zip(c.xput, g))) <= 1e-9 * x
            assert all(xv * (n - 1) < x - 1e-9 * x or n == 1 for xv, n in zip(c.xput, g))
            for h in counts:
                assert sum(n / k for hh, k, n in zip(c.template, c.levels, g) if hh == h) <= counts[h] + 1e-9


def test_unknown_formulation_is_a_user_error():
    with pytest.raises(UserError, match="formulation"):
        PPipePlanConfig(formulation="magic").validate()


def test_hybrid_formulation_reaches_the_same_optimum():
    """"counts then points": a valid plan, and the same optimum (within the gaps) as counts alone."""
    profs = profiles()
    g = group(5)
    w = dict(zip(g, [0.5, 0.3, 0.2]))
    ps = [profs[m] for m in g]
    a = solve_pipelines(ps, w, make_cluster("HC2-S"), PPipePlanConfig(), FAST)
    h = solve_pipelines(ps, w, make_cluster("HC2-S"), PPipePlanConfig(formulation="hybrid"), FAST)
    assert h.meta["formulation"] == "hybrid" and h.meta["hybrid_used"] in ("counts", "points")
    assert verify(h, profs) == []
    if h.meta["status"] == "optimal" and a.meta["status"] == "optimal":  # both within 1 % of one optimum
        assert abs(a.normalized_xput - h.normalized_xput) <= 0.021 * a.normalized_xput
