"""PPipe's data plane: resource-reservation-based adaptive batching (PPipe §5.4, Appendix A.3 Algorithm 1).

One scheduler serves every DNN (one serving group); each DNN has a FIFO queue
and the pooled pipelines the plan gave it. Whenever a DNN's queue changes
(an arrival, a wake-up) Algorithm 1 runs:

1. *choose the pooled pipeline* — ``probe(p, p.bs)`` for each of the DNN's
   pipelines; keep the one with the least waiting time (lines 4–8);
2. *choose the path and batch size* — from ``p.bs`` down to 1, the first
   ``probe`` whose finish time meets the oldest request's deadline (9–14);
3. *drop / wait / dispatch* — no batch size works: drop the oldest request
   and start over; fewer requests queued than the batch size: wait "till the
   requests in q are about to miss their deadline" (a timer at
   ``deadline(q[0]) − (finish − now)``, the last moment the probed batch still
   fits; at that moment the queued requests go as a smaller batch); else
   ``reserve`` the path and dispatch the first ``bs`` requests (15–21).

Execution: each stage's reserved GPU interval becomes an engine batch booked
at dispatch (``act.book_path``): it runs over its reserved interval, its
completion is an event (a quiet one: this policy needs no ``on_completion``)
at which the engine checks that the vGPU was not double-booked and writes the
outcomes of the last stage, so the engine's own
clock and outcome arrays check the reservations: with execution matching the
profile every dispatched request finishes by its deadline. (Stages are booked
rather than started by a timer at their reserved time: Algorithm 2 may
reserve a later batch into a gap *before* one already reserved on the same
vGPU, so the reserved start is final at dispatch and the vGPU's order of
batches is the reservation table's, not the dispatch order.) Feedback
correction (§5.4) is not needed in that case and not modelled.
``EngineConfig(reserved="record")`` has the engine record each path at
dispatch instead: the same outcomes with no event per stage — the fast
fidelity, checked against the reference by ``tests/test_ppipe_dataplane.py``
(a speed switch of the engine, not of this policy); in that mode a run goes by
default to the compiled fast path (``core/engine/fast/ppipe.py``: this
policy re-enacted over arrays, identical tables, ``tests/test_engine_fast_ppipe.py``),
so a change here needs the same change there. Waiting-state
arrivals that cannot complete a batch skip re-probing until the timer (documented shortcut; Algorithm 1 would
re-probe and reach the same wait unless another DNN booked shared links).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.fastpath import ENGINE, FastPath, one_group
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.pipelines.reservations import PipeRuntime, Reservations, probe, probe_scored, reserve
from shepherd.core.policies.base import Policy
from shepherd.core.policies.registry import register
from shepherd.core.rules.ppipe import admit_from, fill_wake, wait_until


@dataclass(frozen=True)
class PPipeDataPlaneConfig:
    """PPipe data-plane options (the pipelines come from the plan: ``prepare``).

    The defaults are the paper's rules; ``--rules artifact`` sets the six
    rule switches to the authors' simulator's (:mod:`shepherd.core.pipelines.rules`).
    """

    wait: bool = True  #: wait-till-last-moment for a full batch (Algorithm 1 line 17)
    #: (a) artifact simulator: a non-last stage's GPU is scored by max(GPU finish, its server uplink's
    #: last reservation); paper (Algorithm 2): by the GPU finish only
    uplink_score: bool = False
    #: (b) artifact load balancer: a request that becomes the head is dropped unless a batch of
    #: round(0.95·bs) … bs (in practice the planned bs) still meets its deadline; once admitted it is
    #: served as the paper's rule does (the largest batch ≤ bs that meets it, else dropped). Paper
    #: (Algorithm 1 lines 9–14): every head goes straight to the shrinking from bs down to 1
    head_drop: bool = False
    #: (c) artifact network model: every last-stage vGPU has its own receive link; paper (§4 C3):
    #: one NIC per server, shared by its GPUs
    slot_receive: bool = False
    #: (d) artifact simulator: every stage of every pipeline has servers (links) of its own, each
    #: ``max(per-server GPUs of its type, of the next stage's) × k`` of its vGPUs; paper (§7.1): the
    #: plan's GPUs packed on the cluster's servers by type (stages, pipelines and DNNs share NICs)
    stage_servers: bool = False
    #: (e) artifact load balancer: a queue shorter than the batch size waits until one more request
    #: would miss the head's deadline even on an idle pipeline (``deadline − work(len(q)+1) + 1``),
    #: re-decides at every arrival and at that wake-up (the largest batch meeting the deadline, sent
    #: once that many are queued, else wait again); paper (Algorithm 1 line 17): wake at the last moment
    #: the probed batch fits (``deadline − (finish − now)``) and send what is queued
    fill_wait: bool = False
    #: (f) artifact network model: a batch of b takes b × (the per-request transfer rounded to the nearest
    #: µs); paper (§5.4 "network transfer time"): ceil(b × per-request transfer) µs
    transfer_round: bool = False


def _verify_workload(seed: int) -> dict:
    """``shepherd verify ppipe``'s workload ``seed`` (seeded synthetic plans and traces)."""
    from shepherd.core.pipelines.synthetic import workload

    return workload(seed)


@register("ppipe", PPipeDataPlaneConfig)
class PPipePolicy(Policy):
    """PPipe data plane: probe/reserve adaptive batching over pooled pipelines (§5.4)."""

    requires = ("pipeline_plan", "block_profiles")
    default_overhead = OverheadConfig(mode="none")
    fast_path = FastPath(
        "engine", "shepherd.core.engine.fast.ppipe",
        covers="any wait and rule switches (uplink_score, head_drop, slot_receive, stage_servers, fill_wait, "
               "transfer_round), one serving group, overhead none",
        covered=lambda cfg, shape: shape.overhead.mode == "none" and one_group(shape),
        counters=("probes", "dispatched"),
        mirrors=ENGINE + ("shepherd.core.engine.paths", "shepherd.core.pipelines.reservations",
                          "shepherd.core.pipelines.table", "shepherd.core.pipelines.runtime"),
        workloads=lambda seed: _verify_workload(seed))

    @classmethod
    def prepare(cls, inputs: Inputs, config: PPipeDataPlaneConfig) -> Runtime:
        from shepherd.core.pipelines.runtime import prepare_pipelines  # (imports the engine: not at module level)

        return prepare_pipelines(inputs, slot_receive=config.slot_receive, stage_servers=config.stage_servers,
                                 transfer_round=config.transfer_round)

    def __init__(self, act: Actions, config: PPipeDataPlaneConfig) -> None:
        super().__init__(act, config)
        n_models = len(act.models)
        tables = act.runtime.tables
        self.res = Reservations(len(act.nodes), max(tables["nodes"], 1), index=act.engine_config.pool_index)
        self.pipes: list[list[PipeRuntime]] = [[] for _ in range(n_models)]
        for p in tables["pipelines"]:
            self.pipes[p.model].append(p)
        self.queue: list[deque[tuple[int, int]]] = [deque() for _ in range(n_models)]
        self.wait_until = [-1] * n_models  # a wake-up is set; skip probing before it
        self.wait_need = [0] * n_models
        self.admitted = [-1] * n_models  # rule (b): the request id of the head admitted last
        self.probes = 0
        self.dispatched = 0
        if config.uplink_score:  # rule (a): the scored plain scan (bound unused: it answers in full)
            scored = probe_scored
            self.probe = lambda r, p, b, t, bound=0: scored(r, p, b, t, True)
        else:
            self.probe = probe

    # ------------------------------------------------------------------ events

    def on_arrivals(self, ts: list[int], ds: list[int], ms: list[int], ss: list[int],
                    rs: list[int], lo: int, hi: int) -> int:
        act = self.act
        until = act.until
        queue, wait_until, wait_need = self.queue, self.wait_until, self.wait_need
        i = lo
        while i < hi:
            t = ts[i]
            if t >= until:
                return i
            m = ms[i]
            q = queue[m]
            q.append((rs[i], ds[i]))
            if not (t < wait_until[m] and len(q) < wait_need[m]):
                self.schedule(m, t)
                until = act.until  # an action may have ended the run earlier
            i += 1
        return hi

    def on_timer(self, now: int, payload: Any) -> None:
        m = payload  # a wait-till-last-moment wake-up of DNN m's queue
        if self.wait_until[m] == now:
            self.wait_until[m] = -1
            self.schedule(m, now, last_moment=not self.config.fill_wait)

    def stats(self) -> dict[str, Any]:
        return {"probes": self.probes, "dispatched": self.dispatched}

    # ------------------------------------------------------------------ Algorithm 1

    def schedule(self, m: int, now: int, last_moment: bool = False) -> None:
        q = self.queue[m]
        pipes = self.pipes[m]
        act = self.act
        res = self.res
        if not pipes:
            act.drop([r for r, _ in q], now)
            q.clear()
            return
        several = len(pipes) > 1
        probe = self.probe
        head_drop = self.config.head_drop
        while q:
            # step 1: the pipeline with the least waiting time at its planned batch size
            if several:
                best_wait = 1 << 62
                for p in pipes:
                    r = probe(res, p, p.batch, now, best_wait)  # None: waits ≥ best_wait
                    if r is not None and r[1] < best_wait:
                        best_wait, best, first = r[1], p, r
                self.probes += len(pipes)
            else:
                best = pipes[0]
                first = probe(res, best, best.batch, now)
                self.probes += 1
            # step 2: the largest batch size meeting the oldest request's deadline
            # (probe is stateless: step 1's probe of the chosen pipeline at its batch size is reused)
            deadline = q[0][1]
            finish, _, resv = first
            bs = best.batch
            if head_drop and q[0][0] != self.admitted[m]:
                # rule (b): a new head is admitted only if a batch of round(0.95·bs) … bs meets its deadline
                if finish > deadline:
                    lowest = admit_from(best.batch)
                    for b in range(best.batch - 1, lowest - 1, -1):
                        self.probes += 1
                        if probe(res, best, b, now)[0] <= deadline:
                            break
                    else:
                        rid, _ = q.popleft()
                        act.drop([rid], now)
                        continue
                self.admitted[m] = q[0][0]
            if finish > deadline:
                bs = 0
                for b in range(best.batch - 1, 0, -1):
                    finish, _, resv = probe(res, best, b, now)
                    self.probes += 1
                    if finish <= deadline:
                        bs = b
                        break
            if bs == 0:  # drop the oldest and start over
                rid, _ = q.popleft()
                act.drop([rid], now)
                continue
            if len(q) < bs and self.config.fill_wait and self.config.wait:
                # rule (e): wait until a batch of len(q)+1 misses the deadline even with no queueing
                small, wait_small, resv_small = probe(res, best, len(q) + 1, now)
                self.probes += 1
                if small > deadline:  # (only if a larger batch were faster: never with monotone latencies)
                    rid, _ = q.popleft()
                    act.drop([rid], now)
                    continue
                wake = fill_wake(deadline, small, now, wait_small)
                self.wait_until[m] = wake
                self.wait_need[m] = 0  # every arrival re-decides (the artifact's load balancer runs on each)
                act.set_timer(wake, m)
                return
            if len(q) < bs:
                wake = wait_until(self.config.wait, deadline, finish, now, last_moment)
                if wake >= 0:
                    self.wait_until[m] = wake
                    self.wait_need[m] = bs
                    act.set_timer(wake, m)
                    return
                bs = len(q)  # the last moment: send what is queued
                finish, _, resv = probe(res, best, bs, now)
                self.probes += 1
                if finish > deadline:  # pragma: no cover - a smaller batch is never slower
                    rid, _ = q.popleft()
                    act.drop([rid], now)
                    continue
            reserve(res, resv, now)
            self.dispatched += 1
            # probe's layout: the first stage's vGPU, then (uplink, downlink, vGPU) per stage
            if bs == 1:
                act.book_path(m, [q.popleft()[0]], resv[::3], now)
            else:
                act.book_path(m, [q.popleft()[0] for _ in range(bs)], resv[::3], now)
            self.wait_until[m] = -1
            last_moment = False
