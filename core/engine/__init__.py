"""The discrete-event engine (DESIGN.md "The engine").

Programmatic API — what planners, experiments and the CLI call::

    from shepherd.core.engine import simulate
    from shepherd.core.profiles import load_builtin
    from shepherd.traces.synthetic import two_stream

    res = simulate(two_stream(slo_ms=90), load_builtin("shepherd-v100"), "flex", gpus=1, seed=0)
    res.good                 # requests served by their deadline
    res.requests_frame()     # per-request table  (artifact kind "requests")
    res.batches_frame()      # per-batch table    (kind "batches")
    res.workers_frame()      # per-worker busy / wasted time (kind "workers")
    res.summary_frame()      # one-row summary    (kind "summary", core.metrics)

``simulate(trace, profiles, policy, config=None, *, gpus=N | plan=frame |
cluster=Cluster, seed, load, slo_ms, overhead, max_batch, hardware, progress)``:

* ``trace`` — a trace frame (``core.artifacts`` kind "trace"); ``profiles`` — a
  profiles frame (``core.profiles.load_builtin`` or a profiles artifact).
* ``policy`` — a registered name (``core.policies.registry.names()``:
  flex, flex-np, clockwork, nexus); ``config`` — its typed config dataclass,
  a dict of its fields, or None for the defaults.
* the cluster — ``gpus`` identical workers in one serving group, or a plan
  frame (kind "plan": rows group/role/name, ``hardware`` on worker rows; one
  scheduler instance per group; requests routed by stream rows, else by model
  rows; a stream in no group is an error), or a ready :class:`Cluster`.
* ``overhead`` — the scheduler-overhead model (:class:`OverheadConfig`,
  default: the policy's own, deterministic ``model`` mode).

Building blocks: :mod:`.events` (heap, tie order, quiet events), :mod:`.loop`
(engine state, the loop, drop/timer actions), :mod:`.started` (a worker's
current batch: start, preempt, complete), :mod:`.reserved` (batches a reserving
policy scheduled exactly: ``book_path`` — engine-executed — and
``record_batch``/``record_path``), :mod:`.feed` (arrival chunks),
:mod:`.context` (``GroupContext``), :mod:`.outcomes`, :mod:`.cluster`
(workers, groups, routing), :mod:`.overhead` (the scheduler as a single server),
:mod:`.admission` (shedding what an overloaded scheduler cannot take), :mod:`.result`.
"""

from shepherd.core.engine.cluster import Cluster, Worker, cluster_from_plan, uniform_cluster
from shepherd.core.engine.events import ARRIVAL, COMPLETION, TIMER, EventQueue
from shepherd.core.engine.loop import DROPPED, LATE, PENDING, SERVED, Engine, GroupContext
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.simulate import prepare_trace, simulate

__all__ = [
    "ARRIVAL", "COMPLETION", "TIMER", "DROPPED", "LATE", "PENDING", "SERVED",
    "Cluster", "Engine", "EventQueue", "GroupContext", "OverheadConfig", "SimulationResult",
    "Worker", "cluster_from_plan", "prepare_trace", "simulate", "uniform_cluster",
]
