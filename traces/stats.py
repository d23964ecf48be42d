"""Trace statistics: rates and coefficients of variation (CV).

Two CVs describe burstiness (Shepherd §2.2, §3.1):

* the CV of **inter-arrival times** of a stream (1 for Poisson, the Gamma
  process's ``cv`` parameter, > 1 for bursty MMPPs);
* the CV of **per-window request counts** for a window size τ — Shepherd's
  predictability measure (Fig. 2, Fig. 5): it falls as τ grows.

Everything is vectorised over the trace frame with polars/numpy.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.traces.predictability import row_cv, trace_windows


def duration_us(trace: pl.DataFrame) -> int:
    """Span of the trace: from 0 to one past the last arrival."""
    return int(trace["arrival_us"].max()) + 1 if trace.height else 0


def interarrival_cv(arrival_us: np.ndarray) -> float:
    """CV (std / mean) of inter-arrival gaps; NaN with fewer than 3 arrivals."""
    if arrival_us.size < 3:
        return float("nan")
    gaps = np.diff(np.sort(arrival_us)).astype(np.float64)
    mean = gaps.mean()
    return float(gaps.std() / mean) if mean > 0 else float("nan")


def window_counts(arrival_us: np.ndarray, window_us: int, span_us: int) -> np.ndarray:
    """Requests per window of ``window_us`` over [0, span_us) (partial last window dropped)."""
    one = np.zeros(len(arrival_us), dtype=np.int64)
    return trace_windows(one, np.asarray(arrival_us), 1, window_us, span_us)[0]


def count_cv(arrival_us: np.ndarray, window_us: int, span_us: int) -> float:
    """CV of per-window counts; NaN if fewer than 2 whole windows or no requests."""
    return float(row_cv(window_counts(arrival_us, window_us, span_us)[None, :])[0])


def _stream_windows(trace: pl.DataFrame, window_us: int, span_us: int) -> np.ndarray:
    """Streams (in increasing id order) × whole windows count matrix."""
    _, dense = np.unique(trace["stream"].to_numpy(), return_inverse=True)
    n_streams = int(dense.max()) + 1 if dense.size else 0
    return trace_windows(dense, trace["arrival_us"].to_numpy(), n_streams, window_us, span_us)


def stream_stats(trace: pl.DataFrame, window_us: int) -> pl.DataFrame:
    """Per stream: model, requests, rate (req/s), inter-arrival CV, count CV at ``window_us``."""
    span = duration_us(trace)
    seconds = span / 1e6 if span else float("nan")
    rows = []
    per_stream = trace.group_by("stream").agg(pl.col("model").first(), pl.col("arrival_us")).sort("stream")
    count_cvs = row_cv(_stream_windows(trace, window_us, span)) if trace.height else []
    for k, (stream, model, arr) in enumerate(per_stream.iter_rows()):
        rows.append({
            "stream": int(stream),
            "model": model,
            "requests": len(arr),
            "rate_rps": len(arr) / seconds,
            "interarrival_cv": interarrival_cv(np.asarray(arr, dtype=np.int64)),
            "count_cv": float(count_cvs[k]),
        })
    schema = {"stream": pl.Int32, "model": pl.String, "requests": pl.Int64, "rate_rps": pl.Float64,
              "interarrival_cv": pl.Float64, "count_cv": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort("stream")


def window_stats(trace: pl.DataFrame, windows_us: list[int]) -> pl.DataFrame:
    """Aggregate count CV per window size, and the mean of per-stream count CVs."""
    span = duration_us(trace)
    rows = []
    for w in windows_us:
        matrix = _stream_windows(trace, w, span)
        stream_cvs = row_cv(matrix)
        rows.append({
            "window_ms": w / 1000.0,
            "windows": int(span // w),
            "aggregate_count_cv": float(row_cv(matrix.sum(axis=0)[None, :])[0]),
            "mean_stream_count_cv": float(np.nanmean(stream_cvs)) if np.isfinite(stream_cvs).any() else float("nan"),
        })
    return pl.DataFrame(rows)
