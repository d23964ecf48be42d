"""Shepherd Table 5: Herd's solver latency vs scale (200k…1M streams, Ḡ = 12).

Instances from :func:`shepherd.solvers.instances.table5_instance`; the
default open-source backend (HiGHS) on this machine against the paper's
solver times (Gurobi on their hardware). Network and model-loading latencies
of Table 5 are properties of the testbed and are not modelled. Solve time is
a measurement, so these cells are the one place where results differ run to
run; the plan itself (objective, groups) is deterministic.

No wall-clock time decides a claim (issue 41: 95 s at load 20, 9 s at load
2.6 for one solve): the planning claim is judged on the solver's CPU seconds
(``time.process_time`` over the solve, every thread of this process), which a
busy machine inflates far less than wall-clock; the wall seconds are shown,
never judged.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.judge import NOT_JUDGED, Rule, judge_claim, judge_value
from shepherd.experiments.registry import register
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.herd import HerdConfig, solve_herd, verify
from shepherd.solvers.instances import TABLE5, table5_instance


#: "far below tens of minutes" read as at most one minute of solver CPU, fixed before any run
PERIOD_CPU_S = 60.0


class Table5(Experiment):
    name = "shepherd-table5"
    paper = "shepherd"
    title = "Shepherd Table 5: Herd planning latency vs scale"

    def cells(self, scale):
        # every row under --quick too: the five solves took 3 min of one core here (HiGHS, 800k the slowest)
        return [self.cell(streams=s, models=m, workers=w, paper_s=t, seed=0) for s, m, w, t in TABLE5]

    def run_cell(self, p):
        inst, agg_s = table5_instance(p["streams"], p["models"], p["workers"], np.random.default_rng(p["seed"]))
        cfg = HerdConfig(gpus=p["workers"], group_limit=12)
        start, cpu = time.perf_counter(), time.process_time()
        plan = solve_herd(inst, cfg, SolverConfig("highs", 120.0, 0.01))
        solve_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        return pl.DataFrame({"solve_s": [solve_s], "cpu_s": [cpu_s], "aggregate_s": [agg_s], "status": [plan.result.status],
                             "gap": [plan.result.gap if plan.result.gap is not None else float("nan")],
                             "objective": [plan.objective], "groups": [len(plan.groups)],
                             "valid": [not verify(inst, cfg, plan.groups)]})

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        long = pl.concat([
            results.select("streams", pl.col("solve_s").alias("seconds"), pl.lit("ours (HiGHS)").alias("who")),
            results.select("streams", pl.col("paper_s").alias("seconds"), pl.lit("paper").alias("who")),
        ])
        fig, axes = plotting.figure(width=5)
        sns.barplot(data=long.to_pandas(), x="streams", y="seconds", hue="who", ax=axes[0][0])
        axes[0][0].set_title("Herd solver latency")
        figures = save_figure(fig, figures_dir, "shepherd-table5")
        headlines = [Headline(f"{r['streams']:,} streams: solver seconds (wall-clock, paper: Gurobi on their "
                              f"hardware; not judged)", r["paper_s"], r["solve_s"], unit="s")
                     for r in results.sort("streams").iter_rows(named=True)]
        # a size whose plan fails verify() counts as gap 1 (no usable plan); a NaN gap (no bound) stays NaN
        gaps = [float(g) if v else 1.0 for g, v in zip(results["gap"], results["valid"])]
        claims = [judge_value("§7.3 \"our solver can compute a plan\" at every Table 5 size (§4.1): solved to a "
                              "proven gap ≤ 1 % with a plan verify() accepts (the largest gap over the sizes)",
                              Rule.at_most(0.01), max(gaps) if gaps else float("nan"),
                              "one solve per size of a seeded instance",
                              ", ".join(f"{r['streams']:,}: gap {r['gap']:.2%}{'' if r['valid'] else ' (invalid)'}"
                                        for r in results.sort("streams").iter_rows(named=True)))]
        what = ("§7 Table 5: planning stays far below Herd's period (tens of minutes): the slowest solve's CPU "
                f"seconds ≤ {PERIOD_CPU_S:g} (judged on CPU time, never wall-clock)")
        if "cpu_s" in results.columns and results["cpu_s"].null_count() == 0:
            slowest = results.sort("cpu_s").row(-1, named=True)
            claims.append(judge_claim(what, Rule.at_most(PERIOD_CPU_S, unit="s"), [slowest["cpu_s"]],
                                      f"max {slowest['cpu_s']:.1f} CPU-s at {slowest['streams']:,} streams "
                                      f"(wall {slowest['solve_s']:.1f} s, not judged)"))
        else:
            claims.append(Claim(what, False, "not judged: these cells predate the CPU-time column; re-run "
                                "`shepherd reproduce shepherd-table5` (wall-clock does not decide a claim)",
                                state=NOT_JUDGED))
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Table5())
