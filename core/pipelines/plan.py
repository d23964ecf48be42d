"""Pooled-pipeline plans (PPipe §3 "Outputs", §5.3) and their placement on servers.

A plan is a list of pooled pipelines; each has a DNN, a unified batch size
(§5.3) and 1–3 stages (partitions), each a pool of virtual GPUs of one GPU
type and MPS level ``k`` (a 1/k share; artifact column ``mps = k − 1`` as in
the authors' plans) running blocks ``[start, end)``. The artifact kind
``pipeline_plan`` (registered in :mod:`.artifacts`) has one row per stage.

:func:`verify` re-derives every Appendix A.2 constraint from the profiles and
the cluster — partition contiguity (Eqs. 17–20), unified batch size (Eq. 18),
≥ 1 vGPU per used partition (Eq. 22), GPU counts with MPS fractions (Eq. 23,
tightened: each physical GPU runs one MPS level, see ``solvers.ppipe_milp``; without
GPU sharing, per DNN partition: :func:`physical_gpus`),
latency + transfer ≤ SLO·(1 − margin) (Eq. 27) and the throughputs (Eqs. 25, 28).

:func:`place` maps vGPUs onto physical GPUs (one MPS level per GPU) and GPUs
onto servers of ``per_server`` GPUs (a server = one NIC, §7.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import ClusterSpec, GpuPool


@dataclass(frozen=True)
class Stage:
    """One partition of a pooled pipeline: a pool of ``vgpus`` 1/k virtual GPUs of ``hardware``."""

    hardware: str
    k: int
    start: int
    end: int
    vgpus: int
    latency_us: int  # batch latency of the partition (C, Table 5)
    transfer_us: int  # batch transfer after it (Y; 0 for the last stage)
    xput_per_vgpu: float  # X, req/s

    @property
    def xput(self) -> float:
        return self.xput_per_vgpu * self.vgpus

    @property
    def gpus(self) -> float:
        return self.vgpus / self.k


@dataclass(frozen=True)
class Pipeline:
    model: str
    batch: int
    stages: tuple[Stage, ...]

    @property
    def xput(self) -> float:
        """Eq. 28: the pipeline's throughput is its slowest stage's."""
        return min(s.xput for s in self.stages)

    @property
    def latency_us(self) -> int:
        return sum(s.latency_us + s.transfer_us for s in self.stages)


@dataclass
class PipelinePlan:
    """The control plane's output, plus what it was planned for."""

    pipelines: list[Pipeline]
    cluster: ClusterSpec
    weights: dict[str, float]  # workload share per DNN (§3 "Objective")
    slo_us: dict[str, int]
    margin: float
    planner: str
    meta: dict[str, Any] = field(default_factory=dict)

    def model_xput(self, model: str) -> float:
        return sum(p.xput for p in self.pipelines if p.model == model)

    @property
    def normalized_xput(self) -> float:
        """min over DNNs of throughput / workload share — the MILP objective."""
        return min((self.model_xput(m) / w for m, w in self.weights.items() if w > 0), default=0.0)

    def rates(self, load_factor: float = 1.0, capacity: float | None = None) -> dict[str, float]:
        """Request rate per DNN at ``load_factor`` of ``capacity`` (default: this plan's normalized xput)."""
        cap = self.normalized_xput if capacity is None else capacity
        return {m: load_factor * cap * w for m, w in self.weights.items()}


# --------------------------------------------------------------------------- artifact frame

FRAME_SCHEMA = {"pipeline": pl.Int32, "stage": pl.Int32, "model": pl.String, "hardware": pl.String,
                "mps": pl.Int32, "block_start": pl.Int32, "block_end": pl.Int32, "batch": pl.Int32,
                "vgpus": pl.Int32, "gpus": pl.Float64, "latency_us": pl.Int64, "transfer_us": pl.Int64,
                "xput_per_vgpu": pl.Float64, "stage_xput": pl.Float64, "pipeline_xput": pl.Float64}


def to_frame(plan: PipelinePlan) -> pl.DataFrame:
    rows = []
    for i, p in enumerate(plan.pipelines):
        for j, s in enumerate(p.stages):
            rows.append(dict(pipeline=i, stage=j, model=p.model, hardware=s.hardware, mps=s.k - 1,
                             block_start=s.start, block_end=s.end, batch=p.batch, vgpus=s.vgpus, gpus=s.gpus,
                             latency_us=s.latency_us, transfer_us=s.transfer_us, xput_per_vgpu=s.xput_per_vgpu,
                             stage_xput=s.xput, pipeline_xput=p.xput))
    return pl.DataFrame(rows, schema=FRAME_SCHEMA)


def extra_of(plan: PipelinePlan) -> dict[str, Any]:
    """What the artifact's ``extra`` carries besides the rows (cluster, weights, SLOs, solver)."""
    c = plan.cluster
    return plan.meta | {
        "planner": plan.planner, "margin": plan.margin, "weights": plan.weights, "slo_us": plan.slo_us,
        "normalized_xput": plan.normalized_xput,
        "cluster": {"name": c.name, "bandwidth_gbps": c.bandwidth_gbps,
                    "pools": [[p.hardware, p.count, p.per_server, p.high] for p in c.pools]},
    }


def from_frame(frame: pl.DataFrame, extra: dict[str, Any]) -> PipelinePlan:
    try:
        cl = extra["cluster"]
        cluster = ClusterSpec(cl["name"], tuple(GpuPool(h, int(n), int(s), bool(hi)) for h, n, s, hi in cl["pools"]),
                              float(cl["bandwidth_gbps"])).validate()
        weights = {str(k): float(v) for k, v in extra["weights"].items()}
        slo = {str(k): int(v) for k, v in extra["slo_us"].items()}
    except (KeyError, TypeError, ValueError):
        raise UserError("pipeline plan metadata lacks cluster/weights/slo_us (not written by a PPipe planner?)") \
            from None
    pipes = []
    for (pid,), rows in frame.sort("pipeline", "stage").group_by(["pipeline"], maintain_order=True):
        stages = tuple(Stage(r["hardware"], r["mps"] + 1, r["block_start"], r["block_end"], r["vgpus"],
                             r["latency_us"], r["transfer_us"], r["xput_per_vgpu"])
                       for r in rows.iter_rows(named=True))
        pipes.append(Pipeline(rows["model"][0], int(rows["batch"][0]), stages))
    meta = {k: v for k, v in extra.items() if k not in ("cluster", "weights", "slo_us", "margin", "planner")}
    return PipelinePlan(pipes, cluster, weights, slo, float(extra.get("margin", 0.0)),
                        str(extra.get("planner", "")), meta)


# --------------------------------------------------------------------------- verification

def verify(plan: PipelinePlan, profiles: dict[str, BlockProfile], tol: float = 1e-6) -> list[str]:
    """Every violated A.2 constraint, as text (empty: the plan is valid)."""
    bad: list[str] = []
    c = plan.cluster
    for i, p in enumerate(plan.pipelines):
        prof = profiles[p.model]
        if not 1 <= len(p.stages) <= 3:
            bad.append(f"pipeline {i}: {len(p.stages)} partitions (1–3 allowed)")
        if p.stages[0].start != 0 or p.stages[-1].end != prof.blocks:
            bad.append(f"pipeline {i}: partitions do not cover blocks 0…{prof.blocks}")
        for a, b in zip(p.stages, p.stages[1:]):
            if a.end != b.start:
                bad.append(f"pipeline {i}: partitions not contiguous ({a.end} ≠ {b.start})")
        for j, s in enumerate(p.stages):
            if s.start >= s.end:
                bad.append(f"pipeline {i} stage {j}: empty partition")
                continue
            if s.vgpus < 1:
                bad.append(f"pipeline {i} stage {j}: no virtual GPUs")
            if (s.hardware, s.k) not in prof.lat or p.batch > prof.max_batch(s.hardware, s.k):
                bad.append(f"pipeline {i} stage {j}: batch {p.batch} not profiled at {s.hardware} 1/{s.k}")
                continue
            lat = prof.partition_us(s.hardware, s.k, p.batch, s.start, s.end)
            if lat != s.latency_us:
                bad.append(f"pipeline {i} stage {j}: latency {s.latency_us} ≠ profile {lat}")
            last = j == len(p.stages) - 1
            tr = 0 if last else math.ceil(p.batch * prof.transfer_us_per_sample(s.end - 1, c.bandwidth_gbps))
            if tr != s.transfer_us:
                bad.append(f"pipeline {i} stage {j}: transfer {s.transfer_us} ≠ {tr}")
            if s.xput_per_vgpu > p.batch * 1e6 / max(lat, 1) * (1 + tol):
                bad.append(f"pipeline {i} stage {j}: throughput above b/latency")
        budget = plan.slo_us[p.model] * (1 - plan.margin)
        if p.latency_us > budget + tol:
            bad.append(f"pipeline {i}: latency {p.latency_us} µs > SLO·(1−margin) = {budget:.0f} µs")
    need = physical_gpus(plan)
    for h, gpus in need.items():
        if gpus > c.count(h):
            bad.append(f"{h}: plan needs {gpus} GPUs, cluster has {c.count(h)}")
    return bad


def physical_gpus(plan: PipelinePlan, sharing: bool | None = None) -> dict[str, int]:
    """Physical GPUs of each type the plan needs: one MPS level per GPU; with ``sharing`` (default: the
    plan's ``meta["gpu_sharing"]``, else True) vGPUs of any DNN share GPUs, without it each DNN's
    partition position has GPUs of its own (the artifact MILP's rule, :mod:`.rules`)."""
    if sharing is None:
        sharing = plan.meta.get("gpu_sharing", True) is not False
    used: dict[tuple, int] = {}
    for p in plan.pipelines:
        for d, s in enumerate(p.stages):
            key = (s.hardware, s.k) if sharing else (s.hardware, s.k, p.model, d)
            used[key] = used.get(key, 0) + s.vgpus
    out: dict[str, int] = {}
    for key, n in used.items():
        out[key[0]] = out.get(key[0], 0) + math.ceil(n / key[1])
    return out


# --------------------------------------------------------------------------- placement

@dataclass(frozen=True)
class VGpu:
    """A virtual GPU in the running cluster."""

    pipeline: int
    stage: int
    hardware: str
    k: int
    gpu: int  # physical GPU index (global)
    node: int  # server index (global; one NIC each)


def place(plan: PipelinePlan) -> list[VGpu]:
    """vGPUs → physical GPUs (one MPS level per GPU, filled in plan order) → servers.

    Physical GPUs of a type are numbered in order and packed ``per_server`` to
    a server, so the vGPUs of one stage share as few NICs as possible; servers
    of different types are distinct (a server holds one GPU type).
    """
    c = plan.cluster
    out: list[VGpu] = []
    node_base = 0
    gpu_base = 0
    for pool in c.pools:
        next_gpu = 0
        open_slots: dict[int, tuple[int, int]] = {}  # k -> (gpu, used slots)
        for i, p in enumerate(plan.pipelines):
            for j, s in enumerate(p.stages):
                if s.hardware != pool.hardware:
                    continue
                for _ in range(s.vgpus):
                    gpu, used = open_slots.get(s.k, (-1, s.k))
                    if used >= s.k:
                        gpu, used = next_gpu, 0
                        next_gpu += 1
                    open_slots[s.k] = (gpu, used + 1)
                    out.append(VGpu(i, j, s.hardware, s.k, gpu_base + gpu, node_base + gpu // pool.per_server))
        if next_gpu > pool.count:
            raise UserError(f"plan needs {next_gpu} {pool.hardware} GPUs; the cluster has {pool.count}")
        gpu_base += pool.count
        node_base += math.ceil(pool.count / pool.per_server)
    return out
