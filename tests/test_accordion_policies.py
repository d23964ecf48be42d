"""Accordion Algorithm 2 and baselines on the engine seam: invariants over random streams."""

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shepherd.core.accordion.configs import builtin_layers
from shepherd.core.engine import simulate
from shepherd.core.errors import UserError

POLICIES = ["accordion", "fastest", "slo-conforming", "bbs", "one-stage"]
LAYERS = builtin_layers()


def stream(seed, n, span_s=20.0, mean_inst=5.0, slo_s=3.0, models=("VGG16", "ResNet50", "ResNet152")):
    rng = np.random.default_rng(seed)
    arr = np.sort(rng.integers(0, int(span_s * 1e6), n))
    slo = (rng.uniform(0.3, 1.5, n) * slo_s * 1e6).astype(np.int64)
    return pl.DataFrame({
        "arrival_us": arr, "stream": np.zeros(n, np.int32),
        "model": rng.choice(models, n).tolist(), "slo_us": slo, "deadline_us": arr + slo,
        "instances": np.maximum(1, rng.lognormal(np.log(mean_inst), 0.8, n)).astype(np.int32),
        "priority": rng.integers(0, 2, n).astype(np.int32)})


def run(trace, policy, **cfg):
    return simulate(trace, None, policy, {"eps": 16, **cfg}, artifacts={"layer_profiles": LAYERS})


def check_eps(res):
    seg = res.segments_frame()
    for _, g in seg.group_by("worker"):
        g = g.sort("start_us")
        s, e = g["start_us"].to_numpy(), g["end_us"].to_numpy()
        assert (s[1:] >= e[:-1]).all(), "an EP held by two queries at once"
    for _, g in seg.group_by("batch_id"):
        pts = np.unique(g["start_us"].to_numpy())
        for t in pts:
            held = g.filter((pl.col("start_us") <= t) & (pl.col("end_us") > t))
            assert held.height <= 8, "a query holds more than 8 EPs"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from(POLICIES), st.integers(5, 60))
def test_ep_exclusive_and_at_most_8(seed, policy, n):
    res = run(stream(seed, n), policy)
    check_eps(res)
    out = res.requests_frame()["outcome"]
    assert out.len() == n


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(20, 80), st.floats(0.0, 20.0))
def test_shrinking_keeps_shrunk_queries_on_time_and_instances_exact(seed, n, reconfig):
    trace = stream(seed, n, span_s=10.0, mean_inst=10.0, slo_s=12.0)
    res = run(trace, "accordion", reconfig_ms=reconfig)
    check_eps(res)
    pol = res.engine.policies[0]
    outcome = dict(zip(res.requests_frame()["request"].to_list(), res.requests_frame()["outcome"].to_list()))
    finish = dict(zip(res.requests_frame()["request"].to_list(), res.requests_frame()["finish_us"].to_list()))
    for q in pol.finished:
        assert sum(q.done) == q.instances and len(q.done) == len(q.segs)
        if len(q.done) > 1:  # shrunk: confirm_SLO held at every shrink, so the query is on time
            assert outcome[q.rid] == "served"
        # cross-check with the engine's clock: instances done in a segment follow from its recorded length,
        # and the last segment lasts exactly (reconfig +) fill + remaining instances × bottleneck
        for i, (depth, start, left) in enumerate(q.segs):
            c = pol.cfgs[q.model][depth - 1]
            end = q.segs[i + 1][1] if i + 1 < len(q.segs) else finish[q.rid]
            if i + 1 < len(q.segs):
                x = int(min(max(np.floor(((end - start) / 1000 - c.fill_ms) / c.bottleneck_ms + 1e-9), 0), left))
                assert q.done[i] == x and q.segs[i + 1][2] == left - x  # resumes from instance X+1
            else:
                cost = int(round(reconfig * 1000)) if i > 0 else 0
                assert end - start == cost + c.latency_us(left) and q.done[i] == left


def test_shrinks_happen_and_accordion_beats_fastest_under_load():
    # 120 queries of ≈ 8 instances in 200 s on 16 EPs: 1-EP load ≈ 0.7, more than 8-EP pipelines can carry
    trace = stream(3, 120, span_s=200.0, mean_inst=8.0, slo_s=60.0)
    acc = run(trace, "accordion", window=0)
    fast = run(trace, "fastest", window=0)
    assert acc.extra["policy_stats"]["shrinks"] > 0
    shrunk = [q for q in acc.engine.policies[0].finished if len(q.done) > 1]
    assert shrunk and all(sum(q.done) == q.instances for q in shrunk)
    served = set(acc.requests_frame().filter(pl.col("outcome") == "served")["request"].to_list())
    assert all(q.rid in served for q in shrunk)
    bad = lambda r: (r.requests_frame()["outcome"] != "served").sum()
    assert bad(acc) < bad(fast)


def test_predictor_drops_only_low_priority():
    trace = stream(5, 150, span_s=5.0, mean_inst=10.0, slo_s=2.0)
    res = run(trace, "fastest")
    out = res.requests_frame().join(trace.with_row_index("request").select(
        pl.col("request").cast(pl.Int64), "priority"), on="request")
    assert res.extra["policy_stats"]["dropped_by_predictor"] > 0
    dropped = out.filter(pl.col("outcome") == "dropped")
    assert dropped.height > 0 and set(dropped["priority"].to_list()) == {0}


def test_one_stage_uses_one_ep_and_high_priority_first():
    t = stream(1, 40, span_s=1.0)
    res = run(t, "one-stage", window=0)
    seg = res.segments_frame()
    assert seg.group_by("batch_id").len()["len"].max() == 1


@pytest.mark.parametrize("bad,msg", [
    (dict(instances=-3), "instances"), (dict(instances=10**9), "more than any configuration"),
    (dict(model="BERT"), "no layer profile")])
def test_bad_queries_are_user_errors(bad, msg):
    t = stream(0, 5)
    if "instances" in bad:
        t = t.with_columns(pl.lit(bad["instances"], pl.Int32).alias("instances"))
    else:
        t = t.with_columns(pl.lit(bad["model"]).alias("model"))
    with pytest.raises(UserError, match=msg):
        run(t, "accordion")


def test_too_many_eps_is_user_error():
    from shepherd.core.accordion.configs import check_eps
    with pytest.raises(UserError, match="1 to 8"):
        check_eps(9)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(20, 80))
def test_fewer_eps_than_the_fastest_only_when_enough(seed, n):
    """Algorithm 2 line 6: a query starts on fewer EPs than its best assignment only if they meet its SLO;
    one that no configuration serves in time waits for (or fetches) its best assignment."""
    trace = stream(seed, n, span_s=5.0, mean_inst=20.0, slo_s=4.0)
    pol = run(trace, "accordion", window=0).engine.policies[0]
    assert pol.finished
    for q in pol.finished:
        depth, start, left = q.segs[0]
        if depth < pol.fastest_depth(q.model, left):
            assert start + pol.lat_us(q.model, depth, left) <= q.deadline


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.integers(5, 60), st.integers(1, 16), st.integers(1, 8), st.floats(0.2, 8.0))
def test_fastest_takes_the_largest_feasible_ep_count(seed, n, eps, max_eps, load):
    """§4.2 (2): over random queue states (arrival bursts, server sizes, per-query caps) every Fastest query
    runs on min(8, max_eps, server EPs) EPs — never fewer, it waits instead."""
    trace = stream(seed, n, span_s=20.0 / load, mean_inst=5.0)
    res = simulate(trace, None, "fastest", {"eps": eps, "max_eps": max_eps, "window": 0},
                   artifacts={"layer_profiles": LAYERS})
    pol = res.engine.policies[0]
    assert len(pol.finished) == n
    for q in pol.finished:
        assert [d for d, _, _ in q.segs] == [min(8, max_eps, eps)]


def test_fastest_takes_the_maximum_even_where_a_shallower_pipeline_is_as_fast():
    """A raw profile with one dominant layer: 2 and 3 stages have the same bottleneck and fill, so the
    arg-min-latency depth is 2; the maximum feasible resources are 3 EPs."""
    from shepherd.core.accordion.layers import layer_frame
    lf = layer_frame([("toy", "cpu", i, f"toy.{i}", 1, x) for i, x in enumerate([10.0, 1.0, 1.0])])
    t = pl.DataFrame({"arrival_us": [0], "stream": [0], "model": ["toy"], "slo_us": [10**7],
                      "deadline_us": [10**7], "instances": [4]})
    pol = simulate(t, None, "fastest", {"eps": 8, "window": 0}, artifacts={"layer_profiles": lf}).engine.policies[0]
    assert pol.fastest_depth(0, 4) == 2 and pol.finished[0].segs[0][0] == 3


def _one_long_then_low(policy_cfg):
    """A 2-EP server: a long High query on its fastest (2-EP) pipeline, then a short Low query whose SLO
    needs 1 EP. Algorithm 1 with N = 1 projects the long query on one EP only."""
    t = pl.DataFrame({"arrival_us": [0, 1_000_000], "stream": [0, 0], "model": ["VGG16", "VGG16"],
                      "slo_us": [10**9, 2_000_000], "deadline_us": [10**9, 3_000_000],
                      "instances": [100, 1], "priority": [1, 0]})
    res = simulate(t, None, "accordion", {"eps": 2, **policy_cfg}, artifacts={"layer_profiles": LAYERS})
    return dict(zip(res.requests_frame()["request"].to_list(), res.requests_frame()["outcome"].to_list()))


def test_live_predictor_sees_the_running_pipeline():
    # live: both EPs are held until the long query ends, so the Low query's predicted wait exceeds its SLO
    assert _one_long_then_low({"predictor": "live"})[1] == "dropped"
    # projected: the accumulated projection put the long query on one EP; the other looks free
    assert _one_long_then_low({"predictor": "projected"})[1] != "dropped"


def test_unknown_predictor_is_user_error():
    with pytest.raises(UserError, match="predictor must be"):
        run(stream(0, 5), "accordion", predictor="psychic")


def test_late_free_starts_hopeless_queries_on_the_free_eps():
    """late=free (the other completion of Algorithm 2): a query no configuration serves in time may start on
    fewer EPs than its best even though they do not meet its SLO — which late=best never does."""
    found = False
    for seed in range(20):
        trace = stream(seed, 60, span_s=5.0, mean_inst=20.0, slo_s=4.0)
        pol = run(trace, "accordion", window=0, late="free").engine.policies[0]
        for q in pol.finished:
            depth, start, left = q.segs[0]
            if depth < pol.fastest_depth(q.model, left) and start + pol.lat_us(q.model, depth, left) > q.deadline:
                found = True
        if found:
            break
    assert found
    with pytest.raises(UserError, match="late must be"):
        run(stream(0, 5), "accordion", late="never")


def test_the_live_predictors_early_stop_drops_exactly_what_the_full_fold_drops(monkeypatch):
    """A saturated stream (Fastest on stream 1 at twice its load): at every Low-priority arrival the early stop
    in ``EPScheduler.live_ep_times`` gives the drop decision the full fold over the queue gives, the stop is
    actually taken, and the run's tables equal those of a run that always folds the whole queue."""
    from shepherd.core.accordion.predictor import LOW, predict
    from shepherd.core.accordion.scheduler import EPScheduler
    from shepherd.experiments.accordion import common as c

    original = EPScheduler.live_ep_times
    stops = []

    def checked(self, now, drop_test=None):
        ep = original(self, now, drop_test)
        if drop_test is not None:
            full = original(self, now, None)
            n, proc, window = drop_test
            assert predict(ep, now, n, proc, LOW, window).drop == predict(full, now, n, proc, LOW, window).drop
            stops.append(ep != full)
        return ep

    params = {"stream": 1, "target": "moderate", "policy": "fastest", "seed": 0, "duration_s": 20.0,
              "load_scale": 2.0}
    monkeypatch.setattr(EPScheduler, "live_ep_times", checked)
    fast = c.run_stream_cell(dict(params))
    assert any(stops), "the workload never took the early stop: the test would not see a wrong one"
    monkeypatch.setattr(EPScheduler, "live_ep_times", lambda self, now, drop_test=None: original(self, now, None))
    assert fast.equals(c.run_stream_cell(dict(params)))
