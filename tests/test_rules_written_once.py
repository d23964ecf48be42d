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
    ("clockwork", "clockwork", "_batch_for", "clockwork", "batch_for"),
    ("symphony", "symphony", "_window_rate", "symphony", "window_rate"),
    ("nexus", "nexus", "_refill", "nexus", "refill"),
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
    for name in ("target_batch", "secant_beta_s", "meter_rates"):
        assert getattr(kernel, f"_{name}").py_func is getattr(numbers, name)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 50), st.integers(0, 10**7), st.floats(0, 1e-3), st.floats(1, 50), st.integers(0, 10**7),
       st.integers(0, 10**4), st.integers(1, 10**6), st.integers(0, 10**7))
def test_compiled_and_python_forms_agree(tokens, last, rate, depth, now, n, window, since):
    from shepherd.core.engine.fast import nexus, symphony
    from shepherd.core.rules import nexus as nexus_rules
    from shepherd.core.rules import symphony as symphony_rules

    now = max(now, last)
    assert nexus._refill(tokens, np.int64(last), rate, depth, np.int64(now)) == \
        nexus_rules.refill(tokens, last, rate, depth, now)
    assert symphony._window_rate(n, window, since) == symphony_rules.window_rate(n, window, since)
