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
import sys
from typing import Any, Callable

import numpy as np
import polars as pl

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine import fastpath
from shepherd.core.engine.config import EngineConfig
from shepherd.core.engine.execution import ExecutionModel
from shepherd.core.engine.fastpath import Shape
from shepherd.core.engine.inputs import Inputs, classify, trace_models
from shepherd.core.engine.loop import Engine
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.router import Router, default_router
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.profiles import DEFAULT_MAX_BATCH
from shepherd.core.units import ms_to_us

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
    engine_factory: Callable[..., Engine] | None = None,
    execution: ExecutionModel | None = None,
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
    ``engine_factory`` builds the run's engine from :class:`~.loop.Engine`'s arguments instead of
    ``Engine`` (the live engine, :mod:`.live`: the same policies on a wall clock); it runs in one loop.
    ``execution`` draws each batch's run time from calibrated samples while the policy plans on the profile
    (:mod:`.execution`, ``--exec-time measured``); such a run is the reference engine's, in one loop.
    """
    spec = registry.get(policy)
    cfg = registry.make_config(policy, config)
    if max_batch is None:
        max_batch = DEFAULT_MAX_BATCH
    if max_batch < 1:
        raise UserError(f"max batch must be ≥ 1, got {max_batch}")
    eng_cfg = engine if engine is not None else EngineConfig()
    trace = prepare_trace(trace, load, slo_ms)
    models, model_enum = trace_models(trace)
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

    rng = np.random.default_rng(seed)
    route = router if router is not None else default_router(cluster)
    routed = (len(cluster.groups) > 1 or router is not None or cluster.stream_group is not None
              or cluster.model_group is not None)  # routing also checks that every stream has a group
    ovh = overhead if overhead is not None else spec.cls.default_overhead
    hw_pos = {h: i for i, h in enumerate(runtime.hardware)}
    gpos = {g: i for i, g in enumerate(cluster.groups)}
    ws = cluster.workers
    w_groups, w_hws = [gpos[w.group] for w in ws], [hw_pos[w.hardware] for w in ws]
    drawn = execution is not None and not execution.trivial
    if drawn:
        eng_cfg = _reference_for_execution(eng_cfg, execution, spec.cls)
    # "auto": the fast path where it covers the run; "fast": insist on it (a live engine runs the policies)
    if engine_factory is not None:
        choice = fastpath.Choice("reference", "a live engine runs the policies themselves")
    elif drawn:
        choice = fastpath.Choice("reference", f"--exec-time {execution.mode}: batch times are drawn per batch, "
                                              "which only the reference engine does")
    else:
        shape = Shape(ovh, w_hws, [[i for i, g in enumerate(w_groups) if g == k] for k in range(len(cluster.groups))],
                      eng_cfg)
        choice = fastpath.choose(policy, spec.cls, cfg, shape, eng_cfg.path)
    fast_path = choice.fast_path
    fastpath.ran(policy, choice)
    summary_only = (fast_path is not None and fast_path.mode == "chunked" and eng_cfg.record == "summary"
                    and not routed)  # one group: several are merged whole
    if summary_only:  # the fast path reads the trace's columns a chunk at a time (.fast): no whole copies
        arrival, deadline, stream = trace["arrival_us"], trace["deadline_us"], trace["stream"]
        model_idx = model_enum
        group_of = None
    else:
        arrival = trace["arrival_us"].to_numpy().astype(np.int64, copy=False)
        deadline = trace["deadline_us"].to_numpy().astype(np.int64, copy=False)
        stream = trace["stream"].to_numpy()
        model_idx = model_enum.to_physical().to_numpy()
        group_of = route.route(cluster, stream, models, model_idx, rng) if routed else None
    eng = (engine_factory or Engine)(arrival, deadline, model_idx, stream, group_of, len(cluster.groups), w_groups,
                                     w_hws, [w.node for w in ws], [w.name for w in ws], runtime.lat, ovh, eng_cfg,
                                     summary_only=summary_only)
    for name in ("instances", "priority"):
        if name in trace.columns:
            eng.columns[name] = trace[name].to_numpy()
    if drawn:
        eng.res.execution = execution.draws(models, runtime.lat, max_batch)
    per_group = None
    if fast_path is not None:
        from shepherd.core.engine import fast

        def make_policy(g: int):  # a group's policy object as the reference builds it (Nexus's fast path plans with it)
            return spec.cls(Actions(eng, g, cluster.groups[g], runtime, models, max_batch, rng), cfg)

        counters = fast.run(eng, fast_path, fast_path.params(spec.cls, cfg, runtime), runtime, max_batch,
                            make_policy)  # an empty trace too: its counters
        per_group = counters if counters is not None else [{} for _ in cluster.groups]
    apart = engine_factory is None and (eng_cfg.groups == "apart" or eng_cfg.jobs > 1 or eng_cfg.executor == "ray")
    if apart:
        _note_apart_unused(eng_cfg, len(cluster.groups), fast_path is not None, ovh.mode)
    if per_group is None and apart and len(cluster.groups) > 1 and ovh.mode != "emulation":
        per_group = _run_apart(eng, policy, cfg, runtime, models, max_batch, rng, ovh, eng_cfg, cluster, gpos,
                               hw_pos)
    if per_group is None:  # one loop (also when the groups are coupled: .groups)
        for gi, gid in enumerate(cluster.groups):
            eng.policies.append(spec.cls(Actions(eng, gi, gid, runtime, models, max_batch, rng), cfg))
        if trace.height:
            eng.run(progress)
        per_group = [p.stats() for p in eng.policies]
    if eng.rec.aggregates is None:
        eng.rec.canonical_batch_ids()
    stats: dict[str, Any] = {}
    for one in per_group:
        for k, v in one.items():
            stats[k] = stats.get(k, 0) + v if isinstance(v, (int, float)) else v
    return SimulationResult(
        policy=policy, config=_asdict(cfg), overhead=dataclasses.asdict(ovh),
        seed=seed, models=models, hardware=runtime.hardware, cluster=cluster, engine=eng,
        trace_stream=stream, extra={"policy_stats": stats} if stats else {}, choice=choice,
    )


def _reference_for_execution(eng_cfg: EngineConfig, execution: ExecutionModel, cls: Any) -> EngineConfig:
    """Drawn execution times run on the reference engine, in one loop (the compiled kernels take a batch's
    time from the profile; per-worker draws are one stream per worker id): ``--engine fast`` is refused,
    ``auto`` says in one line that it runs the reference engine."""
    execution.validate()
    what = f"--exec-time {execution.mode}" + (f" (scale {execution.scale:g})" if execution.scale != 1.0 else "")
    if eng_cfg.path == "fast":
        raise UserError(f"--engine fast: the compiled engine takes batch times from the profile; {what} "
                        "runs on the reference engine (--engine reference)")
    if eng_cfg.path == "auto" and getattr(cls, "fast_path", None) is not None:
        sys.stderr.write(f"note: {what} runs on the reference engine (the compiled one takes batch times "
                         "from the profile)\n")
    return dataclasses.replace(eng_cfg, path="reference", groups="together", jobs=1, executor="local")


def _note_apart_unused(eng_cfg: EngineConfig, n_groups: int, fast_path: bool, overhead_mode: str) -> None:
    """One line on stderr when ``--groups apart`` / ``--jobs`` / ``--executor ray`` were asked for but will not be
    used (issue 33 item 8: they were ignored silently): one serving group has nothing to split; the compiled
    engine runs every group in this process; emulated overhead couples the groups through the wall clock."""
    asked = ", ".join(o for o, on in (("--groups apart", eng_cfg.groups == "apart"), (f"--jobs {eng_cfg.jobs}",
                                       eng_cfg.jobs > 1), ("--executor ray", eng_cfg.executor == "ray")) if on)
    if n_groups <= 1:
        why = "the cluster has one serving group: nothing to run apart"
    elif fast_path:
        why = (f"the compiled engine runs the {n_groups} serving groups in this process (same tables); "
               "add --engine reference to run them apart")
    elif overhead_mode == "emulation":
        why = "emulated overhead times one loop on the wall clock: the groups run in it together"
    else:
        return
    sys.stderr.write(f"note: {asked} not used: {why}\n")


def _run_apart(eng: Engine, policy: str, cfg: Any, runtime: Any, models: list[str], max_batch: int,
               rng: np.random.Generator, ovh: OverheadConfig, eng_cfg: EngineConfig, cluster: Cluster,
               gpos: dict[int, int], hw_pos: dict[str, int]) -> list[dict[str, Any]] | None:
    """Each serving group as its own run, merged into ``eng``'s tables (:mod:`.groups`); the policies'
    stats per group, or None when the groups are coupled (then nothing was written)."""
    from shepherd.core.engine import groups

    workers = [[w.id for w in cluster.workers if gpos[w.group] == g] for g in range(len(cluster.groups))]
    ids = [np.arange(len(eng.arrival), dtype=np.int64) if i is None else i for i in eng.group_ids]
    state = rng.bit_generator.state
    jobs = [groups.GroupJob(policy, cfg, runtime, models, max_batch, state, ovh, eng_cfg, g, gid,
                            eng.arrival[ids[g]], eng.deadline[ids[g]], eng.model[ids[g]], eng.stream[ids[g]],
                            {k: v[ids[g]] for k, v in eng.columns.items()},
                            [hw_pos[cluster.workers[w].hardware] for w in workers[g]],
                            [cluster.workers[w].node for w in workers[g]],
                            [cluster.workers[w].name for w in workers[g]])
            for g, gid in enumerate(cluster.groups)]
    runs = groups.run_apart(jobs, eng_cfg.jobs, eng_cfg.executor, eng_cfg.ray_address)
    if runs is None:
        return None
    groups.merge(eng, runs, ids, workers)
    return [r.stats for r in runs]


def _asdict(cfg: Any) -> dict[str, Any]:
    return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
