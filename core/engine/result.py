"""The outcome of a simulation as tables (artifact kinds requests/batches/workers/summary).

Everything here is read from the run's :class:`~.recorder.Recorder` (the
only writer of rows) and its worker table (:class:`~.resources.Resources`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.engine.cluster import Cluster
from shepherd.core.engine.loop import Engine
from shepherd.core.engine.outcomes import DROPPED, LATE, PENDING, SERVED
from shepherd.core.engine.recorder import Recorder

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
    #: which engine ran and why (:class:`~.fastpath.Choice`; ``choice.provenance()`` goes into the outputs)
    choice: Any = None

    @property
    def engine_ran(self) -> dict[str, str]:
        """``{"engine": "fast" | "reference", "why": one line}``: which engine produced these tables."""
        return self.choice.provenance() if self.choice is not None else {"engine": "reference", "why": "unknown"}

    @property
    def recorder(self) -> Recorder:
        """The run's tables (per-request arrays ``r_outcome``, ``r_start``, ``r_finish`` …)."""
        return self.engine.rec

    @property
    def n_requests(self) -> int:
        return len(self.engine.arrival)

    def _outcome_series(self) -> pl.Series:
        return pl.Series("outcome", self.recorder.r_outcome).replace_strict(
            {PENDING: "dropped", SERVED: "served", LATE: "late", DROPPED: "dropped"}, return_dtype=OUTCOME_ENUM)

    def _rows(self, what: str) -> None:
        if self.recorder.aggregates is not None:
            raise ValueError(f"this run kept only its summary (EngineConfig(record='summary')): no {what} table")

    def requests_frame(self) -> pl.DataFrame:
        """One row per request (kind ``requests``); start/finish/worker/batch null if never served."""
        self._rows("requests")
        e, r = self.engine, self.recorder
        nullable = ("start_us", "finish_us", "worker", "batch_id")
        models = pl.Series("model", self.models, dtype=pl.String)
        frame = pl.DataFrame({
            "request": np.arange(self.n_requests, dtype=np.int64),
            "stream": self.trace_stream.astype(np.int32),
            "model": models.gather(e.model) if self.n_requests else pl.Series([], dtype=pl.String),
            "arrival_us": e.arrival,
            "deadline_us": e.deadline,
            "start_us": r.r_start,
            "finish_us": r.r_finish,
            "worker": r.r_worker,
            "batch_id": r.r_batch,
            "outcome": self._outcome_series(),
            "preemptions": r.r_preempt.astype(np.int32),
        })
        done = pl.col("finish_us") >= 0
        return frame.with_columns([pl.when(done).then(pl.col(c)).alias(c) for c in nullable])

    def _group_labels(self) -> np.ndarray:
        """The plan's group label of every worker (workers added mid-run included)."""
        labels = np.array(self.cluster.groups, dtype=np.int32)
        return labels[np.array(self.engine.res.w_group, dtype=np.int64)]

    def batches_frame(self) -> pl.DataFrame:
        """One row per batch (kind ``batches``), preempted ones included; an allocation's row names its
        first worker (its pieces: :meth:`segments_frame`)."""
        self._rows("batches")
        b = self.recorder.batch_columns()
        worker, model = b["worker"], b["model"]
        return pl.DataFrame({
            "batch_id": np.arange(len(worker), dtype=np.int64),
            "worker": worker.astype(np.int32),
            "group": self._group_labels()[worker] if len(worker) else np.empty(0, np.int32),
            "model": pl.Series("model", self.models, dtype=pl.String).gather(model) if len(model)
            else pl.Series("model", [], dtype=pl.String),
            "size": b["size"].astype(np.int32),
            "start_us": b["start"],
            "end_us": b["end"],
            "preempted": b["preempted"].astype(bool),
        })

    def batch_sizes_frame(self) -> pl.DataFrame:
        """The batches' size, end and preempted columns only (what a summary needs; no strings, so a run of
        millions of batches summarises without the full :meth:`batches_frame`)."""
        self._rows("batches")
        b = self.recorder.batch_columns(numbered=False)  # no batch id in it
        return pl.DataFrame({"size": b["size"].astype(np.int32), "end_us": b["end"],
                             "preempted": b["preempted"].astype(bool)})

    def batch_size_distribution(self) -> pl.DataFrame:
        """Completed batches per size (:func:`shepherd.core.metrics.batch_size_distribution`), also for a run
        that kept only its summary."""
        from shepherd.core import metrics

        agg = self.recorder.aggregates
        if agg is None:
            return metrics.batch_size_distribution(self.batch_sizes_frame())
        return metrics.batch_size_distribution_of_counts(agg.sizes)

    def segments_frame(self) -> pl.DataFrame:
        """Every (batch, worker, start, end) piece of work (:meth:`.Recorder.segments`)."""
        return self.recorder.segments()

    def workers_frame(self) -> pl.DataFrame:
        """One row per worker (kind ``workers``): busy time and preempted waste."""
        res, rec = self.engine.res, self.recorder
        return pl.DataFrame({
            "worker": np.arange(len(res.w_group), dtype=np.int32),
            "group": self._group_labels(),
            "hardware": [self.hardware[h] for h in res.w_hw],
            "node": np.array(res.w_node, dtype=np.int32),
            "busy_us": np.array(rec.w_busy, dtype=np.int64),
            "wasted_us": np.array(rec.w_waste, dtype=np.int64),
            "name": list(res.w_name),
        })

    def windows(self, epoch_us: int, end_us: int | None = None) -> pl.DataFrame:
        """Per-epoch bad rate, idle fraction, occupancy and active requests (:meth:`.Recorder.windows`)."""
        return self.recorder.windows(epoch_us, end_us)

    def summary_frame(self) -> pl.DataFrame:
        """The one-row summary (kind ``summary``), computed by :mod:`shepherd.core.metrics`."""
        from shepherd.core import metrics

        return metrics.summarize(self)

    # cheap scalar views for programmatic users (e.g. planners comparing to an optimum)
    @property
    def good(self) -> int:
        return int((self.recorder.r_outcome == SERVED).sum())

    @property
    def late(self) -> int:
        return int((self.recorder.r_outcome == LATE).sum())

    @property
    def dropped(self) -> int:
        return int((self.recorder.r_outcome == DROPPED).sum())

    @property
    def shed(self) -> int:
        """Requests shed by frontend admission control (:mod:`.admission`): dropped without a decision."""
        return len(self.engine.admission.shed_ids)
