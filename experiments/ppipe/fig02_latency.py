"""PPipe Fig. 2: whole-model latency of the 18 DNNs at batch size 4 on each GPU class (TensorRT, TF32).

From the authors' block timings (sum of the blocks, whole GPU). Paper (§2):
on the low-class P4 inference is 3.0×–7.9× longer than on the high-class
L4, and "only 22 % of the DNN models can run on the low-class GPU (P4) at
batch size 4 without exceeding 200 ms".
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Headline, Section
from shepherd.experiments.judge import Rule, judge_value
from shepherd.experiments.ppipe import common as c
from shepherd.experiments.registry import register

GPUS = ("V100", "L4", "T4", "P4")


class Fig2(c.PPipeExperiment):
    name = "ppipe-fig2"
    paper = "ppipe"
    title = "PPipe Fig. 2: latency of 18 DNNs at batch 4 per GPU class"

    def cells(self, scale):
        return [self.cell(batch=4)]

    def run_cell(self, p):
        rows = [dict(model=m, gpu=g, latency_ms=prof.whole_us(g, p["batch"]) / 1000.0)
                for m, prof in sorted(c.profiles().items()) for g in GPUS]
        return pl.DataFrame(rows)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        fig, axes = plotting.figure(width=9, height=3.2)
        data = results.with_columns(pl.col("model").str.split("_").list.first().str.slice(0, 14).alias("DNN"))
        sns.barplot(data=data.to_pandas(), x="DNN", y="latency_ms", hue="gpu", hue_order=list(GPUS), ax=axes[0][0])
        axes[0][0].tick_params(axis="x", rotation=70)
        axes[0][0].axhline(200, color="firebrick", linestyle="--", linewidth=1)
        figures = save_figure(fig, figures_dir, "ppipe-fig2")
        wide = results.pivot(on="gpu", index="model", values="latency_ms")
        ratio = wide["P4"] / wide["L4"]
        under = float((wide["P4"] <= 200.0).mean())
        headlines = [Headline("P4 / L4 latency, smallest", 3.0, float(ratio.min()), unit="×"),
                     Headline("P4 / L4 latency, largest", 7.9, float(ratio.max()), unit="×"),
                     Headline("share of DNNs under 200 ms on P4 at batch 4", 22.0, 100 * under, unit="%")]
        claims = [judge_value("§2 \"the inference time (on the highly optimized TensorRT [10] inference framework) "
                              "on the low-class NVIDIA P4 is 3.0x–7.9x longer than that on the high-class NVIDIA "
                              "L4\" — every DNN slower on P4 (the smallest P4 / L4 latency ratio: > 1)",
                              Rule.above(1.0, "×"), float(ratio.min()), "the authors' profile table",
                              f"ratios {ratio.min():.1f}–{ratio.max():.1f}")]
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig2())
