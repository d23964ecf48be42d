"""Per-epoch windows of a run — Symphony §4.4's autoscaling signals — computed from the recorder's tables.

One row per window ``[k·epoch, (k+1)·epoch)``:

* ``arrivals``, ``bad`` (of those, finished late or dropped), ``bad_rate`` = bad / arrivals;
  requests not decided yet (mid-run) count as not bad;
* ``busy_us`` — worker time spent on batches and allocation segments (preempted ones
  included) inside the window; ``capacity_us`` — worker time the workers existed in it;
  ``idle_fraction`` = 1 − busy / capacity; ``occupancy`` = busy / epoch (mean busy workers);
* ``active_requests`` — requests arrived by the window's end and finished after it
  (served or late; queued or in service at that moment).

Usable during a run (a policy's ``act.windows``: everything recorded so far)
and after it (``SimulationResult.windows``).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from shepherd.core.engine.outcomes import DROPPED, LATE
from shepherd.core.engine.recorder import Recorder


def windows(rec: Recorder, epoch_us: int, end_us: int | None = None) -> pl.DataFrame:
    """The per-epoch table (module docstring); ``end_us``: the last window ends at or after it."""
    rec.flush()
    if epoch_us <= 0:
        raise ValueError("epoch must be positive")
    seg = rec.segments()
    horizon = end_us
    if horizon is None:
        horizon = max(int(rec.arrival.max()) + 1 if len(rec.arrival) else 1,
                      int(seg["end_us"].max() or 0) if seg.height else 0)
    n = max(1, -(-horizon // epoch_us))
    lo = np.arange(n, dtype=np.int64) * epoch_us
    hi = lo + epoch_us
    arr_win = rec.arrival // epoch_us
    arrivals = np.bincount(arr_win[arr_win < n], minlength=n)
    bad_mask = ((rec.r_outcome == LATE) | (rec.r_outcome == DROPPED)) & (arr_win < n)
    bad = np.bincount(arr_win[bad_mask], minlength=n)
    s, e = seg["start_us"].to_numpy(), seg["end_us"].to_numpy()
    busy = np.clip(np.minimum(e[None, :], hi[:, None]) - np.maximum(s[None, :], lo[:, None]), 0, None).sum(1)
    added = np.array(rec.w_added, dtype=np.int64)
    removed = np.array(rec.w_removed, dtype=np.int64)
    removed = np.where(removed < 0, np.iinfo(np.int64).max // 2, removed)
    cap = np.clip(np.minimum(removed[None, :], hi[:, None]) - np.maximum(added[None, :], lo[:, None]),
                  0, None).sum(1)
    done = rec.r_finish >= 0
    fin, arr = rec.r_finish[done], rec.arrival[done]
    active = np.array([int(((arr < h) & (fin > h - 1)).sum()) for h in hi], dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bad_rate = np.where(arrivals > 0, bad / np.maximum(arrivals, 1), 0.0)
        idle = np.where(cap > 0, 1.0 - busy / np.maximum(cap, 1), 0.0)
    return pl.DataFrame({"window": np.arange(n, dtype=np.int64), "start_us": lo, "end_us": hi,
                         "arrivals": arrivals.astype(np.int64), "bad": bad.astype(np.int64),
                         "bad_rate": bad_rate, "busy_us": busy.astype(np.int64),
                         "capacity_us": cap.astype(np.int64), "idle_fraction": idle,
                         "occupancy": busy / epoch_us, "active_requests": active})
