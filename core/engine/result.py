"""The outcome of a simulation as tables (artifact kinds requests/batches/workers/summary)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine.loop import DROPPED, LATE, PENDING, SERVED, Engine

OUTCOME_ENUM = pl.Enum(["served", "late", "dropped"])


@dataclass
class SimulationResult:
    """Raw arrays of one run plus helpers that turn them into polars tables."""

    policy: str
    config: dict[str, Any]
    overhead: dict[str, Any]
    seed: int
    models: list[str]
    hardware: list[str]
    cluster: Cluster
    engine: Engine
    trace_stream: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_requests(self) -> int:
        return len(self.engine.arrival)

    def _outcome_series(self) -> pl.Series:
        return pl.Series("outcome", self.engine.r_outcome).replace_strict(
            {PENDING: "dropped", SERVED: "served", LATE: "late", DROPPED: "dropped"}, return_dtype=OUTCOME_ENUM)

    def requests_frame(self) -> pl.DataFrame:
        """One row per request (kind ``requests``); start/finish/worker/batch null if never served."""
        e = self.engine
        nullable = ("start_us", "finish_us", "worker", "batch_id")
        models = pl.Series("model", self.models, dtype=pl.String)
        frame = pl.DataFrame({
            "request": np.arange(self.n_requests, dtype=np.int64),
            "stream": self.trace_stream.astype(np.int32),
            "model": models.gather(e.model) if self.n_requests else pl.Series([], dtype=pl.String),
            "arrival_us": e.arrival,
            "deadline_us": e.deadline,
            "start_us": e.r_start,
            "finish_us": e.r_finish,
            "worker": e.r_worker,
            "batch_id": e.r_batch,
            "outcome": self._outcome_series(),
            "preemptions": e.r_preempt.astype(np.int32),
        })
        done = pl.col("finish_us") >= 0
        return frame.with_columns([pl.when(done).then(pl.col(c)).alias(c) for c in nullable])

    def batches_frame(self) -> pl.DataFrame:
        """One row per batch (kind ``batches``), preempted ones included."""
        e = self.engine
        worker = np.frombuffer(e.b_worker, dtype=np.int64) if len(e.b_worker) else np.empty(0, np.int64)
        group_of_worker = np.array([self.cluster.workers[i].group for i in range(len(self.cluster.workers))],
                                   dtype=np.int32)
        model = np.frombuffer(e.b_model, dtype=np.int64) if len(e.b_model) else np.empty(0, np.int64)

        def col(a):
            return np.frombuffer(a, dtype=np.int64) if len(a) else np.empty(0, np.int64)

        return pl.DataFrame({
            "batch_id": np.arange(len(worker), dtype=np.int64),
            "worker": worker.astype(np.int32),
            "group": group_of_worker[worker] if len(worker) else np.empty(0, np.int32),
            "model": pl.Series("model", np.array(self.models, dtype=object)[model] if len(model) else [],
                               dtype=pl.String),
            "size": col(e.b_size).astype(np.int32),
            "start_us": col(e.b_start),
            "end_us": col(e.b_end),
            "preempted": col(e.b_pre).astype(bool),
        })

    def workers_frame(self) -> pl.DataFrame:
        """One row per worker (kind ``workers``): busy time and preempted waste."""
        e = self.engine
        ws = self.cluster.workers
        return pl.DataFrame({
            "worker": np.array([w.id for w in ws], dtype=np.int32),
            "group": np.array([w.group for w in ws], dtype=np.int32),
            "hardware": [w.hardware for w in ws],
            "node": np.array([w.node for w in ws], dtype=np.int32),
            "busy_us": np.array(e.w_busy, dtype=np.int64),
            "wasted_us": np.array(e.w_waste, dtype=np.int64),
            "name": [w.name for w in ws],
        })

    def summary_frame(self) -> pl.DataFrame:
        """The one-row summary (kind ``summary``), computed by :mod:`shepherd.core.metrics`."""
        from shepherd.core import metrics

        return metrics.summarize(self)

    # cheap scalar views for programmatic users (e.g. planners comparing to an optimum)
    @property
    def good(self) -> int:
        return int((self.engine.r_outcome == SERVED).sum())

    @property
    def late(self) -> int:
        return int((self.engine.r_outcome == LATE).sum())

    @property
    def dropped(self) -> int:
        return int((self.engine.r_outcome == DROPPED).sum())
