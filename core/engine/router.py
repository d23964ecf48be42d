"""Routers: which serving group (scheduler instance) each request goes to, decided before the backends.

* :class:`ByStream` — a plan's stream → group rows (Shepherd Herd §4, Symphony sub-clusters);
* :class:`ByModel` — a plan's model → group rows;
* :class:`OneGroup` — every request to group 0;
* :class:`RoundRobinFrontends` — ``k`` frontends, each routing its own
  requests round-robin over the groups, independently of the others (Nexus
  with several frontends, Symphony §3.3, Table 2: "a 'frontend' dispatches
  requests to one of 100 'backends' using round robin"). Clients pick a
  frontend uniformly at random; each frontend starts at a random backend.
  With ``k = 1`` every backend gets the same number of requests (±1) in any
  window; with more frontends the per-backend counts fluctuate more.

Routing is computed once, vectorised, before the run (it never depends on
the simulation's state); a router returns the group *position* (index into
``cluster.groups``) of every request.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shepherd.core.engine.cluster import Cluster
from shepherd.core.errors import UserError


class Router:
    """Base class: ``route`` returns each request's group position (module docstring)."""

    def route(self, cluster: Cluster, stream: np.ndarray, models: list[str], model_idx: np.ndarray,
              rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError


class OneGroup(Router):
    def route(self, cluster, stream, models, model_idx, rng):
        if len(cluster.groups) > 1:
            raise UserError("plan has several groups but no stream or model rows to route requests")
        return np.zeros(len(stream), dtype=np.int32)


class ByStream(Router):
    def route(self, cluster, stream, models, model_idx, rng):
        pos = {g: i for i, g in enumerate(cluster.groups)}
        table = cluster.stream_group or {}
        small = len(stream) and 0 <= int(stream.min()) and int(stream.max()) < max(1 << 16, 4 * len(stream))
        uniq = np.flatnonzero(np.bincount(stream)) if small else np.unique(stream)  # small ids: by counting
        missing = [int(s) for s in uniq if int(s) not in table]
        if missing:
            raise UserError(f"plan assigns no group to stream {missing[0]} "
                            f"({len(missing)} stream(s) of the trace are in no group)")
        keys = np.array(sorted(int(s) for s in uniq), dtype=np.int64)
        vals = np.array([pos[table[int(k)]] for k in keys], dtype=np.int32)
        if small:  # a lookup table
            lut = np.zeros(int(keys[-1]) + 1, np.int32)
            lut[keys] = vals
            return lut[stream]
        return vals[np.searchsorted(keys, stream)]


class ByModel(Router):
    def route(self, cluster, stream, models, model_idx, rng):
        pos = {g: i for i, g in enumerate(cluster.groups)}
        table = cluster.model_group or {}
        missing = [m for m in models if m not in table]
        if missing:
            raise UserError(f"plan assigns no group to model '{missing[0]}'")
        per_model = np.array([pos[table[m]] for m in models], dtype=np.int32)
        return per_model[model_idx]


@dataclass(frozen=True)
class RoundRobinFrontends(Router):
    """``k`` independent round-robin frontends (module docstring)."""

    k: int = 1

    def route(self, cluster, stream, models, model_idx, rng):
        if self.k < 1:
            raise UserError(f"the number of frontends must be ≥ 1, got {self.k}")
        n, b = len(stream), len(cluster.groups)
        frontend = rng.integers(0, self.k, n) if self.k > 1 else np.zeros(n, np.int64)
        offset = rng.integers(0, b, self.k)
        # position of each request among its frontend's requests (a stable per-frontend cumulative count)
        order = np.argsort(frontend, kind="stable")
        counts = np.bincount(frontend, minlength=self.k)
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n) - np.repeat(np.cumsum(counts) - counts, counts)
        return ((offset[frontend] + rank) % b).astype(np.int32)


def default_router(cluster: Cluster) -> Router:
    """By stream when the plan has stream rows, else by model, else one group."""
    if cluster.stream_group is not None:
        return ByStream()
    if cluster.model_group is not None:
        return ByModel()
    return OneGroup()
