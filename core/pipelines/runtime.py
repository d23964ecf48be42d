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
from shepherd.core.pipelines.cluster import ClusterSpec
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, place
from shepherd.core.pipelines.reservations import PipeRuntime


def build(plan: PipelinePlan, profiles: dict[str, BlockProfile],
          models: list[str], slot_receive: bool = False,
          stage_servers: bool = False, transfer_round: bool = False) -> tuple[Cluster, list[PipeRuntime], int]:
    """(engine cluster, pipelines with model indices into ``models``, number of link nodes).

    ``slot_receive`` (artifact rule (c), :mod:`.rules`): the last stage of
    every multi-stage pipeline gets one receive link per vGPU — each such
    vGPU is given a link node of its own (numbered after the servers; its
    uplink is never used, a last stage sends nothing) — instead of its
    server's shared NIC. The engine workers keep their real servers.

    ``stage_servers`` (artifact rule (d)): the links of every stage come
    from :func:`stage_links` instead of the servers of :func:`.plan.place` —
    each stage of each pipeline has link nodes of its own (numbered after the
    servers), so no NIC is shared between stages, pipelines or DNNs.

    ``transfer_round`` (artifact rule (f)): a batch of ``b`` takes ``b`` times
    the per-request transfer rounded to the nearest µs (the artifact's
    ``RequestsDelayer.networkLatency``, times the batch size in
    ``ReservationOffer.reserve``) instead of ``ceil(b × per-request time)``.
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
                if transfer_round:
                    one = int(math.floor(per + 0.5))  # (half up, as Java's Math.round)
                    tin.append([b * one for b in range(maxb + 1)])
                else:
                    tin.append([0] + [int(math.ceil(b * per)) for b in range(1, maxb + 1)])
            ids = by_stage.get((pi, j), [])
            ws.append(ids)
            ns.append([vgpus[i].node for i in ids])
        pipes.append(PipeRuntime(index[p.model], p.batch, ws, ns, lat, tin, maxb))
    nodes = max((v.node for v in vgpus), default=0) + 1
    if stage_servers:
        kept = [p for p in plan.pipelines if p.model in index]
        for pipe, p in zip(pipes, kept):
            for j, groups in enumerate(stage_links(p, plan.cluster)):
                pipe.nodes[j] = [nodes + g for g in groups]
                nodes += max(groups, default=-1) + 1
    if slot_receive:
        for pipe in pipes:
            if len(pipe.workers) > 1:
                pipe.nodes[-1] = list(range(nodes, nodes + len(pipe.workers[-1])))
                nodes += len(pipe.workers[-1])
    return Cluster(workers, (0,)), pipes, nodes


def stage_links(p: Pipeline, cluster: ClusterSpec) -> list[list[int]]:
    """Artifact rule (d): per stage of ``p``, the link group (0, 1, …) of each of its vGPUs, in order.

    The authors' simulator (``cluster-sim``, ``ilp_partitioned/Pipeline``)
    gives the vGPUs of a non-last stage, in order, one shared network delayer
    (the stage's send and receive link) per ``max(g_j, g_{j+1}) · k_j`` of
    them — ``g`` the per-server GPUs of the stage's and the next stage's GPU
    type, ``k_j`` its MPS level — and each last-stage vGPU one of its own.
    Last stages here are grouped by ``g_j · k_j`` (their servers), and
    ``slot_receive`` (rule (c)) then gives each its own link, as the
    artifact does; keeping (c) and (d) apart lets either be switched alone.
    """
    out = []
    for j, s in enumerate(p.stages):
        per = cluster.per_server(s.hardware)
        if j + 1 < len(p.stages):
            per = max(per, cluster.per_server(p.stages[j + 1].hardware))
        size = per * s.k
        out.append([i // size for i in range(s.vgpus)])
    return out


def prepare_pipelines(inputs: Inputs, slot_receive: bool = False, stage_servers: bool = False,
                      transfer_round: bool = False) -> Runtime:
    """The runtime of a data-plane policy: the plan's vGPU cluster and its pipelines
    (``runtime.tables``: ``pipelines``, ``nodes``; ``slot_receive``, ``stage_servers``, ``transfer_round``:
    see :func:`build`)."""
    plan: PipelinePlan = inputs.get("pipeline_plan")
    profiles: dict[str, BlockProfile] = inputs.get("block_profiles")
    missing = [m for m in inputs.models if m not in profiles]
    if missing:
        raise UserError(f"profiles have no model '{missing[0]}'")
    cluster, pipes, nodes = build(plan, profiles, inputs.models, slot_receive, stage_servers, transfer_round)
    hw_names = sorted({w.hardware for w in cluster.workers})
    return Runtime(cluster, hw_names, tables={"pipelines": tuple(pipes), "nodes": nodes})
