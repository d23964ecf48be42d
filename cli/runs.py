"""``shepherd runs list|show``: find past sweeps and simulate outputs (thin: parse, call, print)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from shepherd.cli.common import console, frame_table
from shepherd.cli.deprecated import renamed

app = typer.Typer(help="Find past runs: sweeps and simulate outputs under a results folder.\n\nExample: shepherd runs list", no_args_is_help=True)

ROOT = Path("results")


@app.command("list")
def list_cmd(
    root: Annotated[Path, typer.Option("--results", help="Results folder to search.")] = ROOT,
    old: Annotated[Optional[Path], typer.Option("-o", hidden=True, help="Deprecated: --results (-o names outputs).")] = None,
) -> None:
    """List sweeps and simulate outputs: kind, name, when, size, where, what ran (newest first).

    Example: shepherd runs list --results results
    """
    from shepherd.experiments.runs import find_runs

    root = renamed(root, old, "--results", "-o", default=ROOT)

    frame = find_runs(root)
    frame_table(f"runs under {root}: {frame.height}", frame)


@app.command("show")
def show_cmd(
    run: Annotated[str, typer.Argument(help="A run's folder, or its name as `runs list` prints it.")],
    root: Annotated[Path, typer.Option("--results", help="Results folder to search for a name.")] = ROOT,
    old: Annotated[Optional[Path], typer.Option("-o", hidden=True, help="Deprecated: --results (-o names outputs).")] = None,
) -> None:
    """Show one run: its resolved config (and provenance) and its results table.

    Example: shepherd runs show flex-vs-baselines
    """
    from shepherd.experiments.runs import describe_run, resolve_run

    root = renamed(root, old, "--results", "-o", default=ROOT)

    folder = resolve_run(run, root)
    meta, table = describe_run(folder)
    console.print(f"run {folder}")
    typer.echo(json.dumps(meta, indent=2, default=str))
    if table is not None:
        keep = [c for c in ("policy", "trace", "load", "slo_ms", "seed", "cluster", "slo_attainment", "goodput_rps",
                            "p99_latency_ms", "utilization") if c in table.columns]
        frame_table(f"results ({table.height} rows)", table.select(keep))
