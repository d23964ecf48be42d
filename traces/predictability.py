"""Workload predictability: CV of per-window request counts vs window size τ.

Shepherd §2.2 (Fig. 2): split time into non-overlapping windows of size τ,
count the requests r_{t,s} of stream s in window t, and take the coefficient
of variation std/mean over t; Fig. 2 plots the *average over streams* against
τ — it grows sharply as τ shrinks. §3.1 (Fig. 5): randomly partition the
streams into serving groups of size g (1, 10, 100, 1000), sum the counts of
each group, and average the per-group CV — larger groups are far more
predictable.

Documented choices: the std is the population std (ddof = 0); only whole
windows count — of the trace's declared span when it has one (its
``--duration-s``), else up to the end of the window holding the last arrival
(:func:`whole_windows`; the last full window is never lost); streams or groups with no
request in the span are left out of the average (their CV is undefined); a
τ with fewer than two whole windows is skipped; groups are one random
partition per g, drawn from the seeded generator (shared by all τ), and the
streams left over after ⌊S/g⌋ whole groups are dropped.

The same table code serves per-minute counts (MAF files, τ a multiple of a
minute; a dense functions × minutes matrix, bounded by the file) and
arrival-level traces (τ in µs). Arrival-level counts are sparse
(:func:`sparse_window_cv`): memory grows with the requests, not with
streams × windows, so a full day at τ = 10 ms works. The result is a
``predictability`` artifact for the report to plot.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import polars as pl

from shepherd.core.artifacts import schema_for
from shepherd.core.errors import UserError

DEFAULT_GROUP_SIZES = (1, 10, 100, 1000)


def row_cv(matrix: np.ndarray) -> np.ndarray:
    """CV (std/mean, ddof 0) of each row; NaN for an all-zero row or < 2 columns."""
    if matrix.shape[1] < 2:
        return np.full(matrix.shape[0], np.nan)
    m = matrix.astype(np.float64)
    mean = m.mean(axis=1)
    std = m.std(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mean > 0, std / np.where(mean > 0, mean, 1.0), np.nan)


def group_sums(matrix: np.ndarray, group_size: int, perm: np.ndarray) -> np.ndarray:
    """Sum rows over a random partition into ⌊S/g⌋ groups of exactly g rows (``perm`` = row order)."""
    n_groups = matrix.shape[0] // group_size
    rows = perm[: n_groups * group_size]
    return matrix[rows].reshape(n_groups, group_size, matrix.shape[1]).sum(axis=1)


def minute_windows(counts: np.ndarray, tau_min: int) -> np.ndarray:
    """Per-minute counts summed into whole windows of ``tau_min`` minutes."""
    n = counts.shape[1] // tau_min
    return counts[:, : n * tau_min].reshape(counts.shape[0], n, tau_min).sum(axis=2)


def trace_windows(stream: np.ndarray, arrival_us: np.ndarray, n_streams: int, tau_us: int,
                  span_us: int) -> np.ndarray:
    """S × W matrix of requests per (stream, whole window of ``tau_us``) over [0, span_us).

    Dense: for small S × W only (tests, plots). The statistics use
    :func:`sparse_window_cv`, whose memory does not grow with W.
    """
    n = span_us // tau_us
    if n == 0:
        return np.zeros((n_streams, 0), dtype=np.int64)
    w = arrival_us // tau_us
    keep = w < n
    flat = stream[keep].astype(np.int64) * n + w[keep]
    return np.bincount(flat, minlength=n_streams * n).reshape(n_streams, n)


def whole_windows(arrival_us: np.ndarray, tau_us: int, span_us: int | None) -> int:
    """Number of whole windows of ``tau_us`` in the trace.

    With the trace's declared span (its duration when known): ⌊span/τ⌋. Without one
    (documented choice), the trace is taken to end at the end of the window that holds
    its last arrival — ⌈(last + 1)/τ⌉ windows — so the last full window is never lost
    (a 1,440-minute trace has 1,440 one-minute windows, not 1,439).
    """
    if span_us is not None:
        return int(span_us) // int(tau_us)
    if arrival_us.size == 0:
        return 0
    return -(-(int(arrival_us.max()) + 1) // int(tau_us))


def sparse_window_cv(unit: np.ndarray, arrival_us: np.ndarray, n_units: int, tau_us: int,
                     n_windows: int) -> np.ndarray:
    """CV (ddof 0) of each unit's request count over ``n_windows`` whole windows of ``tau_us``.

    ``unit[i]`` is request i's unit (a stream or a group; −1 = left out). Only the
    occupied (unit, window) cells are formed — by sorting the requests' cell keys —
    so memory is O(requests) whatever the number of windows: a full day at τ = 10 ms
    is 8.6 million windows, which as a dense streams × windows matrix would not fit.
    Exact two-pass moments: Σ(c − μ)² over occupied cells plus (W − occupied)·μ².
    Same results as :func:`row_cv` on the dense matrix.
    """
    out = np.full(n_units, np.nan)
    if n_windows < 2 or n_units == 0:
        return out
    window = arrival_us // tau_us
    keep = (window < n_windows) & (unit >= 0)
    u = unit[keep].astype(np.int64)
    w = window[keep].astype(np.int64)
    if u.size == 0:
        return out
    totals = np.bincount(u, minlength=n_units).astype(np.float64)
    if n_units * n_windows < 2 ** 62:
        key = u * n_windows + w
        key.sort()
    else:  # cell keys would overflow int64: sort the pairs instead
        order = np.lexsort((w, u))
        key = None
        u, w = u[order], w[order]
    same = (key[1:] == key[:-1]) if key is not None else ((u[1:] == u[:-1]) & (w[1:] == w[:-1]))
    starts = np.concatenate([[0], np.flatnonzero(~same) + 1])
    counts = np.diff(np.append(starts, same.size + 1)).astype(np.float64)
    cell_unit = key[starts] // n_windows if key is not None else u[starts]
    del same, key, u, w
    mean = totals / n_windows
    dev = counts - mean[cell_unit]
    squares = np.bincount(cell_unit, weights=dev * dev, minlength=n_units)
    occupied = np.bincount(cell_unit, minlength=n_units)
    squares += (n_windows - occupied) * mean * mean
    with np.errstate(invalid="ignore", divide="ignore"):
        cv = np.sqrt(np.maximum(squares, 0.0) / n_windows) / np.where(totals > 0, mean, 1.0)
    return np.where(totals > 0, cv, np.nan)


def group_units(n_streams: int, group_size: int, perm: np.ndarray) -> tuple[np.ndarray, int]:
    """Unit of each stream in a random partition into ⌊S/g⌋ groups of g (−1: left over); g = 1:
    every stream is its own unit (no permutation), as in :func:`group_sums`."""
    if group_size == 1:
        return np.arange(n_streams, dtype=np.int64), n_streams
    n_groups = n_streams // group_size
    unit = np.full(n_streams, -1, dtype=np.int64)
    unit[perm[: n_groups * group_size]] = np.arange(n_groups * group_size) // group_size
    return unit, n_groups


#: ``cvs_for(τ, g, perm)`` → (CV of each unit, number of whole windows) for group size g.
UnitCvs = Callable[[int, int, np.ndarray], "tuple[np.ndarray, int]"]


def cv_table(cvs_for: UnitCvs, taus_us: Sequence[int], n_streams: int,
             group_sizes: Sequence[int], rng: np.random.Generator) -> pl.DataFrame:
    """Mean/median CV per (τ, g); ``cvs_for`` gives the units' CVs and the window count."""
    if any(t <= 0 for t in taus_us):
        raise UserError("window sizes τ must be positive")
    if any(g < 1 for g in group_sizes):
        raise UserError("group sizes must be ≥ 1")
    sizes = sorted({int(g) for g in group_sizes if g <= n_streams})
    perms = {g: rng.permutation(n_streams) for g in sizes}
    rows = []
    for tau in sorted({int(t) for t in taus_us}):
        for g in sizes:
            cvs, windows = cvs_for(tau, g, perms[g])
            if windows < 2:
                break
            cvs = cvs[np.isfinite(cvs)]
            rows.append({
                "tau_us": tau, "group_size": g, "units": int(cvs.size), "windows": int(windows),
                "cv_mean": float(cvs.mean()) if cvs.size else float("nan"),
                "cv_median": float(np.median(cvs)) if cvs.size else float("nan"),
            })
    schema = {c.name: c.dtype for c in schema_for("predictability").required}
    return pl.DataFrame(rows, schema=schema)


def counts_cv(counts: np.ndarray, taus_min: Sequence[int], group_sizes: Sequence[int] = (1,),
              rng: np.random.Generator | None = None) -> pl.DataFrame:
    """Figs. 2/5 from per-minute counts (F × M), τ in whole minutes."""
    if any(t < 1 for t in taus_min):
        raise UserError("τ must be at least one minute for per-minute counts")
    rng = rng or np.random.default_rng(0)
    last: dict[int, np.ndarray] = {}

    def cvs_for(tau: int, g: int, perm: np.ndarray) -> tuple[np.ndarray, int]:
        if tau not in last:
            last.clear()
            last[tau] = minute_windows(counts, tau // 60_000_000)
        matrix = last[tau]
        return row_cv(matrix if g == 1 else group_sums(matrix, g, perm)), matrix.shape[1]

    return cv_table(cvs_for, [int(t) * 60_000_000 for t in taus_min], counts.shape[0], group_sizes, rng)


def trace_cv(trace: pl.DataFrame, taus_us: Sequence[int], group_sizes: Sequence[int] = DEFAULT_GROUP_SIZES,
             rng: np.random.Generator | None = None, span_us: int | None = None) -> pl.DataFrame:
    """Figs. 2/5 from an arrival-level trace frame, τ in µs; streams are renumbered densely.

    ``span_us``: the trace's declared length (see :func:`whole_windows`). Memory is
    O(requests) for any τ (:func:`sparse_window_cv`).
    """
    if trace.height == 0:
        raise UserError("trace has no requests")
    rng = rng or np.random.default_rng(0)
    _, stream = np.unique(trace["stream"].to_numpy(), return_inverse=True)
    arrival = trace["arrival_us"].to_numpy()
    n_streams = int(stream.max()) + 1

    def cvs_for(tau: int, g: int, perm: np.ndarray) -> tuple[np.ndarray, int]:
        n = whole_windows(arrival, tau, span_us)
        unit, n_units = group_units(n_streams, g, perm)
        return sparse_window_cv(unit[stream], arrival, n_units, tau, n), n

    return cv_table(cvs_for, taus_us, n_streams, group_sizes, rng)


def default_taus_us(span_us: int) -> list[int]:
    """τ from 10 ms to a quarter of the span, in 1-2-5 steps (at least 4 whole windows)."""
    taus, base = [], 10_000
    while base * 4 <= span_us:
        for m in (1, 2, 5):
            if base * m * 4 <= span_us:
                taus.append(base * m)
        base *= 10
    return taus
