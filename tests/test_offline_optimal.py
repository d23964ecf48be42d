"""Offline optimum (Shepherd §5.1 Eq. 3): ZILP vs brute force; Flex ≥ OPT/(12.62·K) (Theorem 5.2)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shepherd.solvers.affinity import affinity_k
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.instances import OFFLINE_MODELS, offline_profiles, offline_trace, random_offline_instance
from shepherd.solvers.offline_optimal import OfflineInstance, check_schedule, solve_offline

EXACT = SolverConfig(name="highs", time_limit_s=60, gap=0.0)
MODELS = OFFLINE_MODELS


def _random_instance(rng, n, gpus):
    return random_offline_instance(rng, n, gpus)


def brute_force_one_gpu(inst: OfflineInstance) -> int:
    """Best count over all batch sequences on one GPU (left-justified starts)."""
    n = len(inst.model)
    best = 0

    def dfs(remaining: frozenset, now: int, served: int) -> None:
        nonlocal best
        best = max(best, served)
        for m in set(inst.model[r] for r in remaining):
            pool = sorted(r for r in remaining if inst.model[r] == m)
            for size in range(1, len(pool) + 1):
                for batch in itertools.combinations(pool, size):
                    start = max(now, max(int(inst.arrival_us[r]) for r in batch))
                    end = start + int(inst.latency_us[m][size])
                    if all(inst.deadline_us[r] >= end for r in batch):
                        dfs(remaining - set(batch), end, served + size)

    dfs(frozenset(range(n)), 0, 0)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_zilp_equals_brute_force_on_one_gpu(seed):
    rng = np.random.default_rng(seed)
    inst = _random_instance(rng, 6, 1)
    sched = solve_offline(inst, 1000, EXACT)
    assert sched.exact
    assert sched.served == brute_force_one_gpu(inst)
    assert check_schedule(inst, sched.batches) == []
    assert sum(len(b["requests"]) for b in sched.batches) == sched.served


def test_more_gpus_never_serve_fewer():
    rng = np.random.default_rng(7)
    inst = _random_instance(rng, 10, 1)
    one = solve_offline(inst, 1000, EXACT).served
    inst.gpus = 2
    two = solve_offline(inst, 1000, EXACT)
    assert two.served >= one and check_schedule(inst, two.batches) == []


def test_flex_is_within_theorem_5_2_of_opt():
    """Random 1–2 GPU instances with ≤ 12 requests: Flex's good count ≥ OPT / (12.62·K)."""
    engine = pytest.importorskip("shepherd.core.engine")
    profiles = offline_profiles()
    k = affinity_k(list(MODELS.values()))
    rng = np.random.default_rng(2023)
    worst = 1.0
    for _ in range(25):
        inst = _random_instance(rng, int(rng.integers(2, 13)), int(rng.integers(1, 3)))
        opt = solve_offline(inst, 1000, EXACT).served
        res = engine.simulate(offline_trace(inst), profiles, "flex", gpus=inst.gpus, seed=0,
                              overhead=engine.OverheadConfig(mode="none"), max_batch=16)
        assert res.good <= opt  # nothing beats the offline optimum
        assert res.good * 12.62 * k >= opt
        if opt:
            worst = min(worst, res.good / opt)
    print(f"worst observed Flex/OPT ratio: {worst:.3f} (bound 1/(12.62·K) = {1 / (12.62 * k):.3f})")
    assert worst > 0
