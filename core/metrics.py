"""Simulation metrics, computed vectorised from the outcome tables (polars; the one-row summary's counts and exact
quantiles by numpy passes over the arrays, :mod:`shepherd.core.summary_stats`).

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
    done = batches.filter(~pl.col("preempted"))["size"].to_numpy()
    sizes = np.bincount(done.astype(np.int64)) if len(done) else np.zeros(0, np.int64)
    return summary_row(policy, n, first, last, end, counts, lat_us.to_numpy().astype(np.int64),
                       q_us.to_numpy().astype(np.int64), sizes, batches.height - len(done), workers, extra)


def summary_row(policy: str, n: int, first: int | None, last: int | None, end: int, counts: dict[str, int],
                lat_us: Any, q_us: Any, size_counts: np.ndarray, preemptions: int,
                workers: pl.DataFrame, extra: dict[str, Any] | None = None) -> pl.DataFrame:
    """The one-row summary from what it needs (:func:`summarize_tables` takes it from whole tables, a run that
    kept only running aggregates gives it directly): the request count, first and last arrival, the last
    batch end, the outcome counts, the served requests' latencies and queueing delays (µs, int64 arrays, or
    each a :class:`~shepherd.core.summary_stats.Tally` of them), the completed batches per size
    (``size_counts[s]``: batches of size ``s``), the preemption count and the
    workers table. Quantiles are polars' ``interpolation="nearest"`` ones, found without a sort
    (:mod:`shepherd.core.summary_stats`)."""
    from shepherd.core.summary_stats import Tally, nearest, nearest_counts

    span_us = max(1, (last or 0) - (first or 0))
    horizon_us = max(1, end - (first or 0))
    if isinstance(lat_us, Tally):  # kept as counts (a summary-only run): the same statistics
        (p50, p99), (q99,), mq = lat_us.nearest((0.5, 0.99)), q_us.nearest((0.99,)), q_us.mean()
    else:
        p50, p99 = nearest(lat_us, (0.5, 0.99))
        (q99,) = nearest(q_us, (0.99,))
        mq = pl.Series("v", q_us).mean() if len(q_us) else None
    lat = {"p50": p50, "p99": p99, "mq": mq, "q99": q99}
    lat = {k: (v / 1000.0 if v is not None else None) for k, v in lat.items()}
    n_done = int(size_counts.sum())
    b50, b99 = nearest_counts(size_counts, (0.5, 0.99))
    # the exact integer sum over the count (the mean polars takes of the sizes: tests/test_summary_stats.py)
    bs = {"mean": int(np.dot(np.arange(len(size_counts), dtype=np.int64), size_counts)) / n_done if n_done else None,
          "p50": b50, "p99": b99}
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
        "batches": n_done,
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
        return summary_row(result.policy, agg.n, agg.first, agg.last, agg.end, agg.counts(), agg.lat, agg.queue,
                           agg.sizes, agg.n_pre, result.workers_frame(), {"seed": result.seed})
    # what summarize_tables reads from the request and batch tables, from the recorder's arrays directly, in
    # a few numpy passes over each (:mod:`shepherd.core.summary_stats`)
    from shepherd.core.summary_stats import batch_stats, request_stats

    arrival, n = np.asarray(result.engine.arrival, np.int64), result.n_requests
    for dtype in (np.int32, np.int64):  # int32 where every value fits (half the memory), else int64
        lat, queue = np.empty(n, dtype), np.empty(n, dtype)
        by, pre_req, k, first, last, fits = request_stats(arrival, r.r_start, r.r_finish, r.r_outcome,
                                                          r.r_preempt, lat, queue)
        if fits:
            break
    first, last = (int(first), int(last)) if n else (0, 0)
    counts = {"good": int(by[SERVED]), "late": int(by[LATE]), "dropped": int(by[DROPPED] + by[PENDING]),
              "preempted_requests": int(pre_req)}
    b = r.batch_columns(numbered=False)  # sizes and ends: no batch id read, so none numbered
    sizes, n_pre, b_end = batch_stats(b["size"], b["end"], b["preempted"])
    end = max(last, int(b_end)) if len(b["size"]) else last
    return summary_row(result.policy, n, first, last, end, counts, lat[:k], queue[:k], sizes, int(n_pre),
                       result.workers_frame(), {"seed": result.seed})


def batch_size_distribution_of_counts(counts: np.ndarray) -> pl.DataFrame:
    """:func:`batch_size_distribution` of the completed batches given as counts per size (``counts[s]``: batches
    of size ``s``; a summary-only run keeps only those): the same frame, without a row per batch (issue 43)."""
    counts = np.asarray(counts, np.int64)
    sizes = np.flatnonzero(counts)
    batches = counts[sizes]
    requests = sizes * batches
    total = max(1, int(requests.sum()))
    return pl.DataFrame({"size": sizes.astype(np.int32), "batches": batches.astype(np.uint32),
                         "requests": requests.astype(np.int32)}).with_columns(share=pl.col("requests") / total)


def batch_size_distribution(batches: pl.DataFrame) -> pl.DataFrame:
    """Completed batches per size (size, batches, requests, share of requests)."""
    done = batches.filter(~pl.col("preempted"))
    total = max(1, int(done["size"].sum() or 0))
    return (done.group_by("size").agg(batches=pl.len(), requests=pl.col("size").sum())
            .sort("size").with_columns(share=pl.col("requests") / total))
