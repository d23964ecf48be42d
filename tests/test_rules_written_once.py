"""Rules written once (issue 42 item 1; DESIGN.md "One rule, one place"): each decision rule of
``core/rules/`` is the very function its policy calls and its kernel compiles (``njit(rule)``), not a copy —
and the compiled form gives the Python form's numbers."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

#: (policy module, kernel module, the kernel's compiled name, rules module, rule)
RULES = [
    ("flex", "flex", "_preempt_need", "flex", "preempt_need"),
    ("flex", "flex", "_exit_delay", "flex", "exit_delay"),
    ("flex", "flex", "_smallest", "flex", "smallest"),
    ("queues", "flex", "_largest_feasible", "flex", "largest_feasible"),  # BATCHGEN's step, Flex's queues call it
    ("flex", "flex", "_better_batch", "flex", "better_batch"),  # BATCHGEN's choice across the queues
    ("flex", "flex", "_check_at", "flex", "check_at"),  # the preemption check's time, line 19's re-entry
    ("flex", "flex", "_reenters", "flex", "reenters"),
    ("clockwork", "clockwork", "_batch_for", "clockwork", "batch_for"),
    ("clockwork", "clockwork", "_expiry_cutoff", "clockwork", "expiry_cutoff"),
    ("clockwork", "clockwork", "_urgency", "clockwork", "urgency"),  # the head scan's order
    ("symphony", "symphony", "_window_lo", "symphony", "window_lo"),  # λ's window, the expiry cutoff
    ("symphony", "symphony", "_cutoff", "symphony", "cutoff"),
    ("symphony", "symphony", "_goes_now", "symphony", "goes_now"),  # the grant: schedulable, timers, GPU, rank
    ("symphony", "symphony", "_retry_at", "symphony", "retry_at"),
    ("symphony", "symphony", "_earlier_gpu", "symphony", "earlier_gpu"),
    ("symphony", "symphony", "_prefers_waiting", "symphony", "prefers_waiting"),
    ("symphony", "symphony", "_window_rate", "symphony", "window_rate"),
    ("symphony", "symphony", "_window_start", "symphony", "window_start"),
    ("symphony", "symphony", "_fit", "symphony", "fit"),
    ("symphony", "symphony", "_frontrun", "symphony", "frontrun"),
    ("nexus", "nexus", "_admits", "nexus", "admits"),  # admission under overload, then the token bucket
    ("nexus", "nexus", "_take_token", "nexus", "take_token"),
    ("nexus", "nexus", "_router_start", "nexus", "router_start"),  # an epoch's configuration: routers, re-routing
    ("nexus", "nexus", "_reroute_order", "nexus", "reroute_order"),
    ("nexus", "nexus", "_cycle_over", "nexus", "cycle_over"),  # the duty cycle: its end, slot order, wake-up
    ("nexus", "nexus", "_cycle_slot", "nexus", "cycle_slot"),
    ("nexus", "nexus", "_cycle_wake", "nexus", "cycle_wake"),
    ("wrr", "nexus", "_swrr_pick", "nexus", "swrr_pick"),  # the frontends' router (Nexus's SmoothWeightedRoundRobin)
    ("nexus", "nexus", "_head_misses", "nexus", "head_misses"),  # a duty-cycle slot's head drop
    ("ppipe", "ppipe", "_admit_from", "ppipe", "admit_from"),  # Algorithm 1: rule (b), rule (e), the wait
    ("ppipe", "ppipe", "_fill_wake", "ppipe", "fill_wake"),
    ("ppipe", "ppipe", "_wait_until", "ppipe", "wait_until"),
]


@pytest.mark.parametrize("policy, kernel, compiled, module, rule", RULES)
def test_the_kernel_compiles_the_function_the_policy_calls(policy, kernel, compiled, module, rule):
    fn = getattr(importlib.import_module(f"shepherd.core.rules.{module}"), rule)
    assert getattr(importlib.import_module(f"shepherd.core.engine.fast.{kernel}"), compiled).py_func is fn
    assert getattr(importlib.import_module(f"shepherd.core.policies.{policy}"), rule) is fn


def test_symphony_s_estimator_rules_are_compiled_from_the_module_symphony_rules_calls():
    from shepherd.core.engine.fast import symphony as kernel
    from shepherd.core.policies import symphony_rules
    from shepherd.core.rules import symphony as numbers

    assert symphony_rules.numbers is numbers
    for compiled, name in (("_early_rule", "early"), ("_meter_get", "meter_get"), ("_meter_hit", "meter_hit")):
        assert getattr(kernel, compiled).py_func is getattr(numbers, name)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 50), st.integers(0, 10**7), st.floats(0, 1e-3), st.floats(1, 50), st.integers(0, 10**7),
       st.integers(0, 10**4), st.integers(1, 10**6), st.integers(0, 10**7))
def test_compiled_and_python_forms_agree(tokens, last, rate, depth, now, n, window, since):
    from shepherd.core.engine.fast import nexus, symphony
    from shepherd.core.rules import nexus as nexus_rules
    from shepherd.core.rules import symphony as symphony_rules

    now = max(now, last)
    assert nexus._take_token(tokens, np.int64(last), rate, depth, np.int64(now)) == \
        nexus_rules.take_token(tokens, last, rate, depth, now)
    assert symphony._window_rate(n, window, since) == symphony_rules.window_rate(n, window, since)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 60), min_size=2, max_size=9), st.lists(st.integers(0, 400), max_size=30),
       st.integers(0, 100), st.integers(1, 8), st.integers(0, 5))
def test_compiled_and_python_queue_rules_agree(steps, deadlines, now, max_batch, head):
    """BATCHGEN's step, Symphony's window prune, fit and sched_at, and the router: the kernel's compiled form gives
    the Python form's answer on the same numbers (latency tables that dip included)."""
    from shepherd.core.engine.fast import flex, nexus, symphony
    from shepherd.core.rules import flex as flex_rules
    from shepherd.core.rules import latency
    from shepherd.core.rules import nexus as nexus_rules
    from shepherd.core.rules import symphony as symphony_rules

    lat = [0] + [sum(steps[:b]) if b % 3 else steps[0] for b in range(1, len(steps) + 1)]  # every third dips
    top = min(max_batch, len(lat) - 1)
    qd = sorted(deadlines)
    h, n = min(head, len(qd)), len(qd)
    arr, qarr = np.array(lat, np.int64), np.array(qd + [0], np.int64)
    for mono in (latency.monotone(lat, top), False):
        assert flex._largest_feasible(qarr, h, n, now, arr, top, mono) == \
            flex_rules.largest_feasible(qd, h, n, now, lat, top, mono)
        if n - h >= 1:
            args = (h, n, lat, lat, now, now, top, int(mono))
            assert symphony._window_start(qarr, *args[:2], arr, arr, *args[4:]) == \
                symphony_rules.window_start(qd, *args)
            b = symphony_rules.fit(lat, lat, qd[h], now, now, min(n - h, top), int(mono))
            assert symphony._fit(arr, arr, qd[h], now, now, min(n - h, top), int(mono)) == b
            assert symphony._frontrun(arr, qd[h], b, n - h, top) == symphony_rules.frontrun(lat, qd[h], b, n - h, top)
            assert symphony._cutoff(arr, arr, now, now + head, top, mono) == \
                symphony_rules.cutoff(lat, lat, now, now + head, top, mono)
    weights = [float(x) for x in steps]
    cur_py, cur_nb = [0.0] * len(weights), np.zeros(len(weights))
    for _ in range(5):
        assert nexus._swrr_pick(cur_nb, np.array(weights), 0, len(weights), sum(weights)) == \
            nexus_rules.swrr_pick(cur_py, weights, 0, len(weights), sum(weights))
    assert cur_nb.tolist() == cur_py
    ids = np.array([(7 * x) % 31 for x in range(len(deadlines))], np.int64)
    dls = np.array(deadlines, np.int64)
    assert nexus._reroute_order(dls, ids).tolist() == nexus_rules.reroute_order(dls, ids).tolist() == \
        sorted(range(len(ids)), key=lambda x: (deadlines[x], ids[x]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(1, 15)), max_size=12), st.integers(0, 300),
       st.integers(0, 30), st.integers(0, 300), st.integers(1, 30))
def test_ppipe_s_reservation_rules_are_the_tables_own_and_compile_to_the_same_numbers(gaps, t, length, start, dur):
    """Algorithm 2's earliestSlot and markReserved: the reservation tables call the rules PPipe's kernel compiles,
    and both forms give the same slot over the same intervals."""
    from shepherd.core.engine.fast import ppipe as kernel
    from shepherd.core.pipelines import table
    from shepherd.core.rules import ppipe as ppipe_rules

    assert table.earliest_slot is ppipe_rules.earliest_slot and table.insert_at is ppipe_rules.insert_at
    assert kernel._earliest_slot.py_func is ppipe_rules.earliest_slot
    assert kernel._insert_at.py_func is ppipe_rules.insert_at
    from shepherd.core.pipelines import reservations
    assert reservations.stage_score is ppipe_rules.stage_score and kernel._stage_score.py_func is ppipe_rules.stage_score
    starts, ends, at = [], [], 0
    for gap, d in gaps:  # sorted intervals, the gaps between them as drawn
        starts.append(at + gap)
        ends.append(at + gap + d)
        at = ends[-1]
    busy_from = starts[-1] if starts else 0
    for i in range(len(starts) - 1, 0, -1):  # the start of the final gap-free block
        if ends[i - 1] == starts[i]:
            busy_from = starts[i - 1]
        else:
            break
    arr = np.array([starts + [0], ends + [0]], np.int64)
    n, last = len(starts), at
    assert kernel._earliest_slot(arr[:1], arr[1:], 0, 0, n, last, busy_from, t, length) == \
        ppipe_rules.earliest_slot([starts], [ends], 0, 0, n, last, busy_from, t, length)
    assert kernel._insert_at(arr[0], arr[1], 0, n, start, start + dur) == \
        ppipe_rules.insert_at(starts, ends, 0, n, start, start + dur)
