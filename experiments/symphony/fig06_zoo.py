"""Symphony Fig. 6: goodput on the mixed model zoo — all / gt2 / lt2 — on 1080Ti and A100 (§5.1).

The zoo is Table 5 (1080Ti) or Table 6 (A100), each model at its own SLO,
evenly popular Poisson requests. *all*: every model; *gt2*: β/α > 2 (strong
batching); *lt2*: β/α < 2. 64 GPUs; Symphony, Clockwork, Nexus with one
frontend and with eight (``frontends=8``). Goodput: p99 ≤ SLO (§2.1).
Quick: 24 GPUs, 1 s — the fewest on which Nexus can place a session for
every model of either zoo at any rate (20 for Table 6's 37 models: tight-SLO
sessions cannot share a GPU's duty cycle); on 16, Nexus' plan never fit and
its p99 goodput was ≈ 0 whatever the frontends.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

TABLES = {"1080Ti": "symphony-1080ti", "A100": "symphony-a100"}
SETS = ("all", "gt2", "lt2")
SYSTEMS = ("symphony", "clockwork", "nexus", "nexus-8fe")
#: §5.1's ratios of Symphony's goodput over the baselines': "all models … 2x to 2.4x", "strong batch effects
#: … 3.5x for 1080Ti and 5.7x for A100", lt2 "23% and 10% higher" — (low, high) of the stated range
PAPER_RATIO = {("1080Ti", "all"): (2.0, 2.4), ("A100", "all"): (2.0, 2.4), ("1080Ti", "gt2"): (3.5, 3.5),
               ("A100", "gt2"): (5.7, 5.7), ("1080Ti", "lt2"): (1.23, 1.23), ("A100", "lt2"): (1.10, 1.10)}
PAPER_TEXT = {"all": "2x to 2.4x the goodput of the baseline systems", "gt2": "{x}x the goodput of the baseline "
              "systems", "lt2": "goodput is {p}% higher"}
#: why our ratios are smaller (issue 31 item 3), one line for every ratio row
WHY_SMALLER = (
    "Why some of our ratios are smaller than §5.1's (issue 31). Scale matters most: at full scale (64 GPUs, 4-s "
    "traces, 3 seeds; 2026-11-29, docs/SYMPHONY.md) the strong-batching sets reach the paper's ratios (gt2: 3.36× "
    "on 1080Ti, paper 3.5×; 5.80× on A100, paper 5.7×) and A100 lt2 matches (1.10×, paper 10 %), while the quick "
    "run (24 GPUs, 1 s) gives 1.68× / 1.11× for gt2; what stays below is *all* (1.78× and 1.61×, paper 2–2.4×) "
    "and 1080Ti lt2 (1.08×, paper 23 %). The best baseline is our Clockwork in every cell; our Nexus is far below "
    "it (Symphony 1.35–6.5× Nexus with one frontend, up to 13× with eight), so the remaining shortfall is our Clockwork coming closer to Symphony than the "
    "paper's did. (1) The paper's baselines are the real systems on its testbed with emulated GPUs (§5); ours are "
    "simulated policies without their systems' costs — §5.4 measures Clockwork's locks on critical paths capping "
    "its throughput (Fig. 11 right), which a simulated Clockwork does not have (a reading, not measured here: "
    "the *all* sets hold the weak-batching models, where Symphony's batching gains least). "
    "(2) Our Clockwork already runs as §5 describes (arbitrary batch sizes, no input transfer) with the release's "
    "10 ms schedule-ahead and 5 ms SLO buffer; nothing there is ours to fix. (3) Nexus provisioned from the "
    "previous epoch (the real Nexus) instead of each epoch's own load only lowered Nexus further. (4) The authors' "
    "run scripts and their Clockwork fork are not in the stored snapshot of abcdabcd987/nexuslb (src/, the Python "
    "client, the profiler), so how they configured the baselines could not be read. Their dispatcher charges each "
    "Symphony request 1 ms control + 2 ms data + 1.5 ms response latency and a 2 ms backend allowance "
    "(RankmtConfig, ModelThread), which we do not model (d_ctrl_us = d_data_us = 0); that lowers the paper's "
    "Symphony, so it does not explain the gap.")


def model_set(table: str, which: str) -> pl.DataFrame:
    zoo = c.zoo(table).with_columns((pl.col("beta_ms") / pl.col("alpha_ms")).alias("ba"))
    if which == "gt2":
        return zoo.filter(pl.col("ba") > 2)
    if which == "lt2":
        return zoo.filter(pl.col("ba") < 2)
    return zoo


def goodput_of(frame: pl.DataFrame, system: str) -> float:
    """``system``'s goodput in a one-seed, one-zoo slice (0 where it has no row)."""
    return float(frame.filter(pl.col("system") == system)["goodput_rps"].sum())


def seed_ratios(results: pl.DataFrame, hardware: str, subset: str) -> list[float]:
    """Symphony's goodput over the best baseline's, one ratio per seed (the seeds in order; ∞ where every
    baseline's goodput is 0: the judge calls such a row inconclusive, it is not dropped)."""
    part = results.filter((pl.col("hardware") == hardware) & (pl.col("set") == subset))
    out = []
    for seed in sorted(part["seed"].unique().to_list()):
        v = {row["system"]: row["goodput_rps"] for row in part.filter(pl.col("seed") == seed).iter_rows(named=True)}
        base = max(v.get(k, 0.0) for k in SYSTEMS[1:])
        if "symphony" in v:
            out.append(v["symphony"] / base if base > 0 else float("inf"))
    return out


def paper_rule(hardware: str, subset: str):
    """§5.1's statement as the judge's rule: a single ratio on its effect, a stated range on its ends' effects."""
    from shepherd.experiments.judge import Rule

    lo, hi = PAPER_RATIO[(hardware, subset)]
    return Rule.effect(lo) if lo == hi else Rule.span(lo, hi)


class Fig6(Experiment):
    name = "symphony-fig6"
    paper = "symphony"
    title = "Symphony Fig. 6: goodput on the mixed model zoo (all / gt2 / lt2)"

    def cells(self, scale):
        gpus, dur = (24, 1.0) if scale.quick else (64, 4.0)
        return [self.cell(hardware=h, set=s, system=sy, gpus=gpus, duration_s=dur, seed=seed)
                for h, s, sy in product(TABLES, SETS, SYSTEMS) for seed in range(scale.seeds)]

    def run_cell(self, p):
        zoo = model_set(TABLES[p["hardware"]], p["set"])
        names, slos = zoo["model"].to_list(), zoo["slo_ms"].to_list()
        prof = c.linear_profiles(list(zip(names, zoo["alpha_ms"].to_list(), zoo["beta_ms"].to_list())),
                                 hardware=p["hardware"])
        wl = c.workload(names, slos, duration_s=p["duration_s"])
        per_gpu = sum(ba.throughput_rps(ba.Linear(a, b), max(1, ba.uncoordinated_batch(ba.Linear(a, b), s)), 1)
                      for a, b, s in zip(zoo["alpha_ms"], zoo["beta_ms"], slos)) / len(names)
        g = c.goodput(p["system"], wl, prof, p["gpus"], p["seed"], start=0.5 * per_gpu * p["gpus"])
        return pl.DataFrame([{"hardware": p["hardware"], "set": p["set"], "system": p["system"],
                              "seed": p["seed"], "models": len(names), "goodput_rps": g}])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting

        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    (pl.col("goodput_rps") / 1000).alias("goodput (k r/s)"))
        fig, axes = plotting.figure(ncols=2)
        for i, h in enumerate(TABLES):
            sns.barplot(data=data.filter(pl.col("hardware") == h).to_pandas(), x="set", y="goodput (k r/s)",
                        hue="System", ax=axes[0][i], order=list(SETS), hue_order=[c.LABELS[s] for s in SYSTEMS])
            axes[0][i].set_title(h)
        figures = c.plot_save(fig, figures_dir, "symphony-fig6")
        mean = results.group_by("hardware", "set", "system").agg(pl.col("goodput_rps").mean())
        headlines, claims, losses = [], [], []
        for h, s in product(TABLES, SETS):
            part = mean.filter((pl.col("hardware") == h) & (pl.col("set") == s))
            v = {sy: float(part.filter(pl.col("system") == sy)["goodput_rps"].sum()) for sy in SYSTEMS}
            base = max(v["clockwork"], v["nexus"], v["nexus-8fe"])
            seeds = seed_ratios(results, h, s)
            lo_p, hi_p = PAPER_RATIO[(h, s)]
            stated = PAPER_TEXT[s].format(x=lo_p, p=round(100 * (lo_p - 1)))
            headlines.append(Headline.of_seeds(
                f"§5.1 {h} {s}: \"{stated}\" (Symphony / best baseline, per seed)", (lo_p + hi_p) / 2, seeds,
                unit="×", rule=paper_rule(h, s)))
            cell = results.filter((pl.col("hardware") == h) & (pl.col("set") == s))
            claims.append(judge_claim(
                f"§5.1 {h} {s}: \"These results indicate that Symphony produces better scheduling quality\" — the "
                "highest goodput (Symphony − the best baseline, r/s, per seed: ≥ 0)", Rule.at_least(0.0, unit="r/s"),
                seed_values(lambda f: goodput_of(f, "symphony") - max(goodput_of(f, b) for b in SYSTEMS[1:]), cell),
                ", ".join(f"{c.LABELS[k]} {x:.0f}" for k, x in v.items())
                + c.clockwork_why(v["symphony"], v["clockwork"])))
            if v["nexus"] > 0:
                losses.append(1 - v["nexus-8fe"] / v["nexus"])
        headlines.append(Headline("Nexus 8FE goodput loss vs 1FE, range (paper 11 %–45 %)", 45.0,
                                  100 * max(losses) if losses else float("nan"), unit=" % (max)"))
        lo, hi = 0.11 * 0.5, 0.45 * 1.5

        def band(f: pl.DataFrame) -> float:
            loss = [1 - goodput_of(x, "nexus-8fe") / goodput_of(x, "nexus")
                    for _, x in f.group_by("hardware", "set") if goodput_of(x, "nexus") > 0]
            return min(min(loss) - lo, hi - max(loss)) if loss else float("nan")

        band_seeds = seed_values(band, results)
        ok = all(x >= 0 for x in band_seeds)
        claims.append(judge_claim(
            "§5.1 \"Comparing Nexus1FE and Nexus8FE, we observe 11% to 45% goodput loss from distributed "
            "scheduling\" (every zoo's loss in [5.5 %, 67.5 %]: the paper's range, its low end halved and its top "
            "widened by half; per seed, the smaller of the smallest loss − 0.055 and 0.675 − the largest: ≥ 0)",
            Rule.at_least(0.0), band_seeds,
            (", ".join(f"{100 * x:.0f} %" for x in losses) or "Nexus goodput 0 everywhere")
            + ("" if ok else "; Nexus' goodput is set where its plan stops fitting (note), not by frontend bursts")))
        notes = ["Nexus is the shared Nexus policy with spare=\"spread\" (every GPU of the fixed cluster "
                 "serves). Its goodput is limited by placing a session per model: tight-SLO sessions cannot share "
                 "a GPU's duty cycle, so most GPUs hold one or two lightly used models, and the p99 goodput is "
                 "set by where the plan stops fitting, the same for 1 and 8 frontends.", WHY_SMALLER]
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig6())
