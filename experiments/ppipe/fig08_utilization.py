"""PPipe Fig. 8: temporal GPU utilization of high- and low-class GPUs at 99 % attainment ("Poisson").

Same runs as Fig. 6 (Poisson only); utilization measured at the highest load
factor at which every DNN of the group still meets 99 %. A 1/k virtual GPU
busy for t counts t/k. Paper (§7.2): average low-class utilization NP 8.1 %,
DART-r 29.5 %, PPipe 73.6 %; high-class GPUs highly utilized by all.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.ppipe import common as c
from shepherd.experiments.ppipe.fig06_load_factor import run_group_cell
from shepherd.experiments.registry import register

PAPER_LOW = {"np": 8.1, "dart-r": 29.5, "ppipe": 73.6}


class Fig8(c.PPipeExperiment):
    name = "ppipe-fig8"
    paper = "ppipe"
    title = "PPipe Fig. 8: GPU utilization by class at 99 % attainment (Poisson)"

    def cells(self, scale):
        groups = range(2) if scale.quick else range(6)
        return [self.cell(cluster=cl, group=g, workload="poisson", seed=seed, seconds=5.0 if scale.quick else 30.0,
                          step=0.1 if scale.quick else 0.05, rules=r)
                for r in c.RULE_SETS for cl in c.CLUSTERS for g in groups for seed in range(scale.seeds)]

    def run_cell(self, p):
        return run_group_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        return c.by_rules(self._report, results, figures_dir)

    def _report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        long = results.unpivot(index=["cluster", "system", "group", "seed"], on=["util_high", "util_low"],
                               variable_name="class", value_name="utilization").with_columns(
            pl.col("class").replace_strict({"util_high": "high-class", "util_low": "low-class"}),
            pl.col("system").replace_strict(c.LABELS).alias("System"))
        fig, axes = plotting.figure(ncols=2, width=4.5)
        for ax, cls in zip(axes[0], ("high-class", "low-class")):
            sns.barplot(data=long.filter(pl.col("class") == cls).to_pandas(), x="cluster", y="utilization",
                        hue="System", hue_order=[c.LABELS[s] for s in ("np", "dart-r", "ppipe")],
                        errorbar=plotting.band("utilization"), ax=ax)
            ax.set_title(cls)
            ax.set_ylim(0, 1.05)
        figures = save_figure(fig, figures_dir, "ppipe-fig8")
        low = {s: 100 * float(results.filter(pl.col("system") == s)["util_low"].mean()) for s in c.SYSTEMS}
        headlines = [Headline(f"{c.LABELS[s]}: average low-class GPU utilization", PAPER_LOW[s], low[s], unit="%")
                     for s in ("np", "dart-r", "ppipe")]
        def order(f: pl.DataFrame) -> float:
            u = {s: 100 * float(f.filter(pl.col("system") == s)["util_low"].mean()) for s in c.SYSTEMS}
            return min(u["ppipe"] - u["dart-r"], u["dart-r"] - u["np"])

        claims = [judge_claim("§7.2 \"On average, NP, DART-r and PPipe achieve low-class GPU utilizations of 8.1%, "
                              "29.5%, and 73.6% respectively\" — the order PPipe > DART-r > NP (the smaller of "
                              "PPipe − DART-r and DART-r − NP, points, per seed: > 0)", Rule.above(0.0, "points"),
                              seed_values(order, results),
                              ", ".join(f"{c.LABELS[s]} {v:.1f} %" for s, v in low.items()))]
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig8())
