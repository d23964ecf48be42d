"""MAF 2019 / 2021 readers on files written in the exact formats, and on real MAF 2019 rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from maf_helpers import write_maf2019, write_maf2021
from shepherd.core.errors import UserError
from shepherd.traces import maf2019, maf2021

from conftest import MAF_SAMPLES, needs_maf_samples  # noqa: E402

SAMPLE = MAF_SAMPLES
needs_sample = needs_maf_samples()


def test_reads_counts_with_quoting_and_blank_counts(tmp_path):
    counts = np.array([[0, 3, 0, 7], [1, 0, 0, 2], [0, 0, 0, 0]])
    path = write_maf2019(tmp_path / "d.csv", counts, quote=True, blank_zeros=True,
                         triggers=["http", "timer", "queue"])
    data = maf2019.read_day(path)
    np.testing.assert_array_equal(data.counts, counts)
    np.testing.assert_array_equal(data.minutes, [0, 1, 2, 3])
    assert data.keys["Trigger"].to_list() == ["http", "timer", "queue"]
    assert data.window_s == 240.0


def test_minute_selection_uses_header_minutes(tmp_path):
    counts = np.arange(12).reshape(2, 6)
    path = write_maf2019(tmp_path / "d.csv", counts, minutes=range(480, 486))
    data = maf2019.read_day(path, 482, 484)
    np.testing.assert_array_equal(data.counts, counts[:, 2:5])
    np.testing.assert_array_equal(data.minutes, [481, 482, 483])
    with pytest.raises(UserError, match="not in the file"):
        maf2019.read_day(path, 1, 5)


@needs_sample
@pytest.mark.parametrize("subset, functions, first, last", [
    ("1", 1, 1, 1440), ("5", 5, 1, 1440), ("10", 10, 1, 1440), ("100", 100, 480, 959), ("500", 500, 480, 959)])
def test_real_sample_sets(subset, functions, first, last):
    path = SAMPLE / subset / "invocations.csv"
    data = maf2019.read_day(path)
    assert data.counts.shape == (functions, last - first + 1)
    assert data.minutes[0] == first - 1 and data.minutes[-1] == last - 1
    # Cross-check the reader against a plain CSV parse of the same file.
    raw = pl.read_csv(path, infer_schema_length=0)
    np.testing.assert_array_equal(data.counts[:, -1], raw[str(last)].cast(pl.Int64).to_numpy())
    assert int(data.counts.sum()) == int(raw.select(pl.all().exclude(maf2019.KEY_COLUMNS).cast(pl.Int64)).sum()
                                         .sum_horizontal()[0])


@needs_sample
def test_real_single_function_plateau():
    """Set 1's function sits at 15000/15001 invocations per minute for long stretches (README quirk)."""
    data = maf2019.read_day(SAMPLE / "1" / "invocations.csv")
    assert np.isin(data.counts[0], [15000, 15001]).sum() > 100


def test_read_window_spans_days_and_aligns_functions(tmp_path):
    a = np.array([[1] * 1440, [2] * 1440])
    b = np.array([[5] * 1440])
    write_maf2019(tmp_path / maf2019.DAY_FILE.format(day=1), a)
    # Day 2 holds only the second function of day 1, plus nothing else.
    p2 = tmp_path / maf2019.DAY_FILE.format(day=2)
    write_maf2019(p2, np.vstack([np.zeros(1440, int), b]))
    data = maf2019.read_window(tmp_path, day=1, start_minute=1439, duration_min=4)
    np.testing.assert_array_equal(data.minutes, [1438, 1439, 1440, 1441])
    np.testing.assert_array_equal(data.counts, [[1, 1, 0, 0], [2, 2, 5, 5]])


def test_missing_day_file(tmp_path):
    with pytest.raises(UserError, match="not found"):
        maf2019.read_window(tmp_path, day=3)


@pytest.mark.parametrize("header, message", [
    ("Owner,HashApp,HashFunction,Trigger,1,2", "wrong header"),
    ("HashOwner,HashApp,HashFunction,Trigger,1,x", "minute column 'x'"),
    ("HashOwner,HashApp,HashFunction,Trigger,2,1", "strictly increasing"),
    ("HashOwner,HashApp,HashFunction,Trigger,1,1441", "1…1440"),
])
def test_wrong_headers(tmp_path, header, message):
    path = tmp_path / "d.csv"
    path.write_text(header + "\na,b,c,http,1,2\n")
    with pytest.raises(UserError, match=message):
        maf2019.read_day(path)


def test_non_numeric_and_negative_counts(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\na,b,c,http,1,lots\n")
    with pytest.raises(UserError, match="non-numeric"):
        maf2019.read_day(bad)
    neg = tmp_path / "neg.csv"
    neg.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\na,b,c,http,1,-4\n")
    with pytest.raises(UserError, match="negative"):
        maf2019.read_day(neg)


def test_select_top_and_sample(tmp_path):
    counts = np.array([[0, 0], [5, 5], [1, 0], [9, 9], [3, 3]])
    data = maf2019.read_day(write_maf2019(tmp_path / "d.csv", counts))
    top = maf2019.select_functions(data, top=2)
    np.testing.assert_array_equal(top.counts, [[9, 9], [5, 5]])
    assert maf2019.select_functions(data).functions == 4  # the silent function is dropped
    s1 = maf2019.select_functions(data, sample=2, rng=np.random.default_rng(1))
    s2 = maf2019.select_functions(data, sample=2, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(s1.counts, s2.counts)
    assert s1.functions == 2 and (s1.counts.sum(axis=1) > 0).all()
    with pytest.raises(UserError):
        maf2019.select_functions(data, top=0)


def test_maf2021_arrivals_are_end_minus_duration(tmp_path):
    rows = [("a1", "f1", 10.5, 0.5), ("a1", "f1", 20.25, 0.25), ("a2", "f9", 12.0, 1.0),
            ("a2", "f9", 0.5, 1.5),  # started before the trace: dropped
            ("a1", "f1", 130.0, 10.0)]
    path = write_maf2021(tmp_path / maf2021.FILE, rows)
    frame = maf2021.number_streams(maf2021.read_invocations(path, 0.0, 100.0))
    assert sorted(frame["arrival_s"].to_list()) == [10.0, 11.0, 20.0]
    trace = maf2021.to_trace(frame, ["M0", "M1"], 250_000)
    assert trace["arrival_us"].to_list() == [10_000_000, 11_000_000, 20_000_000]
    # stream 0 = the busiest function (a1/f1, two calls) → model M0
    assert trace["stream"].to_list() == [0, 1, 0] and trace["model"].to_list() == ["M0", "M1", "M0"]
    late = maf2021.read_invocations(path, 100.0, 50.0)
    assert late["arrival_s"].to_list() == [20.0]


def test_maf2021_bad_input(tmp_path):
    wrong = tmp_path / "w.txt"
    wrong.write_text("app,func,end,duration\na,b,1,1\n")
    with pytest.raises(UserError, match="wrong header"):
        maf2021.read_invocations(wrong)
    bad = write_maf2021(tmp_path / "b.txt", [("a", "f", 1.0, 0.1)])
    bad.write_text(bad.read_text() + "a,f,soon,0.1\n")
    with pytest.raises(UserError, match="non-numeric"):
        maf2021.read_invocations(bad)
