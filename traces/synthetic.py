"""Synthetic request traces as trace frames (see ``core.artifacts`` 'trace').

A synthetic trace is a set of *streams*; stream ``i`` sends requests to model
``models[i mod M]`` (round-robin, as Shepherd §7 assigns MAF functions) with
an SLO. The aggregate rate is split over streams by a Zipf popularity law
(rate_i ∝ (i+1)^−s; s = 0 is uniform), as Symphony's synthetic workloads use
Zipf popularity over models. Each stream then draws its arrivals from one of
the processes in :mod:`shepherd.traces.arrivals`.

:func:`two_stream` builds the Shepherd §7.2 / Fig. 11(a) ablation workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.units import ms_to_us
from shepherd.traces import arrivals, checks

PROCESSES = ("poisson", "gamma", "mmpp")


@dataclass(frozen=True)
class SyntheticSpec:
    """What to generate. Rates in requests/s, times in seconds/ms as named."""

    process: str = "poisson"
    rate: float = 1000.0
    duration_s: float = 10.0
    models: Sequence[str] = ("ResNet50",)
    streams: int | None = None  # default: one stream per model
    zipf_s: float = 0.0
    slo_ms: float = 250.0
    cv: float = 1.0  # gamma
    mmpp_ratio: float = 10.0
    mmpp_dwell_low_s: float = 1.0
    mmpp_dwell_high_s: float = 0.1

    def validate(self) -> None:
        """Every field in range (see :mod:`shepherd.traces.checks`), the expected size under the limit."""
        if self.process not in PROCESSES:
            raise UserError(f"unknown arrival process '{self.process}' (known: {', '.join(PROCESSES)}, two-stream)")
        checks.number("--rate", self.rate, low=0, what="requests/s")
        checks.positive("--duration-s", self.duration_s, high=checks.MAX_DURATION_S, what="s")
        if not self.models:
            raise UserError("at least one model is needed")
        for model in self.models:
            checks.text("--models", model)
        if self.streams is not None:
            checks.count("--streams", self.streams, 1, checks.MAX_STREAMS)
        checks.number("--zipf", self.zipf_s, low=0)
        checks.positive("--slo-ms", self.slo_ms, high=checks.MAX_SLO_MS, what="ms")
        checks.number("--cv", self.cv, low=checks.MIN_CV, high=checks.MAX_CV)
        checks.number("--mmpp-ratio", self.mmpp_ratio, low=1)
        checks.number("--mmpp-dwell-low", self.mmpp_dwell_low_s, low=checks.MIN_DWELL_S,
                      high=checks.MAX_DURATION_S, what="s")
        checks.number("--mmpp-dwell-high", self.mmpp_dwell_high_s, low=checks.MIN_DWELL_S,
                      high=checks.MAX_DURATION_S, what="s")
        checks.requests(self.rate * self.duration_s, f"a {self.duration_s:g} s trace at {self.rate:g} req/s",
                        "lower --rate or --duration-s")


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Normalised Zipf popularity (i+1)^−s over n items (s = 0: uniform)."""
    ranks = np.arange(1, n + 1, dtype=np.float64)
    weights = ranks ** (-s)
    return weights / weights.sum()


def generate(spec: SyntheticSpec, rng: np.random.Generator,
             on_stream: Callable[[int], None] | None = None) -> pl.DataFrame:
    """Draw a synthetic trace frame for ``spec`` from ``rng`` (``on_stream`` reports progress)."""
    spec.validate()
    n_streams = spec.streams if spec.streams is not None else len(spec.models)
    duration_us = int(round(spec.duration_s * 1e6))
    rates = spec.rate * zipf_weights(n_streams, spec.zipf_s)
    per_stream = []
    for stream, rate in enumerate(rates):
        if spec.process == "poisson":
            times = arrivals.poisson(rng, rate, duration_us)
        elif spec.process == "gamma":
            times = arrivals.gamma(rng, rate, spec.cv, duration_us)
        else:
            params = arrivals.mmpp_rates(rate, spec.mmpp_ratio, spec.mmpp_dwell_low_s, spec.mmpp_dwell_high_s)
            times = arrivals.mmpp(rng, params, duration_us)
        per_stream.append(times)
        if on_stream is not None:
            on_stream(stream)
    models = [spec.models[i % len(spec.models)] for i in range(n_streams)]
    slo_us = [ms_to_us(spec.slo_ms)] * n_streams
    return assemble(per_stream, models, slo_us)


def assemble(per_stream: Sequence[np.ndarray], models: Sequence[str], slo_us: Sequence[int]) -> pl.DataFrame:
    """Merge per-stream arrival arrays into one trace frame sorted by (arrival, stream)."""
    counts = np.array([len(a) for a in per_stream], dtype=np.int64)
    arrival = np.concatenate(per_stream).astype(np.int64) if per_stream else np.empty(0, np.int64)
    stream = np.repeat(np.arange(len(per_stream), dtype=np.int32), counts)
    order = np.lexsort((stream, arrival))
    arrival, stream = arrival[order], stream[order]
    model_names = np.asarray(models, dtype=object)
    slo = np.asarray(slo_us, dtype=np.int64)[stream]
    return pl.DataFrame({
        "arrival_us": arrival,
        "stream": stream,
        "model": pl.Series("model", model_names[stream] if len(stream) else [], dtype=pl.String),
        "slo_us": slo,
        "deadline_us": arrival + slo,
    })


# --------------------------------------------------------------------------- Shepherd §7.2

TWO_STREAM_MODEL_A = "ResNet18"
#: §7.2 names "ResNet269 (79 ms at batch 1)"; Table 4 has no ResNet269 but
#: ResNeSt269 with α+β = 4.37+74.20 ≈ 79 ms, so that is the model meant.
TWO_STREAM_MODEL_B = "ResNeSt269"


def two_stream(duration_s: float = 10.0, slo_ms: float = 250.0, burst: int = 1024,
               period_ms: float = 120.0, first_burst_ms: float = 5.0,
               stable_period_ms: float = 1.0) -> pl.DataFrame:
    """Shepherd §7.2 / Fig. 11(a): stream A, bursts of 1024 ResNet18 requests every
    120 ms from t = 5 ms; stream B, one ResNeSt269 request every 1 ms from t = 0.
    Deterministic: no randomness is drawn."""
    checks.positive("--duration-s", duration_s, high=checks.MAX_DURATION_S, what="s")
    checks.positive("--slo-ms", slo_ms, high=checks.MAX_SLO_MS, what="ms")
    per_s = burst * 1000.0 / period_ms + 1000.0 / stable_period_ms
    checks.requests(per_s * duration_s, f"a {duration_s:g} s two-stream trace", "lower --duration-s")
    end_us = int(round(duration_s * 1e6))
    a = arrivals.periodic(ms_to_us(period_ms), end_us, ms_to_us(first_burst_ms), burst)
    b = arrivals.periodic(ms_to_us(stable_period_ms), end_us, 0, 1)
    slo = ms_to_us(slo_ms)
    return assemble([a, b], [TWO_STREAM_MODEL_A, TWO_STREAM_MODEL_B], [slo, slo])
