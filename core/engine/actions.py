"""``Actions``: everything a policy instance may see and call — its serving group's view of the engine.

One :class:`Actions` per serving group is handed to the policy's constructor.
What it may read: ``group``, ``group_id``, ``workers`` (this group's live
worker ids), ``hardware`` (their hardware indices), ``nodes`` (every
worker's node), ``models``, ``lat`` / ``exit_points`` / ``runtime`` (what the
policy's ``prepare`` built), ``max_batch``, ``rng`` (the run's one generator),
``until`` (the end of the current run of arrivals), :meth:`arrivals` and
:meth:`column` (this group's requests), :meth:`windows` (per-epoch signals).

What it may call — on one worker: ``start``, ``book`` (start when the worker
frees), ``preempt``, ``busy``, ``running``; on several: ``allocate`` and
``resize`` (:mod:`.allocations`); on a reserved path: ``book_path``
(:mod:`.paths`); ``drop``; ``set_timer`` / ``cancel_timer`` (a handle);
``decision_time`` (the scheduler's clock, :mod:`.overhead`); ``add_worker``
/ ``remove_worker``. The action methods are the engine parts' own bound
methods (no extra call per action).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from shepherd.core.engine.clock import Timer
from shepherd.core.engine.inputs import Runtime
from shepherd.core.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.engine.loop import Engine


class Actions:
    """A serving group's view of the engine (module docstring)."""

    def __init__(self, engine: "Engine", group: int, group_id: int, runtime: Runtime, models: list[str],
                 max_batch: int, rng: np.random.Generator) -> None:
        res = engine.res
        self._engine = engine
        self._clock = engine.clock
        self.group, self.group_id = group, group_id
        self.runtime = runtime
        self.lat = runtime.lat
        self.exit_points = runtime.exit_points
        self.models = models
        self.max_batch = max_batch
        self.rng = rng
        self.workers: list[int] = res.group_workers[group]  # live: grows and shrinks with the group
        self.nodes: list[int] = res.w_node
        self.request_ids = engine.group_ids[group]
        #: every request's deadline and model index (read-only numpy arrays, indexed by request id)
        self.deadlines: np.ndarray = engine.deadline
        self.model_of: np.ndarray = engine.model
        # actions: the parts' own bound methods
        self.start = res.start
        self.book = res.book
        self.preempt = res.preempt
        self.busy = res.busy
        self.running = res.running
        self.allocate = engine.allocs.start
        self.resize = engine.allocs.resize
        self.book_path = engine.paths.book_path
        self.drop = self._drop
        self.cancel_timer = engine.clock.cancel
        #: ``decision_time(now)``: when a decision made at ``now`` takes effect (the group's scheduler
        #: clock, ≥ now; :mod:`.overhead`)
        self.decision_time = partial(engine.admission.decision_time, group)

    @property
    def hardware(self) -> list[int]:
        """Hardware index of each of this group's workers (aligned with ``workers``)."""
        hw = self._engine.res.w_hw
        return [hw[w] for w in self.workers]

    @property
    def until(self) -> int:
        """Arrivals strictly before this time belong to the current run; any action may lower it."""
        return self._clock.until

    @property
    def engine_config(self):
        return self._engine.config

    def _drop(self, rids: list[int], now: int) -> None:
        """Give up on ``rids`` (they will never be served)."""
        self._engine.rec.dropped(rids)

    def set_timer(self, at: int, payload: Any = None) -> Timer:
        """Call this policy's ``on_timer(at, payload)`` at ``at``; returns a handle for :meth:`cancel_timer`."""
        return self._clock.set_timer(self.group, at, payload)

    def add_worker(self, hardware: str, now: int, node: int | None = None, name: str = "") -> int:
        """A new idle worker in this group from ``now`` (autoscaling); returns its id."""
        hw_names = self.runtime.hardware
        if hardware not in hw_names:
            raise UserError(f"no latency table for hardware '{hardware}' (prepared: {', '.join(hw_names)})")
        res = self._engine.res
        w = len(res.w_group)
        return res.add_worker(self.group, hw_names.index(hardware), w if node is None else node,
                              name or str(w), now)

    def remove_worker(self, worker: int, now: int) -> None:
        """``worker`` takes nothing new from ``now``; what it runs finishes."""
        if worker not in self.workers:
            raise RuntimeError(f"worker {worker} is not a live worker of group {self.group}")
        self._engine.res.remove_worker(worker, now)

    def arrivals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(arrival_us, deadline_us, model, stream) of this group's requests, numpy."""
        e, ids = self._engine, self.request_ids
        if ids is None:
            return e.arrival, e.deadline, e.model, e.stream
        return e.arrival[ids], e.deadline[ids], e.model[ids], e.stream[ids]

    def column(self, name: str) -> np.ndarray | None:
        """An optional per-request trace column (``instances``, ``priority``) over all requests, or None."""
        return self._engine.columns.get(name)

    def request(self, rid: int) -> tuple[int, int, int]:
        """(arrival, deadline, model) of request ``rid``."""
        e = self._engine
        return int(e.arrival[rid]), int(e.deadline[rid]), int(e.model[rid])

    def windows(self, epoch_us: int, end_us: int | None = None) -> pl.DataFrame:
        """Per-epoch bad rate, idle fraction, occupancy, active requests so far (:meth:`.Recorder.windows`)."""
        return self._engine.rec.windows(epoch_us, end_us)
