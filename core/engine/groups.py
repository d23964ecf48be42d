"""Independent serving groups simulated apart and merged: the same tables as one loop, byte for byte.

Herd groups (Shepherd §4) and Symphony sub-clusters never interact: disjoint
workers, their own scheduler (its own overhead clock and admission control,
:mod:`.overhead`, :mod:`.admission`), their own requests. In one loop they
still share the clock, so a group's run of arrivals stops at every other
group's event (issue 18: 1.13 arrivals per run at 100 workers). Here each
group runs as its own :class:`~.loop.Engine` — in this process, or in
``EngineConfig.jobs`` worker processes — and the runs are merged.

**Why the merge is exact.** A group's decisions depend only on its own
events, so every request's outcome, start, finish and (mapped) worker are the
single loop's. What the groups share is the *numbering of batches*: a batch
id is the batch's rank in the single loop's global processing order, where
events of equal time and priority run in push (``seq``) order across groups.
Each group run therefore logs, per batch, the *unit* that created it — the
completion of one of its batches, or its arrivals at one time (a group's
arrivals at one time are always handled in one stretch: nothing pushed
during a run can fall at or before the arrival being handled) — and the
completion time it pushed. :func:`replay` re-enacts the single loop's clock
over these logs alone (the same heap order, the same cut of arrival runs at
the next event of any group, stale completions of preempted batches
included), which yields every batch's global id without any policy work.

**What may couple groups** (then the run stays in one loop, silently: same
outcomes either way): the run's one random generator (a policy that draws
from ``act.rng`` — Nexus — would see another stream of numbers), timers,
bookings, multi-worker allocations, reserved paths and workers added or
removed (their events' tie order is not logged), and the ``emulation``
overhead mode (measured, not reproducible). :func:`run_apart` returns None
for these and :func:`~.simulate.simulate` runs the one loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.workers import map_ray, process_pool


class Coupled(Exception):
    """A group run used something that couples it to the other groups (module docstring)."""


@dataclass
class GroupJob:
    """Everything one group's run needs (picklable, for worker processes)."""

    policy: str
    config: Any
    runtime: Any
    models: list[str]
    max_batch: int
    rng_state: dict
    overhead: OverheadConfig
    engine: Any
    group: int
    group_id: int
    arrival: np.ndarray
    deadline: np.ndarray
    model: np.ndarray
    stream: np.ndarray
    columns: dict[str, np.ndarray]
    hardware: list[int]
    nodes: list[int]
    names: list[str]


@dataclass
class GroupRun:
    """What a group run sends back: its recorder's tables and its batch-creation log."""

    r_start: np.ndarray
    r_finish: np.ndarray
    r_worker: np.ndarray
    r_batch: np.ndarray
    r_outcome: np.ndarray
    r_preempt: np.ndarray
    batches: dict[str, np.ndarray]
    w_busy: list[int]
    w_waste: list[int]
    shed: np.ndarray  #: local ids of shed requests
    unit_arrival: np.ndarray  #: per local batch: 1 if made while handling arrivals, 0 by a completion, 2 at start
    unit_key: np.ndarray  #: the arrival time, or the local id of the batch whose completion made it
    pushed_end: np.ndarray  #: the completion time queued when the batch was made (before any preemption)
    stats: dict[str, Any]
    #: the same batch columns as one (9, batches) int64 array — worker, model, size, start, end, preempted,
    #: unit_arrival, unit_key, pushed_end (a compiled run's log, :mod:`.fast.common`); None: built from them
    log: np.ndarray | None = None

    def log_rows(self) -> np.ndarray:
        if self.log is not None:
            return self.log
        b = self.batches
        return np.stack([np.asarray(c, np.int64) for c in (b["worker"], b["model"], b["size"], b["start"],
                                                          b["end"], b["preempted"], self.unit_arrival,
                                                          self.unit_key, self.pushed_end)])


class _Logged:
    """Wraps one group's policy and its start action: logs each batch's creating unit (module docstring)."""

    def __init__(self, policy, res, rec) -> None:
        self.policy, self.res, self.rec = policy, res, rec
        self.phase = 2  # on_start
        self.key = 0
        self.last: dict[int, int] = {}  # worker → its latest batch
        self.unit_arrival: list[int] = []
        self.unit_key: list[int] = []
        self.pushed_end: list[int] = []
        act = policy.act
        start = act.start

        def logged_start(worker, model, rids, now, **kw):
            end = start(worker, model, rids, now, **kw)
            self.unit_arrival.append(self.phase)
            self.unit_key.append(now if self.phase == 1 else self.key)
            self.pushed_end.append(end)
            self.last[worker] = rec.n_batches() - 1
            return end

        def refuse(*_a, **_k):
            raise Coupled()

        act.start = logged_start
        for name in ("book", "allocate", "resize", "book_path", "set_timer", "add_worker", "remove_worker"):
            setattr(act, name, refuse)

    def on_start(self, now):
        self.phase = 2
        self.policy.on_start(now)

    def on_arrivals(self, ts, ds, ms, ss, rs, lo, hi):
        self.phase = 1
        return self.policy.on_arrivals(ts, ds, ms, ss, rs, lo, hi)

    def on_completion(self, now, worker):
        self.phase, self.key = 0, self.last[worker]
        self.policy.on_completion(now, worker)

    def on_timer(self, now, payload):  # pragma: no cover - set_timer refuses first
        raise Coupled()

    def on_finish(self, now):
        self.policy.on_finish(now)

    def stats(self):
        return self.policy.stats()


def run_group(job: GroupJob) -> GroupRun | None:
    """Simulate one group alone; None if it used something that couples groups."""
    import shepherd.core.policies  # noqa: F401 - registers the built-in policies in a fresh process
    from shepherd.core.engine.actions import Actions
    from shepherd.core.engine.loop import Engine
    from shepherd.core.policies import registry

    spec = registry.get(job.policy)
    k = len(job.hardware)
    eng = Engine(job.arrival, job.deadline, job.model, job.stream, None, 1, [0] * k, job.hardware, job.nodes,
                 job.names, job.runtime.lat, job.overhead, job.engine)
    eng.columns.update(job.columns)
    rng = np.random.default_rng()
    rng.bit_generator.state = job.rng_state
    act = Actions(eng, 0, job.group_id, job.runtime, job.models, job.max_batch, rng)
    logged = _Logged(spec.cls(act, job.config), eng.res, eng.rec)
    eng.policies.append(logged)
    try:
        eng.run()
    except Coupled:
        return None
    if rng.bit_generator.state != job.rng_state or len(eng.rec.s_batch):
        return None
    rec = eng.rec
    return GroupRun(rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt,
                    rec.batch_columns(), list(rec.w_busy), list(rec.w_waste),
                    np.frombuffer(eng.admission.shed_ids, np.int64).copy() if len(eng.admission.shed_ids)
                    else np.empty(0, np.int64),
                    np.array(logged.unit_arrival, np.int8), np.array(logged.unit_key, np.int64),
                    np.array(logged.pushed_end, np.int64), logged.stats())


def replay(log: np.ndarray, boff: np.ndarray, arrivals: list[np.ndarray], times: np.ndarray | None = None) -> np.ndarray:
    """The global id of every group's batches, flat (group after group; ``log`` every group's batch log as
    :meth:`GroupRun.log_rows` gives it, concatenated, group ``g`` from column ``boff[g]``): the single loop's
    clock re-enacted over the logs (module docstring; compiled: :mod:`.fast.replay`)."""
    from shepherd.core.engine.fast.replay import replay_ids

    toff = np.concatenate([[0], np.cumsum([len(t) for t in arrivals])]).astype(np.int64)
    if times is None:  # else: the arrivals already concatenated, group after group
        times = np.concatenate(arrivals).astype(np.int64, copy=False) if arrivals else np.empty(0, np.int64)
    return replay_ids(log[6], log[7], log[8], log[5], boff, times, toff)  # raises if a batch is left


def run_apart(jobs_: list[GroupJob], jobs: int, executor: str = "local",
              address: str | None = None) -> list[GroupRun] | None:
    """Every group's run (in ``jobs`` processes when > 1, or as Ray tasks); None if any group is coupled."""
    if executor == "ray":
        runs = map_ray(run_group, jobs_, jobs, address)
    elif jobs > 1 and len(jobs_) > 1:
        with process_pool(min(jobs, len(jobs_))) as pool:
            runs = list(pool.map(run_group, jobs_))
    else:
        runs = [run_group(j) for j in jobs_]
    return None if any(r is None for r in runs) else runs


def merge(engine, runs: list[GroupRun], ids: list[np.ndarray], workers: list[list[int]],
          arrivals: list[np.ndarray], flat: tuple | None = None, times: np.ndarray | None = None,
          inv: np.ndarray | None = None) -> None:
    """Write the group runs' tables into ``engine``'s recorder (global request, worker and batch ids;
    compiled: :func:`.fast.replay.gather`). ``flat``: the runs' request columns (start, finish, worker,
    batch, outcome, preemptions) already concatenated in group order (a fast run writes them so), else
    concatenated here; ``times``: the arrivals concatenated (:func:`replay`); ``inv``: each request's row
    in the concatenated request columns (a fast run has it from :func:`.fast.replay.split`)."""
    from shepherd.core.engine.fast.replay import gather

    n_groups = len(runs)
    logs = [r.log_rows() for r in runs]
    sizes = [lg.shape[1] for lg in logs]
    boff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    log = np.concatenate(logs, axis=1) if logs else np.empty((9, 0), np.int64)
    gid = replay(log, boff, arrivals, times)
    rec = engine.rec
    bgrp = np.repeat(np.arange(n_groups, dtype=np.int64), sizes)
    rows = [len(r) for r in ids]
    rgrp = np.repeat(np.arange(n_groups, dtype=np.int64), rows)
    if inv is None:
        inv = np.full(len(rec.r_start), -1, np.int64)
        inv[np.concatenate(ids).astype(np.int64) if ids else np.empty(0, np.int64)] = np.arange(sum(rows))
    woff = np.concatenate([[0], np.cumsum([len(ws) for ws in workers])]).astype(np.int64)
    wflat = np.concatenate([np.asarray(ws, np.int64) for ws in workers]) if workers else np.empty(0, np.int64)
    if flat is None:
        names = ("r_start", "r_finish", "r_worker", "r_batch", "r_outcome", "r_preempt")
        types = (np.int64, np.int64, np.int32, np.int64, np.int8, np.int16)
        flat = tuple(np.concatenate([np.asarray(getattr(r, k), dt) for r in runs]) if runs else np.empty(0, dt)
                     for k, dt in zip(names, types))
    cols = np.empty((6, len(gid)), np.int64)  # every global id is written (the replay reached them all)
    gather(gid, bgrp, inv, rgrp, woff, wflat, boff, *log[:6], cols, *flat,
           rec.r_start, rec.r_finish, rec.r_worker, rec.r_batch, rec.r_outcome, rec.r_preempt)
    for run, ws, rid in zip(runs, workers, ids):
        for w, busy, waste in zip(ws, run.w_busy, run.w_waste):
            rec.w_busy[w] += busy
            rec.w_waste[w] += waste
        engine.admission.shed_ids.extend(rid[run.shed].tolist())
    rec.set_batches(*cols)
