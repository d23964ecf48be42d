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
single loop's. Batch ids are a join key: every run numbers its batches by one
canonical key at its end (start, worker, the worker's own sequence:
:meth:`.recorder.Recorder.canonical_batch_ids`), so the merge concatenates
the groups' batch tables (group after group, ids offset) and the final
renumbering gives the single loop's ids — a sort, not a re-enactment of the
clock (issue 30 item 1).

**What may couple groups** (then the run stays in one loop, silently: same
outcomes either way): the run's one random generator (a policy that draws
from ``act.rng`` — Nexus — would see another stream of numbers), timers,
bookings, multi-worker allocations, reserved paths and workers added or
removed (kept in one loop, as before canonical ids: the merge carries no
segments or added workers, and timers were not re-examined), and the
``emulation`` overhead mode (measured, not reproducible). :func:`run_apart` returns None
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
    """What a group run sends back: its recorder's tables (local worker and batch ids)."""

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
    stats: dict[str, Any]


class _Logged:
    """Wraps one group's policy: whatever couples groups (module docstring) raises :class:`Coupled`."""

    def __init__(self, policy) -> None:
        self.policy = policy

        def refuse(*_a, **_k):
            raise Coupled()

        for name in ("book", "allocate", "resize", "book_path", "set_timer", "add_worker", "remove_worker"):
            setattr(policy.act, name, refuse)

    def on_start(self, now):
        self.policy.on_start(now)

    def on_arrivals(self, ts, ds, ms, ss, rs, lo, hi):
        return self.policy.on_arrivals(ts, ds, ms, ss, rs, lo, hi)

    def on_completion(self, now, worker):
        self.policy.on_completion(now, worker)

    def on_timer(self, now, payload):  # pragma: no cover - set_timer refuses first
        raise Coupled()

    def on_finish(self, now):
        self.policy.on_finish(now)

    def stats(self):
        return self.policy.stats()


def run_group(job: GroupJob) -> GroupRun | None:
    """Simulate one group alone; None if it used something that couples groups."""
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
    logged = _Logged(spec.cls(act, job.config))
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
                    else np.empty(0, np.int64), logged.stats())


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


def merge(engine, runs: list[GroupRun], ids: list[np.ndarray], workers: list[list[int]]) -> None:
    """Write the group runs' tables into ``engine``'s recorder: each request's row at its global id, workers
    mapped to their global ids, the batch tables concatenated group after group (each group's batch ids
    offset by the batches before it); the run's end numbers the batches canonically (module docstring)."""
    rec = engine.rec
    sizes = [len(r.batches["worker"]) for r in runs]
    boff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bworker = []
    for g, (run, rid, ws) in enumerate(zip(runs, ids, workers)):
        wmap = np.append(np.asarray(ws, np.int64), -1)  # local worker -1 (never served): -1
        worker, batch = np.asarray(run.r_worker, np.int64), np.asarray(run.r_batch, np.int64)
        rec.r_start[rid], rec.r_finish[rid] = run.r_start, run.r_finish
        rec.r_worker[rid] = wmap[worker]
        rec.r_batch[rid] = np.where(batch >= 0, batch + boff[g], -1)
        rec.r_outcome[rid], rec.r_preempt[rid] = run.r_outcome, run.r_preempt
        bworker.append(wmap[np.asarray(run.batches["worker"], np.int64)])
        for w, busy, waste in zip(ws, run.w_busy, run.w_waste):
            rec.w_busy[w] += busy
            rec.w_waste[w] += waste
        engine.admission.shed_ids.extend(rid[run.shed].tolist())
    cols = [np.concatenate(bworker) if runs else np.empty(0, np.int64)]
    cols += [np.concatenate([np.asarray(r.batches[k], np.int64) for r in runs]) if runs else np.empty(0, np.int64)
             for k in ("model", "size", "start", "end", "preempted")]
    rec.set_batches(*cols)
