"""Synthetic arrival processes hit their targets; traces are deterministic."""

from __future__ import annotations

import hashlib

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shepherd.core.artifacts import read_artifact
from shepherd.traces import arrivals, stats, synthetic

STAT = settings(max_examples=25, deadline=None, derandomize=True)


@STAT
@given(rate=st.floats(50, 5000), seed=st.integers(0, 2**32 - 1))
def test_poisson_hits_rate_and_unit_cv(rate, seed):
    duration_us = int(30_000 / rate * 1e6)  # ~30k expected arrivals
    t = arrivals.poisson(np.random.default_rng(seed), rate, duration_us)
    assert np.all(np.diff(t) >= 0) and t.min() >= 0 and t.max() < duration_us
    measured = t.size / (duration_us / 1e6)
    assert measured == pytest.approx(rate, rel=0.05)
    assert stats.interarrival_cv(t) == pytest.approx(1.0, abs=0.1)


@STAT
@given(rate=st.floats(50, 5000), cv=st.floats(0.3, 4.0), seed=st.integers(0, 2**32 - 1))
def test_gamma_hits_rate_and_cv(rate, cv, seed):
    duration_us = int(40_000 / rate * 1e6)
    t = arrivals.gamma(np.random.default_rng(seed), rate, cv, duration_us)
    measured = t.size / (duration_us / 1e6)
    # The count of a renewal process over T has relative sd ≈ cv/sqrt(rate·T).
    assert measured == pytest.approx(rate, rel=0.05 + 5 * cv / np.sqrt(40_000))
    # Integer-µs rounding adds tiny gaps' error; tolerate 15 %.
    assert stats.interarrival_cv(t) == pytest.approx(cv, rel=0.15)


@STAT
@given(rate=st.floats(100, 3000), ratio=st.floats(1.0, 20.0), seed=st.integers(0, 2**32 - 1))
def test_mmpp_hits_mean_rate_and_is_burstier_than_poisson(rate, ratio, seed):
    params = arrivals.mmpp_rates(rate, ratio, dwell_low_s=0.5, dwell_high_s=0.1)
    assert params.mean_rate == pytest.approx(rate)
    duration_us = 400 * 1_000_000  # ~670 state cycles
    t = arrivals.mmpp(np.random.default_rng(seed), params, duration_us)
    assert t.size / 400 == pytest.approx(rate, rel=0.1)
    if ratio >= 4:
        assert stats.count_cv(t, 100_000, duration_us) > 1.5 * stats.count_cv(
            arrivals.poisson(np.random.default_rng(seed), rate, duration_us), 100_000, duration_us)


def test_zipf_weights_are_normalised_and_ranked():
    w = synthetic.zipf_weights(10, 1.2)
    assert w.sum() == pytest.approx(1.0)
    assert np.all(np.diff(w) < 0)
    assert np.allclose(synthetic.zipf_weights(5, 0.0), 0.2)


def test_generated_trace_splits_rate_by_zipf_over_round_robin_models():
    spec = synthetic.SyntheticSpec(process="poisson", rate=4000, duration_s=20, models=("A", "B", "C"),
                                   streams=6, zipf_s=1.0)
    frame = synthetic.generate(spec, np.random.default_rng(1))
    per_stream = frame.group_by("stream").agg(pl.len(), pl.col("model").first()).sort("stream")
    assert per_stream["model"].to_list() == ["A", "B", "C", "A", "B", "C"]
    expected = 4000 * 20 * synthetic.zipf_weights(6, 1.0)
    assert np.allclose(per_stream["len"].to_numpy(), expected, rtol=0.1)
    assert (frame["deadline_us"] - frame["arrival_us"] == 250_000).all()


def test_two_stream_workload_matches_section_7_2():
    frame = synthetic.two_stream(duration_s=1.0)
    a = frame.filter(pl.col("stream") == 0)
    b = frame.filter(pl.col("stream") == 1)
    assert set(a["model"]) == {"ResNet18"} and set(b["model"]) == {"ResNeSt269"}
    bursts = a.group_by("arrival_us").len().sort("arrival_us")
    assert bursts["arrival_us"].to_list() == [5_000 + 120_000 * k for k in range(9)]
    assert set(bursts["len"]) == {1024}
    assert b["arrival_us"].to_list() == list(range(0, 1_000_000, 1_000))


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("process", ["poisson", "gamma", "mmpp"])
def test_same_seed_gives_byte_identical_artifact(tmp_path, cli, process):
    args = ["traces", "generate", "--process", process, "--rate", "800", "--duration-s", "3",
            "--cv", "2", "--zipf", "0.8", "--seed", "11"]
    r1 = cli(*args, "-o", tmp_path / "a.parquet")
    r2 = cli(*args, "-o", tmp_path / "b.parquet")
    r3 = cli(*args[:-1], "12", "-o", tmp_path / "c.parquet")
    assert r1.code == r2.code == r3.code == 0, r1.err + r2.err + r3.err
    assert _sha(tmp_path / "a.parquet") == _sha(tmp_path / "b.parquet")
    assert _sha(tmp_path / "a.parquet") != _sha(tmp_path / "c.parquet")
    art = read_artifact(tmp_path / "a.parquet", "trace")
    assert art.provenance["seed"] == 11 and art.provenance["config"]["process"] == process


def test_stats_reports_rates_and_window_cvs(tmp_path, cli):
    out = tmp_path / "t.parquet"
    assert cli("traces", "generate", "--rate", "2000", "--duration-s", "5", "--models", "A,B", "-o", out).code == 0
    result = cli("traces", "stats", out, "--window-ms", "10", "--window-ms", "1000")
    assert result.code == 0, result.err
    assert "count CV by window size" in result.out
    trace = read_artifact(out, "trace").frame
    table = stats.window_stats(trace, [10_000, 1_000_000])
    cvs = table["aggregate_count_cv"].to_list()
    assert cvs[0] > cvs[1]  # Poisson: CV of counts ~ 1/sqrt(rate·τ) falls with τ
    assert cvs[0] == pytest.approx(1 / np.sqrt(2000 * 0.01), rel=0.2)
