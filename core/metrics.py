"""Simulation metrics, computed vectorised with polars from the outcome tables.

Never computed inside the event loop (DESIGN.md "The engine"). Definitions:

* ``goodput_rps`` — requests finished by their deadline per second of the
  trace's span (first to last arrival; 1 µs at least) — Shepherd §2.1.
* ``slo_attainment`` — good / offered; ``drop_rate`` — dropped / offered;
  ``late`` — finished after the deadline.
* ``utilization`` — busy time of completed batches / (workers × horizon);
  ``utilization_with_waste`` adds the time of preempted batches. The horizon
  runs from the first arrival to the later of the last arrival and the last
  batch end.
* latency (``p50/p99_latency_ms``) — finish − arrival over served requests
  (finished, on time or late); queueing delay (``mean/p99_queue_ms``) — start
  of the batch that served a request − its arrival.
* batch sizes over batches that completed (``mean_batch``, ``p50_batch``,
  ``p99_batch``); :func:`batch_size_distribution` gives the whole histogram.
* ``preemptions`` — preempted batches; ``preempted_requests`` — requests whose
  batch was preempted at least once; ``wasted_ms`` — GPU time of preempted
  batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from shepherd.core.engine.outcomes import DROPPED, LATE, PENDING, SERVED

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.engine.result import SimulationResult


def _q(col: str, q: float) -> pl.Expr:
    return pl.col(col).quantile(q, interpolation="nearest")


def summarize_tables(requests: pl.DataFrame, batches: pl.DataFrame, workers: pl.DataFrame,
                     policy: str, extra: dict[str, Any] | None = None) -> pl.DataFrame:
    """One-row summary from per-request (arrival_us, start_us, finish_us — null or
    negative when never served —, outcome, preemptions), per-batch (size, start_us, end_us, preempted) and per-worker
    (busy_us, wasted_us) tables."""
    n = requests.height
    first = requests["arrival_us"].min() if n else 0
    last = requests["arrival_us"].max() if n else 0
    end = max(last or 0, batches["end_us"].max() or 0) if batches.height else (last or 0)
    counts = requests.select(
        good=(pl.col("outcome") == "served").sum(),
        late=(pl.col("outcome") == "late").sum(),
        dropped=(pl.col("outcome") == "dropped").sum(),
        preempted_requests=(pl.col("preemptions") > 0).sum(),
    ).row(0, named=True)
    is_served = pl.col("finish_us").is_not_null() & (pl.col("finish_us") >= 0)
    lat_us = requests.select((pl.col("finish_us") - pl.col("arrival_us")).filter(is_served))["finish_us"]
    q_us = requests.select((pl.col("start_us") - pl.col("arrival_us")).filter(is_served))["start_us"]
    done = batches.filter(~pl.col("preempted"))["size"]
    return summary_row(policy, n, first, last, end, counts, lat_us, q_us, done, batches.height - done.len(),
                       workers, extra)


def summary_row(policy: str, n: int, first: int | None, last: int | None, end: int, counts: dict[str, int],
                lat_us: pl.Series, q_us: pl.Series, done_sizes: pl.Series, preemptions: int, workers: pl.DataFrame,
                extra: dict[str, Any] | None = None) -> pl.DataFrame:
    """The one-row summary from what it needs (:func:`summarize_tables` takes it from whole tables, a run that
    kept only running aggregates gives it directly): the request count, first and last arrival, the last
    batch end, the outcome counts, the served requests' latencies and queueing delays (µs), the completed
    batches' sizes, the preemption count and the workers table."""
    span_us = max(1, (last or 0) - (first or 0))
    horizon_us = max(1, end - (first or 0))
    lat = lat_us.to_frame("v").select(p50=_q("v", 0.5), p99=_q("v", 0.99)).row(0, named=True)
    lat.update(q_us.to_frame("v").select(mq=pl.col("v").mean(), q99=_q("v", 0.99)).row(0, named=True))
    lat = {k: (v / 1000.0 if v is not None else None) for k, v in lat.items()}
    bs = done_sizes.to_frame("size").select(mean=pl.col("size").mean(), p50=_q("size", 0.5),
                                            p99=_q("size", 0.99)).row(0, named=True)
    w = workers.select(busy=pl.col("busy_us").sum(), waste=pl.col("wasted_us").sum()).row(0, named=True)
    nw = max(1, workers.height)
    row = {
        "policy": policy,
        "requests": n,
        "good": counts["good"] or 0,
        "goodput_rps": (counts["good"] or 0) / (span_us / 1e6),
        "slo_attainment": (counts["good"] or 0) / n if n else 0.0,
        "late": counts["late"] or 0,
        "dropped": counts["dropped"] or 0,
        "drop_rate": (counts["dropped"] or 0) / n if n else 0.0,
        "duration_s": span_us / 1e6,
        "workers": workers.height,
        "groups": workers["group"].n_unique() if workers.height else 0,
        "utilization": (w["busy"] or 0) / (nw * horizon_us),
        "utilization_with_waste": ((w["busy"] or 0) + (w["waste"] or 0)) / (nw * horizon_us),
        "p50_latency_ms": lat["p50"],
        "p99_latency_ms": lat["p99"],
        "mean_queue_ms": lat["mq"],
        "p99_queue_ms": lat["q99"],
        "batches": done_sizes.len(),
        "mean_batch": bs["mean"],
        "p50_batch": bs["p50"],
        "p99_batch": bs["p99"],
        "preemptions": preemptions,
        "preempted_requests": counts["preempted_requests"] or 0,
        "wasted_ms": (w["waste"] or 0) / 1000.0,
    }
    row.update(extra or {})
    schema = {k: (pl.String if isinstance(v, str) else pl.Float64 if isinstance(v, float) or v is None
                  else pl.Int64) for k, v in row.items()}
    for k in ("p50_batch", "p99_batch", "mean_batch", "p50_latency_ms", "p99_latency_ms",
              "mean_queue_ms", "p99_queue_ms"):
        schema[k] = pl.Float64
    return pl.DataFrame([row], schema=schema)


def summarize(result: "SimulationResult") -> pl.DataFrame:
    """Summary of a :class:`SimulationResult` without building the full per-request table (from the running
    aggregates alone when the run kept only those: ``EngineConfig.record == "summary"``)."""
    r = result.recorder
    agg = r.aggregates
    if agg is not None:
        return summary_row(result.policy, agg.n, agg.first, agg.last, agg.end, agg.counts(), agg.series("lat"),
                           agg.series("queue"), agg.done_sizes(), agg.n_pre, result.workers_frame(),
                           {"seed": result.seed})
    # what summarize_tables reads from the request and batch tables, from the recorder's arrays directly
    arrival, n = result.engine.arrival, result.n_requests
    first, last = (int(arrival.min()), int(arrival.max())) if n else (0, 0)
    by = np.bincount(r.r_outcome, minlength=4)
    counts = {"good": int(by[SERVED]), "late": int(by[LATE]), "dropped": int(by[DROPPED] + by[PENDING]),
              "preempted_requests": int(np.count_nonzero(r.r_preempt))}
    served = r.r_finish >= 0  # never-served rows keep finish_us = -1
    a = arrival[served]
    b = r.batch_columns()
    pre = b["preempted"] != 0
    end = max(last, int(b["end"].max())) if len(pre) else last
    done = pl.Series("size", b["size"][~pre].astype(np.int32))
    return summary_row(result.policy, n, first, last, end, counts, pl.Series("v", r.r_finish[served] - a),
                       pl.Series("v", r.r_start[served] - a), done, int(pre.sum()), result.workers_frame(),
                       {"seed": result.seed})


def batch_size_distribution(batches: pl.DataFrame) -> pl.DataFrame:
    """Completed batches per size (size, batches, requests, share of requests)."""
    done = batches.filter(~pl.col("preempted"))
    total = max(1, int(done["size"].sum() or 0))
    return (done.group_by("size").agg(batches=pl.len(), requests=pl.col("size").sum())
            .sort("size").with_columns(share=pl.col("requests") / total))
