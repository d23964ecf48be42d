"""Planner registry: ``shepherd plan --planner NAME`` looks the name up here (STYLE.md pattern 1).

Each planner takes a :class:`PlanRequest` and returns a :class:`PlanOutput`:
plan rows (artifact kind "plan": group, role, name, optional hardware/batch/
count/epoch/share) and metadata for the artifact's ``extra`` — always the
solver, status, objective, bound, gap and solve time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.errors import UserError
from shepherd.solvers.affinity import affinity_k, affinity_sets
from shepherd.solvers.backend import SolveResult, SolverConfig
from shepherd.solvers.demand import DEFAULT_MODEL_MB, model_streams
from shepherd.solvers.herd import HerdConfig, HerdInstance, solve_herd, tolerance_warning, verify
from shepherd.solvers.nexus import plan_nexus
from shepherd.solvers.offline_optimal import OfflineInstance, grid_step_us, solve_offline

PLAN_SCHEMA = {"group": pl.Int32, "role": pl.String, "name": pl.String, "hardware": pl.String,
               "batch": pl.Int32, "count": pl.Int32}


@dataclass(frozen=True)
class PlanRequest:
    """Everything a planner may use (the resolved config is stored with the plan)."""

    trace: pl.DataFrame
    profiles: pl.DataFrame
    gpus: int
    solver: SolverConfig = field(default_factory=SolverConfig)
    group_limit: int = 12
    affinity_k: float = math.inf
    gpu_memory_mb: float = 16384.0
    reserve_mb: float = 4096.0
    default_model_mb: float = DEFAULT_MODEL_MB
    hardware: str = "V100"
    epoch_s: float = 60.0
    shards: int | None = None  # model-streams per model for Herd (None: enough to fill every group)
    time_step_ms: float | None = None
    cluster: str | None = None  # pipeline planners: a Table 1 cluster (PPipe), e.g. HC1-L
    bandwidth_gbps: float | None = None  # pipeline planners: effective NIC bandwidth override
    slo_margin: float = 0.4  # pipeline planners: SLO fraction deducted in the MILP (PPipe §7.1)
    slo_scale: float = 5.0  # pipeline planners: SLO = scale × L4 batch-1 latency (PPipe §7.1)
    milp_formulation: str = "knapsack"  # ppipe/np: "knapsack", "counts", "points" or "hybrid" (see solvers.ppipe_milp)
    partitions: int | None = None  # symphony-partition: sub-clusters l (None: ⌈gpus / group_limit⌉)
    rate_cap: float = math.inf  # symphony-partition: R_max per sub-cluster, req/s (Eq. 5)
    balance_weight: float | None = None  # symphony-partition: w in Eq. 4 (None: R̄ / S̄)
    previous: tuple[tuple[str, int], ...] | None = None  # symphony-partition: X' as (model, sub-cluster)
    max_move_cost: float = math.inf  # symphony-partition: C_max (Eq. 11), c_ij = 1
    rules: str = "paper"  # pipeline planners: named rule set, paper | artifact (core.pipelines.rules)


@dataclass
class PlanOutput:
    frame: pl.DataFrame
    extra: dict[str, Any]
    kind: str = "plan"  # artifact kind written ("pipeline_plan" for PPipe, NP, DART-r)


def _rows(groups: list[tuple[list[str], list[int], int]], hardware: str) -> pl.DataFrame:
    """groups: (models, streams, size) → plan rows; workers numbered consecutively."""
    rows = []
    worker = 0
    for g, (models, streams, size) in enumerate(groups):
        rows += [dict(group=g, role="model", name=m) for m in models]
        rows += [dict(group=g, role="stream", name=str(s)) for s in streams]
        for _ in range(size):
            rows.append(dict(group=g, role="worker", name=str(worker), hardware=hardware))
            worker += 1
    return pl.DataFrame(rows, schema=PLAN_SCHEMA)


def plan_herd(req: PlanRequest) -> PlanOutput:
    """HERD (Shepherd §4) over the trace's model-streams."""
    cfg = HerdConfig(req.gpus, req.group_limit, req.gpu_memory_mb, req.reserve_mb, req.affinity_k).validate()
    n_models = req.trace["model"].n_unique() if req.trace.height else 1
    shards = req.shards or max(1, math.ceil(math.ceil(req.gpus / req.group_limit) / max(n_models, 1)))
    ms = model_streams(req.trace, req.profiles, default_model_mb=req.default_model_mb, shards=shards)
    if np.isnan(ms.alpha_ms).any() and math.isfinite(req.affinity_k):
        raise UserError("--affinity-k needs α/β for every model; the profiles lack them")
    params = {m: (float(a), float(b)) for m, a, b in zip(ms.models, ms.alpha_ms, ms.beta_ms)}
    sets = affinity_sets(params, req.affinity_k) if math.isfinite(req.affinity_k) else [list(ms.models)]
    set_of = {m: k for k, members in enumerate(sets) for m in members}
    inst = HerdInstance(ms.models, ms.demand, ms.memory_mb, np.array([set_of[m] for m in ms.models]))
    plan = solve_herd(inst, cfg, req.solver)
    _raise_without_solution(plan.result, "herd", "GPU memory, --gpus or --group-limit")
    problems = verify(inst, cfg, plan.groups)
    if problems:  # pragma: no cover - a solver bug, not a user error
        raise AssertionError(f"herd plan violates {problems}")
    streams_of = {u: sorted(s["stream"].to_list()) for (u,), s in ms.streams.group_by("unit")}
    groups = [(sorted({ms.base_models[i] for i in g.models}),
               sorted(s for i in g.models for s in streams_of[ms.models[i]]), g.size)
              for g in plan.groups]
    ks = [affinity_k([params[ms.models[i]] for i in g.models]) if not np.isnan(ms.alpha_ms).any() else None
          for g in plan.groups]
    extra = plan.result.metadata() | {
        "planner": "herd", "objective_name": "min burst tolerance", "rounds": plan.rounds, "phases": plan.phases,
        "groups": len(plan.groups), "gpus_used": sum(g.size for g in plan.groups), "gpus": req.gpus,
        "affinity_sets": len(sets), "group_k": ks, "shards_per_model": shards,
    }
    warning = tolerance_warning(plan.objective, inst.demand, cfg)
    if warning:
        extra["warning"] = warning
    return PlanOutput(_rows(groups, req.hardware), extra)


def plan_single_group(req: PlanRequest) -> PlanOutput:
    """Every stream, model and GPU in one serving group (the online-global baseline, Ḡ = ∞)."""
    if req.gpus < 1:
        raise UserError(f"--gpus must be ≥ 1, got {req.gpus}")
    if req.trace.height == 0:
        raise UserError("trace has no requests")
    models = sorted(req.trace["model"].unique().to_list())
    streams = sorted(req.trace["stream"].unique().to_list())
    result = SolveResult("none", "optimal", None, None, None, 0.0)
    return PlanOutput(_rows([(models, streams, req.gpus)], req.hardware),
                      result.metadata() | {"planner": "single-group", "groups": 1, "gpus_used": req.gpus})


def plan_nexus_epochs(req: PlanRequest) -> PlanOutput:
    """Nexus per-stream provisioning for each epoch (Symphony §2.2 Eq. 1, Shepherd §7)."""
    frame, meta = plan_nexus(req.trace, req.profiles, req.epoch_s, req.hardware)
    result = SolveResult("none", "optimal", float(meta["gpus_peak"]), None, None, 0.0)
    extra = result.metadata() | meta | {"planner": "nexus", "objective_name": "peak GPUs over epochs"}
    if meta["gpus_peak"] > req.gpus:
        extra["warning"] = f"Nexus needs {meta['gpus_peak']} GPUs at peak; the cluster has {req.gpus}"
    return PlanOutput(frame, extra)


def plan_offline_optimal(req: PlanRequest) -> PlanOutput:
    """Optimal offline goodput on a small trace (Shepherd §5.1 Eq. 3); the schedule goes in ``extra``."""
    trace = req.trace
    tables = {m: prof.latency_table_us(req.profiles, m, None, prof.DEFAULT_MAX_BATCH)
              for m in trace["model"].unique().to_list()} if trace.height else {}
    inst = OfflineInstance(trace["arrival_us"].to_numpy(), trace["deadline_us"].to_numpy(),
                           trace["model"].to_list(), tables, req.gpus)
    if trace.height == 0:
        raise UserError("trace has no requests")
    step = grid_step_us(inst, int(req.time_step_ms * 1000) if req.time_step_ms else None)
    sched = solve_offline(inst, step, req.solver)
    _raise_without_solution(sched.result, "offline-optimal", "the instance")
    models = sorted(set(inst.model))
    streams = sorted(trace["stream"].unique().to_list())
    span = max(int(trace["deadline_us"].max()) - int(trace["arrival_us"].min()), 1) / 1e6
    extra = sched.result.metadata() | {
        "planner": "offline-optimal", "objective_name": "requests served by their deadline",
        "served": sched.served, "requests": trace.height, "goodput_rps": sched.served / span,
        "exact": sched.exact, "time_step_us": step, "schedule": sched.batches,
    }
    return PlanOutput(_rows([(models, streams, req.gpus)], req.hardware), extra)


def _raise_without_solution(result: SolveResult, planner: str, what: str) -> None:
    if result.status == "infeasible":
        raise UserError(f"{planner}: infeasible — no plan satisfies the constraints ({what})")
    if result.status == "timeout":
        raise UserError(f"{planner}: time limit hit with no feasible solution (raise --time-limit)")


PLANNERS: dict[str, Callable[[PlanRequest], PlanOutput]] = {
    "herd": plan_herd,
    "nexus": plan_nexus_epochs,
    "single-group": plan_single_group,
    "offline-optimal": plan_offline_optimal,
}


def get_planner(name: str) -> Callable[[PlanRequest], PlanOutput]:
    try:
        return PLANNERS[name]
    except KeyError:
        raise UserError(f"unknown planner '{name}' (known: {', '.join(PLANNERS)})") from None


from shepherd.solvers.ppipe_planner import PPIPE_PLANNERS  # noqa: E402 - pooled-pipeline planners (PPipe)

PLANNERS.update(PPIPE_PLANNERS)
from shepherd.solvers.symphony_planner import SYMPHONY_PLANNERS  # noqa: E402 - Symphony App. A partitioning

PLANNERS.update(SYMPHONY_PLANNERS)
