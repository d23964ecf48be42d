"""Shepherd Fig. 11(a): prioritisation and preemption on the two-stream workload.

One V100 worker; stream A: 1024-request ResNet18 bursts every 120 ms from
t = 5 ms; stream B: one ResNeSt269 request per ms (§7.2). Paper: at 250 ms
Shepherd and Shepherd-NP beat Clockwork by 3.7× (prioritising large batches);
at 90 ms only preemption helps: Shepherd beats both by 6.2×. The workload is
deterministic, so seeds only confirm determinism.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core.engine import simulate
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim
from shepherd.experiments.registry import register
from shepherd.experiments.shepherd import common as c
from shepherd.traces.synthetic import two_stream

SYSTEMS = ("shepherd", "shepherd-np", "clockwork")
PAPER = {250: {"clockwork": 3.7, "shepherd-np": 1.0}, 90: {"clockwork": 6.2, "shepherd-np": 6.2}}


class Fig11a(Experiment):
    name = "shepherd-fig11a"
    paper = "shepherd"
    title = "Shepherd Fig. 11(a): two-stream ablation (1 worker)"

    def cells(self, scale):
        duration = 6.0 if scale.quick else 30.0
        return [self.cell(slo_ms=slo, system=s, seed=seed, duration_s=duration)
                for slo in PAPER for s in SYSTEMS for seed in range(scale.seeds)]

    def run_cell(self, p):
        trace = two_stream(duration_s=p["duration_s"], slo_ms=p["slo_ms"])
        res = simulate(trace, c.profiles(), c.POLICY[p["system"]], gpus=1, seed=p["seed"])
        return c.one_row(**c.summary_row(res, trace), synthetic=True)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    pl.format("{} ms", pl.col("slo_ms")).alias("SLO"))
        fig, axes = plotting.figure(width=5)
        sns.barplot(data=data.to_pandas(), x="SLO", y="goodput_rps", hue="System",
                    hue_order=[c.LABELS[s] for s in SYSTEMS], errorbar=plotting.band("goodput_rps"), ax=axes[0][0])
        axes[0][0].set_ylabel("goodput (req/s)")
        figures = save_figure(fig, figures_dir, "shepherd-fig11a")
        headlines, claims = [], []
        for slo, paper in PAPER.items():
            for other, ratio in paper.items():
                headlines.append(Headline.of_seeds(f"{slo} ms: Shepherd / {c.LABELS[other]}", ratio,
                                                   c.seed_ratios(results, "shepherd", other, "goodput_rps", slo_ms=slo),
                                                   "×"))
        # the workload is deterministic: the seeds only confirm it (their values agree)
        r250 = c.seed_ratios(results, "shepherd", "clockwork", "goodput_rps", slo_ms=250)
        r90 = c.seed_ratios(results, "shepherd", "clockwork", "goodput_rps", slo_ms=90)
        np250 = c.seed_ratios(results, "shepherd-np", "shepherd", "goodput_rps", slo_ms=250)
        np90 = c.seed_ratios(results, "shepherd-np", "clockwork", "goodput_rps", slo_ms=90)
        mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731 - a detail's number
        claims += [judge_claim("§7.2 \"For 250ms SLO, both SHEPHERD and non-preemptive SHEPHERD outperform "
                               "Clockwork by 3.7×\" — ours: Shepherd / Clockwork at 250 ms, per seed, at least 3×",
                               Rule.at_least(3.0, unit="×"), r250, f"{mean(r250):.2f}×"),
                   judge_claim("§7.2 \"SHEPHERD outperforms both its non-preemptive variant and Clockwork by 6.2×\" "
                               "— ours: Shepherd / Clockwork at 90 ms, per seed, at least 4×",
                               Rule.at_least(4.0, unit="×"), r90, f"{mean(r90):.2f}×" + ("" if min(r90) >= 4 else
                               " — Flex is GPU-capped (≈358 ResNet18 per 120 ms burst fit before the deadline, "
                               "≈2.97k req/s) while Clockwork serves ≈154 per burst (one 79 ms ResNeSt269 batch, "
                               "then 128+26 ResNet18)")),
                   judge_claim("§7.2 \"both SHEPHERD and non-preemptive SHEPHERD outperform Clockwork by 3.7×\" at "
                               "250 ms — Shepherd-NP ≈ Shepherd (Shepherd-NP / Shepherd, per seed, within 20 %)",
                               Rule.near(1.0, 0.2, "×"), np250, f"{mean(np250):.2f}"),
                   judge_claim("§7.2 \"the performance for non-preemptive SHEPHERD is similar to Clockwork\" at 90 ms "
                               "(Shepherd-NP / Clockwork, per seed, within 2× either way)",
                               Rule(0.5, 2.0, "within 2× either way: [0.5, 2]"), np90, f"{mean(np90):.2f}")]
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig11a())
