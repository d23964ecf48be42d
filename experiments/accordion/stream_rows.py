"""The REPORT rows of Accordion §4.4 (Figs. 5–9), each worded as the paper states it (STYLE.md pattern 20).

Every judged row quotes one sentence of the paper, names its section and
takes the paper's number; rows the paper does not state are in the
"beyond the paper" table (never judged). Every row is computed per seed
and reported as the mean ± 95 % half-width over seeds
(:mod:`shepherd.experiments.confidence`), so a single seed's luck shows.

**Violations two ways.** A predictor-dropped query is "discarded … or
directed to other available servers" (§3.2), so it is not necessarily a
violation of its SLO: every violation row is given with dropped queries
counted (``violations``, our default and documented choice) and without
(``violations_late``); §3.2's wording supports the second at least as well.
The ranking claim (Accordion has fewer violations than the baselines on
average, §4.4.3) is checked under both.

**"~200 % slower"** (§4.4.4, streams 2, 3, 4, 6) reads as 3× the time
(200 % more) or as 2× (the sense of §4.4.1's "2.2× faster" over all
streams); both rows are given against the same measurement.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import polars as pl

from shepherd.experiments.accordion import common as c
from shepherd.experiments.base import Claim, Headline
from shepherd.experiments.judge import Rule, judge_claim
from shepherd.experiments.confidence import half_width

HEAVY = (2, 3, 5, 6)
ALL_BASELINES = c.BASELINES + ("one-stage",)
COUNTS = {"violations": "late + dropped", "violations_late": "late only"}


def mean(df: pl.DataFrame, metric: str, **eq) -> float:
    for k, v in eq.items():
        df = df.filter(pl.col(k).is_in(list(v)) if isinstance(v, tuple) else pl.col(k) == v)
    return float(df[metric].mean()) if df.height else float("nan")


def viol_ratio(runs: pl.DataFrame, target: str, metric: str) -> float:
    """§4.4.3: the baselines' mean violations over Accordion's at one target."""
    a = mean(runs, metric, policy="accordion", target=target)
    o = mean(runs, metric, policy=ALL_BASELINES, target=target)
    return o / a if a > 0 else float("inf")


def slo_ratio(runs: pl.DataFrame, policy: str, target: str) -> float:
    """Mean over streams of (mean end-to-end latency / SLO): ≤ 1 means the target is met on average."""
    sub = runs.filter((pl.col("policy") == policy) & (pl.col("target") == target))
    return float((sub["latency_s"] / sub["slo_s"]).mean()) if sub.height else float("nan")


def _ratio(paper: float) -> Rule:
    return Rule.effect(paper, c.EFFECT_SHARE)


def _share(paper: float) -> Rule:
    return Rule.near(paper, c.tolerance(paper, "%"), "%")


#: (what, paper value, unit, function of one seed's (runs, norm), rule) — judged rows, the paper's wording.
#: Ratios are judged on the effect (ours − 1 against paper − 1), "only" one-sided (judge.Rule).
def paper_rows() -> list[tuple[str, float, str, Callable, Rule]]:
    rows = []
    for t, paper, where in (("strict", 1.13, "§4.4.3 'on average 1.13× fewer SLO violations compared to the "
                                            "baselines under strict SLO targets'"),
                            ("moderate", 4.2, "§4.4.3 'on average 4.2× fewer SLO violations under moderate SLO "
                                              "targets' (abstract: '4.2 × less SLO violations')"),
                            ("relaxed", 1.7, "§4.4.3 '1.7× fewer violations compared to the baseline techniques' "
                                             "(relaxed)")):
        for metric, how in COUNTS.items():
            rows.append((f"{where}: baselines / Accordion, {how}", paper, "×",
                         lambda r, n, t=t, m=metric: viol_ratio(r, t, m), _ratio(paper)))
    for metric, how in COUNTS.items():
        rows.append((f"§4.4.3 'approximately only 2% of SLO violations across all query streams under relaxed "
                     f"SLO targets', {how} (an upper bound: judged one-sided)", 2.0, "%",
                     lambda r, n, m=metric: 100 * mean(r, m, policy="accordion", target="relaxed"),
                     Rule.at_most(2.0, c.tolerance(2.0, "%"), "%")))
    rows += [
        ("§4.4.1 'it is 1.3× faster on average compared to Fastest, BBS and SLO-Conforming' (stream completion)",
         1.3, "×", lambda r, n: mean(r, "finish_s", policy=c.BASELINES) / mean(r, "finish_s", policy="accordion"),
         _ratio(1.3)),
        ("§4.4.1 '2.2× faster than the 1-Stage baseline' (stream completion)", 2.2, "×",
         lambda r, n: mean(r, "finish_s", policy="one-stage") / mean(r, "finish_s", policy="accordion"), _ratio(2.2)),
        ("§1 'an average improvement of 1.6× in the end-to-end latency compared to baseline methods' (abstract: "
         "'an average reduction of 1.6× in the end-to-end latency')", 1.6,
         "×", lambda r, n: mean(r, "latency_s", policy=ALL_BASELINES) / mean(r, "latency_s", policy="accordion"),
         _ratio(1.6)),
        ("§1 'achieving 1.4× more queries on average compared to baselines' (running queries; abstract: "
         "'accommodates 1.4× more queries')", 1.4, "×",
         lambda r, n: mean(r, "mean_active", policy="accordion") / mean(r, "mean_active", policy=c.BASELINES),
         _ratio(1.4)),
    ]
    for p, paper in (("slo-conforming", 1.3), ("fastest", 1.6), ("bbs", 1.5)):
        rows.append((f"§4.4.4 'Accordion processes 1.3, 1.6, and 1.5× more queries compared to SLO-Conforming, "
                     f"Fastest, and BBS': {c.LABELS[p]}", paper, "×",
                     lambda r, n, p=p: mean(r, "mean_active", policy="accordion") / mean(r, "mean_active", policy=p),
                     _ratio(paper)))
    for paper, reading in ((3.0, "read as 3× the time"), (2.0, "read as 2× the time")):
        rows.append((f"§4.4.4 'for query streams 2, 3, 4, and 6, 1-Stage is ~200% slower than Accordion on "
                     f"average' (completion, {reading})", paper, "×",
                     lambda r, n: mean(r, "finish_s", policy="one-stage", stream=(2, 3, 4, 6))
                     / mean(r, "finish_s", policy="accordion", stream=(2, 3, 4, 6)), _ratio(paper)))
    rows += [
        ("§4.4.4 '1-Stage processes the highest number of queries (equal to the maximum number of EPs in the "
         "system, i.e 64)'", 64.0, "queries",
         lambda r, n: float(r.filter(pl.col("policy") == "one-stage")["max_active"].max()),
         Rule.near(64.0, c.tolerance(64.0, "queries"), "queries")),
        ("§4.4.4 'For query streams 5 and 6, Accordion achieves 2× higher throughput normalized to the minimum "
         "(1-Stage)'", 2.0, "×", lambda r, n: mean(n, "norm_qps", policy="accordion", stream=(5, 6)), _ratio(2.0)),
        ("§4.4.4 'offering 1.2× higher throughput than the baselines across all query streams'", 1.2, "×",
         lambda r, n: mean(n, "norm_qps", policy="accordion") / mean(n, "norm_qps", policy=c.BASELINES), _ratio(1.2)),
        ("abstract and §1 '1.6× higher system throughput in terms of queries per second on average' (vs baselines)",
         1.6, "×", lambda r, n: mean(r, "qps", policy="accordion") / mean(r, "qps", policy=ALL_BASELINES),
         _ratio(1.6)),
        ("§4.4.5 'for query streams 2, 3, 5, and 6, Accordion consistently maintains the system occupancy at "
         "100% for ≈70% of the time'", 70.0, "%",
         lambda r, n: 100 * mean(r, "full_share", policy="accordion", stream=HEAVY), _share(70.0)),
        ("§4.4.5 'the Fastest technique also sustains the system at full capacity for ~82% of the time' "
         "(streams 2, 3, 5, 6)", 82.0, "%", lambda r, n: 100 * mean(r, "full_share", policy="fastest", stream=HEAVY),
         _share(82.0)),
        ("§4.4.5 Fastest 'takes 1.6× longer time on average to finish the whole query stream' (streams 2, 3, 5, 6, "
         "the paragraph's streams, as its 82 % sibling)", 1.6, "×",
         lambda r, n: mean(r, "finish_s", policy="fastest", stream=HEAVY)
         / mean(r, "finish_s", policy="accordion", stream=HEAVY), _ratio(1.6)),
        ("§3.3 'the maximum frequency of readjustments is only 0.9% of the total number of inference passes "
         "within a query stream' (an upper bound: one-sided; the maximum over streams 1–6)", 0.9, "%",
         lambda r, n: 100 * _max_shrinks(r), Rule.at_most(0.9, c.tolerance(0.9, "%"), "%")),
        (f"§4.4.2 'Query stream 1 … all schedulers perform well with this type of workload' (and §4.4.4: no "
         f"significant difference on streams 1 and 4 except 1-Stage): the most SLO violations of Accordion, "
         f"SLO-Conforming, Fastest and BBS on stream 1, Moderate target, late + dropped (read as ≤ "
         f"{STREAM1_WELL:g} %: one-sided)", STREAM1_WELL, "%",
         lambda r, n: 100 * max(mean(r, "violations", policy=p, target="moderate", stream=1)
                                for p in ("accordion",) + c.BASELINES),
         Rule.at_most(STREAM1_WELL, unit="%")),
    ]
    return rows


#: "perform well" read as at most this share of violations (%), fixed before any run: the relaxed target's
#: own "approximately only 2 %" widened fivefold
STREAM1_WELL = 10.0


def _max_shrinks(runs: pl.DataFrame, streams: tuple[int, ...] | None = None) -> float:
    acc = runs.filter(pl.col("policy") == "accordion")
    if streams is not None:
        acc = acc.filter(pl.col("stream").is_in(list(streams)))
    return float((acc["shrinks"] / acc["instances"]).max()) if acc.height else float("nan")


def beyond_rows() -> list[tuple[str, str, Callable]]:
    """Our diagnostics (no paper value): (what, unit, function of one seed's (runs, norm, series))."""
    rows = []
    for t in c.TARGETS:
        for metric, how in COUNTS.items():
            for p in c.POLICIES:
                rows.append((f"{t}: {c.LABELS[p]} SLO violations, {how}", "%",
                             lambda r, n, s, t=t, m=metric, p=p: 100 * mean(r, m, policy=p, target=t)))
    for p in c.POLICIES:
        rows.append((f"stream 1, moderate: {c.LABELS[p]} SLO violations, late + dropped", "%",
                     lambda r, n, s, p=p: 100 * mean(r, "violations", policy=p, target="moderate", stream=1)))
    for p in ("accordion", "slo-conforming", "fastest"):
        rows.append((f"EPs per running query (time-weighted): {c.LABELS[p]}", "EPs",
                     lambda r, n, s, p=p: _eps_per_query(s, p)))
    for t in c.TARGETS:
        rows.append((f"streams 5–6, {t}: Accordion QPS / best baseline's", "×",
                     lambda r, n, s, t=t: mean(n, "norm_qps", policy="accordion", stream=(5, 6), target=t)
                     / max(mean(n, "norm_qps", policy=p, stream=(5, 6), target=t) for p in c.BASELINES)))
    rows += [("streams 2, 3, 5, 6: Accordion at 100 % occupancy until the last arrival", "%",
              lambda r, n, s: 100 * mean(r, "full_share_arrivals", policy="accordion", stream=HEAVY)),
             ("streams 2, 3, 5, 6: Fastest at 100 % occupancy until the last arrival", "%",
              lambda r, n, s: 100 * mean(r, "full_share_arrivals", policy="fastest", stream=HEAVY)),
             ("readjustments per inference pass, most over streams 2–6", "%",
              lambda r, n, s: 100 * _max_shrinks(r, (2, 3, 4, 5, 6)))]
    return rows


def _eps_per_query(series: pl.DataFrame | None, policy: str) -> float:
    if series is None:
        return float("nan")
    sub = series.filter(pl.col("policy") == policy)
    return 64 * float(sub["occupancy"].sum()) / max(float(sub["active"].sum()), 1e-12)


def seed_values(fn: Callable, *frames: pl.DataFrame | None) -> list[float]:
    """``fn`` applied to each seed's slice of every frame, in seed order (non-finite values kept: the judge
    calls a row with one inconclusive)."""
    seeds = sorted(frames[0]["seed"].unique().to_list())
    return [float(fn(*(None if f is None else f.filter(pl.col("seed") == s) for f in frames))) for s in seeds]


def per_seed(fn: Callable, *frames: pl.DataFrame | None) -> tuple[float, float]:
    """Mean ± 95 % half-width over the seeds whose value is finite (beyond-the-paper rows)."""
    vals = [v for v in seed_values(fn, *frames) if np.isfinite(v)]
    return (float(np.mean(vals)), half_width(vals)) if vals else (float("nan"), 0.0)


def headlines(runs: pl.DataFrame, norm: pl.DataFrame, series: pl.DataFrame | None
              ) -> tuple[list[Headline], list[Claim], list[Headline]]:
    """(judged rows, the paper's qualitative claims, beyond-the-paper rows)."""
    h = [Headline.of_seeds(what, paper, seed_values(fn, runs, norm), unit, rule=rule)
         for what, paper, unit, fn, rule in paper_rows()]
    beyond = []
    for what, unit, fn in beyond_rows():
        m, hw = per_seed(fn, runs, norm, series)
        beyond.append(Headline(what, None, m, half_width=hw, unit=unit))
    return h, claims(runs), beyond


def claims(runs: pl.DataFrame) -> list[Claim]:
    out = []
    for t in c.TARGETS:
        for metric, how in COUNTS.items():
            a = mean(runs, metric, policy="accordion", target=t)
            o = mean(runs, metric, policy=ALL_BASELINES, target=t)
            diff = seed_values(lambda r, t=t, m=metric: 100 * (mean(r, m, policy=ALL_BASELINES, target=t)
                                                                - mean(r, m, policy="accordion", target=t)), runs)
            out.append(judge_claim(f"§4.4.3 Accordion has fewer SLO violations than the baselines on average at the "
                                   f"{t} target ({how}; judged on baselines − Accordion, points, per seed: > 0)",
                                   Rule.at_least(0.0), diff, f"Accordion {100 * a:.1f} %, baselines {100 * o:.1f} %"))
    ratios = {p: slo_ratio(runs, p, "strict") for p in c.POLICIES}
    out.append(judge_claim(
        "§4.4.2 'only Accordion is able to achieve the Strict (10%) end-to-end latency target on average' "
        "(mean over streams of mean latency / SLO ≤ 1 for Accordion and > 1 for every baseline; judged per seed "
        "on the margin min(1 − Accordion's, every baseline's − 1))",
        Rule.above(0.0), seed_values(_only_strict_margin, runs),
        ", ".join(f"{c.LABELS[p]} {v:.2f}" for p, v in ratios.items())))
    met = {}
    for p in c.POLICIES:
        mod = runs.filter((pl.col("policy") == p) & (pl.col("target") == "moderate"))
        met[p] = (mod.filter(pl.col("latency_s") <= pl.col("slo_s")).height, mod.height)
    alone = [p for p in ALL_BASELINES if met[p][1] and met[p][0] == met[p][1]]
    out.append(judge_claim(
        "§4.4.2 'only Accordion … while always sustaining the Moderate (25%) SLO targets, compared to the other "
        "baselines' (Accordion's mean latency ≤ SLO on every stream, and every baseline's above it on at least "
        "one; judged per seed on the margin min(1 − Accordion's worst stream's latency / SLO, each baseline's "
        "worst − 1))",
        Rule.at_least(0.0), seed_values(_always_moderate_margin, runs),
        ", ".join(f"{c.LABELS[p]} {k} of {n} runs" for p, (k, n) in met.items())
        + (f"; also always within it: {', '.join(c.LABELS[p] for p in alone)}" if alone else "")))
    fin = {p: mean(runs, "finish_s", policy=p, stream=HEAVY) for p in ("accordion", "fastest", "one-stage")}
    out.append(judge_claim(
        "§4.4.5 Accordion 'completes execution earlier than the Fastest and 1-Stage schedulers' (streams 2, 3, 5, "
        "6; judged per seed on the earlier of the two baselines' finish − Accordion's, s)",
        Rule.above(0.0, "s"), seed_values(_finish_margin_s, runs),
        ", ".join(f"{c.LABELS[p]} {v:.0f} s" for p, v in fin.items())))
    return out


def _only_strict_margin(runs: pl.DataFrame) -> float:
    """> 0 exactly when Accordion's mean latency / SLO at Strict is ≤ 1 and every baseline's is > 1 (§4.4.2);
    its size is how far the nearer side is from flipping."""
    ratios = {p: slo_ratio(runs, p, "strict") for p in c.POLICIES}
    return min(1.0 - ratios["accordion"] + 1e-12, *(ratios[p] - 1.0 for p in ALL_BASELINES))


def _worst_moderate(runs: pl.DataFrame, policy: str) -> float:
    sub = runs.filter((pl.col("policy") == policy) & (pl.col("target") == "moderate"))
    return float((sub["latency_s"] / sub["slo_s"]).max()) if sub.height else float("nan")


def _always_moderate_margin(runs: pl.DataFrame) -> float:
    """≥ 0 exactly when Accordion's mean latency is within the Moderate SLO on every stream and each baseline's
    exceeds it on at least one (§4.4.2 'always sustaining … compared to the other baselines')."""
    return min(1.0 - _worst_moderate(runs, "accordion"),
               *(_worst_moderate(runs, p) - 1.0 - 1e-12 for p in ALL_BASELINES))


def _finish_margin_s(runs: pl.DataFrame) -> float:
    """The earlier of Fastest's and 1-Stage's mean finish time minus Accordion's, on the heavy streams (§4.4.5)."""
    acc = mean(runs, "finish_s", policy="accordion", stream=HEAVY)
    return min(mean(runs, "finish_s", policy=p, stream=HEAVY) for p in ("fastest", "one-stage")) - acc
