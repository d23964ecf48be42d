"""Golden outputs: the per-request outcome arrays of every built-in policy, hashed.

Recorded at commit cbf5361 (before the engine/policy seam redesign, issue 12)
and expected to stay identical through any refactoring of the engine: a
change here is a change of behaviour. Whole-model policies (flex, flex-np,
clockwork, nexus) run two small workloads (one serving group; two groups
routed by stream with mixed SLOs); the PPipe data planes (ppipe, reactive)
run two real PPipe plans solved from the PPipe authors' data (``shepherd data fetch ppipe``).

The hash covers, per request: outcome, start, finish, worker, batch id and
preemption count (``requests_frame``), in request order.

Changed once, on purpose, by issue 30 item 1: batch ids became canonical — the
batches numbered by (start, worker, the worker's own order) at the end of a run —
so the batch ids (only) of the runs whose creation order was not that order
changed: clockwork and flex on two groups, ppipe (both fidelities) and reactive
fcn-HC1-S. Every other column is as before.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np
import polars as pl
import pytest

from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.core.profiles import load_builtin
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_milp import PPipePlanConfig, solve_pipelines
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

from conftest import PPIPE_DATA, needs_ppipe

DATA = PPIPE_DATA
needs_data = needs_ppipe
PROF = load_builtin("shepherd-v100")


def outcome_hash(res) -> str:
    """sha256 over the per-request outcome arrays (nulls as -1), in request order."""
    req = res.requests_frame()
    h = hashlib.sha256()
    h.update(req["outcome"].cast(pl.String).str.join("|").item().encode())
    for col in ("start_us", "finish_us", "worker", "batch_id", "preemptions"):
        h.update(np.ascontiguousarray(req[col].fill_null(-1).to_numpy().astype(np.int64)).tobytes())
    return h.hexdigest()[:20]


def workload_one_group() -> tuple[pl.DataFrame, dict]:
    """Four models, Poisson streams, 3 GPUs, overloaded (Flex preempts)."""
    rng = np.random.default_rng(1)
    models = ["ResNet18", "ResNet50", "ResNeSt269", "DenseNet121"]
    arrs = [poisson(rng, r, 400_000) for r in (1500.0, 700.0, 120.0, 500.0)]
    return assemble(arrs, models, [60_000, 90_000, 250_000, 50_000]), {"gpus": 3}


def workload_two_groups() -> tuple[pl.DataFrame, dict]:
    """Six streams routed by a plan to two groups (2 + 3 workers), mixed SLOs, bursts."""
    rng = np.random.default_rng(2)
    models = ["ResNet18", "ResNet34", "ResNet101", "DenseNet169", "ResNet18", "ResNeSt50"]
    arrs = [poisson(rng, r, 300_000) for r in (900.0, 600.0, 300.0, 400.0, 800.0, 250.0)]
    arrs[0] = np.sort(np.concatenate([arrs[0], np.full(200, 100_000, np.int64)]))
    trace = assemble(arrs, models, [40_000, 80_000, 120_000, 60_000, 30_000, 200_000])
    rows = [(0, "worker", "a0", None), (0, "worker", "a1", None), (1, "worker", "b0", None),
            (1, "worker", "b1", None), (1, "worker", "b2", None)]
    rows += [(0 if s < 3 else 1, "stream", str(s), None) for s in range(6)]
    plan = pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                      "hardware": pl.String}, orient="row")
    return trace, {"plan": plan}


WORKLOADS = {"one-group": workload_one_group, "two-groups": workload_two_groups}

GOLDEN = {
    ("clockwork", "one-group"): "4b7aa0beebca4dfdd6b0",
    ("clockwork", "two-groups"): "d058ca2a6fad4406a2f8",
    ("flex", "one-group"): "ec001503abf0ed5ff90e",
    ("flex", "two-groups"): "5230351871a01772f0fb",
    ("flex-np", "one-group"): "95eccac7e76af149d5d0",
    ("flex-np", "two-groups"): "81e0c2972ba0b17f7c36",
    # Nexus: admission coins drawn once per request and plans for the admitted traffic's peaks (h16); every
    # draw made before the run from the group's own child seed (issue 30, core/policies/nexus_schedule.py)
    ("nexus", "one-group"): "28fb7a88102f0b6afbe9",
    ("nexus", "two-groups"): "88852bc1484797795fa8",  # and a residual that over-fills a GPU gets a dedicated one
    ("flex-exit-overhead", "one-group"): "8ebe2f2c5b1d4567bb04",
}


@pytest.mark.parametrize("engine", ["reference", "auto"])  # auto: the compiled fast path where one covers the run
@pytest.mark.parametrize("policy,workload", sorted(GOLDEN))
def test_whole_model_policies_keep_their_outcomes(policy, workload, engine):
    trace, where = WORKLOADS[workload]()
    config = {"epoch_s": 0.1, "peak_window_s": 0.05} if policy == "nexus" else None
    name = policy
    if policy == "flex-exit-overhead":  # Flex stretching its batches (Shepherd Fig. 12)
        name, config = "flex", {"exit_overhead": 0.05}
    res = simulate(trace, PROF, name, config, seed=3, engine=EngineConfig(path=engine), **where)
    assert outcome_hash(res) == GOLDEN[(policy, workload)]


# --------------------------------------------------------------------------- PPipe data planes

PIPE_MODELS = {"fcn-HC1-S": ("fcn-d6_r101-d16_4xb2-40k_cityscapes-512x1024", "HC1-S", 0.9),
               "effnet-HC2-S": ("efficientnet-b8_3rdparty_8xb32-aa-advprop_in1k", "HC2-S", 1.2)}


@functools.lru_cache(maxsize=None)
def pipeline_case(name: str):
    model, hc, load = PIPE_MODELS[name]
    profs = {p.model: p for p in blocks.read_ppipe_dir(DATA, [model])}
    plan = solve_pipelines(list(profs.values()), {model: 1.0}, make_cluster(hc), PPipePlanConfig(),
                           SolverConfig("highs", 20.0, 0.01))
    rng = np.random.default_rng(5)
    rates = plan.rates(load)
    models = sorted(rates)
    trace = assemble([poisson(rng, rates[m], 400_000) for m in models], models,
                     [profs[m].slo_us() for m in models])
    return plan, profs, trace


def run_pipeline(plan, profs, trace, policy: str):
    """``policy`` is ppipe, reactive, or ppipe-direct (stages recorded at dispatch: the fast fidelity)."""
    engine = EngineConfig()
    if policy == "ppipe-direct":
        policy, engine = "ppipe", EngineConfig(reserved="record")
    return simulate(trace, profs, policy, plan=plan, engine=engine)


PIPE_GOLDEN = {
    ("ppipe", "effnet-HC2-S"): "5c1140ef279776fc7389",
    ("ppipe", "fcn-HC1-S"): "f75b4c2acf8c86c78987",
    ("reactive", "effnet-HC2-S"): "68a2c6886b06c3c5627f",
    ("reactive", "fcn-HC1-S"): "200bc19aa98183e851a9",
    # the fast fidelity gives exactly the reference's outcomes (batch ids included)
    ("ppipe-direct", "effnet-HC2-S"): "5c1140ef279776fc7389",
    ("ppipe-direct", "fcn-HC1-S"): "f75b4c2acf8c86c78987",
}


@needs_data
@pytest.mark.parametrize("policy,case", sorted(PIPE_GOLDEN))
def test_pipeline_policies_keep_their_outcomes(policy, case):
    plan, profs, trace = pipeline_case(case)
    res = run_pipeline(plan, profs, trace, policy)
    assert outcome_hash(res) == PIPE_GOLDEN[(policy, case)]
