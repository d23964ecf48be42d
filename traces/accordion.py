"""Accordion's six query streams and SLO targets (Accordion §4.3, Fig. 4).

* **Arrivals**: a non-homogeneous Poisson process whose rate has ``peaks``
  periodic bumps over the stream (2 peaks: streams 1–3; 5 peaks: streams
  4–6), drawn per 100 ms bin: ``λ(t) = λ̄ · (floor + Σ_k bump_k(t)) / mean``
  with Gaussian bumps of width period/6 — Fig. 4a is only a picture, so the
  shape is ours.
* **Queries**: log-normal instance counts ("batch sizes") with the stream's
  mean (1, 20, 100; 20, 50, 70), σ = 0.8 of the log, at least 1; model
  uniformly among VGG16, ResNet50, ResNet152; priority High/Low with
  probability ½ each (§4.3: "assigned randomly").
* **Rate**: "selected … to saturate the simulated system" (§4.3), with
  streams 1 and 4 the lightest. We set the mean rate from an offered load
  ρ of the 1-Stage work on the 64 EPs: ``λ̄ = ρ · 64 / (mean batch ×
  mean 1-EP latency)``, ρ = 0.3, 1.0, 1.2, 0.4, 1.0, 1.2 (our choice).
* **SLO targets** (§4.3): Strict / Moderate / Relaxed = 10 / 25 / 50 % of
  the largest 1-stage execution time of any query of the stream
  (instances × 1-EP latency), one SLO for every query of the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from shepherd.core.errors import UserError

MODELS = ("ResNet152", "ResNet50", "VGG16")
SLO_TARGETS = {"strict": 0.10, "moderate": 0.25, "relaxed": 0.50}
BIN_S = 0.1
MAX_DURATION_S = 600.0  # §4.1: "intervals up to 10 minutes"


@dataclass(frozen=True)
class StreamSpec:
    peaks: int
    mean_batch: float
    load: float  #: ρ, offered 1-Stage load on the server (module docstring)


STREAMS = {1: StreamSpec(2, 1.0, 0.3), 2: StreamSpec(2, 20.0, 1.0), 3: StreamSpec(2, 100.0, 1.2),
           4: StreamSpec(5, 20.0, 0.4), 5: StreamSpec(5, 50.0, 1.0), 6: StreamSpec(5, 70.0, 1.2)}


def rate_shape(peaks: int, duration_s: float, floor: float = 0.2) -> np.ndarray:
    """Relative arrival rate per bin (mean 1) with ``peaks`` periodic bumps over a constant ``floor`` (the rate
    between peaks relative to a bump's height; Fig. 4a is a picture, 0.2 is our choice)."""
    t = (np.arange(int(np.ceil(duration_s / BIN_S))) + 0.5) * BIN_S
    period = duration_s / peaks
    phase = (t % period) - period / 2
    shape = floor + np.exp(-0.5 * (phase / (period / 6)) ** 2)
    return shape / shape.mean()


def stream(k: int, target: str = "moderate", duration_s: float = MAX_DURATION_S, seed: int = 0,
           one_ep_ms: dict[str, float] | None = None, eps: int = 64, sigma: float = 0.8,
           load_scale: float = 1.0, floor: float = 0.2) -> pl.DataFrame:
    """Query stream ``k`` (1…6) as a trace frame with ``instances`` and ``priority`` columns; ``load_scale``
    multiplies the stream's ρ and ``floor`` sets the peak shape (:func:`rate_shape`) — for maps only."""
    if k not in STREAMS:
        raise UserError(f"unknown Accordion stream {k} (streams 1…6)")
    if target not in SLO_TARGETS:
        raise UserError(f"unknown SLO target '{target}' (known: {', '.join(SLO_TARGETS)})")
    if not 0 < duration_s <= MAX_DURATION_S:
        raise UserError(f"stream duration must be in (0, {MAX_DURATION_S:g}] s, got {duration_s:g}")
    if one_ep_ms is None:
        from shepherd.core.accordion.configs import table1
        t = table1().filter(pl.col("eps") == 1)
        one_ep_ms = dict(zip(t["model"].to_list(), t["latency_ms"].to_list()))
    if load_scale <= 0 or floor < 0:
        raise UserError(f"load_scale must be > 0 and floor ≥ 0, got {load_scale:g} and {floor:g}")
    spec = STREAMS[k]
    rng = np.random.default_rng([seed, k])
    mean_lat_s = float(np.mean([one_ep_ms[m] for m in MODELS])) / 1000.0
    lam = load_scale * spec.load * eps / (spec.mean_batch * mean_lat_s)
    counts = rng.poisson(lam * BIN_S * rate_shape(spec.peaks, duration_s, floor))
    n = int(counts.sum())
    arrival = np.sort(((np.repeat(np.arange(len(counts)), counts) + rng.random(n)) * BIN_S * 1e6).astype(np.int64))
    mu = np.log(spec.mean_batch) - sigma ** 2 / 2  # log-normal with the stream's mean
    inst = np.maximum(1, np.rint(rng.lognormal(mu, sigma, n))).astype(np.int32)
    model = np.asarray(MODELS, dtype=object)[rng.integers(0, len(MODELS), n)]
    prio = rng.integers(0, 2, n).astype(np.int32)
    one_stage_us = inst * np.array([one_ep_ms[m] for m in model]) * 1000.0
    slo = int(max(1, SLO_TARGETS[target] * one_stage_us.max())) if n else 1
    return pl.DataFrame({
        "arrival_us": arrival, "stream": np.full(n, k, np.int32),
        "model": pl.Series("model", model.tolist(), dtype=pl.String),
        "slo_us": np.full(n, slo, np.int64), "deadline_us": arrival + slo,
        "instances": inst, "priority": prio,
    })
