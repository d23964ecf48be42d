"""Latency tables that fall with the batch size (issue 40 build 3): a CPU-measured ℓ(b) can dip (ℓ(2) < ℓ(1));
every policy that searches its table must find the batch a dip allows, on both engines.

Constructed tables, no timings. The rules are checked against a brute-force search; the policies are run on
a trace whose requests only a batch of two can serve in time."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core import profiles as prof
from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.rules import clockwork as cw
from shepherd.core.rules import latency

#: ms per batch size 1…8: a dip at 2 (ℓ(1) = 12 > ℓ(2) = 9), rising after
DIP_MS = [12.0, 9.0, 13.0, 15.0, 17.0, 19.0, 21.0, 23.0]


def dip_profile() -> pl.DataFrame:
    meas = pl.DataFrame({"model": ["M"] * 8, "hardware": ["cpu-1t"] * 8, "batch": list(range(1, 9)),
                         "latency_ms": DIP_MS})
    return prof.fit_measurements(meas, source="test")


def pairs_trace(n_periods: int, gap_us: int = 100_000) -> pl.DataFrame:
    """Per period: a request with a loose SLO (100 ms) that takes the worker for ℓ(1) = 12 ms, then 1 ms later
    two requests with an SLO of 20 ms: when the worker frees, 9 ms are left them — less than ℓ(1), enough
    for ℓ(2)."""
    t0 = np.arange(n_periods, dtype=np.int64) * gap_us
    arr = np.stack([t0, t0 + 1000, t0 + 1000], axis=1).ravel()
    slo = np.tile(np.array([100_000, 20_000, 20_000], np.int64), n_periods)
    n = len(arr)
    return pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["M"] * n,
                         "slo_us": slo, "deadline_us": arr + slo})


tables = st.lists(st.integers(1, 50), min_size=1, max_size=12).map(lambda xs: [0] + xs)


@settings(max_examples=300, deadline=None)
@given(tables, st.integers(0, 60), st.integers(1, 12), st.integers(0, 15))
def test_the_search_is_the_brute_force_answer_monotone_or_not(lat, budget, max_batch, queued):
    max_batch = min(max_batch, len(lat) - 1)
    top = min(max_batch, queued)
    want = max([b for b in range(1, top + 1) if lat[b] <= budget], default=0)
    assert cw.batch_for(lat, budget, max_batch, queued, latency.monotone(lat, max_batch)) == want
    floor = latency.prefix_min(lat, max_batch)
    assert floor[1:] == [min(lat[1:k + 1]) for k in range(1, max_batch + 1)]
    if queued:  # a request is expired exactly when no batch of at most min(max_batch, queued) serves it
        assert cw.expiry_cutoff(floor, 1000, max_batch, queued) == 1000 + min(lat[1:top + 1])


def test_monotone_tables_bisect_and_give_the_old_answer():
    lat = [0, 5, 7, 7, 9, 12]
    assert latency.monotone(lat, 5) and not latency.monotone([0, 12, 9, 13], 3)
    for budget in range(0, 14):
        for queued in range(0, 7):
            old = min(max([b for b in range(1, 6) if lat[b] <= budget], default=0), queued)
            assert cw.batch_for(lat, budget, 5, queued, True) == old


def test_the_dip_profile_keeps_its_dip():
    from shepherd.core.engine.inputs import whole_model_runtime  # noqa: F401 - the table the engine reads
    got = dip_profile().sort("batch")["latency_ms"].to_list()[:3]
    assert got == pytest.approx(DIP_MS[:3])


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_clockwork_serves_what_only_a_batch_of_two_can_on_both_engines(path):
    """Each pair has 9 ms left when the worker frees — below ℓ(1) = 12 ms, enough for ℓ(2) = 9 ms: a batch of
    two serves both; the old search (expire at start + ℓ(1), bisect the table) dropped every pair."""
    trace = pairs_trace(20)
    res = simulate(trace, dip_profile(), "clockwork", gpus=1, max_batch=8, seed=0,
                   overhead=OverheadConfig(mode="none"), engine=EngineConfig(path=path))
    assert res.good == trace.height and res.dropped == 0
    sizes = res.batches_frame()["size"].to_list()
    assert sizes.count(2) == 20 and sizes.count(1) == 20


@pytest.mark.parametrize("policy", ["clockwork", "flex", "flex-np", "symphony"])
def test_both_engines_agree_on_a_dipping_table(policy):
    rng = np.random.default_rng(3)
    n = 3000
    arr = np.sort(rng.integers(0, 3_000_000, n)).astype(np.int64)
    slo = rng.choice([12_000, 20_000, 40_000], n).astype(np.int64)  # ≥ ℓ(1): Symphony refuses less
    trace = pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["M"] * n,
                          "slo_us": slo, "deadline_us": arr + slo})
    kw = dict(gpus=2, max_batch=8, seed=0, overhead=OverheadConfig(mode="none"))
    ref = simulate(trace, dip_profile(), policy, engine=EngineConfig(path="reference"), **kw)
    fast = simulate(trace, dip_profile(), policy, engine=EngineConfig(path="fast"), **kw)
    assert ref.requests_frame().equals(fast.requests_frame())
    assert ref.batches_frame().equals(fast.batches_frame())
    assert (ref.batches_frame()["size"] == 2).any()  # the dip is used


@settings(max_examples=200, deadline=None)
@given(tables, st.lists(st.integers(0, 60), min_size=0, max_size=12), st.integers(0, 20), st.integers(1, 12))
def test_flex_largest_feasible_is_the_brute_force_answer(lat, deadlines, now, max_batch):
    """BATCHGEN's search (``DeadlineQueues.largest_feasible``): the largest b ≤ max_batch whose b latest-deadline
    queued requests all meet ``now + ℓ(b)``, and the first of them, for any table."""
    from shepherd.core.policies.queues import DeadlineQueues

    max_batch = min(max_batch, len(lat) - 1)
    q = DeadlineQueues(1)
    for i, d in enumerate(sorted(deadlines)):
        q.push(0, d, i)
    ds = sorted(deadlines)
    want = max([b for b in range(1, min(max_batch, len(ds)) + 1)
                if sum(d >= now + lat[b] for d in ds) >= b], default=0)
    b, i0 = q.largest_feasible(0, now, lat, max_batch, latency.monotone(lat, max_batch))
    assert b == want
    if b:
        assert q.d[0][i0] >= now + lat[b] and (i0 == q.h[0] or q.d[0][i0 - 1] < now + lat[b])
