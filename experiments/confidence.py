"""Means with 95 % confidence half-widths over seeds (Student's t), clipped to each metric's domain.

Figures draw the mean with a 95 % band and REPORT.md gives mean ± half-width;
a claim counts as reproduced only when it holds beyond the interval.

A t interval is symmetric and knows nothing of the metric, so over few seeds it
can leave the values the metric can take (a p99 latency band below 0, a
utilisation band above 1). :data:`DOMAINS` says, per metric, where its values
lie; :func:`interval` clips the band to it, and :func:`fmt_interval` writes
``mean ± hw`` when the band fits and ``mean [low, high]`` when it was clipped.
Every band drawn or tabulated by the reports goes through them (issue 29).
"""

from __future__ import annotations

from typing import Sequence

INF = float("inf")
UNIT = (0.0, 1.0)
NONNEG = (0.0, INF)
#: where each metric's values lie (inclusive). Names not listed: by suffix in :func:`domain`.
DOMAINS: dict[str, tuple[float, float]] = {
    "slo_attainment": UNIT, "utilization": UNIT, "drop_rate": UNIT,
    "CDF": UNIT, "CV": NONNEG, "SLO attainment (%)": (0.0, 100.0),
    "goodput_rps": NONNEG, "p50_latency_ms": NONNEG, "p99_latency_ms": NONNEG, "mean_queue_ms": NONNEG,
    "p99_queue_ms": NONNEG, "mean_batch": NONNEG, "p50_batch": NONNEG, "p99_batch": NONNEG,
    "capacity": NONNEG, "capacity_rps": NONNEG, "ratio": NONNEG, "max load factor": NONNEG, "max_lf": NONNEG,
    "qps": NONNEG, "latency_s": NONNEG, "violations_pct": (0.0, 100.0),
}
#: suffixes that fix a domain for names not in :data:`DOMAINS` (a ratio of two non-negative metrics is ≥ 0)
SUFFIX_DOMAINS = (("_ratio", NONNEG), ("_ms", NONNEG), ("_rps", NONNEG), ("_us", NONNEG), ("req/s)", NONNEG),
                  ("r/s)", NONNEG), ("utilization", UNIT), ("attainment", UNIT))

import polars as pl

from shepherd.core.confidence import half_width, t975  # noqa: F401  (t975: re-exported)


#: the paper reports' headline rows carry a unit, not a metric: the units whose values cannot be negative
#: (a "%" row may be a change, a unit-less one a correlation: left unbounded)
UNIT_DOMAINS: dict[str, tuple[float, float]] = {"×": NONNEG, "s": NONNEG, "req/s": NONNEG, "r/s": NONNEG,
                                                 "ms": NONNEG, "EP-s": NONNEG}


def domain_of_unit(unit: str) -> tuple[float, float]:
    """Where a headline's values lie, from its unit (:data:`UNIT_DOMAINS`); unbounded otherwise."""
    return UNIT_DOMAINS.get(unit.strip(), (-INF, INF))


def domain(metric: str | None) -> tuple[float, float]:
    """(low, high) that ``metric``'s values lie in; unbounded for a metric nobody declared."""
    if metric is None:
        return (-INF, INF)
    if metric in DOMAINS:
        return DOMAINS[metric]
    for suffix, dom in SUFFIX_DOMAINS:
        if metric.endswith(suffix):
            return dom
    return (-INF, INF)


def clip(low: float, high: float, metric: str | None) -> tuple[float, float]:
    """The band (low, high) clipped to ``metric``'s domain."""
    return clip_to(low, high, domain(metric))


def clip_to(low: float, high: float, bounds: tuple[float, float]) -> tuple[float, float]:
    """The band (low, high) clipped to ``bounds`` (low, high)."""
    lo, hi = bounds
    return min(max(low, lo), hi), max(min(high, hi), lo)


def interval(values: Sequence[float], metric: str | None = None) -> tuple[float, float, float]:
    """(mean, low, high): the mean with its 95 % t interval clipped to ``metric``'s domain."""
    vals = [float(v) for v in values]
    if not vals:
        return float("nan"), float("nan"), float("nan")
    mean = sum(vals) / len(vals)
    hw = half_width(vals)
    return (mean, *clip(mean - hw, mean + hw, metric))


def fmt_interval(mean: float | None, hw: float | None, metric: str | None = None, digits: int = 4,
                 n: int | None = None) -> str:
    """``"m ± h"`` when the band fits the domain, ``"m [lo, hi]"`` when it was clipped; ``"—"`` for no value;
    ``"m (1 seed)"`` when ``n`` is 1 (no spread measurable, never "± 0"). Numbers for people: 1,138 ± 120."""
    from shepherd.experiments.judge import num

    if mean is None or mean != mean:
        return "—"
    if n == 1:
        return f"{num(mean, digits)} (1 seed)"
    hw = hw or 0.0
    if hw < 1e-9 * abs(mean):  # rounding noise of identical values
        hw = 0.0
    low, high = clip(mean - hw, mean + hw, metric)
    if (low, high) == (mean - hw, mean + hw):
        return f"{num(mean, digits)} ± {num(hw, 2)}"
    return f"{num(mean, digits)} [{num(low, digits)}, {num(high, digits)}]"


def mean_ci(frame: pl.DataFrame, by: Sequence[str], value: str, metric: str | None = None) -> pl.DataFrame:
    """Per group: ``mean``, ``half_width``, ``n`` of ``value``, and ``low``/``high``: the band clipped to
    the domain of ``metric`` (default: ``value``'s own name)."""
    groups = frame.group_by(list(by), maintain_order=True).agg(pl.col(value).alias("_values"))
    rows = []
    for row in groups.iter_rows(named=True):
        vals = [float(v) for v in row.pop("_values") if v is not None]
        mean, low, high = interval(vals, metric or value)
        row.update(mean=mean, half_width=half_width(vals), n=len(vals), low=low, high=high)
        rows.append(row)
    return pl.DataFrame(rows)


def clearly_greater(a_mean: float, a_hw: float, b_mean: float, b_hw: float) -> bool:
    """a > b beyond both intervals (the lower end of a above the upper end of b)."""
    return a_mean - a_hw > b_mean + b_hw
