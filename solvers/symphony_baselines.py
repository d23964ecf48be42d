"""Baselines and instances for Symphony's partitioning MILP — Appendix A.2.

* :func:`random_search` — A.2's random solver: "generate a random partition,
  check it against all the constraints, evaluate using the MILP objective, and
  repeat", keeping the feasible partition with the least objective (4) found
  within the time limit. Each model goes independently to a uniform
  sub-cluster. Deterministic given the seed *and the number of samples drawn*:
  draws come from one seeded stream in fixed-size batches; with
  ``max_samples`` the count is fixed, under a time limit alone it depends on
  machine speed, so the count is recorded.
* :func:`brute_force` — the exact optimum by enumeration (tests, tiny instances).
* :func:`zoo_instance` — A.2's configurations (random zoo variants, exponential rates).
"""

from __future__ import annotations

import math
import time

import numpy as np

from shepherd.core.errors import UserError
from shepherd.solvers.backend import SolveResult
from shepherd.solvers.symphony_partition import (
    PAPER_TIME_LIMIT_S, TOL, Partition, PartitionInstance, objective, verify,
)

RANDOM_BATCH = 128  # random partitions drawn and scored per vectorised step


# --------------------------------------------------------------------------- random search (A.2)

def random_search(inst: PartitionInstance, time_limit_s: float = PAPER_TIME_LIMIT_S, seed: int = 0,
                  max_samples: int | None = None) -> Partition:
    """A.2's random solver: uniform random partitions, keep the feasible one with the least Eq. (4)."""
    inst.validate()
    if not time_limit_s > 0:
        raise UserError(f"time limit must be positive, got {time_limit_s:g}")
    if max_samples is not None and max_samples < 1:
        raise UserError(f"max samples must be ≥ 1, got {max_samples}")
    rng = np.random.default_rng(seed)
    m, l = inst.m, inst.parts
    rbar, sbar, w = inst.mean_rate, inst.mean_static, inst.w
    check_cost = inst.previous is not None and math.isfinite(inst.max_move_cost)
    c = inst.costs() if check_cost else None
    best, best_obj, drawn, feasible = None, math.inf, 0, 0
    start = time.perf_counter()
    while True:
        size = RANDOM_BATCH if max_samples is None else min(RANDOM_BATCH, max_samples - drawn)
        a = rng.integers(0, l, size=(size, m))
        flat = (a + l * np.arange(size)[:, None]).ravel()
        r = np.bincount(flat, np.tile(inst.rate, size), size * l).reshape(size, l)
        s = np.bincount(flat, np.tile(inst.static_mb, size), size * l).reshape(size, l)
        dyn = np.zeros(size * l)
        np.maximum.at(dyn, flat, np.tile(inst.dynamic_mb, size))
        ok = ((r <= inst.rate_cap * (1 + TOL) + TOL).all(axis=1)
              & (s + dyn.reshape(size, l) <= inst.memory_cap_mb * (1 + TOL) + TOL).all(axis=1))
        if check_cost:
            assert c is not None and inst.previous is not None
            rows = np.arange(m)
            moved = a != inst.previous[None, :]
            unload = np.where(inst.previous >= 0, c[rows, np.maximum(inst.previous, 0)], 0.0)
            cost = (moved * (c[rows[None, :], a] + unload[None, :])).sum(axis=1)
            ok &= cost <= inst.max_move_cost * (1 + TOL) + TOL
        obj = np.abs(r - rbar).max(axis=1) + w * np.abs(s - sbar).max(axis=1)
        obj = np.where(ok, obj, np.inf)
        k = int(np.argmin(obj))
        if obj[k] < best_obj:
            best_obj, best = float(obj[k]), a[k].astype(np.int64)
        drawn += size
        feasible += int(ok.sum())
        if time.perf_counter() - start >= time_limit_s or (max_samples is not None and drawn >= max_samples):
            break
    elapsed = time.perf_counter() - start
    if best is not None:
        assert not verify(inst, best)
        result = SolveResult("random", "feasible", objective(inst, best), None, None, elapsed)
    else:
        result = SolveResult("random", "timeout", None, None, None, elapsed)
    return Partition(best, result, "random", samples=drawn, feasible_samples=feasible)


# --------------------------------------------------------------------------- brute force (tests, tiny instances)

def brute_force(inst: PartitionInstance) -> tuple[float, np.ndarray] | None:
    """Exact optimum by enumerating all l^m assignments (tiny instances only)."""
    inst.validate()
    if inst.parts ** inst.m > 2_000_000:
        raise ValueError("instance too large to enumerate")
    grids = np.indices((inst.parts,) * inst.m).reshape(inst.m, -1).T
    best: tuple[float, np.ndarray] | None = None
    for a in grids:
        if verify(inst, a):
            continue
        val = objective(inst, a)
        if best is None or val < best[0] - 1e-12:
            best = (val, a.astype(np.int64))
    return best


# --------------------------------------------------------------------------- A.2 instances

def zoo_instance(m: int, parts: int, seed: int, *, rate_slack: float = 1.5, memory_slack: float = 1.5,
                 zoo: "object | None" = None) -> PartitionInstance:
    """A.2's configurations: m variants of zoo models (random picks), rates i.i.d. exponential (mean 1 req/s).

    The zoo is Symphony Table 1 (``symphony-memory``: the only models with
    static and dynamic memory printed); a "variant" is a specialised copy of
    a model with its memory. Appendix A.2 gives no caps, so (our choice)
    R_max = rate_slack·R̄ and S_max = memory_slack·S̄ + max_i d_i: slack over
    a perfectly balanced partition, the memory cap leaving room for the
    largest dynamic memory (each raised, on tiny instances, to what the largest
    single model needs, so no instance is trivially infeasible).
    """
    if zoo is None:
        from shepherd.core.profiles import read_builtin_raw

        zoo = read_builtin_raw("symphony-memory")
    names = zoo["model"].to_list()  # type: ignore[index]
    static = zoo["static_mb"].to_numpy().astype(float)  # type: ignore[index]
    dynamic = zoo["dynamic_mb"].to_numpy().astype(float)  # type: ignore[index]
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(names), m)
    rate = rng.exponential(1.0, m)
    s, d = static[pick], dynamic[pick]
    return PartitionInstance(
        tuple(f"{names[k]}-v{i}" for i, k in enumerate(pick)), rate, s, d, parts,
        max(memory_slack * s.sum() / parts + d.max(), float((s + d).max())),
        rate_cap=max(rate_slack * rate.sum() / parts, float(rate.max())))
