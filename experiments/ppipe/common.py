"""Shared setup of the PPipe experiments (PPipe §7.1 "Methodology").

* Profiles: the authors' block timings, found by :func:`shepherd.core.ppipe_data.locate`
  (``shepherd data fetch ppipe`` installs them); SLO = 5 × L4 batch-1 latency.
* DNN groups: the authors' six, fixed, in their artifact's file order
  (``AUTHORS_GROUPS``; G1–G6 here are their G0–G5). The paper's Fig. 7
  group ("G1": EfficientNet-B8, EncNet, RTMDet) is the authors' G3 (our G4).
* Rule sets: every experiment runs under ``paper`` and ``artifact`` rules
  (:mod:`shepherd.core.pipelines.rules`): the planner settings, the cluster
  bandwidth and the PPipe data plane's switches follow the rule set.
* Workloads: "Poisson" — Poisson arrivals with per-DNN shares 0.30/0.33/0.37
  (the MAF 2019 shares in the data README); "Bursty" — the MAF 2021 trace is
  not available here, so a **synthetic stand-in**: a 2-state MMPP per DNN
  (high/low rate ratio 1.25, dwell 0.5 s in each state: ±11 % around the
  mean at sub-second scale) with shares 0.39/0.26/0.35, labelled synthetic in
  every output; its numbers are not a reproduction of the Bursty results.
  (A first choice, ratio 4 with 1 s / 0.25 s dwell, put 2.5× the mean rate in
  the high state and capped every system near load factor 0.4.)
* Load factor 1.0 = the PPipe MILP's planned throughput (§7.1), for every
  system; max load factor at 99 % attainment = the highest factor on a
  downward sweep (step 0.05, 0.1 with ``--quick``, from 1.0) at which a DNN's
  attainment is ≥ 99 %, averaged over the group's DNNs (§7.2).
* The data plane runs with ``EngineConfig(reserved="record")`` (identical
  outcomes to the engine-executed reference, see tests) for speed, which
  runs it on its compiled fast path (``core/engine/fast/ppipe.py``, identical
  tables: ``tests/test_engine_fast_ppipe.py``).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.capacity import scan_down
from shepherd.core.engine import EngineConfig, simulate
from shepherd.core import ppipe_data
from shepherd.core.errors import UserError
from shepherd.experiments.base import Experiment
from shepherd.core.pipelines import blocks
from shepherd.core.pipelines import rules as rule_sets
from shepherd.core.pipelines.cluster import ClusterSpec, make_cluster
from shepherd.core.pipelines.plan import PipelinePlan, place
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_baselines import PIPELINE_PLANNERS
from shepherd.solvers.ppipe_milp import PPipePlanConfig
from shepherd.traces.arrivals import mmpp, mmpp_rates, poisson
from shepherd.traces.synthetic import assemble

CLUSTERS = ("HC1-L", "HC2-L", "HC3-L", "HC4-L")
SYSTEMS = ("ppipe", "np", "dart-r")
LABELS = {"ppipe": "PPipe", "np": "NP", "dart-r": "DART-r", "reactive": "Reactive"}
WEIGHTS = {"poisson": (0.30, 0.33, 0.37), "bursty": (0.39, 0.26, 0.35)}
G1 = ("efficientnet-b8_3rdparty_8xb32-aa-advprop_in1k", "encnet_r101-d8_4xb2-40k_cityscapes-512x1024",
      "rtmdet_x_8xb32-300e_coco")
#: the authors' DNN groups (artifact ``data/plans/maf19``, file order), by name prefix
AUTHORS_GROUPS = (
    ("apcnet_r101-d8", "atss_r101_fpn", "gcnet_r101-d8"),
    ("centernet-update_r50", "convnext_large", "dnl_r101-d8"),
    ("colorization-v2", "googlenet-v3-pytorch", "repvgg-b3"),
    ("efficientnet-b8", "encnet_r101-d8", "rtmdet_x"),
    ("fcn-d6_r101-d16", "gfl_x101-32x4d", "wide_resnet101_2"),
    ("fsaf_r101_fpn", "nonlocal_r101-d8", "tf_efficientdet_d1"),
)
RULE_SETS = ("paper", "artifact")
TARGET = 0.99
BURSTY_MMPP = (1.25, 0.5, 0.5)  # high/low ratio, dwell low (s), dwell high (s)
WORKLOAD_TAG = {"poisson": "poisson", "bursty": "mmpp-1.25-0.5-0.5"}  # in cell params: a new stand-in re-runs
SOLVER = SolverConfig("highs", 30.0, 0.01)


def data_dir() -> Path:
    """The authors' data folder (:func:`shepherd.core.ppipe_data.require`: one error naming `shepherd data fetch ppipe`)."""
    return ppipe_data.require()


class PPipeExperiment(Experiment):
    """A PPipe figure: needs the authors' data, checked before the run creates its results folder."""

    def check_inputs(self, scale: Any = None) -> None:  # noqa: ARG002 - the base's signature
        data_dir()

    def prepare(self, results_dir: Path, scale: Any) -> str | None:  # noqa: ARG002 - the base's signature
        return f"PPipe data: {data_dir()}"


@lru_cache(maxsize=None)
def profiles() -> dict[str, blocks.BlockProfile]:
    return {p.model: p for p in blocks.read_ppipe_dir(data_dir())}


@lru_cache(maxsize=None)
def groups() -> tuple[tuple[str, ...], ...]:
    """The authors' six groups (``AUTHORS_GROUPS``) with the models' full names."""
    names = blocks.model_list(data_dir())
    out = []
    for g in AUTHORS_GROUPS:
        full = []
        for short in g:
            hits = [m for m in names if m == short or m.startswith(short + "_") or m.startswith(short + "-")]
            if len(hits) != 1:
                raise UserError(f"PPipe data: model '{short}' of the authors' groups is missing or ambiguous")
            full.append(hits[0])
        out.append(tuple(full))
    return tuple(out)


def weights_for(group: tuple[str, ...], workload: str) -> dict[str, float]:
    return dict(zip(group, WEIGHTS[workload]))


def rules_cluster(cluster: ClusterSpec, rules: str) -> ClusterSpec:
    """``cluster`` with the rule set's bandwidth (the artifact's 10 / 6 Gbit/s; paper: unchanged)."""
    bw = rule_sets.bandwidth_gbps(cluster.name, rules)
    return cluster if bw is None else cluster.with_bandwidth(bw)


def dataplane(policy: str, rules: str) -> Any:
    """The data-plane policy config of a rule set (``None``: the policy's defaults)."""
    if policy != "ppipe":
        return None
    from shepherd.core.policies.ppipe import PPipeDataPlaneConfig

    return PPipeDataPlaneConfig(**rule_sets.dataplane_fields(rules))


@lru_cache(maxsize=256)
def plan(planner: str, cluster: ClusterSpec, group: tuple[str, ...], workload: str, margin: float = 0.4,
         slo_scale: float = 5.0, solver: SolverConfig = SOLVER, rules: str = "paper") -> PipelinePlan:
    """The ``planner``'s plan under a rule set (its planner settings and bandwidth; ``cluster`` as given
    for ``paper``)."""
    profs = profiles()
    cluster = rules_cluster(cluster, rules)
    cfg = PPipePlanConfig(slo_margin=margin, slo_scale=slo_scale, **rule_sets.planner_fields(rules))
    w = weights_for(group, workload) if len(group) == 3 else {group[0]: 1.0}
    return PIPELINE_PLANNERS[planner]([profs[m] for m in group], w, cluster, cfg, solver)


def make_trace(rates: dict[str, float], slo_us: dict[str, int], seconds: float, seed: int,
               workload: str) -> pl.DataFrame:
    """Arrivals per DNN at ``rates`` (req/s): Poisson, or the synthetic bursty MMPP stand-in."""
    rng = np.random.default_rng(seed)
    models = sorted(rates)
    dur = int(seconds * 1e6)
    arrs = []
    for m in models:
        r = max(rates[m], 1e-9)
        if workload == "poisson":
            arrs.append(poisson(rng, r, dur))
        else:
            arrs.append(mmpp(rng, mmpp_rates(r, *BURSTY_MMPP), dur))
    return assemble(arrs, models, [slo_us[m] for m in models])


def attainment(res: Any, models: list[str]) -> dict[str, float]:
    out = res.recorder.r_outcome
    idx = res.engine.model
    att = {}
    for i, m in enumerate(res.models):
        mine = idx == i
        att[m] = float((out[mine] == 1).mean()) if mine.any() else 1.0
    return {m: att.get(m, 1.0) for m in models}


def utilization(res: Any, p: PipelinePlan, seconds: float) -> dict[str, float]:
    """Temporal utilization per GPU class: Σ vGPU busy / k over (class GPUs × duration) (Fig. 8).

    A 1/k virtual GPU busy for t counts as t/k of its physical GPU (documented
    approximation of "GPU busy" under MPS); unused GPUs count as idle.
    """
    busy = res.recorder.w_busy
    share: dict[str, float] = {}
    for v, w in zip(place(p), res.cluster.workers):
        share[w.hardware] = share.get(w.hardware, 0.0) + busy[w.id] / v.k
    out = {}
    for pool in p.cluster.pools:
        cls = "high" if pool.high else "low"
        out[cls] = share.get(pool.hardware, 0.0) / max(pool.count * seconds * 1e6, 1.0)
    return out


def sweep(p: PipelinePlan, capacity: float, group: tuple[str, ...], workload: str, seconds: float, seed: int,
          step: float, policy: str = "ppipe", stop_when_found: bool = True,
          lfs: list[float] | None = None, rules: str = "paper") -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Downward load-factor sweep; per DNN the highest factor with attainment ≥ 99 %
    (:func:`shepherd.core.capacity.scan_down`, the one capacity mechanism); also every run's numbers."""
    profs = profiles()
    w = weights_for(group, workload) if len(group) == 3 else {group[0]: 1.0}
    grid = lfs or [round(1.0 - i * step, 4) for i in range(int(round(1.0 / step)))]
    runs: list[dict[str, Any]] = []
    slo = {m: profs[m].slo_us() for m in group} | p.slo_us
    engine = EngineConfig(reserved="record")  # a speed switch: the same outcomes as "events"

    def holds_at(lf: float) -> dict[str, bool]:
        rates = {m: lf * capacity * w[m] for m in group}
        trace = make_trace(rates, slo, seconds, seed, workload)
        res = simulate(trace, profs, policy, dataplane(policy, rules), plan=p, seed=seed, engine=engine)
        att = attainment(res, list(group))
        runs.append({"lf": lf, "att": att, "util": utilization(res, p, seconds)})
        return {m: a >= TARGET for m, a in att.items()}

    found = scan_down(grid, holds_at, list(group), stop_when_found=stop_when_found)
    return found, runs


def tagged(frame: pl.DataFrame, p: dict) -> pl.DataFrame:
    """A cell's rows with its rule set in a ``rules`` column."""
    return frame.with_columns(pl.lit(p.get("rules", "paper")).alias("rules"))


def by_rules(make, results: pl.DataFrame, figures_dir: Path):
    """One report section for both rule sets: ``make(results, figures_dir)`` on the paper-rules rows gives
    the section (its figures, claims, notes; headline "ours"); on the artifact-rules rows (figures in
    ``figures_dir/artifact-rules``) it fills each headline's artifact column and adds its claims, marked."""
    from dataclasses import replace

    if "rules" not in results.columns:
        return make(results, figures_dir)
    paper_rows = results.filter(pl.col("rules") == "paper")
    art_rows = results.filter(pl.col("rules") == "artifact")
    if art_rows.height == 0:
        return make(paper_rows, figures_dir)
    if paper_rows.height == 0:
        sec = make(art_rows, figures_dir)
        sec.notes.append("Artifact rules only: no paper-rules rows were collected.")
        return sec
    sec = make(paper_rows, figures_dir)
    art = make(art_rows, figures_dir / "artifact-rules")
    by_what = {h.what: h for h in art.headlines}
    sec.headlines = [replace(h, artifact=by_what[h.what].ours, artifact_half_width=by_what[h.what].half_width)
                     if h.what in by_what else h for h in sec.headlines]
    sec.claims += [replace(cl, text=f"[artifact rules] {cl.text}") for cl in art.claims]
    sec.figures += art.figures
    sec.notes.append("Both rule sets (`--rules paper|artifact`, core/pipelines/rules.py): the figure(s) and "
                     "claims without a mark are under the paper's rules; the second figure and the "
                     "[artifact rules] claims under the authors' artifact's (planner settings, bandwidth, data "
                     "plane). Groups: the authors' six (G1–G6 = their G0–G5).")
    return sec
