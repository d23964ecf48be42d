"""Optimal offline schedule: the ZILP of Shepherd §5.1, Eq. 3, on discretised time.

Eq. 3 enumerates every batch B ⊆ requests, which is exponential. We solve an
equivalent compact form on a time grid of step Δ:

* y[m,k,t,n] ∈ {0,1}: GPU n starts, at step t, a batch of model m with room
  for k requests (it occupies the GPU for L_m(k) = ⌈ℓ_m(k)/Δ⌉ steps);
* x[r,t,n] ∈ {0,1}: request r is served by the batch starting at (t, n).

Constraints mirror Eq. 3: (a) Σ_{t,n} x[r,t,n] ≤ 1; (b) per GPU and step at
most one batch is running (Σ over batches covering the step ≤ 1); (c) x only
for t ≥ arrival of r; (d) x[r,t,n] ≤ Σ_{k: t+L(k) ≤ deadline(r)} y[m_r,k,t,n],
and Σ_{r of m} x[r,t,n] ≤ Σ_k k·y[m,k,t,n]; (e) binaries. Objective Σ x
(Eq. 3's Σ|B|·I). A batch with fewer requests than its room k runs no longer
than ℓ(k) (ℓ is increasing), so every solution is a real schedule, and every
real schedule with starts on the grid is a solution.

Exactness (documented): when arrivals, deadlines and latencies are multiples
of Δ there is an optimal schedule with grid starts (left-justify it: every
start becomes an arrival or a previous batch's end), so the ZILP gives OPT.
Otherwise latencies are rounded up and starts restricted to the grid, and
the value is a feasible schedule's goodput: a lower bound on OPT. Without
``--time-step-ms`` the grid is the gcd of all times when that keeps the
horizon within 200 steps, else horizon/200 (``exact`` is recorded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mip
import numpy as np

from shepherd.core.errors import UserError
from shepherd.solvers.backend import SolveResult, SolverConfig, new_model, solve

MAX_REQUESTS = 200


@dataclass
class OfflineInstance:
    """Requests (µs) and per-model latency tables lat[b] (µs, lat[0] = 0)."""

    arrival_us: np.ndarray
    deadline_us: np.ndarray
    model: list[str]
    latency_us: dict[str, np.ndarray]
    gpus: int


@dataclass
class OfflineSchedule:
    served: int
    result: SolveResult
    exact: bool  # True when every time is a multiple of Δ (the value is OPT)
    batches: list[dict] = field(default_factory=list)  # gpu, start_us, end_us, model, requests


def solve_offline(inst: OfflineInstance, step_us: int, solver: SolverConfig) -> OfflineSchedule:
    """Maximise requests served by their deadline (Eq. 3) on a Δ = ``step_us`` grid."""
    n_req = len(inst.model)
    if n_req == 0:
        raise UserError("offline-optimal: the trace has no requests")
    if n_req > MAX_REQUESTS:
        raise UserError(f"offline-optimal is for small instances (≤ {MAX_REQUESTS} requests); got {n_req}")
    if inst.gpus < 1:
        raise UserError(f"--gpus must be ≥ 1, got {inst.gpus}")
    if step_us < 1:
        raise UserError("--time-step-ms must be positive")
    t0 = int(inst.arrival_us.min())
    arr = np.ceil((inst.arrival_us - t0) / step_us).astype(int)
    dl = np.floor((inst.deadline_us - t0) / step_us).astype(int)
    lat_steps = {m: np.ceil(lat / step_us).astype(int) for m, lat in inst.latency_us.items()}
    exact = bool(
        np.all((inst.arrival_us - t0) % step_us == 0) and np.all((inst.deadline_us - t0) % step_us == 0)
        and all(np.all(lat % step_us == 0) for m, lat in inst.latency_us.items() if m in set(inst.model))
    )
    by_model: dict[str, list[int]] = {}
    for r, m in enumerate(inst.model):
        by_model.setdefault(m, []).append(r)
    gpus = range(inst.gpus)
    model = new_model(solver, mip.MAXIMIZE, "offline-optimal")
    y: dict[tuple[str, int, int, int], mip.Var] = {}
    cover: dict[tuple[int, int], list[mip.Var]] = {}
    for m, reqs in by_model.items():
        lsteps = lat_steps[m]
        kmax = min(len(reqs), len(lsteps) - 1)
        for k in range(1, kmax + 1):
            for t in range(int(arr[reqs].min()), int(dl[reqs].max()) - int(lsteps[k]) + 1):
                fit = sum(1 for r in reqs if arr[r] <= t and dl[r] >= t + lsteps[k])
                if fit < k:
                    continue  # pruned: no batch of k of m's requests can start at t and meet deadlines
                for n in gpus:
                    var = model.add_var(f"y_{len(y)}", var_type=mip.BINARY)
                    y[m, k, t, n] = var
                    for tau in range(t, t + max(int(lsteps[k]), 1)):
                        cover.setdefault((tau, n), []).append(var)
    at: dict[tuple[str, int, int], list[tuple[int, mip.Var]]] = {}
    for (m, k, t, n), var in y.items():
        at.setdefault((m, t, n), []).append((k, var))
    x: dict[tuple[int, int, int], mip.Var] = {}
    joined: dict[tuple[str, int, int], list[mip.Var]] = {}
    for r, m in enumerate(inst.model):
        mine = []
        for t in range(int(arr[r]), int(dl[r]) - int(lat_steps[m][1]) + 1):
            for n in gpus:
                ok = [v for k, v in at.get((m, t, n), []) if t + lat_steps[m][k] <= dl[r]]
                if ok:
                    var = model.add_var(f"x_{r}_{t}_{n}", var_type=mip.BINARY)
                    x[r, t, n] = var
                    mine.append(var)
                    joined.setdefault((m, t, n), []).append(var)
                    model += var <= mip.xsum(ok)  # (c)+(d): r only in a batch it can wait for
        if mine:
            model += mip.xsum(mine) <= 1  # (a)
    for key, members in joined.items():
        model += mip.xsum(members) <= mip.xsum(k * v for k, v in at[key])
    for vars_ in cover.values():
        if len(vars_) > 1:
            model += mip.xsum(vars_) <= 1  # (b)
    if not x:
        res = SolveResult(solver.name, "optimal", 0.0, 0.0, 0.0, 0.0)
        return OfflineSchedule(0, res, exact, [])
    model.objective = mip.maximize(mip.xsum(x.values()))
    res = solve(model, solver)
    if not res.has_solution:
        return OfflineSchedule(0, res, exact, [])
    batches = []
    for (m, k, t, n), var in sorted(y.items(), key=lambda kv: (kv[0][3], kv[0][2])):
        if res.values.get(var.name, 0.0) > 0.5:
            reqs = sorted(r for r in by_model[m] if (r, t, n) in x and res.values.get(x[r, t, n].name, 0.0) > 0.5)
            if reqs:
                start = t0 + t * step_us
                batches.append({"gpu": n, "start_us": start, "end_us": start + int(inst.latency_us[m][len(reqs)]),
                                "model": m, "requests": reqs})
    served = int(round(res.objective or 0.0))
    return OfflineSchedule(served, res, exact, batches)


def check_schedule(inst: OfflineInstance, batches: list[dict]) -> list[str]:
    """Independent check of a schedule against Eq. 3's constraints (a)–(d) in continuous time."""
    problems = []
    seen: set[int] = set()
    per_gpu: dict[int, list[tuple[int, int]]] = {}
    for b in batches:
        reqs = b["requests"]
        if seen & set(reqs):
            problems.append("(a) a request is served twice")
        seen |= set(reqs)
        end = b["start_us"] + int(inst.latency_us[b["model"]][len(reqs)])
        if any(inst.model[r] != b["model"] for r in reqs):
            problems.append("batch mixes models")
        if any(inst.arrival_us[r] > b["start_us"] for r in reqs):
            problems.append("(c) batch starts before a request arrives")
        if any(inst.deadline_us[r] < end for r in reqs):
            problems.append("(d) batch ends after a deadline")
        per_gpu.setdefault(b["gpu"], []).append((b["start_us"], end))
    for spans in per_gpu.values():
        spans.sort()
        if any(spans[i][1] > spans[i + 1][0] for i in range(len(spans) - 1)):
            problems.append("(b) overlapping batches on one GPU")
    return problems


def grid_step_us(inst: OfflineInstance, step_us: int | None, max_steps: int = 200) -> int:
    """Δ: the given step; else the gcd of all times (exact) if the horizon then has ≤ ``max_steps``
    steps; else ⌈horizon / max_steps⌉ (the ZILP then gives a feasible schedule: a lower bound)."""
    if step_us:
        return int(step_us)
    t0 = int(inst.arrival_us.min())
    values = [int(v) for v in np.concatenate([inst.arrival_us - t0, inst.deadline_us - t0])]
    for m in set(inst.model):
        values += [int(v) for v in inst.latency_us[m][1:]]
    g = 0
    for v in values:
        g = math.gcd(g, v)
    horizon = int(inst.deadline_us.max()) - t0
    coarse = max(1, math.ceil(horizon / max_steps))
    return g if g and g >= coarse else coarse
