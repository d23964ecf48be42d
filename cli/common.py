"""Conventions shared by every subcommand (DESIGN.md "CLI surface").

* ``-o/--out`` and ``--seed`` options with the same names everywhere;
* progress bars on stderr for anything that may take over a second;
* a rich summary table on stdout on success;
* user errors raise :class:`~shepherd.core.errors.UserError`; the entry point
  (``shepherd.cli.app.main``) prints them as one line and exits 2.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator, Mapping

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

console = Console()
err_console = Console(stderr=True)

SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the one random generator every draw flows from.")]


@contextmanager
def progress(transient: bool = True) -> Iterator[Progress]:
    """A rich progress bar on stderr (kept off stdout so output stays parseable)."""
    bar = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=transient,
    )
    with bar:
        yield bar


def summary_table(title: str, rows: Mapping[str, Any]) -> None:
    """Print a two-column rich summary table (what was done, where it went)."""
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in rows.items():
        table.add_row(str(key), _fmt(value))
    console.print(table)


def frame_table(title: str, frame: Any, float_digits: int = 3) -> None:
    """Print a polars DataFrame as a rich table."""
    table = Table(title=title, title_justify="left")
    for col in frame.columns:
        table.add_column(col, justify="right" if frame.schema[col].is_numeric() else "left")
    for row in frame.iter_rows():
        table.add_row(*[_fmt(v, float_digits) for v in row])
    console.print(table)


def _fmt(value: Any, float_digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{float_digits}f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, Path):
        return str(value)
    return str(value)
