"""From a pooled-pipeline plan to a running engine: vGPU workers, pipelines, policies (PPipe §5.1 "Data plane").

:func:`build` places the plan's virtual GPUs on physical GPUs and servers
(:func:`.plan.place`), makes one engine worker per vGPU (node = its server,
so NIC reservations are shared by the GPUs of a server) in one serving group,
and precomputes every stage's latency and inbound transfer per batch size
(STYLE.md pattern 6). :func:`simulate_plan` runs a data-plane policy
(``ppipe``, ``reactive``) over a trace with the reference engine.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import polars as pl

from shepherd.core.engine.cluster import Cluster, Worker
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.simulate import simulate
from shepherd.core.pipelines.blocks import BlockProfile, whole_model_frame
from shepherd.core.pipelines.plan import PipelinePlan, place
from shepherd.core.pipelines.reservations import PipeRuntime


def build(plan: PipelinePlan, profiles: dict[str, BlockProfile],
          models: list[str]) -> tuple[Cluster, list[PipeRuntime], int]:
    """(engine cluster, pipelines with model indices into ``models``, number of servers)."""
    vgpus = place(plan)
    workers = tuple(Worker(i, 0, v.hardware, v.node, f"{v.hardware}-gpu{v.gpu}-p{v.pipeline}s{v.stage}")
                    for i, v in enumerate(vgpus))
    by_stage: dict[tuple[int, int], list[int]] = {}
    for i, v in enumerate(vgpus):
        by_stage.setdefault((v.pipeline, v.stage), []).append(i)
    index = {m: i for i, m in enumerate(models)}
    bw = plan.cluster.bandwidth_gbps
    pipes = []
    for pi, p in enumerate(plan.pipelines):
        if p.model not in index:
            continue
        prof = profiles[p.model]
        maxb = min(prof.max_batch(s.hardware, s.k) for s in p.stages)
        lat, tin, ws, ns = [], [], [], []
        for j, s in enumerate(p.stages):
            lat.append([0] + [prof.partition_us(s.hardware, s.k, b, s.start, s.end) for b in range(1, maxb + 1)])
            if j == 0:
                tin.append([0] * (maxb + 1))
            else:
                per = prof.transfer_us_per_sample(s.start - 1, bw)
                tin.append([0] + [int(math.ceil(b * per)) for b in range(1, maxb + 1)])
            ids = by_stage.get((pi, j), [])
            ws.append(ids)
            ns.append([vgpus[i].node for i in ids])
        pipes.append(PipeRuntime(index[p.model], p.batch, ws, ns, lat, tin, maxb))
    nodes = max((v.node for v in vgpus), default=0) + 1
    return Cluster(workers, (0,)), pipes, nodes


def simulate_plan(plan: PipelinePlan, profiles: dict[str, BlockProfile], trace: pl.DataFrame,
                  policy: str = "ppipe", seed: int = 0, config: dict[str, Any] | None = None,
                  progress: Callable[[int], None] | None = None) -> SimulationResult:
    """Serve ``trace`` with ``plan`` under data-plane ``policy`` (``ppipe`` or ``reactive``)."""
    models = sorted(trace["model"].unique().to_list()) if trace.height else []
    cluster, pipes, nodes = build(plan, profiles, models)
    whole = whole_model_frame([profiles[m] for m in models if m in profiles])
    cfg = dict(config or {}) | {"pipelines": tuple(pipes), "nodes": nodes}
    from shepherd.core.policies import registry

    typed = registry.get(policy).config_cls(**cfg)
    return simulate(trace, whole, policy, typed, cluster=cluster, seed=seed, progress=progress,
                    hardware=plan.cluster.hardware[0])
