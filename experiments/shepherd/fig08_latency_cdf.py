"""Shepherd Fig. 8: latency CDFs of admitted requests, MAF-stable, 250 ms SLO.

At low load (≈3k req/s) all systems look alike; at high load (144k req/s)
Clockwork's and Nexus's latencies crowd near the SLO while Shepherd's spread
more evenly (§7.1). "Admitted" = requests that were executed (on time or
late); dropped requests have no latency. Both loads are points of Fig. 7's
grid: this figure names Fig. 7's cells (:func:`~.common.load_cell`), which
store the latency percentiles 0…100 of their admitted requests, so a
reproduce of both runs each simulation once.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.experiments.base import Experiment, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.shepherd import common as c

LOADS = {"low": 3_000, "high": 144_000}


def pct(one_seed: pl.DataFrame, percentile: int, level: str, system: str) -> float:
    """One seed's latency (ms) at ``percentile`` of ``system``'s admitted requests at load ``level``."""
    return float(one_seed.filter((pl.col("percentile") == percentile) & (pl.col("level") == level)
                                 & (pl.col("system") == system))["latency_ms"][0])


class Fig8(Experiment):
    name = "shepherd-fig8"
    paper = "shepherd"
    title = "Shepherd Fig. 8: latency CDF of admitted requests (MAF-stable, 250 ms SLO)"

    def cells(self, scale):
        return [c.load_cell("stable", load, s, seed, scale.quick)
                for load in LOADS.values() for s in c.SYSTEMS for seed in range(scale.seeds)]

    def run_cell(self, p):
        return c.run_load_cell(p)

    @staticmethod
    def percentiles(results: pl.DataFrame) -> pl.DataFrame:
        """One row per (level, system, seed, percentile) from the load cells' percentile lists."""
        level = {v: k for k, v in LOADS.items()}
        return (results.filter(pl.col("load").is_in(list(LOADS.values())))
                .with_columns(pl.col("load").replace_strict(level).alias("level"),
                              pl.lit(list(c.PERCENTILES), dtype=pl.List(pl.Float64)).alias("percentile"))
                .select("level", "system", "seed", "trace", "synthetic", "percentile", pl.col("latency_pct_ms").alias("latency_ms"))
                .explode("percentile", "latency_ms"))

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        results = self.percentiles(results)
        data = results.with_columns(pl.col("system").replace_strict(c.LABELS).alias("System"),
                                    (pl.col("percentile") / 100).alias("CDF"))
        fig, axes = plotting.figure(ncols=2)
        order = [c.LABELS[s] for s in c.SYSTEMS]
        for i, lvl in enumerate(LOADS):
            part = data.filter(pl.col("level") == lvl)
            plotting.lines(axes[0][i], part, "latency_ms", "CDF", "System", order, markers=False)
            axes[0][i].set_title(f"{lvl} load ({LOADS[lvl] / 1000:g}k req/s)")
            axes[0][i].set_xlabel("latency (ms)")
        plotting.synthetic_caption(fig, c.is_synthetic(results), results)
        figures = save_figure(fig, figures_dir, "shepherd-fig8")
        med = (results.filter(pl.col("percentile") == 50)
               .group_by(["level", "system"]).agg(pl.col("latency_ms").mean()))
        p25 = (results.filter(pl.col("percentile") == 25)
               .group_by(["level", "system"]).agg(pl.col("latency_ms").mean()))

        def get(frame, lvl, s):
            return frame.filter((pl.col("level") == lvl) & (pl.col("system") == s))["latency_ms"].item()

        # "Near the SLO": Clockwork's 25th percentile sits closer to the SLO than Shepherd's.
        crowd = seed_values(lambda f: pct(f, 25, "high", "clockwork") - pct(f, 25, "high", "shepherd"), results)
        claim = judge_claim("§7.1 \"At high load, however, a large portion of requests in Clockwork observe latency "
                            "close to the SLO\" — nearer the SLO than Shepherd's (Clockwork's 25th percentile − "
                            "Shepherd's, ms, per seed: > 0)", Rule.above(0.0, "ms"), crowd,
                            f"p25 {get(p25, 'high', 'clockwork'):.0f} ms vs {get(p25, 'high', 'shepherd'):.0f} ms; "
                            f"medians {get(med, 'high', 'clockwork'):.0f} vs {get(med, 'high', 'shepherd'):.0f} ms"
                            + ("" if min(crowd) > 0 else " — Clockwork's predictive admission (Figs. 7–10) rejects "
                               "what would queue past ≈ SLO − ℓ(1), so the requests it admits wait little"))
        lows = {s: get(med, "low", s) for s in c.SYSTEMS}
        spread = seed_values(lambda f: max(pct(f, 50, "low", s) for s in c.SYSTEMS)
                             / min(pct(f, 50, "low", s) for s in c.SYSTEMS), results)
        low = judge_claim("§7.1 \"All systems observe similar latency distributions at low load\" (ours: the "
                          "largest median over the smallest, per seed: ≤ 2×)", Rule.at_most(2.0, unit="×"), spread,
                          " / ".join(f"{c.LABELS[s]} {v:.0f}" for s, v in lows.items()) + " ms"
                          + ("" if max(spread) <= 2 else " — at 3k req/s our 12 workers are near capacity (BERT "
                             "alone needs ≈ 9 GPUs at its Eq. 1 batch), so queues form; Nexus waits up to a duty "
                             "cycle by design"))
        return Section(self.title, figures, claims=[low, claim])


EXPERIMENT = register(Fig8())
