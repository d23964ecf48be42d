"""The swap/move local search that improves the MILP's start (solvers/symphony_swap; Symphony Appendix A)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from shepherd.solvers import symphony_baselines as sb
from shepherd.solvers import symphony_partition as sp
from shepherd.solvers import symphony_swap as sw


def run(inst: sp.PartitionInstance, a: np.ndarray) -> np.ndarray:
    return sw.improve(a, inst.rate, inst.static_mb, inst.dynamic_mb, inst.parts, inst.w, inst.rate_cap,
                      inst.memory_cap_mb)


def test_swap_balances_an_obvious_case():
    inst = sp.PartitionInstance(("a", "b", "c", "d"), [3, 3, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], 2, 100.0)
    before = np.array([0, 0, 1, 1])  # rates 6 | 2
    after = run(inst, before)
    assert sp.objective(inst, before) == 2.0 and sp.objective(inst, after) == 0.0


def test_a_step_that_breaks_the_memory_cap_is_refused():
    """Rates 4 | 0 balance by moving or swapping a model, but every such step needs 62 MB in some part."""
    def inst(cap):
        return sp.PartitionInstance(("a", "b", "c"), [2.0, 2.0, 0.0], [1.0, 1.0, 1.0], [10.0, 50.0, 60.0], 2, cap,
                                    weight=0.0)
    before = np.array([0, 0, 1])
    assert sp.verify(inst(61.5), before) == []
    assert (run(inst(61.5), before) == before).all()
    assert sp.objective(inst(100.0), run(inst(100.0), before)) == 0.0  # the same step with room for it


@settings(max_examples=40)
@given(st.integers(0, 10_000), st.integers(5, 30), st.integers(2, 5), st.floats(1.05, 2.0))
def test_swaps_never_worsen_eq4_and_keep_every_cap(seed, m, parts, slack):
    inst = sb.zoo_instance(m, parts, seed, rate_slack=slack, memory_slack=slack)
    start = sp.greedy(inst)
    if start is None:
        return
    after = run(inst, start)
    assert sp.verify(inst, after) == []
    assert sp.objective(inst, after) <= sp.objective(inst, start) + 1e-12
    assert (run(inst, start) == after).all()  # deterministic


def test_swaps_improve_the_greedy_start_at_scale():
    """On A.2-sized instances (here 400 × 10) the local search lowers Eq. (4) well below the greedy start."""
    inst = sb.zoo_instance(400, 10, 1)
    start = sp.greedy(inst)
    after = run(inst, start)
    assert sp.objective(inst, after) < 0.5 * sp.objective(inst, start)


def test_one_part_or_one_model_is_left_alone():
    one_part = sp.PartitionInstance(("a", "b"), [1.0, 2.0], [1.0, 1.0], [0.0, 0.0], 1, 10.0)
    assert (run(one_part, np.array([0, 0])) == [0, 0]).all()
    assert sp.solve_partition(one_part).result.status == "optimal"
    one_model = sp.PartitionInstance(("a",), [1.0], [1.0], [0.0], 3, 10.0)
    assert sp.verify(one_model, run(one_model, np.array([2]))) == []
