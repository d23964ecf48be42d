"""MAF 2019 reader: Azure Functions per-function, per-minute invocation counts.

The Azure Functions trace 2019 (Azure Public Dataset; Shahrad et al.,
"Serverless in the Wild", USENIX ATC '20) ships one file per day,
``invocations_per_function_md.anon.dNN.csv`` (NN = 01…14), with columns
``HashOwner, HashApp, HashFunction, Trigger`` and then one column per minute
of the day (``1`` … ``1440``) holding that function's invocation count in that
minute. Shepherd (§2.2, §7) and PPipe (§7.1) treat every function as one
request *stream*.

Reading rules (documented choices):

* The minute columns are taken **from the header**, never assumed to be
  1…1440: real subsets exist that carry only minutes 480…959. Every header
  minute must be an integer in 1…1440, strictly increasing; the four key
  columns must come first, spelled exactly as above — anything else is a
  "wrong header" :class:`UserError`.
* A blank count means no invocation was recorded: it reads as 0. A
  non-numeric or negative count is a :class:`UserError` naming the file, and
  so is a row with fewer or more fields than the header (a file cut mid-row
  would otherwise read its missing minutes as silent zeros).
* A requested window must lie inside the file's minutes: one that runs past
  the file's first or last minute is a :class:`UserError` saying what the file
  holds (never a shorter window silently divided by the requested length).
* A single file holds one day: its day is known from an official name
  (``…anon.dNN.csv``) and unknown otherwise (a sample's ``invocations.csv``);
  :mod:`shepherd.traces.registry` refuses a ``--day`` it cannot honour.
  Anything but official whole-day files is a *subset* (:func:`subset_of`),
  and traces built from it carry that note in their config and label.
* Only the selected minute columns are parsed (polars lazy scan with a
  declared schema and projection pushdown), so an 8-hour window of a 46k-row
  day costs a third of a full day.
* Several days: minutes are numbered on one absolute axis (minute 0 = 00:00
  of day 1); functions are aligned across days by (HashOwner, HashApp,
  HashFunction), missing days count as 0 and duplicate keys are summed.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.traces import checks

KEY_COLUMNS = ("HashOwner", "HashApp", "HashFunction", "Trigger")
HASH_COLUMNS = KEY_COLUMNS[:3]
MINUTES_PER_DAY = 1440
DAYS = 14
DAY_FILE = "invocations_per_function_md.anon.d{day:02d}.csv"
_DAY_NAME = re.compile(r"invocations_per_function_md\.anon\.d(\d\d)\.csv")


@dataclass
class MafCounts:
    """Invocation counts of F functions over M minutes.

    ``minutes`` are absolute 0-based minute numbers (0 = 00:00 of the first day
    of the dataset); ``counts[f, j]`` is function f's count in minute
    ``minutes[j]``. ``keys`` has one row per function (the four key columns).
    """

    keys: pl.DataFrame
    minutes: np.ndarray
    counts: np.ndarray
    source: str
    inputs: list[Path] = field(default_factory=list)
    synthetic: bool = False

    @property
    def functions(self) -> int:
        return int(self.counts.shape[0])

    @property
    def window_s(self) -> float:
        """Length of the covered minutes in seconds (first to last minute, inclusive)."""
        if self.minutes.size == 0:
            return 0.0
        return float(self.minutes[-1] - self.minutes[0] + 1) * 60.0

    def take(self, rows: np.ndarray) -> "MafCounts":
        """The counts restricted to function rows ``rows`` (in that order)."""
        rows = np.asarray(rows, dtype=np.int64)
        keys = self.keys[rows.tolist()] if rows.size else self.keys.head(0)
        return MafCounts(keys, self.minutes, self.counts[rows], self.source, self.inputs, self.synthetic)


def day_file(root: Path, day: int) -> Path:
    """Path of day ``day``'s invocation file under ``root``."""
    return Path(root) / DAY_FILE.format(day=day)


def read_header(path: Path) -> list[int]:
    """Validate the header of a MAF 2019 invocation file; return its minute numbers (1-based)."""
    if not path.exists():
        raise UserError(f"MAF 2019 file not found: {path}")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{path.name}: cannot read the header ({exc})") from None
    header = [h.strip() for h in header]
    expected = ", ".join(KEY_COLUMNS)
    if tuple(header[:4]) != KEY_COLUMNS or len(header) < 5:
        got = ", ".join(header[:5]) or "an empty file"
        raise UserError(f"{path.name}: wrong header for a MAF 2019 invocation file: expected "
                        f"{expected}, then minute columns 1…1440; got {got}")
    minutes = []
    for name in header[4:]:
        if not name.isdigit() or not 1 <= int(name) <= MINUTES_PER_DAY:
            raise UserError(f"{path.name}: wrong header: minute column '{name}' is not an integer in 1…1440")
        minutes.append(int(name))
    if any(b <= a for a, b in zip(minutes, minutes[1:])):
        raise UserError(f"{path.name}: wrong header: minute columns are not strictly increasing")
    return minutes


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def file_day(path: Path) -> int | None:
    """The day a file holds when its name says so (``…anon.dNN.csv``), else None (e.g. a sample's
    ``invocations.csv``, whose day is not recorded)."""
    match = _DAY_NAME.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def read_day(path: Path, first: int | None = None, last: int | None = None) -> MafCounts:
    """Read one day file, keeping the header minutes in ``[first, last]`` (1-based, inclusive).

    The window must lie inside the file's minutes (documented choice): a
    window that runs past the file's first or last minute is a
    :class:`UserError` saying what the file has, never a silently shorter
    window whose rate would then be divided by the requested length.
    """
    path = Path(path)
    header_minutes = read_header(path)
    have_lo, have_hi = header_minutes[0], header_minutes[-1]
    lo = have_lo if first is None else first
    hi = have_hi if last is None else last
    chosen = [m for m in header_minutes if lo <= m <= hi]
    if not chosen:
        raise UserError(f"{path.name}: minutes {lo}–{hi} are not in the file "
                        f"(it has minutes {have_lo}–{have_hi})")
    if lo < have_lo or hi > have_hi:
        fit = have_hi - max(lo, have_lo) + 1
        raise UserError(f"{path.name}: the window of minutes {lo}–{hi} runs past the file, which has minutes "
                        f"{have_lo}–{have_hi}: use --start-minute ≥ {have_lo} and --duration-min ≤ {fit}")
    checks.complete_rows(path, len(KEY_COLUMNS) + len(header_minutes), "MAF 2019")
    schema = {k: pl.String for k in KEY_COLUMNS} | {str(m): pl.Int64 for m in header_minutes}
    names = [str(m) for m in chosen]
    try:
        frame = (
            pl.scan_csv(path, schema=schema, has_header=True, encoding="utf8-lossy")
            .select([*KEY_COLUMNS, *names])
            .collect()
        )
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"{path.name}: malformed MAF 2019 file — non-numeric invocation count or "
                        f"ragged row ({_first_line(exc)})") from None
    counts = frame.select(pl.col(names).fill_null(0)).to_numpy()
    counts = np.ascontiguousarray(counts, dtype=np.int64).reshape(frame.height, len(names))
    if counts.size and counts.min() < 0:
        raise UserError(f"{path.name}: negative invocation count")
    keys = frame.select([pl.col(k).fill_null("") for k in KEY_COLUMNS])
    minutes = np.asarray(chosen, dtype=np.int64) - 1
    return MafCounts(keys, minutes, counts, path.name, [path])


def read_window(root: Path, day: int = 1, start_minute: int | None = None,
                duration_min: int | None = None) -> MafCounts:
    """Counts from ``root``'s day files over ``duration_min`` minutes from ``start_minute`` of ``day``.

    ``start_minute`` is 1-based within ``day`` (default: the first minute of that
    day's header); the window may run into later days. Without
    ``duration_min`` the window ends with ``day``.
    """
    if not 1 <= day <= DAYS:
        raise UserError(f"MAF 2019 day must be in 1…{DAYS}, got {day}")
    if start_minute is not None and not 1 <= start_minute <= MINUTES_PER_DAY:
        raise UserError(f"start minute must be in 1…{MINUTES_PER_DAY}, got {start_minute}")
    if duration_min is not None and duration_min < 1:
        raise UserError(f"duration must be at least one minute, got {duration_min}")
    if start_minute is None:
        start_minute = read_header(day_file(root, day))[0]
    if duration_min is None:  # to the end of the day file's minutes
        part = read_day(day_file(root, day), start_minute, None)
        part.minutes = part.minutes + (day - 1) * MINUTES_PER_DAY
        return part
    begin = (day - 1) * MINUTES_PER_DAY + start_minute - 1  # absolute, 0-based
    end = begin + duration_min
    last_day = (end - 1) // MINUTES_PER_DAY + 1
    if last_day > DAYS:
        raise UserError(f"the window runs past day {DAYS} of MAF 2019")
    parts = []
    for d in range(day, last_day + 1):
        base = (d - 1) * MINUTES_PER_DAY
        first = max(begin - base, 0) + 1
        last = min(end - base, MINUTES_PER_DAY)
        part = read_day(day_file(root, d), first, last)
        part.minutes = part.minutes + base
        parts.append(part)
    return parts[0] if len(parts) == 1 else merge_days(parts)


def subset_of(path: Path) -> str | None:
    """How a MAF 2019 dataset at ``path`` falls short of the full trace, or None when it is whole.

    Documented rule: official day files (``…anon.dNN.csv``) whose minute
    columns cover the whole day are the real trace (a directory of them, or
    one of them); any other invocation file — e.g. the vHive sample's
    ``invocations.csv`` — is a subset chosen by someone else, and every
    trace built from it says so (``"100 functions, minutes 480–959
    of invocations.csv"``).
    """
    path = Path(path)
    if path.is_dir():
        return None
    minutes = read_header(path)
    if file_day(path) is not None and minutes[0] == 1 and minutes[-1] == MINUTES_PER_DAY:
        return None
    try:
        rows = pl.scan_csv(path, has_header=True, infer_schema=False).select(pl.len()).collect().item()
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"{path.name}: cannot read the MAF 2019 file ({_first_line(exc)})") from None
    return f"{rows:,} functions, minutes {minutes[0]}–{minutes[-1]} of {path.name}"


def merge_days(parts: list[MafCounts]) -> MafCounts:
    """Align several days' counts on the function key (missing = 0, duplicates summed)."""
    keys = pl.concat([p.keys for p in parts]).unique(subset=list(HASH_COLUMNS), keep="first", maintain_order=True)
    index = keys.select(HASH_COLUMNS).with_row_index("g")
    minutes = np.concatenate([p.minutes for p in parts])
    counts = np.zeros((keys.height, minutes.size), dtype=np.int64)
    col = 0
    for p in parts:
        rows = p.keys.select(HASH_COLUMNS).join(index, on=list(HASH_COLUMNS), how="left",
                                                maintain_order="left")["g"].to_numpy().astype(np.int64)
        block = counts[:, col:col + p.minutes.size]
        np.add.at(block, rows, p.counts)
        col += p.minutes.size
    inputs = [i for p in parts for i in p.inputs]
    return MafCounts(keys, minutes, counts, "+".join(p.source for p in parts), inputs, parts[0].synthetic)


def select_functions(data: MafCounts, top: int | None = None, sample: int | None = None,
                     rng: np.random.Generator | None = None, drop_silent: bool = True) -> MafCounts:
    """Choose the streams: drop silent functions, then the ``top`` busiest or a uniform ``sample``.

    Top-N orders by total invocations in the window, descending (ties keep file
    order); a sample keeps file order. Asking for more functions than there
    are keeps them all.
    """
    if top is not None and sample is not None:
        raise UserError("give a top-N or a sample size, not both")
    for name, n in (("top", top), ("sample", sample)):
        if n is not None and n < 1:
            raise UserError(f"number of streams ({name}) must be ≥ 1, got {n}")
    totals = data.counts.sum(axis=1)
    rows = np.flatnonzero(totals > 0) if drop_silent else np.arange(data.functions)
    if top is not None and top < rows.size:
        order = np.argsort(-totals[rows], kind="stable")
        rows = rows[order[:top]]
    elif sample is not None and sample < rows.size:
        if rng is None:
            raise UserError("sampling functions needs a seeded random generator")
        rows = np.sort(rng.choice(rows, size=sample, replace=False))
    return data.take(rows)
