"""The engine/policy seam (issue 12): small toy policies, written here, each run through ``simulate()``.

1. timers set and cancelled (a non-work-conserving batching window);
2. a batch booked on a busy worker starts the moment it frees (Symphony Appendix C);
3. one request-batch on 4 workers shrunk to 3 mid-run (Accordion): busy and finish time by hand;
4. K = 4 round-robin frontends vs K = 1 (Symphony §3.3, Table 2);
5. a worker added and one removed mid-run (Symphony §4.4 autoscaling);
6. per-epoch bad rate and idle fraction from the recorder, against a hand computation.

Times are µs; every toy gives explicit durations, and the scheduler costs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

from shepherd.core.engine import Cluster, OverheadConfig, RoundRobinFrontends, Worker, simulate
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
FREE = OverheadConfig(mode="none")


@pytest.fixture
def register(monkeypatch):
    """Register a toy policy in-process for one test (the documented equivalent of an entry point)."""

    def add(name, cls, config_cls=registry.NoOptions):
        monkeypatch.setitem(registry.POLICIES, name, registry.PolicySpec(name, cls, config_cls, ""))

    return add


def one_stream(times, slo=1_000_000, model="ResNet18"):
    return assemble([np.array(times, dtype=np.int64)], [model], [slo])


# --------------------------------------------------------------------------- 1. timers set / cancel

@dataclass(frozen=True)
class WindowConfig:
    window_us: int = 150


class Window(Policy):
    """Waits until no request has come for ``window_us``, then runs everything queued as one batch:
    each arrival cancels the pending timer and sets a new one."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.queue, self.timer = [], None
        self.fired, self.cancelled, self.runs = [], [], 0

    def on_arrivals(self, ts, ds, ms, ss, rs, lo, hi):
        self.runs += 1
        return super().on_arrivals(ts, ds, ms, ss, rs, lo, hi)

    def on_arrival(self, now, rid, model, deadline, stream):
        self.queue.append(rid)
        if self.timer is not None:
            self.act.cancel_timer(self.timer)
            self.cancelled.append(self.timer.payload)
        self.timer = self.act.set_timer(now + self.config.window_us, ("wake", now))

    def on_timer(self, now, payload):
        self.fired.append(payload)
        self.act.start(0, 0, self.queue, now, duration_us=1_000)
        self.queue, self.timer = [], None


def test_cancelled_timers_never_fire_and_never_cut_a_run_of_arrivals(register):
    register("window", Window, WindowConfig)
    times = [0, 100, 200, 300, 400, 2_000, 2_100]
    res = simulate(one_stream(times), PROF, "window", gpus=1, overhead=FREE)
    pol = res.engine.policies[0]
    assert pol.fired == [("wake", 400), ("wake", 2_100)]  # only the last timer of each burst
    assert pol.cancelled == [("wake", t) for t in (0, 100, 200, 300, 2_000)]
    assert not set(pol.fired) & set(pol.cancelled)
    # the first five arrivals come in one run: their cancelled timers (at 150 … 450) cut nothing;
    # the live timer at 550 ends it; the next burst is the second run
    assert pol.runs == 2
    b = res.batches_frame()
    assert b.select("size", "start_us", "end_us").rows() == [(5, 550, 1_550), (2, 2_250, 3_250)]
    assert res.good == len(times)


# --------------------------------------------------------------------------- 2. book on a busy worker

class Booking(Policy):
    """Starts the first request on worker 0 and books every later one on worker 0 as well."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.busy_at_completion = []

    def on_arrival(self, now, rid, model, deadline, stream):
        if rid == 0:
            self.act.start(0, model, [rid], now, duration_us=1_000)
        else:
            self.act.book(0, model, [rid], now, duration_us=500)

    def on_completion(self, now, worker):
        self.busy_at_completion.append((now, self.act.busy(worker)))


def test_a_batch_booked_on_a_busy_worker_starts_the_moment_it_frees(register):
    register("booking", Booking)
    res = simulate(one_stream([0, 10, 20, 3_000]), PROF, "booking", gpus=1, overhead=FREE)
    b = res.batches_frame()
    # booked at 10 and 20 on the busy worker: back to back from its free time; at 3000 it is idle
    assert b.select("size", "start_us", "end_us").rows() == [(1, 0, 1_000), (1, 1_000, 1_500), (1, 1_500, 2_000),
                                                            (1, 3_000, 3_500)]
    # the next booked batch is already running when the policy hears of the completion
    assert res.engine.policies[0].busy_at_completion == [(1_000, True), (1_500, True), (2_000, False),
                                                         (3_500, False)]
    assert res.workers_frame()["busy_us"].to_list() == [2_500]


def test_batches_booked_on_an_allocations_workers_start_when_it_lets_them_go(register):
    """Worker 1 leaves the allocation at the shrink (1000), worker 0 at its completion: each starts the
    batch booked on it at that moment."""

    class BookAfterAlloc(Policy):
        def on_start(self, now):
            self.act.set_timer(1_000, None)

        def on_arrival(self, now, rid, model, deadline, stream):
            if rid == 0:
                self.alloc = self.act.allocate([0, 1], model, [rid], now, 2_000)  # 4000 worker-µs
            else:
                self.act.book(rid - 1, model, [rid], now, duration_us=300)

        def on_timer(self, now, payload):
            self.act.resize(self.alloc, [0], now)  # 2000 done, 2000 left on one worker: ends at 3000

    register("book-after-alloc", BookAfterAlloc)
    res = simulate(one_stream([0, 10, 20]), PROF, "book-after-alloc", gpus=2, overhead=FREE)
    req = res.requests_frame().sort("request")
    assert req.select("worker", "start_us", "finish_us").rows() == [(0, 0, 3_000), (0, 3_000, 3_300),
                                                                    (1, 1_000, 1_300)]


# --------------------------------------------------------------------------- 3. an allocation shrunk mid-run

class Malleable(Policy):
    """Request 0 runs on all 4 workers (3000 µs there, i.e. 12000 worker-µs of work); at 1500 it is
    shrunk to 3 workers; request 1 (arriving at 1600) gets the freed worker."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.alloc = None
        self.done = []

    def on_start(self, now):
        self.act.set_timer(1_500, "shrink")

    def on_arrival(self, now, rid, model, deadline, stream):
        if rid == 0:
            self.alloc = self.act.allocate(list(self.act.workers), model, [rid], now, 3_000)
        else:
            free = [w for w in self.act.workers if not self.act.busy(w)]
            self.act.start(free[0], model, [rid], now, duration_us=100)

    def on_timer(self, now, payload):
        self.new_end = self.act.resize(self.alloc, self.act.workers[:3], now)

    def on_completion(self, now, worker):
        self.done.append((now, worker))


def test_an_allocation_shrunk_from_4_to_3_workers_keeps_the_work_done(register):
    register("malleable", Malleable)
    res = simulate(one_stream([0, 1_600]), PROF, "malleable", gpus=4, overhead=FREE)
    pol = res.engine.policies[0]
    # by hand: 4 workers × 1500 µs = 6000 of 12000 worker-µs done at the resize; 6000 left on 3 → 2000 µs
    assert pol.new_end == 1_500 + 6_000 // 3 == 3_500
    req = res.requests_frame().sort("request")
    assert req["finish_us"].to_list() == [3_500, 1_700]
    assert req["worker"].to_list() == [0, 3]  # request 1 ran on the worker the shrink freed
    assert req["outcome"].to_list() == ["served", "served"]
    busy = res.workers_frame()["busy_us"].to_list()
    assert busy == [3_500, 3_500, 3_500, 1_500 + 100]
    # no work lost or counted twice: the allocation's segments add up to exactly its work
    seg = res.segments_frame().filter(pl.col("batch_id") == 0)
    assert int((seg["end_us"] - seg["start_us"]).sum()) == 4 * 3_000
    assert sorted(seg.select("worker", "start_us", "end_us").rows()) == [
        (0, 0, 1_500), (0, 1_500, 3_500), (1, 0, 1_500), (1, 1_500, 3_500), (2, 0, 1_500), (2, 1_500, 3_500),
        (3, 0, 1_500)]
    assert res.batches_frame().filter(pl.col("batch_id") == 0).select("start_us", "end_us").row(0) == (0, 3_500)
    assert pol.done == [(1_700, 3), (3_500, 0)]  # the stale completion at 3000 was never delivered


def test_resizing_onto_a_busy_worker_is_refused(register):
    class Busy(Malleable):
        def on_arrival(self, now, rid, model, deadline, stream):
            if rid == 0:
                self.alloc = self.act.allocate([0, 1], model, [rid], now, 3_000)
            else:
                self.act.start(2, model, [rid], now, duration_us=5_000)

        def on_timer(self, now, payload):
            self.act.resize(self.alloc, [0, 2], now)  # worker 2 is running request 1

    register("busy-malleable", Busy)
    with pytest.raises(RuntimeError, match="busy or removed"):
        simulate(one_stream([0, 1_000]), PROF, "busy-malleable", gpus=3, overhead=FREE)


# --------------------------------------------------------------------------- 4. K round-robin frontends

class CountingBackend(Policy):
    """A per-backend policy: serves each request alone, instantly enough; remembers arrival times."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.seen = []

    def on_arrival(self, now, rid, model, deadline, stream):
        self.seen.append(now)
        self.act.drop([rid], now)


def backends(n):
    return Cluster(tuple(Worker(i, i, "V100", i, f"b{i}") for i in range(n)), tuple(range(n)))


def rpw_std(res, n_backends, window_us):
    """Standard deviation over backends and windows of the requests each backend gets per window."""
    counts = []
    for pol in res.engine.policies:
        seen = np.array(pol.seen, dtype=np.int64)
        counts.append(np.bincount(seen // window_us, minlength=int(seen.max() // window_us) + 1 if len(seen) else 1))
    width = max(len(c) for c in counts)
    grid = np.array([np.pad(c, (0, width - len(c))) for c in counts])
    return float(grid[:, :-1].std()), grid


def test_k_round_robin_frontends_amplify_per_backend_fluctuations(register):
    """Symphony Table 2: exponential gaps to frontends, each dispatching round-robin to 100 backends;
    one frontend gives every backend the same count (±1) in every window, several give several times
    the standard deviation of requests per window."""
    register("counting", CountingBackend)
    rng = np.random.default_rng(0)
    n, b = 40_000, 100
    times = np.cumsum(rng.exponential(10.0, n)).astype(np.int64)  # 100 k req/s
    trace = one_stream(times)
    window = 10_000  # 1000 requests per window: 10 per backend
    one = simulate(trace, PROF, "counting", cluster=backends(b), router=RoundRobinFrontends(1), overhead=FREE)
    four = simulate(trace, PROF, "counting", cluster=backends(b), router=RoundRobinFrontends(4), overhead=FREE)
    total_one = [len(p.seen) for p in one.engine.policies]
    total_four = [len(p.seen) for p in four.engine.policies]
    assert sum(total_one) == sum(total_four) == n
    assert max(total_one) - min(total_one) <= 1  # one round-robin: perfectly even
    assert max(total_four) - min(total_four) > 1
    std1, grid1 = rpw_std(one, b, window)
    std4, _ = rpw_std(four, b, window)
    assert std4 > 2 * std1  # Table 2: "several times higher"
    # K = 1 in a window: counts differ by the window's requests modulo the backends only
    assert (grid1[:, :-1].max(axis=0) - grid1[:, :-1].min(axis=0) <= 2).all()


# --------------------------------------------------------------------------- 5. workers added and removed

class Autoscaler(Policy):
    """Serves requests FIFO (1000 µs each) on idle workers; at 5000 adds a worker, at 12000 removes worker 0."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.queue = []
        self.added = None

    def on_start(self, now):
        self.act.set_timer(5_000, "add")
        self.act.set_timer(12_000, "remove")

    def _fill(self, now):
        for w in list(self.act.workers):
            if self.queue and not self.act.busy(w):
                self.act.start(w, 0, [self.queue.pop(0)], now, duration_us=1_000)

    def on_arrival(self, now, rid, model, deadline, stream):
        self.queue.append(rid)
        self._fill(now)

    def on_completion(self, now, worker):
        self._fill(now)

    def on_timer(self, now, payload):
        if payload == "add":
            self.added = self.act.add_worker("V100", now)
        else:
            self.act.remove_worker(0, now)
        self._fill(now)


def test_a_worker_added_and_one_removed_mid_run(register):
    register("autoscaler", Autoscaler)
    times = list(range(0, 20_000, 500))  # 2 requests per 1000 µs: one worker falls behind
    res = simulate(one_stream(times, slo=10**9), PROF, "autoscaler", gpus=1, overhead=FREE)
    pol = res.engine.policies[0]
    assert pol.added == 1
    req = res.requests_frame()
    assert req.filter(pl.col("worker") == 1)["start_us"].min() == 5_000  # the new worker starts at once
    # a completion at 12000 comes before the removal timer at 12000 (tie order): the last start on 0
    assert req.filter(pl.col("worker") == 0)["start_us"].max() == 12_000
    assert req.filter(pl.col("start_us") > 12_000)["worker"].unique().to_list() == [1]  # nothing new after
    assert res.good == len(times)
    wk = res.workers_frame()
    assert wk["worker"].to_list() == [0, 1] and wk["hardware"].to_list() == ["V100", "V100"]
    assert wk["busy_us"].sum() == 1_000 * len(times)
    # worker 0 is removed at 12000, or when the batch it runs then ends
    last0 = int(req.filter(pl.col("worker") == 0)["finish_us"].max())
    gone = max(12_000, last0)
    assert res.recorder.w_removed == [gone, -1]
    win = res.windows(5_000, 25_000)
    # capacity: worker 0 lives [0, gone), worker 1 [5000, end)
    assert win["capacity_us"].to_list() == [5_000, 10_000, (gone - 10_000) + 5_000, 5_000, 5_000]


# --------------------------------------------------------------------------- 6. per-epoch windows by hand

class Greedy(Policy):
    """One worker; a request runs at once for 400 µs if the worker is idle, else it is dropped.
    At 2000 it reads the recorder's windows so far."""

    def __init__(self, act, config):
        super().__init__(act, config)
        self.mid = None

    def on_start(self, now):
        self.act.set_timer(2_000, None)

    def on_arrival(self, now, rid, model, deadline, stream):
        w = self.act.workers[0]
        if self.act.busy(w):
            self.act.drop([rid], now)
        else:
            self.act.start(w, model, [rid], now, duration_us=400)

    def on_timer(self, now, payload):
        self.mid = self.act.windows(1_000, now)


def test_per_epoch_bad_rate_and_idle_fraction_match_a_hand_computation(register):
    register("greedy", Greedy)
    # r0 [0, 400) served; r1 at 100 dropped (busy); r2 [800, 1200) served, across the boundary;
    # r3 at 2500 with a 300 µs SLO: [2500, 2900) late
    trace = assemble([np.array([0, 100, 800], dtype=np.int64), np.array([2_500], dtype=np.int64)],
                     ["ResNet18", "ResNet18"], [10_000, 300])
    res = simulate(trace, PROF, "greedy", gpus=1, overhead=FREE)
    assert res.requests_frame().sort("arrival_us")["outcome"].to_list() == ["served", "dropped", "served", "late"]
    win = res.windows(1_000, 3_000)
    assert win["arrivals"].to_list() == [3, 0, 1]
    assert win["bad"].to_list() == [1, 0, 1]
    assert win["bad_rate"].to_list() == pytest.approx([1 / 3, 0.0, 1.0])
    assert win["busy_us"].to_list() == [400 + 200, 200, 400]
    assert win["idle_fraction"].to_list() == pytest.approx([0.4, 0.8, 0.6])
    assert win["occupancy"].to_list() == pytest.approx([0.6, 0.2, 0.4])
    assert win["active_requests"].to_list() == [1, 0, 0]  # r2 is in service at 1000
    mid = res.engine.policies[0].mid  # what the policy saw at 2000: the same first two windows
    assert mid["bad_rate"].to_list() == pytest.approx([1 / 3, 0.0])
    assert mid["idle_fraction"].to_list() == pytest.approx([0.4, 0.8])


# --------------------------------------------------------------------------- trace columns a policy may read

def test_a_policy_reads_the_traces_instances_column(register):
    """Accordion's queries carry many inference instances (trace column ``instances``): a policy reads
    it through ``act.column`` — here each query runs 100 µs per instance."""

    class PerInstance(Policy):
        def on_arrival(self, now, rid, model, deadline, stream):
            n = int(self.act.column("instances")[rid])
            self.act.book(0, model, [rid], now, duration_us=100 * n)

    register("per-instance", PerInstance)
    trace = one_stream([0, 0, 50]).with_columns(instances=pl.Series([3, 1, 5], dtype=pl.Int32))
    res = simulate(trace, PROF, "per-instance", gpus=1, overhead=FREE)
    assert res.requests_frame().sort("request").select("start_us", "finish_us").rows() == [
        (0, 300), (300, 400), (400, 900)]
    plain = simulate(one_stream([0]), PROF, "flex", gpus=1)
    assert plain.engine.columns == {}  # no such column: act.column gives None
