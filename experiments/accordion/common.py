"""Shared runs of the Accordion experiments (Accordion §4.1–4.4).

One cell = one scheduler on one query stream (:mod:`shepherd.traces.accordion`)
at one SLO target and seed, on the built-in layer profiles (Table 1) and a
64-EP server. A cell's frame has one row per epoch (``t_s``: time-weighted
mean running queries ``active`` and EP ``occupancy``) with the run's
summary broadcast on every row: violations (late + dropped, over all
queries), mean end-to-end latency of served queries (all, and High
priority), completion time of the stream, QPS = served / completion time,
time share at 100 % occupancy (until the stream completes), shrinks.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import polars as pl

from shepherd.core.accordion.configs import builtin_layers
from shepherd.core.engine import simulate
from shepherd.traces.accordion import stream

POLICIES = ("accordion", "slo-conforming", "fastest", "bbs", "one-stage")
BASELINES = ("slo-conforming", "fastest", "bbs")
LABELS = {"accordion": "Accordion", "slo-conforming": "SLO-Conforming", "fastest": "Fastest", "bbs": "BBS",
          "one-stage": "1-Stage"}
TARGETS = ("strict", "moderate", "relaxed")
EPOCH_S = 5.0


def per_epoch(starts: np.ndarray, ends: np.ndarray, weight: np.ndarray, horizon_us: int,
              epoch_us: int) -> np.ndarray:
    """Σ weight × overlap of [start, end) with each epoch, divided by the epoch length."""
    n = max(1, int(np.ceil(horizon_us / epoch_us)))
    out = np.zeros(n)
    for i in range(n):
        lo, hi = i * epoch_us, (i + 1) * epoch_us
        ov = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None)
        out[i] = float((ov * weight).sum()) / epoch_us
    return out


def run_stream_cell(p: Mapping[str, Any]) -> pl.DataFrame:
    trace = stream(p["stream"], p["target"], duration_s=p["duration_s"], seed=p["seed"])
    cfg = {"window": p.get("window", 1.0)}
    res = simulate(trace, None, p["policy"], cfg, artifacts={"layer_profiles": builtin_layers()}, seed=p["seed"])
    return summarise(res, trace, eps=64, extra=dict(p))


def summarise(res, trace: pl.DataFrame, eps: int, extra: dict) -> pl.DataFrame:
    req = res.requests_frame()
    served = req.filter(pl.col("outcome") == "served")
    done = req.filter(pl.col("finish_us").is_not_null())
    lat = (done["finish_us"] - done["arrival_us"]).cast(pl.Float64) / 1e6
    prio = trace["priority"].to_numpy() if "priority" in trace.columns else np.ones(trace.height)
    high = done.filter(pl.Series(prio[done["request"].to_numpy()] == 1))
    end_us = int(done["finish_us"].max()) if done.height else 1
    seg = res.segments_frame()
    s, e = seg["start_us"].to_numpy(), seg["end_us"].to_numpy()
    epoch = int(EPOCH_S * 1e6)
    occ = per_epoch(s, e, np.ones(len(s)), end_us, epoch) / eps
    b = res.batches_frame()
    active = per_epoch(b["start_us"].to_numpy(), b["end_us"].to_numpy(), np.ones(b.height), end_us, epoch)
    stats = res.extra.get("policy_stats", {})
    summary = {
        "n": req.height,
        "violations": float((req["outcome"] != "served").mean()) if req.height else 0.0,
        "dropped": float((req["outcome"] == "dropped").mean()) if req.height else 0.0,
        "latency_s": float(lat.mean()) if lat.len() else float("nan"),
        "latency_high_s": float(((high["finish_us"] - high["arrival_us"]) / 1e6).mean()) if high.height else float("nan"),
        "finish_s": end_us / 1e6,
        "qps": served.height / (end_us / 1e6),
        "full_share": float((occ >= 0.99).mean()),
        "mean_active": float(active.mean()),
        "shrinks": int(stats.get("shrinks", 0)),
        "slo_s": float(trace["slo_us"][0]) / 1e6 if trace.height else 0.0,
    }
    rows = {"t_s": np.arange(len(occ)) * EPOCH_S, "occupancy": occ, "active": active}
    frame = pl.DataFrame(rows)
    return frame.with_columns([pl.lit(v).alias(k) for k, v in {**extra, **summary}.items()])


def ratio_mean(results: pl.DataFrame, metric: str, a: str, others: tuple[str, ...], by: str = "stream",
               invert: bool = False, filt=None) -> float:
    """Mean over ``by`` groups of (others' metric / a's metric), or a/others with ``invert``."""
    df = results.group_by(["policy", by, "seed"]).agg(pl.col(metric).first())
    if filt is not None:
        df = df.filter(filt)
    vals = []
    for key in sorted(df[by].unique().to_list()):
        sub = df.filter(pl.col(by) == key).group_by("policy").agg(pl.col(metric).mean())
        m = dict(sub.iter_rows())
        if a not in m:
            continue
        for o in others:
            if o in m and m[a] > 0 and m[o] > 0:
                vals.append(m[a] / m[o] if invert else m[o] / m[a])
    return float(np.mean(vals)) if vals else float("nan")
