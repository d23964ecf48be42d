"""Symphony Fig. 10: stability (goodput vs offered load) and GPU utilization (§4.4, §5.3).

10 ResNet models (ResNet50's 1080Ti profile, Table 5), 100 ms SLO, evenly
popular Poisson requests, 24 GPUs (quick: 5 models on 12 GPUs, 1.5 s).
Offered load is swept from 0.25× to 2× the analytic staggered throughput
(:mod:`shepherd.core.batch_analytics`); per run: good (in-time) rate, bad
rate, GPU utilization. The flat-top properties (§4.4): past the peak p,
goodput stays near p (bad rate ≈ (o − p)/o); below it, the idle fraction ≈
(p − o)/p. Symphony is run with §4.3's β·λ rule, with Appendix C's rule as
printed (sched_at only), with §4.3's rule ranking every candidate
(``rank="all"``, a deviation, its own row) and with Clipper pruning (§4.3's
wording; the default window prune is a deviation, its own row); see
:mod:`shepherd.core.policies.symphony`. Clockwork is the Clockwork release's
controller as Symphony ran it (10 ms schedule-ahead, 5 ms SLO buffer).

Why §4.3's rule does not track (p − o)/p here (the paper's rule, not a bug of
ours): a candidate of ≥ β·λ requests is schedulable at once, and at 0.25 of
the peak β·λ = 5.378 ms × 268 r/s ≈ 1.4 per model, so an idle GPU runs
batches of ≈ 2 (ℓ(2) = 9.5 ms for two requests, 4.7 ms each against 2.2 ms at
the staggered batch of 29): utilization ≈ 0.25 × 4.7 / 2.2 ≈ 0.54 instead of
0.25. No λ estimate changes this (the test compares the candidate to the
model's own rate, which is what it is), and the ranking is not involved
(``rank="all"`` dispatches the same batches). Appendix C as printed — every
candidate waits for sched_at — is the reading that reproduces Fig. 10.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

ALPHA, BETA, SLO = *c.RESNET50, 100.0  # ResNet50, Table 5 (1080Ti)
#: every Symphony rule side by side (issue 31), §4.3's rule with Clipper pruning (issue 41: the default window
#: prune is a deviation, its own row), then the baselines
VARIANTS = ("symphony", "symphony-sa", "symphony-tb", "symphony-bla", "symphony-ra", "symphony-cp")
SYSTEMS = (*VARIANTS, "clockwork", "nexus")
FACTORS_FULL = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 1.75, 2.0)
FACTORS_QUICK = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def setup(quick: bool) -> tuple[int, int, float]:
    """(models, GPUs, seconds)."""
    return (5, 12, 1.5) if quick else (10, 24, 6.0)


def ideal_rps(models: int, gpus: int) -> float:
    lin = ba.Linear(ALPHA, BETA)
    return ba.throughput_rps(lin, ba.staggered_batch(lin, SLO, max(1, gpus // models)), gpus)


def flat_top(rows: pl.DataFrame) -> dict[str, float]:
    """Flat-top measures of one system's sweep (rows: offered_rps, good_rps, utilization)."""
    rows = rows.sort("offered_rps")
    peak = float(rows["good_rps"].max())
    over = rows.filter(pl.col("offered_rps") > 1.1 * peak)
    under = rows.filter(pl.col("offered_rps") < 0.9 * peak)
    worst_over = float(over["good_rps"].min()) / peak if over.height else float("nan")
    gaps = [abs((1 - u) - (peak - o) / peak) for o, u in zip(under["offered_rps"], under["utilization"])]
    return {"peak": peak, "over_min_ratio": worst_over, "last_ratio": float(rows["good_rps"][-1]) / peak,
            "idle_gap_max": max(gaps) if gaps else float("nan")}


def measures(one_seed: pl.DataFrame, system: str) -> dict[str, float]:
    """:func:`flat_top` of ``system``'s sweep in one seed's rows (one row per load factor, in order)."""
    return flat_top(one_seed.filter(pl.col("system") == system).group_by("factor").agg(
        pl.col("offered_rps", "good_rps", "utilization").mean()).sort("factor"))


class Fig10(Experiment):
    name = "symphony-fig10"
    paper = "symphony"
    title = "Symphony Fig. 10: flat-top goodput and GPU utilization vs offered load"

    def cells(self, scale):
        models, gpus, dur = setup(scale.quick)
        factors = FACTORS_QUICK if scale.quick else FACTORS_FULL
        return [self.cell(system=s, factor=f, models=models, gpus=gpus, duration_s=dur, seed=seed)
                for s in SYSTEMS for f in factors for seed in range(scale.seeds)]

    def run_cell(self, p):
        prof, wl = c.resnet_like(p["models"], SLO, duration_s=p["duration_s"])
        rate = p["factor"] * ideal_rps(p["models"], p["gpus"])
        s = c.summary(c.run(p["system"], wl.trace(rate, p["seed"]), prof, p["gpus"], p["seed"]))
        return pl.DataFrame([{**s, "system": p["system"], "factor": p["factor"], "seed": p["seed"]}])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    (pl.col("offered_rps") / 1000).alias("offered (k r/s)"),
                                    (pl.col("good_rps") / 1000).alias("goodput (k r/s)"))
        fig, axes = plotting.figure(ncols=2)
        order = [c.LABELS[s] for s in SYSTEMS]
        plotting.lines(axes[0][0], data, "offered (k r/s)", "goodput (k r/s)", "System", order)
        plotting.lines(axes[0][1], data, "offered (k r/s)", "utilization", "System", order)
        axes[0][0].set_title("Stability")
        axes[0][1].set_title("GPU cluster utilization")
        figures = c.plot_save(fig, figures_dir, "symphony-fig10")
        m = {s: flat_top(results.filter(pl.col("system") == s).group_by("factor").agg(
            pl.col("offered_rps", "good_rps", "utilization").mean())) for s in SYSTEMS}
        headlines = [Headline(f"{c.LABELS[s]}: lowest goodput past saturation / peak", 1.0, m[s]["over_min_ratio"])
                     for s in SYSTEMS]
        headlines += [Headline(f"{c.LABELS[s]}: largest gap between idle fraction and (p − o)/p below saturation", None,
                               m[s]["idle_gap_max"]) for s in SYSTEMS]
        def per_seed(system: str, key: str) -> list[float]:
            return seed_values(lambda f: measures(f, system)[key], results)

        flat_q = ("§5.3 \"Figure 10 (Left) shows that both Symphony and Nexus have flat-top behavior because both "
                  "systems try to maintain a desirable batch size\"")
        idle_q = ("§4.4 \"Given a peak goodput p , if we were to issue an offered load o lower than p , then we would "
                  "like our scheduling system to have an average GPU idle time fraction comparable to (p - o)/p\"")
        claims = []
        for v in VARIANTS:
            claims.append(judge_claim(f"{c.LABELS[v]}: {flat_q} (the lowest goodput past saturation / the peak, "
                                      "per seed: ≥ 0.95, within 5 % of the peak)", Rule.at_least(0.95),
                                      per_seed(v, "over_min_ratio"), f"mean curve {m[v]['over_min_ratio']:.3f}"))
            claims.append(judge_claim(f"{c.LABELS[v]}: {idle_q} (the largest |idle fraction − (p − o)/p| below "
                                      "saturation, per seed: ≤ 0.1)", Rule.at_most(0.1), per_seed(v, "idle_gap_max"),
                                      f"mean curve: max gap {m[v]['idle_gap_max']:.3f}"
                                      + ("; §4.3's rule: a candidate of ≥ β·λ requests (≈ 1.4 at 0.25 of the peak) is "
                                         "schedulable at once, so idle GPUs run batches of ≈ 2 below saturation "
                                         "(core.policies.symphony)" if v == "symphony" and m[v]["idle_gap_max"] > 0.1
                                         else "")))
        claims += [
            judge_claim("§5.3 \"As shown in the graph, Clockwork's goodput starts to degrade as soon as the system is "
                        "overloaded\" (its lowest goodput past saturation / its peak, per seed: < 0.95)",
                        Rule.below(0.95), per_seed("clockwork", "over_min_ratio"),
                        f"mean curve {m['clockwork']['over_min_ratio']:.3f}"),
        ]
        for b in ("clockwork", "nexus"):  # §5.3 says it of both baselines: one row each
            claims.append(judge_claim(
                f"§5.3 'Both Clockwork and Nexus reach full GPU busy levels before reaching their respective peak "
                f"goodput': {c.LABELS[b]} (the largest |idle fraction − (p − o)/p| below saturation, per seed: > 0.1, "
                "the same 0.1 as the Symphony rows)", Rule.above(0.1), per_seed(b, "idle_gap_max"),
                f"mean curve: max gap {m[b]['idle_gap_max']:.3f}"))
        tracks = [c.LABELS[v] for v in VARIANTS if m[v]["idle_gap_max"] <= 0.1 and m[v]["over_min_ratio"] >= 0.95]
        notes = ["Goodput here is the in-time rate at each offered load (Fig. 10's y axis), not the p99 capacity.",
                 "Rules that reproduce Fig. 10 (flat top and an idle fraction tracking (p − o)/p): "
                 + (", ".join(tracks) or "none") + ". The authors' code default is frontrun (symphony-sa)."]
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig10())
