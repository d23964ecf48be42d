"""``shepherd plan``: place streams, models and GPUs into serving groups (thin: parse, call, print)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli import complete
from shepherd.core import bounds
from shepherd.core.errors import UserError

# heavy modules (solvers, polars, the trace builders) are imported inside the functions: `--help` stays fast

MAX_GPUS = bounds.MAX_WORKERS  # core/bounds.py: bounds the ILP's size too
#: the planners and MILP backends, named in --help without importing the solvers (tests/test_cli_conventions.py
#: keeps these equal to solvers.planners.PLANNERS and solvers.backend.BACKENDS)
PLANNER_NAMES = ("herd", "nexus", "single-group", "offline-optimal", "ppipe", "np", "dart-r", "symphony-partition")
SOLVER_NAMES = ("highs", "cbc", "gurobi")


def plan(
    ctx: typer.Context,
    show: Annotated[Optional[List[str]], typer.Argument(metavar="[show PLAN]", show_default=False, help="`shepherd plan show PLAN`: print a plan artifact (groups, solver, status, objective and its meaning) instead of planning.")] = None,
    trace: Annotated[Optional[str], typer.Option("--trace", autocompletion=complete.trace_names, help="Trace artifact path or a named trace (maf2019, maf-synthetic, …).", rich_help_panel="Inputs and output")] = None,
    planner: Annotated[str, typer.Option("--planner", metavar="[" + "|".join(PLANNER_NAMES) + "]", autocompletion=lambda incomplete: [p for p in _planners() if p.startswith(incomplete)], help="Herd (Shepherd §4), Nexus, single-group, offline-optimal (Eq. 3); PPipe's ppipe, np, dart-r; Symphony App. A symphony-partition.", rich_help_panel="Inputs and output")] = "herd",
    profiles: Annotated[Optional[Path], typer.Option("--profiles", help="Profiles artifact (default: built-in shepherd-v100).", rich_help_panel="Inputs and output")] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="Cluster size N (GPUs).", rich_help_panel="Inputs and output")] = 36,
    group_limit: Annotated[int, typer.Option("--group-limit", help="Group-worker limit Ḡ (Shepherd §4 (b)).", rich_help_panel="Herd (Shepherd §4)")] = 12,
    affinity_k: Annotated[float, typer.Option("--affinity-k", help="Affinity bound K̄ for co-located models (inf = one set).", rich_help_panel="Herd (Shepherd §4)")] = math.inf,
    gpu_memory_mb: Annotated[float, typer.Option("--gpu-memory-mb", help="GPU memory per worker, MB (V100: 16384).", rich_help_panel="Herd (Shepherd §4)")] = 16384.0,
    reserve_mb: Annotated[float, typer.Option("--reserve-mb", help="Memory set aside per GPU for batches, MB.", rich_help_panel="Herd (Shepherd §4)")] = 4096.0,
    solver: Annotated[str, typer.Option("--solver", metavar="[" + "|".join(SOLVER_NAMES) + "]", help="MILP backend (python-mip; HiGHS by default).", rich_help_panel="Solver (every MILP planner)")] = "highs",
    time_limit: Annotated[float, typer.Option("--time-limit", help="Solver time limit, s.", rich_help_panel="Solver (every MILP planner)")] = 60.0,
    gap: Annotated[float, typer.Option("--gap", help="Relative MIP gap to stop at (0.01 = 1 %).", rich_help_panel="Solver (every MILP planner)")] = 0.01,
    max_solutions: Annotated[int, typer.Option("--max-solutions", help="Stop after this many feasible solutions (0 = no limit).", rich_help_panel="Solver (every MILP planner)")] = 0,
    epoch_s: Annotated[float, typer.Option("--epoch-s", help="Nexus planning epoch, s.", rich_help_panel="Nexus")] = 60.0,
    time_step_ms: Annotated[Optional[float], typer.Option("--time-step-ms", help="offline-optimal time grid Δ, ms (default: exact gcd).", rich_help_panel="offline-optimal (Shepherd Eq. 3)")] = None,
    hardware: Annotated[str, typer.Option("--hardware", help="GPU type written on worker rows.", rich_help_panel="Inputs and output")] = "V100",
    cluster: Annotated[Optional[str], typer.Option("--cluster", help="ppipe/np/dart-r: Table 1 cluster HC1-L … HC4-S.", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = None,
    bandwidth_gbps: Annotated[Optional[float], typer.Option("--bandwidth-gbps", help="ppipe/np/dart-r: effective NIC bandwidth, Gbit/s (default: Table 1 / 5).", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = None,
    slo_margin: Annotated[float, typer.Option("--slo-margin", help="ppipe/np/dart-r: SLO fraction deducted in the MILP (PPipe §7.1).", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = 0.4,
    slo_scale: Annotated[float, typer.Option("--slo-scale", help="ppipe/np/dart-r: SLO = scale × L4 batch-1 latency.", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = 5.0,
    milp_formulation: Annotated[str, typer.Option("--milp-formulation", help="ppipe/np: 'knapsack' (default: 'counts' plus an exact knapsack relaxation's cut and start; proves every Table 1 100-GPU instance in seconds), 'counts' (integer vGPUs per partition), 'points' (one binary per efficient vGPU vector) or 'hybrid' (counts, then points) — one optimum, different solve times.", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = "knapsack",
    rules: Annotated[str, typer.Option("--rules", metavar="[paper|artifact]", help="ppipe/np/dart-r: the paper's rules or the authors' artifact's (batch-build term, ≤ 2 partitions, whole GPUs per DNN partition, NP without MPS, 10/6 Gbit/s, their DART-r).", rich_help_panel="PPipe planners: ppipe, np, dart-r")] = "paper",
    partitions: Annotated[Optional[int], typer.Option("--partitions", help="symphony-partition: sub-clusters l (default ⌈gpus / group limit⌉).", rich_help_panel="Symphony partitioning (App. A)")] = None,
    rate_cap: Annotated[float, typer.Option("--rate-cap", help="symphony-partition: dispatcher rate cap R_max per sub-cluster, req/s (Eq. 5).", rich_help_panel="Symphony partitioning (App. A)")] = math.inf,
    balance_weight: Annotated[Optional[float], typer.Option("--balance-weight", help="symphony-partition: w in ΔR + w·ΔS (default R̄/S̄).", rich_help_panel="Symphony partitioning (App. A)")] = None,
    previous: Annotated[Optional[Path], typer.Option("--previous", help="symphony-partition: the current plan X' (Eq. 11).", rich_help_panel="Symphony partitioning (App. A)")] = None,
    max_move_cost: Annotated[float, typer.Option("--max-move-cost", help="symphony-partition: C_max, model loads + unloads allowed vs --previous (Eq. 11).", rich_help_panel="Symphony partitioning (App. A)")] = math.inf,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the plan artifact.", rich_help_panel="Inputs and output")] = Path("plan.parquet"),
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of named traces (planners are deterministic; recorded for provenance).", rich_help_panel="Inputs and output")] = 0,
) -> None:
    """Write a plan artifact: stream→group, model→group, group→workers, with solver status in its metadata.

    Example: shepherd plan --trace trace.parquet --planner herd --gpus 36 --group-limit 12 -o plan.parquet

    Example: shepherd plan --trace t.parquet --planner ppipe --profiles blocks.parquet --cluster HC1-L -o pp.parquet

    Example: shepherd plan --trace t.parquet --planner symphony-partition --profiles mem.parquet --gpus 64 --partitions 4 --gpu-memory-mb 11264 --time-limit 10 -o part.parquet

    Example: shepherd plan show plan.parquet
    """
    if show:
        if len(show) != 2 or show[0] != "show":
            raise UserError(f"unexpected argument(s) {' '.join(show)}: `shepherd plan show PLAN` shows a plan; "
                            "to plan, give --trace and options only")
        return show_plan(Path(show[1]))
    if trace is None:
        raise UserError("missing option --trace (or `shepherd plan show PLAN` to show a plan)")
    from shepherd.cli.common import progress, summary_table
    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import check_output_file, make_provenance, read_artifact, write_artifact
    from shepherd.core.checks import number
    from shepherd.core.pipelines.rules import check as check_rules
    from shepherd.solvers.backend import SolverConfig, preflight
    from shepherd.solvers.planners import PlanRequest, get_planner
    from shepherd.solvers.ppipe_planner import PPIPE_PLANNERS
    from shepherd.traces.resolve import load_trace

    check_output_file(out, "-o")  # before any long work
    run = get_planner(planner)
    _refuse_options_that_do_not_apply(ctx, planner)
    solver_cfg = SolverConfig(solver, time_limit, gap, max_solutions=max_solutions).validate()
    number("--gpus", gpus, low=1, high=MAX_GPUS)
    number("--group-limit", group_limit, low=1)
    number("--affinity-k", affinity_k, low=0, low_open=True, allow_inf=True)
    number("--gpu-memory-mb", gpu_memory_mb, low=0, low_open=True)
    number("--reserve-mb", reserve_mb, low=0)
    number("--epoch-s", epoch_s, low=0, low_open=True, high=86_400 * 366)
    if time_step_ms is not None:
        number("--time-step-ms", time_step_ms, low=0, low_open=True)
    if bandwidth_gbps is not None:
        number("--bandwidth-gbps", bandwidth_gbps, low=0, low_open=True)
    number("--slo-margin", slo_margin, low=0, high=0.99)
    number("--slo-scale", slo_scale, low=0, low_open=True, high=1e6)
    if partitions is not None:
        number("--partitions", partitions, low=1, high=MAX_GPUS)
    number("--rate-cap", rate_cap, low=0, low_open=True, allow_inf=True)
    if balance_weight is not None:
        number("--balance-weight", balance_weight, low=0)
    number("--max-move-cost", max_move_cost, low=0, allow_inf=True)
    prev_rows = None
    if previous is not None:
        from shepherd.solvers.symphony_planner import previous_assignment
        prev_rows = tuple(previous_assignment(read_artifact(previous, "plan").frame))
    check_rules(rules)
    preflight(solver)  # fail fast, before the trace is read or anything is solved
    loaded = load_trace(trace, seed=seed)
    pipeline = planner in PPIPE_PLANNERS
    if pipeline and profiles is None:
        raise UserError(f"planner '{planner}' needs --profiles (a block_profiles artifact from profile --from-ppipe)")
    if pipeline:
        prof_frame = read_artifact(profiles, "block_profiles").frame
    else:
        prof_frame = read_artifact(profiles, "profiles").frame if profiles else prof.load_builtin("shepherd-v100")
    missing = sorted(set(loaded.frame["model"].unique().to_list()) - set(prof_frame["model"].unique().to_list()))
    if missing:
        raise UserError(f"profiles have no model '{missing[0]}' (the trace uses {len(missing)} unprofiled model(s))")
    hardware_given = getattr(ctx.get_parameter_source("hardware"), "name", "") == "COMMANDLINE"
    if hardware_given and "hardware" in prof_frame.columns:
        kinds = sorted(prof_frame["hardware"].drop_nulls().unique().to_list())
        if kinds and hardware not in kinds:
            raise UserError(f"--hardware {hardware}: the profiles cover {', '.join(kinds)} only")
    req = PlanRequest(loaded.frame, prof_frame, gpus, solver_cfg, group_limit, affinity_k, gpu_memory_mb,
                      reserve_mb, hardware=hardware, epoch_s=epoch_s, time_step_ms=time_step_ms, cluster=cluster,
                      bandwidth_gbps=bandwidth_gbps, slo_margin=slo_margin, slo_scale=slo_scale,
                      milp_formulation=milp_formulation, partitions=partitions, rate_cap=rate_cap,
                      balance_weight=balance_weight, previous=prev_rows, max_move_cost=max_move_cost, rules=rules)
    with progress() as bar:
        bar.add_task(f"planning ({planner}, {solver})", total=None)
        output = run(req)
    config = dict(planner=planner, trace=loaded.name, synthetic=loaded.synthetic, subset=loaded.subset, gpus=gpus, group_limit=group_limit,
                  affinity_k=affinity_k, gpu_memory_mb=gpu_memory_mb, reserve_mb=reserve_mb, solver=solver,
                  time_limit_s=time_limit, gap=gap, epoch_s=epoch_s, time_step_ms=time_step_ms, hardware=hardware,
                  cluster=cluster, bandwidth_gbps=bandwidth_gbps, slo_margin=slo_margin, slo_scale=slo_scale,
                  milp_formulation=milp_formulation, partitions=partitions, rate_cap=rate_cap,
                  balance_weight=balance_weight, max_move_cost=max_move_cost, rules=rules)
    inputs = list(loaded.inputs) + ([profiles] if profiles else []) + ([previous] if previous else [])
    extra = dict(output.extra)
    write_artifact(output.frame, out, output.kind, make_provenance(config, seed, inputs), extra=extra)
    frame = output.frame
    status = extra.get("status", "")
    if status == "feasible" and extra.get("gap") is not None:
        status = f"feasible, gap {100 * extra['gap']:.2f}%"
    if output.kind == "pipeline_plan":
        summary_table(f"plan ({planner})", {
            "trace": loaded.label,
            "cluster": extra["cluster"]["name"],
            "solver": f"{solver} (python-mip), time limit {time_limit:g} s, gap {100 * gap:g} %",
            "status": status, "gap": extra.get("gap"),
            "objective": f"{extra.get('objective')} — {objective_meaning(planner, extra)}",
            "solve time (s)": extra.get("solve_s"),
            "normalised throughput (req/s)": round(extra["normalized_xput"], 1),
            "pipelines": frame["pipeline"].n_unique() if frame.height else 0,
            "virtual GPUs": int(frame["vgpus"].sum()) if frame.height else 0, "written": out,
        })
        return
    summary_table(f"plan ({planner})", {
        "trace": loaded.label,
        "solver": f"{solver} (python-mip), time limit {time_limit:g} s, gap {100 * gap:g} %",
        "status": status,
        "objective": f"{extra.get('objective')} — {objective_meaning(planner, extra)}",
        "bound": extra.get("bound"),
        "gap": f"{100 * extra['gap']:.3f}%" if extra.get("gap") is not None else "—",
        "solve time (s)": extra.get("solve_s"),
        "groups": frame["group"].n_unique() if frame.height else 0,
        "workers": frame.filter(frame["role"] == "worker").height,
        "streams": frame.filter(frame["role"] == "stream")["name"].n_unique(),
        "written": out,
    })
    if extra.get("warning"):
        typer.echo(f"warning: {extra['warning']}", err=True)


MEANINGS = {
    "herd": "min burst tolerance t = min over model-streams i of (GPUs of i's group) / n_i, n_i its "
            "normalised load (Shepherd §4, Table 2; larger = more headroom for bursts)",
    "nexus": "peak GPUs over the planning epochs (Nexus squishy bin packing; smaller = cheaper)",
    "single-group": "no optimisation: every GPU in one group",
    "offline-optimal": "requests served by their deadline with hindsight (Shepherd Eq. 3; an upper bound for online policies)",
    "ppipe": "max-min normalised throughput t, req/s: every DNN gets ≥ t × its share (PPipe §3 'Objective')",
    "np": "max-min normalised throughput t, req/s, without pipelining (PPipe's NP baseline)",
    "dart-r": "max-min normalised throughput t, req/s, of DART-r's pipelines (PPipe's baseline)",
}


def objective_meaning(planner: str, extra: dict) -> str:
    """What a plan's objective value means, in words (the planner's own name of it when not listed)."""
    return MEANINGS.get(planner) or str(extra.get("objective_name") or "see the planner's documentation")


def show_plan(path: Path) -> None:
    """Print a plan artifact: what made it, solver status and objective, and its groups."""
    import polars as pl

    from shepherd.cli.common import frame_table, summary_table
    from shepherd.core.artifacts import artifact_kind, read_artifact

    if not path.is_file():
        raise UserError(f"plan {path} not found")
    kind = artifact_kind(path)
    if kind not in ("plan", "pipeline_plan"):
        raise UserError(f"{path} is a {kind} artifact, not a plan")
    art = read_artifact(path, kind)
    extra, config = dict(art.extra), dict(art.provenance.get("config", {}))
    planner = str(extra.get("planner") or config.get("planner") or "?")
    frame = art.frame
    rows = {"plan": path, "planner": planner, "trace": config.get("trace"),
            "solver": config.get("solver"), "status": extra.get("status"),
            "objective": f"{extra.get('objective')} — {objective_meaning(planner, extra)}",
            "bound": extra.get("bound"), "gap": extra.get("gap"), "solve time (s)": extra.get("solve_s")}
    if kind == "plan":
        rows.update(groups=frame["group"].n_unique() if frame.height else 0,
                    workers=frame.filter(pl.col("role") == "worker").height,
                    streams=frame.filter(pl.col("role") == "stream")["name"].n_unique())
        summary_table(f"plan {path.name}", rows)
        per_group = frame.group_by("group").agg(
            workers=(pl.col("role") == "worker").sum(),
            models=pl.col("name").filter(pl.col("role") == "model").unique().sort().str.join(", "),
            streams=(pl.col("role") == "stream").sum()).sort("group")
        frame_table("groups", per_group)
    else:
        rows.update(cluster=(extra.get("cluster") or {}).get("name"),
                    pipelines=frame["pipeline"].n_unique() if frame.height else 0)
        summary_table(f"plan {path.name}", rows)
        frame_table("pipelines", frame.head(30))


def _planners() -> list[str]:
    """The planners' names (imports the solvers: called when planning or completing ``--planner``)."""
    from shepherd.solvers.planners import PLANNERS

    return list(PLANNERS)


def option_planners() -> dict[str, tuple[str, ...]]:
    """Options that only some planners read → those planners (the help panels say the same); any other
    planner given one refuses it in one line instead of ignoring it (issue 33 item 9)."""
    from shepherd.solvers.ppipe_planner import PPIPE_PLANNERS

    ppipe = tuple(PPIPE_PLANNERS)
    return {
        "group_limit": ("herd",), "affinity_k": ("herd",), "epoch_s": ("nexus",),
        "time_step_ms": ("offline-optimal",),
        **{name: ppipe for name in ("cluster", "bandwidth_gbps", "slo_margin", "slo_scale", "rules")},
        "milp_formulation": ("ppipe", "np"),
        **{name: ("symphony-partition",) for name in ("partitions", "rate_cap", "balance_weight", "previous",
                                                       "max_move_cost")},
        "hardware": tuple(p for p in _planners() if p not in ppipe),  # PPipe's cluster names its GPU types
    }


def _refuse_options_that_do_not_apply(ctx: typer.Context, planner: str) -> None:
    """One ``error:`` line for an option given on the command line that ``planner`` would ignore."""
    for name, planners in option_planners().items():
        source = ctx.get_parameter_source(name)
        if planner not in planners and source is not None and source.name == "COMMANDLINE":
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag} does not apply to --planner {planner} (only to {', '.join(planners)})")


def plan_import(
    plan_file: Annotated[Path, typer.Argument(help="A plan in the PPipe artifact's JSON format (data/plans/…).")],
    cluster: Annotated[Optional[str], typer.Option("--cluster", help="Table 1 cluster HC1-L … HC4-S (default: from the GPU types and the file name).")] = None,
    weights: Annotated[Optional[str], typer.Option("--weights", help="Workload shares in the file's DNN order, e.g. 0.3,0.33,0.37 (default: from the file name, else equal).")] = None,
    profiles: Annotated[Optional[Path], typer.Option("--profiles", help="block_profiles artifact: check that every DNN is profiled and its layers span its blocks.")] = None,
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the pipeline_plan artifact.")] = Path("plan.parquet"),
) -> None:
    """Import a published PPipe plan (the authors' JSON) as a pipeline_plan artifact for simulate.

    Example: shepherd plan-import data/plans/maf19/…_v4.json -o pp.parquet && shepherd simulate --plan pp.parquet --profiles blocks.parquet --trace t.parquet --policy ppipe --rules artifact
    """
    from shepherd.core.pipelines import blocks
    from shepherd.core.pipelines import plan as pplan
    from shepherd.cli.common import summary_table
    from shepherd.core.artifacts import check_output_file, make_provenance, read_artifact, write_artifact
    from shepherd.core.pipelines.importer import read_plan

    check_output_file(out, "-o")
    shares = None
    if weights is not None:
        try:
            shares = [float(x) for x in weights.split(",")]
        except ValueError:
            raise UserError(f"--weights expects comma-separated numbers, got '{weights}'") from None
    profs = None
    if profiles is not None:
        profs = blocks.from_frame(read_artifact(profiles, "block_profiles").frame)
    result = read_plan(plan_file, cluster, shares, profs)
    extra = pplan.extra_of(result)
    config = dict(command="plan-import", plan_file=Path(plan_file).name, cluster=cluster, weights=weights)
    write_artifact(pplan.to_frame(result), out, "pipeline_plan",
                   make_provenance(config, 0, [plan_file] + ([profiles] if profiles else [])), extra=extra)
    summary_table("plan import", {
        "file": Path(plan_file).name, "cluster": result.cluster.name,
        "bandwidth (Gbit/s)": result.cluster.bandwidth_gbps,
        "DNNs": len(result.slo_us), "pipelines": len(result.pipelines),
        "virtual GPUs": sum(s.vgpus for p in result.pipelines for s in p.stages),
        "normalised throughput (req/s)": round(result.normalized_xput, 1), "written": out,
    })
