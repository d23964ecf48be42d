"""Shared runs of the Accordion experiments (Accordion §4.1–4.4).

One cell = one scheduler on one query stream (:mod:`shepherd.traces.accordion`)
at one SLO target and seed, on the built-in layer profiles (Table 1) and a
64-EP server. A cell's frame has one row per epoch (``t_s``: time-weighted
mean running queries ``active`` and EP ``occupancy``) with the run's
summary broadcast on every row: violations (late + dropped, over all
queries; ``violations_late``: late only — §3.2 says a dropped query is
discarded "or directs it to other available servers", so it need not be a
violation of the stream's SLO; both are reported), mean end-to-end latency of completed queries (all, and High
priority), completion time of the stream, QPS = completed queries (served
or late: §4.3 "queries per second delivered … for the entire query
stream"; ``qps_on_time`` counts served only) / completion time, the exact
time share with every EP held (until the stream completes), the most
queries running at once, shrinks, instances.

A cell may carry a measured profile (``layers``, ``cpu``: :mod:`.measured`)
instead of the built-in one; each headline row has a fixed rule
(:func:`tolerance`, :data:`EFFECT_SHARE`; shepherd/experiments/judge.py decides).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np
import polars as pl

from shepherd.core.accordion.configs import builtin_layers
from shepherd.core.accordion.layers import layers_of
from shepherd.core.engine import simulate
from shepherd.traces.accordion import stream

POLICIES = ("accordion", "slo-conforming", "fastest", "bbs", "one-stage")
BASELINES = ("slo-conforming", "fastest", "bbs")
LABELS = {"accordion": "Accordion", "slo-conforming": "SLO-Conforming", "fastest": "Fastest", "bbs": "BBS",
          "one-stage": "1-Stage"}
TARGETS = ("strict", "moderate", "relaxed")
EPOCH_S = 5.0


def active_max(starts: np.ndarray, ends: np.ndarray) -> int:
    """Most queries running at one instant."""
    if len(starts) == 0:
        return 0
    t = np.concatenate([starts, ends])
    d = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    return int(np.cumsum(d[np.lexsort((d, t))]).max())


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


def full_share(starts: np.ndarray, ends: np.ndarray, eps: int, horizon_us: int) -> float:
    """Share of ``[0, horizon)`` during which all ``eps`` EPs are held (§4.4.5 "occupancy at 100 %"):
    exact, from the allocation segments (a sweep over their starts and ends), not from epoch means."""
    if horizon_us <= 0 or len(starts) == 0:
        return 0.0
    t = np.concatenate([np.clip(starts, 0, horizon_us), np.clip(ends, 0, horizon_us)])
    d = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    order = np.lexsort((d, t))  # at one instant ends (−1) before starts (+1)
    t, held = t[order], np.cumsum(d[order])
    full = float(np.sum(np.diff(t)[held[:-1] >= eps]))
    return full / horizon_us


def headline_seeds(scale) -> int:  # noqa: ANN001 - a Scale
    """Seeds of every Accordion grid: at least 3 at quick scale and 5 at full (single-seed headlines are fragile:
    the Moderate violation ratio was 3.31 on one seed and 2.70 on three)."""
    return max(scale.seeds, 3 if scale.quick else 5)


#: a ratio row ("4.2× fewer") holds when ours − 1 is within ±25 % of the paper's effect (paper − 1): judge.Rule.effect
EFFECT_SHARE = 0.25


def tolerance(paper: float, unit: str) -> float:
    """The tolerance of every Accordion row that is not a ratio, fixed before any run: ±25 % of the paper's
    value, and at least ±2 points for a share in %. Ratio rows are judged on the effect (:data:`EFFECT_SHARE`)."""
    return max(0.25 * abs(paper), 2.0) if unit == "%" else 0.25 * abs(paper)


def cell_layers(p: Mapping[str, Any]) -> pl.DataFrame:
    """The cell's ``layer_profiles``: built in (Table 1), or measured here and carried in the cell (:mod:`.measured`)."""
    if p.get("layers") is None:
        return builtin_layers()
    from shepherd.experiments.accordion.measured import frame_of
    return frame_of(p["layers"], p.get("cpu", "measured"))


def one_ep_ms(frame: pl.DataFrame) -> dict[str, float]:
    """1-EP latency per instance of each model: the sum of its layers (Accordion §4.1)."""
    return {m: sum(layers_of(frame, m)) for m in frame["model"].unique().sort().to_list()}


def simulate_stream(p: Mapping[str, Any]):
    """(result, trace) of one scheduler on one stream; on a measured profile the stream's rates and SLOs
    come from the measured 1-EP latencies, so load and targets mean the same as on Table 1."""
    frame = cell_layers(p)
    one = None if p.get("layers") is None else one_ep_ms(frame)
    shape = {k: p[k] for k in ("load_scale", "floor") if k in p}  # the occupancy map's knobs
    trace = stream(p["stream"], p["target"], duration_s=p["duration_s"], seed=p["seed"], one_ep_ms=one, **shape)
    cfg = {"window": p.get("window", 1.0)} | ({"predictor": p["predictor"]} if "predictor" in p else {})
    res = simulate(trace, None, p["policy"], cfg, artifacts={"layer_profiles": frame}, seed=p["seed"])
    return res, trace


def scalars(p: Mapping[str, Any]) -> dict:
    """The cell's parameters as result columns; an embedded measured profile becomes its short digest
    (so collecting results does not copy the profile onto every row)."""
    out = {k: v for k, v in p.items() if isinstance(v, (int, float, str, bool))}
    if p.get("layers") is not None:
        blob = json.dumps(p["layers"], sort_keys=True).encode()
        out["layers"] = "sha256:" + hashlib.sha256(blob).hexdigest()[:16]
        out["speedups"] = speedups(cell_layers(p))
    return out


def speedups(frame: pl.DataFrame) -> str:
    """A profile's long-query speedups at 2 / 4 / 8 EPs (Σ layers / bottleneck), as Table 1 prints them."""
    from shepherd.core.accordion.configs import TABLE1_EPS, is_builtin, model_configs

    parts = []
    for m in frame["model"].unique().sort().to_list():
        cfg = model_configs(frame, m, calibrate=is_builtin(frame))
        total = sum(cfg[0].stages_ms)
        parts.append(f"{m} " + "/".join(f"{total / cfg[d - 1].bottleneck_ms:.2f}" for d in TABLE1_EPS
                                        if d <= len(cfg)))
    return ", ".join(parts)


def run_stream_cell(p: Mapping[str, Any]) -> pl.DataFrame:
    res, trace = simulate_stream(p)
    return summarise(res, trace, eps=64, extra=scalars(p))


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
    completed = req.filter(pl.col("outcome") != "dropped").height
    b = res.batches_frame()
    active = per_epoch(b["start_us"].to_numpy(), b["end_us"].to_numpy(), np.ones(b.height), end_us, epoch)
    stats = res.extra.get("policy_stats", {})
    summary = {
        "n": req.height,
        "violations": float((req["outcome"] != "served").mean()) if req.height else 0.0,
        "violations_late": float((~req["outcome"].is_in(["served", "dropped"])).mean()) if req.height else 0.0,
        "dropped": float((req["outcome"] == "dropped").mean()) if req.height else 0.0,
        "latency_s": float(lat.mean()) if lat.len() else float("nan"),
        "latency_high_s": float(((high["finish_us"] - high["arrival_us"]) / 1e6).mean()) if high.height else float("nan"),
        "finish_s": end_us / 1e6,
        "qps": completed / (end_us / 1e6),
        "qps_on_time": served.height / (end_us / 1e6),
        "full_share": full_share(s, e, eps, end_us),
        "full_share_arrivals": full_share(s, e, eps, int(trace["arrival_us"].max()) if trace.height else 0),
        "max_active": int(active_max(b["start_us"].to_numpy(), b["end_us"].to_numpy())),
        "instances": int(trace["instances"].sum()) if "instances" in trace.columns else req.height,
        "mean_active": float(active.mean()),
        "shrinks": int(stats.get("shrinks", 0)),
        "slo_s": float(trace["slo_us"][0]) / 1e6 if trace.height else 0.0,
    }
    rows = {"t_s": np.arange(len(occ)) * EPOCH_S, "occupancy": occ, "active": active}
    frame = pl.DataFrame(rows)
    return frame.with_columns([pl.lit(v).alias(k) for k, v in {**extra, **summary}.items()])


def high_latencies(res, trace: pl.DataFrame) -> pl.DataFrame:
    """One row per High-priority query: ``request`` and end-to-end ``latency_s`` (null if never completed)."""
    req = res.requests_frame().sort("request")
    prio = trace["priority"].to_numpy() if "priority" in trace.columns else np.ones(trace.height)
    high = req.filter(pl.Series(prio[req["request"].to_numpy()] == 1))
    return high.select("request", ((pl.col("finish_us") - pl.col("arrival_us")).cast(pl.Float64) / 1e6)
                       .alias("latency_s"))


def share_faster(with_: pl.DataFrame, without: pl.DataFrame, eps_s: float = 1e-6) -> tuple[float, int]:
    """Fig. 3's measure (Accordion §3.2): of the High-priority queries completed in both runs (same
    stream, same requests), the share whose latency is lower with the predictor (by more than
    ``eps_s``), and how many were compared."""
    j = with_.join(without, on="request", suffix="_off").drop_nulls(["latency_s", "latency_s_off"])
    if j.height == 0:
        return float("nan"), 0
    return float((j["latency_s"] < j["latency_s_off"] - eps_s).mean()), j.height


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
