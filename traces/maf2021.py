"""MAF 2021 reader: Azure Functions per-invocation trace (two weeks, Jan/Feb 2021).

File ``AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt`` (Azure Public
Dataset; Zhang et al., SOSP '21), a CSV with header
``app,func,end_timestamp,duration``: one row per invocation, the end time and
duration in seconds since the trace start. PPipe §7.1 uses it as its "Bursty"
workload: arrival = end_timestamp − duration, one stream per function
(``app``, ``func``), and "we upscale the trace to the target load".

Documented choices:

* Every row must have the header's four fields: a file cut mid-row is a
  :class:`UserError`, not a silently blank duration.
* Invocations whose computed arrival is negative (they started before the
  trace began) are dropped.
* Streams are numbered by descending invocation count in the chosen window
  (ties by app, func), so ``top`` keeps the busiest functions.
* Upscaling to a target load (PPipe §7.1 does not say how), two ways:
  ``compress`` (default) — time compression: to produce D seconds at load L
  from native rate λ, read D·L/λ seconds of the original trace and scale
  time by λ/L; the burst structure is kept, only faster (or slower when
  L < λ). ``superpose`` — read D seconds and thin / superpose shifted copies
  (:func:`shepherd.traces.expand.rescale_arrivals`), which keeps the time
  scale but smooths bursts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.traces import checks

FILE = "AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt"
COLUMNS = ("app", "func", "end_timestamp", "duration")
UPSCALE = ("compress", "superpose")


def check_header(path: Path) -> None:
    if not path.exists():
        raise UserError(f"MAF 2021 file not found: {path}")
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        first = fh.readline().strip()
    names = tuple(n.strip().strip('"') for n in first.split(","))
    if names != COLUMNS:
        raise UserError(f"{path.name}: wrong header for a MAF 2021 file: expected "
                        f"{','.join(COLUMNS)}, got {first[:80] or 'an empty file'}")


def read_invocations(path: Path, start_s: float = 0.0, duration_s: float | None = None) -> pl.DataFrame:
    """Invocations arriving in ``[start_s, start_s + duration_s)``: columns app, func, arrival_s (from 0)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE
    check_header(path)
    if start_s < 0 or (duration_s is not None and duration_s <= 0):
        raise UserError("MAF 2021 window: start must be ≥ 0 and duration positive")
    checks.complete_rows(path, len(COLUMNS), "MAF 2021")  # a row cut short would read as a blank duration
    schema = {"app": pl.String, "func": pl.String, "end_timestamp": pl.Float64, "duration": pl.Float64}
    arrival = pl.col("end_timestamp") - pl.col("duration")
    lazy = pl.scan_csv(path, schema=schema, has_header=True).with_columns(arrival.alias("arrival_s"))
    cond = pl.col("arrival_s") >= max(0.0, start_s)
    if duration_s is not None:
        cond = cond & (pl.col("arrival_s") < start_s + duration_s)
    try:
        frame = lazy.filter(cond).select("app", "func", pl.col("arrival_s") - start_s).collect()
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(f"{path.name}: malformed MAF 2021 file — non-numeric timestamp or ragged row ({first})") from None
    return frame


def number_streams(frame: pl.DataFrame, top: int | None = None) -> pl.DataFrame:
    """Add ``stream`` (0 = busiest function); keep the ``top`` busiest when given."""
    if top is not None and top < 1:
        raise UserError(f"number of streams must be ≥ 1, got {top}")
    ranks = (frame.group_by("app", "func").len()
             .sort(["len", "app", "func"], descending=[True, False, False])
             .with_row_index("stream").select("app", "func", pl.col("stream").cast(pl.Int32)))
    if top is not None:
        ranks = ranks.head(top)
    return frame.join(ranks, on=["app", "func"], how="inner")


def to_trace(frame: pl.DataFrame, models: list[str], slo_us: int, time_scale: float = 1.0) -> pl.DataFrame:
    """Trace frame from numbered invocations; arrival µs = ⌊arrival_s · time_scale · 10⁶⌋."""
    arrival = np.floor(frame["arrival_s"].to_numpy() * time_scale * 1e6).astype(np.int64)
    stream = frame["stream"].to_numpy().astype(np.int32)
    order = np.lexsort((stream, arrival))
    arrival, stream = arrival[order], stream[order]
    names = np.asarray(models, dtype=object)[stream % len(models)] if stream.size else []
    return pl.DataFrame({
        "arrival_us": arrival,
        "stream": pl.Series(stream, dtype=pl.Int32),
        "model": pl.Series("model", list(names), dtype=pl.String),
        "slo_us": np.full(arrival.size, slo_us, dtype=np.int64),
        "deadline_us": arrival + slo_us,
    })
