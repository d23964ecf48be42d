"""Symphony Fig. 4: goodput of the non-work-conserving policy relative to the work-conserving one (§4.3).

Homogeneous setups over Table 3's grid — model (DenseNet121, InceptionV3,
ResNet50V2, VGG16, Xception, Bert; 1080Ti profiles of Table 5), number of
models, GPUs per model, SLO, Gamma burstiness — and the mixed setup of 35
Table 5 models at their own SLOs. Each cell searches both policies' goodput
(p99 ≤ SLO, §2.1) on the same arrivals; the ratio NWC/WC is the figure.
Quick scale: a sub-grid (3 models × 1 size × 2 ratios × 2 SLOs, Poisson,
3 s) plus the mixed setup; full scale: a larger slice of Table 3 (not all
9,072 combinations), 5 s. Every trace's first second (the λ warm-up of the
text rule) is left out of the p99. NWC is run under every rule side by side
(:data:`VARIANTS`, ``core.policies.symphony_rules``): §4.3's text rule (β·λ or
sched_at, the ``symphony`` default), frontrun (Appendix C as printed, the
authors' code default), the authors' target-batch and beta-lambda rules, and
— a labelled deviation — §4.3's rule where a GPU ranks every candidate by
sched_at, schedulable or not (``rank="all"``, ``symphony-ra``). Each goodput
search re-checks two loads below the goodput and a 12-load grid from ¼ to 2× it,
and reports cells where pass/fail is not monotone over every load evaluated.
Full scale, 3 seeds (2026-11-29, 2,166 cells, ≈ 45 min with ``-j 2``; docs/SYMPHONY.md): NWC ≥ 0.95 × WC in
76 ± 1 % of the cells under §4.3's rule, 54 % frontrun, 55 % target-batch, 76 % beta-lambda-authors, 92 %
with ``rank="all"``, 90 % with Clipper pruning; the per-seed shares spread by ≤ 3 points. NWC ≥ 1.5 × WC in
5 %; the mixed setup 0.74–1.00×.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments import confidence
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

MODELS_FULL = ("DenseNet121", "InceptionV3", "ResNet50V2", "VGG16", "Xception", "BERT")
MODELS_QUICK = ("DenseNet121", "ResNet50V2", "BERT")
MIXED = "mixed-35"
#: the NWC rules side by side (issue 31): (result column stem, system of ``common.SYSTEMS``, label)
VARIANTS = (("nwc", "symphony", "§4.3 text rule (β·λ or sched_at; our default)"),
            ("sa", "symphony-sa", "frontrun (Appendix C as printed; the authors' code default)"),
            ("tb", "symphony-tb", "target-batch (the authors' kTargetBatchSize)"),
            ("bla", "symphony-bla", "beta-lambda-authors (the authors' kBetaLambda, side branches)"),
            ("ra", "symphony-ra", "§4.3 text rule, rank=all (a deviation)"),
            ("cp", "symphony-cp", "§4.3 text rule, Clipper pruning (§4.3's wording; the default window "
                                  "prune is a deviation)"))
#: the first second of every trace is the text rule's λ warm-up (λ = count / time since the first arrival,
#: 1-s window); its requests are served but left out of the p99 (issue 31). The authors' bucket meter (5 s)
#: averages the buckets since time 0, so past 1 s (≥ 20 buckets) its partial current bucket biases λ ≤ 2.5 %
WARMUP_S = 1.0
#: every goodput search also evaluates this many loads evenly spaced from ¼ to 2× its goodput, and pass/fail is
#: checked for monotonicity over all the loads it evaluated (issue 41)
SCAN = 12


#: why NWC (§4.3 rule) loses in some cells — measured on the DenseNet121 cell (8 models, 8 GPUs, 30 ms)
WHY_NWC_LOSES = (
    "Where NWC (§4.3 rule) loses: a candidate below β·λ requests waits for sched_at, which leaves only "
    "ℓ(b+1) − ℓ(b) = α of slack, while other models' candidates of ≥ β·λ requests (2 at these rates) take the "
    "idle GPUs at once; at ≥ 85 % utilization no GPU frees within α and the head is dropped (DenseNet121, "
    "8 GPUs, 30 ms, 4 s at 1200 r/s: 32 heads dropped, each already infeasible when a GPU freed; WC and the "
    "sched_at rule drop none). In that cell not the λ estimator (rate window 250 ms / 1 s / 4 s: the same 0.71) "
    "nor the timers (no cancelled timer fired); ranking as Appendix C's "
    "exec_at does (β·λ candidates by their last update) is worse still (0.39). It is the paper's rule: a GPU "
    "takes only schedulable candidates (§4.3, Appendix C's mc), and no reading we found lets it take an urgent "
    "one below β·λ; letting it (rank=all, a deviation: once one candidate is schedulable, the earliest sched_at "
    "of all goes) is the separate row above.")


def pruning_note(default: float, clipper: float, by_seed: dict[str, list[float]]) -> str:
    """The pruning's share of the loss, read off this grid (issue 41: not from one cell)."""
    def pm(stem: str) -> str:
        seeds = by_seed.get(stem, [])
        return (f" ± {100 * confidence.half_width(seeds):.1f}" if len(seeds) > 1 else "") + " %"

    gap = 100 * (clipper - default)
    return (f"The pruning, over this grid: §4.3's rule with Clipper pruning (§4.3's wording) has NWC ≥ 0.95 × WC in "
            f"{100 * clipper:.1f}{pm('cp')} of the cells, with the default window prune (a ¾ heuristic, a labelled "
            f"deviation) {100 * default:.1f}{pm('nwc')} — "
            + (f"{gap:.1f} points more with Clipper pruning: the default pruning heuristic is a second cause of the "
               "loss, beside the rule (in the DenseNet121 8 × 8, 30 ms cell alone Clipper pruning was lower, 0.55)."
               if gap > 0 else f"{-gap:.1f} points fewer with Clipper pruning: over this grid the pruning is not a "
               "cause of the loss."))


def grid(quick: bool) -> list[dict]:
    if quick:
        dims = (MODELS_QUICK, (8,), (1.0, 2.0), (30.0, 50.0), (1.0,))
    else:
        dims = (MODELS_FULL, (8, 16), (1.0, 2.0, 3.0), (20.0, 25.0, 30.0, 40.0, 50.0), (0.1, 0.3, 0.5, 1.0))
    cells = [{"model": m, "n_models": n, "ratio": r, "slo_ms": s, "shape": k} for m, n, r, s, k in product(*dims)]
    cells += [{"model": MIXED, "n_models": 35, "ratio": r, "slo_ms": 0.0, "shape": 1.0}
              for r in ((1.0,) if quick else (1.0, 2.0))]
    return cells


def setup(p) -> tuple[c.Workload, pl.DataFrame, int, float]:
    """Workload, profiles, GPUs and a start rate for one cell."""
    zoo = c.zoo()
    if p["model"] == MIXED:
        rows = zoo.head(p["n_models"])
        names, slos = rows["model"].to_list(), rows["slo_ms"].to_list()
        ab = list(zip(rows["alpha_ms"].to_list(), rows["beta_ms"].to_list()))
    else:
        row = zoo.filter(pl.col("model") == p["model"]).row(0, named=True)
        names = [f"{p['model']}-{i}" for i in range(p["n_models"])]
        slos = [p["slo_ms"]] * len(names)
        ab = [(row["alpha_ms"], row["beta_ms"])] * len(names)
    gpus = max(1, int(round(p["ratio"] * len(names))))
    prof = c.linear_profiles([(n, a, b) for n, (a, b) in zip(names, ab)])
    wl = c.workload(names, slos, shape=p["shape"], duration_s=p["duration_s"])
    per = gpus / len(names)
    est = sum(ba.throughput_rps(ba.Linear(a, b), max(1, ba.staggered_batch(ba.Linear(a, b), s, max(1, int(per)))),
                                1) * per for (a, b), s in zip(ab, slos))
    return wl, prof, gpus, max(10.0, 0.6 * est)


def seed_shares(results: pl.DataFrame) -> dict[str, list[float]]:
    """Per rule variant, the share of cells with NWC ≥ 0.95 × WC on each seed (the seeds in order)."""
    out: dict[str, list[float]] = {}
    seeds = sorted(results["seed"].unique().to_list()) if "seed" in results.columns else []
    for stem, _, _ in VARIANTS:
        col = "ratio_nwc_wc" if stem == "nwc" else f"ratio_{stem}_wc"
        out[stem] = []
        for seed in seeds:
            vals = results.filter(pl.col("seed") == seed)[col].to_numpy() if col in results.columns else []
            vals = np.asarray(vals, float)
            vals = vals[np.isfinite(vals)]
            if len(vals):
                out[stem].append(float((vals >= 0.95).mean()))
    return out


class Fig4(Experiment):
    name = "symphony-fig4"
    paper = "symphony"
    title = "Symphony Fig. 4: non-work-conserving / work-conserving goodput"

    def cells(self, scale):
        dur = WARMUP_S + (2.0 if scale.quick else 4.0)
        return [self.cell(**g, duration_s=dur, warmup_s=WARMUP_S, scan=SCAN, seed=seed) for g in grid(scale.quick)
                for seed in range(scale.seeds)]

    def run_cell(self, p):
        wl, prof, gpus, start = setup(p)
        row = {**{k: p[k] for k in ("model", "n_models", "ratio", "slo_ms", "shape", "seed")}, "gpus": gpus}
        flips = []
        for stem, system, _ in (("wc", "symphony-wc", ""), *VARIANTS):
            g, bad = c.goodput_checked(system, wl, prof, gpus, p["seed"], start, rel_tol=0.02, probes=2,
                                       warmup_s=p["warmup_s"], scan=p.get("scan", 0))
            row[f"{stem}_rps" if stem in ("wc", "nwc") else f"nwc_{stem}_rps"] = g
            if bad:
                flips.append(f"{system} fails at {bad[0]:.0f} r/s, holds at {bad[1]:.0f}")
        wc = row["wc_rps"]
        for stem, _, _ in VARIANTS:
            g = row["nwc_rps" if stem == "nwc" else f"nwc_{stem}_rps"]
            row["ratio_nwc_wc" if stem == "nwc" else f"ratio_{stem}_wc"] = g / wc if wc > 0 else float("inf")
        row["non_monotone"] = "; ".join(flips)
        row["scan"] = p.get("scan", 0)
        return pl.DataFrame([row])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        ratios = {}  # stem → finite NWC/WC ratios of that rule
        for stem, _, _ in VARIANTS:
            col = "ratio_nwc_wc" if stem == "nwc" else f"ratio_{stem}_wc"
            vals = results[col].to_numpy() if col in results.columns else np.array([])
            ratios[stem] = vals[np.isfinite(vals)]
        share = {k: float((v >= 0.95).mean()) if len(v) else float("nan") for k, v in ratios.items()}
        by_seed = seed_shares(results)
        r = ratios["nwc"]
        frac95 = share["nwc"]
        frac150 = float((r >= 1.5).mean()) if len(r) else float("nan")
        mixed = results.filter(pl.col("model") == MIXED)["ratio_nwc_wc"]
        fig, axes = plotting.figure(ncols=2)
        ax = axes[0][0]
        for stem, _, label in VARIANTS:
            xs = np.sort(ratios[stem])
            if len(xs):
                ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), drawstyle="steps-post", label=label.split(" (")[0],
                        ls="--" if stem == "ra" else "-")
        ax.legend(fontsize=6)
        ax.axvline(0.95, ls=":", c="grey")
        ax.set(xlabel="goodput NWC / WC", ylabel="CDF of cells", title="(d) all cells")
        homo = results.filter(pl.col("model") != MIXED).with_columns(
            pl.format("SLO {} ms, Γ({})", pl.col("slo_ms"), pl.col("shape")).alias("setup"))
        plotting.lines(axes[0][1], homo, "ratio", "ratio_nwc_wc", "model")
        axes[0][1].set(xlabel="#GPUs : #models", ylabel="goodput NWC / WC", title="per model")
        figures = c.plot_save(fig, figures_dir, "symphony-fig4")
        notes = []
        for stem, _, label in VARIANTS:
            vals = ratios[stem]
            if len(vals):
                qs = np.quantile(vals, [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1])
                notes.append(f"NWC/WC distribution, {label} (min, p10, p25, median, p75, p90, max): "
                             + ", ".join(f"{q:.2f}" for q in qs) + f" — {len(vals)} cells.")
        flips = [x for x in results["non_monotone"].to_list() if x] if "non_monotone" in results.columns else []
        scanned = ("scan" in results.columns and results["scan"].null_count() == 0
                   and bool((results["scan"] > 0).all()))
        notes.append(f"Goodput search: pass/fail not monotone in load in {len(flips)} of {results.height} cells "
                     + (f"(every load each search evaluated: its bisection, 2 probes below the goodput and a "
                        f"{int(results['scan'].max())}-load grid from ¼ to 2× the goodput)" if scanned else
                        "(only the bisection's loads and 2 probes below each goodput were checked: these cells "
                        "predate the grid check, so this count is a lower bound; re-run for the grid)")
                     + (": " + " | ".join(flips[:6]) if flips else "")
                     + ". Traces start with a 1-s λ warm-up left out of the p99.")
        notes.append(WHY_NWC_LOSES)
        if np.isfinite(share["cp"]) and np.isfinite(share["nwc"]):
            notes.append(pruning_note(share["nwc"], share["cp"], by_seed))
        headlines = [Headline(f"cells with NWC ≥ 0.95 × WC, {label} (mean over seeds)", None,
                              100 * float(np.mean(by_seed[stem])) if by_seed[stem] else 100 * share[stem],
                              half_width=100 * confidence.half_width(by_seed[stem]), unit=" %")
                     for stem, _, label in VARIANTS]
        if len(by_seed["nwc"]) > 1:
            notes.append("Share of cells with NWC ≥ 0.95 × WC per seed (seeds "
                         + ", ".join(str(x) for x in sorted(results["seed"].unique().to_list())) + "): "
                         + "; ".join(f"{label.split(' (')[0]} " + " / ".join(f"{100 * x:.1f} %" for x in by_seed[k])
                                     + f" (spread {100 * (max(by_seed[k]) - min(by_seed[k])):.1f} points)"
                                     for k, _, label in VARIANTS if by_seed[k]) + ".")
        headlines += [Headline("cells with NWC ≥ 1.5 × WC (paper: > 10 %)", 10.0, 100 * frac150, unit=" %"),
                      Headline("mixed 35-model setup: NWC / WC (paper: 1.34–1.89)", 1.6,
                               float(mixed.mean()) if mixed.len() else float("nan"), unit="×"),
                      Headline("largest NWC / WC (paper: more than double in extreme cases)", 2.0,
                               float(r.max()) if len(r) else float("nan"), unit="×")]
        best = max(share, key=lambda k: share[k] if np.isfinite(share[k]) else -1)
        claims = [judge_claim(f"\"For nearly all cases, the non-work-conserving policy is no worse than (>0.95) "
                              f"the work-conserving policy\" (ours: ≥ 90 % of cells, one-sided, per seed), {label}",
                              Rule.at_least(90.0, unit="%"), [100 * x for x in by_seed[stem]] or [100 * share[stem]],
                              f"{100 * share[stem]:.0f} % of all cells") for stem, _, label in VARIANTS]
        col = "ratio_nwc_wc"

        def finite(f: pl.DataFrame) -> np.ndarray:
            v = f[col].to_numpy().astype(float)
            return v[np.isfinite(v)]

        claims += [judge_claim("§4.3 \"The non-work-conserving policy achieves 50% higher goodput for more than 10% "
                               "cases\" (the share of cells with NWC ≥ 1.5 × WC, per seed: > 10 %)",
                               Rule.above(10.0, "%"),
                               seed_values(lambda f: 100 * float((finite(f) >= 1.5).mean()) if len(finite(f))
                                           else float("nan"), results), f"{100 * frac150:.0f} % of all cells"),
                   judge_claim("§4.3 \"Figure 4(a) shows that the non-work-conserving policy works very well when "
                               "serving a mixture of models, gaining 34% to 89% higher goodput\" (ours: the smallest "
                               "NWC / WC of the mixed cells, per seed, at least the range's low end 1.34×)",
                               Rule.at_least(1.34, unit="×"),
                               seed_values(lambda f: float(f.filter(pl.col("model") == MIXED)[col].min()),
                                           results.filter(pl.col("model") == MIXED)) if mixed.len() else [],
                               ", ".join(f"{x:.2f}×" for x in mixed.to_list()))]
        dn = results.filter((pl.col("model") == "DenseNet121") & (pl.col("slo_ms") == 30.0))
        bert = results.filter(pl.col("model") == "BERT")
        if dn.height:
            claims.append(judge_claim(
                "§4.3 \"Our non-work-conserving policy shows 14% to 152% goodput increase under tighter latency SLO "
                "constraint (30ms)\" — DenseNet121 at 30 ms: NWC gains in every cell (the smallest NWC / WC, per "
                "seed: > 1)", Rule.above(1.0, "×"), seed_values(lambda f: float(f[col].min()), dn),
                f"{float(dn[col].min()):.2f}–{float(dn[col].max()):.2f}×"))
        if bert.height:
            claims.append(judge_claim(
                "§4.3 Bert: \"Our non-work-conserving policy achieves similar goodput to the work-conserving policy in "
                "these extreme cases\" (the largest |NWC / WC − 1| over the Bert cells, per seed: ≤ 0.05)",
                Rule.at_most(0.05), seed_values(lambda f: float((f[col] - 1).abs().max()), bert),
                f"{float(bert[col].min()):.2f}–{float(bert[col].max()):.2f}×"))
        tops = [lab for k, _, lab in VARIANTS if share[k] == share[best]]
        notes.append(f"Closest to Fig. 4(d) here: {' and '.join(tops)} ({100 * share[best]:.0f} % of cells ≥ "
                     "0.95 × WC; the paper: \"nearly all\"); the authors' code default is frontrun.")
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig4())
