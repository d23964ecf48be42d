"""Workload predictability: CV of per-window request counts vs window size τ.

Shepherd §2.2 (Fig. 2): split time into non-overlapping windows of size τ,
count the requests r_{t,s} of stream s in window t, and take the coefficient
of variation std/mean over t; Fig. 2 plots the *average over streams* against
τ — it grows sharply as τ shrinks. §3.1 (Fig. 5): randomly partition the
streams into serving groups of size g (1, 10, 100, 1000), sum the counts of
each group, and average the per-group CV — larger groups are far more
predictable.

Documented choices: the std is the population std (ddof = 0); only whole
windows count (a partial last window is dropped); streams or groups with no
request in the span are left out of the average (their CV is undefined); a
τ with fewer than two whole windows is skipped; groups are one random
partition per g, drawn from the seeded generator (shared by all τ), and the
streams left over after ⌊S/g⌋ whole groups are dropped.

The same code serves per-minute counts (MAF files, τ a multiple of a
minute) and arrival-level traces (τ in µs). The result is a
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
    """S × W matrix of requests per (stream, whole window of ``tau_us``) over [0, span_us)."""
    n = span_us // tau_us
    if n == 0:
        return np.zeros((n_streams, 0), dtype=np.int64)
    w = arrival_us // tau_us
    keep = w < n
    flat = stream[keep].astype(np.int64) * n + w[keep]
    return np.bincount(flat, minlength=n_streams * n).reshape(n_streams, n)


def cv_table(windows_for: Callable[[int], np.ndarray], taus_us: Sequence[int], n_streams: int,
             group_sizes: Sequence[int], rng: np.random.Generator) -> pl.DataFrame:
    """Mean/median CV per (τ, g); ``windows_for(τ)`` gives the S × W count matrix."""
    if any(t <= 0 for t in taus_us):
        raise UserError("window sizes τ must be positive")
    if any(g < 1 for g in group_sizes):
        raise UserError("group sizes must be ≥ 1")
    sizes = sorted({int(g) for g in group_sizes if g <= n_streams})
    perms = {g: rng.permutation(n_streams) for g in sizes}
    rows = []
    for tau in sorted({int(t) for t in taus_us}):
        matrix = windows_for(tau)
        if matrix.shape[1] < 2:
            continue
        for g in sizes:
            units = matrix if g == 1 else group_sums(matrix, g, perms[g])
            cvs = row_cv(units)
            cvs = cvs[np.isfinite(cvs)]
            rows.append({
                "tau_us": tau, "group_size": g, "units": int(cvs.size), "windows": int(matrix.shape[1]),
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
    return cv_table(lambda tau: minute_windows(counts, tau // 60_000_000),
                    [int(t) * 60_000_000 for t in taus_min], counts.shape[0], group_sizes, rng)


def trace_cv(trace: pl.DataFrame, taus_us: Sequence[int], group_sizes: Sequence[int] = DEFAULT_GROUP_SIZES,
             rng: np.random.Generator | None = None) -> pl.DataFrame:
    """Figs. 2/5 from an arrival-level trace frame, τ in µs; streams are renumbered densely."""
    if trace.height == 0:
        raise UserError("trace has no requests")
    rng = rng or np.random.default_rng(0)
    _, stream = np.unique(trace["stream"].to_numpy(), return_inverse=True)
    arrival = trace["arrival_us"].to_numpy()
    n_streams = int(stream.max()) + 1
    span = int(arrival.max()) + 1
    return cv_table(lambda tau: trace_windows(stream, arrival, n_streams, tau, span),
                    taus_us, n_streams, group_sizes, rng)


def default_taus_us(span_us: int) -> list[int]:
    """τ from 10 ms to a quarter of the span, in 1-2-5 steps (at least 4 whole windows)."""
    taus, base = [], 10_000
    while base * 4 <= span_us:
        for m in (1, 2, 5):
            if base * m * 4 <= span_us:
                taus.append(base * m)
        base *= 10
    return taus
