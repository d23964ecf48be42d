"""Generated planner instances shared by benchmarks, experiments and tests.

* :func:`table5_instance` — a HERD instance at Shepherd Table 5's sizes
  (documented choices: stream rates log-normal (σ = 1), streams assigned to
  models round-robin (Shepherd §7), model α/β cycled from Table 4, one SLO of
  250 ms, model memory uniform 100–1000 MB on 16 GB GPUs with 4 GB reserved;
  the total load scaled so the average demand fills 70 % of the cluster).
* :func:`random_offline_instance` / :func:`offline_trace` — small random
  instances for the offline optimum (Shepherd §5.1, Eq. 3) and the trace frame
  that replays one through the engine, for Flex's empirical competitive ratio.
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from shepherd.core.profiles import latency_table_us, linear_rows, load_builtin
from shepherd.solvers.demand import single_gpu_goodput
from shepherd.solvers.herd import HerdInstance
from shepherd.solvers.offline_optimal import OfflineInstance

#: Shepherd Table 5: streams, models, workers, the paper's solver seconds.
TABLE5 = (
    (200_000, 200, 200, 0.55),
    (400_000, 400, 400, 2.51),
    (600_000, 600, 600, 4.28),
    (800_000, 800, 800, 8.53),
    (1_000_000, 1000, 1000, 13.26),
)

#: Two models with integer α, β (ms) so a 1 ms time grid is exact for the ZILP.
OFFLINE_MODELS = {"a": (1, 4), "b": (2, 6)}


def table5_instance(streams: int, models: int, workers: int, rng: np.random.Generator) -> tuple[HerdInstance, float]:
    """A HERD instance of Table 5's size; returns it and the aggregation seconds."""
    base = load_builtin("shepherd-v100")
    names = base["model"].unique(maintain_order=True).to_list()
    goodput = np.array([single_gpu_goodput(latency_table_us(base, names[k % len(names)], None, 128), 250_000)[1]
                        for k in range(models)])
    rate = rng.lognormal(0.0, 1.0, streams)
    table = pl.DataFrame({"stream": np.arange(streams), "model": np.arange(streams) % models, "rate": rate})
    start = time.perf_counter()
    per_model = table.group_by("model").agg(pl.col("rate").sum()).sort("model")
    demand = per_model["rate"].to_numpy() / goodput
    demand *= 0.7 * workers / demand.sum()
    agg_s = time.perf_counter() - start
    memory = rng.uniform(100, 1000, models)
    return HerdInstance([f"m{k}" for k in range(models)], demand, memory, np.zeros(models, dtype=int)), agg_s


def _latency_us(alpha: float, beta: float, max_batch: int) -> np.ndarray:
    return np.array([0] + [(alpha * k + beta) * 1000 for k in range(1, max_batch + 1)], dtype=np.int64)


def random_offline_instance(rng: np.random.Generator, n: int, gpus: int,
                            models: dict[str, tuple[float, float]] = OFFLINE_MODELS,
                            max_batch: int = 16) -> OfflineInstance:
    """n requests arriving on a 1 ms grid within 30 ms, SLOs 5–24 ms, random models."""
    arr = np.sort(rng.integers(0, 30, n)) * 1000
    names = list(models)
    model = [names[i] for i in rng.integers(0, len(names), n)]
    slo = rng.integers(5, 25, n) * 1000
    return OfflineInstance(arr, arr + slo, model, {m: _latency_us(*ab, max_batch) for m, ab in models.items()}, gpus)


def offline_trace(inst: OfflineInstance) -> pl.DataFrame:
    """The instance as a trace frame (one stream per model), sorted by arrival."""
    order = np.argsort(inst.arrival_us, kind="stable")
    names = sorted(set(inst.model))
    return pl.DataFrame({
        "arrival_us": inst.arrival_us[order].astype(np.int64),
        "stream": pl.Series([names.index(inst.model[i]) for i in order], dtype=pl.Int32),
        "model": [inst.model[i] for i in order],
        "slo_us": (inst.deadline_us - inst.arrival_us)[order].astype(np.int64),
        "deadline_us": inst.deadline_us[order].astype(np.int64),
    })


def offline_profiles(models: dict[str, tuple[float, float]] = OFFLINE_MODELS, max_batch: int = 16) -> pl.DataFrame:
    """Profiles frame for the offline models (hardware V100, ℓ = α·b + β)."""
    return linear_rows(pl.DataFrame({"model": list(models), "hardware": ["V100"] * len(models),
                                     "alpha_ms": [float(a) for a, _ in models.values()],
                                     "beta_ms": [float(b) for _, b in models.values()]}), "table:offline", max_batch)
