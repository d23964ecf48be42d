"""PPipe Fig. 6: maximum load factor at 99 % SLO attainment on HC1-L … HC4-L (100 GPUs).

Six 3-DNN groups, "Poisson" and "Bursty" workloads (see ``common``: the
bursty one is a synthetic MMPP stand-in), PPipe vs NP vs DART-r, all on
PPipe's reservation data plane (§7.1 "Baselines"). Load factor 1.0 = PPipe's
planned throughput. Paper (§7.2): PPipe's load factor is on average 48.0 %
above NP's and 32.2 % above DART-r's on Poisson (per cluster: +64.9/34.8/46.7/
45.5 % and +47.2/17.3/34.8/29.3 %), 75.1 % and 35.8 % on Bursty; average load
factors 66.8/74.9/96.5 % (NP/DART-r/PPipe) on Poisson, 61.1/69.4/90.3 % on
Bursty. ``--quick``: groups G1–G2, 5 s per load factor, step 0.1. Both rule sets.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, judge_value, seed_values
from shepherd.experiments.ppipe import common as c
from shepherd.experiments.registry import register

PAPER_VS_NP = {"poisson": (64.9, 34.8, 46.7, 45.5), "bursty": (161.6, 34.1, 50.4, 54.1)}
PAPER_VS_DART = {"poisson": (47.2, 17.3, 34.8, 29.3), "bursty": (50.4, 18.1, 40.2, 34.5)}
PAPER_AVG_IMPROVEMENT = {("poisson", "np"): 48.0, ("poisson", "dart-r"): 32.2,
                         ("bursty", "np"): 75.1, ("bursty", "dart-r"): 35.8}
PAPER_AVG_LF = {"poisson": {"np": 66.8, "dart-r": 74.9, "ppipe": 96.5},
                "bursty": {"np": 61.1, "dart-r": 69.4, "ppipe": 90.3}}


def run_group_cell(p) -> pl.DataFrame:
    """All three systems on one (cluster, group, workload, seed): max load factor, utilization, plans."""
    group = c.groups()[p["group"]]
    cluster = c.make_cluster(p["cluster"])
    rules = p.get("rules", "paper")
    plans = {s: c.plan(s, cluster, group, p["workload"], rules=rules) for s in c.SYSTEMS}
    cap = plans["ppipe"].normalized_xput
    rows = []
    for s, pl_ in plans.items():
        found, runs = c.sweep(pl_, cap, group, p["workload"], p["seconds"], p["seed"], p["step"], rules=rules)
        lf = sum(found.values()) / len(found)
        at = min(found.values())  # the factor at which every DNN of the group still meets 99 %
        util = next((r["util"] for r in runs if r["lf"] == at), {"high": 0.0, "low": 0.0})
        rows.append(dict(cluster=p["cluster"], group=p["group"] + 1, workload=p["workload"], seed=p["seed"],
                         system=s, max_lf=lf, planned_xput=pl_.normalized_xput, capacity=cap,
                         util_high=util.get("high", 0.0), util_low=util.get("low", 0.0),
                         solve_s=float(pl_.meta.get("solve_s", 0.0)), status=str(pl_.meta.get("status", "")),
                         synthetic=p["workload"] == "bursty"))
    return c.tagged(pl.DataFrame(rows), p)


def improvements(results: pl.DataFrame, workload: str, base: str) -> list[float]:
    """Per cluster: mean PPipe max load factor / mean baseline's − 1, in %."""
    out = []
    for cl in c.CLUSTERS:
        part = results.filter((pl.col("workload") == workload) & (pl.col("cluster") == cl))
        a = part.filter(pl.col("system") == "ppipe")["max_lf"].mean()
        b = part.filter(pl.col("system") == base)["max_lf"].mean()
        out.append(100.0 * (a / b - 1.0) if a is not None and b else float("nan"))
    return out


class Fig6(c.PPipeExperiment):
    name = "ppipe-fig6"
    paper = "ppipe"
    title = "PPipe Fig. 6: max load factor at 99 % attainment, HC1-L … HC4-L"

    def cells(self, scale):
        groups = range(2) if scale.quick else range(6)
        return [self.cell(cluster=cl, group=g, workload=w, seed=seed, seconds=5.0 if scale.quick else 30.0,
                          step=0.1 if scale.quick else 0.05, arrivals=c.WORKLOAD_TAG[w], rules=r)
                for r in c.RULE_SETS for cl in c.CLUSTERS for g in groups for w in ("poisson", "bursty") for seed in range(scale.seeds)]

    def run_cell(self, p):
        return run_group_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        return c.by_rules(self._report, results, figures_dir)

    def _report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    pl.col("cluster").alias("Cluster"), pl.col("max_lf").alias("max load factor"))
        fig, axes = plotting.figure(ncols=2, width=5)
        for ax, w in zip(axes[0], ("poisson", "bursty")):
            sns.barplot(data=data.filter(pl.col("workload") == w).to_pandas(), x="Cluster", y="max load factor",
                        hue="System", hue_order=[c.LABELS[s] for s in ("np", "dart-r", "ppipe")],
                        errorbar=plotting.band("max load factor"), ax=ax)
            ax.set_title("Poisson" if w == "poisson" else "Bursty (synthetic MMPP stand-in)")
            ax.set_ylim(0, 1.05)
        figures = save_figure(fig, figures_dir, "ppipe-fig6")
        headlines, claims = [], []
        for w in ("poisson", "bursty"):
            for base, paper in (("np", PAPER_VS_NP[w]), ("dart-r", PAPER_VS_DART[w])):
                ours = improvements(results, w, base)
                for cl, o, pp in zip(c.CLUSTERS, ours, paper):
                    headlines.append(Headline(f"{w}: {cl} PPipe vs {c.LABELS[base]} max load factor", pp, o, unit="%"))
                valid = [o for o in ours if o == o]
                headlines.append(Headline(f"{w}: average improvement over {c.LABELS[base]}",
                                          PAPER_AVG_IMPROVEMENT[(w, base)], sum(valid) / max(len(valid), 1), unit="%"))
            for s in ("np", "dart-r", "ppipe"):
                mean = results.filter((pl.col("workload") == w) & (pl.col("system") == s))["max_lf"].mean()
                headlines.append(Headline(f"{w}: average max load factor, {c.LABELS[s]}", PAPER_AVG_LF[w][s],
                                          100.0 * (mean or 0.0), unit="%"))
        wide = results.filter(pl.col("seed") == results["seed"].min()).pivot(
            on="system", index=["cluster", "group", "workload"], values="planned_xput")
        ok = wide.filter((pl.col("ppipe") >= pl.col("np") * 0.99) & (pl.col("ppipe") >= pl.col("dart-r") * 0.99))
        strict = wide.filter((pl.col("ppipe") >= pl.col("np")) & (pl.col("ppipe") >= pl.col("dart-r")))
        least = wide.select(pl.col("ppipe") / pl.max_horizontal("np", "dart-r")).to_series()
        claims.append(judge_value(
            "§7.2 \"a load factor of 1.0 represents the serving capacity of PPipe, which is higher than the capacity "
            "of NP or DART-r\" — PPipe's planned throughput ≥ NP's and DART-r's on every cluster and group, within "
            "the 1 % MILP gap (the smallest PPipe / better-baseline planned throughput: ≥ 0.99)", Rule.at_least(0.99),
            float(least.min()) if least.len() else float("nan"), "the MILP plans of the first seed",
            f"{ok.height}/{wide.height} within gap, {strict.height}/{wide.height} strictly"))
        for w in ("poisson", "bursty"):
            part = results.filter(pl.col("workload") == w)
            m = {s: part.filter(pl.col("system") == s)["max_lf"].mean() or 0.0 for s in c.SYSTEMS}

            def lead(f: pl.DataFrame) -> float:
                avg = {s: float(f.filter(pl.col("system") == s)["max_lf"].mean() or 0.0) for s in c.SYSTEMS}
                return avg["ppipe"] - max(avg["np"], avg["dart-r"])

            claims.append(judge_claim(
                f"{w}: §7.2 \"First, we find that PPipe consistently outperforms NP\" and \"compared to DART-r, "
                "PPipe achieves 32.2% higher load factors\" — the highest average max load factor (PPipe − the "
                "better baseline, per seed: > 0)", Rule.above(0.0), seed_values(lead, part),
                ", ".join(f"{c.LABELS[s]} {v:.2f}" for s, v in m.items())))
        notes = ["Bursty = synthetic MMPP stand-in for the MAF 2021 trace (not available here)."]
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig6())
