"""Shepherd Fig. 10: goodput vs number of emulated workers (up to 400).

Load grows with the number of workers (``common.LOAD_PER_WORKER`` each).
Paper (§7.1): Clockwork saturates near 50k req/s around N = 200 because its
centralised scheduler becomes the bottleneck; Nexus scales linearly but 40–50 %
below Shepherd; Shepherd scales linearly — 2.5× Clockwork and 1.8× Nexus at
N = 400. Here Clockwork's saturation comes only from the engine's
scheduler-overhead model (decision cost grows with the workers it scans,
:mod:`shepherd.core.engine.overhead`), never from a cap.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.confidence import mean_ci
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.shepherd import common as c

WORKERS_FULL = (12, 50, 100, 150, 200, 300, 400)
WORKERS_QUICK = (12, 100, 400)


def per_worker(one_seed: pl.DataFrame, system: str, workers: int) -> float:
    """One seed's goodput of ``system`` per worker at ``workers`` workers."""
    return c.val(one_seed, "goodput_rps", system=system, workers=workers) / workers


class Fig10(Experiment):
    name = "shepherd-fig10"
    paper = "shepherd"
    title = "Shepherd Fig. 10: goodput vs emulated workers (load scaled per worker)"

    def cells(self, scale):
        workers = WORKERS_QUICK if scale.quick else WORKERS_FULL
        return [self.cell(workload=w, trace=c.trace_name(w, emulated=True), workers=n, system=s, seed=seed,
                          per_worker=c.LOAD_PER_WORKER, horizon_s=c.horizon_s(scale.quick, scalability=True))
                for w in ("stable", "bursty") for n in workers for s in c.SYSTEMS for seed in range(scale.seeds)]

    def run_cell(self, p):
        trace, synthetic = c.scaled_trace(p["trace"], p["workers"], p["seed"], p["horizon_s"])
        return c.one_row(**c.run_system(p["system"], trace, p["workers"], p["seed"]), synthetic=synthetic)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        figures = c.plot_per_workload(results, "workers", figures_dir, "shepherd-fig10")
        top = results["workers"].max()
        headlines, claims = [], []
        for w in ("stable", "bursty"):
            part = results.filter(pl.col("workload") == w)
            headlines += [
                Headline.of_seeds(f"MAF-{w}, N={top}: Shepherd / Clockwork", 2.5,
                                  c.seed_ratios(part, "shepherd", "clockwork", "goodput_rps", workers=top), "×"),
                Headline.of_seeds(f"MAF-{w}, N={top}: Shepherd / Nexus", 1.8,
                                  c.seed_ratios(part, "shepherd", "nexus", "goodput_rps", workers=top), "×"),
            ]
            ci = mean_ci(part, ["system", "workers"], "goodput_rps")
            cw = ci.filter(pl.col("system") == "clockwork").sort("workers")
            sh = ci.filter(pl.col("system") == "shepherd").sort("workers")
            headlines.append(Headline(f"MAF-{w}: Clockwork's peak goodput (paper ≈ 50k at N≈200)", 50_000.0,
                                      float(cw["mean"].max()), unit="req/s"))
            sh_top, cw_top = c.lookup(ci, system="shepherd", workers=top), c.lookup(ci, system="clockwork", workers=top)
            g, first = "goodput_rps", sh["workers"][0]
            claims.append(judge_claim(
                f"MAF-{w}: §7.1 \"SHEPHERD outperforms Clockwork and Nexus by 2.5× and 1.8× respectively in terms of "
                f"goodput at N = 400 workers\" — beats Clockwork at N={top} (Shepherd − Clockwork, req/s, per seed: "
                "> 0)", Rule.above(0.0, "req/s"),
                seed_values(lambda f: c.val(f, g, system="shepherd", workers=top)
                            - c.val(f, g, system="clockwork", workers=top), part),
                f"{sh_top['mean']:.0f} vs {cw_top['mean']:.0f} req/s"))
            per_worker_first = sh["mean"][0] / sh["workers"][0]
            per_worker_last = sh["mean"][-1] / sh["workers"][-1]
            claims.append(judge_claim(
                f"MAF-{w}: Fig. 10 \"SHEPHERD observes both high goodput and linear scaling\" (Shepherd's goodput "
                f"per worker at N={top} over N={first}, per seed; read as ≥ 0.8)", Rule.at_least(0.8),
                seed_values(lambda f: per_worker(f, "shepherd", top) / per_worker(f, "shepherd", first), part),
                f"{per_worker_first:.0f} → {per_worker_last:.0f} req/s per worker"))
            cw_eff = cw["mean"][-1] / cw["workers"][-1] / (cw["mean"][0] / cw["workers"][0])
            small = part.filter((pl.col("system") == "clockwork") & (pl.col("workers") == cw["workers"][0]))
            cw_small_met = float((small["goodput_rps"] / small["offered_rps"]).mean())
            cw_top_mean = float(cw["mean"][-1])

            def level(f: pl.DataFrame) -> float:
                rows = c.where(f, system="clockwork")
                at_top = c.val(rows, g, workers=top)
                return min(0.3 - abs(at_top / 50_000 - 1), at_top / float(rows[g].max()) - 0.7)

            claims.append(judge_claim(
                f"MAF-{w}: §7.1 Clockwork \"saturates at 50k request/second around N = 200\" (ours, per seed: the "
                f"smaller of 0.3 − |goodput at N={top} / 50k − 1| and goodput at N={top} / its peak − 0.7: ≥ 0, i.e. "
                "within 30 % of 50k and ≥ 70 % of its peak)", Rule.at_least(0.0), seed_values(level, part),
                f"mean peak {float(cw['mean'].max()):.0f}, N={top}: {cw_top_mean:.0f} req/s"))
            eff = seed_values(lambda f: per_worker(f, "clockwork", top) / per_worker(f, "clockwork", cw["workers"][0]),
                              part)
            claims.append(judge_claim(
                f"MAF-{w}: Fig. 10 \"Clockwork does not scale beyond 200 workers\" (its goodput per worker at "
                f"N={top} over N={cw['workers'][0]}, per seed; read as < 0.5)", Rule.below(0.5), eff,
                f"per-worker efficiency {cw_eff:.2f}"
                + ("" if max(eff) < 0.5 else
                   f" — at N={cw['workers'][0]} our Clockwork meets only {cw_small_met:.0%} of its offered "
                   "load, so the per-worker baseline is already below 300 req/s; its level "
                   f"at N={top} is the saturation checked in the row above")))
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig10())
