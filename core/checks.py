"""Checks of user-given values, shared by every command: each raises a one-line
:class:`~shepherd.core.errors.UserError` (exit 2) naming the option, the value
and the allowed range, *before* any work is done, so a bad value never reaches
numpy as NaN, an overflow or a MemoryError. Huge sizes are refused up front
through ``high``, with the limit named.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from shepherd.core.errors import UserError


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def number(option: str, value: float | int, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, what: str = "", allow_inf: bool = False) -> float | int:
    """``value`` if it is a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``).

    NaN is always refused; +infinity passes only with ``allow_inf`` (an option
    where ``inf`` means "no bound", e.g. ``--affinity-k``).
    """
    try:
        finite = math.isfinite(value) or (allow_inf and value == math.inf)
    except (TypeError, OverflowError):
        finite = False
    unit = f" {what}" if what else ""
    if not finite:
        raise UserError(f"{option} must be a finite number, got {value}")
    if low is not None and (value <= low if low_open else value < low):
        sign = ">" if low_open else "≥"
        raise UserError(f"{option} must be {sign} {_fmt(low)}{unit}, got {_fmt(value)}")
    if high is not None and value > high:
        raise UserError(f"{option} must be at most {_fmt(high)}{unit}, got {_fmt(value)}")
    return value


def positive(option: str, value: float | int, high: float | None = None, what: str = "") -> float | int:
    """A finite number > 0 (and ≤ ``high``)."""
    return number(option, value, low=0, low_open=True, high=high, what=what)


def count(option: str, value: int, low: int = 1, high: int | None = None) -> int:
    """A whole number in ``[low, high]``."""
    try:
        whole = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        whole = None
    if whole is None:
        raise UserError(f"{option} must be a whole number, got {value}")
    return int(number(option, whole, low=low, high=high))


def seed(value: int) -> int:
    """A seed for ``numpy.random.default_rng``: a whole number ≥ 0."""
    try:
        whole = operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        whole = None
    if whole is None:
        raise UserError(f"--seed must be a whole number ≥ 0, got {value}")
    if whole < 0:
        raise UserError(f"--seed must be ≥ 0, got {whole}")
    return int(whole)


def text(option: str, value: str) -> str:
    """Text that is valid UTF-8 (command-line bytes that are not arrive as surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = value.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace")
        raise UserError(f"{option} is not valid UTF-8 text: {shown}") from None
    return value
