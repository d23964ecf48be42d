"""Nexus provisioning: per-stream batch sizes and GPUs, squishy bin packing, per epoch.

Nexus (as described by Symphony §2.2 / §4.2 Eq. 1 and used by Shepherd §7):
each stream runs at the largest batch b with 2·ℓ(b) ≤ SLO (a request may wait
one batch, then run in the next); one GPU then serves b/ℓ(b) requests/s.
Shepherd §7 adapts Nexus to provision for the *peak* rate of every epoch
(60 s by default), so per epoch e and stream i:

* full GPUs: ⌊peak_i / (b_i/ℓ(b_i))⌋ dedicated GPUs at batch b_i;
* the residual rate r_i is squishy-bin-packed with other residuals (Nexus'
  "squishy bin packing"): a shared GPU cycles through its streams with duty
  cycle d = min over its streams of the largest d_i with d_i + ℓ_i(⌈r_i·d_i⌉)
  ≤ SLO_i; each stream runs a batch of ⌈r_i·d⌉ per cycle, and the streams fit
  when Σ ℓ_i(⌈r_i·d⌉) ≤ d. Residuals are placed first-fit in decreasing
  order of their occupancy ℓ_i(⌈r_i·d_i⌉)/d_i (documented simplification of
  Nexus' merge heuristic). A residual whose occupancy exceeds 1 (the batch
  rounded up to ⌈r·d⌉ runs longer than the cycle; seen for ResNeSt269 on the
  synthetic trace, 1.027) gets one more dedicated GPU instead: a GPU cannot
  run more than its cycle.

Each allocation also carries its duty cycle ``duty_us`` (a dedicated GPU's
is ℓ(b): batches back to back). Plan rows: one group per allocation (a stream's dedicated GPUs, or one shared
GPU), with the epoch and the fraction of the stream's requests routed there
(``share``, by rate) in optional columns.
"""

from __future__ import annotations

import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.errors import UserError
from shepherd.core.policies.nexus_packing import plan_epoch


def plan_nexus(trace: pl.DataFrame, profiles: pl.DataFrame, epoch_s: float, hardware: str,
               max_batch: int = prof.DEFAULT_MAX_BATCH) -> tuple[pl.DataFrame, dict]:
    """Plan rows for every epoch of the trace, plus summary metadata."""
    if epoch_s <= 0:
        raise UserError(f"--epoch-s must be positive, got {epoch_s:g}")
    if trace.height == 0:
        raise UserError("trace has no requests")
    epoch_us = int(epoch_s * 1e6)
    t0 = int(trace["arrival_us"].min())
    # Peak rate per stream and epoch: the busiest 1-second window inside the epoch (Shepherd §7).
    per_sec = (
        trace.with_columns(epoch=((pl.col("arrival_us") - t0) // epoch_us).cast(pl.Int32),
                           sec=((pl.col("arrival_us") - t0) // 1_000_000))
        .group_by("epoch", "stream", "sec").agg(pl.col("model").first(), pl.col("slo_us").first(), pl.len().alias("n"))
        .group_by("epoch", "stream").agg(pl.col("model").first(), pl.col("slo_us").first(),
                                         pl.col("n").max().cast(pl.Float64).alias("peak_rps"))
        .sort("epoch", "stream")
    )
    tables = {m: prof.latency_table_us(profiles, m, None, max_batch) for m in per_sec["model"].unique().to_list()}
    rows: list[dict] = []
    group = 0
    worker_peak = 0
    for (epoch,), part in per_sec.group_by("epoch", maintain_order=True):
        worker = 0
        for alloc in plan_epoch(part, tables):
            for stream, model, batch, share in alloc["streams"]:
                rows.append(dict(group=group, role="stream", name=str(stream), batch=batch, epoch=epoch, share=share))
                rows.append(dict(group=group, role="model", name=model, batch=batch, epoch=epoch, share=None))
            for _ in range(alloc["gpus"]):
                rows.append(dict(group=group, role="worker", name=str(worker), hardware=hardware, epoch=epoch, count=1))
                worker += 1
            group += 1
        worker_peak = max(worker_peak, worker)
    frame = pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                       "hardware": pl.String, "batch": pl.Int32, "count": pl.Int32,
                                       "epoch": pl.Int32, "share": pl.Float64})
    frame = frame.unique(subset=["group", "role", "name"], keep="first", maintain_order=True)
    return frame, {"epochs": int(per_sec["epoch"].n_unique()), "gpus_peak": worker_peak, "groups": group}
