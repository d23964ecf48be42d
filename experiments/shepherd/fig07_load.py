"""Shepherd Fig. 7: goodput and utilization vs offered load, MAF-stable and MAF-bursty.

Shepherd (Herd + Flex), Clockwork and Nexus on the 12-worker testbed (§7.1
"Performance variation with load"), loads ≈ 3k … 144k requests/s.
Paper: under high load Shepherd reaches 4.6× (5.2×) Clockwork's goodput and
7.1× (18.1×) Nexus's on MAF-stable (MAF-bursty); Nexus's utilization stays
under 89 % (55 %); Clockwork saturates beyond ≈ 6k requests/s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.confidence import fmt_interval, mean_ci
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.shepherd import common as c

LOADS_FULL = (3_000, 6_000, 12_000, 24_000, 48_000, 96_000, 144_000)
LOADS_QUICK = (3_000, 12_000, 48_000, 144_000)
PAPER = {  # (vs Clockwork, vs Nexus, Nexus utilization ceiling)
    "stable": (4.6, 7.1, 0.89),
    "bursty": (5.2, 18.1, 0.55),
}


def top_over_peak(one_seed: pl.DataFrame, system: str, top: float) -> float:
    """One seed's goodput of ``system`` at load ``top`` over its highest goodput over the loads."""
    rows = c.where(one_seed, system=system)
    peak = float(rows["goodput_rps"].max())
    return float(c.where(rows, load=top)["goodput_rps"][0]) / peak if peak else float("nan")


def margin(one_seed: pl.DataFrame, value: str, load: float, a: str, *others: str) -> float:
    """One seed's ``value`` of system ``a`` at ``load`` less the largest of the ``others``' there."""
    at = c.where(one_seed, load=load)
    return float(c.where(at, system=a)[value][0]) - max(float(c.where(at, system=o)[value][0]) for o in others)


class Fig7(Experiment):
    name = "shepherd-fig7"
    paper = "shepherd"
    title = "Shepherd Fig. 7: goodput and utilization vs load (12 workers)"

    def cells(self, scale):
        loads = LOADS_QUICK if scale.quick else LOADS_FULL
        return [c.load_cell(w, load, s, seed, scale.quick)
                for w in ("stable", "bursty") for load in loads for s in c.SYSTEMS
                for seed in range(scale.seeds)]

    def run_cell(self, p):
        return c.run_load_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    (pl.col("goodput_rps") / 1000).alias("goodput (k req/s)"),
                                    (pl.col("load") / 1000).alias("offered load (k req/s)"))
        fig, axes = plotting.figure(ncols=2, nrows=2)
        order = [c.LABELS[s] for s in c.SYSTEMS]
        for row, w in enumerate(("stable", "bursty")):
            part = data.filter(pl.col("workload") == w)
            plotting.lines(axes[row][0], part, "offered load (k req/s)", "goodput (k req/s)", "System", order)
            plotting.lines(axes[row][1], part, "offered load (k req/s)", "utilization", "System", order)
            axes[row][0].set_title(f"MAF-{w}: goodput")
            axes[row][1].set_title(f"MAF-{w}: utilization")
        plotting.synthetic_caption(fig, c.is_synthetic(results), results)
        figures = save_figure(fig, figures_dir, "shepherd-fig7")
        return Section(self.title, figures, *self._numbers(results))

    def _numbers(self, results: pl.DataFrame):
        headlines, claims = [], []
        top = results["load"].max()
        for w, (vs_cw, vs_nx, nexus_util) in PAPER.items():
            r_cw = c.seed_ratios(results, "shepherd", "clockwork", "goodput_rps", workload=w, load=top)
            r_nx = c.seed_ratios(results, "shepherd", "nexus", "goodput_rps", workload=w, load=top)
            headlines += [Headline.of_seeds(f"MAF-{w} @ {top/1000:g}k: Shepherd / Clockwork goodput", vs_cw, r_cw, "×"),
                          Headline.of_seeds(f"MAF-{w} @ {top/1000:g}k: Shepherd / Nexus goodput", vs_nx, r_nx, "×")]
            ci = mean_ci(results.filter(pl.col("workload") == w), ["system", "load"], "goodput_rps")
            # intervals over seeds only: utilization per (system, load), then the load of interest
            util = mean_ci(results.filter(pl.col("workload") == w), ["system", "load"], "utilization")
            nx_util = c.lookup(util, system="nexus", load=top)
            sh_util = c.lookup(util, system="shepherd", load=top)
            nx_rows = util.filter(pl.col("system") == "nexus").sort("mean", descending=True).row(0, named=True)
            headlines.append(Headline(f"MAF-{w}: Nexus utilization (highest over loads, at {nx_rows['load']/1000:g}k; "
                                      "paper: under)", nexus_util, nx_rows["mean"], nx_rows["half_width"]))
            part = results.filter(pl.col("workload") == w)
            nx_max = seed_values(lambda f: float(c.where(f, system="nexus")["utilization"].max()), part)
            claims.append(judge_claim(
                f"MAF-{w}: §7.1 \"Nexus's utilization remains under 89% for the MAF-stable workload and 55% for the "
                f"MAF-bursty workload — even under high load\" (its highest utilization over the loads, per seed: "
                f"< {nexus_util:.2f})", Rule.below(nexus_util), nx_max,
                f"highest mean {nx_rows['mean']:.3f} at {nx_rows['load']/1000:g}k"
                + ("" if max(nx_max) < nexus_util else
                   " — utilization is what the plan leaves: its packing (Σ ℓ(b)/duty ≈ 0.99 here: one "
                   "function on a slow model carries most of the real sample, so most GPUs are "
                   "dedicated) × the admitted traffic's mean / its provisioned SLO-long peak; the "
                   "--quick run (20 s) is all in the first epoch, provisioned from its own peaks "
                   "(first-epoch rule), so the previous-window mismatch that adds idle time never occurs")))
            nx_curve = ci.filter(pl.col("system") == "nexus")
            nx_top = c.lookup(ci, system="nexus", load=top)["mean"]
            claims.append(judge_claim(
                f"MAF-{w}: §7.1 \"For Nexus, we find that the goodput largely remains the same as we increase the "
                f"load\" (ours: its goodput at {top/1000:g}k over its peak over the loads, per seed; read as within "
                "20 % of the peak)", Rule.at_least(0.8), seed_values(lambda f: top_over_peak(f, "nexus", top), part),
                f"mean peak {nx_curve['mean'].max():.0f} → {nx_top:.0f} req/s"))
            sh, cw, nx = (c.lookup(ci, system=s, load=top) for s in ("shepherd", "clockwork", "nexus"))
            claims.append(judge_claim(
                f"MAF-{w}: Fig. 7 \"Under high load, SHEPHERD achieves 4.6 (5.2)× and 7.1 (18.1)× higher goodput "
                f"than Clockwork and Nexus\" — higher than both at {top/1000:g}k req/s (Shepherd − the better of "
                "the two, req/s, per seed: > 0)", Rule.above(0.0, "req/s"),
                seed_values(lambda f: margin(f, "goodput_rps", top, "shepherd", "clockwork", "nexus"), part),
                f"{sh['mean']:.0f} vs {cw['mean']:.0f} vs {nx['mean']:.0f} req/s"))
            claims.append(judge_claim(
                f"MAF-{w}: Fig. 7 \"SHEPHERD and Clockwork achieve high system utilization while Nexus's "
                f"utilization remains under 89% (55%)\" — Nexus's below Shepherd's at {top/1000:g}k (Shepherd − "
                "Nexus utilization, per seed: > 0)", Rule.above(0.0),
                seed_values(lambda f: margin(f, "utilization", top, "shepherd", "nexus"), part),
                f"{nx_util['mean']:.2f} vs {sh_util['mean']:.2f}"))
            cw_curve = ci.filter(pl.col("system") == "clockwork").sort("load")
            sh_curve = ci.filter(pl.col("system") == "shepherd").sort("load")
            cw_peak, sh_peak = cw_curve["mean"].max(), sh_curve["mean"].max()
            claims.append(judge_claim(
                f"MAF-{w}: §7.1 \"while Clockwork's goodput starts to saturate beyond a load of 6k "
                f"requests/second, SHEPHERD's goodput keeps increasing\" (ours, per seed, at {top/1000:g}k: the "
                "smaller of Clockwork's goodput / its peak − 0.7 and Shepherd's / its peak − 0.95: ≥ 0, i.e. "
                "Clockwork stays ≥ 70 % of its peak and Shepherd ≥ 95 % of its own)", Rule.at_least(0.0),
                seed_values(lambda f: min(top_over_peak(f, "clockwork", top) - 0.7,
                                          top_over_peak(f, "shepherd", top) - 0.95), part),
                f"Clockwork peak {cw_peak:.0f} → {cw['mean']:.0f}; Shepherd peak {sh_peak:.0f} → {sh['mean']:.0f}"))
            claims.append(judge_claim(
                f"MAF-{w}: Fig. 7 \"SHEPHERD achieves 4.6 (5.2)× and 7.1 (18.1)× higher goodput than Clockwork "
                f"and Nexus\", read with the paper's ordering Shepherd ≥ Clockwork ≥ Nexus at {top/1000:g}k "
                "(the smaller of Shepherd − Clockwork and Clockwork − Nexus, req/s, per seed: ≥ 0)",
                Rule.at_least(0.0, unit="req/s"),
                seed_values(lambda f: min(margin(f, "goodput_rps", top, "shepherd", "clockwork"),
                                          margin(f, "goodput_rps", top, "clockwork", "nexus")), part),
                f"{sh['mean']:.0f} / {cw['mean']:.0f} / {nx['mean']:.0f} req/s"))
            low = results["load"].min()
            sh_low = c.lookup(util, system="shepherd", load=low)
            if w == "stable":  # §7.1 says it of MAF-stable only ("For the MAF-stable workload, with a low …")
                claims.append(judge_claim(
                    f"MAF-{w}: §7.1 \"both SHEPHERD and Clockwork achieve high system utilization (over 95%)\" at "
                    f"a low load (Shepherd at {low/1000:g}k, per seed: > 0.95)", Rule.above(0.95),
                    seed_values(lambda f: float(c.where(f, system="shepherd", load=low)["utilization"][0]), part),
                    fmt_interval(sh_low["mean"], sh_low["half_width"], "utilization", 3)))
        return headlines, claims


EXPERIMENT = register(Fig7())
