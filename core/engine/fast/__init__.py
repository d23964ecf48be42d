"""Compiled fast paths (issue 18; DESIGN.md "Two fidelities, one interface"): the reference engine's outcomes,
exactly, from a numba loop over arrays — for the policies and configurations listed here.

``EngineConfig.path = "fast"`` asks for one; :func:`run_fast` writes the run's tables into the reference
engine's recorder, so every table, summary and artifact is built by the same code either way. A policy
(or a configuration of one) without a fast path is a one-line error naming those that have one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from shepherd.core.errors import UserError

#: policies with a fast path, and the configurations it covers (the error names them)
FAST = {"clockwork": "one serving group, one hardware type, urgency=deadline, admission=none, overhead model|none"}


def names() -> list[str]:
    return sorted(FAST)


def check(policy: str, config: Any, overhead: Any, cluster: Any, hardware: list[str]) -> None:
    """A one-line error unless ``policy`` has a fast path for this configuration."""
    if policy not in FAST:
        raise UserError(f"policy '{policy}' has no fast path (--engine fast: {', '.join(names())}); "
                        f"use --engine reference")
    cfg = dataclasses.asdict(config)
    ok = (len(cluster.groups) == 1 and len(hardware) == 1 and cfg.get("urgency") == "deadline"
          and cfg.get("admission") == "none" and overhead.mode in ("model", "none"))
    if not ok:
        raise UserError(f"the fast path of '{policy}' covers {FAST[policy]}; use --engine reference")


def run_fast(engine: Any, runtime: Any, max_batch: int) -> None:
    """Run the group's fast path and write its tables into ``engine``'s recorder."""
    from shepherd.core.engine.fast.clockwork import run_clockwork

    sched = engine.sched[0]
    lat = np.ascontiguousarray(np.array(runtime.lat[0], dtype=np.int64))
    n_workers = len(engine.res.w_group)
    out = run_clockwork(engine.arrival, engine.deadline, engine.model.astype(np.int64), lat, n_workers, max_batch,
                        sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
                        sched.max_lag_ns, engine.config.chunk)
    (r_start, r_finish, r_worker, r_batch, r_outcome, shed, n_shed,
     b_worker, b_model, b_size, b_start, b_end, w_busy) = out
    rec = engine.rec
    rec.r_start[:], rec.r_finish[:], rec.r_worker[:] = r_start, r_finish, r_worker
    rec.r_batch[:], rec.r_outcome[:] = r_batch, r_outcome
    for name, col in (("b_worker", b_worker), ("b_model", b_model), ("b_size", b_size), ("b_start", b_start),
                      ("b_end", b_end), ("b_pre", np.zeros(len(b_worker), np.int64))):
        getattr(rec, name).frombytes(np.ascontiguousarray(col, dtype=np.int64).tobytes())
    rec.w_busy[:] = w_busy.tolist()
    sched.shed = int(n_shed)
    engine.admission.shed_ids.extend(np.flatnonzero(shed).tolist())
