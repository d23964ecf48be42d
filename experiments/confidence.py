"""Means with 95 % confidence half-widths over seeds (Student's t).

Figures draw the mean with a 95 % band and REPORT.md gives mean ± half-width;
a claim counts as reproduced only when it holds beyond the interval.
"""

from __future__ import annotations

import math
from typing import Sequence

import polars as pl

# Two-sided 97.5 % quantiles of Student's t for 1…30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t975(dof: int) -> float:
    if dof <= 0:
        return float("nan")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def half_width(values: Sequence[float]) -> float:
    """95 % half-width of the mean; 0 for a single value (no spread measurable)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return t975(n - 1) * sd / math.sqrt(n)


def mean_ci(frame: pl.DataFrame, by: Sequence[str], value: str) -> pl.DataFrame:
    """Per group: ``mean``, ``half_width`` and ``n`` of ``value``."""
    groups = frame.group_by(list(by), maintain_order=True).agg(pl.col(value).alias("_values"))
    rows = []
    for row in groups.iter_rows(named=True):
        vals = [float(v) for v in row.pop("_values") if v is not None]
        row.update(mean=sum(vals) / len(vals) if vals else float("nan"),
                   half_width=half_width(vals), n=len(vals))
        rows.append(row)
    return pl.DataFrame(rows)


def clearly_greater(a_mean: float, a_hw: float, b_mean: float, b_hw: float) -> bool:
    """a > b beyond both intervals (the lower end of a above the upper end of b)."""
    return a_mean - a_hw > b_mean + b_hw
