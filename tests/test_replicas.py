"""Seeds that mean something on every input (issue 29, item 2): a trace file's replica re-draws every arrival
within its stream's window (traces/redraw.py), and a seed axis over a file without it is refused."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.experiments import sweep as sw
from shepherd.traces.arrivals import poisson
from shepherd.traces.redraw import redraw
from shepherd.traces.resolve import load_trace
from shepherd.traces.synthetic import assemble

from conftest import assert_user_error

WINDOW = 1_000_000  # 1 s windows keep the test traces short


def counts(frame: pl.DataFrame, window: int) -> pl.DataFrame:
    return (frame.with_columns((pl.col("arrival_us") // window).alias("w"))
            .group_by("stream", "model", "slo_us", "w").len().sort("stream", "model", "slo_us", "w"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(1.0, 400.0), min_size=1, max_size=4), st.integers(0, 2**31), st.integers(1, 4))
def test_redraw_keeps_counts_models_and_slos_per_window(rates, seed, seconds):
    rng = np.random.default_rng(seed)
    models = ["ResNet50", "VGG16", "BERT", "ResNet50"][: len(rates)]
    frame = assemble([poisson(rng, r, seconds * 1_000_000) for r in rates], models,
                     [100_000 + 50_000 * i for i in range(len(rates))])
    out = redraw(frame, seed, WINDOW, span_us=seconds * 1_000_000)
    assert out.height == frame.height and out.columns == frame.columns
    assert counts(out, WINDOW).equals(counts(frame, WINDOW))  # per (stream, window): the same count
    assert (out["deadline_us"] == out["arrival_us"] + out["slo_us"]).all()
    assert out["arrival_us"].max() < seconds * 1_000_000 if out.height else True
    assert out.select(pl.col("arrival_us").is_sorted()).item()
    assert redraw(frame, seed, WINDOW).equals(redraw(frame, seed, WINDOW))  # same seed, same frame


def trace_file(path, seconds=4):
    rng = np.random.default_rng(0)
    frame = assemble([poisson(rng, 30.0, seconds * 1_000_000), poisson(rng, 20.0, seconds * 1_000_000)],
                     ["ResNet50", "ResNeSt50"], [200_000, 200_000])
    return write_artifact(frame, path, "trace", make_provenance({"span_us": seconds * 1_000_000}, 0))


def test_a_file_read_with_redraw_is_a_new_replica_per_seed(tmp_path):
    path = trace_file(tmp_path / "t.parquet")
    plain = load_trace(str(path), seed=0).frame
    a, b = (load_trace(str(path), seed=s, redraw_window_s=1.0).frame for s in (0, 1))
    assert not a.equals(b) and not a.equals(plain)
    assert counts(a, WINDOW).equals(counts(plain, WINDOW))
    assert load_trace(str(path), seed=1, redraw_window_s=1.0).frame.equals(b)


CONFIG = """
policies = ["clockwork"]
[trace]
path = "t.parquet"
[cluster]
gpus = 1
[grid]
seed = [0, 1]
"""


def test_a_seed_axis_over_a_file_is_refused_without_redraw(cli, tmp_path):
    trace_file(tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text(CONFIG)
    assert_user_error(cli("sweep", tmp_path / "s.toml", "-o", tmp_path / "out"), "t.parquet", "redraw_window_s")
    assert not (tmp_path / "out").exists()
    (tmp_path / "one.toml").write_text(CONFIG.replace("seed = [0, 1]", "seed = [0]"))
    assert cli("sweep", tmp_path / "one.toml", "--dry-run").code == 0  # one seed: the file as it is
    # the same refusal through the seed options, and for a named trace the option is refused instead
    (tmp_path / "n.toml").write_text(CONFIG.replace("[grid]\nseed = [0, 1]", ""))
    assert_user_error(cli("sweep", tmp_path / "n.toml", "--replicas", "2", "--dry-run"), "redraw_window_s")
    named = CONFIG.replace('path = "t.parquet"', 'name = "maf-synthetic"\nredraw_window_s = 60')
    (tmp_path / "m.toml").write_text(named)
    assert_user_error(cli("sweep", tmp_path / "m.toml", "--dry-run"), "named trace")


def test_a_seed_axis_with_redraw_changes_arrivals_and_results(cli, tmp_path):
    trace_file(tmp_path / "t.parquet")
    (tmp_path / "s.toml").write_text(CONFIG.replace('path = "t.parquet"', 'path = "t.parquet"\nredraw_window_s = 1'))
    cfg = sw.read_config(tmp_path / "s.toml", ["run.slo_ms=25", "cluster.gpus=1"])
    grid = sw.cells(cfg)
    frames = [sw.prepare(c.params).loaded.frame for c in grid]
    assert not frames[0]["arrival_us"].equals(frames[1]["arrival_us"])
    r = cli("sweep", tmp_path / "s.toml", "--set", "run.slo_ms=25", "-o", tmp_path / "a", "-j", "1")
    assert r.code == 0, r.err
    table = pl.read_parquet(tmp_path / "a" / "results.parquet").sort("seed")
    metrics = ["slo_attainment", "p99_latency_ms", "mean_batch"]
    assert table.height == 2 and table.select(metrics).row(0) != table.select(metrics).row(1)
    # same seeds elsewhere: byte-identical cells
    assert cli("sweep", tmp_path / "s.toml", "--set", "run.slo_ms=25", "-o", tmp_path / "b", "-j", "1").code == 0
    for cell in grid:
        assert cell.path(tmp_path / "a").read_bytes() == cell.path(tmp_path / "b").read_bytes()
