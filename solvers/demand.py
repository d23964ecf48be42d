"""Planner inputs from a trace and profiles: stream rates, single-GPU goodput, model-streams, memory.

Single-GPU goodput T_i (Shepherd §4, "HERD empirically measures the maximum
goodput T_i each stream i can achieve on a single GPU"): we compute it from
the profile rather than by simulation (documented choice). At full
occupancy a request can arrive just after a batch starts, wait for it, and
run in the next one, so its latency is up to 2·ℓ(b); the largest batch with
2·ℓ(b) ≤ SLO is the one a saturated GPU can sustain (the same rule Nexus uses,
Symphony §2.2 Eq. 1), and T_i = b / ℓ(b). If even 2·ℓ(1) exceeds the SLO but
ℓ(1) fits, b = 1; if ℓ(1) exceeds the SLO the stream can never be served
(a UserError).

Model-streams (Shepherd §4 "HERD complexity"): streams of one model are
aggregated; the model-stream's GPU demand is n = Σ_i rate_i / T_i (streams of
one model may have different SLOs, hence different T_i).

Model memory: Shepherd Table 4 gives none. We take ``static_mb`` from the
profiles when present, else Symphony Table 1 (built-in ``symphony-memory``)
for the models it lists (names matched ignoring case, spaces and
punctuation), else ``default_model_mb``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.errors import UserError
from shepherd.core.policies.nexus_packing import sustainable_batch  # noqa: F401  (re-exported)

DEFAULT_MODEL_MB = 250.0  # a mid-size CNN's weights+workspace when no table lists the model


def trace_span_s(trace: pl.DataFrame) -> float:
    """Length of the trace in seconds (first to last arrival; 1 s when degenerate)."""
    if trace.height < 2:
        return 1.0
    span_us = int(trace["arrival_us"].max()) - int(trace["arrival_us"].min())
    return span_us / 1e6 if span_us > 0 else 1.0


def stream_rates(trace: pl.DataFrame) -> pl.DataFrame:
    """Per stream: model, SLO (µs, the stream's most common), requests, mean rate (req/s)."""
    if trace.height == 0:
        raise UserError("trace has no requests")
    span = trace_span_s(trace)
    return (
        trace.group_by("stream")
        .agg(
            pl.col("model").first(),
            pl.col("slo_us").mode().first(),
            pl.len().alias("requests"),
        )
        .with_columns(rate_rps=pl.col("requests") / span)
        .sort("stream")
    )


def single_gpu_goodput(lat_us: np.ndarray, slo_us: int) -> tuple[int, float]:
    """(b, T) — the sustainable batch and the requests/s one GPU serves with it."""
    b = sustainable_batch(lat_us, slo_us)
    if b == 0:
        return 0, 0.0
    return b, b / (lat_us[b] / 1e6)


def model_memory_mb(models: list[str], profiles: pl.DataFrame, default_mb: float = DEFAULT_MODEL_MB) -> dict[str, float]:
    """Static GPU memory per model (see module docstring for the sources)."""
    table: dict[str, float] = {}
    sym = prof.read_builtin_raw("symphony-memory")
    for name, mb in zip(sym["model"].to_list(), sym["static_mb"].to_list()):
        table[_key(name)] = float(mb)
    if "static_mb" in profiles.columns:
        for name, mb in profiles.select("model", "static_mb").drop_nulls().iter_rows():
            table[_key(name)] = float(mb)
    return {m: table.get(_key(m), default_mb) for m in models}


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def stream_demand(trace: pl.DataFrame, profiles: pl.DataFrame, max_batch: int = prof.DEFAULT_MAX_BATCH) -> pl.DataFrame:
    """:func:`stream_rates` plus, per stream, the sustainable batch, T_i and demand n_i = rate_i / T_i (§4)."""
    streams = stream_rates(trace)
    batches, goodputs = [], []
    tables: dict[str, np.ndarray] = {}
    for model, slo, stream in streams.select("model", "slo_us", "stream").iter_rows():
        if model not in tables:
            tables[model] = prof.latency_table_us(profiles, model, None, max_batch)
        b, t = single_gpu_goodput(tables[model], int(slo))
        if b == 0:
            raise UserError(
                f"stream {stream}: SLO {slo / 1000:g} ms is below one {model} request's latency "
                f"({tables[model][1] / 1000:g} ms); it can never be served"
            )
        batches.append(b)
        goodputs.append(t)
    streams = streams.with_columns(
        batch=pl.Series(batches, dtype=pl.Int32), goodput_rps=pl.Series(goodputs, dtype=pl.Float64)
    ).with_columns(n=pl.col("rate_rps") / pl.col("goodput_rps"))
    return streams


@dataclass
class ModelStreams:
    """Model-streams of a trace: one row per model, plus the per-stream table."""

    models: list[str]
    demand: np.ndarray  # n per model: GPUs needed for the average load
    rate: np.ndarray  # requests/s per model
    alpha_ms: np.ndarray
    beta_ms: np.ndarray
    memory_mb: np.ndarray
    streams: pl.DataFrame  # stream, model, slo_us, requests, rate_rps, batch, goodput_rps, n, unit
    base_models: list[str] = field(default_factory=list)  # the model of each model-stream


def model_streams(
    trace: pl.DataFrame, profiles: pl.DataFrame, max_batch: int = prof.DEFAULT_MAX_BATCH,
    default_model_mb: float = DEFAULT_MODEL_MB, shards: int = 1,
) -> ModelStreams:
    """Aggregate a trace's streams into model-streams with GPU demand n (Shepherd §4).

    ``shards`` > 1 splits each model's streams into up to that many balanced
    model-streams (named ``model#k``; see :func:`shard_streams`), so that a
    cluster with more groups than models can still use every GPU.
    """
    streams = shard_streams(stream_demand(trace, profiles, max_batch), shards)
    params = prof.model_params(profiles)
    per_unit = (streams.group_by("unit").agg(pl.col("model").first(), pl.col("n").sum(), pl.col("rate_rps").sum())
                .sort("unit"))
    units = per_unit["unit"].to_list()
    base = per_unit["model"].to_list()
    ab = {m: (a, b) for m, a, b in params.select("model", "alpha_ms", "beta_ms").iter_rows()}
    mem = model_memory_mb(sorted(set(base)), profiles, default_model_mb)
    return ModelStreams(
        models=units,
        demand=per_unit["n"].to_numpy().astype(np.float64),
        rate=per_unit["rate_rps"].to_numpy().astype(np.float64),
        alpha_ms=np.array([ab[m][0] if ab[m][0] is not None else np.nan for m in base], dtype=np.float64),
        beta_ms=np.array([ab[m][1] if ab[m][1] is not None else np.nan for m in base], dtype=np.float64),
        memory_mb=np.array([mem[m] for m in base], dtype=np.float64),
        streams=streams,
        base_models=base,
    )


def shard_streams(streams: pl.DataFrame, shards: int) -> pl.DataFrame:
    """Add a ``unit`` column: the model-stream each stream belongs to.

    With ``shards`` = 1 the unit is the model (Shepherd §4 "HERD complexity").
    Otherwise each model's streams are dealt into at most ``shards`` units
    ``model#k`` balanced by demand n (longest-processing-time greedy:
    streams by decreasing n, ties by stream id, each to the lightest unit) —
    a documented extension: with fewer models than groups, one model-stream per
    model would leave GPUs idle, while constraint (d) only needs each *stream*
    in one group, so a model may be loaded in several groups.
    """
    if shards <= 1:
        return streams.with_columns(unit=pl.col("model"))
    units = []
    for stream, model, n in streams.select("stream", "model", "n").iter_rows():
        units.append((model, -float(n), int(stream)))
    order = sorted(range(len(units)), key=lambda i: units[i])
    load: dict[str, list[float]] = {}
    unit_of = [""] * len(units)
    counts = streams.group_by("model").len()
    per_model = dict(zip(counts["model"], counts["len"]))
    for i in order:
        model, neg_n, _ = units[i]
        bins = load.setdefault(model, [0.0] * min(shards, per_model[model]))
        k = min(range(len(bins)), key=lambda j: (bins[j], j))
        bins[k] -= neg_n
        unit_of[i] = f"{model}#{k}"
    return streams.with_columns(unit=pl.Series(unit_of, dtype=pl.String))


#: A split sub-stream's demand is at most 1/SPLIT_PARTS of a full group's fair share (see split_cap).
SPLIT_PARTS = 4


def split_cap(total_n: float, gpus: int, group_limit: int, parts: int = SPLIT_PARTS) -> float:
    """Largest stream demand n left whole: 1/``parts`` of the demand a full group of
    min(Ḡ, N) GPUs carries when the cluster's demand Σn is spread evenly over N GPUs."""
    if gpus < 1 or group_limit < 1 or parts < 1:
        raise UserError(f"split needs gpus, group limit and parts ≥ 1 (got {gpus}, {group_limit}, {parts})")
    return total_n * min(group_limit, gpus) / gpus / parts


def split_streams(trace: pl.DataFrame, demand: dict[int, float], cap: float) -> pl.DataFrame:
    """The router's split of heavy streams (extension of Shepherd §4 constraint (d); documented choice).

    Constraint (d) puts each stream in one group, and (b) caps a group at Ḡ
    GPUs, so a stream whose average demand n_i exceeds Ḡ can never be served
    by any plan (its bt = Ḡ/n_i < 1), and one that exceeds a group's fair
    share leaves its group overloaded while others idle. The paper does not
    meet this case: its 46,000 MAF streams are each small next to a group. When
    the load is scaled up with the number of workers (Fig. 10) the busiest
    stream's demand grows with N while Ḡ stays 12 — at N = 400 one synthetic
    MAF function needs ~200 GPUs. So the request router deals such a stream
    over k = ⌈n_i / cap⌉ sub-streams, round-robin in arrival order (request j
    → sub-stream j mod k), and Herd treats each sub-stream as a stream.

    Sub-stream 0 keeps the stream's id; the others get fresh ids above the
    trace's largest, allocated in stream-id order. Requests, models, arrivals
    and deadlines are unchanged — only their ``stream`` label. Deterministic.
    """
    if not cap > 0:
        raise UserError(f"split cap must be positive, got {cap:g}")
    parts = {s: math.ceil(n / cap) for s, n in sorted(demand.items()) if n > cap}
    if not parts or trace.height == 0:
        return trace
    order = np.argsort(trace["arrival_us"].to_numpy(), kind="stable")
    stream = trace["stream"].to_numpy()[order].astype(np.int64)
    out = stream.copy()
    fresh = int(stream.max()) + 1
    for s, k in parts.items():
        idx = np.flatnonzero(stream == s)
        j = np.arange(idx.size) % k
        out[idx[j > 0]] = fresh + j[j > 0] - 1
        fresh += k - 1
    relabelled = np.empty_like(out)
    relabelled[order] = out
    return trace.with_columns(stream=pl.Series(relabelled).cast(trace["stream"].dtype))


def split_heavy_streams(trace: pl.DataFrame, profiles: pl.DataFrame, gpus: int, group_limit: int,
                        parts: int = SPLIT_PARTS) -> pl.DataFrame:
    """:func:`split_streams` with n_i from :func:`stream_demand` and the cap of :func:`split_cap`."""
    if trace.height == 0:
        return trace
    streams = stream_demand(trace, profiles)
    demand = dict(zip(streams["stream"].to_list(), streams["n"].to_list()))
    return split_streams(trace, demand, split_cap(float(streams["n"].sum()), gpus, group_limit, parts))
