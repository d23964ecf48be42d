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
from shepherd.experiments.accordion.measured import OnMeasured
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register

HEAVY = (2, 3, 5, 6)

#: causes of failing rows, found on the runs (not tuned away): row or claim text fragment → one line
WHY = {
    "Accordion / SLO-Conforming": "SLO-Conforming takes the fewest EPs meeting the SLO, 1 EP for most queries "
        "under SLOs that are a share of the stream's largest query, so it runs more queries at once than "
        "Accordion, which starts each query on its best (fastest) pipeline and shrinks others only by the EPs "
        "a newcomer needs (Algorithm 2; §3.3 'we remove the number of EPs that need to be fetched'): its running "
        "queries hold more EPs each (EPs-per-running-query rows), not fewer queries for want of EPs.",
    "running than SLO-Conforming": "see the SLO-Conforming running-queries row.",
    "running queries: Accordion / Fastest": "Fastest's pipelines are 7–8 EPs wide, so at most 8–9 of its queries "
        "run at once (EPs-per-running-query rows); Accordion's ratio to it is that width over Accordion's, "
        "not a scheduling loss of Fastest's.",
    "fewest SLO violations at the strict target": "at the Strict target many queries can no longer meet their "
        "SLO on any configuration once they have waited; Algorithm 2 gives such a query no 'less but enough' "
        "EPs (line 6), so it waits for, or fetches, its best assignment at the head of its queue, while BBS "
        "runs a late query at once on the EP set of a running query of its model. (Starting such queries on "
        "whatever EPs are free, our earlier reading, gave Accordion 17.7 % and the fewest in the last run before "
        "the change (--set late=free keeps it), but left a "
        "several-hundred-instance query on 1 EP to end the stream.)",
    "highest normalised throughput": "QPS is completed queries over the time to the last completion, i.e. "
        "the drain after the last arrival, set by the stream's largest query: at the Strict and Moderate "
        "targets Accordion is level with or ahead of every baseline, at the Relaxed target Fastest runs that "
        "query on 8 EPs while Accordion (line 6: 'assign less but enough EPs') and SLO-Conforming give it the "
        "few EPs its half-of-1-Stage SLO needs (per-target rows).",
    "100 % occupancy": "our runs drain a queue for 0.7–1× the arrival period after the last arrival, and our "
        "peak shape (Fig. 4a is a picture) falls to 20 % of the mean rate between peaks; the share until the "
        "last arrival is its own row.",
    "fully occupied": "see the 100 % occupancy rows.",
    "strict: baseline / Accordion": "a ratio over Accordion's own violations, well under the baselines' here: "
        "Accordion is further ahead than the paper says, not behind.",
    "relaxed: baseline / Accordion": "a ratio over Accordion's own violations, which are near 0 at the relaxed "
        "target (its own row): a small denominator, not a loss.",
    "1-Stage / Accordion": "1-Stage is the most EP-efficient allocation (speedups are < d on d EPs), so on our "
        "saturated streams it loses less time to Accordion than the paper's 2.2–3×.",
    "readjustments per inference pass": "the maximum is stream 1's, whose queries average one instance (few "
        "passes to count shrinks against); the next row gives streams 2–6.",
    "Fastest time share": "Fastest's pipelines are 7 (VGG16) or 8 EPs wide and it never takes fewer, so the "
        "64 EPs are often not all held (9 × 7 = 63) while a query waits for its full width.",
    "Fastest / Accordion time": "the stream's end is set by its largest queries; Fastest keeps them on their "
        "fastest pipeline, Accordion shrinks them for newcomers (confirm_SLO lets them finish up to their deadline).",
}


def _mean(df: pl.DataFrame, metric: str, **eq) -> float:
    for k, v in eq.items():
        df = df.filter(pl.col(k).is_in(list(v)) if isinstance(v, tuple) else pl.col(k) == v)
    return float(df[metric].mean()) if df.height else float("nan")


class Streams(Experiment):
    name = "accordion-streams"
    paper = "accordion"
    title = "Accordion Figs. 5–9: latency, SLO violations, active queries, QPS and occupancy on six streams"
    prefix = "accordion"  #: figure file names: PREFIX-fig5 …

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target=t, policy=p, seed=s, duration_s=dur)
                for k in range(1, 7) for t in c.TARGETS for p in c.POLICIES for s in range(scale.seeds)]

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

        h, claims = self._headlines(runs, norm, results)
        notes = ["Violations count late and predictor-dropped queries over all queries of the stream.",
                 "Streams are ours (§4.3 gives peaks, mean batch sizes and the SLO rule, not rates): see "
                 "shepherd/traces/accordion.py; " + ("a measured profile, used raw." if "speedups" in results.columns
                                                     else "built-in layer profiles calibrated to Table 1.")]
        if "speedups" in results.columns:
            notes.append(f"Speedups of this profile at 2 / 4 / 8 EPs (long queries, uncalibrated): "
                         f"{results['speedups'][0]}; Table 1: ResNet152 1.94/2.06/5.66, ResNet50 1.33/2.19/3.29, "
                         "VGG16 1.43/2.71/3.47.")
        return Section(self.title + self.suffix(results), figs, h, claims, notes + self.why(h, claims))

    def _headlines(self, runs: pl.DataFrame, norm: pl.DataFrame, series: pl.DataFrame | None = None):
        def H(what, paper, ours, unit):  # noqa: N802 - a row with the fixed tolerance
            return Headline(what, paper, ours, unit=unit, tolerance=None if paper is None else c.tolerance(paper, unit))

        def viol_ratio(target):
            a = _mean(runs, "violations", policy="accordion", target=target)
            o = _mean(runs, "violations", policy=c.BASELINES + ("one-stage",), target=target)
            return o / a if a > 0 else float("inf"), a
        h, claims = [], []
        for t, paper in (("strict", 1.13), ("moderate", 4.2), ("relaxed", 1.7)):
            r, a = viol_ratio(t)
            h.append(H(f"§4.4.3 {t}: baseline / Accordion SLO violations", paper, r, "×"))
            best = min(c.POLICIES, key=lambda p: _mean(runs, "violations", policy=p, target=t))
            claims.append(Claim(f"Accordion has the fewest SLO violations at the {t} target",
                                best == "accordion", f"fewest: {c.LABELS[best]}; Accordion {100 * a:.1f} %"))
        h.append(H("§4.4.3 relaxed: Accordion SLO violations", 2.0,
                   100 * _mean(runs, "violations", policy="accordion", target="relaxed"), "%"))
        fin_a = _mean(runs, "finish_s", policy="accordion")
        h.append(H("§4.4.1 stream completion: (Fastest, BBS, SLO-C) / Accordion", 1.3,
                   _mean(runs, "finish_s", policy=c.BASELINES) / fin_a, "×"))
        h.append(H("§4.4.1 stream completion: 1-Stage / Accordion", 2.2,
                   _mean(runs, "finish_s", policy="one-stage") / fin_a, "×"))
        h.append(H("abstract: mean end-to-end latency, baselines / Accordion", 1.6,
                   _mean(runs, "latency_s", policy=c.BASELINES + ("one-stage",)) / _mean(runs, "latency_s", policy="accordion"),
                   "×"))
        for t, slo_frac in (("strict", 0.10), ("moderate", 0.25)):
            sub = runs.filter((pl.col("policy") == "accordion") & (pl.col("target") == t))
            met = sub.filter(pl.col("latency_s") <= pl.col("slo_s"))
            ok = sub.height > 0 and (met.height == sub.height if t == "moderate"
                                     else float(sub["latency_s"].mean()) <= float(sub["slo_s"].mean()))
            claims.append(Claim(f"§4.4.2 Accordion's mean latency meets the {t} SLO "
                                f"({'on every stream' if t == 'moderate' else 'on average'})", ok,
                                f"{met.height} of {sub.height} streams"))
        for p, paper in (("slo-conforming", 1.3), ("fastest", 1.6), ("bbs", 1.5)):
            r = _mean(runs, "mean_active", policy="accordion") / _mean(runs, "mean_active", policy=p)
            h.append(H(f"§4.4.4 running queries: Accordion / {c.LABELS[p]}", paper, r, "×"))
            claims.append(Claim(f"Accordion keeps more queries running than {c.LABELS[p]}", r > 1, f"{r:.2f}×"))
        if series is not None:
            for p in ("accordion", "slo-conforming", "fastest"):
                sub = series.filter(pl.col("policy") == p)
                h.append(H(f"§4.4.4 EPs per running query (time-weighted): {c.LABELS[p]}", None,
                           64 * float(sub["occupancy"].sum()) / max(float(sub["active"].sum()), 1e-12), "EPs"))
        h.append(H("§4.4.4 1-Stage: most queries running at once (= the 64 EPs)", 64.0,
                   float(runs.filter(pl.col("policy") == "one-stage")["max_active"].max()), "queries"))
        h.append(H("§4.4.4 streams 2,3,4,6 completion: 1-Stage / Accordion (~200 % slower)", 3.0,
                   _mean(runs, "finish_s", policy="one-stage", stream=(2, 3, 4, 6))
                   / _mean(runs, "finish_s", policy="accordion", stream=(2, 3, 4, 6)), "×"))
        n56 = _mean(norm, "norm_qps", policy="accordion", stream=(5, 6))
        h.append(H("§4.4.4 streams 5–6: Accordion QPS / 1-Stage", 2.0, n56, "×"))
        qa = _mean(norm, "norm_qps", policy="accordion")
        qb = _mean(norm, "norm_qps", policy=c.BASELINES)
        h.append(H("§4.4.4 all streams: Accordion QPS / baselines", 1.2, qa / qb, "×"))
        for t in c.TARGETS:
            h.append(H(f"§4.4.4 streams 5–6, {t}: Accordion QPS / best baseline's", None,
                       _mean(norm, "norm_qps", policy="accordion", stream=(5, 6), target=t)
                       / max(_mean(norm, "norm_qps", policy=p, stream=(5, 6), target=t) for p in c.BASELINES), "×"))
        best56 = max(c.POLICIES, key=lambda p: _mean(norm, "norm_qps", policy=p, stream=(5, 6)))
        claims.append(Claim("Accordion has the highest normalised throughput on streams 5–6", best56 == "accordion",
                            "; ".join(f"{c.LABELS[p]} {_mean(norm, 'norm_qps', policy=p, stream=(5, 6)):.2f}×"
                                      for p in c.POLICIES)))
        fa = _mean(runs, "full_share", policy="accordion", stream=HEAVY)
        ff = _mean(runs, "full_share", policy="fastest", stream=HEAVY)
        h.append(H("§4.4.5 streams 2,3,5,6: Accordion time share at 100 % occupancy", 70.0, 100 * fa, "%"))
        h.append(H("§4.4.5 streams 2,3,5,6: Fastest time share at 100 % occupancy", 82.0, 100 * ff, "%"))
        h.append(H("§4.4.5 Fastest / Accordion time to finish the stream", 1.6,
                   _mean(runs, "finish_s", policy="fastest") / fin_a, "×"))
        acc = runs.filter(pl.col("policy") == "accordion")
        passes = float((acc["shrinks"] / acc["instances"]).max()) if acc.height else float("nan")
        h.append(H("§3.3 most readjustments per inference pass over the streams", 0.9, 100 * passes, "%"))
        rest = acc.filter(pl.col("stream") != 1)
        h.append(H("§3.3 the same, streams 2–6", None,
                   100 * float((rest["shrinks"] / rest["instances"]).max()) if rest.height else float("nan"), "%"))
        h.append(H("§4.4.5 streams 2,3,5,6: Accordion at 100 % occupancy until the last arrival", None,
                   100 * _mean(runs, "full_share_arrivals", policy="accordion", stream=HEAVY), "%"))
        claims.append(Claim("Accordion keeps the EPs fully occupied for a large share of the heavy streams", fa >= 0.5,
                            f"{100 * fa:.0f} % of the time at 100 %"))
        return h, claims

    def suffix(self, results: pl.DataFrame) -> str:
        return ""

    def why(self, h: list[Headline], claims: list[Claim]) -> list[str]:
        """One line per failing row or claim whose cause we know (each was checked on the runs)."""
        failing = [x.what for x in h if x.holds is False] + [x.text for x in claims if not x.holds]
        out = [f"Why not ({key}): {line}" for key, line in WHY.items() if any(key in f for f in failing)]
        for x in h:
            if x.holds is False and not any(key in x.what for key in WHY):
                side = "above" if x.ours > x.paper else "below"
                out.append(f"Why not ({x.what}): ours is {side} the paper's beyond the tolerance; cause not isolated.")
        return out


class StreamsMeasured(OnMeasured, Streams):
    name = "accordion-streams-measured"
    prefix = "accordion-measured"


EXPERIMENT = register(Streams())
MEASURED = register(StreamsMeasured())
