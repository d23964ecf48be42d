"""``shepherd simulate``: run an online policy over a trace (thin: parse, call, print)."""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli import complete
from shepherd.cli.deprecated import renamed
from shepherd.cli.grid_run import ADDRESS_HELP, JOBS_HELP, default_jobs
from shepherd.core import bounds, defaults
from shepherd.core.errors import UserError

# heavy modules (the engine, polars, the policies) are imported inside the functions: `--help` stays fast

RECORD_LEVELS = ("summary", "batches", "requests")
DEFAULT_PROFILES = defaults.DEFAULT_TABLE
MAX_WORKERS = bounds.MAX_WORKERS  # core/bounds.py
#: the built-in policies, named in --help without importing them (tests/test_cli_conventions.py keeps this
#: equal to the registry's built-in names)
POLICY_NAMES = ("accordion", "bbs", "clockwork", "fastest", "flex", "flex-np", "nexus", "one-stage", "ppipe",
                "reactive", "slo-conforming", "symphony", "symphony-wc")


def parse_options(policy: str, pairs: list[str]) -> dict:
    """``key=value`` strings → typed fields of the policy's config dataclass."""
    from shepherd.core.policies import registry

    spec = registry.get(policy)
    hints = typing.get_type_hints(spec.config_cls)
    fields = {f.name for f in dataclasses.fields(spec.config_cls)}
    out: dict = {}
    for pair in pairs:
        if "=" not in pair:
            raise UserError(f"--set expects key=value, got '{pair}'")
        key, raw = (x.strip() for x in pair.split("=", 1))
        if key not in fields:
            raise UserError(f"policy '{policy}' has no option '{key}' (known: {', '.join(sorted(fields)) or 'none'})")
        kind = hints.get(key, str)
        try:
            if kind is bool:
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                value: object = raw.lower() in ("true", "1", "yes")
            elif kind is int:
                value = int(raw)
            elif kind is float:
                value = float(raw)
            else:
                value = raw
        except ValueError:
            raise UserError(f"option '{key}' expects {getattr(kind, '__name__', kind)}, got '{raw}'") from None
        out[key] = value
    return out


def rule_options(policy: str, rules: str) -> dict:
    """The policy-config fields a named rule set (:mod:`shepherd.core.pipelines.rules`) sets."""
    from shepherd.core.pipelines.rules import dataplane_fields
    from shepherd.core.policies import registry

    fields = {f.name for f in dataclasses.fields(registry.get(policy).config_cls)}
    wanted = dataplane_fields(rules)
    got = {k: v for k, v in wanted.items() if k in fields}
    if rules != "paper" and not got:
        raise UserError(f"--rules {rules} applies to the ppipe data plane; policy '{policy}' has no rule switches")
    return got


def _one_blas_thread() -> None:
    """Start numpy's BLAS (OpenBLAS) with one thread unless the user chose (``OPENBLAS_NUM_THREADS`` or
    ``OMP_NUM_THREADS`` set) or numpy is already loaded (a caller's process: left as it is).

    OpenBLAS starts a thread per core, with its buffers, when numpy is imported: ≈ 0.04 CPU-s on a 2-core
    machine, a twentieth of a small run (issue 43). A simulation makes no floating-point BLAS call — its kernels and the
    reference engine are integer code, the summary's one ``np.dot`` multiplies int64 counts (numpy's own loop,
    not BLAS) — so no output can depend on it; processes this one starts (``--jobs``) inherit the setting."""
    import os

    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _policy_names(incomplete: str) -> list[str]:
    """Shell completion of ``--policy`` (imports the registry only when asked)."""
    from shepherd.core.policies import registry

    return [n for n in registry.names() if n.startswith(incomplete)]


def simulate(
    trace: Annotated[str, typer.Option("--trace", autocompletion=complete.trace_names, help="Trace artifact path or a named trace.")],
    policy: Annotated[str, typer.Option("--policy", metavar="[" + "|".join(POLICY_NAMES) + "]", autocompletion=_policy_names, help="Online policy (see the README's policy table); a plug-in's name works too.")] = "flex",
    profiles: Annotated[Optional[Path], typer.Option("--profiles", help=f"Profiles artifact (default: built-in {DEFAULT_PROFILES}, Shepherd Table 4).")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, max=MAX_WORKERS, help="Number of identical workers, all in one serving group.")] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Plan artifact: serving groups (one scheduler each).")] = None,
    load: Annotated[float, typer.Option("--load", help="Rescale the trace's rate by X: arrivals time-compressed by X, SLOs kept.")] = 1.0,
    slo: Annotated[Optional[float], typer.Option("--slo-ms", help="Override every request's SLO, ms.")] = None,
    slo_old: Annotated[Optional[float], typer.Option("--slo", hidden=True, help="Deprecated spelling of --slo-ms.")] = None,
    slo_from: Annotated[Optional[str], typer.Option("--slo-from", metavar="TABLE", autocompletion=complete.slo_tables, help="Give each request its model's SLO from this profile table (symphony-1080ti, symphony-a100: Symphony Tables 5, 6; or a profiles file with slo_ms), as the paper's experiments do; not with --slo-ms.")] = None,
    record: Annotated[str, typer.Option("--record", metavar="[" + "|".join(RECORD_LEVELS) + "]", autocompletion=complete.fixed(RECORD_LEVELS), help="Which tables to write (each adds to the previous).")] = "requests",
    rules: Annotated[str, typer.Option("--rules", metavar="[paper|artifact]", help="PPipe data plane: the paper's rules or the authors' artifact's (uplink-aware GPU choice, head drop, per-slot receive links, per-stage servers); --set overrides single switches.")] = "paper",
    options: Annotated[Optional[List[str]], typer.Option("--set", help="Policy option key=value (repeatable), e.g. --set lam=3.03.")] = None,
    overhead: Annotated[Optional[str], typer.Option("--overhead", metavar="[model|emulation|none|calibrated]", help="Scheduler overhead: model (default, deterministic), emulation (measured CPU time), none, or calibrated — each decision takes effect the decision delay (dispatch + report hop) a calibrated profile measured later (--profiles from shepherd calibrate).")] = None,
    hardware: Annotated[Optional[str], typer.Option("--hardware", help="GPU type of the workers when the profiles cover several.")] = None,
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, max=bounds.MAX_BATCH, help="Largest batch (Shepherd §5.2: 128).")] = defaults.DEFAULT_MAX_BATCH,
    out: Annotated[Path, typer.Option("-o", "--out", help="Output directory for requests/batches/workers/summary.parquet.")] = Path("results/simulate"),
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the one random generator (also of named traces).")] = 0,
    engine_path: Annotated[str, typer.Option("--engine", metavar="[reference|fast]", help="fast: a policy's compiled fast path (identical outcomes; clockwork, flex, flex-np, nexus, ppipe, symphony, symphony-wc), an error where it has none; reference: the Python engine (PPipe's reserved stages then executed as engine events, each checked). Default: fast where the policy has a fast path for the run's configuration, verified against the policy's current source, else reference (a policy edited since: one note line on stderr; fast: exit 2).")] = "auto",
    groups: Annotated[str, typer.Option("--groups", metavar="[together|apart]", help="Serving groups in one loop, or each its own run merged into the same tables (identical outcomes).")] = "together",
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", help=JOBS_HELP + " Here: serving groups run apart (identical outcomes); with --groups together (the default, unless -j N > 1 is given) one loop.")] = None,
    executor: Annotated[str, typer.Option("--executor", metavar="[local|ray]", help="Where groups run apart: local processes, or Ray tasks (a local cluster of --jobs CPUs, or --ray-address).")] = "local",
    ray_address: Annotated[Optional[str], typer.Option("--ray-address", help=ADDRESS_HELP)] = None,
    exec_time: Annotated[str, typer.Option("--exec-time", metavar="[mean|measured]", help="How long a started batch runs: mean — the profile's latency (default); measured — drawn (seeded) from the samples a calibrated profile carries (shepherd calibrate), while the policy still plans on the profile. measured runs on the reference engine.")] = "mean",
) -> None:
    """Simulate an online policy serving a trace; write per-request, per-batch, per-worker and summary tables.

    Example: shepherd simulate --policy flex --trace trace.parquet --gpus 12 --load 2 --record summary -o results/flex
    """
    _one_blas_thread()  # before numpy's first import
    from shepherd.cli.common import progress
    from shepherd.core.artifacts import artifact_kind, check_output_dir
    from shepherd.core.checks import number
    from shepherd.core.engine import EngineConfig, simulate as run_simulation
    from shepherd.core.policies import registry
    from shepherd.core.sim_inputs import read_simulation_inputs
    from shepherd.traces.resolve import load_trace

    slo = renamed(slo, slo_old, "--slo-ms", "--slo")
    # one --jobs default everywhere (every core) where work runs apart; groups together run one loop
    jobs = default_jobs(jobs) if (jobs is not None or groups == "apart" or executor == "ray") else 1
    check_output_dir(out, "-o")  # before any long work
    # reserved paths (PPipe): recorded at dispatch except on the reference engine, which executes each stage as
    # an event that checks its reservation — the same tables either way (tests/test_ppipe_dataplane.py)
    engine = EngineConfig(path=engine_path, groups=groups, jobs=jobs, executor=executor, ray_address=ray_address,
                          record="summary" if record == "summary" else "all",
                          reserved="events" if engine_path == "reference" else "record")
    engine.validate()
    spec = registry.get(policy)
    if record not in RECORD_LEVELS:
        raise UserError(f"--record must be one of {', '.join(RECORD_LEVELS)}, got '{record}'")
    if exec_time not in ("mean", "measured"):
        raise UserError(f"--exec-time must be mean or measured, got '{exec_time}'")
    if gpus is not None and plan is not None:
        raise UserError("give --gpus or --plan, not both")
    if gpus is None and plan is None:
        raise UserError("give --gpus N or --plan P")
    number("--load", load, low=0, low_open=True, high=1e6)
    if slo is not None:
        number("--slo-ms", slo, low=0, low_open=True, high=1e9)
    if slo is not None and slo_from is not None:
        raise UserError("give --slo-ms (one SLO for every request) or --slo-from TABLE (each model's), not both")
    config = registry.make_config(policy, rule_options(policy, rules) | parse_options(policy, options or []))
    if hasattr(config, "validate"):
        config.validate()
    ovh = spec.cls.default_overhead
    if overhead == "calibrated":
        from shepherd.core.calibration import calibrated_overhead

        ovh = calibrated_overhead(profiles)
    elif overhead is not None:
        ovh = dataclasses.replace(ovh, mode=overhead)
        ovh.validate()
    loaded = load_trace(trace, seed=seed, compact=record == "summary", slo_from=slo_from)
    if loaded.frame.height == 0:
        raise UserError(f"trace {loaded.name} has no requests")
    pipeline = plan is not None and artifact_kind(plan) == "pipeline_plan"
    if pipeline and (load != 1.0 or slo is not None or slo_from is not None):
        raise UserError("--load, --slo-ms and --slo-from do not apply to pipeline plans (their SLOs come from the profiles); "
                        "rescale the trace itself")
    prof_obj, plan_obj, extra = read_simulation_inputs(profiles, plan, loaded.frame, "profiles" in spec.cls.requires)
    execution = None
    if exec_time != "mean":
        from shepherd.core.calibration import execution_model

        if not hasattr(prof_obj, "columns"):
            raise UserError("--exec-time measured needs a calibrated profiles artifact (--profiles from shepherd calibrate)")
        execution = execution_model(prof_obj, "measured", seed)
    span_s = max(1, math.ceil(int(loaded.frame["arrival_us"].max()) / load / 1e6))
    with progress() as bar:
        task = bar.add_task(f"simulating {policy} (simulated s)", total=span_s)
        result = run_simulation(
            loaded.frame, prof_obj, policy, config, gpus=gpus, plan=plan_obj, artifacts=extra, seed=seed, load=load,
            slo_ms=slo, overhead=ovh, max_batch=max_batch, hardware=hardware, engine=engine,
            progress=lambda t: bar.update(task, completed=min(span_s, t / 1e6)), execution=execution,
        )
        bar.update(task, completed=span_s)
    _write_outputs(result, out, record, policy, loaded, profiles, plan, gpus, load, slo, max_batch, hardware,
                   seed, config=dataclasses.asdict(config), overhead=dataclasses.asdict(ovh), exec_time=exec_time,
                   slo_from=slo_from)


def _write_outputs(result, out: Path, record: str, policy: str, loaded, profiles, plan, gpus, load, slo,
                   max_batch, hardware, seed: int, config: dict, overhead: dict | None, exec_time: str = "mean",
                   slo_from: str | None = None) -> None:
    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import artifact_dir, make_provenance, write_artifact
    from shepherd.core.metrics import batch_size_distribution
    from shepherd.core.runinfo import with_run_columns

    summary = with_run_columns(result.summary_frame(), policy=policy, trace=loaded.name, load=load, slo_ms=slo,
                               seed=seed, gpus=gpus, plan=Path(plan).name if plan else None, config=config,
                               synthetic=loaded.synthetic)
    # --record summary: the run kept only running aggregates (a fast path) or the tables; no per-batch strings
    batches = result.batches_frame() if record in ("batches", "requests") else None
    provenance = make_provenance(dict(
        policy=policy, policy_config=config, overhead=overhead,
        trace=loaded.name, synthetic=loaded.synthetic, subset=loaded.subset, profiles=Path(profiles).name if profiles else DEFAULT_PROFILES,
        gpus=gpus, plan=Path(plan).name if plan else None, load=load, slo_ms=slo, record=record,
        max_batch=max_batch, hardware=hardware, **({"exec_time": exec_time} if exec_time != "mean" else {}),
        **({"slo_from": slo_from} if slo_from else {}),
    ), seed, list(loaded.inputs) + ([profiles] if profiles else []) + ([plan] if plan else []))
    ran = {"engine": result.engine_ran}  # which engine ran and why: NAME.run.json (the tables are the same either way)
    with artifact_dir(out) as tmp:  # the folder is replaced whole: never a mix of two runs
        written = [write_artifact(summary, tmp / "summary.parquet", "summary", provenance, run=ran),
                   write_artifact(result.workers_frame(), tmp / "workers.parquet", "workers", provenance, run=ran)]
        if record in ("batches", "requests"):
            written.append(write_artifact(batches, tmp / "batches.parquet", "batches", provenance, run=ran))
        if record == "requests":
            written.append(write_artifact(result.requests_frame(), tmp / "requests.parquet", "requests", provenance,
                                          run=ran))
    dist = (batch_size_distribution(batches) if batches is not None else result.batch_size_distribution())
    dist = dist.sort("requests", descending=True).head(5)
    if dist.height:
        frame_table("most common batch sizes", dist)
    row = summary.row(0, named=True)
    summary_table(f"simulate {policy}", {
        "trace": loaded.label,
        "requests": row["requests"],
        "goodput (req/s)": row["goodput_rps"],
        "SLO attainment": row["slo_attainment"],
        "late / dropped": f"{row['late']:,} / {row['dropped']:,}",
        "utilization (excl. / incl. waste)": f"{row['utilization']:.3f} / {row['utilization_with_waste']:.3f}",
        "latency p50 / p99 (ms)": f"{row['p50_latency_ms'] or 0:.2f} / {row['p99_latency_ms'] or 0:.2f}",
        "mean queueing delay (ms)": row["mean_queue_ms"],
        "mean batch": row["mean_batch"],
        "preemptions (wasted ms)": f"{row['preemptions']:,} ({row['wasted_ms']:,.1f})",
        "engine": f"{result.engine_ran['engine']}: {result.engine_ran['why']}",
        "written": ", ".join(p.name for p in written) + f" in {out}",
    })
