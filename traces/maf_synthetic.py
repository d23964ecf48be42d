"""``maf-synthetic``: an embedded, MAF-2019-like generator of per-minute counts.

Used when the real Azure Functions trace is not available (README quick
start, tests). Everything made from it is labelled **synthetic**. It produces
the same :class:`~shepherd.traces.maf2019.MafCounts` as the real reader, so
the stable/bursty expansion, ``--load`` and the predictability analysis run
unchanged on it.

What it matches. **Calibrated to real MAF 2019 rows** (issue 16; constants
below, with their source): the shared 500-function, 8-hour real sample.

* **Per-function rates**: drawn from the sample's quantile table of log10
  mean invocations per minute (``LOG10_RATE_QUANTILES``; spans 6 orders of
  magnitude, median 0.1 per minute). ``rates="atc20"`` keeps the earlier
  law, log10 daily invocations normal with median 1.60 and σ 1.77 (ATC '20
  Fig. 5a quantiles: ≈45 % of functions at most hourly, ≈81 % at most once
  a minute), clipped to [0, 8.5].
* **Trigger mix**: the sample's shares (``TRIGGER_SHARES``: timer 49 %, HTTP
  28 %, queue 14 % …); ATC '20 Fig. 2a's (HTTP 55 %, timer 15.6 % …) are
  ``ATC20_TRIGGER_SHARES``.
* **Diurnal pattern** (ATC '20 Fig. 4; an 8-hour sample cannot fit a day):
  non-timer functions follow 1 + a·cos(2π(m − peak)/1440) with a = 0.4
  (peak/trough ≈ 2.3), peak at 14:00 with a per-function phase jitter of
  σ = 2 h.
* **Per-minute burstiness**, fitted: a non-timer function's count in minute
  m is Poisson(λ·diurnal·G) with G ~ Gamma(k, 1/k) (mean 1); k is
  log-uniform in ``FIT_BURST_SHAPE`` times λ^``FIT_BUSY_SMOOTHING`` (λ per
  minute): rare functions are very bursty, busy ones smoother — fitted so
  that the mean per-minute CV of random groups of g = 1, 10, 100 functions
  matches the sample's (``TARGET_GROUP_CV_1MIN``: 7.06 / 0.80 / 0.17; the
  generator's earlier, ATC-only defaults gave 3.7 / 0.36 / 0.12). Timer
  functions are periodic: a fixed count every minute, or one call every P
  minutes. Below a minute (τ = 1 s) the burstiness is the expansion's
  (Poisson for MAF-stable, MMPP for MAF-bursty, :mod:`.expand`), as for the
  real trace.

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
#: ATC '20 Fig. 2a shares of functions (the generator's earlier default)
ATC20_TRIGGER_SHARES = (0.550, 0.152, 0.156, 0.069, 0.028, 0.022, 0.023)

# ---- Calibration to real MAF 2019 rows (issue 16) -------------------------------------
# Source: the 500-function, 8-hour (minutes 480…959) real sample of the Azure Functions
# trace 2019 (CC-BY 4.0, Shahrad et al. ATC '20), selected by vHive/invitro, in
# ``shared/data/maf2019-sample/500/invocations.csv``; the CV targets are recomputed from
# those rows by tests/test_maf_calibration.py.
#: trigger shares of the sample's 500 functions (timer 247, http 139, queue 69,
#: orchestration 25, event 14, storage 5, others 1)
TRIGGER_SHARES = (0.278, 0.138, 0.494, 0.050, 0.010, 0.028, 0.002)
#: log10 of a function's mean invocations per minute at quantiles 0, 0.05, …, 1 of the sample
LOG10_RATE_QUANTILES = (-2.681, -2.681, -2.681, -2.38, -2.079, -1.778, -1.778, -1.505, -1.301, -1.176,
                        -1.0, -0.704, -0.699, -0.699, -0.602, -0.432, -0.108, 0.0, 0.3, 1.077, 3.601)
#: the sample's aggregate rate (req/s) — the scale at which the targets below hold
SAMPLE_RATE_RPS = 105.48
#: targets: mean CV of per-minute counts (τ = 1 min) over random groups of g functions
#: (one partition per g, averaged over 20 for g > 1): g = 1, 10, 100
TARGET_GROUP_CV_1MIN = {1: 7.06, 10: 0.80, 100: 0.17}
#: aggregate per-minute CV over the 8 hours (diurnal drift + bursts)
TARGET_AGGREGATE_CV_1MIN = 0.100
#: Fitted (grid search, 500 functions × minutes 480…959 at SAMPLE_RATE_RPS, seeds 0–1,
#: 5 partitions per g; worst relative error over g = 1/10/100 minimised): a function's
#: gamma burst shape is log-uniform in FIT_BURST_SHAPE times (λ per minute)^FIT_BUSY_SMOOTHING —
#: rare functions very bursty, busy ones smoother. Result: 6.97 / 0.79 / 0.16 vs the
#: targets 7.06 / 0.80 / 0.17 (the previous defaults, ATC '20 lognormal rates and
#: shape in [0.3, 10]·max(1, √(λ/10)), gave 3.7 / 0.36 / 0.12 on the same cells).
FIT_BURST_SHAPE = (0.2, 1.0)
FIT_BUSY_SMOOTHING = 0.25


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
    burst_shape_min: float = FIT_BURST_SHAPE[0]
    burst_shape_max: float = FIT_BURST_SHAPE[1]
    busy_smoothing: float = FIT_BUSY_SMOOTHING
    #: per-function rates: "sample" = the real sample's quantile table (calibrated default),
    #: "atc20" = the lognormal of ATC '20 Fig. 5a (log10_median_daily, log10_sigma)
    rates: str = "sample"
    trigger_shares: tuple = TRIGGER_SHARES

    def validate(self) -> None:
        checks.count("--functions", self.functions, 1, checks.MAX_FUNCTIONS)
        checks.positive("--synthetic-rate", self.rate_rps, what="requests/s")
        if not 0 <= self.diurnal_amplitude < 1:
            raise UserError("diurnal amplitude must be in [0, 1)")
        if not 0 < self.burst_shape_min <= self.burst_shape_max:
            raise UserError("burst shape range must be positive and ordered")
        if self.rates not in ("sample", "atc20"):
            raise UserError(f"rates must be 'sample' or 'atc20', got '{self.rates}'")

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
    if spec.rates == "sample":
        log_rate = np.interp(rng.uniform(0.0, 1.0, f), np.linspace(0.0, 1.0, len(LOG10_RATE_QUANTILES)),
                             LOG10_RATE_QUANTILES)
        daily = 10.0 ** log_rate * MINUTES_PER_DAY
    else:
        log_daily = np.clip(rng.normal(spec.log10_median_daily, spec.log10_sigma, f), 0.0, spec.log10_max_daily)
        daily = 10.0 ** log_daily
    daily *= spec.rate_rps * 86400.0 / daily.sum()
    trigger = rng.choice(len(TRIGGERS), size=f, p=np.asarray(spec.trigger_shares) / sum(spec.trigger_shares))
    phase = spec.peak_minute + rng.normal(0.0, spec.phase_jitter_min, f)
    shape = np.exp(rng.uniform(np.log(spec.burst_shape_min), np.log(spec.burst_shape_max), f))
    shape *= np.maximum(daily / MINUTES_PER_DAY, 1e-6) ** spec.busy_smoothing
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
