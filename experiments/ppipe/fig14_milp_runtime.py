"""PPipe Fig. 14: MILP runtime vs GPU count (HC1-L scaled 100 … 100k) and vs number of GPU types.

DNN groups G2–G3 (``--quick``) or G1–G6, "Poisson" shares, the default
open-source backend (HiGHS, gap 1 %); the median over groups is reported.
(a) HC1-L's 1:3 L4:P4 mix scaled to 100, 1k, 10k, 100k GPUs: "the MILP
runtime remains nearly constant" (§7.6); (b) 2, 3 and 4 GPU types (L4+P4;
L4+T4+P4; V100+L4+T4+P4, 100 GPUs, 10 Gbit/s effective, one GPU per
server): paper 3.5 s (average), 35.3 s and 77.0 s with Gurobi on 64 cores.

Our MILP's default "knapsack" formulation (:mod:`shepherd.solvers.ppipe_milp`)
cuts ``t`` at an exact two-type DP relaxation on (a)'s 100-GPU cluster and
at its surrogate form (two weighted sums of the types' units,
:mod:`shepherd.solvers.ppipe_knapsack`) on (b)'s 3- and 4-type clusters,
which is looser: on 3 types within ~1 % of the proven incumbent (every cell
closes, 15–172 s, 2 shared cores); on 4 types the splits into two pairs of
types are tried too (G2: 5,057 instead of 5,447, against a 5,015
incumbent), yet the paper-rules 4-type cells still take 2–3 minutes and G4
(and probably G3) stops at the time limit: finding the incumbent is what is
left; status and gap are in the data and the headline. Past
``MAX_GRID_CELLS`` (HC1-L at ≥ 1,000 GPUs) the MILP solves without the cut.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from shepherd.core.pipelines.cluster import custom_cluster
from shepherd.experiments.base import Claim, Headline, Section
from shepherd.experiments.ppipe import common as c
from shepherd.experiments.registry import register
from shepherd.solvers.backend import SolverConfig

TYPES = {2: {"L4": 25, "P4": 75}, 3: {"L4": 25, "T4": 38, "P4": 37}, 4: {"V100": 25, "L4": 25, "T4": 25, "P4": 25}}
PAPER_TYPES = {2: 3.5, 3: 35.3, 4: 77.0}


class Fig14(c.PPipeExperiment):
    name = "ppipe-fig14"
    paper = "ppipe"
    title = "PPipe Fig. 14: MILP runtime vs GPU count and GPU types"

    def cells(self, scale):
        limit = 20.0 if scale.quick else 300.0
        sizes = (100, 10_000, 100_000) if scale.quick else (100, 1_000, 10_000, 100_000)
        groups = (1, 2) if scale.quick else range(6)
        return ([self.cell(panel="gpus", value=n, group=g, time_limit=limit, rules=r)
                 for r in c.RULE_SETS for n in sizes for g in groups]
                + [self.cell(panel="types", value=k, group=g, time_limit=limit, rules=r)
                   for r in c.RULE_SETS for k in TYPES for g in groups])

    def run_cell(self, p):
        if p["panel"] == "gpus":
            cluster = c.make_cluster("HC1-L").scaled(int(p["value"]))
        else:
            cluster = custom_cluster(TYPES[int(p["value"])], 10.0, name=f"{p['value']}-types")
        solver = SolverConfig("highs", float(p["time_limit"]), 0.01)
        cpu = time.process_time()  # the planner itself, never a plan this process cached earlier
        plan = c.plan.__wrapped__("ppipe", cluster, c.groups()[p["group"]], "poisson", solver=solver,
                                  rules=p.get("rules", "paper"))
        cpu_s = time.process_time() - cpu
        return c.tagged(pl.DataFrame([dict(panel=p["panel"], value=int(p["value"]), group=p["group"] + 1,
                                  solve_s=float(plan.meta["solve_s"]), cpu_s=float(cpu_s),
                                  status=str(plan.meta["status"]), gap=float(plan.meta.get("gap") or 0.0),
                                  candidates=int(plan.meta["candidates"]), xput=plan.normalized_xput)]), p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        return c.by_rules(self._report, results, figures_dir)

    def _report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        fig, axes = plotting.figure(ncols=2, width=4)
        med = results.group_by("panel", "value").agg(pl.col("solve_s").median(), pl.col("gap").max(),
                                                      (pl.col("status") == "optimal").all().alias("all_optimal"))
        g = med.filter(pl.col("panel") == "gpus").sort("value")
        sns.lineplot(data=g.to_pandas(), x="value", y="solve_s", marker="o", ax=axes[0][0])
        axes[0][0].set_xscale("log")
        axes[0][0].set_xlabel("GPUs")
        t = med.filter(pl.col("panel") == "types").sort("value")
        sns.barplot(data=t.to_pandas(), x="value", y="solve_s", ax=axes[0][1])
        axes[0][1].set_xlabel("GPU types")
        figures = save_figure(fig, figures_dir, "ppipe-fig14")
        def status(r):  # noqa: ANN001, ANN202
            return "all optimal" if r["all_optimal"] else f"worst gap {100 * r['gap']:.2f} %"

        headlines = [Headline(f"{r['value']} GPU types: median MILP wall time ({status(r)})",
                              PAPER_TYPES[r["value"]], r["solve_s"], unit="s") for r in t.iter_rows(named=True)]
        headlines += [Headline(f"{r['value']:,} GPUs: median MILP wall time ({status(r)})", None, r["solve_s"], unit="s")
                      for r in g.iter_rows(named=True)]
        return Section(self.title, figures, headlines, cpu_claims(results),
                       ["Paper timings are Gurobi on a 64-core n1-standard-64; ours are HiGHS, single process. "
                        "The figure and the rows are wall-clock seconds (not judged); the two claims are judged "
                        "on the planner's CPU seconds (issue 41: no wall-clock figure decides a claim — a busy "
                        "machine stretches wall time, not the solver's work)."])


#: the claims about runtime, judged on CPU seconds of the planner (``cpu_s``), never on wall-clock
CPU_CLAIMS = ("§7.6 \"14(a) shows that the MILP runtime remains nearly constant\" from 100 to 100k GPUs (per DNN "
              "group: planner CPU seconds at the largest size − (3 × at 100 GPUs + 1 s): ≤ 0)",
              "§7.6 \"the number of GPU types has a higher impact on MILP runtime\" — more GPU types → longer MILP "
              "(per DNN group: planner CPU seconds at the most types − at 2 types: > 0)")


def cpu_claims(results: pl.DataFrame) -> list[Claim]:
    """§7.6's two runtime claims, judged from the planner's CPU seconds with one value per DNN group (the
    medians over groups are the detail); cells from before the CPU column (``cpu_s``) leave both not judged."""
    from shepherd.experiments.judge import NOT_JUDGED

    if "cpu_s" not in results.columns or results["cpu_s"].null_count():
        why = ("not judged: these cells predate the CPU-time column; re-run `shepherd reproduce ppipe-fig14` "
               "(wall-clock does not decide a claim)")
        return [Claim(text, False, why, state=NOT_JUDGED) for text in CPU_CLAIMS]
    from shepherd.experiments.judge import Rule, judge_claim, seed_values

    med = results.group_by("panel", "value").agg(pl.col("cpu_s").median(), pl.col("solve_s").median())
    g = med.filter(pl.col("panel") == "gpus").sort("value")
    t = med.filter(pl.col("panel") == "types").sort("value")
    first, last = (float(g["cpu_s"][0]), float(g["cpu_s"][-1])) if g.height else (0.0, 0.0)

    def cpu(f: pl.DataFrame, panel: str, value: int) -> float:
        at = f.filter((pl.col("panel") == panel) & (pl.col("value") == value))["cpu_s"]
        return float(at[0]) if at.len() else float("nan")

    # the replicates are the DNN groups (the planner has no seed): one value per group
    if "group" not in results.columns:
        results = results.with_columns(group=pl.lit(1))
    sizes, kinds = sorted(g["value"].to_list()), sorted(t["value"].to_list())
    flat = (seed_values(lambda f: cpu(f, "gpus", sizes[-1]) - (3 * cpu(f, "gpus", sizes[0]) + 1.0), results,
                        seed="group") if sizes else [])
    more = (seed_values(lambda f: cpu(f, "types", kinds[-1]) - cpu(f, "types", kinds[0]), results, seed="group")
            if len(kinds) > 1 else [])
    return [judge_claim(CPU_CLAIMS[0], Rule.at_most(0.0, unit="CPU-s"), flat,
                  f"{first:.2f} → {last:.2f} CPU-s (wall {float(g['solve_s'][0]) if g.height else 0:.2f} → "
                  f"{float(g['solve_s'][-1]) if g.height else 0:.2f} s, not judged); the default formulation adds "
                  "the knapsack relaxation's cut and start only while its DP grid fits "
                  "(solvers.ppipe_knapsack.MAX_GRID_CELLS: the 100-GPU cluster), past it the MILP solves alone, so "
                  "the sizes are not solved alike; one value per DNN group"),
            judge_claim(CPU_CLAIMS[1], Rule.above(0.0, "CPU-s"), more,
                        ", ".join(f"{r['value']}: {r['cpu_s']:.1f} CPU-s" for r in t.iter_rows(named=True))
                        + "; one value per DNN group")]


EXPERIMENT = register(Fig14())
