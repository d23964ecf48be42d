"""``shepherd profile``: model latency profiles as a Parquet artifact."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from shepherd.core import bounds, defaults
from shepherd.core.errors import UserError

# polars, the profiles and the artifacts are imported inside the functions: `--help` stays fast
if TYPE_CHECKING:
    import polars as pl

app = typer.Typer(
    help=(
        "Build a profiles artifact: a built-in paper table (--table) or a least-squares fit of "
        "measured latencies (--from).\n\n"
        "Examples:\n\n"
        "  shepherd profile --table shepherd-v100 -o profiles.parquet\n\n"
        "  shepherd profile --from measured.csv -o profiles.parquet\n\n"
        "  shepherd profile --from-ppipe ../shared/data/ppipe -o blocks.parquet\n\n"
        "  shepherd profile list\n\n"
        "  shepherd profile show profiles.parquet"
    ),
    invoke_without_command=True,
    no_args_is_help=False,
)


@app.callback()
def build(
    ctx: typer.Context,
    table: Annotated[Optional[str], typer.Option("--table", help="Built-in table (see `shepherd profile list`).")] = None,
    from_file: Annotated[
        Optional[Path],
        typer.Option("--from", help="Measured latencies, CSV or Parquet with columns model, hardware, batch, latency_ms."),
    ] = None,
    from_ppipe: Annotated[
        Optional[Path],
        typer.Option("--from-ppipe", help="PPipe authors' data folder: per-block latencies → a block_profiles artifact."),
    ] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the profiles artifact.")] = Path("profiles.parquet"),
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, max=bounds.MAX_BATCH, help="Largest batch size expanded from α/β tables.")] = defaults.DEFAULT_MAX_BATCH,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Recorded in provenance (profiles draw no randomness).")] = 0,
    measure: Annotated[Optional[list[str]], typer.Option("--measure", help="Time real PyTorch models here: VGG16, ResNet50, ResNet152 or package.module:factory (repeatable or comma-separated; extra 'torch').")] = None,
    device: Annotated[str, typer.Option("--device", help="--measure: cpu | cuda.")] = "cpu",
    per_layer: Annotated[bool, typer.Option("--per-layer", help="--measure: per-layer latencies (kind layer_profiles) instead of a whole-model α, β fit.")] = False,
    threads: Annotated[Optional[int], typer.Option("--threads", help="--measure: torch CPU threads.")] = None,
    batch: Annotated[Optional[str], typer.Option("--batch", help="--measure: batch sizes, e.g. 1,2,4,8.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="--measure: timed runs per point (median, IQR).")] = 5,
    warmup: Annotated[int, typer.Option("--warmup", help="--measure: untimed runs first.")] = 2,
) -> None:
    """Write a profiles artifact (one row per model × hardware × batch, with α, β, R²)."""
    if ctx.invoked_subcommand is not None:
        return
    from shepherd.cli.common import summary_table
    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import make_provenance, write_artifact

    if measure:
        if table is not None or from_file is not None or from_ppipe is not None:
            raise UserError("--measure cannot be combined with --table, --from or --from-ppipe")
        _measure([m for arg in measure for m in arg.split(",") if m], device, per_layer, threads, batch,
                 repeats, warmup, out, seed)
        return
    if from_ppipe is not None:
        if table is not None or from_file is not None:
            raise UserError("--from-ppipe cannot be combined with --table or --from")
        _from_ppipe(from_ppipe, out, seed)
        return
    if (table is None) == (from_file is None):
        raise UserError("give exactly one of --table NAME or --from FILE (see `shepherd profile --help`)")
    inputs: list[Path] = []
    if table == "accordion-layers":  # per-layer built-in (Accordion §4.1): a layer_profiles artifact
        from shepherd.core.accordion.configs import builtin_layers

        write_artifact(builtin_layers(), out, "layer_profiles", make_provenance({"table": table}, seed, []))
        summary_table("profile", {"source": table, "kind": "layer_profiles", "written": out})
        return
    if table is not None:
        frame = prof.load_builtin(table, max_batch=max_batch)
    else:
        assert from_file is not None
        measured = prof.read_measurements(from_file)
        frame = prof.fit_measurements(measured, source=f"measured:{from_file.name}")
        inputs.append(from_file)
    config = {"table": table, "from": str(from_file) if from_file else None, "max_batch": max_batch}
    write_artifact(frame, out, "profiles", make_provenance(config, seed, inputs))
    _print_fits(frame, title=f"profiles → {out}")
    summary_table("profile", {
        "source": table or str(from_file),
        "models": frame["model"].n_unique(),
        "hardware": ", ".join(sorted(frame["hardware"].unique().to_list())),
        "rows": frame.height,
        "written": out,
    })


def _measure(models: list[str], device: str, per_layer: bool, threads: Optional[int], batch: Optional[str],
             repeats: int, warmup: int, out: Path, seed: int) -> None:
    from shepherd.cli.common import summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.core.measure.artifact import measure, parse_batches

    batches = parse_batches(batch)
    kind, frame, env = measure(models, device, per_layer, threads, batches, warmup, repeats)
    config = {"measure": models, "per_layer": per_layer, "batches": batches, "repeats": repeats,
              "warmup": warmup, "environment": env}
    write_artifact(frame, out, kind, make_provenance(config, seed, []))
    if kind == "profiles":
        _print_fits(frame, title=f"measured on {env['cpu'] if device == 'cpu' else env.get('gpu')} → {out}")
    summary_table("profile --measure", {"kind": kind, "models": ", ".join(models), "device": device,
                                        "threads": env["threads"], "torch": env["torch"], "rows": frame.height,
                                        "written": out})


@app.command("list")
def list_tables() -> None:
    """List the built-in tables.

    Example: shepherd profile list
    """
    import polars as pl

    from shepherd.cli.common import frame_table
    from shepherd.core import profiles as prof

    rows = []
    for t in prof.BUILTIN_TABLES.values():
        raw = prof.read_builtin_raw(t.name)
        rows.append({"table": t.name, "models": raw["model"].n_unique(), "source": t.citation,
                     "contents": t.description})
    rows.append({"table": "accordion-layers", "models": 3, "source": "Accordion (CF '25), Table 1 spread over layers",
                 "contents": "per-layer latencies on one EP (kind layer_profiles; docs/ACCORDION.md)"})
    frame_table("built-in profile tables", pl.DataFrame(rows))


@app.command("show")
def show(
    path: Annotated[Optional[Path], typer.Argument(help="A profiles artifact.")] = None,
    table: Annotated[Optional[str], typer.Option("--table", help="Show a built-in table instead of a file.")] = None,
    model: Annotated[Optional[str], typer.Option("--model", help="Only this model.")] = None,
) -> None:
    """Print a profiles artifact (or a built-in table) as a table of fits.

    Example: shepherd profile show profiles.parquet --model ResNet50
    """
    if (path is None) == (table is None):
        raise UserError("give a profiles file or --table NAME")
    import polars as pl

    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import read_artifact

    frame = read_artifact(path, "profiles").frame if path else prof.load_builtin(table)  # type: ignore[arg-type]
    if model is not None:
        frame = frame.filter(pl.col("model") == model)
        if frame.height == 0:
            raise UserError(f"no model '{model}' in the profiles")
    _print_fits(frame, title=str(path or table))


def _print_fits(frame: pl.DataFrame, title: str) -> None:
    import polars as pl

    from shepherd.cli.common import console, frame_table
    from shepherd.core import profiles as prof

    params = prof.model_params(frame)
    stats = frame.group_by(["model", "hardware"], maintain_order=True).agg(
        pl.col("batch").min().alias("b_min"),
        pl.col("batch").max().alias("b_max"),
        pl.col("latency_ms").min().alias("lat_min_ms"),
        pl.col("latency_ms").max().alias("lat_max_ms"),
    )
    extras = [c for c in ("short", "exit_points", "slo_ms", "static_mb", "dynamic_mb", "eps", "speedup")
              if c in params.columns]
    shown = params.select(["model", "hardware", "alpha_ms", "beta_ms", "r2", *extras]).join(
        stats, on=["model", "hardware"], how="left"
    )
    frame_table(title, shown)
    console.print()


def _from_ppipe(root: Path, out: Path, seed: int) -> None:
    """Import the PPipe block timings (PPipe §5.2–§5.3) as a ``block_profiles`` artifact."""
    from shepherd.cli.common import summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.core.pipelines import blocks

    profs = blocks.read_ppipe_dir(root)
    frame = blocks.to_frame(profs)
    write_artifact(frame, out, "block_profiles", make_provenance({"from_ppipe": str(root)}, seed, []))
    summary_table("profile (PPipe blocks)", {
        "source": str(root),
        "models": len(profs),
        "hardware": ", ".join(sorted(frame["hardware"].unique().to_list())),
        "rows": frame.height,
        "SLO range (ms)": f"{min(p.slo_us() for p in profs) / 1000:.1f}–{max(p.slo_us() for p in profs) / 1000:.1f}",
        "written": out,
    })
