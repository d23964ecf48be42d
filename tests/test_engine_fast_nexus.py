"""Nexus's compiled fast path (core/engine/fast/nexus.py): the reference engine's tables, identical, for the same
inputs and seed (both read the draws and plans the policy makes before the run: core/policies/nexus_schedule.py).

Hypothesis-generated small workloads (seeds, K frontends, ``spare``, ``provision``, epochs shorter than the
trace, light load to overload, the policy's own overhead model, a free scheduler or a costly one that sheds,
one hardware type or two), and three fixed medium ones of ≥ 100 k requests (Shepherd's Nexus, Symphony's
Nexus 8FE, an overloaded Nexus planning for a fraction of its traffic behind a shedding scheduler)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shepherd.core.engine import EngineConfig, OverheadConfig, simulate
from shepherd.core.errors import UserError
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble
from test_engine_fast import (MODELS, OVERHEADS, PROF, SHEDDING, _mixed_profiles, _one_group, assert_same, medium)
from test_engine_groups import plan_frame

#: each test compares a compiled fast path with the reference engine (conftest.py: re-records it verified)
pytestmark = pytest.mark.agreement

pytest.importorskip("numba")

#: ℓ(1) of each model on the V100 table, µs: SLOs are multiples of it
L1 = {r["model"]: r["latency_ms"] * 1000 for r in PROF.filter(pl.col("batch") == 1).iter_rows(named=True)}


def nexus_workload(seed: int, n_streams: int, horizon_us: int, rate: float, ties: bool) -> pl.DataFrame:
    """Poisson streams whose SLOs are 2.2–12 × the model's ℓ(1) (Nexus plans a session only if 2·ℓ(b) fits
    for some b), or 0.9 × (a session it can never plan: its requests are dropped); two streams of one
    model and SLO share a session."""
    rng = np.random.default_rng(seed)
    arrs = [poisson(rng, rate * (0.3 + rng.random()), horizon_us) for _ in range(n_streams)]
    if ties:  # equal arrival times across and within streams
        arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-1][::2], arrs[0][::5]]))
    names = [MODELS[s % 3] for s in range(n_streams)]  # streams s and s + 3: one model
    slack = [float(rng.choice([0.9, 2.2, 4.0, 12.0], p=[0.1, 0.3, 0.3, 0.3])) for _ in range(n_streams)]
    for s in range(3, n_streams):
        if rng.random() < 0.5:
            slack[s] = slack[s - 3]  # the same session as stream s − 3
    return assemble(arrs, names, [int(L1[m] * x) + 1 for m, x in zip(names, slack)])


def assert_same_nexus(ref, fast) -> None:
    assert_same(ref, fast)
    assert len(fast.engine.policies) == 0 and len(ref.engine.policies) == 1  # each ran where it says
    assert ref.extra == fast.extra  # Nexus keeps no counters: both empty
    assert ref.engine.sched[0].shed == fast.engine.sched[0].shed


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 5), streams=st.integers(1, 7),
       rate=st.sampled_from([300.0, 2000.0, 9000.0]), ties=st.booleans(), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 1 << 15]), max_batch=st.sampled_from([1, 8, 128]),
       frontends=st.sampled_from([1, 2, 3, 8]), spare=st.sampled_from(["idle", "spread"]),
       provision=st.sampled_from(["previous", "oracle"]), epoch_s=st.sampled_from([0.013, 0.04, 60.0]),
       window_s=st.sampled_from([None, 0.005, 0.013]), mixed=st.booleans())
def test_fast_nexus_equals_reference(seed, gpus, streams, rate, ties, ovh, chunk, max_batch, frontends, spare,
                                     provision, epoch_s, window_s, mixed):
    """Any seed, K frontends, spare mode, provisioning, epochs (several per trace: re-routing at the
    boundaries), light load to overload (admission coins, token buckets), Nexus's own overhead or another
    (admission control sheds), one hardware type or a V100/T4 mix (plans on the first worker's table)."""
    trace = nexus_workload(seed, streams, 120_000, rate, ties)
    cfg = {"frontends": frontends, "spare": spare, "provision": provision, "epoch_s": epoch_s,
           "peak_window_s": None if window_s is None else min(window_s, epoch_s)}
    kw = dict(seed=seed, overhead=OVERHEADS[ovh], max_batch=max_batch)
    if mixed:
        kw.update(plan=_one_group(["T4", "V100", "T4", "V100", "V100"][:gpus]), hardware="V100")
        prof = _mixed_profiles()
    else:
        kw.update(gpus=gpus)
        prof = PROF
    ref = simulate(trace, prof, "nexus", cfg, engine=EngineConfig(chunk=chunk, path="reference"), **kw)
    fast = simulate(trace, prof, "nexus", cfg, engine=EngineConfig(chunk=chunk, path="fast"), **kw)
    assert_same_nexus(ref, fast)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), draws=st.integers(0, 50), n_groups=st.integers(1, 6))
def test_group_seeds_are_children_of_the_run_generator_and_do_not_advance_it(seed, draws, n_groups):
    """Each group's seed is its own child of the run's seed (``SeedSequence.spawn``): reading it leaves the
    run's generator where it was (so every group sees the same root, in any order), the children differ,
    and the same state gives the same children."""
    from shepherd.core.policies.nexus_schedule import group_seed

    rng = np.random.default_rng(seed)
    rng.random(draws)  # a router's draws before the policy's
    state = rng.bit_generator.state
    kids = [group_seed(rng, g, n_groups) for g in range(n_groups)]
    assert rng.bit_generator.state == state
    firsts = [np.random.default_rng(k).integers(1 << 62) for k in kids]
    assert len(set(firsts)) == n_groups
    again = np.random.default_rng(seed)
    again.random(draws)
    assert [np.random.default_rng(group_seed(again, g, n_groups)).integers(1 << 62)
            for g in reversed(range(n_groups))] == firsts[::-1]


def test_nexus_groups_draw_independently():
    """A group's draws do not depend on the other groups: with two groups, group 1's coins and frontends are
    the same whether group 0 (built, and once drawing from the run's generator, first) serves one stream or
    five (group 1's own requests unchanged)."""
    def group1(extra: int):
        base = nexus_workload(8, 2, 60_000, 2000.0, False)
        other = nexus_workload(9, 1 + extra, 60_000, 2000.0, False).with_columns(pl.col("stream") + 2)
        trace = pl.concat([base, other]).sort("arrival_us", maintain_order=True)
        plan = plan_frame([1, 1], [1, 1, *([0] * (1 + extra))])
        res = simulate(trace, PROF, "nexus", {"frontends": 3}, plan=plan, seed=4,
                       engine=EngineConfig(path="reference"))
        pol = next(p for p in res.engine.policies if p.act.group == 1)
        return pol.schedule.coin, pol.schedule.frontend

    c1, f1 = group1(0)
    c5, f5 = group1(4)
    assert len(c1) > 50 and np.array_equal(c1, c5) and np.array_equal(f1, f5) and f1.max() > 0


#: (config, overhead, where, per-stream rate, SLOs)
NEXUS_MEDIUM = {
    # Shepherd §7's Nexus: 60 s epochs planned for the previous epoch's peaks (the first warm-started), idle
    # spare GPUs, its own overhead model (admission control on), 13 models on 12 GPUs
    "shepherd": (None, None, dict(gpus=12), 300.0, [250_000]),
    # Symphony §3.3's Nexus 8FE: 1 s oracle epochs, the plan spread over the whole cluster (16 GPUs: scaled
    # up ~1.5×), 8 frontends routing on their own
    "symphony-8fe": ({"epoch_s": 1.0, "peak_window_s": 1.0, "provision": "oracle", "spare": "spread",
                      "frontends": 8}, None, dict(gpus=16), 300.0, [250_000]),
    # overloaded: 4 GPUs for 12's traffic — 3 s epochs planned for a fraction s < 1 of it (coins, token
    # buckets) — behind a costly scheduler whose admission control sheds
    "overloaded": ({"epoch_s": 3.0, "frontends": 2}, SHEDDING, dict(gpus=4), 300.0, [90_000, 250_000]),
}


@pytest.mark.parametrize("case", sorted(NEXUS_MEDIUM))
def test_fast_nexus_equals_reference_on_100k_requests(case):
    cfg, ovh, where, per_stream, slos = NEXUS_MEDIUM[case]
    trace = medium(22, slos, per_stream=per_stream)
    ref = simulate(trace, PROF, "nexus", cfg, overhead=ovh, seed=5, engine=EngineConfig(path="reference"), **where)
    fast = simulate(trace, PROF, "nexus", cfg, overhead=ovh, seed=5, engine=EngineConfig(path="fast"), **where)
    assert_same_nexus(ref, fast)
    pol = ref.engine.policies[0]
    if case == "overloaded":
        assert ref.shed > 0 and min(p["scale"] for p in pol.plans) < 1.0
    else:
        assert ref.good > 0.5 * trace.height
    if case == "symphony-8fe":  # 1 s epochs, every plan spread
        assert len(pol.plans) > 20 and min(p["scale"] for p in pol.plans) > 1.0


def test_fast_nexus_refuses_what_it_does_not_cover():
    """Several serving groups (its timers are not in the clock replay) and the emulated overhead: the
    reference engine only — ``--engine fast`` is one error line, ``auto`` falls back to the same tables."""
    trace = nexus_workload(4, 3, 80_000, 1500.0, True)
    plan = plan_frame([1, 2], [0, 1, 1])
    with pytest.raises(UserError, match="fast path of 'nexus' covers one serving group"):
        simulate(trace, PROF, "nexus", plan=plan, engine=EngineConfig(path="fast"))
    auto = simulate(trace, PROF, "nexus", plan=plan)
    assert_same(auto, simulate(trace, PROF, "nexus", plan=plan, engine=EngineConfig(path="reference")))
    assert len(auto.engine.policies) == 2  # the reference ran
    with pytest.raises(UserError, match="covers"):
        simulate(trace, PROF, "nexus", gpus=2, overhead=OverheadConfig(mode="emulation"),
                 engine=EngineConfig(path="fast"))
    assert len(simulate(trace, PROF, "nexus", gpus=2).engine.policies) == 0  # the default: the fast path


def test_fast_nexus_empty_trace():
    trace = nexus_workload(1, 2, 50_000, 500.0, False).head(0)
    ref = simulate(trace, PROF, "nexus", gpus=2, engine=EngineConfig(path="reference"))
    fast = simulate(trace, PROF, "nexus", gpus=2, engine=EngineConfig(path="fast"))
    assert_same(ref, fast)
    assert ref.extra == fast.extra == {}


def test_fast_nexus_with_a_frontend_router_on_one_group():
    """A router that draws from the run's generator before the policy does (K round-robin frontends over
    one group): the policy's coins come after it, on both engines."""
    from shepherd.core.engine import RoundRobinFrontends

    trace = nexus_workload(6, 4, 150_000, 3000.0, True)
    kw = dict(gpus=3, seed=9, router=RoundRobinFrontends(4))
    ref = simulate(trace, PROF, "nexus", {"epoch_s": 0.05}, engine=EngineConfig(path="reference"), **kw)
    fast = simulate(trace, PROF, "nexus", {"epoch_s": 0.05}, engine=EngineConfig(path="fast"), **kw)
    assert_same_nexus(ref, fast)


@pytest.mark.parametrize("frontends", [1, 8])
def test_fast_nexus_equals_reference_on_a_session_over_many_gpus(frontends):
    """Symphony Fig. 1's setting: one ResNet50-like model (Symphony's linear profile) spread over 40 GPUs —
    a session with more than 16 allocations, whose round-robin the reference scans with numpy
    (``core/policies/wrr.py``) — by one frontend or eight."""
    from shepherd.experiments.symphony import common as c

    prof = c.linear_profiles([("R", 2.050, 5.378)])
    trace = c.workload(["R"], 50.0, duration_s=1.5).trace(30_000.0, 3)
    cfg = {**c.SYSTEMS["nexus"][1], "frontends": frontends}
    kw = dict(gpus=40, seed=3, max_batch=c.MAX_BATCH)
    ref = simulate(trace, prof, "nexus", cfg, engine=EngineConfig(path="reference"), **kw)
    fast = simulate(trace, prof, "nexus", cfg, engine=EngineConfig(path="fast"), **kw)
    assert_same_nexus(ref, fast)
    pol = ref.engine.policies[0]
    assert max(len(ws) for ws in pol.weights.values()) > 16 and ref.good > 0.5 * trace.height
