"""``shepherd sweep CONFIG.toml``: a researcher's own grid on the reproduce runner (thin: parse, call, print)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli import seeds as seed_opts
from shepherd.cli.common import summary_table
from shepherd.cli.grid_run import ADDRESS_HELP, JOBS_HELP, default_jobs, dry_run_table, ray_address, run_grid
from shepherd.core.errors import UserError

SWEEPS = Path("results/sweeps")


def sweep(
    config: Annotated[Optional[Path], typer.Argument(help="Sweep config (TOML; see examples/*.toml and --schema).")] = None,
    overrides: Annotated[Optional[List[str]], typer.Option("--set", help="Override a config key: key=value, dotted keys and TOML values (e.g. --set cluster.gpus=64 --set 'grid.load=[1,2]'). Repeatable.")] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", "-o", help="Results folder (default: results/sweeps/<name>).")] = None,
    results: Annotated[Optional[Path], typer.Option("--results", hidden=True, help="Deprecated: -o/--out.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help=seed_opts.SEED_HELP + " Replaces the config's seeds.")] = None,
    replicas: Annotated[Optional[int], typer.Option("--replicas", help=seed_opts.REPLICAS_HELP)] = None,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help=seed_opts.SEEDS_HELP)] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help=JOBS_HELP)] = None,
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    ray_addr: Annotated[Optional[str], typer.Option("--ray-address", help=ADDRESS_HELP)] = None,
    address: Annotated[Optional[str], typer.Option("--address", hidden=True, help="Deprecated: --ray-address.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check the whole config (policies, options, files, the trace's models against the profiles) and print the grid, one row per cell; write nothing.")] = False,
    schema: Annotated[bool, typer.Option("--schema", help="Print the config's JSON schema (for editors) and exit.")] = False,
) -> None:
    """Expand CONFIG's grid into cells and run each (skipping finished ones); write one tidy results table.

    Seeds are replicas: a named trace is rebuilt per seed; over a trace FILE set
    trace.redraw_window_s = 60 (each seed re-draws every arrival uniformly within its
    stream's minute, keeping per-minute counts, models and SLOs) — a seed axis over a
    file without it is refused.

    Examples:
      shepherd sweep examples/flex-vs-baselines.toml --replicas 3 --dry-run
      shepherd sweep --schema > sweep.schema.json
    """
    from shepherd.experiments import sweep as sw

    if schema:
        from shepherd.experiments.sweep_config import json_schema

        typer.echo(json.dumps(json_schema(), indent=2))
        return
    if config is None:
        raise UserError("give a sweep config (CONFIG.toml), or --schema")
    from shepherd.cli.deprecated import renamed

    results = renamed(out_dir, results, "-o/--out", "--results")
    workers = default_jobs(jobs)
    address = ray_address(ray_addr, address)
    chosen = seed_opts.seed_list(seed, replicas, seeds)
    sets = list(overrides or []) + ([f"grid.seed={chosen}"] if chosen is not None else [])
    cfg = sw.read_config(config, sets)
    grid = sw.cells(cfg)  # every check a run would make, before anything is written
    out = results if results is not None else SWEEPS / cfg.name
    if dry_run:
        dry_run_table(f"sweep {cfg.name}", [sw.flat_params(c) for c in grid], [c.key() for c in grid], out)
        return
    resolved = cfg.resolved()
    meta = {"config": resolved, "source": str(Path(config).resolve()), "overrides": sets, "swept": sw.swept(cfg)}
    done = run_grid("sweep", cfg.name, grid, out, meta, lambda: sw.table(cfg, grid, out),
                    ["shepherd", "sweep", str(config), *[f"--set={o}" for o in sets]], executor, workers, address,
                    sw.CONFIG_NAME, sw.LOG_NAME, {"sweep": True, "swept": sw.swept(cfg)}, resolved)
    summary_table(f"sweep {cfg.name}", {"cells": done.stats.total, "ran": done.stats.ran, "cached": done.stats.skipped,
                                        "results": done.results, "next": f"shepherd report {out}"})
