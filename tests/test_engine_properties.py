"""Invariants of every policy over random small workloads (hypothesis).

Whole-model policies run on α/β profiles; the pipeline data planes (every
registered policy that ``requires`` a pipeline plan: ppipe, reactive) on a real
PPipe plan of two DNNs solved from the PPipe authors' data (``shepherd data fetch ppipe``), with the same drawn
arrival patterns (stretched ×5 in time) mapped onto the plan's DNNs and SLOs.
"""

from __future__ import annotations

import functools

import numpy as np
import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest

from shepherd.core.engine import simulate
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.profiles import latency_table_us, load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import PPIPE_DATA, PPIPE_FOUND, PPIPE_MISSING, needs_ppipe

PROF = load_builtin("shepherd-v100")
MODELS = ["ResNet18", "ResNet50", "ResNeSt269", "DenseNet121"]
POLICIES = sorted(registry.names())  # every registered policy, including later papers'
WHOLE_MODEL_POLICIES = {"flex", "flex-np", "clockwork", "nexus"}
PIPELINE_POLICIES = {n for n in POLICIES if "pipeline_plan" in registry.get(n).cls.requires}
EP_POLICIES = {n for n in POLICIES if "layer_profiles" in registry.get(n).cls.requires}  # Accordion's
EP_MODELS = {"ResNet18": "VGG16", "ResNet50": "ResNet50", "ResNeSt269": "ResNet152", "DenseNet121": "VGG16"}
DATA = PPIPE_DATA
PIPE_MODELS = ["fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "efficientnet-b8_3rdparty_8xb32-aa-advprop_in1k"]


@functools.lru_cache(maxsize=None)
def pipeline_plan():
    """A real PPipe plan of two DNNs on HC1-S (16 GPUs) and their block profiles."""
    from shepherd.core.pipelines import blocks
    from shepherd.core.pipelines.cluster import make_cluster
    from shepherd.solvers.backend import SolverConfig
    from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines

    profs = {p.model: p for p in blocks.read_ppipe_dir(DATA, PIPE_MODELS)}
    plan = solve_pipelines(list(profs.values()), {m: 0.5 for m in PIPE_MODELS}, make_cluster("HC1-S"),
                           PPipePlanConfig(), SolverConfig("highs", 20.0, 0.01))
    return plan, profs


def pipeline_trace(trace: pl.DataFrame) -> pl.DataFrame:
    """The drawn arrivals (×5 in time) of each stream on one of the plan's DNNs, at its SLO."""
    _, profs = pipeline_plan()
    n_streams = int(trace["stream"].max()) + 1 if trace.height else 1
    per = [trace.filter(pl.col("stream") == s)["arrival_us"].to_numpy() * 5 for s in range(n_streams)]
    models = [PIPE_MODELS[s % 2] for s in range(n_streams)]
    return assemble(per, models, [profs[m].slo_us() for m in models])


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
    lam = draw(st.sampled_from([1.01, 1.5, 3.03]))
    return trace, gpus, lam


def run(policy, trace, gpus, lam, seed=0):
    """``policy`` on ``trace`` (a pipeline policy: on :func:`pipeline_trace` of it); returns (trace, result)."""
    if policy in PIPELINE_POLICIES:
        if PPIPE_FOUND is None:
            pytest.skip(PPIPE_MISSING)
        plan, profs = pipeline_plan()
        trace = pipeline_trace(trace)
        return trace, simulate(trace, profs, policy, plan=plan, seed=seed)
    if policy in EP_POLICIES:  # Accordion: the drawn arrivals ×20 in time on its models, one instance each
        from shepherd.core.accordion.configs import builtin_layers

        trace = trace.with_columns(pl.col("model").replace_strict(EP_MODELS), pl.col("arrival_us") * 20,
                                   pl.col("deadline_us") + 19 * pl.col("arrival_us"))
        return trace, simulate(trace, None, policy, {"eps": 4 * gpus}, seed=seed,
                               artifacts={"layer_profiles": builtin_layers()})
    config = {"lam": lam} if policy == "flex" else None
    if getattr(registry.get(policy).cls, "rejects_infeasible_slo", False):
        # such a policy refuses an SLO below ℓ(1) with a UserError (Symphony: no feasible batch);
        # check that, then keep the drawn pattern with every SLO raised to ℓ(1)
        l1 = PROF.filter(pl.col("batch") == 1).select(
            "model", (pl.col("latency_ms") * 1000).ceil().cast(pl.Int64).alias("l1_us"))
        floor = trace.join(l1, on="model", how="left")["l1_us"]
        if (trace["slo_us"] < floor).any():
            with pytest.raises(UserError, match="no feasible batch"):
                simulate(trace, PROF, policy, config, gpus=gpus, seed=seed)
            slo = pl.max_horizontal(pl.col("slo_us"), pl.Series(floor.to_list()))
            trace = trace.with_columns(slo_us=slo).with_columns(deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    return trace, simulate(trace, PROF, policy, config, gpus=gpus, seed=seed)


def check_invariants(policy, trace, res):
    req = res.requests_frame()
    bat = res.batches_frame()
    wk = res.workers_frame()
    assert req.height == trace.height
    done = bat.filter(~pl.col("preempted"))
    served = req.filter(pl.col("finish_us").is_not_null())
    if policy in PIPELINE_POLICIES:  # a request's path ends with a batch on a last-stage vGPU of its DNN
        from shepherd.core.pipelines.runtime import build

        plan, profs = pipeline_plan()
        _, pipes, _ = build(plan, profs, res.models)
        last = {w for p in pipes for w in p.workers[-1]}
        done = done.filter(pl.col("worker").is_in(sorted(last)))
    # a request is served at most once: completed (final) batch sizes account for exactly the served requests
    assert int(done["size"].sum() or 0) == served.height
    per_batch = served.group_by("batch_id").len().join(done.select("batch_id", "size"), on="batch_id", how="full")
    assert per_batch.filter(pl.col("len") != pl.col("size")).height == 0
    assert per_batch.filter(pl.col("len").is_null() | pl.col("size").is_null()).height == 0
    # a worker runs at most one batch at a time (every piece of work: allocations' segments included)
    seg = res.segments_frame()
    for _, g in seg.sort("worker", "start_us", "end_us").group_by("worker"):  # zero-length preempted first
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
    if policy == "ppipe":  # reservations: execution matches the profile, nothing finishes late
        assert late.height == 0
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
    if policy in EP_POLICIES:  # an allocation's busy time is its segments' (several EPs, resized mid-run)
        assert int(wk["busy_us"].sum()) == int((seg["end_us"] - seg["start_us"]).sum() or 0)
    elif policy not in PIPELINE_POLICIES:  # a pipeline's intermediate stages are busy time of no final batch
        assert int(wk["busy_us"].sum()) == int((done["end_us"] - done["start_us"]).sum() or 0)
    else:
        assert int(wk["busy_us"].sum()) == int((bat["end_us"] - bat["start_us"]).sum() or 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(POLICIES))
def test_invariants_hold_for_every_policy(work, policy):
    trace, gpus, lam = work
    check_invariants(policy, *run(policy, trace, gpus, lam))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(POLICIES))
def test_same_seed_gives_identical_outputs(work, policy):
    trace, gpus, lam = work
    (_, a), (_, b) = run(policy, trace, gpus, lam, seed=7), run(policy, trace, gpus, lam, seed=7)
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


@needs_ppipe
@pytest.mark.parametrize("policy", sorted(PIPELINE_POLICIES))
def test_pipeline_policies_serve_a_light_load_and_keep_the_invariants(policy):
    """Not vacuous: at half the plan's throughput the data planes serve (nearly) everything."""
    plan, profs = pipeline_plan()
    rng = np.random.default_rng(4)
    rates = plan.rates(0.5)
    trace = assemble([poisson(rng, rates[m], 1_000_000) for m in PIPE_MODELS], PIPE_MODELS,
                     [profs[m].slo_us() for m in PIPE_MODELS])
    res = simulate(trace, profs, policy, plan=plan)
    check_invariants(policy, trace, res)
    assert res.good >= 0.9 * trace.height > 0
