"""The shared EP scheduler of Accordion and its baselines (Accordion §3.2, §3.3, §4.2).

One module holds what every scheduler of the seed shares; each policy in
``core/policies/accordion.py`` only decides *how many EPs* a query gets and
whether it may shrink others (:meth:`EPScheduler.place`).

* **Server.** ``eps`` execution places (default 64, §4.1), one worker each;
  a query holds ``d ≤ 8`` of them as a ``d``-stage pipeline
  (:mod:`.configs`), through the engine's malleable allocations
  (``act.allocate`` / ``act.resize``).
* **Queues.** Arrivals go to a High or a Low FIFO (trace column
  ``priority``: 1 = High, 0 = Low; absent = High). The High head is
  placed first; a waiting head blocks the queues behind it ("resources
  are first allocated to high-priority queries, and then assigned to
  low-priority queries", §3.2).
* **Dropout predictor** (Algorithm 1, :mod:`.predictor`), for every
  scheduler as in the seed: on arrival, with N = the EPs the query's SLO
  requires; the window is ``window`` × the query's SLO (0 switches the
  predictor off). ``EP_times`` (``predictor=``): ``live`` (default) builds
  them from the current system at each arrival — §3.2: "EP times, a list
  indicating the finish times of queries executing on individual EPs. These
  times accumulate with new finish times, as new queries are projected to
  execute", and the predictor works on "current system conditions" — i.e.
  each EP's running query's real finish, then every waiting query (High
  queue, Low queue, BBS buffers) projected on top as Algorithm 1 projects
  (N EPs, lines 4–10) in the order it will be served; ``projected`` keeps
  one list that only ever accumulates the accepted queries' projections and
  never sees the real schedule (our first reading: wide pipelines,
  shrinks and waits are invisible to it).
* **Shrinking** (Algorithm 2's ``Fetch_EPs``; only Accordion uses it): a
  query running on depth ``d`` since ``s`` has completed ``X =
  ⌊(now − s − fill_d) / bottleneck_d⌋`` instances (clamped to [0, left]);
  on depth ``d′`` it resumes from instance X+1 and finishes at ``now +
  reconfig + fill_d′ + (left − X) · bottleneck_d′`` — ``confirm_SLO``
  accepts ``d′`` only if that is ≤ its deadline. Instances in flight in
  the pipeline at the shrink are redone (they have no output yet). The
  removed EPs are the pipeline's last ones.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from shepherd.core.accordion.configs import MAX_EPS, check_eps, config_table
from shepherd.core.accordion.predictor import HIGH, LOW, predict, update
from shepherd.core.engine.cluster import uniform_cluster
from shepherd.core.engine.inputs import Inputs, Runtime
from shepherd.core.errors import UserError
from shepherd.core.policies.base import Policy


@dataclass(frozen=True)
class EPConfig:
    """Options shared by Accordion and its baselines (``--set name=value``)."""

    eps: int = 64  #: execution places of the server (§4.1; 8 in §2.1's Fig. 1)
    window: float = 1.0  #: dropout window as a multiple of the query's SLO; 0 = no predictor
    reconfig_ms: float = 0.0  #: cost of moving layers when a pipeline shrinks (§3.3: ≈5 ms, taken as 0)
    max_instances: int = 100_000  #: largest query (instances) a configuration accepts
    max_eps: int = MAX_EPS  #: most EPs one query may hold (§4.1: 8)
    predictor: str = "live"  #: EP_times of Algorithm 1: live (from the running and waiting queries) | projected
    late: str = "best"  #: accordion, a query no configuration serves in time: best (wait/fetch its best) | free


    def validate(self) -> None:
        if not 1 <= self.eps <= 4096:
            raise UserError(f"eps must be 1…4096, got {self.eps}")
        if self.window < 0 or self.reconfig_ms < 0:
            raise UserError("window and reconfig_ms must be ≥ 0")
        check_eps(self.max_eps)
        if self.predictor not in ("live", "projected"):
            raise UserError(f"predictor must be live or projected, got '{self.predictor}'")
        if self.late not in ("best", "free"):
            raise UserError(f"late must be best or free, got '{self.late}'")
        if self.max_instances < 1:
            raise UserError(f"max_instances must be ≥ 1, got {self.max_instances}")


@dataclass
class Query:
    rid: int
    model: int
    instances: int
    priority: int
    arrival: int
    deadline: int
    depth: int = 0
    workers: list[int] = field(default_factory=list)
    alloc: object = None
    left: int = 0  #: instances still to process at ``seg_start``
    seg_start: int = 0
    done: list[int] = field(default_factory=list)  #: instances completed in each segment
    buffer: list["Query"] = field(default_factory=list)  #: BBS: queries queued on this EP set
    segs: list[tuple[int, int, int]] = field(default_factory=list)  #: (depth, start, instances left) per segment


def _instances(inputs: Inputs, config: EPConfig) -> np.ndarray:
    t = inputs.trace
    inst = t["instances"].to_numpy() if "instances" in t.columns else np.ones(t.height, np.int64)
    if len(inst) and inst.min() < 1:
        i = int(np.argmin(inst))
        raise UserError(f"query {i} has {int(inst[i])} instances; a query needs ≥ 1")
    if len(inst) and inst.max() > config.max_instances:
        i = int(np.argmax(inst))
        raise UserError(f"query {i} has {int(inst[i])} instances, more than any configuration allows "
                        f"(max_instances={config.max_instances})")
    return inst


class EPScheduler(Policy):
    """Base of the Accordion policies (module docstring); subclasses implement :meth:`place`."""

    requires = ("layer_profiles",)

    @classmethod
    def prepare(cls, inputs: Inputs, config: EPConfig) -> Runtime:
        config.validate()
        frame = inputs.get("layer_profiles")
        _instances(inputs, config)
        hw = inputs.hardware or frame["hardware"].sort()[0]
        n_eps = inputs.gpus if inputs.gpus is not None else config.eps  # CLI: --gpus N = N EPs
        cluster = inputs.cluster or uniform_cluster(n_eps, hw)
        hw_names = sorted({w.hardware for w in cluster.workers})
        return Runtime(cluster, hw_names, [], [0] * len(inputs.models),
                       {"configs": config_table(frame, inputs.models)})

    def __init__(self, act, config: EPConfig) -> None:
        super().__init__(act, config)
        self.cfgs = act.runtime.tables["configs"]
        n = len(act.deadlines)
        inst = act.column("instances")
        prio = act.column("priority")
        self.inst = inst.astype(np.int64) if inst is not None else np.ones(n, np.int64)
        self.prio = prio.astype(np.int64) if prio is not None else np.full(n, HIGH, np.int64)
        self.arrival = act.arrivals()  # per-group arrays; the request's own arrival is passed on arrival
        self.free: list[int] = sorted(act.workers)
        self.eps = list(self.free)  # predictor EP index → worker
        self.ep_times = [0.0] * len(self.free)  # predictor=projected: the accumulated finish times (µs)
        self.high: deque[Query] = deque()
        self.low: deque[Query] = deque()
        self.active: dict[int, Query] = {}  # first worker → query
        self.finished: list[Query] = []
        self.n_dropped = self.n_shrinks = self.n_buffered = 0

    # ---- configuration look-ups ------------------------------------------------------------
    def lat_us(self, model: int, depth: int, instances: int) -> int:
        return self.cfgs[model][depth - 1].latency_us(instances)

    def max_depth(self, model: int) -> int:
        return min(len(self.cfgs[model]), self.config.max_eps, len(self.act.workers))

    def fastest_depth(self, model: int, instances: int) -> int:
        ds = range(1, self.max_depth(model) + 1)
        return min(ds, key=lambda d: (self.lat_us(model, d, instances), d))

    def slo_depth(self, model: int, instances: int, budget_us: int) -> int | None:
        """The fewest EPs whose latency meets ``budget_us`` (None: no configuration does)."""
        for d in range(1, self.max_depth(model) + 1):
            if self.lat_us(model, d, instances) <= budget_us:
                return d
        return None

    def required_depth(self, q: Query) -> int:
        """N of Algorithm 1: the EPs the query's SLO requires (the fastest if none meets it)."""
        d = self.slo_depth(q.model, q.instances, q.deadline - q.arrival)
        return d if d is not None else self.fastest_depth(q.model, q.instances)

    # ---- events ------------------------------------------------------------------------------
    def on_arrival(self, now: int, rid: int, model: int, deadline: int, stream: int) -> None:
        q = Query(rid, model, int(self.inst[rid]), int(self.prio[rid]), now, deadline, left=int(self.inst[rid]))
        live = self.config.predictor == "live"
        if self.config.window > 0 and not (live and q.priority == HIGH):
            n = self.required_depth(q)
            processing, window = self.lat_us(model, n, q.instances), self.config.window * (deadline - now)
            ep = self.live_ep_times(now, (n, processing, window)) if live else self.ep_times
            p = predict(ep, now, n, processing, q.priority, window)
            if p.drop:
                self.act.drop([rid], now)
                self.n_dropped += 1
                return
            if not live:
                self.ep_times = update(self.ep_times, p)
        (self.high if q.priority == HIGH else self.low).append(q)
        self.schedule(now)

    def live_ep_times(self, now: int, drop_test: tuple[int, float, float] | None = None) -> list[float]:
        """Algorithm 1's EP_times from the current system (module docstring, ``predictor=live``).

        With ``drop_test`` = (N, P_t, TIME_WINDOW) of a Low-priority arrival, the fold over the queue stops as
        soon as that arrival is certain to be dropped: :func:`update` only raises finish times, so the N-th
        earliest one — the arrival's wait — can only grow with every queued query folded in; once it already
        exceeds the window the full fold would too. The drop decision is the one the full fold gives, at a
        cost bounded by the few queries it takes to fill the window instead of the whole queue (a saturated
        stream queues thousands). A High-priority arrival is never dropped, and under ``live`` nothing keeps
        its prediction, so :meth:`on_arrival` does not ask for one."""
        at = dict.fromkeys(self.eps, 0.0)
        for q in self.active.values():
            t = float(q.alloc.end)
            for b in q.buffer:  # BBS: runs on this EP set after q, in order
                t += self.lat_us(b.model, len(q.workers), b.instances)
            for w in q.workers:
                at[w] = t
        ep = [at[w] for w in self.eps]
        for q in (*self.high, *self.low):
            if drop_test is not None and predict(ep, now, drop_test[0], drop_test[1], LOW, drop_test[2]).drop:
                return ep
            n = self.required_depth(q)
            ep = update(ep, predict(ep, now, n, self.lat_us(q.model, n, q.left), HIGH, 0.0))
        return ep

    def on_completion(self, now: int, worker: int) -> None:
        q = self.active.pop(worker)
        q.done.append(q.left)
        q.left = 0
        self.finished.append(q)
        if not self.hand_over(q, now):
            self.free = sorted(self.free + q.workers)
        self.schedule(now)

    def schedule(self, now: int) -> None:
        while True:
            queue = self.high if self.high else self.low
            if not queue or not self.place(queue[0], now):
                return
            queue.popleft()

    # ---- what a policy decides -----------------------------------------------------------------
    def place(self, q: Query, now: int) -> bool:
        """Start (or buffer) ``q`` now and return True, or return False to let it wait."""
        raise NotImplementedError

    def hand_over(self, q: Query, now: int) -> bool:
        """``q`` completed: may its EPs go straight to another query (BBS)? Default: no."""
        return False

    # ---- actions -------------------------------------------------------------------------------
    def start_query(self, q: Query, depth: int, now: int, workers: list[int] | None = None) -> None:
        if workers is None:
            workers, self.free = self.free[:depth], self.free[depth:]
        q.depth, q.workers = depth, list(workers)
        q.alloc = self.act.allocate(q.workers, q.model, [q.rid], now, self.lat_us(q.model, depth, q.left))
        q.seg_start = q.alloc.seg_start
        q.segs.append((depth, q.seg_start, q.left))
        self.active[q.workers[0]] = q

    def completed_instances(self, q: Query, now: int) -> int:
        """X: instances of the current segment already out of the pipeline at ``now``."""
        c = self.cfgs[q.model][q.depth - 1]
        x = ((now - q.seg_start) / 1000.0 - c.fill_ms) / c.bottleneck_ms
        return int(min(max(np.floor(x + 1e-9), 0), q.left))

    def shrunk_finish(self, q: Query, depth: int, now: int) -> int:
        """When ``q`` would finish on ``depth`` EPs if shrunk at ``now`` (from its segment's start if that is
        later: the engine may start an allocation a decision delay after the policy's call)."""
        left = q.left - self.completed_instances(q, now)
        return max(now, q.seg_start) + int(round(self.config.reconfig_ms * 1000)) + self.lat_us(q.model, depth, left)

    def confirm_slo(self, q: Query, depth: int, now: int) -> bool:
        """Algorithm 2's confirm_SLO: on ``depth`` EPs the query still meets its deadline."""
        return q.left > self.completed_instances(q, now) and self.shrunk_finish(q, depth, now) <= q.deadline

    def shrink(self, q: Query, depth: int, now: int) -> None:
        """reduce_pipeline: resume ``q`` from instance X+1 on its first ``depth`` EPs."""
        x = self.completed_instances(q, now)
        finish = self.shrunk_finish(q, depth, now)
        q.done.append(x)
        q.left -= x
        released = q.workers[depth:]
        q.workers = q.workers[:depth]
        q.depth = depth
        self.act.resize(q.alloc, q.workers, now, remaining_us=finish - max(now, q.seg_start))
        q.seg_start = q.alloc.seg_start
        q.segs.append((depth, q.seg_start, q.left))
        self.free = sorted(self.free + released)
        self.n_shrinks += 1

    def stats(self) -> dict:
        return {"dropped_by_predictor": self.n_dropped, "shrinks": self.n_shrinks, "buffered": self.n_buffered}
