"""``shepherd traces``: generate request traces and describe them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import numpy as np
import polars as pl
import typer

from shepherd.cli.common import frame_table, progress, summary_table
from shepherd.core import profiles as prof
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.errors import UserError
from shepherd.traces import stats as tstats
from shepherd.traces import synthetic

app = typer.Typer(
    help=(
        "Request traces: generate synthetic ones, describe any.\n\n"
        "Examples:\n\n"
        "  shepherd traces generate --process gamma --cv 4 --rate 2000 --duration 60 -o trace.parquet\n\n"
        "  shepherd traces stats trace.parquet --window-ms 100 --window-ms 1000"
    ),
    no_args_is_help=True,
)

DEFAULT_TABLE = "shepherd-v100"


def _models(models: Optional[str], models_from: Optional[Path]) -> list[str]:
    if models and models_from:
        raise UserError("give --models or --models-from, not both")
    if models:
        names = [m.strip() for m in models.split(",") if m.strip()]
        if not names:
            raise UserError("--models is empty")
        return names
    if models_from:
        frame = read_artifact(models_from, "profiles").frame
    else:
        frame = prof.read_builtin_raw(DEFAULT_TABLE)
    return list(dict.fromkeys(frame["model"].to_list()))


@app.command()
def generate(
    process: Annotated[str, typer.Option("--process", help="poisson | gamma | mmpp | two-stream (Shepherd §7.2).")] = "poisson",
    rate: Annotated[float, typer.Option("--rate", help="Aggregate arrival rate, requests/s.")] = 1000.0,
    duration: Annotated[float, typer.Option("--duration", help="Trace length, seconds.")] = 10.0,
    models: Annotated[Optional[str], typer.Option("--models", help="Comma-separated models; default: all of shepherd-v100.")] = None,
    models_from: Annotated[Optional[Path], typer.Option("--models-from", help="Take the models of this profiles artifact.")] = None,
    streams: Annotated[Optional[int], typer.Option("--streams", help="Number of streams (default: one per model); stream i → model i mod M.")] = None,
    zipf: Annotated[float, typer.Option("--zipf", help="Zipf exponent of stream popularity (0 = uniform).")] = 0.0,
    slo_ms: Annotated[float, typer.Option("--slo-ms", help="Latency SLO of every request, ms.")] = 250.0,
    cv: Annotated[float, typer.Option("--cv", help="Inter-arrival CV of the gamma process (shape = 1/CV²).")] = 1.0,
    mmpp_ratio: Annotated[float, typer.Option("--mmpp-ratio", help="MMPP high/low rate ratio.")] = 10.0,
    mmpp_dwell_low: Annotated[float, typer.Option("--mmpp-dwell-low", help="MMPP mean time in the low state, s.")] = 1.0,
    mmpp_dwell_high: Annotated[float, typer.Option("--mmpp-dwell-high", help="MMPP mean time in the high state, s.")] = 0.1,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the trace artifact.")] = Path("trace.parquet"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the one random generator.")] = 0,
) -> None:
    """Generate a synthetic trace artifact (arrival_us, stream, model, slo_us, deadline_us).

    Example: shepherd traces generate --process mmpp --rate 5000 --zipf 1.0 -o trace.parquet
    """
    config = dict(process=process, rate=rate, duration_s=duration, slo_ms=slo_ms, seed=seed)
    if process == "two-stream":
        frame = synthetic.two_stream(duration_s=duration, slo_ms=slo_ms)
    else:
        spec = synthetic.SyntheticSpec(
            process=process, rate=rate, duration_s=duration, models=tuple(_models(models, models_from)),
            streams=streams, zipf_s=zipf, slo_ms=slo_ms, cv=cv, mmpp_ratio=mmpp_ratio,
            mmpp_dwell_low_s=mmpp_dwell_low, mmpp_dwell_high_s=mmpp_dwell_high,
        )
        spec.validate()
        config.update(models=list(spec.models), streams=streams, zipf_s=zipf, cv=cv, mmpp_ratio=mmpp_ratio,
                      mmpp_dwell_low_s=mmpp_dwell_low, mmpp_dwell_high_s=mmpp_dwell_high)
        rng = np.random.default_rng(seed)
        n_streams = streams or len(spec.models)
        with progress() as bar:
            task = bar.add_task("drawing arrivals", total=n_streams)
            frame = synthetic.generate(spec, rng, on_stream=lambda _: bar.advance(task))
    inputs = [models_from] if models_from else []
    write_artifact(frame, out, "trace", make_provenance(config, seed, inputs))
    span_s = tstats.duration_us(frame) / 1e6
    summary_table("traces generate", {
        "process": process,
        "requests": frame.height,
        "streams": frame["stream"].n_unique() if frame.height else 0,
        "models": frame["model"].n_unique() if frame.height else 0,
        "measured rate (req/s)": frame.height / span_s if span_s else 0.0,
        "written": out,
    })


@app.command()
def stats(
    path: Annotated[Path, typer.Argument(help="A trace artifact.")],
    window_ms: Annotated[Optional[List[float]], typer.Option("--window-ms", help="Window size(s) τ for count CVs, ms (repeatable).")] = None,
    top: Annotated[int, typer.Option("--top", help="Show the N busiest streams.")] = 20,
) -> None:
    """Print rate and CV per stream and per window size.

    Example: shepherd traces stats trace.parquet --window-ms 10 --window-ms 1000
    """
    trace = read_artifact(path, "trace").frame
    if trace.height == 0:
        raise UserError(f"{path.name}: trace has no requests")
    windows = window_ms or [10.0, 100.0, 1000.0]
    if any(w <= 0 for w in windows):
        raise UserError("--window-ms must be positive")
    windows_us = [max(1, int(round(w * 1000))) for w in windows]
    per_stream = tstats.stream_stats(trace, windows_us[-1])
    shown = per_stream.sort("requests", descending=True).head(top)
    frame_table(f"{path.name}: busiest {shown.height} of {per_stream.height} streams "
                f"(count CV at τ = {windows[-1]:g} ms)", shown)
    frame_table(f"{path.name}: count CV by window size τ", tstats.window_stats(trace, windows_us))
    span_s = tstats.duration_us(trace) / 1e6
    summary_table("traces stats", {
        "requests": trace.height,
        "streams": per_stream.height,
        "span (s)": span_s,
        "rate (req/s)": trace.height / span_s,
        "inter-arrival CV (aggregate)": tstats.interarrival_cv(trace["arrival_us"].to_numpy()),
    })
