"""``shepherd data fetch ppipe``: third-party research data the toolkit reads but may not package (thin CLI)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shepherd.cli.common import progress, summary_table
from shepherd.core.errors import UserError

app = typer.Typer(help="Third-party data the toolkit cannot package (no licence to redistribute).\n\n"
                       "Example: shepherd data fetch ppipe", no_args_is_help=True)

DATASETS = ("ppipe",)


@app.command("fetch")
def fetch_cmd(
    name: Annotated[str, typer.Argument(help="ppipe: the PPipe authors' profiling data (GitHub JonnyKong/PPipe, pinned commit).")],
    archive: Annotated[Optional[Path], typer.Option("--from", help="Install from this downloaded copy of the repository archive (.tar.gz or .zip) instead of downloading.")] = None,
    url: Annotated[Optional[str], typer.Option("--url", help="Download from this mirror instead of GitHub.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Install again even if the data is present.")] = False,
) -> None:
    """Download the PPipe authors' repository at a pinned commit, keep the data files the toolkit reads, check them, install them.

    Into $SHEPHERD_DATA/ppipe (default ~/.cache/shepherd/ppipe), where `reproduce ppipe`, `plan --planner ppipe`
    and the tests find it. The download is cached and resumes when run again; the extracted files must match the
    pinned content SHA-256, else nothing is installed. The authors state no licence: the data is theirs, not ours
    to redistribute.

    Example: shepherd data fetch ppipe

    Example (offline, an archive downloaded elsewhere): shepherd data fetch ppipe --from PPipe-03cd8df….tar.gz
    """
    from shepherd.core import ppipe_data
    from shepherd.core.download import check_url

    if name not in DATASETS:
        raise UserError(f"unknown dataset '{name}' (known: {', '.join(DATASETS)}; the MAF traces: `shepherd traces fetch`)")
    if url is not None:
        check_url(url)  # before the progress bar: a bad URL is one line, nothing drawn
    if archive is not None and url is not None:
        raise UserError("give --from ARCHIVE or --url URL, not both")
    with progress() as bar:
        task = bar.add_task(f"downloading {ppipe_data.ARCHIVE}" if archive is None else f"reading {archive.name}",
                            total=None)
        result = ppipe_data.fetch(archive, url, force,
                                  on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    summary_table("data fetch ppipe", {"path": result.path, "status": result.status,
                                       "commit": ppipe_data.COMMIT, "files": result.files,
                                       "content sha256": f"{result.sha256} (pinned, verified)"})
