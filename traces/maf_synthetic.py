"""``maf-synthetic``: an embedded, MAF-2019-like generator of per-minute counts.

Used when the real Azure Functions trace is not available (README quick
start, tests). Everything made from it is labelled **synthetic**. It produces
the same :class:`~shepherd.traces.maf2019.MafCounts` as the real reader, so
the stable/bursty expansion, ``--load`` and the predictability analysis run
unchanged on it.

What it matches — characteristics published for the 2019 trace in Shahrad et
al., "Serverless in the Wild", USENIX ATC '20 (§3):

* **Heavy-tailed per-function popularity spanning ~8 orders of magnitude**
  (ATC '20 Fig. 5a): log10 of a function's daily invocations is normal with
  median 1.60 and σ 1.77, clipped to [0, 8.5]. These two numbers are solved
  from two quantiles ATC '20 reports: ≈45 % of functions run at most once an
  hour (≤ 24/day) and ≈81 % at most once a minute on average (≤ 1440/day).
  The same law puts ≈99.9 % of invocations on the busiest 18.6 % of
  functions (ATC '20: 99.6 %).
* **Trigger mix** (ATC '20 Fig. 2a, share of functions): HTTP 55 %,
  queue 15.2 %, timer 15.6 %, orchestration 6.9 %, storage 2.8 %, event 2.2 %,
  others 2.3 % (rounded so they sum to 1).
* **Diurnal pattern** (ATC '20 Fig. 4): non-timer functions follow
  1 + a·cos(2π(m − peak)/1440) with a = 0.4 (peak/trough ≈ 2.3), peak at
  14:00 with a per-function phase jitter of σ = 2 h.
* **Per-minute burstiness**: a non-timer function's count in minute m is
  Poisson(λ·diurnal·G) with G ~ Gamma(k, 1/k) (mean 1): over-dispersed, more
  so for small k; k is log-uniform in [0.3, 10] per function, multiplied by
  max(1, √(λ/10)) for a function averaging λ calls a minute — busy functions
  aggregate many callers and are smoother (our choice; the real sample's
  busiest function sits at 15000/min for hours). Timer functions are
  periodic: a fixed count every minute, or one call every P minutes.

Absolute scale: the daily counts are rescaled so the aggregate mean rate over
the day is ``rate_rps`` (default 3000 req/s, the "∼3k requests/second" load
of Shepherd §7.1); the *shape* above is what is matched. Whole days are drawn
(so a window's counts do not depend on which window is asked for) and then
sliced. Deterministic given the generator.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.traces import checks
from shepherd.traces.maf2019 import KEY_COLUMNS, MINUTES_PER_DAY, MafCounts

TRIGGERS = ("http", "queue", "timer", "orchestration", "storage", "event", "others")
TRIGGER_SHARES = (0.550, 0.152, 0.156, 0.069, 0.028, 0.022, 0.023)


@dataclass(frozen=True)
class SyntheticMafSpec:
    """Knobs of the synthetic MAF-like workload (defaults: ATC '20 figures, see module doc)."""

    functions: int = 1000
    rate_rps: float = 3000.0
    log10_median_daily: float = 1.60
    log10_sigma: float = 1.77
    log10_max_daily: float = 8.5
    diurnal_amplitude: float = 0.4
    peak_minute: int = 14 * 60
    phase_jitter_min: float = 120.0
    burst_shape_min: float = 0.3
    burst_shape_max: float = 10.0

    def validate(self) -> None:
        checks.count("--functions", self.functions, 1, checks.MAX_FUNCTIONS)
        checks.positive("--synthetic-rate", self.rate_rps, what="requests/s")
        if not 0 <= self.diurnal_amplitude < 1:
            raise UserError("diurnal amplitude must be in [0, 1)")
        if not 0 < self.burst_shape_min <= self.burst_shape_max:
            raise UserError("burst shape range must be positive and ordered")

    def config(self) -> dict:
        return asdict(self)


def generate(spec: SyntheticMafSpec, rng: np.random.Generator, day: int = 1,
             start_minute: int = 1, duration_min: int | None = None) -> MafCounts:
    """Counts for ``duration_min`` minutes from ``start_minute`` (1-based) of ``day``.

    Days 1…``day``−1 are not drawn; each requested day is drawn whole, in
    order, from ``rng`` after the per-function parameters.
    """
    spec.validate()
    if day < 1:
        raise UserError(f"day must be ≥ 1, got {day}")
    if not 1 <= start_minute <= MINUTES_PER_DAY:
        raise UserError(f"start minute must be in 1…{MINUTES_PER_DAY}, got {start_minute}")
    if duration_min is None:
        duration_min = MINUTES_PER_DAY - start_minute + 1
    if duration_min < 1:
        raise UserError(f"duration must be at least one minute, got {duration_min}")
    begin = start_minute - 1
    end = begin + duration_min
    n_days = (end - 1) // MINUTES_PER_DAY + 1
    cells = spec.functions * n_days * MINUTES_PER_DAY
    if cells > checks.MAX_COUNT_CELLS:
        raise UserError(f"maf-synthetic would draw {spec.functions:,} functions × {n_days} whole days of "
                        f"per-minute counts ({cells:,} cells), over the limit of {checks.MAX_COUNT_CELLS:,}: "
                        f"use fewer --functions or a shorter --duration-min")
    f = spec.functions
    log_daily = np.clip(rng.normal(spec.log10_median_daily, spec.log10_sigma, f), 0.0, spec.log10_max_daily)
    daily = 10.0 ** log_daily
    daily *= spec.rate_rps * 86400.0 / daily.sum()
    trigger = rng.choice(len(TRIGGERS), size=f, p=np.asarray(TRIGGER_SHARES) / sum(TRIGGER_SHARES))
    phase = spec.peak_minute + rng.normal(0.0, spec.phase_jitter_min, f)
    shape = np.exp(rng.uniform(np.log(spec.burst_shape_min), np.log(spec.burst_shape_max), f))
    shape *= np.maximum(1.0, np.sqrt(daily / MINUTES_PER_DAY / 10.0))
    timer_offset = rng.integers(0, MINUTES_PER_DAY, f)
    is_timer = trigger == TRIGGERS.index("timer")

    per_minute = daily / MINUTES_PER_DAY
    days = []
    for d in range(n_days):
        m = np.arange(MINUTES_PER_DAY, dtype=np.float64)
        diurnal = 1.0 + spec.diurnal_amplitude * np.cos(2 * np.pi * (m[None, :] - phase[:, None]) / MINUTES_PER_DAY)
        gamma = rng.gamma(shape[:, None], 1.0 / shape[:, None], size=(f, MINUTES_PER_DAY))
        counts = rng.poisson(per_minute[:, None] * diurnal * gamma)
        counts[is_timer] = _timer_counts(per_minute[is_timer], timer_offset[is_timer], d)
        days.append(counts.astype(np.int64))
    allc = np.concatenate(days, axis=1)[:, begin:end]
    first_abs = (day - 1) * MINUTES_PER_DAY + begin
    minutes = np.arange(first_abs, first_abs + duration_min, dtype=np.int64)
    ids = [f"synthetic-{i:06d}" for i in range(f)]
    keys = pl.DataFrame({
        KEY_COLUMNS[0]: ids, KEY_COLUMNS[1]: ids, KEY_COLUMNS[2]: ids,
        KEY_COLUMNS[3]: [TRIGGERS[t] for t in trigger],
    })
    return MafCounts(keys, minutes, allc, "maf-synthetic", [], synthetic=True)


def _timer_counts(per_minute: np.ndarray, offset: np.ndarray, day_index: int) -> np.ndarray:
    """Periodic timers: ⌊rate⌉ calls every minute, or one call every round(1/rate) minutes."""
    m = np.arange(MINUTES_PER_DAY, dtype=np.int64)[None, :] + day_index * MINUTES_PER_DAY
    frequent = per_minute >= 1.0
    every = np.maximum(1, np.round(1.0 / np.maximum(per_minute, 1e-9))).astype(np.int64)
    fires = ((m + offset[:, None]) % every[:, None]) == 0
    return np.where(frequent[:, None], np.round(per_minute)[:, None].astype(np.int64), fires.astype(np.int64))
