"""Symphony Fig. 14: a changing workload with closed-loop autoscaling (§4.4, §5.6).

The paper's 512-GPU run replays request rates synthesised from 150 hours of
video; that data is not available here, so a **synthetic diurnal rate stands
in** (labelled so in the figure and report): each model's rate follows
``mean·(1 + A·sin(2π(t/T + φ)))`` with a phase φ spread over 0.15 of a period, Poisson arrivals by
thinning. The models are the first ones of Table 5 (1080Ti) at their own
SLOs. Symphony runs closed-loop: every epoch the cluster follows the advice
of :mod:`shepherd.core.autoscale` (+N·b/(1−b) above a 1 % bad rate, −N·f
otherwise). Per epoch: arrivals and in-time requests per model, GPUs, advice,
bad rate, and the staggered capacity of the epoch's GPUs (Eqs. 2–3): the
paper's claim is a low bad rate "when the cluster is not overloaded", so it
is checked over the epochs whose offered rate is within that capacity (the
autoscaler follows the rate one epoch late, so rising epochs overload).
Full: 24 models, 512 GPUs at the start, 120 s, 5 s epochs; quick:
8 models, 16 GPUs, 12 s, 1 s epochs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.core.autoscale import advice_frame
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c
from shepherd.experiments.symphony.fig10_flat_top import VARIANTS
from shepherd.traces.synthetic import assemble

AMPLITUDE = 0.8
LABEL = "synthetic diurnal rate (stand-in for the paper's video-derived rates)"


def diurnal_trace(names, slos, means, period_s, duration_s, seed) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    streams = []
    for i, mean in enumerate(means):
        peak = mean * (1 + AMPLITUDE)
        n = rng.poisson(peak * duration_s)
        t = np.sort(rng.uniform(0, duration_s, n))
        phase = 0.15 * i / len(means) - 0.25  # models peak close together; the run starts at a trough
        keep = rng.uniform(0, 1, n) < (1 + AMPLITUDE * np.sin(2 * np.pi * (t / period_s + phase))) / (1 + AMPLITUDE)
        streams.append((t[keep] * 1e6).astype(np.int64))
    return assemble(streams, names, [int(s * 1000) for s in slos])


def capacity_rps(ab, slos, means, gpus: int) -> float:
    """The analytic (Eqs. 2–3, staggered) rate ``gpus`` GPUs serve for this mix of models (shares by mean
    rate): what "not overloaded" means in an epoch (§5.6: a low bad rate "when the cluster is not overloaded")."""
    if gpus <= 0:
        return 0.0
    n = max(1, gpus // len(means))
    w = np.asarray(means) / float(np.sum(means))
    per_gpu = [ba.throughput_rps(ba.Linear(a, b), max(1, ba.staggered_batch(ba.Linear(a, b), s, n)), 1)
               for (a, b), s in zip(ab, slos)]
    return float(gpus / np.sum(w / np.asarray(per_gpu)))


class Fig14(Experiment):
    name = "symphony-fig14"
    paper = "symphony"
    title = "Symphony Fig. 14: changing workload with autoscaling (synthetic diurnal rate)"

    def cells(self, scale):
        # every Symphony rule side by side (issue 31): the idle-GPU signal depends on the rule (Fig. 10)
        if scale.quick:
            return [self.cell(models=8, gpus=16, duration_s=12.0, epoch_s=1.0, seed=s, columns="good:", system=v)
                    for v in VARIANTS for s in range(scale.seeds)]
        return [self.cell(models=24, gpus=512, duration_s=120.0, epoch_s=5.0, seed=s, columns="good:", system=v)
                for v in VARIANTS for s in range(scale.seeds)]

    def run_cell(self, p):
        zoo = c.zoo().head(p["models"])
        names, slos = zoo["model"].to_list(), zoo["slo_ms"].to_list()
        ab = list(zip(zoo["alpha_ms"].to_list(), zoo["beta_ms"].to_list()))
        # mean load ≈ 80 % of the start cluster's ideal (uncoordinated) throughput, peaks well above it
        per_gpu = [ba.throughput_rps(ba.Linear(a, b), max(1, ba.uncoordinated_batch(ba.Linear(a, b), s)), 1)
                   for (a, b), s in zip(ab, slos)]
        share = p["gpus"] / len(names)
        means = [0.8 * share * x for x in per_gpu]
        trace = diurnal_trace(names, slos, means, p["duration_s"], p["duration_s"], p["seed"])
        prof = c.linear_profiles([(n, a, b) for n, (a, b) in zip(names, ab)])
        res = c.run(p["system"], trace, prof, p["gpus"], p["seed"], autoscale_epoch_s=p["epoch_s"])
        epoch = int(p["epoch_s"] * 1e6)
        win = advice_frame(res.windows(epoch), epoch).filter(pl.col("start_us") < int(p["duration_s"] * 1e6))
        rq = res.requests_frame().with_columns((pl.col("arrival_us") // epoch).alias("window"),
                                               (pl.col("outcome") == "served").alias("good"))
        per_model = rq.group_by("window", "model").agg(pl.len().alias("arrivals"), pl.col("good").sum())
        out = win.select("window", "arrivals", "bad_rate", "idle_fraction", "gpus", "advice").with_columns(
            capacity_rps=pl.col("gpus").map_elements(lambda n: capacity_rps(ab, slos, means, n), pl.Float64))
        models = per_model.pivot(on="model", index="window", values="good").fill_null(0)
        models = models.rename({m: f"good:{m}" for m in models.columns if m != "window"})
        return out.join(models, on="window", how="left").fill_null(0).with_columns(
            seed=pl.lit(p["seed"]), epoch_s=pl.lit(p["epoch_s"]), system=pl.lit(p["system"]))

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        if "system" not in results.columns:
            results = results.with_columns(system=pl.lit("symphony"))
        per_rule = [self._measures(results.filter(pl.col("system") == v), v) for v in VARIANTS
                    if results.filter(pl.col("system") == v).height]
        every, results = results, results.filter(pl.col("system") == "symphony")
        r = results.filter(pl.col("seed") == results["seed"].min()).sort("window")
        epoch = float(r["epoch_s"][0])
        t = r["window"].to_numpy() * epoch
        models = [col for col in r.columns if col.startswith("good:")]
        fig, axes = plotting.figure(nrows=4, width=7, height=1.8)
        axes[0][0].stackplot(t, *[r[m].cast(pl.Float64).to_numpy() / epoch for m in models],
                             labels=[m[5:] for m in models])
        axes[0][0].plot(t, r["arrivals"].to_numpy() / epoch, c="k", lw=1, label="offered")
        axes[0][0].set(ylabel="goodput (r/s)")
        axes[1][0].step(t, r["gpus"].to_numpy(), where="post")
        axes[1][0].set(ylabel="GPUs")
        axes[2][0].bar(t, r["advice"].to_numpy(), width=epoch * 0.8)
        axes[2][0].set(ylabel="advice (GPUs)")
        axes[3][0].plot(t, r["bad_rate"].to_numpy())
        axes[3][0].set(ylabel="bad rate", xlabel="time (s)")
        figures = c.plot_save(fig, figures_dir, "symphony-fig14", note=LABEL)
        g = r["gpus"].to_numpy()
        offered = r["arrivals"].to_numpy().astype(float)
        corr = float(np.corrcoef(offered, g)[0, 1]) if len(g) > 2 and g.std() > 0 else float("nan")
        bad = float((r["bad_rate"] * r["arrivals"]).sum() / max(1, r["arrivals"].sum()))
        ok = r.filter(pl.col("arrivals") / epoch <= pl.col("capacity_rps")) if "capacity_rps" in r.columns else r.clear()
        bad_ok = float((ok["bad_rate"] * ok["arrivals"]).sum() / max(1, ok["arrivals"].sum()))
        headlines = [Headline("overall bad rate", None, 100 * bad, unit=" %"),
                     Headline("bad rate in epochs not overloaded", None, 100 * bad_ok, unit=" %"),
                     Headline("correlation of GPUs with offered load per epoch", None, corr),
                     Headline("GPUs min / max over the run", None, float(g.min()) / max(1.0, float(g.max())))]
        consolidate = ("§5.6 \"Symphony is able to consolidate GPU usage when the cluster is underloaded\" — GPUs "
                       "follow the offered load (correlation of GPUs with offered per epoch, per seed: > 0.5)")
        claims = [judge_claim(consolidate, Rule.above(0.5), seed_values(lambda f: seed_measures(f)[0], results),
                              f"first seed {corr:.2f}"),
                  judge_claim("§5.6 \"Symphony is able to maintain a low bad rate when the cluster is not "
                              "overloaded\" (the bad rate over the epochs whose offered rate is within their GPUs' "
                              "staggered capacity, per seed: < 5 %; no such epoch: no value)", Rule.below(0.05),
                              seed_values(lambda f: seed_measures(f)[2], results),
                              f"first seed {100 * bad_ok:.1f} % over {ok.height} of {r.height} epochs "
                              f"(overall {100 * bad:.1f} %)")]
        for v, corr_v, bad_v, bad_ok_v in per_rule:
            headlines.append(Headline(f"{c.LABELS[v]}: GPUs-vs-load correlation", None, corr_v))
            headlines.append(Headline(f"{c.LABELS[v]}: bad rate (epochs not overloaded)", None, 100 * bad_ok_v,
                                      unit=" %"))
            if v != "symphony":
                claims.append(judge_claim(f"{c.LABELS[v]}: {consolidate}", Rule.above(0.5),
                                          seed_values(lambda f: seed_measures(f)[0], every.filter(pl.col("system") == v)),
                                          f"first seed {corr_v:.2f}; bad rate {100 * bad_v:.1f} % overall, "
                                          f"{100 * bad_ok_v:.1f} % not overloaded"))
        return Section(self.title, figures, headlines, claims,
                       notes=[f"Workload: {LABEL}. The figure shows §4.3's rule; every rule's numbers are rows."])

    @staticmethod
    def _measures(rows: pl.DataFrame, system: str) -> tuple[str, float, float, float]:
        """(system, GPUs-vs-offered correlation, overall bad rate, bad rate in epochs not overloaded) of the
        first seed (the rows; the claims take every seed's, :func:`seed_measures`)."""
        corr, bad, bad_ok, _ = seed_measures(rows.filter(pl.col("seed") == rows["seed"].min()))
        return system, corr, bad, bad_ok


def seed_measures(one_seed: pl.DataFrame) -> tuple[float, float, float, int]:
    """One seed's (GPUs-vs-offered correlation, overall bad rate, bad rate in the epochs not overloaded — NaN
    when there is none —, how many such epochs)."""
    r = one_seed.sort("window")
    g, offered = r["gpus"].to_numpy(), r["arrivals"].to_numpy().astype(float)
    corr = float(np.corrcoef(offered, g)[0, 1]) if len(g) > 2 and g.std() > 0 else float("nan")
    bad = float((r["bad_rate"] * r["arrivals"]).sum() / max(1, r["arrivals"].sum()))
    ok = (r.filter(pl.col("arrivals") / float(r["epoch_s"][0]) <= pl.col("capacity_rps"))
          if "capacity_rps" in r.columns else r.clear())
    bad_ok = (float((ok["bad_rate"] * ok["arrivals"]).sum() / max(1, ok["arrivals"].sum())) if ok.height
              else float("nan"))
    return corr, bad, bad_ok, ok.height


EXPERIMENT = register(Fig14())
