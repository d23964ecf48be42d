"""Symphony Fig. 1: distributed scheduling hurts goodput — Nexus with K frontends (§3.3).

Nexus (the shared policy, ``frontends=K``: each request to a random
frontend, each frontend round-robin on its own) on ResNet50-like models
(Table 5, 1080Ti), Poisson, evenly popular. Setups span the paper's ranges
(8–64 GPUs, 1–37 models, SLO 20–100 ms). Goodput: p99 ≤ SLO (§2.1).
Quick: two setups, K ∈ {1, 2, 4, 8}, 1 s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

ALPHA, BETA = c.RESNET50
SETUPS_QUICK = ((8, 1, 50.0), (16, 4, 100.0))  # (GPUs, models, SLO)
SETUPS_FULL = ((8, 1, 50.0), (16, 4, 100.0), (32, 8, 50.0), (64, 37, 100.0), (64, 16, 20.0))


def nexus_losses(frame: pl.DataFrame) -> list[float]:
    """Per setup (in order), Nexus's goodput loss with the most frontends against one: 1 − many / one, over
    the mean of ``frame``'s seeds (one seed's slice gives that seed's losses); setups with no goodput at one
    frontend are left out."""
    mean = frame.group_by("setup", "frontends").agg(pl.col("goodput_rps").mean())
    out = []
    for s in mean["setup"].unique().sort().to_list():
        part = mean.filter(pl.col("setup") == s).sort("frontends")
        one, many = float(part["goodput_rps"][0]), float(part["goodput_rps"][-1])
        if one > 0:
            out.append(1 - many / one)
    return out


class Fig1(Experiment):
    name = "symphony-fig1"
    paper = "symphony"
    title = "Symphony Fig. 1: Nexus goodput vs number of frontends"

    def cells(self, scale):
        setups, ks, dur = (SETUPS_QUICK, (1, 2, 4, 8), 1.0) if scale.quick else (SETUPS_FULL, (1, 2, 4, 8, 16), 4.0)
        return [self.cell(gpus=g, models=m, slo_ms=s, frontends=k, duration_s=dur, seed=seed)
                for g, m, s in setups for k in ks for seed in range(scale.seeds)]

    def run_cell(self, p):
        prof, wl = c.resnet_like(p["models"], p["slo_ms"], duration_s=p["duration_s"])
        lin = ba.Linear(ALPHA, BETA)
        start = 0.5 * ba.throughput_rps(lin, max(1, ba.uncoordinated_batch(lin, p["slo_ms"])), p["gpus"])
        g = c.goodput("nexus", wl, prof, p["gpus"], p["seed"], start, frontends=p["frontends"])
        return pl.DataFrame([{**{k: p[k] for k in ("gpus", "models", "slo_ms", "frontends", "seed")},
                              "goodput_rps": g}])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        data = results.with_columns(pl.format("{} GPUs, {} models, {} ms", "gpus", "models", "slo_ms").alias("setup"))
        fig, axes = plotting.figure()
        plotting.lines(axes[0][0], data, "frontends", "goodput_rps", "setup")
        axes[0][0].set(ylabel="Nexus goodput (r/s)")
        figures = c.plot_save(fig, figures_dir, "symphony-fig1")
        losses = nexus_losses(data)
        headlines = [Headline("largest goodput loss with the most frontends (paper 5 %–40 %)", 40.0,
                              100 * max(losses) if losses else float("nan"), unit=" %")]
        def band(f: pl.DataFrame) -> float:
            loss = nexus_losses(f)
            return min(min(loss) - 0.05, 0.6 - max(loss)) if loss else float("nan")

        claims = [judge_claim("§3.3 \"As shown in Figure 1, using multiple frontends degrades the goodput of Nexus by "
                              "5% to 40% in various settings\" (every setup's loss with the most frontends in [5 %, "
                              "60 %]: the paper's range, its top widened by half; per seed, the smaller of the "
                              "smallest loss − 0.05 and 0.6 − the largest: ≥ 0)", Rule.at_least(0.0),
                              seed_values(band, data),
                              ", ".join(f"{100 * x:.0f} %" for x in losses) or "Nexus goodput 0 with 1 frontend")]
        notes = ["Why the loss is small (measured once, on a 1-s trace of the 16-GPU, 4-model, 100 ms setup; not "
                 "re-measured per run): one frontend's round-robin already spreads each model's Poisson stream over at "
                 "most 8 backends (Erlang-k arrivals at each, k ≤ 8) and 8 frontends make them ≈ Poisson; near "
                 "capacity that shows as more drops (16 GPUs, 4 models, 100 ms, 6.2k r/s: 36 vs 47 of 6318) but "
                 "moves the p99 goodput by about one bisection step (3 %)."]
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig1())
