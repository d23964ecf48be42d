"""Accordion Fig. 3 (§3.2): the dropout predictor's effect on High-priority queries.

§3.2: "Figure 3 shows the processing time of high-priority queries from two
periodically bursty workloads and scheduling with Accordion. The results
show that ~82 % of the queries on average have a better processing time
compared to when the dropout predictor is not used." The measure is a
*share of queries*, query by query, not a change of the mean: Accordion runs
each stream twice, with the predictor (window = the query's SLO) and without
(window 0); every High-priority query completed in both runs is compared
(end-to-end latency, arrival to finish, as its processing time), and the
headline is the share that is faster with the predictor
(:func:`~.common.share_faster`) on "two periodically bursty workloads": the
2- and 5-peak patterns, each represented by its saturated streams (2, 3 and
5, 6), so the headline is the mean over streams 2, 3, 5, 6 (± 95 % over
seeds). Streams 1 and 4 are light — nobody waits, so their share is ≈ 0 by
construction — and the mean over all six is a beyond-the-paper row.

**Target.** §3.2 names neither the SLO target of Fig. 3 nor TIME_WINDOW;
ours is the window = the query's SLO and the Moderate target is the headline.
The share is set by how many Low-priority queries the predictor drops, which
the target sets (a query is dropped when its predicted latency exceeds its
SLO), so the Strict and Relaxed targets are run too and reported as rows
without a paper value — a sensitivity, not a second headline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.experiments.accordion import common as c
from shepherd.experiments.accordion.measured import OnMeasured
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register

#: a High-priority query counts as faster with the predictor when its latency drops by more than this
EPS_S = 1e-6
HEAVY = (2, 3, 5, 6)
TARGETS = ("moderate", "strict", "relaxed")  #: the first is the headline (module docstring)


class Fig3(Experiment):
    name = "accordion-fig3"
    paper = "accordion"
    title = "Accordion Fig. 3: dropout predictor and High-priority processing time"
    stem = "accordion-fig3"

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target=t, policy="accordion", window=w, seed=s, duration_s=dur)
                for t in TARGETS for k in range(1, 7) for w in (0.0, 1.0) for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        res, trace = c.simulate_stream(p)
        dropped = res.extra.get("policy_stats", {}).get("dropped_by_predictor", 0) / max(trace.height, 1)
        return c.high_latencies(res, trace).with_columns([pl.lit(v).alias(k) for k, v in
                                                          {**c.scalars(p), "dropped": dropped}.items()])

    def per_stream(self, results: pl.DataFrame) -> pl.DataFrame:
        """target, stream, seed → share faster with the predictor, queries compared, mean latency with / without,
        share of the stream's queries dropped."""
        if "target" not in results.columns:
            results = results.with_columns(pl.lit(TARGETS[0]).alias("target"))
        rows = []
        for (t, k, s), g in sorted(results.group_by(["target", "stream", "seed"]), key=lambda x: x[0]):
            on = g.filter(pl.col("window") > 0).select("request", "latency_s")
            off = g.filter(pl.col("window") == 0).select("request", "latency_s")
            share, n = c.share_faster(on, off, EPS_S)
            dropped = g.filter(pl.col("window") > 0)["dropped"] if "dropped" in g.columns else pl.Series([])
            rows.append({"target": t, "stream": k, "seed": s, "share": share, "compared": n,
                         "on_s": on["latency_s"].mean(), "off_s": off["latency_s"].mean(),
                         "dropped": float(dropped[0]) if dropped.len() else float("nan")})
        return pl.DataFrame(rows)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        every = self.per_stream(results)
        per = every.filter(pl.col("target") == TARGETS[0])
        if "target" in results.columns:
            results = results.filter(pl.col("target") == TARGETS[0])
        runs = results.drop_nulls("latency_s").with_columns(
            pl.when(pl.col("window") > 0).then(pl.lit("with predictor")).otherwise(pl.lit("without")).alias("Predictor"))
        fig, axes = plotting.figure(ncols=2, width=5)
        sns.boxplot(data=runs.to_pandas(), x="stream", y="latency_s", hue="Predictor", ax=axes[0][0], fliersize=1)
        axes[0][0].set_ylabel("High-priority processing time (s)")
        axes[0][0].set_yscale("log")
        sns.barplot(data=per.with_columns(pl.col("share") * 100).to_pandas(), x="stream", y="share", ax=axes[0][1])
        axes[0][1].set_ylabel("High-priority queries faster with the predictor (%)")
        figs = save_figure(fig, figures_dir, self.stem)
        share = 100 * float(np.nanmean(per["share"].to_numpy()))
        dropped = float(results.filter(pl.col("window") > 0).group_by("stream", "seed")
                        .agg(pl.col("dropped").first())["dropped"].mean())
        heavy = 100 * float(np.nanmean(per.filter(pl.col("stream").is_in(HEAVY))["share"].to_numpy()))
        on, off = float(per["on_s"].mean()), float(per["off_s"].mean())
        change = 100 * (1 - on / off) if off > 0 else 0.0
        hv = per.filter(pl.col("stream").is_in(HEAVY)).group_by("seed").agg(pl.col("share").mean()).sort("seed")["share"]
        hv = [100 * float(x) if x is not None else float("nan") for x in hv]
        h = [Headline.of_seeds("§3.2 'Figure 3 shows the processing time of high-priority queries from two periodically "
                      "bursty workloads … ~82% of the queries on average have a better processing time' (each "
                      "workload a saturated 2-peak and 5-peak stream: streams 2, 3, 5, 6)", 82.0,
                      hv, unit="%", tolerance=c.tolerance(82.0, "%"))]
        beyond = [Headline("High-priority queries faster with the predictor, streams 1–6 (1 and 4 never wait)", None,
                           share, unit="%"),
                  Headline("mean High-priority latency reduction with the predictor", None, change, unit="%"),
                  Headline("queries dropped by the predictor (moderate)", None, 100 * dropped, unit="%")]
        for t in TARGETS[1:]:
            sub = every.filter(pl.col("target") == t)
            if sub.height == 0:
                continue
            beyond += [Headline(f"at the {t} target: High-priority queries faster, streams {lab}", None,
                                100 * float(np.nanmean(x["share"].to_numpy())), unit="%")
                       for lab, x in (("1–6", sub), ("2, 3, 5, 6", sub.filter(pl.col("stream").is_in(HEAVY))))]
            beyond.append(Headline(f"at the {t} target: queries dropped by the predictor", None,
                                   100 * float(sub["dropped"].mean()), unit="%"))
        claims = [Claim("most High-priority queries are faster with the predictor (streams 2, 3, 5, 6)", heavy > 50,
                        ", ".join(f"stream {k}: {100 * v:.0f} %" for k, v in per.filter(pl.col("stream").is_in(HEAVY))
                                  .group_by("stream").agg(pl.col("share").mean()).sort("stream").iter_rows()))]
        notes = ["Queries that wait for no one have the same latency with and without the predictor (no gain "
                 "to count): on the light streams 1 and 4 almost every High-priority query starts on arrival."]
        if not claims[0].holds or h[0].verdict.state != "holds":
            notes.append(f"Why not (82 %): the predictor is Algorithm 1 line by line (EP_times from the running and "
                         f"waiting queries); our TIME_WINDOW is the query's SLO (§3.2 names no value), under which it "
                         f"drops {100 * dropped:.1f} % of the queries at the Moderate target; only High-priority "
                         "queries whose wait those drops shorten get faster (the light streams 1 and 4 never wait), "
                         "so the share follows the drops: see the Strict and Relaxed rows and the TIME_WINDOW map "
                         "(accordion-map-fig3).")
        return Section(self.title + self.suffix(results), figs, h, claims, notes, beyond)

    def suffix(self, results: pl.DataFrame) -> str:
        return ""


class Fig3Measured(OnMeasured, Fig3):
    name = "accordion-fig3-measured"
    stem = "accordion-fig3-measured"


EXPERIMENT = register(Fig3())
MEASURED = register(Fig3Measured())
