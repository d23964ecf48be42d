"""PPipe Fig. 13: sensitivity on HC1-S (4 L4 + 12 P4), one DNN at a time, PPipe vs NP.

(a) SLO scale 2 … 10 (× the L4 batch-1 latency); (b) high:low GPU ratio
(L4:P4 of 16 GPUs); (c) the MILP's SLO margin. For each setting the max load
factor at 99 % attainment ("Poisson"), load factor 1.0 = PPipe's planned
throughput at that setting, averaged over the DNNs (18 in the paper; the
first DNN of each of three groups with ``--quick``). Paper (§7.6): no gain
over NP at SLO scale 2, marginal at 10; +64.03 % at 2:14, +5.64 % at 12:4;
+52.8 % at margin 40 %, +24.9 % at 20 %, +16.4 % at 60 %.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core.errors import UserError
from shepherd.experiments.base import Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.ppipe import common as c
from shepherd.experiments.registry import register

PANELS_FULL = {"slo_scale": (2.0, 3.0, 5.0, 7.0, 10.0), "ratio": (2, 4, 8, 12), "margin": (0.2, 0.4, 0.6)}
PANELS_QUICK = {"slo_scale": (2.0, 5.0, 10.0), "ratio": (2, 12), "margin": (0.2, 0.4, 0.6)}
PAPER = {("ratio", 2): 64.03, ("ratio", 12): 5.64, ("margin", 0.4): 52.8, ("margin", 0.2): 24.9,
         ("margin", 0.6): 16.4, ("slo_scale", 2.0): 0.0}


def _dnns(quick: bool) -> list[str]:
    return [g[0] for g in c.groups()[:3]] if quick else sorted(c.profiles())


class Fig13(c.PPipeExperiment):
    name = "ppipe-fig13"
    paper = "ppipe"
    title = "PPipe Fig. 13: sensitivity to SLO scale, GPU ratio and MILP margin (HC1-S)"

    def cells(self, scale):
        panels = PANELS_QUICK if scale.quick else PANELS_FULL
        return [self.cell(panel=k, value=v, dnn=d, seed=seed, seconds=5.0 if scale.quick else 30.0,
                          step=0.1 if scale.quick else 0.05, rules=r)
                for r in c.RULE_SETS for k, vals in panels.items() for v in vals for d in _dnns(scale.quick) for seed in range(scale.seeds)]

    def run_cell(self, p):
        cluster = c.make_cluster("HC1-S")
        margin, scale = 0.4, 5.0
        if p["panel"] == "ratio":
            cluster = cluster.with_counts({"L4": int(p["value"]), "P4": 16 - int(p["value"])})
        elif p["panel"] == "margin":
            margin = float(p["value"])
        else:
            scale = float(p["value"])
        group = (p["dnn"],)
        rules = p.get("rules", "paper")
        rows = []
        try:
            plans = {s: c.plan(s, cluster, group, "poisson", margin, scale, rules=rules) for s in ("ppipe", "np")}
        except UserError:  # e.g. no feasible pipeline at SLO scale 2 with the margin
            plans = {}
        for s in ("ppipe", "np"):
            lf = 0.0
            if s in plans:
                found, _ = c.sweep(plans[s], plans["ppipe"].normalized_xput, group, "poisson", p["seconds"], p["seed"],
                                   p["step"], rules=rules)
                lf = found[p["dnn"]]
            rows.append(dict(panel=p["panel"], value=float(p["value"]), dnn=p["dnn"], seed=p["seed"], system=s,
                             max_lf=lf))
        return c.tagged(pl.DataFrame(rows), p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        return c.by_rules(self._report, results, figures_dir)

    def _report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"))
        fig, axes = plotting.figure(ncols=3, width=3.6)
        for ax, panel, label in zip(axes[0], ("slo_scale", "ratio", "margin"),
                                    ("SLO scale", "L4 GPUs (of 16)", "MILP margin")):
            part = data.filter(pl.col("panel") == panel).rename({"value": label, "max_lf": "max load factor"})
            plotting.lines(ax, part, label, "max load factor", "System", ["NP", "PPipe"])
        figures = save_figure(fig, figures_dir, "ppipe-fig13")
        mean = results.group_by("panel", "value", "system").agg(pl.col("max_lf").mean())
        headlines, gains = [], {}
        for (panel, value), paper in PAPER.items():
            row = mean.filter((pl.col("panel") == panel) & (pl.col("value") == float(value)))
            pp = row.filter(pl.col("system") == "ppipe")["max_lf"]
            npv = row.filter(pl.col("system") == "np")["max_lf"]
            if pp.len() and npv.len() and npv[0] > 0:
                gains[(panel, value)] = 100 * (pp[0] / npv[0] - 1)
                headlines.append(Headline(f"{panel} = {value}: PPipe over NP max load factor", paper,
                                          gains[(panel, value)], unit="%"))
        claims = []
        if ("ratio", 2) in gains and ("ratio", 12) in gains:
            def gain(f: pl.DataFrame, value: float) -> float:
                at = f.filter((pl.col("panel") == "ratio") & (pl.col("value") == value))
                npv = float(at.filter(pl.col("system") == "np")["max_lf"].mean() or 0.0)
                pp = float(at.filter(pl.col("system") == "ppipe")["max_lf"].mean() or 0.0)
                return 100 * (pp / npv - 1) if npv else float("inf")

            claims.append(judge_claim(
                "§7.6 \"PPipe attains more improvements over NP on clusters with fewer high-class GPUs\" (gain over "
                "NP at 2:14 − at 12:4, points, per seed: > 0; ∞ where NP sustains nothing)", Rule.above(0.0, "points"),
                seed_values(lambda f: gain(f, 2.0) - gain(f, 12.0), results),
                f"2:14 {gains[('ratio', 2)]:.1f} % vs 12:4 {gains[('ratio', 12)]:.1f} %"))
        return Section(self.title, figures, headlines, claims)


EXPERIMENT = register(Fig13())
