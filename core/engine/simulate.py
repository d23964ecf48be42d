"""``simulate()``: the one entry point — trace + artifacts + policy → :class:`SimulationResult`.

Every policy goes through it (the CLI is a thin wrapper): it prepares the
trace (``load`` time-compression, ``slo_ms`` override), checks that the
artifacts the policy ``requires`` were given, lets the policy ``prepare``
its runtime (cluster and dense tables), routes the requests to serving groups
(:mod:`.router`), makes one policy instance per group with its
:class:`~.actions.Actions`, runs the engine and returns the tables.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine.config import EngineConfig
from shepherd.core.engine.inputs import Inputs, classify, model_index
from shepherd.core.engine.loop import Engine
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.router import Router, default_router
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.profiles import DEFAULT_MAX_BATCH
from shepherd.core.units import ms_to_us

import shepherd.core.policies  # noqa: E402,F401 - registers the built-in policies (before any timed call)

#: how to give each artifact kind, for the error of a policy that lacks one
KIND_HINTS = {
    "profiles": "a profiles frame (--profiles, or the built-in tables)",
    "block_profiles": "block profiles (--profiles PATH of kind block_profiles)",
    "pipeline_plan": "a pipeline plan (--plan PATH of kind pipeline_plan, from `shepherd plan`)",
    "plan": "a plan frame (--plan PATH of kind plan)",
}


def prepare_trace(trace: pl.DataFrame, load: float = 1.0, slo_ms: float | None = None) -> pl.DataFrame:
    """Apply ``--load`` and ``--slo-ms`` to a trace frame.

    ``load`` X rescales the offered rate by time-compressing arrivals:
    ``arrival' = round(arrival / X)`` (X = 2 doubles every stream's rate and
    keeps the arrival pattern's shape); SLOs are kept, deadlines recomputed.
    ``slo_ms`` replaces every request's SLO.
    """
    if not np.isfinite(load) or load <= 0:
        raise UserError(f"--load must be a positive number, got {load}")
    if slo_ms is not None and (not np.isfinite(slo_ms) or slo_ms <= 0):
        raise UserError(f"--slo-ms must be a positive number of ms, got {slo_ms}")
    out = trace
    if load != 1.0:
        out = out.with_columns((pl.col("arrival_us").cast(pl.Float64) / load).round().cast(pl.Int64))
    if slo_ms is not None:
        out = out.with_columns(slo_us=pl.lit(ms_to_us(slo_ms), dtype=pl.Int64))
    if load != 1.0 or slo_ms is not None:
        out = out.with_columns(deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    return out


def simulate(
    trace: pl.DataFrame,
    profiles: Any = None,
    policy: str = "flex",
    config: Any = None,
    *,
    gpus: int | None = None,
    plan: Any = None,
    cluster: Cluster | None = None,
    router: Router | None = None,
    artifacts: dict[str, Any] | None = None,
    seed: int = 0,
    load: float = 1.0,
    slo_ms: float | None = None,
    overhead: OverheadConfig | None = None,
    engine: EngineConfig | None = None,
    max_batch: int | None = None,
    hardware: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> SimulationResult:
    """Simulate ``policy`` serving ``trace``.

    ``profiles`` is a profiles frame or block profiles by model; ``plan`` a
    plan frame or a pipeline plan; ``artifacts`` any other inputs by artifact
    kind (e.g. a later paper's configuration table); the policy says which it
    ``requires``.
    The cluster is ``cluster``, else the plan's, else ``gpus`` identical
    workers in one group. ``config`` is the policy's typed config (or a dict
    of its fields, or None for defaults); ``overhead`` defaults to the
    policy's own overhead model; ``engine`` holds the speed switches.
    Deterministic for a given seed unless ``overhead.mode == "emulation"``.
    """
    spec = registry.get(policy)
    cfg = registry.make_config(policy, config)
    if max_batch is None:
        max_batch = DEFAULT_MAX_BATCH
    if max_batch < 1:
        raise UserError(f"max batch must be ≥ 1, got {max_batch}")
    eng_cfg = engine if engine is not None else EngineConfig()
    trace = prepare_trace(trace, load, slo_ms)
    models = sorted(trace["model"].unique().to_list()) if trace.height else []
    inputs = Inputs(trace, models, classify(profiles, plan) | dict(artifacts or {}), gpus, cluster, hardware,
                    max_batch, eng_cfg)
    if "pipeline_plan" in inputs.kinds() and "pipeline_plan" not in spec.cls.requires:
        takers = [n for n in registry.names() if "pipeline_plan" in registry.get(n).cls.requires]
        raise UserError(f"a pipeline plan runs on a pipeline data plane ({' or '.join(takers)}), "
                        f"not on policy '{policy}'")
    missing = [k for k in spec.cls.requires if k not in inputs.kinds()]
    if missing:
        raise UserError(f"policy '{policy}' requires {KIND_HINTS.get(missing[0], missing[0])}")
    runtime = spec.cls.prepare(inputs, cfg)
    cluster = runtime.cluster

    arrival = trace["arrival_us"].to_numpy().astype(np.int64, copy=False)
    deadline = trace["deadline_us"].to_numpy().astype(np.int64, copy=False)
    stream = trace["stream"].to_numpy()
    model_idx = model_index(trace, models)
    rng = np.random.default_rng(seed)
    route = router if router is not None else default_router(cluster)
    routed = (len(cluster.groups) > 1 or router is not None or cluster.stream_group is not None
              or cluster.model_group is not None)  # routing also checks that every stream has a group
    group_of = route.route(cluster, stream, models, model_idx, rng) if routed else None

    ovh = overhead if overhead is not None else spec.cls.default_overhead
    hw_pos = {h: i for i, h in enumerate(runtime.hardware)}
    gpos = {g: i for i, g in enumerate(cluster.groups)}
    ws = cluster.workers
    eng = Engine(arrival, deadline, model_idx, stream, group_of, len(cluster.groups), [gpos[w.group] for w in ws],
                 [hw_pos[w.hardware] for w in ws], [w.node for w in ws], [w.name for w in ws], runtime.lat,
                 ovh, eng_cfg)
    for name in ("instances", "priority"):
        if name in trace.columns:
            eng.columns[name] = trace[name].to_numpy()
    for gi, gid in enumerate(cluster.groups):
        eng.policies.append(spec.cls(Actions(eng, gi, gid, runtime, models, max_batch, rng), cfg))
    if trace.height:
        eng.run(progress)
    stats: dict[str, Any] = {}
    for p in eng.policies:
        for k, v in p.stats().items():
            stats[k] = stats.get(k, 0) + v if isinstance(v, (int, float)) else v
    return SimulationResult(
        policy=policy, config=_asdict(cfg), overhead=dataclasses.asdict(ovh),
        seed=seed, models=models, hardware=runtime.hardware, cluster=cluster, engine=eng,
        trace_stream=stream, extra={"policy_stats": stats} if stats else {},
    )


def _asdict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
