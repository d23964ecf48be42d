"""From a pooled-pipeline plan to a running engine: vGPU workers, pipelines (PPipe §5.1 "Data plane").

:func:`build` places the plan's virtual GPUs on physical GPUs and servers
(:func:`.plan.place`), makes one engine worker per vGPU (node = its server,
so NIC reservations are shared by the GPUs of a server) in one serving group,
and precomputes every stage's latency and inbound transfer per batch size
(STYLE.md pattern 6). :func:`prepare_pipelines` is the ``prepare`` step of
the data-plane policies (``ppipe``, ``reactive``), which run through
``simulate(trace, block_profiles, policy, plan=pipeline_plan)``.
"""

from __future__ import annotations

import math

from shepherd.core.engine.cluster import Cluster, Worker
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.plan import PipelinePlan, place
from shepherd.core.pipelines.reservations import PipeRuntime


def build(plan: PipelinePlan, profiles: dict[str, BlockProfile],
          models: list[str], slot_receive: bool = False) -> tuple[Cluster, list[PipeRuntime], int]:
    """(engine cluster, pipelines with model indices into ``models``, number of link nodes).

    ``slot_receive`` (artifact rule (c), :mod:`.rules`): the last stage of
    every multi-stage pipeline gets one receive link per vGPU — each such
    vGPU is given a link node of its own (numbered after the servers; its
    uplink is never used, a last stage sends nothing) — instead of its
    server's shared NIC. The engine workers keep their real servers.
    """
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
    if slot_receive:
        for pipe in pipes:
            if len(pipe.workers) > 1:
                pipe.nodes[-1] = list(range(nodes, nodes + len(pipe.workers[-1])))
                nodes += len(pipe.workers[-1])
    return Cluster(workers, (0,)), pipes, nodes


def prepare_pipelines(inputs: Inputs, slot_receive: bool = False) -> Runtime:
    """The runtime of a data-plane policy: the plan's vGPU cluster and its pipelines
    (``runtime.tables``: ``pipelines``, ``nodes``; ``slot_receive``: see :func:`build`)."""
    plan: PipelinePlan = inputs.get("pipeline_plan")
    profiles: dict[str, BlockProfile] = inputs.get("block_profiles")
    missing = [m for m in inputs.models if m not in profiles]
    if missing:
        raise UserError(f"profiles have no model '{missing[0]}'")
    cluster, pipes, nodes = build(plan, profiles, inputs.models, slot_receive)
    hw_names = sorted({w.hardware for w in cluster.workers})
    return Runtime(cluster, hw_names, tables={"pipelines": tuple(pipes), "nodes": nodes})
