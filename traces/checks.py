"""One validator for every value the ``traces`` commands and named traces accept.

Each check raises :class:`~shepherd.core.errors.UserError` (one line, exit 2)
naming the option, the value and the allowed range, *before* any work is done,
so a bad value never reaches numpy as NaN, an overflow or a MemoryError.
The CLI (:mod:`shepherd.cli.traces`), :class:`~shepherd.traces.registry.TraceOptions`
and :class:`~shepherd.traces.synthetic.SyntheticSpec` all call these
functions; there are no private copies of the rules.

Size limits (documented choices). Huge sizes are refused up front, with the
limit named in the message, rather than attempted:

* :data:`MAX_REQUESTS` — requests one trace may hold. A trace frame costs
  about 40 bytes a request, and building one about three times that at its
  peak; 300 million covers a full day at the Shepherd §7.1 load of ~3k req/s
  (259 million) and keeps the peak near 40 GB.
* :data:`MAX_STREAMS` — synthetic streams (each is drawn in its own loop step).
* :data:`MAX_COUNT_CELLS` — functions × minutes of per-minute counts
  ``maf-synthetic`` draws (8 bytes each, a few temporaries): ~3 GB.
* :data:`MAX_DURATION_S` / :data:`MAX_DAYS` — two weeks, the length of the
  MAF 2019 and 2021 traces.
* SLOs up to a day; MMPP sojourns of at least 1 ms (shorter ones mean
  millions of state changes a minute); gamma CVs in [0.001, 100].
"""

from __future__ import annotations

import math
import operator
from pathlib import Path
from typing import Any

from shepherd.core.errors import UserError

MAX_REQUESTS = 300_000_000
MAX_STREAMS = 1_000_000
MAX_FUNCTIONS = 1_000_000
MAX_COUNT_CELLS = 100_000_000
MAX_DAYS = 14
MINUTES_PER_DAY = 1440
MAX_DURATION_S = MAX_DAYS * 86_400.0
MAX_DURATION_MIN = MAX_DAYS * MINUTES_PER_DAY
MAX_SLO_MS = 86_400_000.0
MIN_DWELL_S = 1e-3
MIN_WINDOW_MS = 1e-3  # windows are whole microseconds
MAX_CV = 100.0
MIN_CV = 1e-3


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def number(option: str, value: float | int, *, low: float | None = None, high: float | None = None,
           low_open: bool = False, what: str = "") -> float | int:
    """``value`` if it is a finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""
    try:
        finite = math.isfinite(value)
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


def out_file(path: Path, option: str = "-o/--out") -> Path:
    """An output file path: not an existing directory, under a directory (or a path that can become one)."""
    path = Path(path)
    text(option, str(path))
    if path.is_dir():
        raise UserError(f"{option} names a directory, not a file: {path} (give e.g. {path / 'trace.parquet'})")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{option}: {parent} is a file, so {path} cannot be created")
            break
    return path


def requests(expected: float, what: str, fix: str) -> None:
    """Refuse a trace expected to hold more than :data:`MAX_REQUESTS` requests."""
    if not math.isfinite(expected) or expected > MAX_REQUESTS:
        shown = f"{expected:.3g}" if math.isfinite(expected) else str(expected)
        raise UserError(f"{what} would hold about {shown} requests, over the limit of "
                        f"{MAX_REQUESTS:,} requests per trace: {fix}")


def complete_rows(path: Path, fields: int, what: str) -> None:
    """Every non-empty line of the CSV file ``path`` has exactly ``fields`` fields.

    Catches a file cut mid-row (a download or copy stopped early): the CSV
    reader would read its missing fields as blanks, i.e. silently as zero
    invocations. Fields are counted by their separating commas (the MAF files
    quote no commas), with one pass over the file's lines.
    """
    import polars as pl  # local: keep this module light for the CLI's option checks

    lines = pl.scan_csv(path, has_header=False, separator="\x1f", quote_char=None,
                        schema={"line": pl.String}, encoding="utf8-lossy")
    try:
        bad = (lines.with_row_index("row")
               .filter(pl.col("line").str.strip_chars("\r").str.len_bytes() > 0)
               .with_columns(pl.col("line").str.count_matches(",", literal=True).alias("commas"))
               .filter(pl.col("commas") != fields - 1)
               .select("row", "commas").head(1).collect())
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"{path.name}: cannot read the {what} file ({str(exc).strip().splitlines()[0]})") from None
    if bad.height:
        row, commas = bad.row(0)
        raise UserError(f"{path.name}: line {row + 1} has {commas + 1} fields, the header has {fields}: "
                        f"the {what} file is cut mid-row or malformed (download or copy it again)")
