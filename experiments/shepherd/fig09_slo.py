"""Shepherd Fig. 9: goodput vs SLO (20 … 500 ms) at ≈3k requests/s, 12 workers.

Paper (§7.1): all systems do well at 500 ms; at tight SLOs Shepherd
outperforms Clockwork by up to 1.3× and Nexus by up to 38×.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.confidence import mean_ci
from shepherd.experiments.registry import register
from shepherd.experiments.shepherd import common as c

LOAD = 3_000
SLOS_FULL = (20, 50, 100, 150, 250, 500)
SLOS_QUICK = (20, 50, 100, 250, 500)


class Fig9(Experiment):
    name = "shepherd-fig9"
    paper = "shepherd"
    title = "Shepherd Fig. 9: goodput vs SLO at ≈3k req/s"

    def cells(self, scale):
        slos = SLOS_QUICK if scale.quick else SLOS_FULL
        return [self.cell(workload=w, trace=c.trace_name(w), slo_ms=slo, system=s, seed=seed, load=LOAD,
                          horizon_s=c.horizon_s(scale.quick), gpus=c.TESTBED_GPUS)
                for w in ("stable", "bursty") for slo in slos for s in c.SYSTEMS for seed in range(scale.seeds)]

    def run_cell(self, p):
        trace, synthetic = c.workload(p["trace"], p["load"], p["seed"], p["horizon_s"], slo_ms=p["slo_ms"])
        return c.one_row(**c.run_system(p["system"], trace, p["gpus"], p["seed"]), synthetic=synthetic)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        figures = c.plot_per_workload(results, "slo_ms", figures_dir, "shepherd-fig9")
        headlines, claims = [], []
        for w in ("stable", "bursty"):
            part = results.filter(pl.col("workload") == w)
            best_cw = max((c.paired_ratio(part, "shepherd", "clockwork", "goodput_rps", slo_ms=s)
                           for s in part["slo_ms"].unique().to_list()), key=lambda r: r[0])
            nx_by_slo = {s: c.paired_ratio(part, "shepherd", "nexus", "goodput_rps", slo_ms=s)
                         for s in sorted(part["slo_ms"].unique().to_list())}
            best_slo = max(nx_by_slo, key=lambda s: nx_by_slo[s][0])
            best_nx = nx_by_slo[best_slo]
            headlines += [Headline(f"MAF-{w}: max over SLOs of Shepherd / Clockwork", 1.3, *best_cw, "×"),
                          Headline(f"MAF-{w}: max over SLOs of Shepherd / Nexus", 38.0, *best_nx, "×")]
            ci = mean_ci(part, ["system", "slo_ms"], "goodput_rps")
            tight, loose = part["slo_ms"].min(), part["slo_ms"].max()
            sh_t, sh_l = c.lookup(ci, system="shepherd", slo_ms=tight), c.lookup(ci, system="shepherd", slo_ms=loose)
            claims.append(Claim(f"MAF-{w}: goodput falls as the SLO tightens ({loose} → {tight} ms)",
                                sh_t["mean"] < sh_l["mean"], f"{sh_l['mean']:.0f} → {sh_t['mean']:.0f} req/s"))
            tightest = min(x for x in part["slo_ms"].unique().to_list()
                           if c.lookup(ci, system="clockwork", slo_ms=x)["mean"] > 0 or x == loose)
            r_cw = c.paired_ratio(part, "shepherd", "clockwork", "goodput_rps", slo_ms=tightest)
            claims.append(Claim(f"MAF-{w}: at the tightest SLO ({tightest} ms) Shepherd ≥ Clockwork (paper up to 1.3×)",
                                r_cw[0] >= 1.0, f"Shepherd / Clockwork {r_cw[0]:.2f}×"))
            r_nx = c.paired_ratio(part, "shepherd", "nexus", "goodput_rps", slo_ms=tightest)
            offered_all = float(part["offered_rps"].mean())
            claims.append(Claim(f"MAF-{w}: at tight SLOs Shepherd ≫ Nexus (paper up to 38×; checked ≥ 2× at {tightest} ms)",
                                r_nx[0] >= 2.0, f"Shepherd / Nexus {r_nx[0]:.2f}×"
                                + ("" if r_nx[0] >= 2.0 else
                                   f" — the largest ratio is at {best_slo} ms ({best_nx[0]:.1f}×); at {tightest} ms "
                                   f"only requests of models with ℓ(1) ≤ {tightest} ms can be served at all (Shepherd "
                                   f"{sh_t['mean']:.0f} of ≈ {offered_all:.0f} req/s), and Nexus serves most of those")))
            cw_l, nx_l = c.lookup(ci, system="clockwork", slo_ms=loose), c.lookup(ci, system="nexus", slo_ms=loose)
            offered = float(part.filter(pl.col("slo_ms") == loose)["offered_rps"].mean())
            claims.append(Claim(f"MAF-{w}: all systems do well at {loose} ms (goodput ≥ 80 % of offered)",
                                min(sh_l["mean"], cw_l["mean"], nx_l["mean"]) >= 0.8 * offered,
                                f"{sh_l['mean']:.0f} / {cw_l['mean']:.0f} / {nx_l['mean']:.0f} of {offered:.0f} req/s"
                                + ("" if min(sh_l["mean"], cw_l["mean"], nx_l["mean"]) >= 0.8 * offered else
                                   " — Nexus provisions for its SLO-long peaks (its plan must sustain every "
                                   "burst); on 12 workers its peak plan does not fit even at 3k req/s on the real "
                                   "sample (one function on a slow model carries most of it), so it admits only "
                                   "the fraction whose peaks fit")))
            nx_t = c.lookup(ci, system="nexus", slo_ms=tight)
            claims.append(Claim(f"MAF-{w}: at {tight} ms Shepherd ≥ Nexus",
                                sh_t["mean"] + sh_t["half_width"] >= nx_t["mean"] - nx_t["half_width"],
                                f"{sh_t['mean']:.0f} vs {nx_t['mean']:.0f} req/s"))
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig9())
