"""What ran, as columns of a summary row (issue 13: every summary row says what it measured).

:func:`shepherd.core.metrics.summarize` stays about outcomes only; the places
that write summaries (``shepherd simulate``, sweep cells) add these columns, so
summaries from different runs concatenate into one comparable table.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import polars as pl

RUN_COLUMNS = ("policy", "trace", "load", "slo_ms", "seed", "cluster", "config")


def cluster_label(gpus: int | None, plan: str | None) -> str:
    """``"32 GPUs"`` or ``"plan plan.parquet"``."""
    return f"{gpus} GPUs" if gpus is not None else f"plan {plan}"


def with_run_columns(summary: pl.DataFrame, *, policy: str, trace: str, load: float, slo_ms: float | None,
                     seed: int, gpus: int | None, plan: str | None, config: Mapping[str, Any],
                     synthetic: bool = False) -> pl.DataFrame:
    """The summary with what ran as columns: policy, trace, load (× native rate), slo_ms (null: the
    trace's own), seed, cluster, config (the policy's resolved config as JSON) and synthetic."""
    return summary.with_columns(
        policy=pl.lit(policy, pl.String), trace=pl.lit(trace, pl.String),
        load=pl.lit(float(load), pl.Float64),
        slo_ms=pl.lit(None if slo_ms is None else float(slo_ms), pl.Float64),
        seed=pl.lit(int(seed), pl.Int64), cluster=pl.lit(cluster_label(gpus, plan), pl.String),
        config=pl.lit(json.dumps(dict(config), sort_keys=True, default=str), pl.String),
        synthetic=pl.lit(bool(synthetic)),
    )
