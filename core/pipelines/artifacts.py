"""Artifact kinds of pool-based pipelines, registered with :func:`core.artifacts.register_schema`.

* ``block_profiles`` — ``shepherd profile --from-ppipe DIR``: one row per
  model × GPU type × MPS level × batch size × block (PPipe §5.2–§5.3).
* ``pipeline_plan`` — ``shepherd plan --planner ppipe|np|dart-r``: one row per
  stage of each pooled pipeline; the cluster, workload shares, SLOs, margin and
  solver outcome travel in the artifact's ``extra`` metadata.

A separate kind (rather than optional columns on ``plan``) because a pooled
pipeline is not a serving-group assignment: its rows are stages with
partition points, MPS shares and per-stage throughput.
"""

from __future__ import annotations

import polars as pl

from shepherd.core.artifacts import ArtifactSchema, Column, register_schema


def _check_blocks(df: pl.DataFrame) -> str | None:
    if df.height == 0:
        return "block profiles have no rows"
    if (df["batch"] < 1).any():
        return "column 'batch' must be ≥ 1"
    if (df["mps"] < 0).any() or (df["mps"] > 3).any():
        return "column 'mps' must be 0…3 (MPS level k − 1)"
    if (df["latency_us"] <= 0).any():
        return "column 'latency_us' must be positive"
    return None


def _check_plan(df: pl.DataFrame) -> str | None:
    if df.height and (df["vgpus"] < 1).any():
        return "column 'vgpus' must be ≥ 1"
    if df.height and (df["block_start"] >= df["block_end"]).any():
        return "every stage needs block_start < block_end"
    return None


register_schema(ArtifactSchema(
    kind="block_profiles",
    doc="Per-block latency (µs) by model × GPU type × MPS level × batch size, with cut sizes (PPipe).",
    required=(
        Column("model", pl.String, "DNN name (model-zoo config name)"),
        Column("hardware", pl.String, "GPU type (V100, L4, T4, P4)"),
        Column("mps", pl.Int32, "MPS level k − 1 (0: whole GPU, 3: a 1/4 share)"),
        Column("batch", pl.Int32, "batch size b"),
        Column("block", pl.Int32, "block (pre-partition) index 0 … B − 1"),
        Column("latency_us", pl.Int64, "latency of the block at this batch and share, µs (≥ 1)"),
        Column("cut_bytes", pl.Int64, "bytes per sample crossing the boundary after the block (null: last)"),
        Column("ref_latency_us", pl.Float64, "mean L4 batch-1 whole-model latency, µs (SLO = 5 × this)"),
    ),
    check=_check_blocks,
))

register_schema(ArtifactSchema(
    kind="pipeline_plan",
    doc="Pooled pipelines (PPipe §3 outputs): one row per stage; cluster and solver in extra.",
    required=(
        Column("pipeline", pl.Int32, "pooled pipeline id"),
        Column("stage", pl.Int32, "partition index within the pipeline"),
        Column("model", pl.String, "DNN"),
        Column("hardware", pl.String, "GPU type of the stage's pool"),
        Column("mps", pl.Int32, "MPS level k − 1 of its virtual GPUs"),
        Column("block_start", pl.Int32, "first block of the partition"),
        Column("block_end", pl.Int32, "one past the last block"),
        Column("batch", pl.Int32, "the pipeline's unified batch size (§5.3)"),
        Column("vgpus", pl.Int32, "virtual GPUs in the pool"),
        Column("gpus", pl.Float64, "physical GPUs = vgpus / k"),
        Column("latency_us", pl.Int64, "partition latency at the batch size, µs"),
        Column("transfer_us", pl.Int64, "feature-map transfer after the stage, µs (0: last stage)"),
        Column("xput_per_vgpu", pl.Float64, "throughput of one virtual GPU, req/s"),
        Column("stage_xput", pl.Float64, "throughput of the pool, req/s"),
        Column("pipeline_xput", pl.Float64, "throughput of the pipeline (slowest stage), req/s"),
    ),
    check=_check_plan,
))
