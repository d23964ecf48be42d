"""Symphony Fig. 13: goodput vs network delay, RDMA and TCP ranges (§5.5).

20 evenly popular models with similar batching profiles (ResNet50, Table 5),
32 GPUs, SLO 20 / 25 / 50 / 100 ms. The network delay L is Symphony's
``d_ctrl`` (Appendix C ``delay``: a batch's inputs reach the GPU L after the
dispatch decision; the scheduler dispatches L earlier, booking busy GPUs
ahead). RDMA range 0–40 µs, TCP range 0–4 ms. Quick: 10 models, 8 GPUs,
SLO 25 and 100 ms, 1 s.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core import batch_analytics as ba
from shepherd.experiments.base import Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim, seed_values
from shepherd.experiments.registry import register
from shepherd.experiments.symphony import common as c

ALPHA, BETA = c.RESNET50
RDMA_US = (0, 10, 20, 40)
TCP_US = (0, 500, 1000, 2000, 4000)


def loss(one_seed: pl.DataFrame, slo_ms: float, delay_us: float) -> float:
    """One seed's goodput loss at ``delay_us`` against no delay, at ``slo_ms``."""
    part = one_seed.filter(pl.col("slo_ms") == slo_ms)
    base = float(part.filter(pl.col("delay_us") == 0)["goodput_rps"].sum())
    at = float(part.filter(pl.col("delay_us") == delay_us)["goodput_rps"].sum())
    return 1 - at / base if base else float("nan")


class Fig13(Experiment):
    name = "symphony-fig13"
    paper = "symphony"
    title = "Symphony Fig. 13: goodput vs network delay"

    def cells(self, scale):
        slos, models, gpus, dur = (((25.0, 100.0), 10, 8, 1.0) if scale.quick
                                   else ((20.0, 25.0, 50.0, 100.0), 20, 32, 4.0))
        delays = sorted(set(RDMA_US) | set(TCP_US))
        return [self.cell(slo_ms=s, delay_us=d, models=models, gpus=gpus, duration_s=dur, seed=seed)
                for s in slos for d in delays for seed in range(scale.seeds)]

    def run_cell(self, p):
        prof, wl = c.resnet_like(p["models"], p["slo_ms"], duration_s=p["duration_s"])
        lin = ba.Linear(ALPHA, BETA)
        b = max(1, ba.staggered_batch(lin, p["slo_ms"], max(1, p["gpus"] // p["models"])))
        start = 0.6 * ba.throughput_rps(lin, b, p["gpus"])
        g = c.goodput("symphony", wl, prof, p["gpus"], p["seed"], start, d_ctrl_us=float(p["delay_us"]))
        return pl.DataFrame([{"slo_ms": p["slo_ms"], "delay_us": p["delay_us"], "seed": p["seed"],
                              "goodput_rps": g}])

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        from shepherd.experiments import plotting

        data = results.with_columns(pl.format("{} ms", pl.col("slo_ms")).alias("SLO"),
                                    (pl.col("delay_us") / 1000).alias("network delay (ms)"),
                                    (pl.col("goodput_rps") / 1000).alias("goodput (k r/s)"))
        fig, axes = plotting.figure(ncols=2)
        plotting.lines(axes[0][0], data.filter(pl.col("delay_us") <= max(RDMA_US)), "network delay (ms)",
                       "goodput (k r/s)", "SLO")
        axes[0][0].set_title("RDMA range")
        plotting.lines(axes[0][1], data.filter(pl.col("delay_us").is_in(list(TCP_US))), "network delay (ms)",
                       "goodput (k r/s)", "SLO")
        axes[0][1].set_title("TCP range")
        figures = c.plot_save(fig, figures_dir, "symphony-fig13")
        mean = results.group_by("slo_ms", "delay_us").agg(pl.col("goodput_rps").mean())
        headlines, claims, loss_tcp = [], [], {}
        for s in sorted(mean["slo_ms"].unique().to_list()):
            part = mean.filter(pl.col("slo_ms") == s)
            base = float(part.filter(pl.col("delay_us") == 0)["goodput_rps"][0])
            rdma = float(part.filter(pl.col("delay_us") == max(RDMA_US))["goodput_rps"][0])
            tcp = float(part.filter(pl.col("delay_us") == max(TCP_US))["goodput_rps"][0])
            loss_r, loss_tcp[s] = 1 - rdma / base, 1 - tcp / base
            headlines += [Headline(f"SLO {s:g} ms: goodput loss at {max(RDMA_US)} µs (RDMA)", None, 100 * loss_r, unit=" %"),
                          Headline(f"SLO {s:g} ms: goodput loss at {max(TCP_US) / 1000:g} ms (TCP)", None,
                                   100 * loss_tcp[s], unit=" %")]
            least = min(d for d in RDMA_US if d > 0)
            loss_least = 1 - float(part.filter(pl.col("delay_us") == least)["goodput_rps"][0]) / base
            why = (f"; the same loss at {least} µs: one bisection step on a dropped request (1-s quick traces), "
                   f"not the delay" if loss_r >= 0.05 and abs(loss_least - loss_r) < 1e-9 else "")
            claims.append(judge_claim(
                f"SLO {s:g} ms: §5.5 \"Figure 13 (Left) shows that the network latency within the RDMA range only "
                f"marginally reduces goodput\" (the goodput loss at {max(RDMA_US)} µs, per seed: < 5 %)",
                Rule.below(0.05), seed_values(lambda f, s=s: loss(f, s, max(RDMA_US)), results),
                f"{100 * loss_r:.1f} %{why}"))
        slos = sorted(loss_tcp)

        def ordered(f: pl.DataFrame) -> float:
            ls = [loss(f, x, max(TCP_US)) for x in slos]
            return min(a - b for a, b in zip(ls, ls[1:])) if len(ls) > 1 else float("nan")

        claims.append(judge_claim(
            "§5.5 \"We observe that the tighter the latency SLO is, the more severely the goodput is impacted by "
            f"network latency\" (TCP range, {max(TCP_US) / 1000:g} ms: the smallest loss at an SLO − at the next "
            "looser one, per seed: ≥ 0)", Rule.at_least(0.0), seed_values(ordered, results),
            ", ".join(f"{s:g} ms: {100 * loss_tcp[s]:.0f} %" for s in slos)))
        notes = ["Fig. 12 (RDMA 24 µs minimum / 33 µs p99.99 vs TCP with a 12× tail) is a hardware "
                 "measurement, not reproduced; its ranges set the delays swept here."]
        return Section(self.title, figures, headlines, claims, notes)


EXPERIMENT = register(Fig13())
