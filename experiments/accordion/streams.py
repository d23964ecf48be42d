"""Accordion Figs. 5–9 (§4.4): Accordion vs SLO-Conforming, Fastest, BBS and 1-Stage on the six streams.

Fig. 5 end-to-end latency per query, Fig. 6 SLO violations per stream and
target, Fig. 7 running queries over time, Fig. 8 QPS normalised to 1-Stage,
Fig. 9 EP occupancy over time — one grid of runs (:mod:`.common`), quick
scale: 120 s streams, 1 seed; full: 600 s (§4.1 "up to 10 minutes"), 3 seeds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.experiments.accordion import common as c
from shepherd.experiments.accordion import stream_rows as rows
from shepherd.experiments.accordion.measured import OnMeasured
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register

#: causes of failing rows, found on the runs (not tuned away): row or claim text fragment → one line
WHY = {
    "under strict SLO targets": "a ratio over Accordion's own violations, under the baselines' here (beyond-the-paper "
        "rows): Accordion is further ahead than the paper says, not behind; the per-seed spread is wide.",
    "under moderate SLO targets": "a ratio over Accordion's own violations, a few % and 0 on some seeds, so the "
        "per-seed ratio swings widely (see its ± and the beyond-the-paper violation rows).",
    "(relaxed): baselines": "a ratio over Accordion's own violations, ≈ 0 at the relaxed target (its own row; "
        "undefined where it is 0 on every seed): a small denominator, not a loss.",
    "compared to SLO-Conforming, Fastest, and BBS': SLO-Conforming": "SLO-Conforming takes the fewest EPs meeting "
        "the SLO, 1 EP for most queries under SLOs that are a share of the stream's largest query, so it runs more "
        "queries at once than Accordion, which starts each query on its best (8-EP) pipeline and shrinks others "
        "only by the EPs a newcomer needs (Algorithm 2; §3.3 'we remove the number of EPs that need to be "
        "fetched'): see the EPs-per-running-query rows.",
    "compared to SLO-Conforming, Fastest, and BBS': Fastest": "Fastest holds 8 EPs per query (§4.2 (2), the "
        "EPs-per-running-query row), so at most 8 of its queries run at once; Accordion's ratio to it is that width "
        "over Accordion's, not a scheduling loss of Fastest's.",
    "read as 3× the time": "1-Stage is the most EP-efficient allocation (speedups are < d on d EPs), so on our "
        "saturated streams it loses about 2× the time to Accordion (the '2× the time' reading holds).",
    "higher system throughput in terms of queries per second": "QPS is completed queries over the time to the last "
        "completion, and the mean over streams is dominated by stream 1 (≈ 1-instance queries, several per second, "
        "where every scheduler keeps up); on the heavy streams the ratio follows the completion-time rows.",
    "occupancy at 100% for ≈70%": "our runs drain a queue for 0.7–1× the arrival period after the last arrival, and "
        "our peak shape falls to 20 % of a peak between peaks; the share until the last arrival is a "
        "beyond-the-paper row, and the occupancy map shows where 70 % falls in load and peak shape.",
    "takes 1.6× longer time": "the stream's end is set by its largest queries; Fastest keeps them on 8 EPs, "
        "Accordion shrinks them for newcomers (confirm_SLO lets them finish up to their deadline).",
    "completes execution earlier": "see the Fastest completion-time row: the largest queries set the end.",
    "maximum frequency of readjustments": "the maximum is stream 1's: its queries average about one instance, so "
        "a single shrink of a one-pass query is a large share of its few passes, while on streams 2–6 (many "
        "instances per query) the maximum is the beyond-the-paper row. The paper's 0.9 % does not say "
        "which stream set it is over.",
    "all schedulers perform well": "cause not isolated. Fastest gives every query 8 EPs and waits until 8 are "
        "free (§4.2 (2)), so at most 8 of its queries run at once (EPs-per-running-query row); its stream-1 "
        "violations are in the beyond-the-paper table. The paper's Fastest runs stream 1 well; which of its "
        "rules lets it do so is not stated.",
    "always sustaining the Moderate": "on our streams other schedulers also keep every stream's mean latency "
        "within the Moderate SLO (detail column): 'always sustaining' holds for Accordion, the 'only … compared "
        "to the other baselines' does not.",
    "only Accordion is able to achieve the Strict": "on our streams SLO-Conforming also keeps its mean latency under "
        "the Strict SLO on average (detail column); the paper's 'only' is not reproduced.",
}


class Streams(Experiment):
    name = "accordion-streams"
    paper = "accordion"
    title = "Accordion Figs. 5–9: latency, SLO violations, active queries, QPS and occupancy on six streams"
    prefix = "accordion"  #: figure file names: PREFIX-fig5 …

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target=t, policy=p, seed=s, duration_s=dur)
                for k in range(1, 7) for t in c.TARGETS for p in c.POLICIES for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        return c.run_stream_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        runs = results.group_by(["stream", "target", "policy", "seed"]).agg(pl.all().exclude("t_s", "occupancy", "active").first())
        runs = runs.with_columns(pl.col("policy").replace_strict(c.LABELS).alias("Scheduler"))
        order = [c.LABELS[p] for p in c.POLICIES]
        figs = []
        # Fig. 5: mean end-to-end latency per stream (moderate), SLO as a marker
        fig, axes = plotting.figure(width=7)
        mod = runs.filter(pl.col("target") == "moderate")
        sns.barplot(data=mod.to_pandas(), x="stream", y="latency_s", hue="Scheduler", hue_order=order, ax=axes[0][0])
        axes[0][0].set_ylabel("mean end-to-end latency (s)")
        axes[0][0].set_yscale("log")
        figs += save_figure(fig, figures_dir, f"{self.prefix}-fig5")
        # Fig. 6: violations per stream and target
        fig, axes = plotting.figure(ncols=3, width=4.5)
        for ax, t in zip(axes[0], c.TARGETS):
            sns.barplot(data=runs.filter(pl.col("target") == t).to_pandas(), x="stream", y="violations",
                        hue="Scheduler", hue_order=order, ax=ax, legend=t == "relaxed")
            ax.set_title(t)
        figs += save_figure(fig, figures_dir, f"{self.prefix}-fig6")
        # Figs. 7 and 9: time series (moderate, seed 0)
        ts = results.filter((pl.col("target") == "moderate") & (pl.col("seed") == 0)).with_columns(
            pl.col("policy").replace_strict(c.LABELS).alias("Scheduler"))
        for metric, stem, label in (("active", f"{self.prefix}-fig7", "running queries"),
                                    ("occupancy", f"{self.prefix}-fig9", "EP occupancy")):
            fig, axes = plotting.figure(ncols=3, nrows=2, width=4)
            for i, k in enumerate(range(1, 7)):
                ax = axes[i // 3][i % 3]
                sns.lineplot(data=ts.filter(pl.col("stream") == k).to_pandas(), x="t_s", y=metric,
                             hue="Scheduler", hue_order=order, ax=ax, legend=i == 0)
                ax.set_title(f"stream {k}")
                ax.set_ylabel(label)
            figs += save_figure(fig, figures_dir, stem)
        # Fig. 8: QPS normalised to 1-Stage
        one = runs.filter(pl.col("policy") == "one-stage").select("stream", "target", "seed", pl.col("qps").alias("q1"))
        norm = runs.join(one, on=["stream", "target", "seed"]).with_columns((pl.col("qps") / pl.col("q1")).alias("norm_qps"))
        fig, axes = plotting.figure(width=7)
        sns.barplot(data=norm.filter(pl.col("target") == "moderate").to_pandas(), x="stream", y="norm_qps",
                    hue="Scheduler", hue_order=order, ax=axes[0][0])
        axes[0][0].set_ylabel("QPS / 1-Stage QPS")
        figs += save_figure(fig, figures_dir, f"{self.prefix}-fig8")

        h, claims, beyond = rows.headlines(runs, norm, results)
        notes = ["Rows are mean ± 95 % half-width over seeds; each judged row quotes the paper's sentence. "
                 "Violations are counted two ways: late + predictor-dropped (our default) and late only (§3.2: a "
                 "dropped query may be 'directed to other available servers').",
                 "Streams are ours (§4.3 gives peaks, mean batch sizes and the SLO rule, not rates): see "
                 "shepherd/traces/accordion.py; " + ("a measured profile, used raw." if "speedups" in results.columns
                                                     else "built-in layer profiles calibrated to Table 1.")]
        if "speedups" in results.columns:
            notes.append(f"Speedups of this profile at 2 / 4 / 8 EPs (long queries, uncalibrated): "
                         f"{results['speedups'][0]}; Table 1: ResNet152 1.94/2.06/5.66, ResNet50 1.33/2.19/3.29, "
                         "VGG16 1.43/2.71/3.47.")
        return Section(self.title + self.suffix(results), figs, h, claims, notes + self.why(h, claims), beyond)

    def suffix(self, results: pl.DataFrame) -> str:
        return ""

    def why(self, h: list[Headline], claims: list[Claim]) -> list[str]:
        """One line per failing or inconclusive row or claim whose cause we know (each was checked on the runs)."""
        from shepherd.experiments.judge import FAILS, HOLDS

        open_ = [x.what for x in h if x.verdict.state not in (HOLDS, "not judged")] + \
            [x.text for x in claims if x.verdict.state != HOLDS]
        out = [f"Why not ({key}): {line}" for key, line in WHY.items() if any(key in f for f in open_)]
        for x in h:
            if x.verdict.state == FAILS and not any(key in x.what for key in WHY):
                side = "above" if x.ours > x.paper else "below"
                out.append(f"Why not ({x.what}): ours is {side} the paper's beyond the tolerance; cause not isolated.")
        return out


class StreamsMeasured(OnMeasured, Streams):
    name = "accordion-streams-measured"
    prefix = "accordion-measured"


EXPERIMENT = register(Streams())
MEASURED = register(StreamsMeasured())
