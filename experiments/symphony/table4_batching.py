"""Symphony Table 4 with Figs. 8 and 9: ideal vs measured batching of one model on 8 GPUs (§5.2.2–5.2.3).

ResNet50 (α 1.053, β 5.072 ms, SLO 25 ms) and InceptionResNetV2 (α 5.090,
β 18.368 ms, SLO 70 ms), Poisson arrivals, 8 GPUs; Table 4's own α/β rows
(not Table 5's). Per system: goodput (p99 ≤ SLO, §2.1), then a run at that
rate for the batch-size distribution (Fig. 8: share of requests per batch
size) and the queuing delay (Fig. 9: arrival → batch start); a system whose
goodput is 0 here (every rate drops > 1 %) is run at its paper goodput.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.confidence import mean_ci
from shepherd.experiments.judge import Rule, judge_claim, judge_value, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

GPUS = 8
MODELS = {  # name → (α, β, SLO, paper goodput of Symphony, Clockwork, Nexus)
    "ResNet50": (1.053, 5.072, 25.0, 5169, 2036, 3965),
    "InceptionResNetV2": (5.090, 18.368, 70.0, 907, 482, 590),
}
PAPER_ANALYTIC = {"ResNet50": (7, 4501, 16, 5839), "InceptionResNetV2": (3, 713, 8, 1083)}
SYSTEMS = ("symphony", "clockwork", "nexus")
QUANTILES = tuple(sorted(set(np.round(np.linspace(0, 1, 21), 2).tolist()) | {0.99}))


class Table4(Experiment):
    name = "symphony-table4"
    paper = "symphony"
    title = "Symphony Table 4, Figs. 8–9: batch size, throughput and queuing delay on 8 GPUs"

    def cells(self, scale):
        return [self.cell(model=m, system=s, seed=seed, duration_s=3.0 if scale.quick else 10.0)
                for m in MODELS for s in SYSTEMS for seed in range(scale.seeds)]

    def run_cell(self, p):
        a, b, slo, paper_sym, *_ = MODELS[p["model"]]
        prof = c.linear_profiles([(p["model"], a, b)])
        wl = c.workload([p["model"]], slo, duration_s=p["duration_s"])
        g = c.goodput(p["system"], wl, prof, GPUS, p["seed"], start=0.9 * paper_sym, rel_tol=0.02)
        rows = [("goodput_rps", 0.0, g)]
        # Figs. 8–9 at the system's goodput (at its paper goodput when ours is 0: it always drops)
        rate = g if g > 0 else MODELS[p["model"]][3 + SYSTEMS.index(p["system"])]
        if rate > 0:
            res = c.run(p["system"], wl.trace(rate, p["seed"]), prof, GPUS, p["seed"])
            rq = res.requests_frame().filter(pl.col("start_us").is_not_null() & (pl.col("start_us") >= 0))
            sizes = rq.join(res.batches_frame().select("batch_id", "size"), on="batch_id")["size"]
            hist = np.bincount(sizes.to_numpy(), minlength=c.MAX_BATCH + 1) / max(1, len(sizes))
            rows += [("batch_share", float(k), float(v)) for k, v in enumerate(hist) if k > 0]
            q = ((rq["start_us"] - rq["arrival_us"]) / 1000).to_numpy()
            rows += [("queue_ms", float(x), float(np.quantile(q, x))) for x in QUANTILES]
        return pl.DataFrame(rows, schema={"metric": pl.String, "x": pl.Float64, "value": pl.Float64},
                            orient="row").with_columns(model=pl.lit(p["model"]), system=pl.lit(p["system"]),
                                                       seed=pl.lit(p["seed"]))

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        headlines, claims = [], []
        good = results.filter(pl.col("metric") == "goodput_rps")
        ci = mean_ci(good, ["model", "system"], "value")
        for m, (a, b, slo, *paper) in MODELS.items():
            ideal = ba.ideal(ba.Linear(a, b), slo, GPUS)
            pu = PAPER_ANALYTIC[m]
            for what, paper_v, ours in (("uncoordinated batch", pu[0], ideal.uncoordinated_batch),
                                        ("uncoordinated throughput", pu[1], round(ideal.uncoordinated_rps)),
                                        ("staggered batch", pu[2], ideal.staggered_batch),
                                        ("staggered throughput", pu[3], round(ideal.staggered_rps))):
                headlines.append(Headline(f"{m}: analytic {what}", paper_v, float(ours)))
                claims.append(judge_value(f"{m}: Table 4 analytic {what} (§5.2.2 \"the analytical solution of batch "
                                          "size can be calculated as ⌊(SLO/2 − β)/α⌋ and ⌊(SLO/(1+1/N) − β)/α⌋\", "
                                          "throughput Nb/(αb + β)) reproduced exactly", Rule.near(paper_v, 0.0),
                                          float(ours), "a formula over Table 4's α, β, SLO and N", f"{ours}"))
            vals = {}
            for s, paper_g in zip(SYSTEMS, paper):
                row = c.lookup(ci, model=m, system=s)
                vals[s] = row["mean"]
                headlines.append(Headline(f"{m}: {c.LABELS[s]} goodput (p99 ≤ SLO)", paper_g, row["mean"],
                                          row["half_width"], " r/s"))
            claims.append(c.claim_within(f"{m}: Symphony goodput", good.filter(
                (pl.col("model") == m) & (pl.col("system") == "symphony")).sort("seed")["value"], paper[0], 0.15))
            mg = good.filter(pl.col("model") == m)

            def got(f: pl.DataFrame, system: str) -> float:
                return float(f.filter(pl.col("system") == system)["value"].sum())

            claims.append(judge_claim(
                f"{m}: Table 4's goodput (Symphony {paper[0]:g} r/s against Clockwork {paper[1]:g} and Nexus "
                f"{paper[2]:g}) — Symphony above both (Symphony − the better baseline, r/s, per seed: > 0)",
                Rule.above(0.0, "r/s"), seed_values(lambda f: got(f, "symphony") - max(got(f, "clockwork"),
                                                                                       got(f, "nexus")), mg),
                f"{vals['symphony']:.0f} vs {vals['clockwork']:.0f} / {vals['nexus']:.0f} r/s"))
            claims.append(judge_claim(
                f"{m}: §5.2.2 \"The empirical measurement shows that the goodput of Symphony is close to the analytical "
                "throughput of staggered execution\" — above the uncoordinated one and at most 2 % over the staggered "
                f"(Symphony's goodput per seed in ({ideal.uncoordinated_rps:.0f}, {1.02 * ideal.staggered_rps:.0f}])",
                Rule(math.nextafter(ideal.uncoordinated_rps, math.inf), 1.02 * ideal.staggered_rps,
                     f"({ideal.uncoordinated_rps:.0f}, {1.02 * ideal.staggered_rps:.0f}] r/s"),
                seed_values(lambda f: got(f, "symphony"), mg), f"{vals['symphony']:.0f} r/s"))
            # Fig. 8: "the majority of requests run with batch sizes greater than 14 and 6 [ResNet50] ...
            # greater than 8 and 3 [InceptionResNetV2]" (Symphony and Nexus). Read as "at least": Nexus'
            # batch cannot exceed Eq. 1's uncoordinated batch (3 for InceptionResNetV2, Table 4), so
            # "greater than 3" would be impossible, and 8 is Symphony's staggered ideal (the text says
            # the measured sizes are "close to the analytical solutions").
            share = results.filter((pl.col("metric") == "batch_share") & (pl.col("model") == m))
            limit = 14 if m == "ResNet50" else 8
            for s, lim in (("symphony", limit), ("nexus", 6 if m == "ResNet50" else 3)):
                part = share.filter(pl.col("system") == s)
                seeds = max(1, part["seed"].n_unique())
                above = float(part.filter(pl.col("x") >= lim)["value"].sum()) / seeds
                strict = float(part.filter(pl.col("x") > lim)["value"].sum()) / seeds
                claims.append(judge_claim(
                    f"Fig. 8 {m}: \"the majority of requests run with batch sizes greater than {lim}\" "
                    f"({c.LABELS[s]}), read as ≥ {lim} (the share of requests, per seed: > ½)", Rule.above(0.5),
                    seed_values(lambda f, lim=lim: float(f.filter(pl.col("x") >= lim)["value"].sum()), part)
                    if part.height else [], f"{100 * above:.0f} % of requests"))
                claims.append(judge_claim(
                    f"Fig. 8 {m}: the same, read strictly as > {lim} ({c.LABELS[s]}; the share of requests, per "
                    "seed: > ½)", Rule.above(0.5),
                    seed_values(lambda f, lim=lim: float(f.filter(pl.col("x") > lim)["value"].sum()), part)
                    if part.height else [], f"{100 * strict:.0f} % of requests"))
            # Fig. 9: Symphony's queuing delay 2–3× shorter than the baselines'
            qd = results.filter((pl.col("metric") == "queue_ms") & (pl.col("model") == m) & (pl.col("x") == 0.99))
            q99 = {s: float(qd.filter(pl.col("system") == s)["value"].mean() or float("nan")) for s in SYSTEMS}
            base = min(q99["clockwork"], q99["nexus"])
            headlines.append(Headline(f"Fig. 9 {m}: baseline / Symphony p99 queuing delay", 2.5,
                                      base / q99["symphony"] if q99["symphony"] else float("nan"), unit="×"))
            qmax = results.filter((pl.col("metric") == "queue_ms") & (pl.col("model") == m) & (pl.col("x") == 1.0)
                                  & (pl.col("system") == "nexus"))["value"]
            nx_max = float(qmax.mean()) if qmax.len() else float("nan")
            headlines.append(Headline(f"Fig. 9 {m}: Nexus's longest queuing delay / SLO (paper ≈ 1/2)", 0.5,
                                      nx_max / slo))
            for s in ("nexus", "clockwork"):
                why = ("; measured at our Clockwork's own goodput and batch sizes, which differ from the paper's "
                       "(its goodput row and the Clockwork note), so its queuing differs too" if s == "clockwork"
                       and q99[s] < 2 * q99["symphony"] else "")
                def shorter(f: pl.DataFrame, s: str = s) -> float:
                    q = {x: float(f.filter(pl.col("system") == x)["value"].mean() or float("nan"))
                         for x in (s, "symphony")}
                    return q[s] - 2 * q["symphony"]

                claims.append(judge_claim(
                    f"Fig. 9 {m}: §5.2.3 \"Symphony's queuing delay is 2x to 3x shorter than baseline systems\" — at "
                    f"least 2× shorter than {c.LABELS[s]}'s at p99 ({c.LABELS[s]} − 2 × Symphony, ms, per seed: ≥ 0)",
                    Rule.at_least(0.0, unit="ms"), seed_values(shorter, qd) if qd.height else [],
                    f"Symphony {q99['symphony']:.1f} ms, {c.LABELS[s]} {q99[s]:.1f} ms{why}"))
        figures = []
        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"))
        fig, axes = plotting.figure(ncols=2)
        for i, m in enumerate(MODELS):
            part = data.filter((pl.col("metric") == "batch_share") & (pl.col("model") == m) & (pl.col("x") <= 32))
            plotting.lines(axes[0][i], part, "x", "value", "System", markers=False)
            axes[0][i].set(title=m, xlabel="batch size", ylabel="share of requests")
        figures += c.plot_save(fig, figures_dir, "symphony-fig8")
        fig, axes = plotting.figure(ncols=2)
        for i, m in enumerate(MODELS):
            part = data.filter((pl.col("metric") == "queue_ms") & (pl.col("model") == m))
            plotting.lines(axes[0][i], part, "value", "x", "System", markers=False)
            axes[0][i].set(title=m, xlabel="queuing delay (ms)", ylabel="CDF")
        figures += c.plot_save(fig, figures_dir, "symphony-fig9")
        notes = ["Nexus here is the shared Nexus policy (per-epoch squishy bin packing, 1-s epochs, oracle "
                 "peaks) with spare=\"spread\": the fixed 8-GPU cluster all serves (Symphony §5; idle spare "
                 "GPUs made its p99 goodput 0)."]
        share = results.filter((pl.col("metric") == "batch_share") & (pl.col("system") == "clockwork"))
        for m in MODELS:
            part = share.filter(pl.col("model") == m)
            seeds = max(1, part["seed"].n_unique())
            mean_b = float((part["x"] * part["value"]).sum()) / seeds
            notes.append(f"Clockwork {m}: request-weighted mean batch {mean_b:.1f}. Clockwork runs as Symphony ran "
                         f"the Clockwork release (its controller's 10 ms schedule-ahead and 5 ms SLO buffer; "
                         f"without them: 4503 / 910 r/s, mean batch 10.7 for ResNet50). Its batch is built up to "
                         f"10 ms before the GPU frees from the requests queued then, sized for the most urgent "
                         f"one; not modelled: the release's batch choice (the largest size whose queue holds that "
                         f"many requests able to finish with it), its 1 ms dispatch lag and measured (p99 of the "
                         f"last 10) execution estimates — ResNet50's ℓ(1) = 6.1 ms is shorter than the 10 ms "
                         f"window, so most requests are booked alone (paper Fig. 8: about uniform sizes above 1).")
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Table4())
