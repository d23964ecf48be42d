"""Symphony Fig. 4: goodput of the non-work-conserving policy relative to the work-conserving one (§4.3).

Homogeneous setups over Table 3's grid — model (DenseNet121, InceptionV3,
ResNet50V2, VGG16, Xception, Bert; 1080Ti profiles of Table 5), number of
models, GPUs per model, SLO, Gamma burstiness — and the mixed setup of 35
Table 5 models at their own SLOs. Each cell searches both policies' goodput
(p99 ≤ SLO, §2.1) on the same arrivals; the ratio NWC/WC is the figure.
Quick scale: a sub-grid (3 models × 1 size × 2 ratios × 2 SLOs, Poisson,
1 s) plus the mixed setup; full scale: a larger slice of Table 3 (not all
9,072 combinations). NWC is run with §4.3's rule (β·λ or sched_at, the
``symphony`` default), with Appendix C's rule as printed (sched_at only), and
— a labelled deviation, its own row — with §4.3's rule where a GPU ranks every
candidate by sched_at, schedulable or not (``rank="all"``, ``symphony-ra``).

Full scale, measured once (c3f117d, 2026-11-26, one seed, 722 cells, 13 min
on one core): NWC ≥ 0.95 × WC in 76 % of the cells under §4.3's rule (81
cells lie in 0.90–0.95, within about two steps of the goodput search), 54 %
under Appendix C's rule as printed, 87 % with ``rank="all"``; NWC ≥ 1.5 × WC
in 6 %; the mixed setup 0.69× / 0.97× (1 : 1 and 2 : 1 GPUs per model).
Losses concentrate at one GPU per model (67 % of those cells hold) and at
40–50 ms SLOs for ResNet50V2 and VGG16; at 2–3 GPUs per model DenseNet121 at
30 ms gains 1.02–1.58×, as the paper's 14 %–152 %. This slice takes ratios
1, 2, 3 of Table 3's 1.0–4.0 and shapes 0.1, 0.3, 0.5, 1.0; per-ratio shares
(67 / 78 / 83 %) say that weighting the ratios as Table 3 does would not
reach 90 % either.
"""

from __future__ import annotations

from itertools import product
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

MODELS_FULL = ("DenseNet121", "InceptionV3", "ResNet50V2", "VGG16", "Xception", "BERT")
MODELS_QUICK = ("DenseNet121", "ResNet50V2", "BERT")
MIXED = "mixed-35"


#: why NWC (§4.3 rule) loses in some cells — measured on the DenseNet121 cell (8 models, 8 GPUs, 30 ms)
WHY_NWC_LOSES = (
    "Where NWC (§4.3 rule) loses: a candidate below β·λ requests waits for sched_at, which leaves only "
    "ℓ(b+1) − ℓ(b) = α of slack, while other models' candidates of ≥ β·λ requests (2 at these rates) take the "
    "idle GPUs at once; at ≥ 85 % utilization no GPU frees within α and the head is dropped (DenseNet121, "
    "8 GPUs, 30 ms, 4 s at 1200 r/s: 32 heads dropped, each already infeasible when a GPU freed; WC and the "
    "sched_at rule drop none). Not the λ estimator (rate window 250 ms / 1 s / 4 s: the same 0.71), not the "
    "pruning (Clipper pruning: 0.55), not the timers (no cancelled timer fired); ranking as Appendix C's "
    "exec_at does (β·λ candidates by their last update) is worse still (0.39). It is the paper's rule: a GPU "
    "takes only schedulable candidates (§4.3, Appendix C's mc), and no reading we found lets it take an urgent "
    "one below β·λ; letting it (rank=all, a deviation: once one candidate is schedulable, the earliest sched_at "
    "of all goes) is the separate row above.")


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


class Fig4(Experiment):
    name = "symphony-fig4"
    paper = "symphony"
    title = "Symphony Fig. 4: non-work-conserving / work-conserving goodput"

    def cells(self, scale):
        dur = 1.0 if scale.quick else 4.0
        return [self.cell(**g, duration_s=dur, seed=seed) for g in grid(scale.quick) for seed in range(scale.seeds)]

    def run_cell(self, p):
        wl, prof, gpus, start = setup(p)
        nwc = c.goodput("symphony", wl, prof, gpus, p["seed"], start, rel_tol=0.02)
        nwc_sa = c.goodput("symphony-sa", wl, prof, gpus, p["seed"], start, rel_tol=0.02)
        nwc_ra = c.goodput("symphony-ra", wl, prof, gpus, p["seed"], start, rel_tol=0.02)
        wc = c.goodput("symphony-wc", wl, prof, gpus, p["seed"], start, rel_tol=0.02)
        return pl.DataFrame([{**{k: p[k] for k in ("model", "n_models", "ratio", "slo_ms", "shape", "seed")},
                              "gpus": gpus, "nwc_rps": nwc, "nwc_sa_rps": nwc_sa, "nwc_ra_rps": nwc_ra,
                              "wc_rps": wc, "ratio_nwc_wc": nwc / wc if wc > 0 else float("inf"),
                              "ratio_sa_wc": nwc_sa / wc if wc > 0 else float("inf"),
                              "ratio_ra_wc": nwc_ra / wc if wc > 0 else float("inf")}])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        sa = results["ratio_sa_wc"].to_numpy()
        sa = sa[np.isfinite(sa)]
        frac95_sa = float((sa >= 0.95).mean()) if len(sa) else float("nan")
        ra = results["ratio_ra_wc"].to_numpy() if "ratio_ra_wc" in results.columns else np.array([])
        ra = ra[np.isfinite(ra)]
        frac95_ra = float((ra >= 0.95).mean()) if len(ra) else float("nan")
        r = results["ratio_nwc_wc"].to_numpy()
        r = r[np.isfinite(r)]
        frac95 = float((r >= 0.95).mean()) if len(r) else float("nan")
        frac150 = float((r >= 1.5).mean()) if len(r) else float("nan")
        mixed = results.filter(pl.col("model") == MIXED)["ratio_nwc_wc"]
        fig, axes = plotting.figure(ncols=2)
        ax = axes[0][0]
        xs = np.sort(r)
        ax.plot(xs, np.arange(1, len(xs) + 1) / max(1, len(xs)), drawstyle="steps-post", label="§4.3 rule")
        xa = np.sort(sa)
        ax.plot(xa, np.arange(1, len(xa) + 1) / max(1, len(xa)), drawstyle="steps-post", label="App. C rule")
        if len(ra):
            xr = np.sort(ra)
            ax.plot(xr, np.arange(1, len(xr) + 1) / max(1, len(xr)), drawstyle="steps-post", ls="--",
                    label="§4.3 rule, rank all (deviation)")
        ax.legend(fontsize=7)
        ax.axvline(0.95, ls=":", c="grey")
        ax.set(xlabel="goodput NWC / WC", ylabel="CDF of cells", title="(d) all cells")
        homo = results.filter(pl.col("model") != MIXED).with_columns(
            pl.format("SLO {} ms, Γ({})", pl.col("slo_ms"), pl.col("shape")).alias("setup"))
        plotting.lines(axes[0][1], homo, "ratio", "ratio_nwc_wc", "model")
        axes[0][1].set(xlabel="#GPUs : #models", ylabel="goodput NWC / WC", title="per model")
        figures = c.plot_save(fig, figures_dir, "symphony-fig4")
        notes = []
        for label, vals in (("§4.3 rule (β·λ or sched_at)", r), ("Appendix C rule (sched_at)", sa),
                            ("§4.3 rule, a GPU ranks every candidate by sched_at (rank=all, a deviation)", ra)):
            if not len(vals):
                continue
            qs = np.quantile(vals, [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]) if len(vals) else [float("nan")] * 7
            notes.append(f"NWC/WC distribution, {label} (min, p10, p25, median, p75, p90, max): "
                         + ", ".join(f"{q:.2f}" for q in qs) + f" — {len(vals)} cells.")
        notes.append(WHY_NWC_LOSES)
        headlines = [Headline("cells with NWC ≥ 0.95 × WC", None, 100 * frac95, unit=" %"),
                     Headline("cells with NWC ≥ 1.5 × WC (paper: > 10 %)", 10.0, 100 * frac150, unit=" %"),
                     Headline("mixed 35-model setup: NWC / WC (paper: 1.34–1.89)", 1.6,
                              float(mixed.mean()) if mixed.len() else float("nan"), unit="×"),
                     Headline("largest NWC / WC (paper: more than double in extreme cases)", 2.0,
                              float(r.max()) if len(r) else float("nan"), unit="×")]
        headlines.insert(1, Headline("cells with NWC (App. C rule) ≥ 0.95 × WC", None, 100 * frac95_sa, unit=" %"))
        headlines.insert(2, Headline("cells with NWC (§4.3 rule, rank all — a deviation) ≥ 0.95 × WC", None,
                                     100 * frac95_ra, unit=" %"))
        claims = [Claim("NWC ≥ 0.95 × WC in ≥ 90 % of the grid cells", frac95 >= 0.9, f"{100 * frac95:.0f} %"),
                  Claim("NWC (App. C rule) ≥ 0.95 × WC in ≥ 90 % of the grid cells", frac95_sa >= 0.9,
                        f"{100 * frac95_sa:.0f} %"),
                  Claim("NWC (deviation: §4.3 rule, a GPU ranks every candidate by sched_at) ≥ 0.95 × WC in ≥ 90 % "
                        "of the grid cells", frac95_ra >= 0.9,
                        f"{100 * frac95_ra:.0f} %" + (f" (min {float(ra.min()):.3f})" if len(ra) else "")),
                  Claim("NWC ≥ 1.5 × WC in more than 10 % of the cells", frac150 > 0.1, f"{100 * frac150:.0f} %"),
                  Claim("mixed model setup: NWC gains 34 %–89 % (ours ≥ 1.34×)",
                        bool(mixed.len()) and float(mixed.min()) >= 1.34,
                        ", ".join(f"{x:.2f}×" for x in mixed.to_list()))]
        dn = results.filter((pl.col("model") == "DenseNet121") & (pl.col("slo_ms") == 30.0))["ratio_nwc_wc"]
        bert = results.filter(pl.col("model") == "BERT")["ratio_nwc_wc"]
        if dn.len():
            claims.append(Claim("DenseNet121, SLO 30 ms: NWC gains (paper 14 %–152 %)", float(dn.min()) > 1.0,
                                f"{float(dn.min()):.2f}–{float(dn.max()):.2f}×"))
        if bert.len():
            claims.append(Claim("Bert (weak batching): NWC ≈ WC (within 5 %)",
                                bool(((bert - 1).abs() <= 0.05).all()),
                                f"{float(bert.min()):.2f}–{float(bert.max()):.2f}×"))
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig4())
