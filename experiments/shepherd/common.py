"""Shared setup of the Shepherd experiments (Shepherd §7 "Setup").

* Profiles: Table 4 (``shepherd-v100``); 12 V100 workers on the testbed,
  emulated workers up to 400 (§7.1 "Scheduler scalability").
* Streams: MAF functions assigned round-robin to the models, SLO 250 ms.
  MAF-stable expands each minute with a Poisson process, MAF-bursty with an
  MMPP (§7 "Workloads"). When the real MAF 2019 trace is in the data cache
  (``shepherd traces fetch maf2019``) the experiments use it; otherwise the
  testbed figures (7–9) run on the packaged real sample ``maf2019-sample`` and
  the emulations it cannot serve (Figs. 2–5, 10, 11(b)) on the calibrated
  synthetic stand-in ``maf-synthetic`` (:func:`trace_name`); every result says
  which. When the MAF 2019 data is only a subset (the packaged sample, an
  imported one), figures and REPORT.md say that too
  (:func:`shepherd.experiments.plotting.subset_note`).
* Shepherd = Herd (Ḡ = 12, one affinity set; heavy streams split over
  sub-streams by the router, see :func:`shepherd_inputs`) + Flex; Clockwork and Nexus
  (60 s epochs, peak provisioning) serve all workers as one group.
* Horizon: one minute of the trace at full scale; the first 20 s with
  ``--quick``. The Nexus epoch stays 60 s at both scales (Shepherd §7), so
  every run is Nexus's first epoch, warm-started from its own peaks (see
  :mod:`shepherd.core.policies.nexus`): the paper's previous-window mismatch
  (provisioned for the last minute's peak, serving this minute's load) only
  shows on runs of several minutes. Documented choice: a longer quick run
  costs all three systems ~6–9× (the trace's function→model mix depends on
  its length, so Nexus cannot run longer alone on the same trace), and a
  shorter epoch does not show it either — MAF-stable's rate only changes
  at minute boundaries. Measured on 180 s (3 epochs, seed 0, MAF-stable
  sample): Nexus utilization per epoch 0.84 / 0.89 / 0.81 at 48k req/s
  before the admitted-peak planning; see the Nexus docstring.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import polars as pl

from shepherd.core.engine import simulate
from shepherd.core.profiles import load_builtin
from shepherd.experiments.base import Cell
from shepherd.experiments.base import is_synthetic  # noqa: F401 - re-exported for the figure modules
from shepherd.solvers.demand import split_heavy_streams
from shepherd.solvers.planners import PlanRequest, get_planner
from shepherd.traces import fetch
from shepherd.traces.resolve import load_trace
from shepherd.traces.stats import duration_us

PROFILE_TABLE = "shepherd-v100"
DEFAULT_SLO_MS = 250.0
TESTBED_GPUS = 12
GROUP_LIMIT = 12
SYSTEMS = ("shepherd", "clockwork", "nexus")
LABELS = {"shepherd": "Shepherd", "clockwork": "Clockwork", "nexus": "Nexus",
          "shepherd-np": "Shepherd-NP"}
POLICY = {"shepherd": "flex", "shepherd-np": "flex-np", "clockwork": "clockwork", "nexus": "nexus"}
#: policy options of the compared systems in the main-job figures (7–10): Clockwork's
#: controller rejects what it predicts it cannot serve (see :mod:`shepherd.core.policies.clockwork`;
#: without it EDF collapses under overload, 8.1k → 2.2k req/s on Fig. 7)
CONFIG = {"clockwork": {"admission": "predictive"}}
SUMMARY_COLUMNS = ("requests", "good", "goodput_rps", "slo_attainment", "utilization",
                   "utilization_with_waste", "p50_latency_ms", "p99_latency_ms", "drop_rate",
                   "preemptions", "workers", "groups")


def horizon_s(quick: bool, scalability: bool = False) -> float:
    """Simulated seconds per cell: one minute at full scale; 20 s with --quick
    (10 s for the up-to-400-worker scalability runs)."""
    if not quick:
        return 60.0
    return 10.0 if scalability else 20.0


def real_maf_available() -> bool:
    entry = fetch.read_registry().get("maf2019")
    return bool(entry) and Path(entry["path"]).exists()


def trace_name(workload: str, emulated: bool = False) -> str:
    """``stable``/``bursty`` → the trace a figure runs on, and labels itself with.

    The full MAF 2019 trace when it is in the data cache. Otherwise the
    packaged real sample (``maf2019-sample``: 500 functions × 8 hours, rescaled
    to the load) for the testbed figures (7, 8, 9: 12 workers); the
    calibrated synthetic stand-in (``maf-synthetic``) for the scales the sample
    cannot serve (``emulated``: up to 400 workers and thousands of streams,
    Figs. 2–5, 10, 11(b)).
    """
    if real_maf_available():
        return f"maf2019-{workload}"
    if not emulated:
        return "maf2019-sample" if workload == "stable" else "maf2019-sample-bursty"
    return "maf-synthetic" if workload == "stable" else "maf-synthetic-bursty"


@lru_cache(maxsize=1)
def profiles() -> pl.DataFrame:
    return load_builtin(PROFILE_TABLE)


def workload(name: str, load_rps: float, seed: int, horizon: float, slo_ms: float = DEFAULT_SLO_MS):
    """A trace frame at ``load_rps`` requests/s over ``horizon`` seconds, and whether it is synthetic."""
    loaded = load_trace(name, duration_min=max(1, math.ceil(horizon / 60.0)), load=load_rps,
                        seed=seed, slo_ms=slo_ms)
    frame = loaded.frame.filter(pl.col("arrival_us") < int(horizon * 1e6))
    return frame, loaded.synthetic


def herd_plan(trace: pl.DataFrame, gpus: int, group_limit: int = GROUP_LIMIT) -> pl.DataFrame:
    """Herd's grouping of ``gpus`` workers (Shepherd §4) for this trace.

    Each model may be sharded into as many model-streams as there are groups
    (⌈N/Ḡ⌉; :func:`~shepherd.solvers.demand.shard_streams`), so that Herd's
    load balance (phase 3, :mod:`shepherd.solvers.herd`) can give every group
    a slice of every busy model. The planner's default (⌈groups / models⌉)
    only fills the groups: with one model carrying most of the demand (BERT:
    73 % of the GPU demand of the seed-0 synthetic trace) its two shards
    overloaded two groups ~10× while most groups idled.
    """
    req = PlanRequest(trace=trace, profiles=profiles(), gpus=gpus, group_limit=group_limit,
                      shards=max(1, math.ceil(gpus / group_limit)))
    return get_planner("herd")(req).frame


def shepherd_inputs(trace: pl.DataFrame, gpus: int, group_limit: int = GROUP_LIMIT
                    ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The trace as Shepherd's router labels it, and Herd's plan for it (N > Ḡ).

    Streams heavier than a quarter of a full group's fair share of the demand
    are dealt over sub-streams (:func:`~shepherd.solvers.demand.split_heavy_streams`):
    with the load scaled per worker (Fig. 10, 11(b)) the busiest stream grows
    with N while a group stays at Ḡ GPUs, so without the split one stream
    alone overloads its group (measured, seed 0, N = 400: a 199-GPU stream in
    a 12-GPU group; per-worker goodput 72 % of offered vs 95 % at N = 12).
    The requests are unchanged, only their stream labels.
    """
    routed = split_heavy_streams(trace, profiles(), gpus, group_limit)
    return routed, herd_plan(routed, gpus, group_limit)


def simulate_system(system: str, trace: pl.DataFrame, gpus: int, seed: int,
                    group_limit: int = GROUP_LIMIT, **sim: Any):
    """Simulate one compared system: Shepherd runs Flex on Herd's groups, the
    baselines serve all ``gpus`` workers as one group. With ``gpus ≤ Ḡ`` Herd's
    answer is one group of all workers (constraint (b) allows it and it
    maximises every stream's burst tolerance), so the planner is skipped."""
    if system in ("shepherd", "shepherd-np") and gpus > group_limit:
        routed, plan = shepherd_inputs(trace, gpus, group_limit)
        return simulate(routed, profiles(), POLICY[system], plan=plan, seed=seed, **sim)
    return simulate(trace, profiles(), POLICY[system], CONFIG.get(system), gpus=gpus, seed=seed, **sim)


def run_system(system: str, trace: pl.DataFrame, gpus: int, seed: int,
               group_limit: int = GROUP_LIMIT, **sim: Any) -> dict[str, Any]:
    """Simulate one compared system; returns the summary row (selected columns)."""
    result = simulate_system(system, trace, gpus, seed, group_limit, **sim)
    return summary_row(result, trace)


#: latency percentiles 0…100 of the admitted requests, stored with every load cell (Fig. 8)
PERCENTILES = tuple(range(101))
#: the experiment whose cells are the load cells: Fig. 8 names the same cells, so they run once
LOAD_CELLS = "shepherd-fig7"


def load_cell(workload: str, load: float, system: str, seed: int, quick: bool) -> Cell:
    """One system on the 12-worker testbed at one offered load (Fig. 7's grid point).

    Fig. 8 asks for the cells of its loads through this too: the same
    parameters under the same experiment give the same content key, so the
    runner finds Fig. 7's result and the 144k cells are not simulated twice.
    """
    return Cell(LOAD_CELLS, dict(workload=workload, trace=trace_name(workload), load=load, system=system,
                                 seed=seed, horizon_s=horizon_s(quick), gpus=TESTBED_GPUS))


def run_load_cell(p: Mapping[str, Any]) -> pl.DataFrame:
    """A load cell's row: the summary columns and the admitted requests' latency percentiles
    (``latency_pct_ms``, :data:`PERCENTILES`; "admitted" = executed, on time or late)."""
    trace, synthetic = workload(p["trace"], p["load"], p["seed"], p["horizon_s"])
    result = simulate_system(p["system"], trace, p["gpus"], p["seed"])
    req = result.requests_frame().filter(pl.col("finish_us").is_not_null())
    lat_ms = ((req["finish_us"] - req["arrival_us"]) / 1000).to_numpy()
    pct = (np.percentile(lat_ms, PERCENTILES) if lat_ms.size else np.full(len(PERCENTILES), np.nan)).tolist()
    return pl.DataFrame([{**summary_row(result, trace), "admitted": int(lat_ms.size), "synthetic": synthetic}]
                        ).with_columns(pl.Series("latency_pct_ms", [pct], dtype=pl.List(pl.Float64)))


def summary_row(result, trace: pl.DataFrame) -> dict[str, Any]:
    """The summary columns the experiments keep (``workers`` → ``workers_used``:
    a cell's own ``workers`` parameter names the cluster size)."""
    row = result.summary_frame().row(0, named=True)
    out = {("workers_used" if k == "workers" else k): row[k] for k in SUMMARY_COLUMNS if k in row}
    out["offered_rps"] = trace.height / max(duration_us(trace) / 1e6, 1e-9)
    return out


def one_row(**values: Any) -> pl.DataFrame:
    return pl.DataFrame([values])


def where(frame: pl.DataFrame, **equal: Any) -> pl.DataFrame:
    """The rows whose columns equal the given values."""
    return frame.filter(*[pl.col(k) == v for k, v in equal.items()]) if equal else frame


def val(one_seed: pl.DataFrame, value: str, **equal: Any) -> float:
    """The one ``value`` of one seed's rows with these column values (a claim's per-seed quantity)."""
    rows = where(one_seed, **equal)
    if rows.height != 1:
        raise KeyError(f"{equal}: {rows.height} rows")
    return float(rows[value][0])


def lookup(ci: pl.DataFrame, **equal: Any) -> Mapping[str, Any]:
    rows = where(ci, **equal)
    if rows.height != 1:
        raise KeyError(f"{equal}: {rows.height} rows")
    return rows.row(0, named=True)


def seed_ratios(results: pl.DataFrame, a: str, b: str, value: str, **equal: Any) -> list[float]:
    """value(a)/value(b) per seed, paired by seed, in seed order (∞ where b's is 0: the judge calls that
    row inconclusive)."""
    rows = where(results, **equal)
    wide = rows.filter(pl.col("system") == a).select("seed", pl.col(value).alias("a")).join(
        rows.filter(pl.col("system") == b).select("seed", pl.col(value).alias("b")), on="seed").sort("seed")
    return [ra / rb if rb else float("inf") for ra, rb in zip(wide["a"], wide["b"])]


def paired_ratio(results: pl.DataFrame, a: str, b: str, value: str, **equal: Any) -> tuple[float, float]:
    """Mean and 95 % half-width over seeds of value(a)/value(b), paired by seed."""
    from shepherd.experiments.confidence import half_width

    ratios = seed_ratios(results, a, b, value, **equal)
    if not ratios:
        return float("nan"), 0.0
    return sum(ratios) / len(ratios), half_width(ratios)


#: Requests/s per emulated worker in the scalability runs (Fig. 10, Fig. 11(b)):
#: "a low enough load per worker to ensure any requests dropped in SHEPHERD and
#: Clockwork are solely due to the scheduler's failure to scale" (§7.1).
#: Documented choice: 300 req/s/worker, about half of a V100's Table 4
#: throughput at large batches averaged over the 17 models.
LOAD_PER_WORKER = 300.0


def scaled_trace(name: str, workers: int, seed: int, horizon: float):
    """The trace ``name`` with its total load scaled with the number of workers."""
    return workload(name, LOAD_PER_WORKER * workers, seed, horizon)


def plot_per_workload(results: pl.DataFrame, x: str, figures_dir, stem: str) -> list:
    """One goodput panel per workload (MAF-stable, MAF-bursty), a line per system."""
    from shepherd.experiments import plotting
    from shepherd.experiments.report import save_figure

    data = results.with_columns(pl.col("system").replace_strict(LABELS).alias("System"),
                                (pl.col("goodput_rps") / 1000).alias("goodput (k req/s)"))
    fig, axes = plotting.figure(ncols=2)
    for i, w in enumerate(("stable", "bursty")):
        plotting.lines(axes[0][i], data.filter(pl.col("workload") == w), x, "goodput (k req/s)", "System",
                       [LABELS[s] for s in SYSTEMS])
        axes[0][i].set_title(f"MAF-{w}")
    plotting.synthetic_caption(fig, is_synthetic(results), results)
    return save_figure(fig, figures_dir, stem)
