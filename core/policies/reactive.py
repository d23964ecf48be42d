"""Reactive, distributed adaptive batching per GPU pool — the ablation baseline of PPipe §7.4 (Fig. 10).

"The reactive scheduler performs adaptive batching independently for each
GPU pool in a pooled pipeline. For each pool, it selects the largest possible
batch size that meets the pool's SLO (as determined by the MILP solver)." It
keeps no reservation tables, so batches are sent to servers whose links are
busy and wait for them.

Modelling choices (documented, the paper gives no more detail):

* requests of a DNN are spread over its pipelines by smooth weighted
  round-robin on the planned pipeline throughputs;
* a pool's SLO: stage ``j`` of a request must finish by
  ``arrival + SLO · (planned latency through stage j, transfers included) /
  (planned pipeline latency)`` — the MILP's per-stage latencies scaled to the
  full SLO; the last stage's is the request's deadline;
* the first pool has one queue served by its idle vGPUs in round-robin order; an idle vGPU waits until the planned batch
  size is queued or the oldest request's last moment has come, then takes the
  largest batch (up to the largest profiled at its share) whose completion
  meets the oldest request's stage deadline, after dropping requests that
  cannot meet theirs even alone;
* a finished batch is sent to the next pool's vGPU with the fewest queued
  requests (local knowledge only; ties round-robin); requests that cannot
  meet their next stage deadline even if sent now are dropped by the sender;
* each NIC direction serialises its own traffic FIFO (busy ``b · T`` µs per
  batch); a batch arrives ``b · T`` after the later of the sender's uplink and
  the receiver's downlink frees up (links are not held for each other, which
  would couple every server into one convoy), then joins that vGPU's queue
  and is batched the same way. Late completions can happen here (the stage
  deadlines are planned shares, not reservations) and count as misses.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from shepherd.core.engine.actions import Actions
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.engine.overhead import OverheadConfig
from shepherd.core.policies.base import Policy
from shepherd.core.policies.registry import register


@register("reactive")
class ReactivePolicy(Policy):
    """Per-pool adaptive batching without reservations (PPipe §7.4 baseline)."""

    requires = ("pipeline_plan", "block_profiles")
    default_overhead = OverheadConfig(mode="none")

    @classmethod
    def prepare(cls, inputs: Inputs, config: Any) -> Runtime:
        from shepherd.core.pipelines.runtime import prepare_pipelines  # (imports the engine: not at module level)

        return prepare_pipelines(inputs)

    def __init__(self, act: Actions, config: Any) -> None:
        super().__init__(act, config)
        tables = act.runtime.tables
        self.pipes = list(tables["pipelines"])
        n_models = len(act.models)
        self.by_model: list[list[int]] = [[] for _ in range(n_models)]
        for i, p in enumerate(self.pipes):
            self.by_model[p.model].append(i)
        self.credit = [0.0] * len(self.pipes)
        self.weight = [min(len(ws) * p.batch * 1e6 / p.lat[j][p.batch] for j, ws in enumerate(p.workers))
                       for p in self.pipes]
        self.share = []  # cumulative planned latency share per stage
        for p in self.pipes:
            cum, acc = [], 0
            total = sum(p.lat[j][p.batch] + p.transfer_in[j][p.batch] for j in range(len(p.workers)))
            for j in range(len(p.workers)):
                acc += p.lat[j][p.batch] + p.transfer_in[j][p.batch]
                cum.append(acc / total)
            self.share.append(cum)
        n_workers = len(act.nodes)
        self.where: dict[int, tuple[int, int]] = {}
        self.node = list(act.nodes)
        for i, p in enumerate(self.pipes):
            for j, ws in enumerate(p.workers):
                for w in ws:
                    self.where[w] = (i, j)
        self.first: list[deque] = [deque() for _ in self.pipes]  # first-pool queue per pipeline
        self.local: list[deque] = [deque() for _ in range(n_workers)]  # later pools: per-vGPU queue
        self.running: list[list | None] = [None] * n_workers
        self.rr: dict[tuple[int, int], int] = {}
        self.up_free = [0] * max(tables["nodes"], 1)
        self.down_free = [0] * max(tables["nodes"], 1)

    # entries are (rid, arrival, deadline)
    def _stage_deadline(self, pi: int, j: int, arrival: int, deadline: int) -> int:
        return arrival + int((deadline - arrival) * self.share[pi][j])

    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        cands = self.by_model[model]
        if not cands:
            self.act.drop([rid], now)
            return
        total = sum(self.weight[i] for i in cands)
        for i in cands:
            self.credit[i] += self.weight[i]
        pi = max(cands, key=lambda i: self.credit[i])
        self.credit[pi] -= total
        self.first[pi].append((rid, now, deadline))
        pool = self.pipes[pi].workers[0]
        rot = self.rr.get((pi, 0), 0)
        for i in range(len(pool)):  # the next idle vGPU, round-robin
            w = pool[(rot + i) % len(pool)]
            if not self.act.busy(w):
                self.rr[(pi, 0)] = (rot + i + 1) % len(pool)
                self._try(w, now)
                break

    def on_completion(self, now: int, worker: int) -> None:
        batch = self.running[worker]
        self.running[worker] = None
        pi, j = self.where[worker]
        pipe = self.pipes[pi]
        if batch is not None and j + 1 < len(pipe.workers):
            # requests that cannot make it even if sent now are dropped by the sender (local knowledge)
            fast = now + pipe.transfer_in[j + 1][1] + pipe.lat[j + 1][1]
            hopeless = [r for r, a, d in batch if fast > self._stage_deadline(pi, j + 1, a, d)]
            if hopeless:
                self.act.drop(hopeless, now)
                batch = [e for e in batch if fast <= self._stage_deadline(pi, j + 1, e[1], e[2])]
        if batch and j + 1 < len(pipe.workers):
            nxt = pipe.workers[j + 1]
            rot = self.rr.get((pi, j + 1), 0) % len(nxt)
            order = nxt[rot:] + nxt[:rot]  # round-robin among equally loaded vGPUs
            dest = min(order, key=lambda w: len(self.local[w]) + (1 if self.act.busy(w) else 0))
            self.rr[(pi, j + 1)] = rot + 1
            ln = pipe.transfer_in[j + 1][len(batch)]
            up, down = self.node[worker], self.node[dest]
            s_up = max(now, self.up_free[up])
            s_down = max(now, self.down_free[down])
            self.up_free[up] = s_up + ln
            self.down_free[down] = s_down + ln
            self.act.set_timer(max(s_up, s_down) + ln, (dest, batch))
        self._try(worker, now)

    def on_timer(self, now: int, payload: Any) -> None:
        dest, batch = payload
        if batch is not None:
            self.local[dest].extend(batch)
        if not self.act.busy(dest):
            self._try(dest, now, forced=batch is None)

    def _try(self, w: int, now: int, forced: bool = False) -> None:
        """Adaptive batching on an idle vGPU: the largest batch meeting the oldest's stage deadline."""
        if self.act.busy(w):
            return
        pi, j = self.where[w]
        pipe = self.pipes[pi]
        q = self.first[pi] if j == 0 else self.local[w]
        lat = pipe.lat[j]
        final = j == len(pipe.workers) - 1
        while q:
            rid, arr, dl = q[0]
            if now + lat[1] > self._stage_deadline(pi, j, arr, dl):
                q.popleft()
                self.act.drop([rid], now)
                continue
            limit = self._stage_deadline(pi, j, arr, dl)
            if len(q) < pipe.batch and not forced and now + lat[len(q)] < limit:
                # wait for the planned batch until the oldest request's last moment
                self.act.set_timer(limit - lat[len(q)], (w, None))
                return
            b = min(len(q), pipe.max_batch)
            while b > 1 and now + lat[b] > limit:
                b -= 1
            batch = [q.popleft() for _ in range(b)]
            self.running[w] = batch
            self.act.start(w, pipe.model, [r for r, _, _ in batch], now, duration_us=lat[b], final=final)
            return
