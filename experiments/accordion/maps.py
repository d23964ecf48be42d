"""Maps of the parameters the Accordion paper leaves open, instead of guesses (Accordion §2.1, §3.2, §4.4.5).

Each map sweeps one unstated parameter around our documented default and
says where the paper's number falls; the defaults of the headline
experiments do not change.

* **Fig. 1 map** (§2.1): violations of Malleable / Maximum / SLO-Compliant
  against the cost of one batch-10 VGG16 query on 1 EP (EP-s), from 0.69
  (Table 1 read per batch-10 query) to 6.9 (read per instance, our
  headline). A cost c is run as §2.1's workload with the 20 s window and
  the 10 s SLO multiplied by 6.9 / c (the same load and tightness as a
  query costing c). The paper's 12 / 38 / 45 % are drawn as references and
  the cost where each of our curves meets its paper value is marked.
* **Fig. 3 map** (§3.2): share of High-priority queries faster with the
  predictor against TIME_WINDOW (a multiple of the query's SLO; ours is 1),
  with the share of queries the predictor drops on a second axis; Accordion
  on the saturated streams 2, 3, 5, 6 (one 2-peak and one 5-peak stream
  make each of §3.2's "two periodically bursty workloads") at every SLO
  target (Moderate, Strict, Relaxed), a note per target.
* **Occupancy map** (§4.4.5): the time share with all 64 EPs held, for
  Accordion and Fastest, against the stream's load (a multiple of our ρ)
  and its peak shape (the rate between peaks relative to a peak; ours 0.2),
  on streams 3 (2 peaks) and 6 (5 peaks) at the Moderate target.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.engine import simulate
from shepherd.experiments.accordion import common as c
from shepherd.experiments.accordion import fig01_motivation as f1
from shepherd.experiments.accordion.fig03_predictor import EXPERIMENT as FIG3
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.registry import register

QUERY_COST_S = (0.69, 1.0, 1.5, 2.0, 2.7, 3.5, 4.5, 5.5, 6.9)  #: 1-EP cost of a batch-10 query (EP-s)
WINDOWS = (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)  #: TIME_WINDOW / SLO; 0 = predictor off (the reference)
LOADS = (0.5, 0.75, 1.0, 1.5, 2.0)  #: × our ρ
FLOORS = (0.05, 0.2, 0.6)  #: rate between peaks / peak height
HEAVY = (2, 3, 5, 6)
OCC_PAPER = {"accordion": 70.0, "fastest": 82.0}
#: the Fig. 3 map runs at every SLO target (issue 41: its finding differs between them), Moderate first
MAP_TARGETS = ("moderate", "strict", "relaxed")


def crossing(xs: list[float], ys: list[float], level: float) -> float | None:
    """First x (linear interpolation) where the curve ys(xs) reaches ``level``, or None if it never does."""
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if (y0 - level) * (y1 - level) <= 0 and y0 != y1:
            return x0 + (level - y0) * (x1 - x0) / (y1 - y0)
        if y0 == level:
            return x0
    return None


def _fmt_cost(x: float | None) -> str:
    return "never" if x is None else f"{x:.2f} EP-s"


class MapFig1(Experiment):
    name = "accordion-map-fig1"
    paper = "accordion"
    title = "Accordion map: Fig. 1 violations vs the cost of one batch-10 query (§2.1)"

    def cells(self, scale):
        return [self.cell(policy=p, seed=s, cost_s=x) for x in QUERY_COST_S for p in f1.SYSTEMS
                for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        frame = c.cell_layers(p)
        k = 10 * f1.TABLE1_VGG16_MS / 1000.0 / p["cost_s"]
        t = f1.trace(p["seed"], window_s=20.0 * k, slo_s=10.0 * k)
        res = simulate(t, None, p["policy"], {"eps": f1.EPS, "window": 0.0}, artifacts={"layer_profiles": frame},
                       seed=p["seed"])
        return c.summarise(res, t, eps=f1.EPS, extra={**c.scalars(p), "bound": f1.violation_bound(t, frame)})

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        runs = results.group_by(["policy", "seed", "cost_s"]).agg(pl.col("violations", "bound").first())
        runs = runs.with_columns((100 * pl.col("violations")).alias("violations_pct"),
                                 pl.col("policy").replace_strict({k: v[0] for k, v in f1.SYSTEMS.items()})
                                 .alias("Scheduler")).sort("cost_s")
        order = [v[0] for v in f1.SYSTEMS.values()]
        fig, axes = plotting.figure(width=6)
        ax = axes[0][0]
        sns.lineplot(data=runs.to_pandas(), x="cost_s", y="violations_pct", hue="Scheduler", hue_order=order,
                     marker="o", errorbar=plotting.t_interval, ax=ax)
        bound = runs.group_by("cost_s").agg(pl.col("bound").mean()).sort("cost_s")
        ax.plot(bound["cost_s"].to_list(), (100 * bound["bound"]).to_list(), "k--", lw=1, label="capacity bound")
        colours = dict(zip(order, sns.color_palette(n_colors=len(order))))
        mean = runs.group_by(["policy", "cost_s"]).agg(pl.col("violations_pct").mean()).sort("cost_s")
        beyond, at = [], {}
        for p, (label, paper) in f1.SYSTEMS.items():
            ax.axhline(paper, color=colours[label], ls=":", lw=1)
            sub = mean.filter(pl.col("policy") == p)
            x = crossing(sub["cost_s"].to_list(), sub["violations_pct"].to_list(), paper)
            at[label] = x
            if x is not None:
                ax.axvline(x, color=colours[label], ls="-.", lw=0.8)
            beyond.append(Headline(f"§2.1 {label}: query cost where ours reaches the paper's {paper:g} %", None,
                                   float("nan") if x is None else x, unit="EP-s"))
        ax.set_xscale("log")
        ax.set_xlabel("cost of one batch-10 VGG16 query on 1 EP (EP-s; Table 1: 0.69 per batch, 6.9 per instance)")
        ax.set_ylabel("SLO violations (%)")
        ax.legend(fontsize=7)
        figs = save_figure(fig, figures_dir, "accordion-map-fig1")
        wide = mean.pivot(on="policy", index="cost_s", values="violations_pct").sort("cost_s")
        order_at = [x for x, a, m, s in wide.select("cost_s", "accordion", "fastest", "slo-conforming").iter_rows()
                    if a < m < s]
        note = ("Fig. 1 map: dotted lines are the paper's 12 / 38 / 45 %, dash-dotted where our curve meets its "
                f"value — Malleable at {_fmt_cost(at['Malleable'])}, Maximum at {_fmt_cost(at['Maximum'])}, "
                f"SLO-Compliant at {_fmt_cost(at['SLO-Compliant'])}; the paper's triple needs all three at one "
                "cost" + (", and these differ by more than a quarter, so no single per-query cost reproduces it"
                          if None not in at.values() and max(at.values()) > 1.25 * min(at.values()) else "")
                + ". The paper's order Malleable < Maximum < SLO-Compliant holds at "
                + (", ".join(f"{x:g}" for x in order_at) + " EP-s" if order_at else "no cost of the map") + ".")
        return Section(self.title, figs, [], [], [note], beyond)


class MapFig3(Experiment):
    name = "accordion-map-fig3"
    paper = "accordion"
    title = "Accordion map: Fig. 3 share of High-priority queries faster vs the predictor's TIME_WINDOW (§3.2)"

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target=t, policy="accordion", window=w, seed=s, duration_s=dur)
                for t in MAP_TARGETS for k in HEAVY for w in WINDOWS for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        return FIG3.run_cell(p)

    def table(self, results: pl.DataFrame) -> pl.DataFrame:
        """target, window, stream, seed → share faster than with the predictor off, share of queries dropped."""
        if "target" not in results.columns:
            results = results.with_columns(pl.lit("moderate").alias("target"))
        rows = []
        for (t, k, s), g in sorted(results.group_by(["target", "stream", "seed"]), key=lambda x: x[0]):
            off = g.filter(pl.col("window") == 0).select("request", "latency_s")
            for w in sorted(set(g["window"].to_list()) - {0.0}):
                on = g.filter(pl.col("window") == w)
                share, _ = c.share_faster(on.select("request", "latency_s"), off)
                rows.append({"target": t, "window": w, "stream": k, "seed": s, "share": 100 * share,
                             "dropped": 100 * float(on["dropped"][0])})
        return pl.DataFrame(rows)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        tab = self.table(results)
        targets = [t for t in MAP_TARGETS if t in set(tab["target"].to_list())]
        fig, axes = plotting.figure(ncols=len(targets), width=5)
        for ax, t in zip(axes[0], targets):
            part = tab.filter(pl.col("target") == t).to_pandas()
            sns.lineplot(data=part, x="window", y="share", marker="o", errorbar=plotting.t_interval, ax=ax,
                         color="C0", label="High-priority queries faster (%)")
            ax.axhline(82.0, color="C0", ls=":", lw=1, label="paper: ~82 %")
            ax.axvline(1.0, color="grey", ls="--", lw=0.8, label="our default (window = SLO)")
            ax2 = ax.twinx()
            sns.lineplot(data=part, x="window", y="dropped", marker="s", errorbar=plotting.t_interval,
                         ax=ax2, color="C3", label="queries dropped (%)")
            ax.set_ylim(0, 100)
            ax2.grid(False)
            ax.set_title(f"{t} target")
            ax.set_xlabel("TIME_WINDOW / the query's SLO")
            ax.set_ylabel("High-priority queries faster with the predictor (%)")
            ax2.set_ylabel("queries dropped by the predictor (%)", color="C3")
            ax.legend(loc="upper right", fontsize=7)
            ax2.legend(loc="center right", fontsize=7)
        figs = save_figure(fig, figures_dir, "accordion-map-fig3")
        beyond, notes = [], []
        for t in targets:
            mean = (tab.filter(pl.col("target") == t).group_by("window").agg(pl.col("share", "dropped").mean())
                    .sort("window"))
            beyond += [Headline(f"{t}, window {w:g} × SLO: High-priority faster / queries dropped", None, sh,
                                unit=f"% / {d:.1f} %") for w, sh, d in mean.iter_rows()]
            notes.append(fig3_note(t, mean))
        return Section(self.title, figs, [], [], notes, beyond)


def fig3_note(target: str, mean: pl.DataFrame) -> str:
    """The Fig. 3 map's finding at one target (window, share, dropped sorted by window): where the share
    peaks, and whether (and where) it reaches the paper's ~82 %."""
    best = mean.sort("share", descending=True).row(0, named=True)
    reach = crossing(mean["window"].to_list()[::-1], mean["share"].to_list()[::-1], 82.0)
    return (f"Fig. 3 map, {target} target: the share peaks at {best['share']:.1f} % (window {best['window']:g} × "
            f"SLO, {best['dropped']:.1f} % of the queries dropped); "
            + (f"no window in the map reaches the paper's ~82 % at the {target} target, so there no choice of "
               "TIME_WINDOW alone gives the paper's number, and every gain in the share costs drops (right axis)."
               if reach is None else
               f"the paper's ~82 % is reached near window {reach:.2f} × SLO at the {target} target, where the "
               "predictor drops the share of queries on the right axis — the price of the paper's number."))


class MapOccupancy(Experiment):
    name = "accordion-map-occupancy"
    paper = "accordion"
    title = "Accordion map: time share at 100 % occupancy vs stream load and peak shape (§4.4.5)"

    def cells(self, scale):
        dur = 300.0 if scale.quick else 600.0
        return [self.cell(stream=k, target="moderate", policy=p, seed=s, duration_s=dur, load_scale=x, floor=f)
                for k in (3, 6) for p in OCC_PAPER for x in LOADS for f in FLOORS
                for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        return c.run_stream_cell(p)

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        runs = results.group_by(["stream", "policy", "seed", "load_scale", "floor"]).agg(
            (100 * pl.col("full_share").first()).alias("full_pct"))
        fig, axes = plotting.figure(ncols=2, width=4.5)
        for ax, (p, paper) in zip(axes[0], OCC_PAPER.items()):
            sub = runs.filter(pl.col("policy") == p).with_columns(pl.col("floor").cast(pl.String).alias("between peaks"))
            sns.lineplot(data=sub.to_pandas(), x="load_scale", y="full_pct", hue="between peaks", marker="o",
                         hue_order=[str(f) for f in FLOORS], errorbar=plotting.t_interval, ax=ax)
            ax.set_ylim(0, 100)
            ax.axhline(paper, color="k", ls=":", lw=1)
            ax.axvline(1.0, color="grey", ls="--", lw=0.8)
            ax.set_title(c.LABELS[p])
            ax.set_xlabel("load (× our ρ)")
            ax.set_ylabel("time share with all 64 EPs held (%)")
        figs = save_figure(fig, figures_dir, "accordion-map-occupancy")
        mean = runs.group_by(["policy", "load_scale", "floor"]).agg(pl.col("full_pct").mean()).sort(
            "policy", "floor", "load_scale")
        beyond = [Headline(f"{c.LABELS[p]}, load {x:g}, between peaks {f:g}: at 100 % occupancy", None, v, unit="%")
                  for p, x, f, v in mean.iter_rows()]
        parts = []
        for p, paper in OCC_PAPER.items():
            sub = mean.filter(pl.col("policy") == p)
            near = sub.with_columns((pl.col("full_pct") - paper).abs().alias("gap")).sort("gap").row(0, named=True)
            default = sub.filter((pl.col("load_scale") == 1.0) & (pl.col("floor") == 0.2))["full_pct"]
            parts.append(f"{c.LABELS[p]} (paper {paper:g} %): {float(default[0]) if default.len() else float('nan'):.0f} % "
                         f"at our defaults, closest {near['full_pct']:.0f} % at load {near['load_scale']:g} × ρ and "
                         f"{near['floor']:g} between peaks, range {sub['full_pct'].min():.0f}–{sub['full_pct'].max():.0f} %")
        both = mean.pivot(on="policy", index=["load_scale", "floor"], values="full_pct")
        joint = both.filter((pl.col("accordion") - 70).abs() <= c.tolerance(70, "%")) \
            .filter((pl.col("fastest") - 82).abs() <= c.tolerance(82, "%")) if {"accordion", "fastest"} <= set(
                both.columns) else both.clear()
        note = ("Occupancy map (streams 3 and 6, Moderate): " + "; ".join(parts) + ". "
                + (f"Both paper values hold together (within the tolerance) at {joint.height} of {both.height} "
                   "(load, shape) points: " + ", ".join(f"{x:g} × ρ / {f:g}" for x, f in
                                                       joint.select("load_scale", "floor").iter_rows())
                   if joint.height else "No (load, shape) point of the map gives both paper values within the "
                   "tolerance") + ".")
        return Section(self.title, figs, [], [], [note], beyond)


FIG1 = register(MapFig1())
FIG3_MAP = register(MapFig3())
OCCUPANCY = register(MapOccupancy())
