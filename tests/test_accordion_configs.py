"""Accordion §3.1 / Table 1: DP partition, configurations, layer_profiles kind."""

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from shepherd.core.accordion.configs import (
    MAX_EPS, additive_stages, builtin_layers, model_configs, raw_configs, table1, table1_raw_errors)
from shepherd.core.accordion.partition import partition, stage_latencies
from shepherd.core.artifacts import conform
from shepherd.core.errors import UserError


def test_builtin_configs_reproduce_table1_within_2pct():
    f = builtin_layers()
    t = table1()
    for model in ("VGG16", "ResNet50", "ResNet152"):
        cs = model_configs(f, model, calibrate=True)
        assert len(cs) == MAX_EPS
        rows = t.filter(pl.col("model") == model)
        one = rows.filter(pl.col("eps") == 1)["latency_ms"][0]
        assert cs[0].latency_ms(1) == pytest.approx(one, rel=0.02)
        for eps, sp in rows.filter(pl.col("eps") > 1).select("eps", "speedup").iter_rows():
            ours = sum(cs[0].stages_ms) / cs[eps - 1].bottleneck_ms
            assert ours == pytest.approx(sp, rel=0.02), (model, eps)


def test_calibrated_stages_sum_to_the_one_ep_latency_and_speed_grows_with_depth():
    """§4.1's additive model: a d-EP pipeline's stages sum to the 1-EP latency of the same instance (one
    instance takes the same time on every depth), within 1 %, for every Table 1 model and d = 1…8; the
    long-query speedup never falls as d grows (the first calibration had VGG16 faster on 7 EPs than 8)."""
    f = builtin_layers()
    one = dict(table1().filter(pl.col("eps") == 1).select("model", "latency_ms").iter_rows())
    for model in ("VGG16", "ResNet50", "ResNet152"):
        cs = model_configs(f, model, calibrate=True)
        for c in cs:
            assert sum(c.stages_ms) == pytest.approx(one[model], rel=0.01), (model, c.depth)
            assert c.latency_ms(1) == pytest.approx(one[model], rel=0.01)
            assert max(c.stages_ms) == pytest.approx(c.bottleneck_ms) and min(c.stages_ms) > 0
        sp = [one[model] / c.bottleneck_ms for c in cs]
        assert all(a <= b + 1e-9 for a, b in zip(sp, sp[1:])), (model, sp)
        lat = [c.latency_ms(50) for c in cs]
        assert all(a >= b - 1e-9 for a, b in zip(lat, lat[1:])), (model, lat)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=8), st.floats(0.0, 1.0))
def test_additive_stages_keep_the_sum_and_set_the_bottleneck(stages, frac):
    d = len(stages)
    speedup = 1.0 + frac * (d - 1)
    out = additive_stages(stages, speedup)
    total = sum(stages)
    assert len(out) == d and sum(out) == pytest.approx(total, rel=1e-9)
    assert max(out) == pytest.approx(total / speedup, rel=1e-9) and min(out) >= 0


def test_additive_stages_refuse_a_speedup_above_the_depth():
    with pytest.raises(ValueError):
        additive_stages([1.0, 1.0], 2.5)


def test_raw_dp_cannot_reach_table1_as_documented():
    err = table1_raw_errors()
    # the additive model's bound: speedup(4) >= speedup(8)/2 makes ResNet152 at 4 EPs unreachable
    assert err[("ResNet152", 4)] > 0.3


def brute(layers, d):
    import itertools
    n = len(layers)
    best = float("inf")
    for cuts in itertools.combinations(range(1, n), d - 1):
        b = [0, *cuts, n]
        best = min(best, max(sum(layers[b[i]:b[i + 1]]) for i in range(d)))
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 10.0), min_size=1, max_size=9), st.integers(1, 5))
def test_partition_is_optimal(layers, d):
    d = min(d, len(layers))
    sizes = partition(layers, d)
    assert len(sizes) == d and sum(sizes) == len(layers) and min(sizes) >= 1
    assert max(stage_latencies(layers, sizes)) == pytest.approx(brute(layers, d))


def test_latency_model_fill_plus_instances_times_bottleneck():
    c = raw_configs([1.0, 2.0, 3.0, 4.0])[1]  # depth 2: [1,2,3] | [4] -> bottleneck 6
    assert c.sizes == (3, 1) and c.bottleneck_ms == 6.0 and c.fill_ms == 4.0
    assert c.latency_ms(10) == 4.0 + 10 * 6.0
    assert raw_configs([1.0, 2.0, 3.0, 4.0])[0].latency_ms(3) == 30.0  # 1 EP: B × whole model


def test_layer_profiles_schema_and_unknown_model():
    f = conform(builtin_layers(), "layer_profiles")
    assert f["layer"].min() == 0
    with pytest.raises(UserError, match="no layer profile"):
        model_configs(f, "BERT")
    bad = f.with_columns(pl.lit(-1.0).alias("latency_ms"))
    with pytest.raises(UserError):
        conform(bad, "layer_profiles")
