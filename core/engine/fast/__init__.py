"""Compiled fast paths (issue 18; DESIGN.md "Two fidelities, one interface"): the reference engine's outcomes,
exactly, from a numba loop over arrays — for the policies and configurations listed here.

``EngineConfig.path`` picks the engine: ``"auto"`` (the default) runs a fast path where the policy has one
for the run's configuration and the reference engine otherwise; ``"fast"`` insists (a policy or
configuration without one is a one-line error naming those that have one); ``"reference"`` never uses one.
:func:`run_fast` writes the run's tables into the reference engine's recorder, so every table, summary and
artifact is built by the same code either way.

Serving groups (Herd groups, sub-clusters) never interact: each group's requests run through the kernel
alone, and with several groups the runs are merged by :func:`shepherd.core.engine.groups.merge` — the
kernels log, per batch, the unit that made it, and the compiled clock replay numbers the batches as the
single loop would. Shared kernel parts: :mod:`.common`; the kernels: :mod:`.clockwork`, :mod:`.flex`,
:mod:`.symphony` (one serving group: its timers are not in the clock replay).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from shepherd.core.errors import UserError

#: policies with a fast path, and the configurations it covers (the error names them)
FAST = {
    "clockwork": "urgency=deadline, admission=none, schedule_ahead_ms=0, slo_buffer_ms=0, one hardware type per "
                 "serving group, overhead model|none",
    "flex": "overhead model|none",
    "flex-np": "overhead model|none",
    "symphony": "d_ctrl_us=0, d_data_us=0, autoscale_epoch_s=0 (any rule, prune, rank, rate_window_ms), one "
                "serving group, overhead model|none",
    "symphony-wc": "d_ctrl_us=0, d_data_us=0, autoscale_epoch_s=0 (any rule, prune, rank, rate_window_ms), one "
                   "serving group, overhead model|none",
}


def names() -> list[str]:
    return sorted(FAST)


def why_not(policy: str, config: Any, overhead: Any, engine: Any) -> str | None:
    """Why ``policy`` has no fast path for this configuration (one line), or None if it has one."""
    if policy not in FAST:
        return f"policy '{policy}' has no fast path (--engine fast: {', '.join(names())}); use --engine reference"
    ok = overhead.mode in ("model", "none")
    if policy == "clockwork":
        cfg = dataclasses.asdict(config)
        hws = engine.res.w_hw
        one_hw = all(len({hws[w] for w in ws}) <= 1 for ws in engine.res.group_workers)
        ok = (ok and cfg.get("urgency") == "deadline" and cfg.get("admission") == "none" and one_hw
              and cfg.get("schedule_ahead_ms") == 0 and cfg.get("slo_buffer_ms") == 0)
    if policy in ("symphony", "symphony-wc"):
        ok = (ok and config.d_ctrl_us == 0 and config.d_data_us == 0 and config.autoscale_epoch_s == 0
              and len(engine.feeds) == 1)
    if not ok:
        return f"the fast path of '{policy}' covers {FAST[policy]}; use --engine reference"
    return None


def _group(policy: str, config: Any, runtime: Any, max_batch: int, sched: Any, chunk: int, lat: np.ndarray,
           w_hw: np.ndarray, t: np.ndarray, d: np.ndarray, m: np.ndarray, out: tuple) -> tuple:
    """One group's kernel run; the request columns in ``out`` are written in place."""
    common = (sched.decision_ns, sched.per_request_ns, sched.arrival_ns, sched.active, sched.admit,
              sched.max_lag_ns, chunk)
    if policy in ("symphony", "symphony-wc"):
        from shepherd.core.engine.fast.symphony import run_group

        return run_group(policy, config, runtime, max_batch, common, lat, w_hw, t, d, m, out)
    if policy == "clockwork":
        from shepherd.core.engine.fast.clockwork import run_clockwork

        r_start, r_finish, r_worker, r_batch, r_outcome, _, shed = out
        return run_clockwork(t, d, m, lat, w_hw, max_batch, *common, r_start, r_finish, r_worker, r_batch,
                             r_outcome, shed)
    from shepherd.core.engine.fast.flex import run_flex
    from shepherd.core.policies.flex import DEFAULT_EXIT_POINTS

    exits = np.array([config.exit_points or e or DEFAULT_EXIT_POINTS
                      for e in (runtime.exit_points or [0] * lat.shape[1])], np.int64)
    return run_flex(t, d, m, lat, w_hw, max_batch, float(config.lam), bool(config.preemption), exits, *common,
                    *out)


def run_fast(engine: Any, policy: str, config: Any, runtime: Any, max_batch: int) -> list[dict] | None:
    """Run the policy's fast path on every serving group and write the tables into ``engine``'s recorder;
    returns the policy's counters per group where its kernel keeps them (Symphony's), else None."""
    from shepherd.core.engine import groups
    from shepherd.core.engine.outcomes import DROPPED  # noqa: F401 - the kernels' outcome codes

    if not len(engine.arrival):  # nothing to run: Symphony's counters are zero, as the reference reports them
        if policy in ("symphony", "symphony-wc"):
            from shepherd.core.engine.fast.symphony import COUNTERS

            return [dict.fromkeys(COUNTERS, 0) for _ in engine.feeds]
        return None

    lat = np.ascontiguousarray(np.array(runtime.lat, dtype=np.int64))
    rec, res = engine.rec, engine.res
    model = engine.model.astype(np.int64, copy=False)
    n_groups = len(engine.feeds)
    if n_groups == 1 and engine.group_ids[0] is None:  # the recorder's own columns, written in place
        shed = np.zeros(len(engine.arrival), np.bool_)
        out = (rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt, shed)
        blog, w_busy, w_waste, n_shed, *stats = _group(policy, config, runtime, max_batch, engine.sched[0],
                                                       engine.config.chunk, lat, np.array(res.w_hw, np.int64),
                                                       engine.arrival, engine.deadline, model, out)
        for name, col in zip(("b_worker", "b_model", "b_size", "b_start", "b_end", "b_pre"), blog.T[:6]):
            getattr(rec, name).frombytes(np.ascontiguousarray(col).tobytes())
        rec.w_busy[:] = w_busy.tolist()
        rec.w_waste[:] = w_waste.tolist()
        engine.sched[0].shed = int(n_shed)
        engine.admission.shed_ids.frombytes(np.flatnonzero(shed).astype(np.int64).tobytes())
        return stats or None
    runs, ids, arrivals = [], [], []
    for g in range(n_groups):
        rid = engine.group_ids[g]
        rid = np.arange(len(engine.arrival), dtype=np.int64) if rid is None else rid
        k = len(rid)
        out = (np.full(k, -1, np.int64), np.full(k, -1, np.int64), np.full(k, -1, np.int32),
               np.full(k, -1, np.int64), np.zeros(k, np.int8), np.zeros(k, np.int16), np.zeros(k, np.bool_))
        t = engine.arrival[rid]
        blog, w_busy, w_waste, n_shed = _group(policy, config, runtime, max_batch, engine.sched[g],
                                               engine.config.chunk, lat,
                                               np.array([res.w_hw[w] for w in res.group_workers[g]], np.int64),
                                               t, engine.deadline[rid], model[rid], out)
        engine.sched[g].shed = int(n_shed)
        cols = blog.T
        runs.append(groups.GroupRun(
            *out[:6], {"worker": cols[0], "model": cols[1], "size": cols[2], "start": cols[3], "end": cols[4],
                       "preempted": cols[5]},
            w_busy.tolist(), w_waste.tolist(), np.flatnonzero(out[6]).astype(np.int64),
            cols[6].astype(np.int8), cols[7].copy(), cols[8].copy(), {}))
        ids.append(rid)
        arrivals.append(t)
    groups.merge(engine, runs, ids, [list(ws) for ws in res.group_workers], arrivals)
    return None
