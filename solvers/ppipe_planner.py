"""``shepherd plan --planner ppipe|np|dart-r``: PlanRequest → pooled pipelines (PPipe §3, §7.1).

The trace gives the DNNs and their workload shares (§3 "Objective": the MILP
maximises the minimum of throughput / share); the profiles must be a
``block_profiles`` artifact (``shepherd profile --from-ppipe DIR``); the
cluster is a Table 1 name (``--cluster HC1-L``), its effective bandwidth
overridable (``--bandwidth-gbps``). The output is a ``pipeline_plan``
artifact. Imports of :mod:`.planners` happen inside functions (that module
registers these adapters at its end).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.pipelines import blocks, plan as pplan, rules
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.solvers.ppipe_baselines import PIPELINE_PLANNERS
from shepherd.solvers.ppipe_milp import PPipePlanConfig


def workload_shares(trace: pl.DataFrame) -> dict[str, float]:
    """Share of requests per DNN in the trace (§7.1: functions → DNNs round-robin)."""
    if trace.height == 0:
        raise UserError("trace has no requests")
    counts = trace.group_by("model").len().sort("model")
    total = float(counts["len"].sum())
    return {m: n / total for m, n in counts.iter_rows()}


def _run(name: str, req: Any) -> Any:
    from shepherd.solvers.planners import PlanOutput

    if "block" not in req.profiles.columns:
        raise UserError(f"planner '{name}' needs block profiles (shepherd profile --from-ppipe DIR --out …)")
    weights = workload_shares(req.trace)
    profs = blocks.from_frame(req.profiles, sorted(weights))
    cname = req.cluster or "HC1-L"
    bw = req.bandwidth_gbps if req.bandwidth_gbps is not None else rules.bandwidth_gbps(cname, req.rules)
    cluster = make_cluster(cname, bw)
    cfg = PPipePlanConfig(slo_margin=req.slo_margin, slo_scale=req.slo_scale, formulation=req.milp_formulation,
                          **rules.planner_fields(req.rules)).validate()
    result = PIPELINE_PLANNERS[name](list(profs.values()), weights, cluster, cfg, req.solver)
    problems = pplan.verify(result, profs)
    if problems:  # pragma: no cover - a formulation bug, not a user error
        raise AssertionError(f"{name} plan violates: {problems[0]}")
    extra = pplan.extra_of(result) | {"rules": req.rules}
    return PlanOutput(pplan.to_frame(result), extra, kind="pipeline_plan")


def plan_ppipe(req: Any) -> Any:
    """PPipe: pooled pipelines from the A.2 MILP."""
    return _run("ppipe", req)


def plan_np(req: Any) -> Any:
    """NP: the same MILP without partitioning."""
    return _run("np", req)


def plan_dart_r(req: Any) -> Any:
    """DART-r: replicated low/high GPU pairs, leftovers whole."""
    return _run("dart-r", req)


PPIPE_PLANNERS = {"ppipe": plan_ppipe, "np": plan_np, "dart-r": plan_dart_r}
