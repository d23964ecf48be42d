"""Workers and serving groups.

A *serving group* (Shepherd §3.2, Herd §4) is a disjoint set of workers with
its own scheduler instance and the streams routed to it. Without a plan all
workers form one group serving every stream. A plan artifact (``core.artifacts``
kind ``plan``) lists per group its ``worker`` rows (``name`` = worker id,
optional ``hardware``), its ``stream`` rows and/or its ``model`` rows; requests
are routed by stream when the plan has stream rows, else by model (:mod:`.router`).

Every worker is its own node (``node = worker index``) unless a later planner
says otherwise; the column exists for PPipe's link reservations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from shepherd.core.errors import UserError


@dataclass(frozen=True)
class Worker:
    """One accelerator: global id, serving group, hardware type, node."""

    id: int
    group: int
    hardware: str
    node: int
    name: str = ""


@dataclass(frozen=True)
class Cluster:
    """Workers plus how streams/models map to groups (``None``: one group gets all)."""

    workers: tuple[Worker, ...]
    groups: tuple[int, ...]
    stream_group: dict[int, int] | None = None
    model_group: dict[str, int] | None = None
    group_names: dict[int, int] = field(default_factory=dict)

    def group_workers(self, group: int) -> list[int]:
        return [w.id for w in self.workers if w.group == group]


def uniform_cluster(gpus: int, hardware: str) -> Cluster:
    """``gpus`` identical workers in one serving group 0."""
    if gpus < 1:
        raise UserError(f"--gpus must be ≥ 1, got {gpus}")
    workers = tuple(Worker(i, 0, hardware, i, str(i)) for i in range(gpus))
    return Cluster(workers, (0,))


#: what a policy other than Nexus is told about a Nexus plan (``plan --planner nexus``)
NEXUS_PLAN_HINT = ("only --policy nexus serves it (it re-plans every epoch with the same squishy bin packing); "
                   "for this policy plan with --planner herd or single-group")


def is_nexus_plan(plan: pl.DataFrame) -> bool:
    """A plan written by the Nexus planner: per-epoch allocations whose streams carry the ``share`` of
    their requests each group serves (a session may be split over several GPUs, Nexus §6.1)."""
    return "share" in plan.columns and "epoch" in plan.columns


def nexus_plan_gpus(plan: pl.DataFrame) -> tuple[int, str | None]:
    """(The most workers any epoch of a Nexus plan uses, their hardware): the cluster a Nexus run of it needs."""
    workers = plan.filter(pl.col("role") == "worker")
    if workers.height == 0:
        raise UserError("plan has no worker rows: every group needs at least one worker")
    peak = int(workers.group_by("epoch").agg(pl.col("name").n_unique())["name"].max())
    kinds = workers["hardware"].drop_nulls().unique().to_list() if "hardware" in workers.columns else []
    return peak, (kinds[0] if len(kinds) == 1 else None)


def _split_stream_message(plan: pl.DataFrame, stream: int) -> str:
    rows = plan.filter((pl.col("role") == "stream") & (pl.col("name") == str(stream)))
    groups = rows["group"].to_list()
    where = ", ".join(str(g) for g in groups)
    if "share" in plan.columns and rows["share"].null_count() == 0:
        where += " (shares " + "/".join(f"{x:.2f}" for x in rows["share"].to_list()) + ")"
    return f"plan splits stream {stream} over groups {where}"


def cluster_from_plan(plan: pl.DataFrame, default_hardware: str | None) -> Cluster:
    """Build the cluster of a plan artifact frame (see module docstring)."""
    if "epoch" in plan.columns and plan["epoch"].drop_nulls().n_unique() > 1:
        raise UserError(f"this plan changes per epoch (a Nexus plan): {NEXUS_PLAN_HINT}")
    roles = set(plan["role"].unique().to_list())
    unknown = roles - {"stream", "model", "worker"}
    if unknown:
        raise UserError(f"plan has unknown role '{sorted(unknown)[0]}' (expected stream, model, worker)")
    worker_rows = plan.filter(pl.col("role") == "worker")
    if worker_rows.height == 0:
        raise UserError("plan has no worker rows: every group needs at least one worker")
    groups = sorted(set(plan["group"].to_list()))
    has_hw = "hardware" in plan.columns
    workers = []
    seen: set[str] = set()
    for row in worker_rows.iter_rows(named=True):
        name = str(row["name"])
        if name in seen:
            raise UserError(f"plan lists worker '{name}' twice")
        seen.add(name)
        hw = row["hardware"] if has_hw and row["hardware"] is not None else default_hardware
        if hw is None:
            raise UserError(f"plan worker '{name}' has no hardware and none can be inferred")
        workers.append(Worker(len(workers), int(row["group"]), str(hw), len(workers), name))
    empty = [g for g in groups if not any(w.group == g for w in workers)]
    if empty:
        raise UserError(f"plan group {empty[0]} has no workers")
    stream_group = model_group = None
    stream_rows = plan.filter(pl.col("role") == "stream")
    if stream_rows.height:
        stream_group = {}
        for g, name in stream_rows.select("group", "name").iter_rows():
            try:
                s = int(name)
            except ValueError:
                raise UserError(f"plan stream name '{name}' is not an integer stream id") from None
            if s in stream_group and stream_group[s] != g:
                if is_nexus_plan(plan):
                    raise UserError(f"{_split_stream_message(plan, s)} (a Nexus plan): {NEXUS_PLAN_HINT}")
                raise UserError(f"plan assigns stream {s} to two groups")
            stream_group[s] = int(g)
    model_rows = plan.filter(pl.col("role") == "model")
    if model_rows.height and stream_group is None:
        model_group = {}
        for g, name in model_rows.select("group", "name").iter_rows():
            if name in model_group and model_group[name] != g:
                raise UserError(f"plan assigns model '{name}' to two groups")
            model_group[str(name)] = int(g)
    return Cluster(tuple(workers), tuple(groups), stream_group, model_group)
