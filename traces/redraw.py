"""Replicas of a trace file: re-draw each request's arrival within its window, from a seed.

A named trace is rebuilt from its seed (its per-minute counts are expanded
into arrivals by a random process, Shepherd §7 "MAF-stable"), so seeds give
independent replicas. A trace *file* is fixed data: simulating it under seeds
0, 1, 2 gives the same arrivals three times, and an interval over them is an
interval over nothing. :func:`redraw` makes a file give replicas the way a
named MAF 2019 trace does: time is cut into windows of ``window_us``
(60 s: MAF 2019's per-minute counts), and every request keeps its stream,
model, SLO and window but gets a new arrival drawn uniformly within that
window — given its count, a Poisson process's arrivals are independent
uniforms in the window, so this is the "MAF-stable" expansion of the file's
own per-stream, per-window counts. Counts per (stream, window), models and
SLOs are kept exactly; deadlines are arrival + SLO again. The same seed gives
the same frame.

What it cannot keep: burstiness finer than the window (MAF 2021's
per-invocation timestamps are smoothed within each window). Use a shorter
window to keep more of it.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.core.errors import UserError

MINUTE_US = 60_000_000


def redraw(frame: pl.DataFrame, seed: int, window_us: int = MINUTE_US, span_us: int | None = None) -> pl.DataFrame:
    """``frame`` with every arrival re-drawn uniformly within its window of ``window_us`` µs.

    Windows start at 0; the last one ends at ``span_us`` when given (the
    trace's declared length), so no arrival moves past the trace's end.
    Rows come back sorted by (arrival, stream), like every trace frame.
    """
    if window_us < 1:
        raise UserError(f"the re-draw window must be at least 1 µs, got {window_us}")
    if frame.height == 0:
        return frame
    arrival = frame["arrival_us"].to_numpy()
    start = (arrival // window_us) * window_us
    end = start + window_us
    if span_us is not None and span_us > int(arrival.max()):
        end = np.minimum(end, span_us)
    rng = np.random.default_rng([seed, 0x7E_D7A3])  # its own stream: not the simulation's draws
    new = start + (rng.random(arrival.size) * (end - start)).astype(np.int64)
    out = frame.with_columns(pl.Series("arrival_us", new, dtype=frame.schema["arrival_us"]))
    if "deadline_us" in out.columns and "slo_us" in out.columns:
        out = out.with_columns((pl.col("arrival_us") + pl.col("slo_us")).alias("deadline_us"))
    keys = ["arrival_us", "stream"] if "stream" in out.columns else ["arrival_us"]
    return out.sort(keys, maintain_order=True)
