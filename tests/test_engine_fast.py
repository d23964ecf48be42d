"""The compiled fast paths (core/engine/fast/): the reference engine's tables, identical, for the same inputs.

Clockwork, Flex, Flex-NP and Flex with preemption (any λ > 1, exit points, stretched batches), in one serving
group and in several (Herd groups: each group's kernel run, the runs concatenated; batch ids canonical); hypothesis-generated
small workloads and three fixed medium ones (≥ 100 k requests) per fast path."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import assert_user_error
from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import EngineConfig, OverheadConfig, simulate, verify
from shepherd.core.errors import UserError
from shepherd.core.policies import registry
from shepherd.core.policies.base import Policy
from shepherd.core.profiles import load_builtin
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble
from test_engine_groups import plan_frame

#: each test compares a compiled fast path with the reference engine (conftest.py: re-records it verified)
pytestmark = pytest.mark.agreement

pytest.importorskip("numba")
PROF = load_builtin("shepherd-v100")
MODELS = ["ResNet18", "ResNet50", "ResNet101", "DenseNet121", "ResNeSt269", "ResNet152"]


def workload(seed: int, n_streams: int, horizon_us: int, rate: float, ties: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    arrs = [poisson(rng, rate * (0.3 + rng.random()), horizon_us) for _ in range(n_streams)]
    if ties:  # equal arrival times across and within streams
        arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-1][::2], arrs[0][::5]]))
    slos = [int(x) for x in rng.choice([15_000, 40_000, 90_000, 250_000], n_streams)]
    return assemble(arrs, [MODELS[s % len(MODELS)] for s in range(n_streams)], slos)


def assert_same(a, b) -> None:
    """Every table identical (core/engine/verify.py: requests, batches, workers, summary, shed requests, the
    policy's counters); a reference run and a fast one that agree are evidence for the fast path's stamp."""
    verify.compare(a, b, by="pytest -m agreement")


OVERHEADS = [
    None,  # Clockwork's calibrated default (admission control on, bound 50 ms)
    OverheadConfig(mode="none"),
    OverheadConfig(base_us=40.0, per_worker_us=3.0, per_request_us=25.0, arrival_us=120.0, max_lag_us=3_000.0),
    OverheadConfig(base_us=5.0, per_request_us=10.0, arrival_us=0.0, max_lag_us=500.0),
    OverheadConfig(base_us=5.0, arrival_us=60.0, max_lag_us=float("inf")),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 5), streams=st.integers(1, 6),
       rate=st.sampled_from([200.0, 1500.0, 8000.0]), ties=st.booleans(), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 64, 1 << 15]), max_batch=st.sampled_from([1, 8, 128]))
def test_fast_clockwork_equals_reference(seed, gpus, streams, rate, ties, ovh, chunk, max_batch):
    trace = workload(seed, streams, 120_000, rate, ties)
    kw = dict(gpus=gpus, seed=seed, overhead=OVERHEADS[ovh], max_batch=max_batch)
    ref = simulate(trace, PROF, "clockwork", engine=EngineConfig(chunk=chunk, path="reference"), **kw)
    fast = simulate(trace, PROF, "clockwork", engine=EngineConfig(chunk=chunk, path="fast"), **kw)
    assert_same(ref, fast)


#: Flex's own default overhead (O(G) per arrival and decision, admission control on) is OVERHEADS[0] here
FLEX_OVERHEADS = [None] + OVERHEADS[1:]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 5), streams=st.integers(1, 6),
       rate=st.sampled_from([200.0, 1500.0, 8000.0]), ties=st.booleans(), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 64, 1 << 15]), max_batch=st.sampled_from([1, 8, 128]),
       policy=st.sampled_from(["flex", "flex-np", "flex+preemption"]),
       lam=st.sampled_from([1.01, 1.5, 3.03, 8.0]), exits=st.sampled_from([0, 1, 4]),
       stretch=st.sampled_from([0.0, 0.05]))
def test_fast_flex_equals_reference(seed, gpus, streams, rate, ties, ovh, chunk, max_batch, policy, lam, exits,
                                    stretch):
    """Flex, Flex-NP, and Flex with preemption under a varied λ and exit points (the cascades of low λ)."""
    trace = workload(seed, streams, 120_000, rate, ties)
    name, cfg = policy, None
    if policy == "flex+preemption":
        name, cfg = "flex", {"lam": lam, "exit_points": exits, "exit_overhead": stretch}
    kw = dict(gpus=gpus, seed=seed, overhead=FLEX_OVERHEADS[ovh], max_batch=max_batch)
    ref = simulate(trace, PROF, name, cfg, engine=EngineConfig(chunk=chunk, path="reference"), **kw)
    fast = simulate(trace, PROF, name, cfg, engine=EngineConfig(chunk=chunk, path="fast"), **kw)
    assert_same(ref, fast)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), sizes=st.lists(st.integers(1, 3), min_size=2, max_size=4),
       policy=st.sampled_from(["flex", "flex-np", "clockwork"]), rate=st.sampled_from([300.0, 1500.0, 6000.0]),
       ovh=st.sampled_from(range(len(OVERHEADS))), lam=st.sampled_from([1.2, 3.03]))
def test_fast_groups_equal_reference(seed, sizes, policy, rate, ovh, lam):
    """Several serving groups (equal arrival times across them): the kernels' runs concatenated
    give the single loop's batch ids."""
    rng = np.random.default_rng(seed)
    n = 2 * len(sizes) + 1
    arrs = [poisson(rng, rate * (0.5 + rng.random()), 150_000) for _ in range(n)]
    arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-2][::2]]))  # ties across groups (stream n − 2: the last)
    slos = [int(x) for x in rng.choice([20_000, 40_000, 90_000, 250_000], n)]
    trace = assemble(arrs, [MODELS[s % len(MODELS)] for s in range(n)], slos)
    plan = plan_frame(sizes, [s % len(sizes) for s in range(n)])
    cfg = {"lam": lam} if policy == "flex" else None
    kw = dict(plan=plan, seed=seed, overhead=FLEX_OVERHEADS[ovh] if policy != "clockwork" else OVERHEADS[ovh])
    ref = simulate(trace, PROF, policy, cfg, engine=EngineConfig(path="reference"), **kw)
    fast = simulate(trace, PROF, policy, cfg, engine=EngineConfig(path="fast"), **kw)
    assert_same(ref, fast)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 4), streams=st.integers(1, 6),
       rate=st.sampled_from([1500.0, 8000.0]), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 1 << 15]), step=st.sampled_from([1, 2, 5, 33]),
       policy=st.sampled_from(["clockwork", "flex", "flex-np", "flex+preemption"]), groups=st.booleans())
def test_chunked_feed_gives_the_whole_feeds_tables(seed, gpus, streams, rate, ovh, chunk, step, policy, groups):
    """The trace fed to a kernel a few requests at a time (``stream_chunk``; rows written out as they become
    final) gives the tables of one whole feed, and the summary kept as running aggregates
    (``record="summary"``) is the whole tables' summary, byte for byte."""
    trace = workload(seed, streams, 100_000, rate, True)
    name, cfg = policy, None
    if policy == "flex+preemption":
        name, cfg = "flex", {"lam": 1.5, "exit_points": 1}
    ovhs = OVERHEADS if policy == "clockwork" else FLEX_OVERHEADS
    kw = dict(seed=seed, overhead=ovhs[ovh])
    if groups and streams > 1:
        kw["plan"] = plan_frame([gpus, 1], [s % 2 for s in range(streams)])
    else:
        kw["gpus"] = gpus
    whole = simulate(trace, PROF, name, cfg, engine=EngineConfig(chunk=chunk, path="fast", stream_chunk=1 << 30),
                     **kw)
    fed = simulate(trace, PROF, name, cfg, engine=EngineConfig(chunk=chunk, path="fast", stream_chunk=step), **kw)
    assert_same(whole, fed)
    summ = simulate(trace, PROF, name, cfg, engine=EngineConfig(chunk=chunk, path="fast", stream_chunk=step,
                                                                record="summary"), **kw)
    assert summ.summary_frame().equals(whole.summary_frame())
    assert summ.workers_frame().equals(whole.workers_frame())
    assert summ.batch_size_distribution().equals(whole.batch_size_distribution())
    assert summ.shed == whole.shed
    if "gpus" in kw:  # one group: only the aggregates were kept
        with pytest.raises(ValueError, match="summary"):
            summ.requests_frame()


@pytest.mark.parametrize("path", ["reference", "fast"])
def test_summary_from_the_arrays_is_the_summary_of_the_tables(path):
    """``summary_frame()`` reads the recorder's arrays; ``metrics.summarize_tables`` the written tables: the
    same row (preemptions and dropped requests included)."""
    from shepherd.core import metrics

    trace = workload(3, 5, 150_000, 8000.0, True)
    res = simulate(trace, PROF, "flex", {"lam": 1.5, "exit_points": 1}, gpus=2, seed=3,
                   engine=EngineConfig(path=path))
    assert res.summary_frame()["preemptions"][0] > 0 and res.dropped > 0
    tables = metrics.summarize_tables(res.requests_frame(), res.batches_frame(), res.workers_frame(), res.policy,
                                      {"seed": res.seed})
    assert res.summary_frame().equals(tables)


@pytest.mark.parametrize("fields, needle", [({"stream_chunk": 0}, "stream_chunk"), ({"record": "rows"}, "record")])
def test_engine_config_refuses_a_bad_feed_or_record_switch(fields, needle):
    with pytest.raises(UserError, match=needle):
        simulate(workload(0, 2, 50_000, 1500.0, False), PROF, "flex", gpus=2, engine=EngineConfig(**fields))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 4), streams=st.integers(1, 6),
       policy=st.sampled_from(["clockwork", "flex", "flex+preemption"]), step=st.sampled_from([3, 1 << 20]))
def test_a_kernel_that_runs_out_of_batch_log_grows_it(seed, gpus, streams, policy, step):
    """The kernels' loops allocate nothing: with no spare room in the batch log they pause, the log grows
    and they resume (``GROW``) — the same tables as the reference engine's."""
    from shepherd.core.engine.fast import stream

    trace = workload(seed, streams, 100_000, 8000.0, True)
    name, cfg = policy, None
    if policy == "flex+preemption":
        name, cfg = "flex", {"lam": 1.5, "exit_points": 1}
    ref = simulate(trace, PROF, name, cfg, gpus=gpus, seed=seed, engine=EngineConfig(path="reference"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream, "LOG_ROOM", 0)
        fed = simulate(trace, PROF, name, cfg, gpus=gpus, seed=seed,
                       engine=EngineConfig(path="fast", stream_chunk=step))
    assert_same(ref, fed)


SHEDDING = OverheadConfig(base_us=40.0, per_request_us=25.0, arrival_us=300.0, max_lag_us=3_000.0)


def medium(seed: int, slos: list[int], per_stream: float = 300.0, groups: int = 1):
    """13 models (Shepherd Table 4's CV rows), one Poisson stream each per group, ≥ 100 k requests."""
    rng = np.random.default_rng(seed)
    models = ["ResNet18", "ResNet34", "ResNet50", "ResNet101", "ResNet152", "ResNeSt50", "ResNeSt101",
              "ResNeSt200", "ResNeSt269", "DenseNet121", "DenseNet161", "DenseNet169", "DenseNet201"]
    arrs = [poisson(rng, per_stream / groups, 27_000_000) for _ in range(groups) for _ in models]
    trace = assemble(arrs, models * groups, [slos[s % len(slos)] for s in range(len(arrs))])
    assert trace.height >= 100_000
    return trace


@pytest.mark.parametrize("ovh", [None, SHEDDING])
def test_fast_clockwork_equals_reference_on_100k_requests(ovh):
    """A fixed medium workload: 13 models on 12 GPUs served (default overhead), or overloaded and shedding."""
    trace = medium(18, [250_000])
    ref = simulate(trace, PROF, "clockwork", gpus=12, overhead=ovh, engine=EngineConfig(path="reference"))
    fast = simulate(trace, PROF, "clockwork", gpus=12, overhead=ovh, engine=EngineConfig(path="fast"))
    assert_same(ref, fast)
    if ovh:
        assert ref.shed > 0  # admission control is exercised
    else:
        assert ref.good > 0.5 * trace.height


def test_fast_clockwork_equals_reference_on_100k_requests_in_groups():
    """The third fixed medium workload: three 4-GPU groups, mixed SLOs."""
    trace = medium(19, [60_000, 250_000], groups=3)
    plan = plan_frame([4, 4, 4], [s // 13 for s in range(39)])
    ref = simulate(trace, PROF, "clockwork", plan=plan, engine=EngineConfig(path="reference"))
    fast = simulate(trace, PROF, "clockwork", plan=plan, engine=EngineConfig(path="fast"))
    assert_same(ref, fast)


FLEX_MEDIUM = {
    # Flex's default overhead on 12 GPUs, mixed SLOs: preemptions
    "flex": ("flex", None, None, dict(gpus=12), 1),
    # Flex-NP overloaded with a costly scheduler: admission control sheds
    "flex-np": ("flex-np", None, SHEDDING, dict(gpus=12), 1),
    # Flex in three Herd-like groups of 4, a low λ: cascades, and the merge of group runs
    "flex-groups": ("flex", {"lam": 1.5}, None, dict(plan=plan_frame([4, 4, 4], [s // 13 for s in range(39)])), 3),
}


@pytest.mark.parametrize("case", sorted(FLEX_MEDIUM))
def test_fast_flex_equals_reference_on_100k_requests(case):
    policy, cfg, ovh, where, groups = FLEX_MEDIUM[case]
    trace = medium(20, [40_000, 90_000, 250_000], per_stream=300.0 if ovh is None else 600.0, groups=groups)
    ref = simulate(trace, PROF, policy, cfg, overhead=ovh, engine=EngineConfig(path="reference"), **where)
    fast = simulate(trace, PROF, policy, cfg, overhead=ovh, engine=EngineConfig(path="fast"), **where)
    assert_same(ref, fast)
    preempted = int((ref.requests_frame()["preemptions"] > 0).sum())
    if policy == "flex":
        assert preempted > 0  # preemption is exercised
    else:
        assert ref.shed > 0 and preempted == 0


class OneAtATime(Policy):
    """A policy with no fast path (the built-in ones without one need other artifacts): each request runs
    alone on the first idle worker, else is dropped."""

    def on_arrival(self, now, rid, model, deadline, stream):
        idle = [w for w in self.act.workers if not self.act.busy(w)]
        if idle:
            self.act.start(idle[0], model, [rid], now)
        else:
            self.act.drop([rid], now)


@pytest.fixture
def no_fast_path(monkeypatch):
    """``one-at-a-time``, registered in-process for one test: a policy without a fast path."""
    monkeypatch.setitem(registry.POLICIES, "one-at-a-time",
                        registry.PolicySpec("one-at-a-time", OneAtATime, registry.NoOptions, ""))
    return "one-at-a-time"


def test_fast_path_refuses_what_it_does_not_cover(no_fast_path):
    trace = workload(1, 2, 50_000, 500.0, False)
    with pytest.raises(UserError, match="no fast path.*clockwork, flex, flex-np, nexus, ppipe, symphony, symphony-wc"):
        simulate(trace, PROF, no_fast_path, gpus=2, engine=EngineConfig(path="fast"))
    with pytest.raises(UserError, match="covers"):
        simulate(trace, PROF, "clockwork", {"admission": "predictive"}, gpus=2, engine=EngineConfig(path="fast"))
    for option in ("schedule_ahead_ms", "slo_buffer_ms"):  # Clockwork as Symphony ran it: reference only
        with pytest.raises(UserError, match="covers"):
            simulate(trace, PROF, "clockwork", {option: 5.0}, gpus=2, engine=EngineConfig(path="fast"))
    with pytest.raises(UserError, match="covers"):
        simulate(trace, PROF, "flex", gpus=2, overhead=OverheadConfig(mode="emulation"),
                 engine=EngineConfig(path="fast"))
    with pytest.raises(UserError, match="reference or fast"):
        EngineConfig(path="turbo").validate()


def test_auto_is_the_default_and_falls_back_silently(no_fast_path):
    """``auto`` (the default) runs the fast path where it covers the run, else the reference engine: the same
    tables either way, and the reference's policy objects only where the reference ran."""
    assert EngineConfig().path == "auto"
    trace = workload(3, 3, 80_000, 1500.0, True)
    for policy, cfg, fast in (("flex", None, True), ("clockwork", {"admission": "predictive"}, False),
                              ("clockwork", {"schedule_ahead_ms": 10.0, "slo_buffer_ms": 5.0}, False),
                              ("nexus", None, True), (no_fast_path, None, False)):
        auto = simulate(trace, PROF, policy, cfg, gpus=2)
        ref = simulate(trace, PROF, policy, cfg, gpus=2, engine=EngineConfig(path="reference"))
        assert_same(auto, ref)
        assert (len(auto.engine.policies) == 0) == fast


def test_cli_engine_fast(cli, tmp_path, no_fast_path):
    write_artifact(workload(2, 3, 300_000, 1500.0, True), tmp_path / "t.parquet", "trace", make_provenance())
    for policy in ("clockwork", "flex", "symphony", "nexus"):
        outs = {}
        for eng in ("reference", "fast", "default"):
            r = cli("simulate", "--policy", policy, "--trace", tmp_path / "t.parquet", "--gpus", "3",
                    *(["--engine", eng] if eng != "default" else []), "-o", tmp_path / policy / eng)
            assert r.code == 0, r.err
            outs[eng] = {p.name: p.read_bytes() for p in sorted((tmp_path / policy / eng).glob("*.parquet"))}
        assert len(outs["fast"]) == 4 and outs["fast"] == outs["reference"] == outs["default"]
    assert_user_error(cli("simulate", "--policy", no_fast_path, "--trace", tmp_path / "t.parquet", "--gpus", "3",
                          "--engine", "fast", "-o", tmp_path / "x"), "clockwork, flex, flex-np, nexus, ppipe, symphony")
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------------- Symphony (§4.3, Appendix C)

def _mixed_profiles() -> pl.DataFrame:
    """The V100 table and a slower copy of it ("T4", every latency × 1.7): a group of two hardware types."""
    slow = PROF.with_columns(hardware=pl.lit("T4"), latency_ms=pl.col("latency_ms") * 1.7,
                             alpha_ms=pl.col("alpha_ms") * 1.7, beta_ms=pl.col("beta_ms") * 1.7)
    return pl.concat([PROF, slow])


def _one_group(hardware: list[str]) -> pl.DataFrame:
    """A plan of one serving group with these workers (every stream routed to it)."""
    rows = [(0, "worker", f"w{w}", hw) for w, hw in enumerate(hardware)]
    return pl.DataFrame(rows, schema={"group": pl.Int32, "role": pl.String, "name": pl.String,
                                      "hardware": pl.String}, orient="row")


def symphony_workload(seed: int, n_streams: int, horizon_us: int, rate: float, ties: bool,
                      slack: tuple[float, ...] = (1.15, 2.0, 4.0, 12.0)) -> pl.DataFrame:
    """Like :func:`workload`, with SLOs Symphony accepts: a multiple of the model's ℓ(1) on the V100 table
    (tight to loose; Symphony.prepare rejects an SLO below ℓ(1))."""
    rng = np.random.default_rng(seed)
    arrs = [poisson(rng, rate * (0.3 + rng.random()), horizon_us) for _ in range(n_streams)]
    if ties:
        arrs[0] = np.sort(np.concatenate([arrs[0], arrs[-1][::2], arrs[0][::5]]))
    names = [MODELS[s % len(MODELS)] for s in range(n_streams)]
    l1 = {r["model"]: r["latency_ms"] for r in PROF.filter(pl.col("batch") == 1).iter_rows(named=True)}
    slos = [int(l1[m] * 1000 * float(rng.choice(slack))) + 1 for m in names]
    return assemble(arrs, names, slos)


def assert_same_symphony(ref, fast) -> None:
    """The tables, and the policy's counters (timers cancelled, requests pruned, batches)."""
    assert_same(ref, fast)
    assert len(fast.engine.policies) == 0 and len(ref.engine.policies) == 1  # each ran where it says
    assert ref.extra == fast.extra and fast.extra["policy_stats"]["stale_timer_fired"] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), gpus=st.integers(1, 5), streams=st.integers(1, 6),
       rate=st.sampled_from([200.0, 1500.0, 8000.0]), ties=st.booleans(), ovh=st.sampled_from(range(len(OVERHEADS))),
       chunk=st.sampled_from([1, 7, 64, 1 << 15]), max_batch=st.sampled_from([1, 2, 8, 128]),
       policy=st.sampled_from(["symphony", "symphony-wc"]), rule=st.sampled_from(["text", "sched_at", "target-batch", "beta-lambda-authors"]),
       prune=st.sampled_from(["window", "clipper"]), rank=st.sampled_from(["schedulable", "all"]),
       window_ms=st.sampled_from([1000.0, 20.0]), mixed=st.booleans())
def test_fast_symphony_equals_reference(seed, gpus, streams, rate, ties, ovh, chunk, max_batch, policy, rule, prune,
                                        rank, window_ms, mixed):
    """Symphony and Symphony-WC under every rule, prune and rank, light load to overload, Symphony's own
    (free) scheduler or a costly one with admission control, one hardware type or two in the group."""
    trace = symphony_workload(seed, streams, 120_000, rate, ties)
    cfg = {"rule": rule, "prune": prune, "rank": rank, "rate_window_ms": window_ms}
    kw = dict(seed=seed, overhead=OVERHEADS[ovh], max_batch=max_batch)
    if mixed:
        kw.update(plan=_one_group(["T4", "V100", "T4", "V100", "V100"][:gpus]), hardware="V100")
        prof = _mixed_profiles()
    else:
        kw.update(gpus=gpus)
        prof = PROF
    ref = simulate(trace, prof, policy, cfg, engine=EngineConfig(chunk=chunk, path="reference"), **kw)
    fast = simulate(trace, prof, policy, cfg, engine=EngineConfig(chunk=chunk, path="fast"), **kw)
    assert_same_symphony(ref, fast)


SYMPHONY_MEDIUM = {
    # the default (§4.3's text rule, window prune) on 12 GPUs, served: timers and β·λ both decide
    "symphony": ("symphony", None, None, [90_000, 250_000], 300.0, dict(gpus=12)),
    # work-conserving, overloaded behind a costly scheduler: admission control sheds, pruning drops
    "symphony-wc": ("symphony-wc", None, SHEDDING, [90_000, 250_000], 600.0, dict(gpus=12)),
    # Appendix C's sched_at rule, Clipper pruning, rank="all", on a V100/T4 mix (decisions on the V100 table)
    "symphony-sched_at": ("symphony", {"rule": "sched_at", "prune": "clipper", "rank": "all",
                                       "rate_window_ms": 250.0}, None, [250_000], 300.0,
                          dict(plan=_one_group(["V100", "T4"] * 6), hardware="V100")),
    # the authors' kTargetBatchSize (bucketed rate meter, Eqs. 2–3's target batch), served on 12 GPUs
    "symphony-target-batch": ("symphony", {"rule": "target-batch"}, None, [90_000, 250_000], 300.0, dict(gpus=12)),
    # the authors' kBetaLambda (secant β, bucketed λ), rank="all", on the V100/T4 mix
    "symphony-beta-lambda-authors": ("symphony", {"rule": "beta-lambda-authors", "rank": "all"}, None,
                                     [250_000], 300.0, dict(plan=_one_group(["V100", "T4"] * 6), hardware="V100")),
}


@pytest.mark.parametrize("case", sorted(SYMPHONY_MEDIUM))
def test_fast_symphony_equals_reference_on_100k_requests(case):
    policy, cfg, ovh, slos, per_stream, where = SYMPHONY_MEDIUM[case]
    trace = medium(21, slos, per_stream=per_stream)
    prof = _mixed_profiles() if "plan" in where else PROF
    ref = simulate(trace, prof, policy, cfg, overhead=ovh, engine=EngineConfig(path="reference"), **where)
    fast = simulate(trace, prof, policy, cfg, overhead=ovh, engine=EngineConfig(path="fast"), **where)
    assert_same_symphony(ref, fast)
    stats = ref.extra["policy_stats"]
    if ovh is None:
        assert ref.good > 0.5 * trace.height and stats["timers_cancelled"] > 0
    else:
        assert ref.shed > 0 and stats["dropped_pruned"] > 0


def test_fast_symphony_refuses_what_it_does_not_cover():
    """Delays (a GPU granted its next batch ahead, booked), autoscaling, several sub-clusters: the reference
    engine only — ``--engine fast`` is an error, ``auto`` falls back to the same tables."""
    trace = symphony_workload(4, 3, 80_000, 1500.0, True)
    plan = plan_frame([1, 2], [0, 1, 1])
    for cfg, where in (({"d_ctrl_us": 200.0}, dict(gpus=2)), ({"d_data_us": 5.0}, dict(gpus=2)),
                       ({"autoscale_epoch_s": 0.02}, dict(gpus=2)), (None, dict(plan=plan))):
        for policy in ("symphony", "symphony-wc"):
            with pytest.raises(UserError, match=f"fast path of '{policy}' covers d_ctrl_us=0"):
                simulate(trace, PROF, policy, cfg, engine=EngineConfig(path="fast"), **where)
            auto = simulate(trace, PROF, policy, cfg, **where)
            ref = simulate(trace, PROF, policy, cfg, engine=EngineConfig(path="reference"), **where)
            assert_same(auto, ref)
            assert len(auto.engine.policies) > 0  # the reference ran
    with pytest.raises(UserError, match="covers"):
        simulate(trace, PROF, "symphony", gpus=2, overhead=OverheadConfig(mode="emulation"),
                 engine=EngineConfig(path="fast"))
    auto = simulate(trace, PROF, "symphony", gpus=2)  # the default configuration: the fast path
    assert len(auto.engine.policies) == 0


def test_fast_symphony_empty_trace_reports_the_reference_counters():
    """No request: the same (empty) tables and the same zero counters as the reference's policy object."""
    trace = symphony_workload(1, 2, 50_000, 500.0, False).head(0)
    for policy in ("symphony", "symphony-wc", "flex", "clockwork"):
        ref = simulate(trace, PROF, policy, gpus=2, engine=EngineConfig(path="reference"))
        fast = simulate(trace, PROF, policy, gpus=2, engine=EngineConfig(path="fast"))
        assert_same(ref, fast)
        assert ref.extra == fast.extra
    assert fast.extra == {} and ref.extra == {}  # clockwork keeps no counters
    sym = simulate(trace, PROF, "symphony", gpus=2, engine=EngineConfig(path="fast"))
    assert sym.extra["policy_stats"]["batches"] == 0
