"""Accordion Fig. 3 (§3.2): the dropout predictor's effect on High-priority queries.

Accordion with the predictor (window = the query's SLO) and without
(window 0) on the six streams, Moderate target; the metric is the mean
end-to-end latency of served High-priority queries. Paper: ≈ 82 % better.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.accordion import common as c
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register


class Fig3(Experiment):
    name = "accordion-fig3"
    paper = "accordion"
    title = "Accordion Fig. 3: dropout predictor and High-priority processing time"

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target="moderate", policy="accordion", window=w, seed=s, duration_s=dur)
                for k in range(1, 7) for w in (0.0, 1.0) for s in range(scale.seeds)]

    def run_cell(self, p):
        return c.run_stream_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        runs = results.group_by(["stream", "window", "seed"]).agg(pl.col("latency_high_s").first())
        runs = runs.with_columns(pl.when(pl.col("window") > 0).then(pl.lit("with predictor"))
                                 .otherwise(pl.lit("without")).alias("Predictor"))
        fig, axes = plotting.figure(width=6)
        sns.barplot(data=runs.to_pandas(), x="stream", y="latency_high_s", hue="Predictor", ax=axes[0][0])
        axes[0][0].set_ylabel("High-priority end-to-end latency (s)")
        figs = save_figure(fig, figures_dir, "accordion-fig3")
        on = float(runs.filter(pl.col("window") > 0)["latency_high_s"].mean())
        off = float(runs.filter(pl.col("window") == 0)["latency_high_s"].mean())
        better = 100 * (1 - on / off) if off > 0 else 0.0
        return Section(self.title, figs,
                       [Headline("§3.2 Fig. 3: High-priority latency improvement with the predictor", 82.0, better,
                                 unit="%")],
                       [Claim("the predictor lowers High-priority latency", on < off, f"{on:.1f} s vs {off:.1f} s")])


EXPERIMENT = register(Fig3())
