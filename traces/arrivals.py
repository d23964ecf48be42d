"""Arrival processes: Poisson, Gamma renewal, 2-state MMPP.

All functions draw from the one ``numpy.random.Generator`` passed in (no global
state) and return sorted arrival times in integer microseconds within
``[start_us, start_us + duration_us)``.

* Poisson — the count over the window is Poisson(rate·T) and, given the count,
  arrivals are i.i.d. uniform: exactly a homogeneous Poisson process, drawn
  without a Python loop. Shepherd §7 "MAF-stable" expands each minute like this.
* Gamma renewal — inter-arrival times Γ(k, θ) with k = 1/CV² and θ = 1/(rate·k),
  so the mean rate is ``rate`` and the inter-arrival coefficient of variation
  is ``cv`` (CV > 1 is burstier than Poisson). Used by Symphony's synthetic
  workloads.
* MMPP — a 2-state Markov-modulated Poisson process: the state alternates
  between *low* and *high* with exponential sojourns of mean ``dwell_low_s`` and
  ``dwell_high_s``; arrivals are Poisson at the state's rate. Shepherd §7
  "MAF-bursty" (after [9]). :func:`mmpp_rates` turns a target mean rate and a
  high/low ratio into the two state rates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shepherd.core.errors import UserError
from shepherd.core.units import US_PER_S


def _check(rate: float, duration_us: int) -> None:
    if not np.isfinite(rate) or rate < 0:
        raise UserError(f"arrival rate must be a non-negative number, got {rate}")
    if duration_us <= 0:
        raise UserError(f"duration must be positive, got {duration_us} µs")


def _to_us(times_s: np.ndarray, start_us: int, duration_us: int) -> np.ndarray:
    us = start_us + np.floor(times_s * US_PER_S).astype(np.int64)
    # Guard the right edge against float rounding.
    return np.minimum(us, start_us + duration_us - 1)


def poisson(rng: np.random.Generator, rate: float, duration_us: int, start_us: int = 0) -> np.ndarray:
    """Homogeneous Poisson arrivals at ``rate`` requests/s."""
    _check(rate, duration_us)
    horizon_s = duration_us / US_PER_S
    count = int(rng.poisson(rate * horizon_s))
    times = np.sort(rng.random(count) * horizon_s)
    return _to_us(times, start_us, duration_us)


def uniform_count(rng: np.random.Generator, count: int, duration_us: int, start_us: int = 0) -> np.ndarray:
    """Exactly ``count`` arrivals, i.i.d. uniform over the window (Poisson given its count)."""
    if count < 0:
        raise UserError(f"request count must be non-negative, got {count}")
    horizon_s = duration_us / US_PER_S
    return _to_us(np.sort(rng.random(count) * horizon_s), start_us, duration_us)


def gamma(rng: np.random.Generator, rate: float, cv: float, duration_us: int, start_us: int = 0) -> np.ndarray:
    """Gamma-renewal arrivals with mean rate ``rate`` and inter-arrival CV ``cv``."""
    _check(rate, duration_us)
    if not np.isfinite(cv) or cv <= 0:
        raise UserError(f"coefficient of variation must be positive, got {cv}")
    if rate == 0:
        return np.empty(0, dtype=np.int64)
    shape = 1.0 / (cv * cv)
    scale = 1.0 / (rate * shape)
    horizon_s = duration_us / US_PER_S
    # Stationary start: the first arrival is drawn like any other gap scaled by a
    # uniform phase (equilibrium renewal approximation), so the window does not
    # start with a synchronised arrival.
    chunks = []
    t = -rng.random() * rng.gamma(shape, scale)
    expected = rate * horizon_s
    block = max(16, int(expected * 1.1) + 16)
    while t < horizon_s:
        gaps = rng.gamma(shape, scale, size=block)
        times = t + np.cumsum(gaps)
        chunks.append(times)
        t = float(times[-1])
        block = max(16, int((horizon_s - t) * rate * 1.1) + 16)
    times = np.concatenate(chunks) if chunks else np.empty(0)
    times = times[(times >= 0) & (times < horizon_s)]
    return _to_us(times, start_us, duration_us)


@dataclass(frozen=True)
class MMPP:
    """Two-state MMPP parameters (rates in requests/s, dwell times in seconds)."""

    rate_low: float
    rate_high: float
    dwell_low_s: float
    dwell_high_s: float

    @property
    def mean_rate(self) -> float:
        total = self.dwell_low_s + self.dwell_high_s
        return (self.rate_low * self.dwell_low_s + self.rate_high * self.dwell_high_s) / total


def mmpp_rates(mean_rate: float, ratio: float, dwell_low_s: float, dwell_high_s: float) -> MMPP:
    """State rates for a target long-run mean rate and a high/low rate ratio."""
    if ratio < 1:
        raise UserError(f"MMPP high/low rate ratio must be ≥ 1, got {ratio}")
    if dwell_low_s <= 0 or dwell_high_s <= 0:
        raise UserError("MMPP dwell times must be positive")
    if mean_rate < 0:
        raise UserError(f"arrival rate must be non-negative, got {mean_rate}")
    p_low = dwell_low_s / (dwell_low_s + dwell_high_s)
    low = mean_rate / (p_low + ratio * (1 - p_low))
    return MMPP(low, low * ratio, dwell_low_s, dwell_high_s)


def mmpp(rng: np.random.Generator, params: MMPP, duration_us: int, start_us: int = 0) -> np.ndarray:
    """2-state MMPP arrivals; the initial state is drawn from the stationary law."""
    _check(params.mean_rate, duration_us)
    horizon_s = duration_us / US_PER_S
    p_high = params.dwell_high_s / (params.dwell_low_s + params.dwell_high_s)
    high = bool(rng.random() < p_high)
    t = 0.0
    pieces = []
    while t < horizon_s:
        dwell = rng.exponential(params.dwell_high_s if high else params.dwell_low_s)
        end = min(horizon_s, t + dwell)
        rate = params.rate_high if high else params.rate_low
        count = int(rng.poisson(rate * (end - t)))
        pieces.append(t + rng.random(count) * (end - t))
        t = end
        high = not high
    times = np.sort(np.concatenate(pieces)) if pieces else np.empty(0)
    return _to_us(times, start_us, duration_us)


def periodic(period_us: int, end_us: int, first_us: int = 0, burst: int = 1) -> np.ndarray:
    """Deterministic arrivals: ``burst`` requests at first, first+period, … before ``end_us``."""
    if period_us <= 0 or burst < 1:
        raise UserError("period must be positive and burst ≥ 1")
    ticks = np.arange(first_us, end_us, period_us, dtype=np.int64)
    return np.repeat(ticks, burst)
