"""The 95 % confidence half-width of a mean over seeds (Student's t): what a capacity search in ``core`` and
the experiments' reports (:mod:`shepherd.experiments.confidence`, which clips bands to a metric's domain) both
use — here, so that ``core`` imports nothing from ``experiments``."""

from __future__ import annotations

import math
from typing import Sequence

# Two-sided 97.5 % quantiles of Student's t for 1…30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)


def t975(dof: int) -> float:
    """The two-sided 97.5 % quantile of Student's t with ``dof`` degrees of freedom (1.96 beyond 30)."""
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
