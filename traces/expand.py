"""From per-minute counts to request arrivals, and load rescaling (Shepherd §7).

MAF 2019 records only how many times each function ran in each minute;
Shepherd §7 turns each function into a stream and draws arrival times inside
every minute in one of two ways:

* **MAF-stable** (:func:`expand_stable`): a Poisson process within the
  minute — given the count c, the c arrivals are i.i.d. uniform over the
  minute. Every minute keeps its count *exactly*.
* **MAF-bursty** (:func:`expand_bursty`): a 2-state Markov-modulated Poisson
  process (after MArk, Shepherd ref. [9]) whose long-run mean rate is the
  minute's rate c/60 s. The state (low/high) alternates with exponential
  sojourns; arrivals are Poisson at the state's rate. The minute's count is
  then Poisson with a random intensity whose mean is c, so counts are kept
  **in expectation**, not exactly (documented choice: an MMPP conditioned on
  the exact count would no longer be an MMPP). The state path restarts, from
  its stationary law, at every minute. Shepherd gives no MMPP parameters;
  :data:`DEFAULT_BURSTY` documents ours.

**Load rescaling** (``--rate X``, target aggregate rate X requests/s) with
factor f = X / native rate:

* *thinning* (f < 1): every request is kept independently with probability f
  (a thinned Poisson process is Poisson at f·λ);
* *superposition* (f ≥ 1): ⌊f⌋ independent copies of each minute's requests
  plus one copy thinned with probability f − ⌊f⌋ — equivalent to overlaying
  independent processes of the same shape.

:func:`scale_counts` applies both to integer counts (so the expected total is
exactly f·total); MAF-bursty instead multiplies its intensity by f.
:func:`rescale_arrivals` does the same on an arrival-level trace (MAF 2021,
trace files): copies are shifted by an independent uniform offset, wrapped
around the trace span.

All arrivals are integer µs; every arrival lies inside its own minute.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.traces import checks

MINUTE_US = 60_000_000
MINUTE_S = 60.0


@dataclass(frozen=True)
class BurstyParams:
    """Shape of the per-minute MMPP: high/low rate ratio and mean sojourns (s).

    The mean rate is set per minute from the count; these fix only the shape.
    """

    ratio: float = 10.0
    dwell_low_s: float = 1.0
    dwell_high_s: float = 0.1

    def validate(self) -> None:
        """Ratio ≥ 1; sojourns of 1 ms to two weeks (see :mod:`shepherd.traces.checks`)."""
        checks.number("--mmpp-ratio", self.ratio, low=1)
        for option, value in (("--mmpp-dwell-low", self.dwell_low_s), ("--mmpp-dwell-high", self.dwell_high_s)):
            checks.number(option, value, low=checks.MIN_DWELL_S, high=checks.MAX_DURATION_S, what="s")

    @property
    def p_high(self) -> float:
        return self.dwell_high_s / (self.dwell_low_s + self.dwell_high_s)


#: Defaults: the high state runs 10× the low rate, lasts 0.1 s on average and
#: recurs about once a second (≈ 9 % of the time, ≈ 48 % of the requests) —
#: the same shape as ``traces generate --process mmpp``.
DEFAULT_BURSTY = BurstyParams()


def load_factor(total_requests: float, window_s: float, load_rps: float | None) -> float:
    """f = target rate / native rate (1 when no target is given)."""
    if load_rps is None:
        return 1.0
    if not np.isfinite(load_rps) or load_rps <= 0:
        raise UserError(f"--rate must be a positive rate in requests/s, got {load_rps}")
    if total_requests <= 0 or window_s <= 0:
        raise UserError("cannot rescale to --rate: the selected window has no requests")
    return float(load_rps) / (total_requests / window_s)


def scale_counts(counts: np.ndarray, factor: float, rng: np.random.Generator) -> np.ndarray:
    """Thinning (f < 1) / superposition (f ≥ 1) of integer counts; E[result] = f·counts."""
    if not np.isfinite(factor) or factor < 0:
        raise UserError(f"load factor must be non-negative, got {factor}")
    if factor == 1.0:
        return counts.astype(np.int64, copy=True)
    whole = int(np.floor(factor))
    frac = factor - whole
    out = counts.astype(np.int64) * whole
    if frac > 0:
        out += rng.binomial(counts.astype(np.int64), frac)
    return out


def _minute_starts_us(minutes: np.ndarray) -> np.ndarray:
    return (np.asarray(minutes, dtype=np.int64) - int(minutes[0])) * MINUTE_US


def expand_stable(counts: np.ndarray, minutes: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """MAF-stable: exactly ``counts[s, j]`` uniform arrivals in minute j of stream s.

    Returns unsorted ``(arrival_us, stream)``; time 0 is the start of ``minutes[0]``.
    """
    n_streams, n_minutes = counts.shape
    flat = counts.reshape(-1).astype(np.int64)
    cells = np.repeat(np.arange(flat.size, dtype=np.int64), flat)
    stream = (cells // n_minutes).astype(np.int32)
    start = _minute_starts_us(minutes)[cells % n_minutes]
    offset = np.floor(rng.random(cells.size) * MINUTE_US).astype(np.int64)
    return start + np.minimum(offset, MINUTE_US - 1), stream


def expand_bursty(counts: np.ndarray, minutes: np.ndarray, rng: np.random.Generator,
                  params: BurstyParams = DEFAULT_BURSTY, factor: float = 1.0,
                  max_cells_x_sojourns: int = 4_000_000) -> tuple[np.ndarray, np.ndarray]:
    """MAF-bursty: per (stream, minute) an MMPP with mean rate factor·count/60 s.

    Vectorised over cells in blocks: draw enough alternating exponential
    sojourns to cover the minute, integrate the piecewise-constant intensity,
    draw the Poisson count, then place arrivals by inverting the cumulative
    intensity (one global ``searchsorted``).
    """
    params.validate()
    n_streams, n_minutes = counts.shape
    starts = _minute_starts_us(minutes)
    cell_idx = np.flatnonzero(counts.reshape(-1) > 0)
    mean_rate = counts.reshape(-1)[cell_idx].astype(np.float64) * factor / MINUTE_S
    p_high = params.p_high
    low = mean_rate / ((1 - p_high) + params.ratio * p_high)
    cycle = params.dwell_low_s + params.dwell_high_s
    k = int(np.ceil(2 * MINUTE_S / cycle * 1.5)) + 16
    block = max(1, max_cells_x_sojourns // k)
    arr_parts, stream_parts = [], []
    for b0 in range(0, cell_idx.size, block):
        sl = slice(b0, b0 + block)
        times, which = _mmpp_block(rng, low[sl], params, k)
        cells = cell_idx[sl][which]
        arr_parts.append(starts[cells % n_minutes] + times)
        stream_parts.append((cells // n_minutes).astype(np.int32))
    if not arr_parts:
        return np.empty(0, np.int64), np.empty(0, np.int32)
    return np.concatenate(arr_parts), np.concatenate(stream_parts)


def _mmpp_block(rng: np.random.Generator, low: np.ndarray, params: BurstyParams,
                k: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrival offsets (µs within the minute) and their row index for rows with low-state rate ``low``."""
    n = low.size
    high0 = rng.random(n) < params.p_high
    # State of sojourn i: alternates starting from high0.
    parity = (np.arange(k)[None, :] % 2).astype(bool)
    state_high = parity ^ high0[:, None]
    means = np.where(state_high, params.dwell_high_s, params.dwell_low_s)
    ends = np.cumsum(rng.exponential(1.0, size=(n, k)) * means, axis=1)
    while ends[:, -1].min() < MINUTE_S:
        # Rare: some rows need more sojourns; extend every row (keeps the draw order simple).
        parity2 = ((np.arange(k)[None, :] + state_high.shape[1]) % 2).astype(bool)
        more_high = parity2 ^ high0[:, None]
        more_means = np.where(more_high, params.dwell_high_s, params.dwell_low_s)
        more = np.cumsum(rng.exponential(1.0, size=(n, k)) * more_means, axis=1) + ends[:, -1:]
        ends = np.concatenate([ends, more], axis=1)
        state_high = np.concatenate([state_high, more_high], axis=1)
    ends = np.minimum(ends, MINUTE_S)
    begins = np.concatenate([np.zeros((n, 1)), ends[:, :-1]], axis=1)
    rate = np.where(state_high, low[:, None] * params.ratio, low[:, None])
    seg_mass = rate * (ends - begins)
    row_mass = seg_mass.sum(axis=1)
    count = rng.poisson(row_mass)
    total = int(count.sum())
    row = np.repeat(np.arange(n, dtype=np.int64), count)
    row_base = np.concatenate([[0.0], np.cumsum(row_mass)[:-1]])
    cum = np.cumsum(seg_mass.reshape(-1))  # global cumulative intensity, row-major
    u = row_base[row] + rng.random(total) * row_mass[row]
    seg = np.searchsorted(cum, u, side="right")
    seg = np.minimum(seg, cum.size - 1)
    # Keep each arrival inside its own row (guards float round-off at row edges).
    seg = np.clip(seg, row * ends.shape[1], row * ends.shape[1] + ends.shape[1] - 1)
    before = np.where(seg > 0, cum[seg - 1], 0.0)
    flat_rate = rate.reshape(-1)[seg]
    t = begins.reshape(-1)[seg] + np.where(flat_rate > 0, (u - before) / np.where(flat_rate > 0, flat_rate, 1), 0.0)
    us = np.clip(np.floor(t * 1e6).astype(np.int64), 0, MINUTE_US - 1)
    return us, row


def rescale_arrivals(frame: pl.DataFrame, factor: float, rng: np.random.Generator,
                     span_us: int | None = None) -> pl.DataFrame:
    """Thin (f < 1) or superpose (f ≥ 1) an arrival-level trace frame; E[rows] = f·rows.

    Copy 0 keeps the original times; each further copy (and the fractional,
    thinned copy) is shifted by its own uniform offset modulo the span, so the
    trace length is unchanged. Deadlines are recomputed from ``slo_us``.
    """
    if not np.isfinite(factor) or factor <= 0:
        raise UserError(f"load factor must be positive, got {factor}")
    if frame.height == 0 or factor == 1.0:
        return frame
    span = int(span_us if span_us is not None else int(frame["arrival_us"].max()) + 1)
    whole = int(np.floor(factor))
    frac = factor - whole
    parts = []
    for copy in range(whole):
        shift = 0 if copy == 0 else int(rng.integers(0, span))
        parts.append(frame.with_columns(((pl.col("arrival_us") + shift) % span).alias("arrival_us")))
    if frac > 0:
        keep = rng.random(frame.height) < frac
        shift = int(rng.integers(0, span)) if whole > 0 else 0
        parts.append(frame.filter(pl.Series(keep))
                     .with_columns(((pl.col("arrival_us") + shift) % span).alias("arrival_us")))
    out = pl.concat(parts)
    return (out.with_columns((pl.col("arrival_us") + pl.col("slo_us")).alias("deadline_us"))
            .sort(["arrival_us", "stream"], maintain_order=True))
