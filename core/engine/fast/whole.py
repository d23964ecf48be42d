"""The ``whole`` mode of the fast wing (:mod:`.`): a kernel over the whole trace of the run's one serving
group, writing the recorder's columns in place.

A kernel module of this mode provides ``run_group(params, make_policy, runtime, max_batch, common, lat, w_hw,
t, d, m, out)``: ``common`` the scheduler clock's constants, ``out`` the request columns it writes (start,
finish, worker, batch, outcome, preemptions, shed); it returns (batch log, per-worker busy and wasted time,
shed count, the policy's counters).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import numpy as np

from shepherd.core.engine.fast.common import B_END, B_MODEL, B_PRE, B_SIZE, B_START, B_WORKER


def run(engine: Any, module: str, params: Any, runtime: Any, max_batch: int,
        make_policy: Callable[[int], Any] | None) -> list[dict]:
    """The kernel of ``module`` over the whole trace of the one serving group, writing the recorder's columns
    in place; returns the policy's counters. ``make_policy(g)`` builds group ``g``'s policy object as the
    reference would (a kernel that plans with it)."""
    lat = np.ascontiguousarray(np.array(runtime.lat, dtype=np.int64))
    rec, sched = engine.rec, engine.sched[0]
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, engine.config.chunk)
    shed = np.zeros(len(engine.arrival), np.bool_)
    out = (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt, shed)
    w_hw = np.array(engine.res.w_hw, np.int64)
    # one compiled signature: a trace read from a file hands read-only columns, which numba types apart (a
    # second ~40 s compile); a copy of those
    t, d = (np.require(col, np.int64, ["C", "W"]) for col in (engine.arrival, engine.deadline))
    m = np.require(engine.model, np.int64, ["C", "W"])
    blog, w_busy, w_waste, n_shed, stats = importlib.import_module(module).run_group(
        params, make_policy, runtime, max_batch, common, lat, w_hw, t, d, m, out)
    for name, c in (("b_worker", B_WORKER), ("b_model", B_MODEL), ("b_size", B_SIZE), ("b_start", B_START),
                    ("b_end", B_END), ("b_pre", B_PRE)):
        getattr(rec, name).frombytes(np.ascontiguousarray(blog[c]).tobytes())
    rec.w_busy[:] = w_busy.tolist()
    rec.w_waste[:] = w_waste.tolist()
    sched.shed = int(n_shed)
    engine.admission.shed_ids.frombytes(np.flatnonzero(shed).astype(np.int64).tobytes())
    return [stats]
