"""``shepherd plan --planner symphony-partition``: PlanRequest → models per sub-cluster (Symphony §4.7, App. A).

Inputs, each a documented choice (Appendix A names the quantities, not their sources):

* r_i: the model's mean request rate over the trace, requests / span (span =
  last arrival − first arrival, at least 1 s).
* s_i, d_i: the profiles' ``static_mb`` / ``dynamic_mb`` columns (the
  ``symphony-memory`` table, Symphony Table 1). Profiles without them are a
  user error: the memory constraint (6) cannot be formed.
* l = ``--partitions`` (default ⌈GPUs / group limit⌉); S_max = ``--gpu-memory-mb``
  (Eq. 6 already counts the largest dynamic memory, so no reserve is deducted);
  R_max = ``--rate-cap`` (default ∞); w = ``--balance-weight`` (default R̄/S̄).
* X' = the model rows of a previous plan (``--previous``), C_max =
  ``--max-move-cost`` with c_ij = 1 (Eq. 11).
* GPUs: Appendix A partitions models, not GPUs; the plan splits the cluster's
  GPUs evenly over the sub-clusters (the first ``gpus mod l`` get one more), so
  every sub-cluster needs at least one GPU.

Imports of :mod:`.planners` happen inside functions (that module registers
this adapter at its end).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.solvers import symphony_partition as sp


def instance_from_request(req: Any) -> sp.PartitionInstance:
    """Rates from the trace, memory from the profiles, caps from the request."""
    if req.trace.height == 0:
        raise UserError("trace has no requests")
    parts = req.partitions if req.partitions is not None else math.ceil(req.gpus / req.group_limit)
    if parts < 1:
        raise UserError(f"--partitions must be ≥ 1, got {parts}")
    if req.gpus < parts:
        raise UserError(f"--gpus {req.gpus} is below --partitions {parts}: every sub-cluster needs a GPU")
    missing = [c for c in ("static_mb", "dynamic_mb") if c not in req.profiles.columns]
    if missing:
        raise UserError("symphony-partition needs static_mb and dynamic_mb per model "
                        "(use --profiles from `shepherd profile --table symphony-memory`)")
    counts = req.trace.group_by("model").len().sort("model")
    models = counts["model"].to_list()
    arr = req.trace["arrival_us"]
    span_s = max((int(arr.max()) - int(arr.min())) / 1e6, 1.0)
    mem = (req.profiles.group_by("model").agg(pl.col("static_mb").first(), pl.col("dynamic_mb").first())
           .filter(pl.col("model").is_in(models)).sort("model"))
    if mem.height != len(models) or mem["static_mb"].null_count() or mem["dynamic_mb"].null_count():
        lacking = sorted(set(models) - set(mem.drop_nulls()["model"].to_list()))
        raise UserError(f"profiles give no static/dynamic memory for model '{lacking[0]}'")
    previous = None
    if req.previous is not None:
        where = dict(req.previous)
        previous = np.array([where.get(m, -1) for m in models], dtype=np.int64)
    return sp.PartitionInstance(
        models, counts["len"].to_numpy() / span_s, mem["static_mb"].to_numpy(), mem["dynamic_mb"].to_numpy(),
        parts, req.gpu_memory_mb, req.rate_cap, req.balance_weight, previous,
        max_move_cost=req.max_move_cost if previous is not None else math.inf,
    ).validate()


def plan_symphony_partition(req: Any) -> Any:
    """Appendix A's MILP under the request's solver config; rows: models, streams and GPUs per sub-cluster."""
    from shepherd.solvers.planners import PLAN_SCHEMA, PlanOutput, _raise_without_solution

    inst = instance_from_request(req)
    part = sp.solve_partition(inst, req.solver)
    _raise_without_solution(part.result, "symphony-partition",
                            "--gpu-memory-mb, --rate-cap, --partitions or --max-move-cost")
    assert part.assignment is not None
    stream_of = req.trace.group_by("model").agg(pl.col("stream").unique().sort())
    streams = {m: s for m, s in stream_of.iter_rows()}
    rows: list[dict] = []
    worker = 0
    for j in range(inst.parts):
        members = [inst.models[i] for i in np.flatnonzero(part.assignment == j)]
        rows += [dict(group=j, role="model", name=m) for m in members]
        rows += [dict(group=j, role="stream", name=str(s)) for s in sorted({s for m in members for s in streams[m]})]
        for _ in range(req.gpus // inst.parts + (j < req.gpus % inst.parts)):
            rows.append(dict(group=j, role="worker", name=str(worker), hardware=req.hardware))
            worker += 1
    extra = part.result.metadata() | {
        "planner": "symphony-partition", "objective_name": "ΔR + w·ΔS (Symphony Eq. 4)",
        "partitions": inst.parts, "weight_w": inst.w, "rate_cap": inst.rate_cap,
        "memory_cap_mb": inst.memory_cap_mb, "max_move_cost": inst.max_move_cost, "start": part.start,
        "gpus": req.gpus, "groups": inst.parts,
    } | sp.summary(inst, part.assignment)
    return PlanOutput(pl.DataFrame(rows, schema=PLAN_SCHEMA), extra)


def previous_assignment(frame: pl.DataFrame) -> list[tuple[str, int]]:
    """(model, sub-cluster) pairs from a plan artifact's model rows (X' for Eq. 11)."""
    models = frame.filter(pl.col("role") == "model")
    if models.height == 0:
        raise UserError("--previous plan has no model rows")
    if models["name"].n_unique() != models.height:
        raise UserError("--previous plan places a model in more than one sub-cluster")
    return [(m, int(g)) for g, m in models.select("group", "name").iter_rows()]


SYMPHONY_PLANNERS = {"symphony-partition": plan_symphony_partition}
