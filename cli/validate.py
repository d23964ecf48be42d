"""``shepherd validate``: one trace served live on real PyTorch workers and simulated; the simulator's error."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from shepherd.core.bounds import MAX_LIVE_WORKERS, check_bound
from shepherd.core.errors import UserError
from shepherd.core.measure import TORCH_PIP_RICH

HELP = f"""Run one trace LIVE and SIMULATED with the same policy objects and report the simulator's error.

Setup: the live engine replays a synthetic Poisson trace in real time (a sender process) and sends each
batch the policy starts to a worker process — one per --workers, each pinned to one CPU core with one
PyTorch thread — which runs the real model (--model, a zoo name such as ResNet18@64: ResNet18 on 64×64
inputs) on a real input tensor of the batch's size. No GPU is needed (CPU only). PyTorch is the optional
extra: {TORCH_PIP_RICH}.

What the simulation takes: a profile calibrated under serving conditions (--profiles from `shepherd
calibrate`, or calibrated here first when omitted: the same worker harness, every batch size, its own
trace and seed — never the validated run). By default each simulated batch's time is drawn (seeded) from
the calibration's per-size samples while the policy plans on the profile (--exec-time measured), and
each decision takes effect the calibration's measured decision delay (dispatch + report hop) later
(--overhead calibrated). A plain profile (`shepherd profile --measure MODEL --threads 1`) works too: then
its mean latency and no delay are used (--exec-time mean --overhead none), as before calibration existed.
--overhead measured charges the validated run's OWN measured dispatch delay instead: a diagnostic
counterfactual (it reads the run it is compared with), labelled as such, never the prediction.

Reported per policy: SLO attainment, goodput, p50/p90/p99 latency, mean batch size, utilisation, live vs
simulated with the error in percent, err_pct = 100 · (sim − live)/live; the residual's measured causes
(dispatch overhead and frontend hop, execution CV per batch size, scheduler decision time, the share of
batch time the worker waited for its core — a warning above 5 %); a per-request latency CDF figure.
Timings depend on the machine and its load: run on an otherwise idle machine where you can. Live
tables are wall-clock measurements, so two runs are never byte-identical (the simulated ones are).
For the grid of cells with the error split into execution and scheduling, see
`shepherd reproduce validate --quick` (docs/VALIDATION.md).

The output folder also holds the inputs of the simulated half, profiles.parquet (the profile both halves
used, calibrated here or copied from --profiles) and trace.parquet, so it can be re-run alone:
shepherd simulate --trace DIR/trace.parquet --profiles DIR/profiles.parquet --policy P --gpus WORKERS
--max-batch B --seed S --exec-time E --overhead O --engine reference (E, O: as the run's summary says).

A live run that fails is an error, never a simulator error: a worker that cannot start or dies during the
run (exit 2, nothing written), Ctrl-C (one line, every worker stopped). Policies that need pipelines or
per-layer profiles (ppipe, reactive, accordion and its baselines) have no live form and are refused.

Examples:

  shepherd calibrate --model ResNet18@64 --max-batch 8 --seed 1 -o r18-cal.parquet

  shepherd validate --policy flex,clockwork --model ResNet18@64 --profiles r18-cal.parquet --utilization 0.9 --slo-ms 60 --duration-s 30 -o val/
"""


def validate(
    policy: Annotated[str, typer.Option("--policy", help="Policies, comma-separated (flex, flex-np, clockwork, nexus, symphony, symphony-wc).")] = "flex,clockwork",
    model: Annotated[str, typer.Option("--model", help="Zoo model served (e.g. ResNet18@64, TinyCNN).")] = "ResNet18@64",
    profiles: Annotated[Optional[Path], typer.Option("--profiles", help="Calibrated profiles (shepherd calibrate) or measured ones (shepherd profile --measure); default: calibrate now (--calibration-seed).")] = None,
    rate: Annotated[Optional[float], typer.Option("--rate", help="Requests/s of the Poisson trace (default: --utilization × the profile's capacity).")] = None,
    utilization: Annotated[float, typer.Option("--utilization", help="Offered load as a fraction of the profile's capacity, when --rate is not given.")] = 0.6,
    duration_s: Annotated[float, typer.Option("--duration-s", help="Trace length, s.")] = 30.0,
    slo_ms: Annotated[float, typer.Option("--slo-ms", help="Every request's SLO, ms.")] = 200.0,
    workers: Annotated[int, typer.Option("--workers", help=f"Worker processes (one core each; 1–{MAX_LIVE_WORKERS}).")] = 1,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, max=64, help="Largest batch.")] = 8,
    exec_time: Annotated[str, typer.Option("--exec-time", metavar="[auto|measured|mean]", help="Simulated batch times: measured — drawn from the calibration's samples; mean — the profile's latency; auto — measured for a calibrated profile, else mean.")] = "auto",
    overhead: Annotated[str, typer.Option("--overhead", metavar="[auto|calibrated|none|measured]", help="Per-decision delay in the simulation: calibrated — the calibration's measured dispatch + hop; none; measured — ALSO simulate with the validated run's own dispatch delay (a diagnostic, not a prediction); auto — calibrated for a calibrated profile, else none.")] = "auto",
    seed: Annotated[int, typer.Option("--seed", min=0, help="Trace seed.")] = 0,
    calibration_seed: Annotated[int, typer.Option("--calibration-seed", min=0, help="Seed of the calibration run here when --profiles is omitted (its own trace stream: never the validated trace).")] = 1,
    calibration_repeats: Annotated[int, typer.Option("--calibration-repeats", min=2, max=1000, help="Timings per batch size of that calibration.")] = 20,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output folder (live/ and sim/ tables, comparison, residuals, CDF figure; profiles.parquet and trace.parquet, the simulated half's inputs).")] = Path("validate"),
) -> None:
    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import artifact_dir, check_output_dir, read_artifact
    from shepherd.core import validation as val
    from shepherd.core.engine import live
    import polars as pl

    pols = [p for p in policy.split(",") if p]
    if overhead not in ("auto", "calibrated", "none", "measured"):
        raise UserError(f"--overhead must be auto, calibrated, none or measured, got '{overhead}'")
    if exec_time not in ("auto", "measured", "mean"):
        raise UserError(f"--exec-time must be auto, measured or mean, got '{exec_time}'")
    if not pols:
        raise UserError("--policy names no policy")
    check_bound("live_workers", workers, "--workers")
    for p in pols:
        live.check_live_policy(p)
    if duration_s <= 0 or slo_ms <= 0 or (rate is not None and rate <= 0) or not 0 < utilization <= 10:
        raise UserError("--duration-s, --slo-ms, --rate and --utilization must be positive")
    _need_torch()
    check_output_dir(out, replaceable=_replaceable)
    if profiles is not None:
        art = read_artifact(profiles, "profiles")
        prof, meta = art.frame, art.extra.get("calibration")
        if model not in prof["model"].to_list():
            raise UserError(f"the profiles have no model '{model}' (they have: {', '.join(sorted(set(prof['model'])))})")
    else:
        prof, meta = _calibrate(model, max_batch, calibration_repeats, calibration_seed)
    execution, decision, inputs = simulation_inputs(prof, meta, exec_time, overhead, seed)
    cap = val.capacity_rps(prof, model, workers, max_batch)
    rps = rate if rate is not None else utilization * cap
    trace = val.validation_trace(model, rps, duration_s, slo_ms, seed)
    if trace.height == 0:
        raise UserError(f"the trace has no requests ({rps:.3g} req/s × {duration_s:g} s): raise --rate, "
                        "--utilization or --duration-s")
    config = dict(model=model, rate=rps, slo_ms=slo_ms, duration_s=duration_s, workers=workers, max_batch=max_batch,
                  sim_exec_time=inputs["exec_time"], sim_overhead=inputs["overhead"])
    results, cdf = [], {}
    with artifact_dir(out, replaceable=_replaceable) as tmp:
        _write_inputs(tmp, prof, meta, trace, profiles, config, seed)
        for p in pols:
            pair = val.run_pair(trace, prof, p, workers=workers, max_batch=max_batch, seed=seed,
                                overhead="measured" if overhead == "measured" else "none", execution=execution,
                                decision=decision)
            for engine in ("live", "sim") + (("sim_measured",) if overhead == "measured" else ()):
                _write_tables(pair[engine], tmp / engine / p, p, engine, config, seed)
            for row in pair["rows"]:
                results.append({"policy": p, "metric": row["metric"], "live": row["live"], "sim": row["sim"],
                                "err_pct": _pct(row["rel_err"]), **_measured(pair, row["metric"])})
            cdf[p] = (val.latencies_ms(pair["live"]), val.latencies_ms(pair["sim"]))
            (tmp / f"residuals-{p}.json").write_text(json.dumps(pair["residuals"], indent=1, default=float))
            frame_table(f"{p}: execution per batch size (live)", val.exec_frame(pair["residuals"]))
            r = pair["residuals"]
            summary_table(f"{p}: residual causes", {
                "dispatch delay mean / p99 (ms)": f"{r['dispatch_ms_mean']:.2f} / {r['dispatch_ms_p99']:.2f}",
                "frontend hop mean / p99 (ms)": f"{r['hop_ms_mean']:.2f} / {r['hop_ms_p99']:.2f}",
                "execution / profile (wall; CPU)": f"{r['exec_ratio']:.3f}; {r['exec_cpu_ratio']:.3f}",
                "share of batch time waiting for the core": f"{r['core_wait_share']:.3f}",
                "decision time mean / p99 (µs)": f"{r['decision_us_mean']:.0f} / {r['decision_us_p99']:.0f}"})
            warning = live.core_wait_warning(r["core_wait_share"])
            if warning:
                sys.stderr.write(f"warning: {p}: {warning}\n")
        table = pl.DataFrame(results)
        table = table.with_columns(pl.col(c).cast(pl.Float64) for c in table.columns if c not in ("policy", "metric"))
        table.write_parquet(tmp / "comparison.parquet")
        from shepherd.experiments.validate import draw_cdf

        draw_cdf(cdf, tmp / "latency_cdf.png")
    frame_table(f"live vs simulated ({rps:.1f} req/s, capacity {cap:.1f} req/s; err_pct = 100·(sim − live)/live)",
                table.with_columns([pl.col(c).round(4) for c in table.columns if table[c].dtype == pl.Float64]))
    summary_table("validate", {"trace": f"Poisson {rps:.1f} req/s × {duration_s:g} s, {trace.height} requests",
                               "simulated with": f"--exec-time {inputs['exec_time']} --overhead {inputs['overhead']}",
                               "written": str(out)})


def simulation_inputs(prof, meta: dict | None, exec_time: str, overhead: str, seed: int):
    """What the simulated half takes from the profile: the execution model (``--exec-time``), the decision
    delay (``--overhead``; ``measured`` adds the validated run's own as a diagnostic, the prediction itself
    then uses none), and their names for the record. ``auto`` means calibrated where the profile is."""
    from shepherd.core import calibration as cal

    calibrated = meta is not None and "samples_ms" in prof.columns
    if exec_time == "auto":
        exec_time = "measured" if calibrated else "mean"
    if overhead == "auto":
        overhead = "calibrated" if calibrated else "none"
    if exec_time == "measured" and "samples_ms" not in prof.columns:
        raise UserError("--exec-time measured needs a calibrated profile (shepherd calibrate); these profiles "
                        "have no measured samples: use --exec-time mean")
    if overhead == "calibrated" and not meta:
        raise UserError("--overhead calibrated needs a calibrated profile (shepherd calibrate); these profiles "
                        "carry no measured decision delay: use --overhead none")
    execution = cal.execution_model(prof, "measured", seed) if exec_time == "measured" else None
    decision = cal.decision_overhead(meta) if overhead == "calibrated" else None
    return execution, decision, {"exec_time": exec_time, "overhead": overhead}


def _calibrate(model: str, max_batch: int, repeats: int, seed: int):
    """Calibrate ``model`` now (``shepherd calibrate``'s harness, its own trace stream), with progress."""
    from shepherd.cli.common import progress
    from shepherd.core import calibration as cal

    with progress() as bar:
        task = bar.add_task(f"calibrating {model} (sizes 1–{max_batch} × {repeats})", total=max_batch * repeats)
        frame, meta = cal.calibrate(model, max_batch, repeats, seed,
                                    progress=lambda done, total: bar.update(task, completed=done, total=total))
    return frame, meta


def _pct(rel_err: float | None) -> float | None:
    """A relative error (sim − live)/live as percent (None where live is 0: no relative error)."""
    return None if rel_err is None else 100.0 * rel_err


def _measured(pair: dict, metric: str) -> dict:
    if "rows_measured" not in pair:
        return {}
    row = next(r for r in pair["rows_measured"] if r["metric"] == metric)
    return {"sim_measured": row["sim"], "err_pct_measured": _pct(row["rel_err"])}


#: what a validate run writes at the top of its folder (a new run replaces them; anything else is refused)
OUTPUTS = ("comparison.parquet", "latency_cdf.png", "profiles.parquet", "trace.parquet")
ENGINE_DIRS = ("live", "sim", "sim_measured")


def _replaceable(entry: Path) -> bool:
    """An entry of an earlier validate run's folder (OUTPUTS, residuals-*.json, the engines' table folders)."""
    from shepherd.core.outputs import is_replaceable_output

    if entry.is_symlink():
        return False
    if entry.is_dir():
        return entry.name in ENGINE_DIRS
    return (entry.name in OUTPUTS or (entry.name.startswith("residuals-") and entry.suffix == ".json")
            or is_replaceable_output(entry))


def _need_torch() -> None:
    """Missing PyTorch: one line naming this command (before anything is measured, started or written)."""
    from shepherd.core.measure import INSTALL_HINT, need_torch

    try:
        need_torch()
    except UserError:
        hint = INSTALL_HINT.partition("needs PyTorch: ")[2] or INSTALL_HINT
        raise UserError(f"shepherd validate runs the real models and needs PyTorch: {hint}") from None


def _write_inputs(folder: Path, prof, meta: dict | None, trace, profiles: Path | None, config: dict,
                  seed: int) -> None:
    """The simulated half's inputs beside its tables: profiles.parquet (with its calibration, if any) and
    trace.parquet (HELP says how to re-run it)."""
    from shepherd.core.artifacts import make_provenance, write_artifact

    source = {"profiles_from": "--profiles" if profiles is not None else "calibrated by validate"}
    write_artifact(prof, folder / "profiles.parquet", "profiles",
                   make_provenance(dict(validate=config, **source), None, [profiles] if profiles else []),
                   extra={"calibration": meta} if meta else None)
    write_artifact(trace, folder / "trace.parquet", "trace", make_provenance(dict(validate=config), seed, []))


def _write_tables(result, folder: Path, policy: str, engine: str, config: dict, seed: int) -> None:
    """The simulate tables (requests, batches, workers, summary), marked with the engine that made them."""
    import polars as pl

    from shepherd.core.artifacts import make_provenance, write_artifact
    from shepherd.core.metrics import summarize_tables

    folder.mkdir(parents=True, exist_ok=True)
    eng = "live" if engine == "live" else "reference"
    prov = make_provenance(dict(policy=policy, engine=eng, overhead=engine, **config), seed, [])
    req, bat, wk = result.requests_frame(), result.batches_frame(), result.workers_frame()
    summary = summarize_tables(req, bat, wk, policy).with_columns(engine=pl.lit(eng))
    for name, frame, kind in (("requests", req, "requests"), ("batches", bat, "batches"),
                              ("workers", wk, "workers"), ("summary", summary, "summary")):
        write_artifact(frame, folder / f"{name}.parquet", kind, prov)
