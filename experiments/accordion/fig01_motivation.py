"""Accordion Fig. 1 (§2.1): malleable vs maximum vs SLO-compliant pipelines on 8 EPs.

100 VGG16 queries of batch 10 (10 instances) at uniformly random times in a
20 s window, 8 EPs of 8 cores, SLO 10 s; Malleable = ``accordion``,
Maximum = ``fastest``, SLO-Compliant = ``slo-conforming`` (predictor off:
§2.1 has no priorities). Paper: 12 % / 38 % / 45 % SLO violations; the
claim we check is their order, Malleable < Maximum < SLO-Compliant.

**Units (our reading).** Table 1's latency is one inference instance's on
one EP (an image: VGG16 0.69 s), and its speedups are those of a long
stream of instances through the pipeline (:mod:`shepherd.core.accordion.configs`);
"batch size 10" is a query of 10 instances (§3.1: "the batch size refers to
the number of inference instances per request"). Why this reading:
(i) §2.1 calls 10 s "a challenging target … given the measured end-to-end
latency for VGG16, shown in Table 1" — a 10-instance query takes 6.9 s on
1 EP and ≈ 2.9 s on 8, so 10 s is tight; were 0.69 s the whole batch-10
query, 10 s would be 14× its 1-EP latency; (ii) §4.3 derives the streams'
SLOs from "the execution times of the 1-Stage pipeline models listed in
Table 1" for queries of 1 to hundreds of instances, i.e. per instance.

**What no reading gives.** At this reading every on-time query finishes by
30 s (last arrival + SLO) and a d-EP pipeline spends d·T_d ≥ T_1 EP-seconds
(speedups are ≤ d), so at most 8 × 30 s / 6.9 s ≈ 34 of the 100 queries can
be on time under *any* scheduler — ≥ 65 % violations (:func:`violation_bound`,
reported as a row); the paper's 12 % is out of reach. The same bound says
12 % needs a batch-10 query to cost at most 8 × 30 s / 88 ≈ 2.7 EP-s
(:func:`max_query_cost`, a row), i.e. 2.5× under Table 1 read per instance
(6.9 s) and 4× over Table 1 read per batch (0.69 s). That second reading
(``reading="batch"``: 0.69 s is the whole batch-10 query on 1 EP, so each
of its 10 instances takes a tenth; the same run with the window and the
SLO × 10) is run and reported too: 1-EP pipelines then offer load 0.43 with
14× slack and even the 100 queries arriving at once would all finish on 1
EP each within 100 × 0.69 / 8 = 8.6 s < 10 s, so no work-conserving
scheduler that takes 1 EP can violate. The paper prints no batching speed-up
(a batch-10 pass costing 2–4× one image would sit between), so neither
reading is adjusted; the per-instance one is the headline, and only the
order is a claim.

On a measured profile (:mod:`.measured`) the window and the SLO scale with
the measured VGG16 1-EP latency over Table 1's 0.69 s, so the load and the
tightness are §2.1's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.accordion.configs import is_builtin, model_configs
from shepherd.core.engine import simulate
from shepherd.experiments.accordion import common as c
from shepherd.experiments.accordion.measured import OnMeasured
from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.registry import register

READINGS = {"instance": 1.0, "batch": 10.0}  #: Table 1 per instance / per batch-10 query: window and SLO scale
SYSTEMS = {"accordion": ("Malleable", 12.0), "fastest": ("Maximum", 38.0), "slo-conforming": ("SLO-Compliant", 45.0)}
TABLE1_VGG16_MS = 690.0
EPS = 8


def trace(seed: int, n: int = 100, window_s: float = 20.0, instances: int = 10, slo_s: float = 10.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.integers(0, int(window_s * 1e6), n)).astype(np.int64)
    slo = int(slo_s * 1e6)
    return pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": ["VGG16"] * n,
                         "slo_us": np.full(n, slo, np.int64), "deadline_us": arr + slo,
                         "instances": np.full(n, instances, np.int32), "priority": np.ones(n, np.int32)})


def violation_bound(t: pl.DataFrame, frame: pl.DataFrame, eps: int = EPS) -> float:
    """A lower bound on the violations of any scheduler: on-time queries all finish by the last deadline
    and each costs at least min_d d·latency(d) EP-µs; at most ``eps`` × that span of EP time exists."""
    cfgs = model_configs(frame, "VGG16", calibrate=is_builtin(frame))
    inst = int(t["instances"][0])
    cost = min((d + 1) * cfg.latency_us(inst) for d, cfg in enumerate(cfgs[:eps]))
    span = int(t["deadline_us"].max()) - int(t["arrival_us"].min())
    return 1.0 - min(t.height, eps * span // cost) / t.height


def max_query_cost(t: pl.DataFrame, violations: float, eps: int = EPS) -> float:
    """The most EP-µs one query may cost for ``violations`` (a share) not to be excluded by the bound of
    :func:`violation_bound`: ``eps`` × the span over the queries that must be on time."""
    span = int(t["deadline_us"].max()) - int(t["arrival_us"].min())
    return eps * span / int(np.ceil((1.0 - violations) * t.height - 1e-9))


class Fig1(Experiment):
    name = "accordion-fig1"
    paper = "accordion"
    title = "Accordion Fig. 1: malleable vs maximum vs SLO-compliant VGG16 pipelines on 8 EPs"
    stem = "accordion-fig1"

    def cells(self, scale):
        return [self.cell(policy=p, seed=s, reading=r) for r in READINGS for p in SYSTEMS
                for s in range(c.headline_seeds(scale))]

    def run_cell(self, p):
        frame = c.cell_layers(p)
        k = 1.0 if p.get("layers") is None else c.one_ep_ms(frame)["VGG16"] / TABLE1_VGG16_MS
        k *= READINGS[p.get("reading", "instance")]
        t = trace(p["seed"], window_s=20.0 * k, slo_s=10.0 * k)
        res = simulate(t, None, p["policy"], {"eps": EPS, "window": 0.0},
                       artifacts={"layer_profiles": frame}, seed=p["seed"])
        cost_s = max_query_cost(t, SYSTEMS["accordion"][1] / 100) / 1e6 / k  # in the reading's own seconds
        return c.summarise(res, t, eps=EPS, extra={**c.scalars(p), "bound": violation_bound(t, frame),
                                                   "cost12_s": cost_s,
                                                   "query_1ep_s": 10 * c.one_ep_ms(frame)["VGG16"] / 1e3 / k})

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        if "reading" not in results.columns:
            results = results.with_columns(pl.lit("instance").alias("reading"))
        every = results.group_by(["reading", "policy", "seed"]).agg(pl.all().exclude("t_s", "occupancy", "active").first())
        batch = every.filter(pl.col("reading") == "batch")
        runs = every.filter(pl.col("reading") == "instance")
        runs = runs.with_columns(pl.col("policy").replace_strict({k: v[0] for k, v in SYSTEMS.items()}).alias("Scheduler"),
                                 (pl.col("violations") * 100).alias("violations_pct"))
        fig, axes = plotting.figure(ncols=3, width=3.5)
        for ax, (m, lab) in zip(axes[0], (("latency_s", "mean end-to-end latency (s)"), ("qps", "QPS"),
                                          ("violations_pct", "SLO violations (%)"))):
            sns.barplot(data=runs.to_pandas(), x="Scheduler", y=m, ax=ax, errorbar=plotting.band(m))
            ax.set_ylabel(lab)
        figs = save_figure(fig, figures_dir, self.stem)
        v = {p: 100 * float(runs.filter(pl.col("policy") == p)["violations"].mean()) for p in SYSTEMS}
        h = [Headline.of_seeds(f"§2.1 'fewer SLO violations (12%) compared to Maximum (38%) and SLO-Compliant "
                               f"Pipelines (45%)': {SYSTEMS[p][0]}", SYSTEMS[p][1],
                               [100 * float(x) for x in runs.filter(pl.col("policy") == p).sort("seed")["violations"]],
                               unit="%", tolerance=c.tolerance(SYSTEMS[p][1], "%")) for p in SYSTEMS]
        bound = 100 * float(runs["bound"].mean())
        beyond: list[Headline] = []
        beyond.append(Headline("§2.1 workload: fewest violations any scheduler can have (capacity bound)", None, bound,
                          unit="%"))
        beyond.append(Headline("§2.1 most a batch-10 query may cost for 12 % violations (capacity bound)", None,
                          float(runs["cost12_s"].mean()), unit="EP-s"))
        beyond.append(Headline("§2.1 a batch-10 VGG16 query on 1 EP, Table 1 per instance (the headline reading)", None,
                          float(runs["query_1ep_s"].mean()), unit="s"))
        vb = {p: 100 * float(batch.filter(pl.col("policy") == p)["violations"].mean()) for p in SYSTEMS}
        if batch.height:
            beyond.append(Headline("§2.1 a batch-10 VGG16 query on 1 EP, Table 1 per batch-10 query", None,
                              float(batch["query_1ep_s"].mean()), unit="s"))
            beyond += [Headline(f"§2.1 {SYSTEMS[p][0]} pipelines: SLO violations, Table 1 per batch-10 query", None,
                           vb[p], unit="%") for p in SYSTEMS]
        claims = [Claim("§2.1 Malleable has the fewest violations (the paper's 12 % < 38 % < 45 %)",
                        v["accordion"] < min(v["fastest"], v["slo-conforming"]),
                        ", ".join(f"{SYSTEMS[p][0]} {x:.0f} %" for p, x in v.items())),
                  Claim("§2.1 Maximum < SLO-Compliant violations (38 % < 45 %)", v["fastest"] < v["slo-conforming"],
                        f"{v['fastest']:.0f} % vs {v['slo-conforming']:.0f} %")]
        notes = [f"Table 1 read per instance (module docstring): 100 queries × 10 instances in 20 s need ≥ "
                 f"{bound:.0f} % violations under any scheduler, so the paper's 12 / 38 / 45 % cannot be reached: "
                 f"12 % needs a batch-10 query to cost ≤ {float(runs['cost12_s'].mean()):.1f} EP-s, Table 1 gives "
                 f"{float(runs['query_1ep_s'].mean()):.1f} s per instance read, 0.69 s per batch read — and read per "
                 "batch, no scheduler violates (rows above): the paper's levels lie between the two readings, "
                 "which a batching speed-up the paper does not print would be needed to place; the Fig. 1 map "
                 "(accordion-map-fig1) draws the violations against that cost."]
        if claims[1].verdict.state != "holds":
            notes.append("Why not (Maximum < SLO-Compliant): in this overload the scheduler spending the fewest "
                         "EP-seconds per query serves the most; SLO-Compliant's 1-EP pipelines cost T1, Maximum's "
                         "8-EP ones 8·T8 > T1 (speedup < 8).")
        return Section(self.title + self.suffix(results), figs, h, claims, notes, beyond)

    def suffix(self, results: pl.DataFrame) -> str:
        return ""


class Fig1Measured(OnMeasured, Fig1):
    name = "accordion-fig1-measured"
    stem = "accordion-fig1-measured"


EXPERIMENT = register(Fig1())
MEASURED = register(Fig1Measured())
