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
    n_windows = span_us // window_us
    if n_windows == 0:
        return np.empty(0, dtype=np.int64)
    idx = arrival_us // window_us
    idx = idx[idx < n_windows]
    return np.bincount(idx, minlength=n_windows)


def count_cv(arrival_us: np.ndarray, window_us: int, span_us: int) -> float:
    """CV of per-window counts; NaN if fewer than 2 whole windows or no requests."""
    counts = window_counts(arrival_us, window_us, span_us)
    if counts.size < 2 or counts.mean() == 0:
        return float("nan")
    return float(counts.std() / counts.mean())


def stream_stats(trace: pl.DataFrame, window_us: int) -> pl.DataFrame:
    """Per stream: model, requests, rate (req/s), inter-arrival CV, count CV at ``window_us``."""
    span = duration_us(trace)
    seconds = span / 1e6 if span else float("nan")
    rows = []
    for (stream,), part in trace.group_by(["stream"], maintain_order=False):
        arr = part["arrival_us"].to_numpy()
        rows.append({
            "stream": int(stream),
            "model": part["model"][0],
            "requests": part.height,
            "rate_rps": part.height / seconds,
            "interarrival_cv": interarrival_cv(arr),
            "count_cv": count_cv(arr, window_us, span),
        })
    schema = {"stream": pl.Int32, "model": pl.String, "requests": pl.Int64, "rate_rps": pl.Float64,
              "interarrival_cv": pl.Float64, "count_cv": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort("stream")


def window_stats(trace: pl.DataFrame, windows_us: list[int]) -> pl.DataFrame:
    """Aggregate count CV per window size, and the mean of per-stream count CVs."""
    span = duration_us(trace)
    arr = trace["arrival_us"].to_numpy()
    per_stream = [g["arrival_us"].to_numpy() for _, g in trace.group_by(["stream"])]
    rows = []
    for w in windows_us:
        stream_cvs = np.array([count_cv(a, w, span) for a in per_stream])
        rows.append({
            "window_ms": w / 1000.0,
            "windows": int(span // w),
            "aggregate_count_cv": count_cv(arr, w, span),
            "mean_stream_count_cv": float(np.nanmean(stream_cvs)) if np.isfinite(stream_cvs).any() else float("nan"),
        })
    return pl.DataFrame(rows)
