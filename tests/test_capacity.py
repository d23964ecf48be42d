"""Capacity search (core/capacity.py): targets on hand-made tables, the bisection on a known
threshold, and an M/D/c-like system whose capacity is known analytically."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from shepherd.core.capacity import Target, bisect, capacity_over_seeds, scan_down
from shepherd.core.engine import simulate
from shepherd.core.errors import UserError
from shepherd.core.profiles import linear_rows
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble


def _requests(model, latency_ms, slo_ms=100.0):
    """A requests table: one row per latency (None = dropped)."""
    n = len(latency_ms)
    finish = [None if x is None else int(x * 1000) for x in latency_ms]
    outcome = ["dropped" if x is None else ("served" if x <= slo_ms else "late") for x in latency_ms]
    return pl.DataFrame({"model": [model] * n, "arrival_us": [0] * n, "deadline_us": [int(slo_ms * 1000)] * n,
                         "finish_us": finish, "outcome": outcome})


def test_attainment_target_per_model_and_aggregate():
    a = _requests("a", [10.0] * 99 + [200.0])        # 99 % on time
    b = _requests("b", [10.0] * 97 + [None] * 3)     # 97 %
    both = pl.concat([a, b])
    assert Target("attainment", 0.99).holds_per_model(both) == {"a": True, "b": False}
    assert not Target("attainment", 0.99).holds(both)
    assert Target("attainment", 0.98, per_model=False).holds(both)      # 196/200
    assert not Target("attainment", 0.985, per_model=False).holds(both)


def test_p99_target_counts_drops_as_infinitely_late():
    ok = _requests("a", [10.0] * 99 + [150.0])       # p99 (nearest rank) = 10 ms ≤ 100 ms
    assert Target("p99-slo").holds(ok)
    two_late = _requests("a", [10.0] * 98 + [150.0, 150.0])
    assert not Target("p99-slo").holds(two_late)     # the 99th of 100 is 150 ms
    dropped = _requests("a", [10.0] * 98 + [None, None])
    assert Target("p99-slo").per_model_values(dropped)["a"] == math.inf


@pytest.mark.parametrize("text, metric, threshold", [
    ("attainment=0.99", "attainment", 0.99), ("p99-slo", "p99-slo", 0.99), ("goodput=0.9", "goodput", 0.9)])
def test_target_parse(text, metric, threshold):
    t = Target.parse(text)
    assert (t.metric, t.threshold) == (metric, threshold)


@pytest.mark.parametrize("text", ["attainment", "latency=0.5", "goodput=x", "attainment=1.5", "goodput=0"])
def test_bad_targets_are_user_errors(text):
    with pytest.raises(UserError):
        Target.parse(text)


@pytest.mark.parametrize("true_capacity", [0.37, 1.0, 3.3, 250.0])
def test_bisect_brackets_a_threshold_to_the_tolerance(true_capacity):
    b = bisect(lambda load: load <= true_capacity, start=1.0, rel_tol=0.01)
    assert b.lo <= true_capacity < b.hi
    assert b.hi / b.lo - 1 <= 0.01
    assert all(ok == (load <= true_capacity) for load, ok in b.evaluations)


def test_bisect_unreachable_target_is_a_user_error():
    with pytest.raises(UserError, match="unreachable"):
        bisect(lambda load: False, start=1.0, min_load=0.01)


def test_bisect_returns_an_open_bracket_when_never_failing():
    b = bisect(lambda load: True, start=1.0, max_load=64.0)
    assert b.lo == 64.0 and b.hi == math.inf


def test_scan_down_finds_each_keys_first_holding_load():
    limits = {"a": 0.72, "b": 0.41}
    grid = [round(1.0 - 0.1 * i, 2) for i in range(10)]
    calls = []

    def holds_at(load):
        calls.append(load)
        return {k: load <= v for k, v in limits.items()}

    assert scan_down(grid, holds_at, ["a", "b"]) == {"a": 0.7, "b": 0.4}
    assert calls == grid[:7]  # stopped once both were found


def test_capacity_of_an_md_c_system_matches_the_analytic_rate():
    """c = 4 workers, service 10 ms per request (β = 0: batching gains nothing), SLO 0.5 s.

    Capacity = c / service = 400 req/s. The trace offers 100 req/s at load 1
    for 240 s, so the capacity is load 4.0, where the compressed trace spans
    60 s: ε above capacity the backlog grows by ε·60 s, so an overload of a few
    per cent makes well over 1 % of requests later than 0.5 s. The search must
    land within 3 %.
    """
    service_ms, workers, base_rps, seconds = 10.0, 4, 100.0, 240.0
    raw = pl.DataFrame({"model": ["m"], "hardware": ["gpu"], "alpha_ms": [service_ms], "beta_ms": [0.0]})
    profiles = linear_rows(raw, "test", max_batch=8)

    def evaluate(load, seed):
        rng = np.random.default_rng(seed)
        trace = assemble([poisson(rng, base_rps, int(seconds * 1e6))], ["m"], [500_000])
        res = simulate(trace, profiles, "clockwork", gpus=workers, load=load, seed=seed, max_batch=8)
        return res.requests_frame()

    cap = capacity_over_seeds(evaluate, Target("attainment", 0.99), seeds=[0, 1], start=2.0, rel_tol=0.01)
    analytic = workers * 1000.0 / service_ms / base_rps
    for seed, value in cap.per_seed.items():
        assert value == pytest.approx(analytic, rel=0.03), (seed, value, cap.brackets[seed])
    assert cap.mean == pytest.approx(analytic, rel=0.03)
