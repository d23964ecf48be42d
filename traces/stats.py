"""Trace statistics: rates and coefficients of variation (CV).

Two CVs describe burstiness (Shepherd §2.2, §3.1):

* the CV of **inter-arrival times** of a stream (1 for Poisson, the Gamma
  process's ``cv`` parameter, > 1 for bursty MMPPs);
* the CV of **per-window request counts** for a window size τ — Shepherd's
  predictability measure (Fig. 2, Fig. 5): it falls as τ grows.

Everything is vectorised over the trace frame with polars/numpy, and memory
is O(requests) for any window size: per-window counts are formed only for the
occupied (stream, window) cells (:func:`~shepherd.traces.predictability.sparse_window_cv`),
never as a streams × windows matrix (a full day at 10 ms windows and 1,000
streams would be 69 GB). Rates divide by the trace's declared span when the
caller passes it (``LoadedTrace.span_us``), else by last arrival + 1 µs.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.traces.predictability import sparse_window_cv, whole_windows


def duration_us(trace: pl.DataFrame, declared_us: int | None = None) -> int:
    """Span of the trace: its declared length when known (e.g. ``--duration-s`` /
    ``--duration-min``), else from 0 to one past the last arrival."""
    if declared_us is not None:
        return int(declared_us)
    return int(trace["arrival_us"].max()) + 1 if trace.height else 0


def interarrival_cv(arrival_us: np.ndarray) -> float:
    """CV (std / mean) of inter-arrival gaps; NaN with fewer than 3 arrivals."""
    if arrival_us.size < 3:
        return float("nan")
    gaps = np.diff(np.sort(arrival_us)).astype(np.float64)
    mean = gaps.mean()
    return float(gaps.std() / mean) if mean > 0 else float("nan")


def window_counts(arrival_us: np.ndarray, window_us: int, span_us: int | None) -> np.ndarray:
    """Requests per whole window of ``window_us`` (see :func:`~shepherd.traces.predictability.whole_windows`)."""
    arrival_us = np.asarray(arrival_us)
    n = whole_windows(arrival_us, window_us, span_us)
    w = arrival_us // window_us
    return np.bincount(w[w < n], minlength=n)[:n]


def count_cv(arrival_us: np.ndarray, window_us: int, span_us: int | None) -> float:
    """CV of per-window counts; NaN if fewer than 2 whole windows or no requests."""
    arrival_us = np.asarray(arrival_us)
    n = whole_windows(arrival_us, window_us, span_us)
    one = np.zeros(arrival_us.size, dtype=np.int64)
    return float(sparse_window_cv(one, arrival_us, 1, window_us, n)[0])


def _dense_streams(trace: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Stream ids in increasing order, and each request's index into them."""
    ids, dense = np.unique(trace["stream"].to_numpy(), return_inverse=True)
    return ids, dense.astype(np.int64)


def _interarrival_cvs(dense: np.ndarray, arrival: np.ndarray, n_streams: int) -> np.ndarray:
    """Per-stream :func:`interarrival_cv`, vectorised (O(requests), no per-stream lists)."""
    order = np.lexsort((arrival, dense))
    s, a = dense[order], arrival[order]
    same = s[1:] == s[:-1]
    gaps = np.diff(a)[same].astype(np.float64)
    owner = s[1:][same]
    del order, s, a, same
    n = np.bincount(owner, minlength=n_streams)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(owner, weights=gaps, minlength=n_streams) / n
        dev = gaps - mean[owner]
        std = np.sqrt(np.bincount(owner, weights=dev * dev, minlength=n_streams) / n)
        cv = std / mean
    return np.where((n >= 2) & (mean > 0), cv, np.nan)


def stream_stats(trace: pl.DataFrame, window_us: int, span_us: int | None = None) -> pl.DataFrame:
    """Per stream: model, requests, rate (req/s), inter-arrival CV, count CV at ``window_us``.

    ``span_us``: the trace's declared length (rates divide by it; windows per
    :func:`~shepherd.traces.predictability.whole_windows`). Memory O(requests).
    """
    schema = {"stream": pl.Int32, "model": pl.String, "requests": pl.Int64, "rate_rps": pl.Float64,
              "interarrival_cv": pl.Float64, "count_cv": pl.Float64}
    if trace.height == 0:
        return pl.DataFrame([], schema=schema)
    span = duration_us(trace, span_us)
    seconds = span / 1e6 if span else float("nan")
    ids, dense = _dense_streams(trace)
    arrival = trace["arrival_us"].to_numpy()
    n = ids.size
    requests = np.bincount(dense, minlength=n)
    count_cvs = sparse_window_cv(dense, arrival, n, window_us, whole_windows(arrival, window_us, span_us))
    models = trace.group_by("stream").agg(pl.col("model").first()).sort("stream")["model"]
    return pl.DataFrame({
        "stream": ids.astype(np.int32), "model": models, "requests": requests.astype(np.int64),
        "rate_rps": requests / seconds, "interarrival_cv": _interarrival_cvs(dense, arrival, n),
        "count_cv": count_cvs,
    }, schema=schema)


def window_stats(trace: pl.DataFrame, windows_us: list[int], span_us: int | None = None) -> pl.DataFrame:
    """Aggregate count CV per window size, and the mean of per-stream count CVs (memory O(requests))."""
    _, dense = _dense_streams(trace)
    arrival = trace["arrival_us"].to_numpy()
    n_streams = int(dense.max()) + 1 if dense.size else 0
    everyone = np.zeros(arrival.size, dtype=np.int64)
    rows = []
    for w in windows_us:
        n = whole_windows(arrival, w, span_us)
        stream_cvs = sparse_window_cv(dense, arrival, n_streams, w, n)
        rows.append({
            "window_ms": w / 1000.0,
            "windows": n,
            "aggregate_count_cv": float(sparse_window_cv(everyone, arrival, 1, w, n)[0]),
            "mean_stream_count_cv": float(np.nanmean(stream_cvs)) if np.isfinite(stream_cvs).any() else float("nan"),
        })
    return pl.DataFrame(rows, schema={"window_ms": pl.Float64, "windows": pl.Int64,
                                      "aggregate_count_cv": pl.Float64, "mean_stream_count_cv": pl.Float64})
