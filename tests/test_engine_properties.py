"""Invariants of every policy over random small workloads (hypothesis)."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shepherd.core.engine import simulate
from shepherd.core.policies import registry
from shepherd.core.profiles import latency_table_us, load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
MODELS = ["ResNet18", "ResNet50", "ResNeSt269", "DenseNet121"]
POLICIES = sorted(registry.names())  # every registered policy, including later papers'
WHOLE_MODEL_POLICIES = {"flex", "flex-np", "clockwork", "nexus"}


@st.composite
def workloads(draw):
    n_streams = draw(st.integers(1, 4))
    per_stream, models, slos = [], [], []
    for _ in range(n_streams):
        n = draw(st.integers(0, 60))
        bursty = draw(st.booleans())
        hi = draw(st.sampled_from([2_000, 50_000, 400_000]))
        times = draw(st.lists(st.integers(0, hi), min_size=n, max_size=n))
        if bursty and times:
            times = [times[0]] * (len(times) // 2) + times[len(times) // 2:]
        per_stream.append(np.sort(np.array(times, dtype=np.int64)))
        models.append(draw(st.sampled_from(MODELS)))
        slos.append(draw(st.integers(5_000, 300_000)))
    trace = assemble(per_stream, models, slos)
    gpus = draw(st.integers(1, 4))
    lam = draw(st.sampled_from([1.0, 1.5, 3.03]))
    return trace, gpus, lam


def run(policy, trace, gpus, lam, seed=0):
    config = {"lam": lam} if policy == "flex" else None
    return simulate(trace, PROF, policy, config, gpus=gpus, seed=seed)


def check_invariants(policy, trace, res):
    req = res.requests_frame()
    bat = res.batches_frame()
    wk = res.workers_frame()
    assert req.height == trace.height
    done = bat.filter(~pl.col("preempted"))
    served = req.filter(pl.col("finish_us").is_not_null())
    # a request is served at most once: completed batch sizes account for exactly the served requests
    assert int(done["size"].sum() or 0) == served.height
    per_batch = served.group_by("batch_id").len().join(done.select("batch_id", "size"), on="batch_id", how="full")
    assert per_batch.filter(pl.col("len") != pl.col("size")).height == 0
    assert per_batch.filter(pl.col("len").is_null() | pl.col("size").is_null()).height == 0
    # a worker runs at most one batch at a time
    for _, g in bat.sort("worker", "start_us", "end_us").group_by("worker"):  # zero-length preempted first
        starts, ends = g["start_us"].to_numpy(), g["end_us"].to_numpy()
        assert (starts[1:] >= ends[:-1]).all()
        assert (ends >= starts).all()
    # every good request finished by its deadline, after it arrived, in a batch of the right latency
    good = req.filter(pl.col("outcome") == "served")
    assert (good["finish_us"] <= good["deadline_us"]).all()
    late = req.filter(pl.col("outcome") == "late")
    assert (late["finish_us"] > late["deadline_us"]).all()
    assert (served["start_us"] >= served["arrival_us"]).all()
    assert req.filter(pl.col("outcome") == "dropped")["finish_us"].null_count() == \
        req.filter(pl.col("outcome") == "dropped").height
    if policy in WHOLE_MODEL_POLICIES:  # pipeline policies (PPipe) run partial models: other latencies
        for model, size, start, end in done.select("model", "size", "start_us", "end_us").iter_rows():
            assert end - start == latency_table_us(PROF, model)[size]
    # goodput ≤ arrivals
    s = res.summary_frame()
    assert 0 <= s["good"][0] <= s["requests"][0] == trace.height
    assert s["good"][0] + s["late"][0] + s["dropped"][0] == trace.height
    assert s["utilization"][0] <= s["utilization_with_waste"][0] <= 1.0 + 1e-9
    # preemption only in flex; waste exactly the time of preempted batches
    pre = bat.filter(pl.col("preempted"))
    if policy != "flex":
        assert pre.height == 0 and int(wk["wasted_us"].sum()) == 0
    assert int(wk["wasted_us"].sum()) == int((pre["end_us"] - pre["start_us"]).sum() or 0)
    assert int(wk["busy_us"].sum()) == int((done["end_us"] - done["start_us"]).sum() or 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(POLICIES))
def test_invariants_hold_for_every_policy(work, policy):
    trace, gpus, lam = work
    check_invariants(policy, trace, run(policy, trace, gpus, lam))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(POLICIES))
def test_same_seed_gives_identical_outputs(work, policy):
    trace, gpus, lam = work
    a, b = run(policy, trace, gpus, lam, seed=7), run(policy, trace, gpus, lam, seed=7)
    assert a.requests_frame().equals(b.requests_frame())
    assert a.batches_frame().equals(b.batches_frame())
    assert a.summary_frame().equals(b.summary_frame())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_flex_with_preemption_off_wastes_nothing(work):
    trace, gpus, _ = work
    res = simulate(trace, PROF, "flex", {"preemption": False}, gpus=gpus)
    assert int(res.workers_frame()["wasted_us"].sum()) == 0
    assert not res.batches_frame()["preempted"].any()
    assert int(res.requests_frame()["preemptions"].sum()) == 0
