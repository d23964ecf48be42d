"""HERD (Shepherd §4): class formulation vs brute force and the direct big-M form; constraints (a)–(e)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shepherd.core.errors import UserError
from shepherd.solvers.affinity import affinity_sets
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.herd import HerdConfig, HerdInstance, pairwise_ok, solve_herd, verify
from shepherd.solvers.herd_direct import solve_herd_direct

EXACT = SolverConfig(name="highs", time_limit_s=30, gap=0.0)


def _partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for k in range(len(part)):
            yield part[:k] + [[first] + part[k]] + part[k + 1:]
        yield [[first]] + part


def brute_force(inst: HerdInstance, cfg: HerdConfig) -> float:
    """Optimum of max min bt by enumerating every partition and every size allocation."""
    best = -math.inf
    for part in _partitions(list(range(len(inst.models)))):
        if any(len({int(inst.affinity_set[i]) for i in b}) > 1 for b in part):
            continue
        if any(inst.memory_mb[b].sum() > cfg.capacity_mb for b in part):
            continue
        nmax = [max(inst.demand[i] for i in b) for b in part]
        cands = sorted({s / n for n in nmax for s in range(1, cfg.group_limit + 1)}, reverse=True)
        for t in cands:
            need = [max(1, math.ceil(t * n - 1e-9)) for n in nmax]
            if max(need) <= cfg.group_limit and sum(need) <= cfg.gpus:
                best = max(best, t)
                break
    return best


def _inst(demand, memory, sets=None):
    m = len(demand)
    return HerdInstance([f"m{i}" for i in range(m)], np.asarray(demand, float), np.asarray(memory, float),
                        np.asarray(sets if sets is not None else [0] * m, int))


HAND_BUILT = [
    # (demand, memory MB, affinity sets, gpus, group limit, capacity MB)
    ([1.0, 1.0, 1.0], [100, 100, 100], None, 6, 12, 1000),
    ([4.0, 1.0, 0.5, 0.5], [600, 600, 300, 300], None, 10, 4, 1000),  # memory forces splits
    ([2.0, 3.0, 1.0, 1.0, 0.2], [100] * 5, [0, 1, 0, 1, 1], 7, 3, 1000),  # two affinity sets
    ([5.0, 0.1], [900, 900], None, 5, 12, 1000),  # memory forces two groups, heavy model gets more GPUs
]


@pytest.mark.parametrize("demand,memory,sets,gpus,glimit,cap", HAND_BUILT)
def test_herd_equals_brute_force_and_direct_form(demand, memory, sets, gpus, glimit, cap):
    inst = _inst(demand, memory, sets)
    cfg = HerdConfig(gpus=gpus, group_limit=glimit, gpu_memory_mb=cap, reserve_mb=0)
    plan = solve_herd(inst, cfg, EXACT)
    direct = solve_herd_direct(inst, cfg, EXACT)
    opt = brute_force(inst, cfg)
    assert plan.objective == pytest.approx(opt, rel=1e-6)
    assert direct.objective == pytest.approx(opt, rel=1e-6)
    assert plan.result.status == "optimal"
    assert verify(inst, cfg, plan.groups) == []
    assert verify(inst, cfg, direct.groups) == []


def test_second_phase_uses_all_gpus_in_full_groups():
    inst = _inst([1.0] * 13, [300] * 13)
    cfg = HerdConfig(gpus=36, group_limit=12)
    plan = solve_herd(inst, cfg, EXACT)
    assert sorted(g.size for g in plan.groups) == [12, 12, 12]
    counts = sorted(len(g.models) for g in plan.groups)
    assert counts == [4, 4, 5]  # load spread over the class's groups


@st.composite
def instances(draw):
    m = draw(st.integers(1, 6))
    demand = draw(st.lists(st.floats(0.05, 6.0), min_size=m, max_size=m))
    memory = draw(st.lists(st.floats(50, 900), min_size=m, max_size=m))
    nsets = draw(st.integers(1, 2))
    sets = draw(st.lists(st.integers(0, nsets - 1), min_size=m, max_size=m))
    glimit = draw(st.integers(1, 5))
    gpus = draw(st.integers(len(set(sets)), 14))
    return _inst(demand, memory, sets), HerdConfig(gpus=gpus, group_limit=glimit, gpu_memory_mb=1000, reserve_mb=0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_constraints_hold_and_bound_is_valid(case):
    inst, cfg = case
    opt = brute_force(inst, cfg)
    plan = solve_herd(inst, cfg, EXACT)
    if opt == -math.inf:  # no feasible plan exists
        assert not plan.groups and plan.result.status == "infeasible"
        return
    assert verify(inst, cfg, plan.groups) == []
    assert plan.objective <= opt * (1 + 1e-9)  # a real plan never beats the optimum
    assert plan.result.bound >= opt * (1 - 1e-9)  # the relaxation bound is a true upper bound
    if plan.rounds == 1:
        assert plan.objective == pytest.approx(opt, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 50), st.floats(0.5, 80)), min_size=1, max_size=8),
       st.floats(1.0, 30.0))
def test_affinity_constraint_holds_on_plans(params, k_bar):
    ab = {f"m{i}": p for i, p in enumerate(params)}
    sets = affinity_sets(ab, k_bar)
    set_of = {m: s for s, members in enumerate(sets) for m in members}
    models = list(ab)
    inst = HerdInstance(models, np.ones(len(models)), np.full(len(models), 100.0),
                        np.array([set_of[m] for m in models]))
    cfg = HerdConfig(gpus=len(sets) * 3, group_limit=3, affinity_k=k_bar)
    plan = solve_herd(inst, cfg, EXACT)
    alpha = np.array([ab[m][0] for m in models])
    beta = np.array([ab[m][1] for m in models])
    assert verify(inst, cfg, plan.groups) == []
    assert pairwise_ok(alpha, beta, plan.groups, k_bar)


def test_model_larger_than_gpu_memory_is_a_user_error():
    inst = _inst([1.0, 1.0], [100, 5000])
    with pytest.raises(UserError, match="infeasible"):
        solve_herd(inst, HerdConfig(gpus=4, gpu_memory_mb=4000, reserve_mb=0), EXACT)


def test_too_few_gpus_for_the_memory_is_infeasible():
    inst = _inst([1.0, 1.0, 1.0], [800, 800, 800])
    plan = solve_herd(inst, HerdConfig(gpus=2, gpu_memory_mb=1000, reserve_mb=0), EXACT)
    assert plan.result.status == "infeasible" and not plan.groups
