"""Herd on clusters with more groups than models: model-streams split into shards."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.profiles import load_builtin
from shepherd.solvers.demand import shard_streams
from shepherd.solvers.planners import PlanRequest, get_planner
from shepherd.traces import synthetic


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.lists(st.floats(0.0, 50.0), min_size=1, max_size=40), models=st.integers(1, 4),
       shards=st.integers(1, 8))
def test_every_stream_lands_in_exactly_one_balanced_unit(n, models, shards):
    frame = pl.DataFrame({"stream": list(range(len(n))), "model": [f"m{i % models}" for i in range(len(n))],
                          "n": n})
    out = shard_streams(frame, shards)
    assert out.height == frame.height and out["stream"].to_list() == frame["stream"].to_list()
    per_model = out.group_by("model").agg(pl.col("unit").n_unique().alias("units"), pl.len())
    for row in per_model.iter_rows(named=True):
        assert row["units"] <= min(shards, row["len"])
    assert all(u.split("#")[0] == m for u, m in zip(out["unit"], out["model"]))
    # LPT balance: no unit exceeds the lightest unit of its model by more than the largest stream.
    loads = out.group_by("model", "unit").agg(pl.col("n").sum())
    for (model,), part in loads.group_by("model"):
        biggest = frame.filter(pl.col("model") == model)["n"].max()
        assert part["n"].max() - part["n"].min() <= biggest + 1e-9


def test_herd_fills_a_cluster_with_more_groups_than_models():
    spec = synthetic.SyntheticSpec(rate=6000, duration_s=5, models=("ResNet50", "ResNet18", "DenseNet121"),
                                   streams=60, zipf_s=0.5)
    trace = synthetic.generate(spec, np.random.default_rng(0))
    out = get_planner("herd")(PlanRequest(trace=trace, profiles=load_builtin("shepherd-v100"), gpus=60))
    workers = out.frame.filter(pl.col("role") == "worker")
    streams = out.frame.filter(pl.col("role") == "stream")
    assert workers.height == 60  # every GPU used, though there are only 3 models
    assert workers["group"].n_unique() == 5  # five groups of Ḡ = 12
    assert sorted(streams["name"].cast(pl.Int32).to_list()) == list(range(60))  # each stream once
    models = out.frame.filter(pl.col("role") == "model")
    assert models.group_by("group").len()["len"].max() >= 1 and set(models["name"]) <= set(spec.models)
