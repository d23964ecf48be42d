"""HERD's packing repair: a size class's model-streams into its real groups — Shepherd §4 (c).

The class formulation of :mod:`shepherd.solvers.herd` aggregates memory per
group-size class; these helpers place a class's items into its ``count``
groups of ``s`` GPUs each:

* :func:`any_fit` — heaviest item first (GPU demand n, then memory), each into
  an empty group if any, else the least-loaded group with memory room. All
  groups of a class have the same size, so "least loaded" is least demand
  per GPU: this is longest-processing-time-first balancing, and a group's
  demand exceeds the class mean by at most the largest item's n.
* :func:`exact_pack` — an exact bin-packing MIP (memory only) for small classes
  when any-fit fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import mip
import numpy as np

from shepherd.solvers.backend import SolverConfig, new_model, solve

if TYPE_CHECKING:  # pragma: no cover - type hints only (herd imports this module)
    from shepherd.solvers.herd import HerdConfig, HerdInstance

EXACT_PACK_LIMIT = 40  # items per class up to which the exact packing MIP is tried


@dataclass
class Group:
    models: list[int]  # indices into the instance's models
    size: int
    affinity_set: int


def any_fit(inst: HerdInstance, cfg: HerdConfig, s: int, a: int, count: int, items: list[int]) -> list[Group] | None:
    """Place items (heaviest first) into empty, then least-loaded groups with memory room."""
    bins = [Group([], s, a) for _ in range(count)]
    used = np.zeros(count)
    load = np.zeros(count)
    for i in sorted(items, key=lambda k: (-inst.demand[k], -inst.memory_mb[k], k)):
        order = sorted(range(count), key=lambda j: (len(bins[j].models) > 0, load[j], j))
        for j in order:
            if used[j] + inst.memory_mb[i] <= cfg.capacity_mb + 1e-6:
                bins[j].models.append(i)
                used[j] += inst.memory_mb[i]
                load[j] += inst.demand[i]
                break
        else:
            return None
    return [g for g in bins if g.models]


def exact_pack(inst: HerdInstance, cfg: HerdConfig, s: int, a: int, count: int, items: list[int],
               solver: SolverConfig) -> list[Group] | None | bool:
    """Exact packing into ``count`` groups: groups, None (proven impossible) or False (unknown)."""
    if len(items) > EXACT_PACK_LIMIT:
        return False
    exact = SolverConfig(solver.name, min(solver.time_limit_s, 10.0), 0.0, solver.threads)
    model = new_model(exact, mip.MINIMIZE, "pack")
    x = {(i, j): model.add_var(f"p_{i}_{j}", var_type=mip.BINARY) for i in items for j in range(count)}
    for i in items:
        model += mip.xsum(x[i, j] for j in range(count)) == 1
    for j in range(count):
        model += mip.xsum(float(inst.memory_mb[i]) * x[i, j] for i in items) <= cfg.capacity_mb
    model.objective = mip.minimize(mip.xsum(j * x[i, j] for i, j in x))
    res = solve(model, exact)
    if res.status == "infeasible":
        return None
    if not res.has_solution:
        return False
    groups = [Group([i for i in items if res.values[x[i, j].name] > 0.5], s, a) for j in range(count)]
    return [g for g in groups if g.models]
