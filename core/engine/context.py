"""What a policy instance sees of its serving group (one :class:`GroupContext` per group)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from shepherd.core.engine.loop import Engine


@dataclass
class GroupContext:
    """What a policy instance sees of its serving group."""

    engine: "Engine"
    group: int  # index into engine groups
    group_id: int  # the plan's group label
    workers: list[int]  # global worker ids
    hardware: list[int]  # hardware index of each worker (aligned with ``workers``)
    lat: list[list[list[int]]]  # lat[hardware][model][batch] in µs, batch 0…max_batch
    models: list[str]
    exit_points: list[int]  # per model (Shepherd Table 4); 0 where unknown
    max_batch: int
    rng: np.random.Generator
    request_ids: np.ndarray | None  # this group's global request ids (None: all)

    def arrivals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(arrival_us, deadline_us, model, stream) of this group's requests, numpy."""
        e, ids = self.engine, self.request_ids
        if ids is None:
            return e.arrival, e.deadline, e.model, e.stream
        return e.arrival[ids], e.deadline[ids], e.model[ids], e.stream[ids]
