"""core/capacity_search.py: the binding model and the monotonicity check, on constructed systems whose
answer is known (a per-model threshold; a target that fails in a band of loads below its capacity)."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.capacity import Target
from shepherd.core.capacity_search import probe_loads, search


def requests(on_time: dict[str, float], n: int = 200, slo_ms: float = 100.0) -> pl.DataFrame:
    """A per-request table where model m meets its SLO on a fraction on_time[m] of n requests."""
    rows = []
    for model, frac in on_time.items():
        good = int(round(frac * n))
        for i in range(n):
            latency = 10.0 if i < good else 150.0
            rows.append({"model": model, "arrival_us": 0, "deadline_us": int(slo_ms * 1000),
                         "finish_us": int(latency * 1000), "outcome": "served" if latency <= slo_ms else "late"})
    return pl.DataFrame(rows)


def two_models(load: float) -> pl.DataFrame:
    """Model a meets its SLO up to load 5, model b up to load 3."""
    return requests({"a": 1.0 if load <= 5 else 0.5, "b": 1.0 if load <= 3 else 0.8})


@pytest.mark.parametrize("target", ["attainment=0.99", "p99-slo", "goodput=0.99"])
def test_the_binding_model_is_the_one_that_fails_first(target):
    found = search(two_models, Target.parse(target), start=1.0, rel_tol=0.01)
    assert found.capacity <= 3 < found.bracket.hi  # b binds at 3 whatever the target
    assert found.binding_model == "b"
    info = found.binding()
    assert info["binding_attainment"] == 1.0 and info["binding_attainment_above"] < 1.0
    assert found.monotone and found.warning() is None


def test_a_non_monotone_target_is_detected_and_said():
    """Holds up to 8 except in the band (2, 3]: the bisection from 1 doubles past the band (2 and 4 hold),
    brackets 8; the probes below the capacity land in the band and find the failure."""
    def band(load: float) -> pl.DataFrame:
        ok = load <= 8 and not 2 < load <= 3
        return requests({"a": 1.0 if ok else 0.5})

    found = search(band, Target("attainment", 0.99), start=1.0, rel_tol=0.01, probes=6)
    assert 7.9 <= found.capacity <= 8  # what the bisection finds, assuming monotone
    assert not found.monotone
    fail, held = found.violation
    assert 2 < fail <= 3 and held == found.capacity
    message = found.warning()
    assert "not monotone" in message and f"{fail:.4g}" in message
    # without the probes the band goes unseen: that is what the probes are for
    assert search(band, Target("attainment", 0.99), start=1.0, rel_tol=0.01, probes=0).monotone


def test_an_unreachable_target_is_capacity_zero():
    found = search(lambda load: requests({"a": 0.5}), Target("attainment", 0.99), min_load=0.1)
    assert found.capacity == 0.0 and found.bracket.hi <= 0.2 and found.binding_model == "a"
    assert found.binding()["binding_attainment"] is None  # nothing held: no attainment at a capacity


@settings(max_examples=60, deadline=None)
@given(st.floats(0.01, 1e3), st.integers(0, 8), st.floats(1e-4, 1.0))
def test_probe_loads_lie_below_the_capacity(capacity, count, min_load):
    loads = probe_loads(capacity, count, min_load)
    assert len(loads) <= count and all(min_load <= x < capacity and x >= capacity / 4 - 1e-9 for x in loads)
    assert loads == sorted(loads, reverse=True)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 500.0))
def test_a_monotone_threshold_is_never_flagged(threshold):
    found = search(lambda load: requests({"a": 1.0 if load <= threshold else 0.0}, n=10),
                   Target("attainment", 0.99), start=1.0, rel_tol=0.02)
    assert found.monotone and found.capacity <= threshold < found.bracket.hi
    assert math.isfinite(found.bracket.hi)
