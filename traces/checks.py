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
from pathlib import Path

from shepherd.core.checks import count, number, positive, seed, text  # noqa: F401 - the generic checks, re-exported
from shepherd.core.errors import UserError
from shepherd.core.outputs import check_output_file

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


def out_file(path: Path, option: str = "-o/--out") -> Path:
    """An output file path: valid text, not an existing directory, under a directory (or a path that can become one)."""
    text(option, str(path))
    return check_output_file(path, option)


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
