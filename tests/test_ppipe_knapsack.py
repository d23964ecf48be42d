"""The knapsack relaxation of the PPipe MILP: DP against brute force, a valid bound, the same optimum as counts."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import custom_cluster, make_cluster
from shepherd.core.pipelines.plan import verify
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_knapsack import Item, knapsack_bound, knapsack_table, max_min
from shepherd.solvers.ppipe_milp import PPipePlanConfig, candidate_configs, solve_configs, solve_pipelines

from conftest import PPIPE_DATA, needs_ppipe

DATA = PPIPE_DATA
EXACT = SolverConfig("highs", 60.0, 0.0)
GROUP = ("fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "repvgg-b3", "googlenet-v3-pytorch")

item = st.builds(lambda a, b, x: Item(None, (), float(x), (a, b)),  # type: ignore[arg-type]
                 st.integers(0, 4), st.integers(0, 4), st.integers(1, 50))
groups = st.lists(st.lists(item, min_size=1, max_size=3), min_size=1, max_size=3)


def _brute_table(gs: list[list[Item]], A: int, B: int) -> np.ndarray:
    """Most throughput within (a, b) by trying every choice of at most one item per group."""
    out = np.zeros((A + 1, B + 1))
    for pick in itertools.product(*[[None, *g] for g in gs]):
        chosen = [it for it in pick if it is not None]
        ca, cb = sum(it.cost[0] for it in chosen), sum(it.cost[1] for it in chosen)
        x = sum(it.xput for it in chosen)
        if ca <= A and cb <= B:
            out[ca:, cb:] = np.maximum(out[ca:, cb:], x)
    return out


@settings(max_examples=60, deadline=None)
@given(groups, st.integers(0, 6), st.integers(0, 6))
def test_table_is_the_multiple_choice_knapsack(gs, A, B):
    assert np.array_equal(knapsack_table(gs, (A, B))[-1], _brute_table(gs, A, B))


@settings(max_examples=40, deadline=None)
@given(st.lists(groups, min_size=1, max_size=3), st.lists(st.sampled_from([0.2, 0.3, 0.5]), min_size=3, max_size=3),
       st.integers(0, 5), st.integers(0, 5))
def test_max_min_matches_every_split(per_dnn, ws, A, B):
    """The bisection's t brackets the best split found by trying every (a_m, b_m)."""
    finals = tuple(knapsack_table(gs, (A, B))[-1] for gs in per_dnn)
    ws = tuple(ws[: len(finals)])
    best = 0.0
    for split in itertools.product(itertools.product(range(A + 1), range(B + 1)), repeat=len(finals)):
        if sum(s[0] for s in split) <= A and sum(s[1] for s in split) <= B:
            best = max(best, min(F[a, b] / w for F, w, (a, b) in zip(finals, ws, split)))
    lo, hi, split = max_min(finals, ws, B)
    assert lo <= best * (1 + 1e-12) and best <= hi * (1 + 1e-12) and hi - lo <= 1e-8 * max(hi, 1)
    assert sum(a for a, _ in split) <= A and sum(b for _, b in split) <= B
    assert all(F[a, b] >= w * lo * (1 - 1e-12) for F, w, (a, b) in zip(finals, ws, split))


needs_data = needs_ppipe


@functools.lru_cache(maxsize=None)
def _profiles() -> dict[str, blocks.BlockProfile]:
    return {p.model: p for p in blocks.read_ppipe_dir(DATA)}


@needs_data
@pytest.mark.parametrize("hc", ["HC2-S", "HC4-S"])
def test_bound_is_valid_and_the_knapsack_solve_reaches_the_counts_optimum(hc):
    """Exact solves: knapsack's t bound ≥ the counts optimum, and "knapsack" plans the same optimum."""
    profs = _profiles()
    ps = [profs[m] for m in GROUP]
    w = dict(zip(GROUP, [0.30, 0.33, 0.37]))
    cluster = make_cluster(hc)
    cfg = PPipePlanConfig(formulation="counts")
    configs = candidate_configs(ps, cluster, cfg, w, EXACT)
    a = solve_configs(configs, ps, w, cluster, cfg, EXACT)
    kb = knapsack_bound(configs, w, cluster)
    assert kb is not None and kb.t_upper >= a.normalized_xput * (1 - 1e-9)
    for m, items in kb.selection.items():  # the DP's selection reaches t_lower in the relaxation
        assert sum(it.xput for it in items) >= w[m] * kb.t_lower * (1 - 1e-9)
        assert len({it.config.template for it in items}) == len(items)
        assert sum(it.xput for it in kb.fuller[m]) >= sum(it.xput for it in items)
    for sel in (kb.selection, kb.fuller):  # within the cluster, GPUs counted as Eq. 23 does
        for i, h in enumerate(cluster.hardware):
            assert sum(it.cost[i] for items in sel.values() for it in items) <= cluster.count(h) * kb.units[i]
    k = solve_configs(configs, ps, w, cluster, PPipePlanConfig(formulation="knapsack"), EXACT)
    assert verify(k, profs) == []
    assert k.meta["status"] == "optimal"
    assert k.meta["objective"] >= a.meta["objective"] * (1 - 1e-6)  # the same optimum, or better if counts timed out
    assert a.normalized_xput * (1 - 1e-6) <= k.normalized_xput <= kb.t_upper * (1 + 1e-7)
    assert k.meta["knapsack_bound"] == kb.t_upper


@needs_data
def test_knapsack_matches_brute_force_on_tiny_cluster():
    """One L4 + one P4: the knapsack solve equals the exhaustive optimum of test_ppipe_milp."""
    from test_ppipe_milp import _brute_force

    model = GROUP[1]
    prof = _profiles()[model]
    cluster = custom_cluster({"L4": 1, "P4": 1}, 10.0)
    cfg = PPipePlanConfig(max_partitions=2, candidates=0, formulation="knapsack")
    plan = solve_pipelines([prof], {model: 1.0}, cluster, cfg, EXACT)
    brute = _brute_force(prof, cluster, prof.slo_us() * (1 - cfg.slo_margin), 2)
    assert abs(plan.normalized_xput - brute) <= 1e-6 * brute


@needs_data
def test_knapsack_plan_is_deterministic():
    profs = _profiles()
    ps = [profs[m] for m in GROUP]
    w = dict(zip(GROUP, [0.5, 0.3, 0.2]))
    solver = SolverConfig("highs", 30.0, 0.01)
    a, b = (solve_pipelines(ps, w, make_cluster("HC4-S"), PPipePlanConfig(), solver) for _ in range(2))
    assert a.pipelines == b.pipelines and a.meta["knapsack_bound"] == b.meta["knapsack_bound"]
    assert math.isfinite(a.meta["knapsack_bound"])


@needs_data
def test_large_clusters_skip_the_relaxation_and_still_plan(monkeypatch):
    """HC1-L scaled to 10,000 GPUs: the DP grid (30,000 × 90,000 units per table) is past MAX_GRID_CELLS,
    so the relaxation is skipped before any table is built or any efficient point enumerated (enumerating
    them for 100,000 GPUs took ~45 s and 2.6 GB per cell) and the MILP plans alone; at 100 GPUs it runs."""
    from shepherd.solvers import ppipe_knapsack
    from shepherd.solvers.ppipe_knapsack import MAX_GRID_CELLS

    profs = _profiles()
    ps = [profs[m] for m in GROUP]
    w = dict(zip(GROUP, [0.30, 0.33, 0.37]))
    cfg = PPipePlanConfig()
    big, small = make_cluster("HC1-L").scaled(10_000), make_cluster("HC1-L")
    configs = candidate_configs(ps, big, cfg, w, EXACT)
    enumerate_points = ppipe_knapsack.typed_points
    monkeypatch.setattr(ppipe_knapsack, "typed_points", lambda *a: pytest.fail("points enumerated"))
    assert knapsack_bound(configs, w, big) is None
    monkeypatch.setattr(ppipe_knapsack, "typed_points", enumerate_points)
    assert knapsack_bound(candidate_configs(ps, small, cfg, w, EXACT), w, small) is not None
    assert 12 * 25 * 12 * 75 < MAX_GRID_CELLS  # Table 1's 100-GPU clusters keep the relaxation
    plan = solve_pipelines(ps, w, big, cfg, SolverConfig("highs", 60.0, 0.01))
    assert verify(plan, profs) == [] and "knapsack_bound" not in plan.meta


typed_item = st.tuples(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)), st.integers(1, 40))
typed_groups = st.lists(st.lists(typed_item, min_size=1, max_size=3), min_size=1, max_size=2)


@settings(max_examples=50, deadline=None)
@given(st.lists(typed_groups, min_size=1, max_size=2), st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
       st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
       st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)))
def test_surrogate_projection_never_cuts_off_a_feasible_selection(per_dnn, caps, row1, row2):
    """Three resource types folded into two weighted sums (any non-negative weights, as
    ``template_items`` folds them): the max-min over the folded DP ≥ the best over every per-type-feasible
    choice of at most one item per group, found by brute force."""
    ws = (0.3, 0.7)[: len(per_dnn)]
    size = (sum(w * c for w, c in zip(row1, caps)), sum(w * c for w, c in zip(row2, caps)))
    folded = [[[Item(None, (), float(x), (sum(w * c for w, c in zip(row1, cost)),  # type: ignore[arg-type]
                                            sum(w * c for w, c in zip(row2, cost))))
                for cost, x in g] for g in gs] for gs in per_dnn]
    finals = tuple(knapsack_table(gs, size)[-1] for gs in folded)
    _lo, hi, _split = max_min(finals, ws, size[1])
    options = []  # per DNN: (per-type cost, throughput) of every choice of at most one item per group
    for gs in per_dnn:
        opts = []
        for pick in itertools.product(*[[None, *g] for g in gs]):
            chosen = [it for it in pick if it is not None]
            opts.append((tuple(sum(it[0][i] for it in chosen) for i in range(3)), sum(it[1] for it in chosen)))
        options.append(opts)
    best = 0.0
    for combo in itertools.product(*options):
        if all(sum(o[0][i] for o in combo) <= caps[i] for i in range(3)):
            best = max(best, min(o[1] / w for o, w in zip(combo, ws)))
    assert best <= hi * (1 + 1e-9)


THREE_TYPES = [({"L4": 1, "T4": 1, "P4": 2}, GROUP[:2]), ({"L4": 2, "T4": 1, "P4": 1}, GROUP),
               ({"V100": 1, "L4": 1, "T4": 1, "P4": 1}, GROUP[1:])]


@needs_data
@pytest.mark.parametrize("counts,group", THREE_TYPES)
def test_surrogate_bound_is_valid_and_the_knapsack_solve_is_exact_on_three_or_four_types(counts, group):
    """Tiny 3- and 4-type clusters solved exactly both ways: the surrogate bound is ≥ the counts optimum,
    every weighting it tries keeps one type exact, and "knapsack" reaches the counts optimum."""
    from shepherd.solvers.ppipe_knapsack import resource_units, surrogate_dims

    profs = _profiles()
    ps = [profs[m] for m in group]
    w = dict(zip(group, [0.30, 0.33, 0.37][: len(group)]))
    cluster = custom_cluster(counts, 10.0)
    cfg = PPipePlanConfig(formulation="counts", max_partitions=2)
    configs = candidate_configs(ps, cluster, cfg, w, EXACT)
    a = solve_configs(configs, ps, w, cluster, cfg, EXACT)
    assert a.meta["status"] == "optimal"
    kb = knapsack_bound(configs, w, cluster)
    assert kb is not None and len(kb.hardware) == len(counts)
    assert kb.t_upper >= a.normalized_xput * (1 - 1e-9)
    hw = tuple(cluster.hardware)
    dims = surrogate_dims(hw, {h: cluster.count(h) for h in hw}, resource_units(configs, hw), None)
    assert dims and all(sum(r1) == 1 and all(x >= 0 for x in r1 + r2) and all(r1[i] == 0 or r2[i] == 0
                                                                            for i in range(len(hw)))
                        for r1, r2 in dims)
    k = solve_configs(configs, ps, w, cluster, PPipePlanConfig(formulation="knapsack", max_partitions=2), EXACT)
    assert verify(k, profs) == [] and k.meta["knapsack_relaxation"] == "surrogate"
    assert abs(k.meta["objective"] - a.meta["objective"]) <= 1e-6 * a.meta["objective"]


FOUR_TYPES = [({"V100": 1, "L4": 1, "T4": 1, "P4": 1}, GROUP[1:]), ({"V100": 1, "L4": 2, "T4": 1, "P4": 1}, GROUP[:2])]


@needs_data
@pytest.mark.parametrize("counts,group", FOUR_TYPES)
def test_every_pair_split_is_a_valid_bound_on_four_types(counts, group):
    """Tiny 4-type clusters solved exactly by "counts": each of :func:`pair_dims`' three splits (each row one
    pair of types, the pairs disjoint and covering all four) bounds the optimum from above, and the bound
    "knapsack" uses is the least over them and the one-type-exact weightings."""
    from shepherd.solvers.ppipe_knapsack import (_solve_on, pair_dims, resource_units, surrogate_dims,
                                                 typed_points)

    profs = _profiles()
    ps = [profs[m] for m in group]
    w = dict(zip(group, [0.45, 0.55]))
    cluster = custom_cluster(counts, 10.0)
    cfg = PPipePlanConfig(formulation="counts", max_partitions=2)
    configs = candidate_configs(ps, cluster, cfg, w, EXACT)
    exact = solve_configs(configs, ps, w, cluster, cfg, EXACT)
    assert exact.meta["status"] == "optimal"
    hw = tuple(cluster.hardware)
    n = {h: cluster.count(h) for h in hw}
    units = resource_units(configs, hw)
    prices = {"V100": 3.0, "L4": 2.0, "T4": 1.0, "P4": 0.5}
    splits = pair_dims(hw, n, units, prices)
    assert len(splits) == 3 and len({frozenset(i for i, x in enumerate(r1) if x) for r1, _ in splits}) == 3
    for r1, r2 in splits:
        assert sum(x > 0 for x in r1) == 2 and sum(x > 0 for x in r2) == 2
        assert all((r1[i] > 0) != (r2[i] > 0) for i in range(4)) and min(r1 + r2) == 0
    points = {m: typed_points(configs[m], n, hw, units) for m in group}
    bounds = [_solve_on(points, w, list(group), hw, n, units, dims)[1]
              for dims in splits + surrogate_dims(hw, n, units, prices)]
    assert min(bounds) >= exact.normalized_xput * (1 - 1e-9)
    kb = knapsack_bound(configs, w, cluster, prices)
    assert kb is not None and kb.t_upper == pytest.approx(min(bounds), rel=1e-12)
    assert pair_dims(hw[:3], {h: n[h] for h in hw[:3]}, units[:3], prices) == []
