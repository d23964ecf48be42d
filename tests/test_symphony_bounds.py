"""Valid lower bounds on ΔR, ΔS of Symphony's partitioning MILP (Appendix A.1; solvers/symphony_bounds)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from shepherd.solvers import symphony_baselines as sb
from shepherd.solvers import symphony_bounds as bd
from shepherd.solvers import symphony_partition as sp
from shepherd.solvers.backend import SolverConfig


def best_deviation(values, parts: int) -> float:
    """min over all assignments of max_j |V_j − V̄| (enumeration)."""
    v = np.asarray(values, dtype=float)
    mean = v.sum() / parts
    best = np.inf
    for a in itertools.product(range(parts), repeat=len(v)):
        best = min(best, float(np.abs(np.bincount(a, v, parts) - mean).max()))
    return best


@pytest.mark.parametrize("values, parts, expected", [
    ([5, 1, 1, 1], 2, 1.0),  # the largest model alone exceeds the mean (5 vs 4)
    ([3, 3, 3], 2, 1.5),  # two of the three share a part: 6 vs 4.5
    ([1, 1], 3, 2 / 3),  # a part stays empty: 0 vs 2/3
    ([1, 1, 1], 2, 0.5),  # integer loads around a mean of 1.5
    ([4, 2, 2, 6], 2, 1.0),  # gcd 2: loads are even, the mean 7 is odd
    ([2, 2, 2, 2], 2, 0.0),  # a perfect split exists
])
def test_floor_matches_hand_computed_optimum(values, parts, expected):
    assert bd.deviation_floor(np.array(values, float), parts) == pytest.approx(expected)
    assert best_deviation(values, parts) == pytest.approx(expected)  # each case is tight


def test_integrality_floor_is_exact_near_a_multiple():
    """A float mean a hair above an integer must not read as 'almost g away'."""
    values = np.array([0.1 * 3, 0.2])  # not integers: no integrality term
    assert bd.integrality_floor(values, 2) == 0.0
    big = np.array([2.0**40 + 1, 2.0**40 + 1, 2.0**40 + 1])
    assert bd.integrality_floor(big, 3) == 0.0
    assert bd.integrality_floor(big, 2) == pytest.approx((2.0**40 + 1) / 2)


@settings(max_examples=80)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=6), st.integers(1, 3), st.booleans())
def test_floor_never_exceeds_the_enumerated_optimum(values, parts, fractional):
    v = np.array(values, float) * (0.37 if fractional else 1.0)
    assert bd.deviation_floor(v, parts) <= best_deviation(v, parts) + 1e-9


@settings(max_examples=25)
@given(st.integers(0, 10_000), st.integers(2, 3), st.integers(4, 7))
def test_objective_floor_never_exceeds_the_brute_force_optimum(seed, parts, m):
    inst = sb.zoo_instance(m, parts, seed, rate_slack=2.0, memory_slack=2.0)
    best = sb.brute_force(inst)
    floor = bd.objective_floor(inst.rate, inst.static_mb, parts, inst.w)[2]
    if best is not None:
        assert floor <= best[0] * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("seed", range(3))
def test_milp_bound_includes_the_floor_and_optimum_is_unchanged(seed):
    inst = sb.zoo_instance(6, 3, seed, rate_slack=2.0, memory_slack=2.0)
    best = sb.brute_force(inst)
    part = sp.solve_partition(inst, SolverConfig(time_limit_s=20.0, gap=0.0))
    assert best is not None and part.result.status == "optimal"
    assert part.result.objective == pytest.approx(best[0], rel=1e-6, abs=1e-9)
    assert part.extra["floor"] <= part.result.bound + 1e-12 <= best[0] + 1e-9
