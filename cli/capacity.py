"""``shepherd capacity``: the highest load at which a target holds, over a grid (thin: parse, call, print)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, List, Optional

import typer

from shepherd.cli import complete
from shepherd.cli import seeds as seed_opts
from shepherd.cli.common import frame_table, summary_table
from shepherd.cli.grid_run import ADDRESS_HELP, JOBS_HELP, default_jobs, dry_run_table, ray_address, run_grid, warn
from shepherd.core.errors import UserError

CAPACITY_DIR = Path("results/capacity")
TARGET_HELP = ("attainment=X (every model's SLO attainment ≥ X; PPipe §7.2's max load factor) | goodput=Y "
               "(per-request: good ≥ Y × offered, all models together) | p99-slo (every model's p99 ≤ its SLO; "
               "Symphony §2.1's goodput). Repeatable.")
FLAG_PANEL = "Without CONFIG (or overriding it)"


def capacity(
    config: Annotated[Optional[Path], typer.Argument(help="A sweep config with a \\[capacity] table (see examples/own-study.toml); or give --trace and --policy.")] = None,
    trace: Annotated[Optional[str], typer.Option("--trace", autocompletion=complete.trace_names, help="Trace artifact path or a named trace (rebuilt per seed; options with --set trace.KEY=V).", rich_help_panel=FLAG_PANEL)] = None,
    policy: Annotated[Optional[List[str]], typer.Option("--policy", help="Online policy; repeatable or comma-separated (a line per policy).", rich_help_panel=FLAG_PANEL)] = None,
    target: Annotated[Optional[List[str]], typer.Option("--target", help=TARGET_HELP)] = None,
    profiles: Annotated[Optional[str], typer.Option("--profiles", help="Profiles artifact or built-in table (default: shepherd-v100).", rich_help_panel=FLAG_PANEL)] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, help="Number of identical workers, one serving group.", rich_help_panel=FLAG_PANEL)] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Plan artifact: serving groups.", rich_help_panel=FLAG_PANEL)] = None,
    slo_ms: Annotated[Optional[float], typer.Option("--slo-ms", help="Override every request's SLO, ms.", rich_help_panel=FLAG_PANEL)] = None,
    max_batch: Annotated[Optional[int], typer.Option("--max-batch", min=1, help="Largest batch (default: Shepherd §5.2's 128).", rich_help_panel=FLAG_PANEL)] = None,
    grid: Annotated[Optional[List[str]], typer.Option("--grid", help="A grid axis: AXIS=V1,V2,… (slo_ms, gpus, max_batch, profiles, trace.KEY, policy.KEY …; not load). Repeatable.")] = None,
    overrides: Annotated[Optional[List[str]], typer.Option("--set", help="A config key=value (as in `sweep --set`: trace.duration_min=1, capacity.probes=5), or a bare policy option (lam=2) for every listed policy that has it. Repeatable.")] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help=seed_opts.SEED_HELP)] = None,
    replicas: Annotated[Optional[int], typer.Option("--replicas", help=seed_opts.REPLICAS_HELP)] = None,
    seeds: Annotated[Optional[str], typer.Option("--seeds", help=seed_opts.SEEDS_HELP)] = None,
    start: Annotated[Optional[float], typer.Option("--start", help="First load tried (× the trace's native rate; default 1).")] = None,
    rel_tol: Annotated[Optional[float], typer.Option("--rel-tol", help="Stop when the bracket's hi/lo − 1 is below this (default 0.01).")] = None,
    max_load: Annotated[Optional[float], typer.Option("--max-load", help="Highest load searched (default 1e4).")] = None,
    probes: Annotated[Optional[int], typer.Option("--probes", help="Loads below the capacity re-checked for monotonicity (default 3).")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="The results folder's name (default: the config's name, or 'capacity').")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Results folder (default: results/capacity/<name>).")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help=JOBS_HELP)] = None,
    executor: Annotated[str, typer.Option("--executor", help="local | ray")] = "local",
    ray_addr: Annotated[Optional[str], typer.Option("--ray-address", help=ADDRESS_HELP)] = None,
    address: Annotated[Optional[str], typer.Option("--address", hidden=True, help="Deprecated: --ray-address.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Check everything and print the grid; write nothing.")] = False,
) -> None:
    """Find, per policy, grid point and seed, the highest load (× the trace's native rate) at which TARGET holds.

    Each search brackets the capacity by doubling/halving, bisects to --rel-tol,
    then re-checks --probes lower loads: a target that fails below a load where it
    held is reported as not monotone. The table names the binding model (the one
    that fails first above the capacity) and its attainment at the capacity.
    Searches are cached cells (a rerun or a longer grid reuses them), recorded in
    `shepherd runs list`, with a figure and REPORT.md in the results folder.

    Seeds are replicas: a named trace is rebuilt per seed; a trace FILE needs
    --set trace.redraw_window_s=60 (arrivals re-drawn within each stream's minute).

    Examples:
      shepherd capacity --trace maf-synthetic --set trace.duration_min=1 --policy flex,clockwork --gpus 8 --grid slo_ms=50,100,200 --replicas 3
      shepherd capacity examples/own-study.toml
    """
    from shepherd.experiments import capacity_sweep as cs
    from shepherd.experiments import sweep_config

    workers = default_jobs(jobs)
    address = ray_address(ray_addr, address)
    chosen = seed_opts.seed_list(seed, replicas, seeds)
    data, base_dir, source = _data(config, trace, policy, profiles, gpus, plan, slo_ms, max_batch, name)
    _apply(data, target, grid, overrides or [], chosen, {"start": start, "rel_tol": rel_tol,
                                                          "max_load": max_load, "probes": probes})
    cfg = sweep_config.parse(data, base_dir, default_name=name or (config.stem if config else "capacity"))
    cells = cs.cells(cfg)  # every check a run would make, before anything is written
    folder = out if out is not None else CAPACITY_DIR / cfg.name
    if dry_run:
        from shepherd.experiments.sweep import flat_params

        dry_run_table(f"capacity {cfg.name}", [flat_params(c) for c in cells], [c.key() for c in cells], folder)
        return
    resolved, swept = cfg.resolved(), cs.swept(cfg)
    meta = {"kind": "capacity", "config": resolved, "source": source, "swept": swept}
    done = run_grid("capacity", cfg.name, cells, folder, meta, lambda: cs.table(cells, folder),
                    ["shepherd", "capacity", *(str(a) for a in ([config] if config else []))], executor, workers,
                    address, cs.MARKER, cs.LOG_NAME, {"capacity": True, "swept": swept}, resolved)
    _print(done.frame, swept, folder, cfg.name, done)


def _data(config: Optional[Path], trace: Optional[str], policy: Optional[List[str]], profiles: Optional[str],
          gpus: Optional[int], plan: Optional[Path], slo_ms: Optional[float], max_batch: Optional[int],
          name: Optional[str]) -> tuple[dict, Path, Optional[str]]:
    """The config as TOML data: read from CONFIG, or built from the flags (which also override CONFIG)."""
    import tomllib

    if config is not None:
        if not config.is_file():
            raise UserError(f"capacity config {config} is a folder, not a TOML file" if config.is_dir()
                            else f"capacity config {config} not found")
        try:
            data = tomllib.loads(config.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"capacity config {config} is not valid TOML: {str(exc).splitlines()[0]}") from None
        base_dir, source = config.parent, str(config.resolve())
        data.setdefault("capacity", {})
    else:
        if trace is None or not policy:
            raise UserError("give a config (CONFIG.toml with a [capacity] table), or --trace and --policy")
        if (gpus is None) == (plan is None):
            raise UserError("give --gpus N or --plan P (one of them)")
        data, base_dir, source = {"capacity": {}}, Path("."), None
    if trace is not None:
        data["trace"] = {"path": str(Path(trace).resolve())} if Path(trace).is_file() else {"name": trace}
    if policy:
        data["policies"] = [p.strip() for item in policy for p in item.split(",") if p.strip()]
    if profiles is not None:
        data["profiles"] = str(Path(profiles).resolve()) if Path(profiles).is_file() else profiles
    if gpus is not None or plan is not None:
        data["cluster"] = {"gpus": gpus} if gpus is not None else {"plan": str(plan.resolve())}
    run = data.setdefault("run", {})
    for key, value in (("slo_ms", slo_ms), ("max_batch", max_batch)):
        if value is not None:
            run[key] = value
    if name is not None:
        data["name"] = name
    return data, base_dir, source


def _apply(data: dict, targets: Optional[List[str]], grid: Optional[List[str]], overrides: list[str],
           chosen: Optional[list[int]], search: dict) -> None:
    """Flags onto the config data: targets, grid axes, --set keys, seeds and the search settings."""
    from shepherd.experiments.sweep_config import _override

    cap = data["capacity"] if isinstance(data.get("capacity"), dict) else data.setdefault("capacity", {})
    if targets:
        cap["target"] = list(targets)
    for item in grid or []:
        axis, sep, values = item.partition("=")
        if not sep or not axis.strip() or not values.strip():
            raise UserError(f"--grid expects AXIS=V1,V2,…, got '{item}'")
        _override(data, f"capacity.grid.{axis.strip()}=[{_toml_values(values)}]")
    sections = ("name", "trace", "profiles", "cluster", "policies", "run", "grid", "capacity")
    for item in overrides:
        key = item.partition("=")[0].strip()
        if key.split(".")[0] in sections:
            _override(data, item)
        else:
            _policy_option(data, item)
    if chosen is not None:
        cap.setdefault("grid", {})["seed"] = chosen
    for key, value in search.items():
        if value is not None:
            cap[key] = value


def _toml_values(text: str) -> str:
    """``50,100`` → ``50,100``; ``flex,nexus`` → ``"flex","nexus"`` (bare words quoted)."""
    import tomllib

    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            tomllib.loads(f"v = {part}")
            out.append(part)
        except tomllib.TOMLDecodeError:
            out.append(json.dumps(part))
    return ",".join(out)


def _policy_option(data: dict, item: str) -> None:
    """A bare ``key=value``: an option of every listed policy that has it (the older `capacity --set`)."""
    import dataclasses

    from shepherd.core.policies import registry
    from shepherd.experiments.sweep_config import _override

    key = item.partition("=")[0].strip()
    policies = data.get("policies") or []
    entries = [p if isinstance(p, dict) else {"name": p} for p in policies]
    having = [e for e in entries if isinstance(e.get("name"), str)
              and key in {f.name for f in dataclasses.fields(registry.get(e["name"]).config_cls)}]
    if not having:
        raise UserError(f"--set {item}: not a config key, and no listed policy has option '{key}'")
    for entry in having:
        holder: dict = {}
        _override(holder, item)
        entry.setdefault("options", {}).update(holder)
    data["policies"] = entries


def _print(frame: Any, swept: list[str], folder: Path, name: str, done: Any) -> None:
    """The summary table, the warnings, the figure and REPORT.md."""
    import polars as pl

    from shepherd.experiments import capacity_report as rep
    from shepherd.experiments.capacity_sweep import MARKER
    from shepherd.experiments.confidence import fmt_interval

    if frame.height == 0:
        raise UserError(f"capacity {name}: no search finished")
    table = rep.summary(frame, swept)
    axes = rep.grid_columns(table)
    targets = table["target_spec"].unique(maintain_order=True).to_list()
    monotone = int(table["non_monotone"].sum()) == 0
    shown = table.select(
        *(["target_spec"] if len(targets) > 1 else []), "policy",
        *[pl.col(a).map_elements(lambda v: f"{v:g}" if isinstance(v, float) else str(v), return_dtype=pl.String)
          for a in axes],
        pl.Series("capacity", [fmt_interval(m, h, "capacity") for m, h in  # clipped at 0: `mean [low, high]`
                               zip(table["capacity"].to_list(), table["capacity_hw"].to_list())], pl.String),
        pl.col("capacity_rps").round(0).cast(pl.Int64).alias("req/s"),
        pl.format("{} {}", "binding_model", "binding_seeds").alias("binding (seeds)"),
        (pl.col("binding_attainment") * 100).round(2).alias("its %"),
        *([] if monotone else [pl.col("non_monotone").alias("¬mono")]))
    what = targets[0] if len(targets) == 1 else "per target"
    frame_table(f"capacity {name}, {what}: × native rate, mean ± 95 % over seeds; binding: the model that fails "
                f"first, its % its attainment at the capacity" + ("" if monotone else "; ¬mono: seeds not "
                                                                  "monotone in load (see the warnings)"), shown)
    for message in sorted(set(w for w in frame["warning"].to_list() if w)):
        warn(message)
    report, section = rep.write_report(folder, frame, swept, name, MARKER)
    summary_table(f"capacity {name}", {
        "searches": done.stats.total, "ran": done.stats.ran, "cached": done.stats.skipped,
        "simulations": int(frame["simulations"].sum()), "results": done.results,
        "figure": next((str(f) for f in section.figures if f.suffix == ".png"), "—"), "report": report})
