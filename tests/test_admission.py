"""Admission control (``core/engine/admission.py``): an overloaded scheduler sheds arrivals and
saturates instead of collapsing (Shepherd §7.1, Fig. 10).

* the engine agrees with a literal per-request reference of the single-server recursion with
  shedding, on random arrival times, costs, bounds and decisions (a probe policy);
* shedding a request is exactly removing it from the trace (Flex, Flex-NP, Clockwork);
* a bound that never bites changes nothing (identical arrays);
* Clockwork at 2× and 4× its saturating load keeps most of its peak goodput.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shepherd.core.engine import DROPPED, EngineConfig, OverheadConfig, simulate
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy
from shepherd.core.profiles import load_builtin
from shepherd.traces.synthetic import assemble

PROF = load_builtin("shepherd-v100")
MODEL = "ResNet18"
N_PROBE_WORKERS = 3


# --------------------------------------------------------------------------- probe policy


@dataclass(frozen=True)
class ProbeConfig:
    flags: tuple[bool, ...] = (True,)  #: decide on arrival ``rid`` iff ``flags[rid % len(flags)]``
    batch: int = 2  #: requests per decision (the oldest queued)


class Probe(Policy):
    """Decides (starts a batch on an idle worker) on some arrivals and on completions; logs what
    it sees in order: ``("a", rid)`` and ``("d", now, size, start, position)``, where ``position``
    counts the trace arrivals that come before the decision in the engine's order."""

    def __init__(self, ctx, config):
        super().__init__(ctx, config)
        self.queue: deque[int] = deque()
        self.idle = list(range(len(self.act.workers)))
        self.log: list[tuple] = []

    def on_arrival(self, now, rid, model, deadline, stream):
        self.log.append(("a", rid))
        self.queue.append(rid)
        if self.config.flags[rid % len(self.config.flags)]:
            self._decide(now, rid + 1)

    def on_completion(self, now, worker):
        self.idle.append(self.act.workers.index(worker))
        arrival, _, _, _ = self.act.arrivals()
        self._decide(now, bisect_left(arrival.tolist(), now))  # after every arrival before ``now``

    def _decide(self, now, position):
        if not self.idle or not self.queue:
            return
        k = self.idle.pop()
        rids = [self.queue.popleft() for _ in range(min(self.config.batch, len(self.queue)))]
        w = self.act.workers[k]
        self.act.start(w, 0, rids, now)
        self.log.append(("d", now, len(rids), self.act.running(w)[0], position))


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(registry.POLICIES, "adm-probe", registry.PolicySpec("adm-probe", Probe, ProbeConfig, ""))


def reference(arrival, log, c, dec, per_req, bound):
    """The literal recursion: jobs in the engine's order; an arrival is shed iff the backlog it
    finds (free after every job before it) exceeds ``bound``; a decision at ``now`` is served
    after the admitted arrivals before ``now``. Returns (shed ids, decision starts, final free)."""
    decisions = [e for e in log if e[0] == "d"]
    positions = [e[4] for e in decisions]
    assert positions == sorted(positions)
    free, pending, shed, starts = 0, deque(), set(), []
    di = 0

    def charge(a):  # a free arrival is a no-op for every later job; the clock then skips it
        nonlocal free
        if c:
            free = max(free, a * 1000) + c

    def decide(now, size):
        nonlocal free
        while pending and pending[0] < now:
            charge(pending.popleft())
        free = max(free, now * 1000) + dec + per_req * size
        starts.append(-(-free // 1000))

    for j, a in enumerate(arrival):
        while di < len(decisions) and decisions[di][4] <= j:
            decide(decisions[di][1], decisions[di][2])
            di += 1
        f = free
        for p in pending:
            f = max(f, p * 1000) + c
        if f - a * 1000 > bound:
            shed.add(j)
        else:
            pending.append(a)
    for d in decisions[di:]:
        decide(d[1], d[2])
    for p in pending:
        charge(p)
    return shed, starts, free


def probe_case(draw_times, c_ns, dec_ns, per_req_ns, bound_ns, flags, batch, chunk=1 << 15):
    arrival = np.array(sorted(draw_times), dtype=np.int64)
    trace = assemble([arrival], [MODEL], [10**9])
    ovh = OverheadConfig(mode="model", base_us=dec_ns / 1000, per_worker_us=0.0, per_request_us=per_req_ns / 1000,
                         arrival_us=c_ns / 1000, max_lag_us=bound_ns / 1000)
    res = simulate(trace, PROF, "adm-probe", ProbeConfig(tuple(flags), batch), gpus=N_PROBE_WORKERS, overhead=ovh,
                   engine=EngineConfig(chunk=chunk))
    return arrival, res


def check_against_reference(arrival, res, c_ns, dec_ns, per_req_ns, bound_ns):
    e = res.engine
    log = e.policies[0].log
    shed, starts, free = reference(arrival.tolist(), log, c_ns, dec_ns, per_req_ns, bound_ns)
    seen = {x[1] for x in log if x[0] == "a"}
    assert seen == set(range(len(arrival))) - shed  # shed requests never reach the policy
    assert [x[3] for x in log if x[0] == "d"] == starts  # every decision issued when the recursion says
    if e.sched[0].active:  # with every cost zero the engine skips the clock
        assert e.sched[0].free_ns == free
    assert e.sched[0].shed == len(shed)
    if shed:
        r = res.recorder
        assert (r.r_outcome[sorted(shed)] == DROPPED).all() and (r.r_start[sorted(shed)] == -1).all()


COSTS = dict(c_ns=st.integers(0, 4_000), dec_ns=st.integers(0, 6_000), per_req_ns=st.integers(0, 2_000),
             bound_ns=st.integers(0, 20_000), flags=st.lists(st.booleans(), min_size=1, max_size=5),
             batch=st.integers(1, 4))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(times=st.lists(st.integers(0, 3_000), min_size=1, max_size=60), **COSTS)
def test_engine_matches_the_per_request_recursion(probe, times, c_ns, dec_ns, per_req_ns, bound_ns, flags, batch):
    """Arbitrary arrival times (ties included) in one feed chunk."""
    arrival, res = probe_case(times, c_ns, dec_ns, per_req_ns, bound_ns, flags, batch)
    check_against_reference(arrival, res, c_ns, dec_ns, per_req_ns, bound_ns)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gaps=st.lists(st.integers(1, 200), min_size=1, max_size=60), chunk=st.integers(1, 9), **COSTS)
def test_engine_matches_the_recursion_across_feed_chunks(probe, monkeypatch, gaps, chunk, c_ns, dec_ns, per_req_ns,
                                                         bound_ns, flags, batch):
    """Small feed chunks; distinct arrival times (at a chunk's end its arrivals are all charged,
    the one documented approximation, which only ties can expose)."""
    arrival, res = probe_case(np.cumsum(gaps).tolist(), c_ns, dec_ns, per_req_ns, bound_ns, flags, batch,
                              chunk=chunk)
    check_against_reference(arrival, res, c_ns, dec_ns, per_req_ns, bound_ns)


def test_the_probe_sheds_under_overload(probe):
    """Guard against a vacuous reference test: these costs shed, and the reference agrees."""
    times = list(range(0, 2_000, 5))
    arrival, res = probe_case(times, 20_000, 3_000, 500, 100_000, [True, False], 2)
    assert 0 < res.engine.sched[0].shed < len(times)
    check_against_reference(arrival, res, 20_000, 3_000, 500, 100_000)


# --------------------------------------------------------------------------- real policies

MODELS = ["ResNet18", "ResNet50", "DenseNet121"]


def random_trace(rng, n, span_us, slo_us):
    per = [np.sort(rng.integers(0, span_us, size=k)) for k in rng.multinomial(n, [1 / 3] * 3)]
    return assemble(per, MODELS, [slo_us] * 3)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10**6), policy=st.sampled_from(["flex", "flex-np", "clockwork"]),
       workers=st.integers(1, 4), arrival_us=st.sampled_from([5.0, 40.0, 200.0]), lag_us=st.sampled_from([0.0, 300.0, 3_000.0]))
def test_shedding_is_exactly_removing_the_shed_requests(seed, policy, workers, arrival_us, lag_us):
    """A shed request costs nothing and is never seen: the run equals one on the trace without the
    shed requests and admission control off (same outcomes, batches and scheduler clock)."""
    rng = np.random.default_rng(seed)
    trace = random_trace(rng, 300, 60_000, 40_000)
    base = dataclasses.replace(registry.get(policy).cls.default_overhead, arrival_us=arrival_us)
    bounded = simulate(trace, PROF, policy, gpus=workers, overhead=dataclasses.replace(base, max_lag_us=lag_us))
    e = bounded.engine
    kept = np.ones(trace.height, bool)
    kept[np.frombuffer(e.admission.shed_ids, dtype=np.int64)] = False
    assert e.sched[0].shed == int((~kept).sum())
    assert (bounded.recorder.r_outcome[~kept] == DROPPED).all()
    ref = simulate(trace.filter(kept), PROF, policy, gpus=workers, overhead=dataclasses.replace(base, max_lag_us=math.inf))
    r = ref.engine
    for col in ("r_start", "r_finish", "r_worker", "r_batch", "r_outcome", "r_preempt"):
        assert np.array_equal(getattr(bounded.recorder, col)[kept], getattr(ref.recorder, col)), col
    assert bounded.batches_frame().equals(ref.batches_frame())
    assert e.sched[0].free_ns == r.sched[0].free_ns and e.sched[0].busy_ns == r.sched[0].busy_ns


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**6), policy=st.sampled_from(["flex", "flex-np", "clockwork", "nexus"]),
       workers=st.integers(1, 4))
def test_a_bound_that_never_bites_changes_nothing(seed, policy, workers):
    rng = np.random.default_rng(seed)
    trace = random_trace(rng, 300, 60_000, 40_000)
    base = dataclasses.replace(registry.get(policy).cls.default_overhead, arrival_us=30.0)
    off = simulate(trace, PROF, policy, gpus=workers, overhead=dataclasses.replace(base, max_lag_us=math.inf))
    huge = simulate(trace, PROF, policy, gpus=workers, overhead=dataclasses.replace(base, max_lag_us=1e9))
    assert huge.engine.sched[0].shed == 0
    for col in ("r_start", "r_finish", "r_worker", "r_batch", "r_outcome", "r_preempt"):
        assert np.array_equal(getattr(off.recorder, col), getattr(huge.recorder, col)), col
    assert off.batches_frame().equals(huge.batches_frame())


# --------------------------------------------------------------------------- saturation


def test_overloaded_clockwork_saturates_instead_of_collapsing():
    """Clockwork on 64 workers whose scheduler takes 20 µs per arrival (it saturates at
    50k req/s) at rising Poisson load: at 2× and 4× the saturating load, goodput stays near its
    peak (Shepherd §7.1, Fig. 10) with the default admission bound, and collapses without it."""
    rng = np.random.default_rng(0)
    horizon_us = 500_000
    saturation = 50_000  # 1 / 20 µs

    def goodput(rate, **admission):
        n = int(rate * horizon_us / 1e6)
        trace = assemble([np.sort(rng.integers(0, horizon_us, size=n))], ["ResNet18"], [100_000])
        ovh = OverheadConfig(base_us=2.0, per_worker_us=0.0, arrival_us=20.0, **admission)
        return simulate(trace, PROF, "clockwork", gpus=64, overhead=ovh).good / (horizon_us / 1e6)

    below = [goodput(saturation * f) for f in (0.25, 0.5, 1.0)]
    assert below[0] > 0.99 * saturation * 0.25  # light load: all served
    peak = max(below)
    assert peak > 0.9 * saturation
    assert goodput(2 * saturation) >= 0.8 * peak
    assert goodput(4 * saturation) >= 0.8 * peak
    assert goodput(4 * saturation, max_lag_us=math.inf) < 0.3 * peak  # without admission control: collapse


def test_bad_bound_is_a_user_error():
    for bad in (-1.0, float("nan")):
        with pytest.raises(UserError, match="max_lag_us"):
            OverheadConfig(max_lag_us=bad).validate()
