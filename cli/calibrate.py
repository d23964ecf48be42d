"""``shepherd calibrate``: a profile measured in the live worker harness, under serving conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from shepherd.core.errors import UserError

#: the calibration trace only keeps the sender and the engine's receive path busy as in serving; a rate far
#: beyond what one worker serves would measure a flooded engine, not a serving one
MAX_CALIBRATION_RATE = 100_000.0

HELP = """Measure a model IN THE LIVE WORKER HARNESS, under serving conditions, for the simulator to use.

A profile timed alone (`profile --measure`) is not what a serving worker sees. This runs the harness
`shepherd validate` serves with — one worker process pinned to one core with one PyTorch thread, the
sender replaying a Poisson trace of its own seed, the engine receiving it — and times every batch size
1…--max-batch, --repeats times each in a seeded random order, half back to back and half after an idle
gap. It writes a profiles artifact: per size the MEAN duration (what a policy plans on), median, CV and
the measured samples (what `--exec-time measured` draws from), the model's layer boundaries as exit
points, and in its metadata the decision delay (dispatch + report hop) and the frontend hop.

Calibration and validation never share a run: the calibration trace has its own seed stream, and the
artifact records it. --against PREVIOUS prints the drift from an earlier calibration.

Examples:

  shepherd calibrate --model ResNet18@64 -o r18-cal.parquet

  shepherd calibrate --model ResNet50@48 --repeats 20 --seed 2 --against r50-cal.parquet -o r50-cal2.parquet

  shepherd simulate --trace trace.parquet --profiles r18-cal.parquet --gpus 1 --exec-time measured -o sim/
"""


def calibrate(
    model: Annotated[str, typer.Option("--model", help="Zoo model (e.g. ResNet18@64, ResNet50@48, TinyCNN).")] = "ResNet18@64",
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, max=64, help="Every size 1…this is measured.")] = 8,
    repeats: Annotated[int, typer.Option("--repeats", min=2, max=10_000, help="Batches per size.")] = 30,
    rate: Annotated[Optional[float], typer.Option("--rate", help="Requests/s of the calibration trace (default: the model's estimated capacity).")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the calibration's own order, gaps and trace.")] = 0,
    against: Annotated[Optional[Path], typer.Option("--against", help="An earlier calibration: print the drift from it.")] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the calibrated profiles artifact.")] = Path("calibration.parquet"),
) -> None:
    from shepherd.cli.common import frame_table, progress, summary_table
    from shepherd.core import calibration as cal
    from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
    from shepherd.core.measure import need_torch
    import polars as pl

    if rate is not None and not 0 < rate <= MAX_CALIBRATION_RATE:
        raise UserError(f"--rate must be in (0, {MAX_CALIBRATION_RATE:g}] requests/s, got {rate}")
    previous = read_artifact(against, "profiles") if against is not None else None
    if previous is not None and "samples_ms" not in previous.frame.columns:
        raise UserError(f"{against}: not a calibration (no measured samples); make one with shepherd calibrate")
    need_torch()
    if out.exists() and out.is_dir():
        raise UserError(f"output {out} is a directory; name a file inside it (e.g. {out / 'calibration.parquet'})")
    with progress() as bar:
        task = bar.add_task(f"calibrating {model}", total=max_batch * repeats)
        frame, meta = cal.calibrate(model, max_batch, repeats, seed, rate,
                                    progress=lambda done, total: bar.update(task, completed=done))
    config = {"calibrate": model, "max_batch": max_batch, "repeats": repeats, "rate": rate}
    write_artifact(frame, out, "profiles", make_provenance(config, seed, []), extra={"calibration": meta})
    frame_table(f"{model}: batch time under serving conditions (ms)",
                frame.select("batch", "latency_ms", "median_ms", "cv",
                             pl.col("samples_ms").list.len().alias("back_to_back"),
                             pl.col("idle_samples_ms").list.len().alias("after_idle")))
    if meta["non_monotone"]:
        typer.echo(f"warning: {model}'s mean latency falls at batch size(s) {meta['non_monotone']} "
                   "(ℓ(b) < ℓ(b−1)): policies search this table without assuming it sorted", err=True)
    summary_table("calibration", {
        "decision delay mean / p99 (ms)": f"{meta['decision_delay_ms']['mean']:.3f} / {meta['decision_delay_ms']['p99']:.3f}",
        "frontend hop mean / p99 (ms)": f"{meta['hop_ms']['mean']:.3f} / {meta['hop_ms']['p99']:.3f}",
        "back to back / after idle": f"{meta['busy_over_idle']:.3f}",
        "share of batch time waiting for the core": f"{meta['core_wait_share']:.3f}",
        "exit points (layer boundaries)": meta["layers"] - 1,
        "written": str(out)})
    if meta["core_wait_share"] > 0.05:
        typer.echo(f"warning: the worker waited for its core {meta['core_wait_share']:.0%} of the batch time: "
                   "the machine was busy; calibrate on a quiet machine", err=True)
    if previous is not None:
        frame_table(f"drift from {against.name} (mean change %, CV change)",
                    cal.drift(previous.frame, frame, previous.extra.get("calibration"), meta))
