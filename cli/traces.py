"""``shepherd traces``: real and synthetic request traces, and their statistics.

Commands: ``list`` (named traces, cached datasets), ``fetch`` / ``import``
(the MAF archives, see :mod:`shepherd.traces.fetch`), ``maf`` (build a trace
artifact from a named MAF trace, see :mod:`shepherd.traces.registry`),
``generate`` (synthetic processes) and ``stats`` (rates, CVs, ``--cv``:
Shepherd Figs. 2/5 data).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli import complete
from shepherd.cli.deprecated import renamed
from shepherd.core.errors import UserError
from shepherd.traces import checks

# numpy, polars, the trace builders and the downloader are imported inside the functions: `--help` stays fast

app = typer.Typer(
    help=(
        "Request traces: real MAF workloads (fetch, import, build), synthetic ones, statistics.\n\n"
        "Examples:\n\n"
        "  shepherd traces list\n\n"
        "  shepherd traces maf maf-synthetic --duration-min 5 --rate 3000 -o trace.parquet\n\n"
        "  shepherd traces fetch maf2019\n\n"
        "  shepherd traces generate --process gamma --cv 4 --rate 2000 --duration-s 60 -o trace.parquet\n\n"
        "  shepherd traces stats maf-synthetic --cv -o cv.parquet"
    ),
    no_args_is_help=True,
)

DEFAULT_TABLE = "shepherd-v100"


def _models(models: Optional[str], models_from: Optional[Path]) -> list[str]:
    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import read_artifact

    if models and models_from:
        raise UserError("give --models or --models-from, not both")
    if models:
        checks.text("--models", models)
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
    process: Annotated[str, typer.Option("--process", help="poisson | gamma | mmpp | two-stream (Shepherd §7.2) | accordion-stream (Accordion §4.3).")] = "poisson",
    rate: Annotated[float, typer.Option("--rate", help="Aggregate arrival rate, requests/s.")] = 1000.0,
    duration: Annotated[float, typer.Option("--duration-s", help="Trace length, seconds.")] = 10.0,
    duration_old: Annotated[Optional[float], typer.Option("--duration", hidden=True, help="Deprecated spelling of --duration-s.")] = None,
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
    stream: Annotated[int, typer.Option("--stream", help="accordion-stream: query stream 1…6 (Accordion §4.3).")] = 1,
    slo_target: Annotated[str, typer.Option("--slo-target", help="accordion-stream: strict | moderate | relaxed.")] = "moderate",
) -> None:
    """Generate a synthetic trace artifact (arrival_us, stream, model, slo_us, deadline_us).

    Example: shepherd traces generate --process mmpp --rate 5000 --zipf 1.0 -o trace.parquet
    """
    import numpy as np

    from shepherd.cli.common import progress, summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.traces import accordion, synthetic

    duration = renamed(duration, duration_old, "--duration-s", "--duration", default=10.0)
    checks.seed(seed)
    checks.out_file(out)
    config = dict(process=process, rate=rate, duration_s=duration, slo_ms=slo_ms, seed=seed)
    if process == "two-stream":
        ignored = [name for name, given in (("--rate", rate != 1000.0), ("--models", models is not None),
                                            ("--models-from", models_from is not None), ("--zipf", zipf != 0.0))
                   if given]
        if ignored:
            raise UserError(f"two-stream is Shepherd §7.2's fixed two-stream workload: {', '.join(ignored)} "
                            "does not apply to it (use --process poisson|gamma|mmpp for your own rates and models)")
        frame = synthetic.two_stream(duration_s=duration, slo_ms=slo_ms)
    elif process == "accordion-stream":
        frame = accordion.stream(stream, slo_target, duration_s=duration, seed=seed)
        config.update(stream=stream, slo_target=slo_target)
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
    if frame.height == 0:
        raise UserError(f"the trace would hold no requests ({process}, {rate:g} req/s for {duration:g} s): "
                        "raise --rate or --duration-s")
    inputs = [models_from] if models_from else []
    write_artifact(frame, out, "trace", make_provenance(config, seed, inputs))
    span_s = duration
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
    trace: Annotated[str, typer.Argument(autocompletion=complete.trace_names, help="A trace artifact, or a named trace (see `shepherd traces list`; default options).")],
    window_ms: Annotated[Optional[List[float]], typer.Option("--window-ms", help="Window size(s) τ for count CVs, ms (repeatable).")] = None,
    top: Annotated[int, typer.Option("--top", help="Show the N busiest streams.")] = 20,
    cv: Annotated[bool, typer.Option("--cv", help="Predictability analysis: mean CV of window counts vs τ, per stream and per random group (Shepherd Figs. 2, 5).")] = False,
    group_size: Annotated[Optional[List[int]], typer.Option("--group-size", help="Group sizes for --cv (repeatable; default 1, 10, 100, 1000).")] = None,
    per_minute: Annotated[bool, typer.Option("--per-minute", help="With --cv on a maf2019*/maf-synthetic* name: use the per-minute counts (τ in whole minutes, as in Fig. 2) without expanding arrivals.")] = False,
    tau_min: Annotated[Optional[List[int]], typer.Option("--tau-min", help="--per-minute: window sizes τ in minutes (repeatable; default 1, 2, 5, 10, 30, 60, 120).")] = None,
    duration_min: Annotated[Optional[int], typer.Option("--duration-min", help="--per-minute: minutes of counts to analyse (default: the whole day, or every minute a single file holds).")] = None,
    path: Annotated[Optional[Path], typer.Option("--path", help="--per-minute: read this MAF 2019 file/directory instead of the cache.")] = None,
    out: Annotated[Optional[Path], typer.Option("-o", "--out", help="With --cv: write the CV table as a 'predictability' artifact.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the random grouping (--cv) and of named traces.")] = 0,
) -> None:
    """Print rate and CV per stream and per window size; --cv adds CV vs τ per stream and per group.

    Example: shepherd traces stats maf-synthetic --cv --window-ms 100 --window-ms 1000 -o cv.parquet
    """
    import numpy as np
    import polars as pl

    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.traces import predictability as pred, stats as tstats
    from shepherd.traces.resolve import load_trace

    for w in window_ms or ():
        checks.number("--window-ms", w, low=checks.MIN_WINDOW_MS, high=checks.MAX_DURATION_S * 1000, what="ms")
    for g in group_size or ():
        checks.count("--group-size", g, 1)
    for t in tau_min or ():
        checks.count("--tau-min", t, 1)
    checks.count("--top", top, 1)
    if duration_min is not None:
        checks.count("--duration-min", duration_min, 1, checks.MAX_DURATION_MIN)
    checks.seed(seed)
    if out is not None and not cv:
        raise UserError("-o/--out writes the --cv table: add --cv")
    if out is not None:
        checks.out_file(out)
    if per_minute:
        _per_minute_cv(trace, tau_min, group_size, duration_min, path, out, seed)
        return
    loaded = load_trace(trace, seed=seed)
    frame, label = loaded.frame, loaded.label
    if frame.height == 0:
        raise UserError(f"{label}: trace has no requests")
    declared = loaded.span_us
    windows = window_ms or [10.0, 100.0, 1000.0]
    windows_us = [max(1, int(round(w * 1000))) for w in windows]
    per_stream = tstats.stream_stats(frame, windows_us[-1], declared)
    shown = per_stream.sort("requests", descending=True).head(top)
    frame_table(f"{label}: busiest {shown.height} of {per_stream.height} streams "
                f"(count CV at τ = {windows[-1]:g} ms)", shown)
    frame_table(f"{label}: count CV by window size τ", tstats.window_stats(frame, windows_us, declared))
    span_us = tstats.duration_us(frame, declared)
    rows = {"trace": label, "requests": frame.height, "streams": per_stream.height, "span (s)": span_us / 1e6,
            "rate (req/s)": frame.height / (span_us / 1e6),
            "inter-arrival CV (aggregate)": tstats.interarrival_cv(frame["arrival_us"].to_numpy())}
    if loaded.synthetic:
        rows["synthetic"] = "yes — generated data, not a real production trace"
    if loaded.subset:
        rows["subset"] = f"yes — {loaded.subset}, not the full trace"
    if cv:
        taus = windows_us if window_ms else pred.default_taus_us(span_us)
        groups = group_size or list(pred.DEFAULT_GROUP_SIZES)
        table = pred.trace_cv(frame, taus, groups, np.random.default_rng(seed), span_us=declared)
        if table.height == 0:
            raise UserError(f"{label}: no window size τ gives two whole windows in a {span_us / 1e6:g} s trace")
        show = table.with_columns((pl.col("tau_us") / 1000).alias("tau_ms")).select(
            "tau_ms", "group_size", "units", "windows", "cv_mean", "cv_median")
        note = " [synthetic]" if loaded.synthetic else (f" [subset: {loaded.subset}]" if loaded.subset else "")
        frame_table(f"{label}: mean CV of window counts vs τ per group size (Shepherd Figs. 2, 5){note}", show)
        if out is not None:
            config = {"trace": loaded.name, "synthetic": loaded.synthetic, "subset": loaded.subset,
                      "taus_us": taus, "group_sizes": groups,
                      "trace_config": loaded.config}
            write_artifact(table, out, "predictability", make_provenance(config, seed, loaded.inputs))
            rows["written"] = out
    summary_table("traces stats", rows)


def _per_minute_cv(name: str, tau_min: Optional[List[int]], group_size: Optional[List[int]], duration_min: Optional[int],
                   path: Optional[Path], out: Optional[Path], seed: int) -> None:
    """Shepherd Figs. 2/5 from a MAF name's per-minute counts (τ ≥ 1 minute)."""
    import numpy as np
    import polars as pl

    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.traces import predictability as pred, registry

    taus = tau_min or [1, 2, 5, 10, 30, 60, 120]
    data = registry.load_counts(name, duration_min=duration_min, path=path, seed=seed)
    groups = group_size or list(pred.DEFAULT_GROUP_SIZES)
    table = pred.counts_cv(data.counts, taus, groups, np.random.default_rng(seed))
    if table.height == 0:
        raise UserError(f"{name}: no τ in --tau-min gives two whole windows in {data.minutes.size} minutes")
    subset = None if data.synthetic else registry.maf2019_subset(path)
    label = f"{name} (synthetic)" if data.synthetic else (f"{name} (subset: {subset})" if subset else name)
    show = table.with_columns((pl.col("tau_us") / 60e6).alias("tau_min")).select(
        "tau_min", "group_size", "units", "windows", "cv_mean", "cv_median")
    frame_table(f"{label}: mean CV of per-minute counts vs τ (Shepherd Figs. 2, 5)", show)
    rows = {"trace": label, "functions": data.functions, "minutes": int(data.minutes.size)}
    if data.synthetic:
        rows["synthetic"] = "yes — generated data, not the real MAF trace"
    if subset:
        rows["subset"] = f"yes — {subset}, not the full trace"
    if out is not None:
        config = {"trace": name, "synthetic": data.synthetic, "subset": subset, "per_minute": True, "tau_min": taus,
                  "group_sizes": groups, "duration_min": int(data.minutes.size)}
        write_artifact(table, out, "predictability", make_provenance(config, seed, data.inputs))
        rows["written"] = out
    summary_table("traces stats --per-minute", rows)


# --------------------------------------------------------------------------- real workloads

@app.command("list")
def list_traces() -> None:
    """List the named traces and the state of the local data cache.

    Example: shepherd traces list
    """
    import polars as pl

    from shepherd.cli.common import frame_table
    from shepherd.traces import fetch as tfetch, registry

    reg = tfetch.read_registry()
    rows = [{"name": name, "kind": entry.kind, "what": entry.doc, "data": entry.data_status(reg)}
            for name, entry in registry.TRACES.items()]
    frame_table("named traces (use with --trace NAME)", pl.DataFrame(rows))
    ds_rows = []
    for name, ds in tfetch.DATASETS.items():
        entry = reg.get(name, {})
        ds_rows.append({"dataset": name, "title": ds.title, "checksum": entry.get("checksum", "—"),
                        "path": entry.get("path", "—"), "url": ds.url})
    frame_table(f"datasets (cache: {tfetch.data_root()})", pl.DataFrame(ds_rows))


@app.command("fetch")
def fetch_cmd(
    name: Annotated[str, typer.Argument(help="maf2019 | maf2021")],
    url: Annotated[Optional[str], typer.Option("--url", help="Download from this mirror instead of the official URL.")] = None,
    sha256: Annotated[Optional[str], typer.Option("--sha256", help="Expected SHA-256 of the archive (pins/overrides the known one).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Download again even if the data is present.")] = False,
) -> None:
    """Download a public MAF archive into $SHEPHERD_DATA (default ~/.cache/shepherd), verify, extract, register.

    An interrupted download resumes when the command is run again; a checksum mismatch deletes the file.
    Example: shepherd traces fetch maf2019
    """
    from shepherd.cli.common import progress, summary_table
    from shepherd.traces import fetch as tfetch

    ds = tfetch.dataset(name)
    if url is not None:
        tfetch.check_url(url)  # before the progress bar: a bad URL is one line, nothing drawn
    with progress() as bar:
        task = bar.add_task(f"downloading {ds.archive}", total=None)
        result = tfetch.fetch(name, url=url, sha256=sha256, force=force,
                              on_progress=lambda done, total: bar.update(task, completed=done, total=total))
    summary_table("traces fetch", {"dataset": name, "path": result.path, "sha256": result.sha256 or "—",
                                   "checksum": result.checksum, "bytes": result.bytes})


@app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(help="A directory or file of MAF data, or a downloaded archive.")],
    as_name: Annotated[Optional[str], typer.Option("--as", help="maf2019 | maf2021 (default: recognised from the files).")] = None,
    sha256: Annotated[Optional[str], typer.Option("--sha256", help="Check an archive against this SHA-256 first.")] = None,
) -> None:
    """Register a local copy of MAF 2019 / 2021 (a directory or file in place; an archive is extracted into the cache).

    Example: shepherd traces import ~/Downloads/azurefunctions-dataset2019/
    """
    from shepherd.cli.common import summary_table
    from shepherd.traces import fetch as tfetch

    if as_name is not None:
        tfetch.dataset(as_name)
    name, where = tfetch.import_path(path, as_name, sha256)
    summary_table("traces import", {"dataset": name, "path": where, "cache": tfetch.data_root()})


@app.command("maf")
def maf_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(autocompletion=complete.named_traces, help="maf2019 | maf2019-stable | maf2019-bursty | maf2021 | maf-synthetic | maf-synthetic-bursty")],
    day: Annotated[Optional[int], typer.Option("--day", help="Day of the trace, 1–14 (default: day 1, or the one day a single file holds).")] = None,
    start_minute: Annotated[Optional[int], typer.Option("--start-minute", help="First minute of the day, 1–1440 (default: first in the file).")] = None,
    duration_min: Annotated[int, typer.Option("--duration-min", help="Window length, minutes.")] = 5,
    streams: Annotated[Optional[int], typer.Option("--streams", help="Keep the N busiest functions (default: every active one).")] = None,
    sample: Annotated[Optional[int], typer.Option("--sample", help="Keep a uniform random sample of N functions.")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", help="Rescale to this aggregate rate, req/s (thinning / superposition; MAF 2021: --upscale).")] = None,
    load: Annotated[Optional[float], typer.Option("--load", hidden=True, help="Deprecated: the rate in req/s is --rate (--load is a multiplier everywhere else).")] = None,
    slo_ms: Annotated[float, typer.Option("--slo-ms", help="SLO of every stream, ms (Shepherd §7: 250).")] = 250.0,
    slo_from: Annotated[Optional[str], typer.Option("--slo-from", metavar="TABLE", autocompletion=complete.slo_tables, help="Each request gets its model's SLO from this profile table (symphony-1080ti, symphony-a100: Symphony Tables 5, 6; or a profiles file with slo_ms) instead of --slo-ms.")] = None,
    models: Annotated[Optional[str], typer.Option("--models", help="Comma-separated models, assigned round-robin (default: Shepherd Table 4's 17).")] = None,
    process: Annotated[Optional[str], typer.Option("--process", help="stable (Poisson per minute) | bursty (MMPP per minute); default from the name.")] = None,
    mmpp_ratio: Annotated[float, typer.Option("--mmpp-ratio", help="Bursty: high/low MMPP rate ratio.")] = 10.0,
    mmpp_dwell_low: Annotated[float, typer.Option("--mmpp-dwell-low", help="Bursty: mean low-state sojourn, s.")] = 1.0,
    mmpp_dwell_high: Annotated[float, typer.Option("--mmpp-dwell-high", help="Bursty: mean high-state sojourn, s.")] = 0.1,
    functions: Annotated[int, typer.Option("--functions", help="maf-synthetic: number of functions.")] = 1000,
    synthetic_rate: Annotated[float, typer.Option("--synthetic-rate", help="maf-synthetic: native mean rate over the day, req/s.")] = 3000.0,
    upscale: Annotated[str, typer.Option("--upscale", help="MAF 2021 with --rate: compress (time compression) | superpose.")] = "compress",
    path: Annotated[Optional[Path], typer.Option("--path", help="Read this MAF file/directory instead of the cache.")] = None,
    model_map: Annotated[Optional[Path], typer.Option("--model-map", help="CSV HashFunction,model: map these functions to models (others round-robin).")] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the trace artifact.")] = Path("trace.parquet"),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the one random generator.")] = 0,
) -> None:
    """Build a trace artifact from a named MAF workload (functions → streams → models round-robin).

    Example: shepherd traces maf maf2019-bursty --day 3 --start-minute 600 --duration-min 10 --rate 20000 -o trace.parquet
    """
    from shepherd.cli.common import progress, summary_table
    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.traces import registry, stats as tstats
    from shepherd.traces.resolve import load_trace

    load = renamed(rate, load, "--rate", "--load")
    if slo_from is not None and getattr(ctx.get_parameter_source("slo_ms"), "name", "") == "COMMANDLINE":
        raise UserError("give --slo-ms (one SLO for every stream) or --slo-from TABLE (each model's), not both")
    entry = registry.lookup(name)
    if entry is None:
        raise UserError(f"unknown trace '{name}' (known: {', '.join(registry.TRACES)})")
    checks.seed(seed)
    checks.out_file(out)
    model_list = _models(models, None) if models else None
    with progress() as bar:
        bar.add_task(f"building {name}", total=None)
        loaded = load_trace(name, day=day, start_minute=start_minute, duration_min=duration_min, streams=streams,
                            sample=sample, load=load, slo_ms=slo_ms, models=model_list, process=process,
                            mmpp_ratio=mmpp_ratio, mmpp_dwell_low=mmpp_dwell_low, mmpp_dwell_high=mmpp_dwell_high,
                            functions=functions, synthetic_rate=synthetic_rate, upscale=upscale, path=path, model_map=model_map,
                            seed=seed, slo_from=slo_from)
    frame = loaded.frame
    write_artifact(frame, out, "trace", make_provenance(loaded.config, seed, loaded.inputs))
    span_s = tstats.duration_us(frame, loaded.span_us) / 1e6
    rows = {"trace": loaded.label, "requests": frame.height,
            "streams": frame["stream"].n_unique() if frame.height else 0,
            "models": frame["model"].n_unique() if frame.height else 0,
            "native rate (req/s)": loaded.config.get("native_rate_rps"),
            "load factor": loaded.config.get("load_factor"),
            "rate (req/s)": frame.height / span_s if span_s else 0.0, "span (s)": span_s}
    if loaded.synthetic:
        rows["synthetic"] = "yes — generated data, not the real MAF trace"
    if loaded.subset:
        rows["subset"] = f"yes — {loaded.subset}, not the full trace"
    rows["written"] = out
    summary_table("traces maf", rows)
