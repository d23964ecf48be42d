"""``simulate()``: trace + profiles + policy + cluster → :class:`SimulationResult`.

This is the programmatic entry point (the CLI is a thin wrapper). It prepares
the trace (``load`` time-compression, ``slo_ms`` override), builds the dense
latency tables (``core.profiles.latency_table_us``), one policy instance per
serving group, runs the engine and returns the raw outcome arrays.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core import policies as _policies  # noqa: F401 - registers the policies
from shepherd.core.engine.cluster import Cluster, cluster_from_plan, uniform_cluster
from shepherd.core.engine.loop import Engine, GroupContext
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.profiles import DEFAULT_MAX_BATCH, latency_table_us
from shepherd.core.units import ms_to_us


def prepare_trace(trace: pl.DataFrame, load: float = 1.0, slo_ms: float | None = None) -> pl.DataFrame:
    """Apply ``--load`` and ``--slo`` to a trace frame.

    ``load`` X rescales the offered rate by time-compressing arrivals:
    ``arrival' = round(arrival / X)`` (X = 2 doubles every stream's rate and
    keeps the arrival pattern's shape); SLOs are kept, deadlines recomputed.
    ``slo_ms`` replaces every request's SLO.
    """
    if not np.isfinite(load) or load <= 0:
        raise UserError(f"--load must be a positive number, got {load}")
    if slo_ms is not None and (not np.isfinite(slo_ms) or slo_ms <= 0):
        raise UserError(f"--slo must be a positive number of ms, got {slo_ms}")
    out = trace
    if load != 1.0:
        out = out.with_columns((pl.col("arrival_us").cast(pl.Float64) / load).round().cast(pl.Int64))
    if slo_ms is not None:
        out = out.with_columns(slo_us=pl.lit(ms_to_us(slo_ms), dtype=pl.Int64))
    if load != 1.0 or slo_ms is not None:
        out = out.with_columns(deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    return out


def _hardware_for(profiles: pl.DataFrame, models: list[str], hardware: str | None) -> str:
    if hardware is not None:
        return hardware
    kinds = profiles.filter(pl.col("model").is_in(models))["hardware"].unique().sort().to_list()
    if len(kinds) == 1:
        return kinds[0]
    if not kinds:
        return "unknown"
    raise UserError(f"profiles cover several hardware ({', '.join(kinds)}); choose one with --hardware")


def simulate(
    trace: pl.DataFrame,
    profiles: pl.DataFrame,
    policy: str = "flex",
    config: Any = None,
    *,
    gpus: int | None = None,
    plan: pl.DataFrame | None = None,
    cluster: Cluster | None = None,
    seed: int = 0,
    load: float = 1.0,
    slo_ms: float | None = None,
    overhead: OverheadConfig | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    hardware: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate ``policy`` serving ``trace`` on a cluster.

    The cluster is ``cluster``, else built from ``plan`` (a plan artifact
    frame), else ``gpus`` identical workers in one group. ``config`` is the
    policy's typed config (or a dict of its fields, or None for defaults);
    ``overhead`` defaults to the policy's own overhead model. Deterministic
    for a given seed unless ``overhead.mode == "emulation"``.
    """
    spec = registry.get(policy)
    cfg = registry.make_config(policy, config)
    if max_batch < 1:
        raise UserError(f"max batch must be ≥ 1, got {max_batch}")
    trace = prepare_trace(trace, load, slo_ms)
    models = sorted(trace["model"].unique().to_list()) if trace.height else []
    hw_default = _hardware_for(profiles, models, hardware)
    if cluster is None:
        if plan is not None:
            cluster = cluster_from_plan(plan, hw_default)
        elif gpus is not None:
            cluster = uniform_cluster(gpus, hw_default)
        else:
            raise UserError("give the number of GPUs or a plan")
    hw_names = sorted({w.hardware for w in cluster.workers})
    lat = [[latency_table_us(profiles, m, h, max_batch).tolist() for m in models] for h in hw_names]
    for h, per_hw in zip(hw_names, lat):
        for m, row in zip(models, per_hw):
            if any(x <= 0 for x in row[1:]):
                raise UserError(f"profile of '{m}' on {h} has non-positive latencies")
    exits = _exit_points(profiles, models)

    arrival = trace["arrival_us"].to_numpy().astype(np.int64, copy=False)
    deadline = trace["deadline_us"].to_numpy().astype(np.int64, copy=False)
    stream = trace["stream"].to_numpy()
    # model index = position in ``models`` (the Enum's physical code; no per-row hashing copies)
    model_idx = (trace["model"].cast(pl.Enum(models)).to_physical().to_numpy()
                 if trace.height else np.empty(0, np.int32))
    routed = cluster.stream_group is not None or cluster.model_group is not None
    group_of = cluster.route(stream, models, model_idx) if routed else None  # checks every stream has a group

    ovh = overhead if overhead is not None else spec.cls.default_overhead
    hw_pos = {h: i for i, h in enumerate(hw_names)}
    engine = Engine(arrival, deadline, model_idx, stream, group_of, cluster,
                    [hw_pos[w.hardware] for w in cluster.workers], lat, ovh)
    for name in ("instances", "priority"):
        if name in trace.columns:
            engine.columns[name] = trace[name].to_numpy()
    rng = np.random.default_rng(seed)
    for gi, gid in enumerate(cluster.groups):
        wids = cluster.group_workers(gid)
        ctx = GroupContext(engine, gi, gid, wids, [engine.w_hw[w] for w in wids], lat, models,
                           exits, max_batch, rng, engine.group_ids[gi] if len(engine.group_ids) > 1 else None)
        pol = spec.cls(ctx, cfg)
        engine.policies.append(pol)
    engine.policy_of = [engine.policies[g] for g in engine.w_group]
    if trace.height:
        engine.run(progress)
    return SimulationResult(
        policy=policy, config=dataclasses.asdict(cfg), overhead=dataclasses.asdict(ovh),
        seed=seed, models=models, hardware=hw_names, cluster=cluster, engine=engine,
        trace_stream=stream,
    )


def _exit_points(profiles: pl.DataFrame, models: list[str]) -> list[int]:
    if "exit_points" not in profiles.columns:
        return [0] * len(models)
    per = (profiles.filter(pl.col("model").is_in(models)).group_by("model")
           .agg(pl.col("exit_points").max()))
    lut = {m: (int(e) if e is not None else 0) for m, e in per.iter_rows()}
    return [lut.get(m, 0) for m in models]
