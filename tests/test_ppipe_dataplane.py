"""PPipe data plane: earliestSlot/probe/reserve (Appendix A.3) and the ppipe/reactive policies on the engine."""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.engine import DROPPED, LATE, SERVED, EngineConfig, simulate
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.core.pipelines.reservations import PipeRuntime, Reservations, probe, reserve
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import PPIPE_DATA, needs_ppipe

DATA = PPIPE_DATA
needs_data = needs_ppipe


# --------------------------------------------------------------------------- earliestSlot

def _free(res: Reservations, r: int, s: int, length: int) -> bool:
    """[s, s + length) overlaps no reservation of r (a zero-length use never conflicts)."""
    return length <= 0 or all(e <= s or b >= s + length for b, e in res.intervals(r))


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(1, 12)), max_size=25),
       st.lists(st.integers(0, 2), min_size=1, max_size=3, unique=True), st.integers(0, 70), st.integers(1, 15))
def test_earliest_slot_is_free_and_earliest(booked, query, t, length):
    res = Reservations(3, 0)
    for r, s, d in booked:
        if _free(res, r, s, d):
            res.reserve(r, s, d, now=0)
    s = res.earliest(query, t, length)
    assert s >= t
    assert all(_free(res, r, s, length) for r in query)
    assert not any(all(_free(res, r, x, length) for r in query) for x in range(t, s))


def test_reserve_refuses_double_booking():
    res = Reservations(1, 0)
    res.reserve(0, 10, 5, now=0)
    with pytest.raises(RuntimeError):
        res.reserve(0, 12, 5, now=0)
    res.reserve(0, 15, 5, now=0)  # back to back is fine
    assert res.intervals(0) == [(10, 15), (15, 20)]


# --------------------------------------------------------------------------- probe / reserve

def slow_earliest(res: Reservations, rs: list[int], t: int, length: int) -> int:
    """earliestSlot from the raw interval lists, one candidate start at a time (independent of ``fit``)."""
    cands = sorted({t} | {e for r in rs for _, e in res.intervals(r) if e > t})
    return next(x for x in cands if all(_free(res, r, x, length) for r in rs))


def reference_probe(res: Reservations, pipe: PipeRuntime, bs: int, now: int) -> int:
    """Algorithm 2 literally (every vGPU of every pool scanned with earliestSlot); the finish time."""
    tg, last = now, None
    for j, pool in enumerate(pipe.workers):
        li, ln = pipe.lat[j][bs], pipe.transfer_in[j][bs]
        best_t, best_node = None, None
        for w, node in zip(pool, pipe.nodes[j]):
            t = tg
            if j:
                t = slow_earliest(res, [res.uplink(last), res.downlink(node)], t, ln) + ln
            t = slow_earliest(res, [w], t, li) + li
            if best_t is None or t < best_t:
                best_t, best_node = t, node
        tg, last = best_t, best_node
    return tg


@st.composite
def pipelines(draw):
    """Two pipelines of 1–3 stages over 12 vGPUs on 3 servers (pools disjoint, servers shared)."""
    ids = list(range(12))
    nodes = [draw(st.integers(0, 2)) for _ in ids]
    draw(st.randoms()).shuffle(ids)
    pipes, pos = [], 0
    for m in range(2):
        n_stages = draw(st.integers(1, 3))
        workers = []
        for _ in range(n_stages):
            k = draw(st.integers(1, 2))
            workers.append(ids[pos:pos + k])
            pos += k
        lat = [[0] + [draw(st.integers(1, 30)) * b for b in range(1, 5)] for _ in workers]
        tin = [[0] * 5] + [[0] + [draw(st.integers(0, 10)) * b for b in range(1, 5)] for _ in workers[1:]]
        pipes.append(PipeRuntime(m, draw(st.integers(1, 4)), workers, [[nodes[w] for w in ws] for ws in workers],
                                 lat, tin, 4))
    return pipes


@given(pipelines(), st.lists(st.tuples(st.integers(0, 1), st.integers(1, 4), st.integers(0, 20)), max_size=40))
@settings(max_examples=150)
def test_probe_reserve_never_double_books_and_matches_algorithm_2(pipes, steps):
    res = Reservations(12, 3)
    now = 0
    for which, bs, dt in steps:
        now += dt
        pipe = pipes[which]
        finish, wait, resv = probe(res, pipe, bs, now)
        assert finish == reference_probe(res, pipe, bs, now)
        assert wait >= 0
        reserve(res, resv, now)  # raises on any overlap
        # the path is causal: each stage starts after the previous one ended plus its transfer
        gpu = [r for r in resv if r[0] < 12]
        assert gpu[0][1] >= now and gpu[-1][1] + gpu[-1][2] == finish
        for (_, s0, d0), (_, s1, _) in zip(gpu, gpu[1:]):
            assert s1 >= s0 + d0
    for r in range(12 + 6):
        iv = res.intervals(r)
        assert all(a[1] <= b[0] for a, b in zip(iv, iv[1:]))


@given(pipelines(), st.lists(st.tuples(st.integers(0, 1), st.integers(1, 4), st.integers(0, 20)), max_size=30),
       st.integers(0, 200))
@settings(max_examples=100)
def test_bounded_probe_is_none_only_when_the_wait_reaches_the_bound(pipes, steps, bound):
    """Algorithm 1 step 1's early exit: probe(bound) is the unbounded probe, or None iff its wait ≥ bound."""
    res = Reservations(12, 3)
    now = 0
    for which, bs, dt in steps:
        now += dt
        pipe = pipes[which]
        full = probe(res, pipe, bs, now)
        cut = probe(res, pipe, bs, now, bound=bound)
        if full[1] < bound:
            assert cut == full
        else:
            assert cut is None or cut == full
        reserve(res, full[2], now)


# --------------------------------------------------------------------------- the policies on the engine

@functools.lru_cache(maxsize=None)
def small_plan(model: str, hc: str = "HC1-S"):
    profs = {p.model: p for p in blocks.read_ppipe_dir(DATA, [model])}
    plan = solve_pipelines(list(profs.values()), {model: 1.0}, make_cluster(hc), PPipePlanConfig(),
                           SolverConfig("highs", 20.0, 0.01))
    return plan, profs


def trace_for(plan, profs, load: float, seconds: float, seed: int, burst: float = 0.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rates = plan.rates(load)
    models = sorted(rates)
    arrs = [poisson(rng, rates[m], int(seconds * 1e6)) for m in models]
    return assemble(arrs, models, [profs[m].slo_us() for m in models])


MODELS = ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "efficientnet-b8_3rdparty_8xb32-aa-advprop_in1k"]


@needs_data
@given(st.sampled_from(MODELS), st.floats(0.3, 1.6), st.integers(0, 10_000))
@settings(max_examples=8)
def test_every_dispatched_batch_meets_its_deadline(model, load, seed):
    plan, profs = small_plan(model)
    trace = trace_for(plan, profs, load, 0.5, seed)
    res = simulate(trace, profs, "ppipe", plan=plan)
    out = res.recorder.r_outcome
    assert (out != LATE).all()  # execution matches the profile: nothing finishes late
    served = out == SERVED
    assert (res.recorder.r_finish[served] <= res.engine.deadline[served]).all()
    assert ((out == SERVED) | (out == DROPPED)).all()
    b = res.batches_frame().sort("worker", "start_us")
    overlap = b.with_columns(prev_end=pl.col("end_us").shift(1).over("worker")).filter(
        pl.col("prev_end") > pl.col("start_us"))
    assert overlap.height == 0  # no vGPU ever runs two batches at once
    assert (b["end_us"] - b["start_us"] > 0).all()


@needs_data
def test_light_load_is_fully_served_and_deterministic():
    plan, profs = small_plan(MODELS[0])
    trace = trace_for(plan, profs, 0.3, 1.0, 7)
    a = simulate(trace, profs, "ppipe", plan=plan)
    b = simulate(trace, profs, "ppipe", plan=plan)
    assert (a.recorder.r_outcome == SERVED).mean() == 1.0
    assert np.array_equal(a.recorder.r_finish, b.recorder.r_finish)


@needs_data
def test_overload_drops_but_never_serves_late():
    plan, profs = small_plan(MODELS[1])
    trace = trace_for(plan, profs, 3.0, 0.5, 3)
    res = simulate(trace, profs, "ppipe", plan=plan)
    out = res.recorder.r_outcome
    assert (out == DROPPED).any() and (out == SERVED).any() and not (out == LATE).any()


@needs_data
def test_reactive_serves_light_load_and_never_beats_reservations_at_high_load():
    plan, profs = small_plan(MODELS[1], "HC2-S")
    light = trace_for(plan, profs, 0.3, 1.0, 11)
    r = simulate(light, profs, "reactive", plan=plan)
    assert (r.recorder.r_outcome == SERVED).mean() > 0.9
    heavy = trace_for(plan, profs, 1.0, 1.0, 12)
    rr = simulate(heavy, profs, "reactive", plan=plan)
    rp = simulate(heavy, profs, "ppipe", plan=plan)
    att = lambda res: (res.recorder.r_outcome == SERVED).mean()  # noqa: E731
    assert att(rp) >= att(rr)
    b = rr.batches_frame().sort("worker", "start_us")
    assert b.with_columns(p=pl.col("end_us").shift(1).over("worker")).filter(pl.col("p") > pl.col("start_us")).height == 0


@needs_data
@given(st.sampled_from(MODELS), st.floats(0.5, 1.5), st.integers(0, 1000))
@settings(max_examples=5)
def test_direct_execution_agrees_with_engine_execution(model, load, seed):
    """The fast fidelity (stages recorded at dispatch) gives exactly the reference outcomes."""
    plan, profs = small_plan(model)
    trace = trace_for(plan, profs, load, 0.4, seed)
    ref = simulate(trace, profs, "ppipe", plan=plan)
    fast = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record"))
    for name in ("r_outcome", "r_start", "r_finish", "r_worker"):
        assert np.array_equal(getattr(ref.recorder, name), getattr(fast.recorder, name)), name
    cols = ["worker", "size", "start_us", "end_us"]
    assert ref.batches_frame().select(cols).sort(cols).equals(fast.batches_frame().select(cols).sort(cols))
    assert ref.workers_frame()["busy_us"].to_list() == fast.workers_frame()["busy_us"].to_list()


@needs_data
@given(st.sampled_from(MODELS), st.sampled_from(["HC1-S", "HC2-S"]), st.floats(0.5, 1.5), st.integers(0, 1000))
@settings(max_examples=4, deadline=None)
def test_pool_index_does_not_change_outcomes(model, hc, load, seed):
    """probe() with the per-pool index and with the plain scan of every vGPU serve a real plan identically."""
    plan, profs = small_plan(model, hc)
    trace = trace_for(plan, profs, load, 0.4, seed)
    fast = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record"))
    plain = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record", pool_index=False))
    for name in ("r_outcome", "r_start", "r_finish", "r_worker"):
        assert np.array_equal(getattr(fast.recorder, name), getattr(plain.recorder, name)), name
    cols = ["worker", "size", "start_us", "end_us"]
    assert fast.batches_frame().select(cols).equals(plain.batches_frame().select(cols))


@needs_data
def test_engine_execution_catches_a_broken_reservation(monkeypatch):
    """The engine-executed reference checks the reservations itself: with reserve() disabled the
    policy books overlapping stages on a vGPU, and a completion event finds the double booking."""
    import shepherd.core.policies.ppipe as ppipe_policy

    plan, profs = small_plan(MODELS[1])
    trace = trace_for(plan, profs, 1.5, 0.3, 5)
    monkeypatch.setattr(ppipe_policy, "reserve", lambda res, resv, now: None)
    with pytest.raises(RuntimeError, match="overlaps"):
        simulate(trace, profs, "ppipe", plan=plan)
