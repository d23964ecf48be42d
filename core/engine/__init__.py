"""The discrete-event engine (DESIGN.md "The engine"; the seam: docs/ENGINE.md).

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
    res.windows(1_000_000)   # per-epoch bad rate, idle fraction, occupancy, active requests

``simulate(trace, profiles, policy, config=None, *, gpus | plan | cluster,
router, seed, load, slo_ms, overhead, engine, max_batch, hardware, progress)``
is the one entry point for every policy; a pipeline data plane is
``simulate(trace, block_profiles, "ppipe", plan=pipeline_plan)``.

**The seam.** A policy (``core.policies.base.Policy``) is registered by name
(``core.policies.registry``; third-party packages through the
``shepherd.policies`` entry-point group). It declares the artifact kinds it
``requires`` and builds its tables in ``prepare(inputs, config) -> Runtime``
(:mod:`.inputs`). One instance per serving group is constructed with an
:class:`~.actions.Actions` — everything it may see and call:

* called with: ``on_start(now)``; ``on_arrivals(ts, ds, ms, ss, rs, lo, hi)``
  — a run of this group's arrivals (times, deadlines, model indices, streams,
  request ids), to be handled from ``lo`` while ``ts[i] < act.until``,
  returning the first index not handled (the default calls
  ``on_arrival(now, rid, model, deadline, stream)`` per request);
  ``on_completion(now, worker)``; ``on_timer(now, payload)``; ``on_finish(now)``;
* may call: ``start``, ``book``, ``preempt``, ``busy``, ``running`` (one
  worker); ``allocate``, ``resize`` (several workers); ``book_path`` (a
  reserved path); ``drop``; ``set_timer`` → handle, ``cancel_timer``;
  ``decision_time``; ``add_worker``, ``remove_worker``; ``windows``.

**What the recorder writes** (:mod:`.recorder`, the only writer): per request
start, finish, worker, batch, outcome (served / late / dropped), preemptions;
per batch worker, model, size, start, end, preempted; per allocation segment
batch, worker, start, end; per worker busy and wasted time and lifetime.

Parts, one concept per module: :mod:`.clock` (events, tie order, cancellable
timers, quiet events), :mod:`.resources` (workers and one-worker batches),
:mod:`.allocations` (multi-worker, resizable), :mod:`.paths` (reserved paths),
:mod:`.recorder` + :mod:`.windows` (per-epoch signals), :mod:`.router`,
:mod:`.admission` + :mod:`.overhead` (the scheduler as a single server),
:mod:`.feed` (arrival chunks), :mod:`.loop` (the loop), :mod:`.actions`,
:mod:`.inputs`, :mod:`.config` (``EngineConfig``: every speed switch),
:mod:`.cluster`, :mod:`.result`.
"""

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.clock import ARRIVAL, COMPLETION, TIMER, Clock, Timer
from shepherd.core.engine.cluster import Cluster, Worker, cluster_from_plan, uniform_cluster
from shepherd.core.engine.config import EngineConfig
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.engine.loop import Engine
from shepherd.core.engine.outcomes import DROPPED, LATE, PENDING, SERVED
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.router import ByModel, ByStream, OneGroup, RoundRobinFrontends, Router
from shepherd.core.engine.simulate import prepare_trace, simulate

__all__ = [
    "ARRIVAL", "COMPLETION", "TIMER", "DROPPED", "LATE", "PENDING", "SERVED",
    "Actions", "ByModel", "ByStream", "Clock", "Cluster", "Engine", "EngineConfig", "Inputs", "OneGroup",
    "OverheadConfig", "RoundRobinFrontends", "Router", "Runtime", "SimulationResult", "Timer", "Worker",
    "cluster_from_plan", "prepare_trace", "simulate", "uniform_cluster",
]
