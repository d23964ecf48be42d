"""PPipe data plane's compiled fast path (core/engine/fast/ppipe.py): the reference engine's tables, identical.

The reference is ``ppipe`` on the Python engine with ``EngineConfig(reserved="record")`` (the fidelity the
experiments run; ``tests/test_ppipe_dataplane.py`` checks it against the event-executed one). Compared: every
request column (start, finish, worker, batch, outcome), every batch row, the workers' busy time, the summary,
the shed requests and the policy's counters (``probes``, ``dispatched``).

Hypothesis-generated small plans — synthetic block profiles, 1–3 DNNs with 1–3 pooled pipelines each (or
none), 1–3 stages on two GPU types and two MPS levels, servers of several GPUs so that stages, pipelines and
DNNs share NICs, low bandwidth so that transfers queue and reservations go into gaps — and traces with ties;
three fixed ones of ≥ 100 k requests: the authors' G1 planned by the PPipe MILP on HC1-L at load factor 0.8,
1.0 and 1.2 (one plan); seeded ones for states the random examples reach rarely or never (Algorithm 2's common
link slot; rule (b)'s admission range, which is wider than the planned batch only from batch 11 on).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shepherd.core.engine import EngineConfig, OverheadConfig, simulate
from shepherd.core.errors import UserError
from shepherd.core.pipelines.blocks import BlockProfile
from shepherd.core.pipelines.cluster import custom_cluster
from shepherd.core.pipelines.plan import Pipeline, PipelinePlan, Stage
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble
from test_engine_fast import assert_same

from conftest import PPIPE_DATA, needs_ppipe

#: each test compares a compiled fast path with the reference engine (conftest.py: re-records it verified)
pytestmark = pytest.mark.agreement

pytest.importorskip("numba")

RECORD = EngineConfig(reserved="record", path="reference")
FAST = EngineConfig(reserved="record", path="fast")
BLOCKS = 4
MAXB = 4
KINDS = (("A", 1), ("A", 2), ("B", 1))
RULES = ("uplink_score", "head_drop", "slot_receive", "stage_servers", "fill_wait", "transfer_round")


def assert_same_ppipe(ref, fast) -> None:
    assert_same(ref, fast)
    assert len(fast.engine.policies) == 0 and len(ref.engine.policies) == 1  # each ran where it says
    assert ref.extra == fast.extra and ref.extra["policy_stats"]["dispatched"] > 0


@st.composite
def workloads(draw, horizon=60_000):
    """(block profiles, plan, trace) over ``horizon`` µs: see the module docstring."""
    # on a grid every time is a multiple of 100 µs: equal GPU starts, link slots, timers at arrival times
    grid = draw(st.booleans())
    unit = 500 if grid else 1
    n_models = draw(st.integers(1, 3))
    names = [f"m{i}" for i in range(n_models)]
    profs = {}
    for name in names:
        lat = {}
        for hw, k in KINDS:
            base = np.array([draw(st.integers(50 // unit + 1, 900 // unit + 1)) * unit * k for _ in range(BLOCKS)],
                            np.int64)
            per = draw(st.sampled_from([0.2, 0.6, 1.0]))
            lat[(hw, k)] = np.array([[max(1, int(b * (1 + per * (n - 1)))) for n in range(1, MAXB + 1)]
                                     for b in base], np.int64)
        cut = np.array([draw(st.integers(0, 3)) * 25_000 if grid else draw(st.integers(0, 60_000))
                        for _ in range(BLOCKS - 1)], np.float64)
        profs[name] = BlockProfile(name, BLOCKS, lat, cut, 1000.0)
    pipes = []
    for name in names:
        for _ in range(draw(st.integers(0 if name == names[-1] else 1, 3))):
            n_st = draw(st.integers(1, 3))
            cuts = sorted(draw(st.lists(st.integers(1, BLOCKS - 1), min_size=n_st - 1, max_size=n_st - 1,
                                        unique=True)))
            bounds = [0, *cuts, BLOCKS]
            stages = []
            for j in range(n_st):
                hw, k = draw(st.sampled_from(KINDS))
                stages.append(Stage(hw, k, bounds[j], bounds[j + 1], draw(st.integers(1, 3)), 0, 0, 1.0))
            pipes.append(Pipeline(name, draw(st.integers(1, MAXB)), tuple(stages)))
    cluster = custom_cluster({"A": 90, "B": 90}, draw(st.sampled_from([0.1, 0.5, 2.0] if grid else [0.1, 0.5, 2.0, 10.0])),
                             {"A": draw(st.integers(1, 6)), "B": draw(st.integers(1, 4))})
    plan = PipelinePlan(pipes, cluster, {n: 1.0 for n in names}, {n: 5000 for n in names}, 0.0, "test")
    rng = np.random.default_rng(draw(st.integers(0, 10_000)))
    rate = draw(st.sampled_from([300.0, 2000.0, 8000.0]))
    arrs, slos = [], []
    for name in names:
        a = poisson(rng, rate * (0.3 + rng.random()), horizon)
        if draw(st.booleans()):  # equal arrival times within the stream
            a = np.sort(np.concatenate([a, a[::3]]))
        if grid:
            a = a // 100 * 100
        arrs.append(a)
        slos.append(int(draw(st.sampled_from([1_500, 4_000, 12_000, 40_000]))) + (0 if grid else draw(st.integers(0, 99))))
    if draw(st.booleans()):  # a second stream of a model: equal times across streams
        arrs.append(arrs[0][::2].copy())
        slos.append(slos[0] * 2)
        names = [*names, names[0]]
    return profs, plan, assemble(arrs, names, slos)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.booleans(), st.booleans())
def test_fast_ppipe_equals_reference(work, wait, index):
    """The paper's rules."""
    _same(work, {"wait": wait}, index)


@pytest.mark.parametrize("rule", RULES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(work=workloads(), wait=st.booleans(), all_rules=st.booleans())
def test_fast_ppipe_equals_reference_under_artifact_rules(rule, work, wait, all_rules):
    """Each artifact rule switch alone (core/pipelines/rules.py), and all six at once (``--rules artifact``)."""
    cfg = dict.fromkeys(RULES, True) if all_rules else {rule: True}
    _same(work, {"wait": wait, **cfg}, True)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(horizon=300_000), st.booleans())
def test_fast_ppipe_equals_reference_on_longer_traces(work, wait):
    """Longer traces reach rarer link states: a transfer whose downlink frees only when its uplink is taken
    again (Algorithm 2's common slot of both links). A kernel asking the downlink alone passed the 60 ms
    examples above and once failed a run of these (not every run: the state stays rare)."""
    _same(work, {"wait": wait}, True)


def _same(work, cfg, index):
    profs, plan, trace = work
    ref = simulate(trace, profs, "ppipe", cfg, plan=plan,
                   engine=EngineConfig(reserved="record", path="reference", pool_index=index))
    fast = simulate(trace, profs, "ppipe", cfg, plan=plan, engine=FAST)
    assert_same(ref, fast)
    assert len(fast.engine.policies) == 0 and len(ref.engine.policies) == 1
    assert ref.extra == fast.extra


def test_fast_ppipe_refuses_what_it_does_not_cover():
    profs, plan, trace = _tiny()
    free = OverheadConfig(base_us=0.0, per_worker_us=0.0)  # an overhead model (free): not covered
    for reserved in ("events", "record"):
        with pytest.raises(UserError, match="fast path of 'ppipe' covers"):
            simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved=reserved, path="fast"),
                     overhead=free)
        # auto: the reference engine, silently
        res = simulate(trace, profs, "ppipe", plan=plan, overhead=free, engine=EngineConfig(reserved=reserved))
        assert len(res.engine.policies) == 1


def test_fast_ppipe_covers_the_event_executed_reference():
    """The API's default ``reserved="events"`` (each stage an event) and ``record`` are speed switches of the
    reference with the same tables, so the kernel covers both (the API and the CLI take the same engine)."""
    profs, plan, trace = _tiny()
    events = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="events", path="reference"))
    fast = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="events", path="fast"))
    assert_same_ppipe(events, fast)


def test_fast_ppipe_is_the_default_with_record_and_empty_trace():
    profs, plan, trace = _tiny()
    res = simulate(trace, profs, "ppipe", plan=plan, engine=EngineConfig(reserved="record"))
    assert len(res.engine.policies) == 0  # auto: the fast path
    empty = trace.head(0)
    ref = simulate(empty, profs, "ppipe", plan=plan, engine=RECORD)
    fast = simulate(empty, profs, "ppipe", plan=plan, engine=FAST)
    assert ref.extra == fast.extra == {"policy_stats": {"probes": 0, "dispatched": 0}}


def _tiny():
    lat = {kind: np.array([[200 * (n + 1) for n in range(MAXB)]] * BLOCKS, np.int64) for kind in KINDS}
    profs = {"m0": BlockProfile("m0", BLOCKS, lat, np.full(BLOCKS - 1, 1000.0), 1000.0)}
    pipe = Pipeline("m0", 2, (Stage("A", 1, 0, 2, 2, 0, 0, 1.0), Stage("B", 1, 2, 4, 2, 0, 0, 1.0)))
    plan = PipelinePlan([pipe], custom_cluster({"A": 4, "B": 4}, 10.0), {"m0": 1.0}, {"m0": 9000}, 0.0, "test")
    trace = assemble([poisson(np.random.default_rng(1), 2000.0, 50_000)], ["m0"], [9000])
    return profs, plan, trace


# --------------------------------------------------------------------------- three fixed medium workloads

DATA = PPIPE_DATA
needs_data = needs_ppipe


@pytest.fixture(scope="module")
def g1_plan():
    from shepherd.core.pipelines.cluster import make_cluster
    from shepherd.experiments.ppipe import common as c

    return c.plan("ppipe", make_cluster("HC1-L"), c.groups()[0], "poisson"), c


@needs_data
@pytest.mark.parametrize("lf", [0.8, 1.0, 1.2])
def test_fast_ppipe_equals_reference_on_100k_requests(g1_plan, lf):
    """The authors' G1 on HC1-L (PPipe MILP, paper rules), Poisson at load factor 0.8 / 1.0 / 1.2."""
    plan, c = g1_plan
    seconds = 100_000 / (lf * plan.normalized_xput) + 1.0
    trace = c.make_trace(plan.rates(lf), plan.slo_us, seconds, 7, "poisson")
    assert trace.height >= 100_000
    ref = simulate(trace, c.profiles(), "ppipe", plan=plan, engine=RECORD)
    fast = simulate(trace, c.profiles(), "ppipe", plan=plan, engine=FAST)
    assert_same_ppipe(ref, fast)
    att = float((fast.recorder.r_outcome == 1).mean())
    assert (att > 0.99) if lf < 1.0 else (0.5 < att < 1.0)  # light load served; overload drops some


# --------------------------------------------------------------------------- the common slot of both links

def _seeded_profile(rng, name: str, block_us: tuple[int, int], maxb: int, cut_bytes: tuple[int, int]):
    """A block profile on GPU kinds A and B drawn from ``rng``: each block's batch-1 latency in ``block_us``,
    +60 % per extra request up to batch ``maxb``; cut sizes in ``cut_bytes``."""
    lat = {}
    for kind in (("A", 1), ("B", 1)):
        base = rng.integers(*block_us, BLOCKS)
        lat[kind] = np.array([[int(b * (1 + 0.6 * (n - 1))) for n in range(1, maxb + 1)] for b in base], np.int64)
    return BlockProfile(name, BLOCKS, lat, rng.integers(*cut_bytes, BLOCKS - 1).astype(np.float64), 1000.0)


def _link_heavy(seed: int, per_server: int):
    """Three DNNs, three two-stage pipelines each (A then B), ``per_server`` GPUs of a type per server and
    0.5 Gbit/s links: transfers of 10–60 kB take longer than the stages, so pipelines queue on shared uplinks
    and downlinks and a downlink often frees only when the previous server's uplink is taken again."""
    rng = np.random.default_rng(seed)
    names = ["m0", "m1", "m2"]
    profs, pipes = {}, []
    for name in names:
        profs[name] = _seeded_profile(rng, name, (100, 600), MAXB, (10_000, 60_000))
        for _ in range(3):
            cut = int(rng.integers(1, BLOCKS))
            pipes.append(Pipeline(name, int(rng.integers(1, MAXB + 1)),
                                  (Stage("A", 1, 0, cut, int(rng.integers(1, 3)), 0, 0, 1.0),
                                   Stage("B", 1, cut, BLOCKS, int(rng.integers(1, 3)), 0, 0, 1.0))))
    cluster = custom_cluster({"A": 40, "B": 40}, 0.5, {"A": per_server, "B": per_server})
    plan = PipelinePlan(pipes, cluster, {n: 1.0 for n in names}, {n: 20_000 for n in names}, 0.0, "test")
    trace = assemble([poisson(rng, 3000.0, 300_000) for _ in names], names, [20_000] * 3)
    return profs, plan, trace


@pytest.mark.parametrize("seed,per_server", [(11, 4), (6, 4), (7, 2)])
def test_fast_ppipe_common_link_slot(monkeypatch, seed, per_server):
    """Algorithm 2's transfer slot is the earliest time both the previous server's uplink and this server's
    downlink are free: on these seeded workloads the reference meets, hundreds of times, a downlink that frees
    only when the uplink is taken again (counted here), and the kernel must agree with it. (The random
    examples above reach that state rarely: a kernel asking the downlink alone passed them.)"""
    from shepherd.core.pipelines import reservations

    conflicts = []
    plain = reservations._link_slot

    def counted(fit, up, down, ts, ln):
        s = fit(down, ts, ln)
        if s != ts and fit(up, s, ln) != s:
            conflicts.append(ts)
        return plain(fit, up, down, ts, ln)

    monkeypatch.setattr(reservations, "_link_slot", counted)
    profs, plan, trace = _link_heavy(seed, per_server)
    ref = simulate(trace, profs, "ppipe", plan=plan, engine=RECORD)
    assert len(conflicts) >= 100
    fast = simulate(trace, profs, "ppipe", plan=plan, engine=FAST)
    assert_same_ppipe(ref, fast)


# --------------------------------------------------------------------------- rule (b) at large planned batches

def _large_batches(seed: int):
    """Two DNNs, two two-stage pipelines each, planned batches of 16–24 on fast links, SLOs a little above a
    full batch's path: rule (b) admits a new head only if a batch of round(0.95·bs) … bs meets its deadline,
    a range that is more than the planned size alone only from bs = 11 on (the random examples plan ≤ 4)."""
    rng = np.random.default_rng(seed)
    big = 24
    names = ["m0", "m1"]
    profs, pipes, slos = {}, [], []
    for name in names:
        profs[name] = _seeded_profile(rng, name, (100, 300), big, (1_000, 5_000))
        lat = profs[name].lat
        batches = [int(x) for x in rng.integers(16, big + 1, 2)]
        for bs in batches:
            cut = int(rng.integers(1, BLOCKS))
            pipes.append(Pipeline(name, bs, (Stage("A", 1, 0, cut, 2, 0, 0, 1.0),
                                             Stage("B", 1, cut, BLOCKS, 2, 0, 0, 1.0))))
        full = int(lat[("A", 1)][:, max(batches) - 1].sum() + lat[("B", 1)][:, max(batches) - 1].sum())
        slos.append(int(full * 1.15))
    cluster = custom_cluster({"A": 8, "B": 8}, 10.0, {"A": 2, "B": 2})
    plan = PipelinePlan(pipes, cluster, {n: 1.0 for n in names}, dict(zip(names, slos)), 0.0, "test")
    trace = assemble([poisson(rng, 9000.0, 400_000) for _ in names], names, slos)
    return profs, plan, trace


@pytest.mark.parametrize("seed", [1, 2])
def test_fast_ppipe_head_admission_at_large_batches(monkeypatch, seed):
    """Rule (b) with the other artifact rules on planned batches of 16–24, where its admission range is more
    than the planned size (at the random examples' batches ≤ 4 it is the planned size alone). A kernel whose
    range starts at round(0.9·bs), or at bs, passed every test before this one and fails both seeds here
    (checked once by editing the kernel)."""
    from shepherd.core.policies import ppipe as policy

    in_range = []
    plain = policy.probe_scored  # rule (a) is on: Algorithm 2's probe is the scored scan

    def counted(res, pipe, bs, now, *a):
        if int(0.95 * pipe.batch + 0.5) <= bs < pipe.batch:
            in_range.append(now)
        return plain(res, pipe, bs, now, *a)

    monkeypatch.setattr(policy, "probe_scored", counted)
    profs, plan, trace = _large_batches(seed)
    cfg = dict.fromkeys(RULES, True)
    ref = simulate(trace, profs, "ppipe", cfg, plan=plan, engine=RECORD)
    assert len(in_range) >= 100  # the reference asked about batches in the range below the planned one
    fast = simulate(trace, profs, "ppipe", cfg, plan=plan, engine=FAST)
    assert_same_ppipe(ref, fast)
