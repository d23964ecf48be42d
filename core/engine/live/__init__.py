"""Live execution: the same policies serving a trace in real time on real PyTorch workers.

:func:`run_live` is :func:`~shepherd.core.engine.simulate.simulate` with the
live engine (:mod:`.engine`) in place of the discrete-event loop: the policy
objects, their ``prepare`` and their :class:`~shepherd.core.engine.actions.Actions`
are the reference ones (no policy code is copied); the Clock is the wall clock
and started batches run on worker processes (:mod:`.pool`, :mod:`.worker`),
one per serving worker, each pinned to one core with one PyTorch thread.
The result is a :class:`~shepherd.core.engine.result.SimulationResult` whose
tables are the simulator's, with ``extra["engine"] == "live"``, the decision
log (:func:`decisions_frame`; replayable in the simulator, :mod:`.replay`),
the policy's handler times and any worker failure.

Needs no GPU: the workers run on CPU cores (``torch`` is the optional extra).

A live run fails loudly, never quietly as a simulator error: a policy the
live engine cannot run, an empty trace or too many workers is refused before
any process starts (:func:`check_live_run`); a worker that cannot start is a
one-line :class:`~shepherd.core.errors.UserError`; a worker or the sender lost
mid-run raises :class:`LiveRunFailed` (its partial result attached). A run
whose worker waited for its core (:data:`CORE_WAIT_LIMIT`) measured the
machine's other load as well: :func:`core_wait_warning` says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from shepherd.core.bounds import check_bound
from shepherd.core.engine.config import EngineConfig
from shepherd.core.engine.live.engine import LiveEngine
from shepherd.core.engine.live.pool import Pool
from shepherd.core.engine.live.resources import ACTIONS
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.engine.result import SimulationResult
from shepherd.core.engine.simulate import prepare_trace, simulate
from shepherd.core.errors import UserError
from shepherd.core.measure import need_torch
from shepherd.core.policies import registry

DEFAULT_DRAIN_S = 10.0  #: how long a run may go on after the last arrival before it ends with what it has
#: the share of its batches' wall time a worker may spend waiting for its core (other processes on it) before
#: a run's timings are said to measure the machine's load too (≈ 0 on a quiet machine; 0.28–0.39 measured on
#: a 2-core machine at load 10–13, docs/VALIDATION.md)
CORE_WAIT_LIMIT = 0.05
#: the only input a policy may require to run live: whole-model latency profiles (batches on one worker)
LIVE_INPUTS = ("profiles",)


class LiveRunFailed(UserError):
    """A live run that lost a worker or the sender: its tables measure the failure, not the serving.

    ``result`` is the partial :class:`SimulationResult` (what the run had when it ended), for inspection;
    it must not be compared with a simulation."""

    def __init__(self, message: str, result: SimulationResult) -> None:
        super().__init__(message)
        self.result = result


def live_policies() -> list[str]:
    """The registered policies the live engine can run (those needing only :data:`LIVE_INPUTS`)."""
    return [n for n in registry.names() if set(registry.get(n).cls.requires) <= set(LIVE_INPUTS)]


def check_live_policy(policy: str) -> None:
    """Refuse (one line) a policy the live engine cannot run: one that needs more than whole-model
    profiles (PPipe's and Reactive's pipeline plans, Accordion's per-layer profiles and multi-worker
    allocations). Called before any process starts."""
    need = [k for k in registry.get(policy).cls.requires if k not in LIVE_INPUTS]
    if need:
        raise UserError(f"policy '{policy}' cannot run in live mode (shepherd validate): the live engine runs "
                        f"whole-model batches, one worker each, and {policy} needs {', '.join(need)}; "
                        f"live mode runs {', '.join(live_policies())}")


def check_live_run(trace: pl.DataFrame, policy: str, workers: int) -> None:
    """Everything a live run can refuse before it starts a process (module docstring)."""
    check_bound("live_workers", workers, "live workers")
    check_live_policy(policy)
    if trace.height == 0:
        raise UserError("a live run needs at least one request; the trace has none")


def core_wait_warning(share: float, limit: float | None = None) -> str | None:
    """One line when the workers waited for their cores more than ``limit`` (default :data:`CORE_WAIT_LIMIT`)
    of their batch time, else None."""
    limit = CORE_WAIT_LIMIT if limit is None else limit
    if not share > limit:  # NaN (no batch ran) is no warning
        return None
    return (f"the live workers waited for their cores {share:.1%} of their batch time (more than {limit:.0%}): "
            "other processes shared those cores, so the live timings (and the error) include the machine's "
            "load; run on a quieter machine")


def run_live(trace: pl.DataFrame, profiles: pl.DataFrame, policy: str, config: Any = None, *, workers: int = 1,
             seed: int = 0, load: float = 1.0, slo_ms: float | None = None, max_batch: int = 8,
             hardware: str | None = None, cores: list[int] | None = None, drain_s: float = DEFAULT_DRAIN_S,
             kill_at: tuple | None = None, progress: Any = None) -> SimulationResult:
    """Serve ``trace`` live with ``policy`` on ``workers`` worker processes (module docstring).

    The trace's model names are zoo names (:func:`shepherd.core.measure.zoo.build`, e.g.
    ``ResNet18@64``), the same names ``profile --measure`` writes. ``kill_at`` = (worker, seconds[, signal]) kills
    that worker (the sender for a negative one) at that time, or sends it ``signal`` (SIGSTOP: a stopped worker)
    (the failure tests). Raises :class:`LiveRunFailed` when a worker or the sender
    died or failed during the run.
    """
    check_live_run(trace, policy, workers)
    need_torch()
    prepared = prepare_trace(trace, load, slo_ms)
    models = sorted(prepared["model"].unique().to_list())
    pool = Pool(workers, models, max_batch, cores)
    made: list[LiveEngine] = []

    def factory(*args: Any, **kw: Any) -> LiveEngine:
        eng = LiveEngine(pool, drain_s, *args, **kw)
        eng.kill_at = kill_at
        made.append(eng)
        return eng

    try:
        pool.start()
        result = simulate(trace, profiles, policy, config, gpus=workers, seed=seed, load=load, slo_ms=slo_ms,
                          overhead=OverheadConfig(mode="none"), engine=EngineConfig(path="reference"),
                          max_batch=max_batch, hardware=hardware, progress=progress, engine_factory=factory)
    finally:
        pool.close()
    eng = made[0]
    result.extra.update(engine="live", live={
        "failures": list(eng.failures), "ended_by": eng.ended_by, "workers": workers,
        "worker_cores": pool.worker_cores, "engine_core": pool.engine_core, "shared_cores": pool.shared_cores,
        "models": models})
    if eng.failures:
        raise LiveRunFailed(f"the live run failed: {'; '.join(eng.failures)}; a failed run is not compared with "
                            "the simulator", result)
    return result


def decisions_frame(result: SimulationResult) -> pl.DataFrame:
    """The live run's decisions in order: when (µs, wall clock), which action, worker, model, request ids."""
    rows = result.engine.res.decisions
    return pl.DataFrame({
        "decided_us": np.array([r[0] for r in rows], np.int64),
        "action": pl.Series([ACTIONS[r[1]] for r in rows], dtype=pl.String),
        "worker": np.array([r[2] for r in rows], np.int32),
        "model": np.array([r[3] for r in rows], np.int32),
        "requests": pl.Series([list(r[4]) for r in rows], dtype=pl.List(pl.Int64)),
    })

