"""``traces stats`` at full-day scale: bounded memory, sparse counting, the last window kept."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.traces import predictability as pred
from shepherd.traces import stats as tstats
from shepherd.traces.registry import assemble
from shepherd.traces.resolve import load_trace

DAY_US = 86_400_000_000


def _day_trace(streams: int, requests: int, seed: int = 0) -> pl.DataFrame:
    """A full day of Zipf-popular streams with uniform arrivals, drawn directly with numpy (fast)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, streams + 1)
    stream = rng.choice(streams, size=requests, p=weights / weights.sum())
    stream[:streams] = np.arange(streams)  # every stream present
    arrival = rng.integers(0, DAY_US, size=requests)
    return assemble(arrival, stream, [f"m{i % 17}" for i in range(streams)], 250_000)


#: Peak resident memory allowed for `traces stats` on the 1,000-stream, 2-million-request day.
#: The dense streams × windows count matrix it used to build at τ = 10 ms is 8.64 M windows ×
#: 1,000 streams × 8 B = 69 GB; the sparse counting needs a few arrays of one entry per request.
RSS_LIMIT_MB = 1024

#: The child reports its own peak: VmHWM of /proc/self/status (the high-water mark of this
#: process image; ``getrusage``'s ru_maxrss would also count the forking pytest process, since
#: Linux keeps it across exec), else ru_maxrss where /proc is missing.
_MEASURE = textwrap.dedent("""
    import resource, sys
    from shepherd.cli.app import main
    code = main(sys.argv[1:])
    try:
        with open("/proc/self/status") as fh:
            peak_kb = next(int(ln.split()[1]) for ln in fh if ln.startswith("VmHWM:"))
    except (OSError, StopIteration):
        peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stderr.write(f"peak_rss_mb={peak_kb / 1024:.0f}\\n")
    sys.exit(code)
""")


def _peak_rss_mb(*args: str) -> tuple[int, float, str]:
    done = subprocess.run([sys.executable, "-c", _MEASURE, *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=600)
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("peak_rss_mb=")]
    return done.returncode, float(line[-1].split("=")[1]) if line else float("nan"), done.stdout + done.stderr


def test_full_day_stats_in_bounded_memory(tmp_path):
    """Issue 11: a full-day trace of ≥ 1,000 streams; default windows start at 10 ms."""
    path = tmp_path / "day.parquet"
    frame = _day_trace(streams=1000, requests=2_000_000)
    write_artifact(frame, path, "trace", make_provenance({"duration_s": 86_400.0}, 0, []))
    del frame
    code, peak, out = _peak_rss_mb("traces", "stats", str(path))
    print(f"traces stats, full day, 1000 streams, 2M requests: peak RSS {peak:.0f} MB")
    assert code == 0, out
    assert "busiest 20 of 1000 streams" in out and "8,640,000" in out  # 10 ms windows over the day
    assert peak < RSS_LIMIT_MB, (peak, out[-2000:])


def test_full_day_cv_in_bounded_memory(tmp_path):
    """--cv over the default τ ladder (10 ms … 6 h) and group sizes up to 1000 on the same day."""
    path = tmp_path / "day.parquet"
    write_artifact(_day_trace(streams=1000, requests=1_000_000, seed=1), path, "trace",
                   make_provenance({"duration_s": 86_400.0}, 0, []))
    code, peak, out = _peak_rss_mb("traces", "stats", str(path), "--cv", "-o", str(tmp_path / "cv.parquet"))
    print(f"traces stats --cv, full day, 1000 streams, 1M requests: peak RSS {peak:.0f} MB")
    assert code == 0, out
    table = pl.read_parquet(tmp_path / "cv.parquet")
    assert table["tau_us"].min() == 10_000 and set(table["group_size"]) == {1, 10, 100, 1000}
    assert peak < RSS_LIMIT_MB, (peak, out[-2000:])


@pytest.mark.parametrize("seed", range(4))
def test_sparse_cv_equals_dense_reference(seed):
    """The sparse counting agrees with row_cv over the dense matrix, per stream and per group."""
    rng = np.random.default_rng(seed)
    n_streams, span = int(rng.integers(1, 40)), int(rng.integers(1_000, 50_000))
    n = int(rng.integers(0, 3_000))
    stream = rng.integers(0, n_streams, n)
    arrival = np.sort(rng.integers(0, span, n))
    for tau in (1, 7, 100, span // 3, span, span + 1):
        windows = span // tau
        dense = pred.trace_windows(stream, arrival, n_streams, tau, span)
        sparse = pred.sparse_window_cv(stream, arrival, n_streams, tau, windows)
        np.testing.assert_allclose(sparse, pred.row_cv(dense), rtol=1e-12, atol=1e-12, equal_nan=True)
        for g in (2, 5):
            perm = rng.permutation(n_streams)
            unit, n_units = pred.group_units(n_streams, g, perm)
            sparse_g = pred.sparse_window_cv(unit[stream], arrival, n_units, tau, windows)
            dense_g = pred.row_cv(pred.group_sums(dense, g, perm)) if n_units else np.empty(0)
            np.testing.assert_allclose(sparse_g, dense_g, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_interarrival_cvs_match_per_stream_reference():
    frame = _day_trace(streams=30, requests=5_000, seed=3)
    table = tstats.stream_stats(frame, 1_000_000_000)
    for row in table.iter_rows(named=True):
        arr = frame.filter(pl.col("stream") == row["stream"])["arrival_us"].to_numpy()
        ref = tstats.interarrival_cv(arr)
        assert row["requests"] == arr.size
        assert (np.isnan(ref) and np.isnan(row["interarrival_cv"])) or row["interarrival_cv"] == pytest.approx(ref)


def test_last_full_window_is_counted():
    """A 1,440-minute trace has 1,440 one-minute windows — declared or not."""
    minute = 60_000_000
    # One request in the middle of every minute: the last arrives at 23:59:30.
    arrival = np.arange(1440) * minute + minute // 2
    frame = assemble(arrival, np.zeros(1440, int), ["m"], 250_000)
    assert tstats.duration_us(frame) < DAY_US  # the old span: last arrival + 1 µs
    assert tstats.window_stats(frame, [minute])["windows"][0] == 1440  # no declared span
    assert tstats.window_stats(frame, [minute], DAY_US)["windows"][0] == 1440
    assert tstats.count_cv(arrival, minute, None) == 0.0  # every minute holds exactly one
    assert tstats.window_counts(arrival, minute, DAY_US).tolist() == [1] * 1440
    # A declared span wins: a 2-day declaration sees 1440 empty minutes more.
    assert tstats.window_stats(frame, [minute], 2 * DAY_US)["windows"][0] == 2880


def test_named_trace_declares_its_span(tmp_path):
    """traces maf / generate record their length, and stats divide by it (not by the last arrival)."""
    loaded = load_trace("maf-synthetic", duration_min=1440, load=5.0, functions=200, seed=2)
    assert loaded.span_us == DAY_US
    table = tstats.window_stats(loaded.frame, [60_000_000], loaded.span_us)
    assert table["windows"][0] == 1440
    rates = tstats.stream_stats(loaded.frame, 60_000_000, loaded.span_us)
    assert rates["rate_rps"].sum() == pytest.approx(loaded.frame.height / 86_400)
