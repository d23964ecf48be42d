"""Where a trace's data comes from: seeds reach named traces, single files and their day,
windows inside a file, the sample layout on import, and subsets labelled as such."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from conftest import MAF_SAMPLES, assert_user_error, needs_maf_samples
from maf_helpers import write_maf2019
from shepherd.core.artifacts import read_artifact
from shepherd.core.errors import UserError
from shepherd.traces import fetch, maf2019, registry
from shepherd.traces.resolve import load_trace

SAMPLE = MAF_SAMPLES
needs_sample = needs_maf_samples("100")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))


# --------------------------------------------------------------------------- seed

@pytest.mark.parametrize("name", ["maf-synthetic", "maf-synthetic-bursty"])
def test_seed_reaches_named_traces(name):
    a0 = load_trace(name, seed=0, duration_min=1, load=500.0).frame
    a1 = load_trace(name, seed=1, duration_min=1, load=500.0).frame
    again = load_trace(name, seed=0, duration_min=1, load=500.0).frame
    assert a0.equals(again)  # same seed: identical frames
    assert not a0["arrival_us"].equals(a1["arrival_us"])  # another seed: other arrivals


def test_seed_reaches_a_file_with_load(tmp_path, cli):
    out = tmp_path / "t.parquet"
    assert cli("traces", "generate", "--rate", "200", "--duration-s", "5", "-o", out).code == 0
    a = load_trace(str(out), seed=0, load=500.0).frame
    b = load_trace(str(out), seed=1, load=500.0).frame
    assert a.equals(load_trace(str(out), seed=0, load=500.0).frame) and not a.equals(b)


def test_negative_seed_is_a_user_error():
    with pytest.raises(UserError, match="--seed"):
        load_trace("maf-synthetic", seed=-1)


# --------------------------------------------------------------------------- single files

def test_single_day_file_honours_its_day(tmp_path):
    path = write_maf2019(tmp_path / maf2019.DAY_FILE.format(day=3), np.ones((2, 1440), int))
    for day in (None, 3):
        loaded = load_trace("maf2019", path=path, day=day, duration_min=2)
        assert loaded.config["first_minute"] == 2 * 1440  # absolute minute 0 of day 3
        assert loaded.subset is None  # a whole official day file is the real trace
    with pytest.raises(UserError, match="holds day 3 only"):
        load_trace("maf2019", path=path, day=1, duration_min=2)


def test_file_of_unknown_day_refuses_day(tmp_path):
    path = write_maf2019(tmp_path / "invocations.csv", np.ones((2, 30), int))
    assert load_trace("maf2019", path=path, duration_min=30).frame.height == 60
    with pytest.raises(UserError, match="day is not recorded"):
        load_trace("maf2019", path=path, day=1, duration_min=30)


def test_window_past_the_file_end_is_an_error_not_a_lower_rate(tmp_path, cli):
    """The file's last minutes are busy (75 per minute): the full window's rate is 1.25 req/s.
    A window running 60 minutes past the end used to read 10 minutes and divide by 70."""
    counts = np.zeros((1, 20), int)
    counts[0, 10:] = 75
    path = write_maf2019(tmp_path / "invocations.csv", counts, minutes=range(480, 500))
    out = tmp_path / "t.parquet"
    result = cli("traces", "maf", "maf2019", "--path", path, "--start-minute", "490", "--duration-min", "70",
                 "-o", out)
    assert_user_error(result, "runs past the file", "480–499", "--duration-min ≤ 10")
    assert not out.exists()
    ok = cli("traces", "maf", "maf2019", "--path", path, "--start-minute", "490", "--duration-min", "10", "-o", out)
    assert ok.code == 0, ok.err
    art = read_artifact(out, "trace")
    assert art.frame.height == 750 and art.provenance["config"]["span_us"] == 600_000_000
    assert "1.250" in ok.out and art.provenance["config"]["native_rate_rps"] == pytest.approx(1.25)


# --------------------------------------------------------------------------- import and subsets

@needs_sample
def test_import_accepts_the_sample_layout(cli):
    result = cli("traces", "import", SAMPLE / "100")
    assert result.code == 0, result.err
    entry = fetch.read_registry()["maf2019"]
    assert entry["path"].endswith("invocations.csv")
    assert entry["subset"] == "100 functions, minutes 480–959 of invocations.csv"
    listed = cli("traces", "list")
    assert listed.code == 0 and "subset" in listed.out


def test_import_of_a_directory_with_a_renamed_file(tmp_path, cli):
    write_maf2019(tmp_path / "d" / "counts.csv", np.ones((3, 5), int))
    (tmp_path / "d" / "durations.csv").write_text("HashOwner,HashApp,HashFunction,Average\na,b,c,1\n")
    result = cli("traces", "import", tmp_path / "d")
    assert result.code == 0, result.err
    assert fetch.read_registry()["maf2019"]["subset"] == "3 functions, minutes 1–5 of counts.csv"


def test_import_with_two_candidates_says_what_to_pass(tmp_path, cli):
    for name in ("a.csv", "b.csv"):
        write_maf2019(tmp_path / "d" / name, np.ones((1, 5), int))
    assert_user_error(cli("traces", "import", tmp_path / "d"), "traces import", "a.csv --as maf2019")


@needs_sample
def test_subset_is_labelled_in_the_trace_artifact_and_stats(tmp_path, cli):
    assert cli("traces", "import", SAMPLE / "100").code == 0
    out = tmp_path / "t.parquet"
    result = cli("traces", "maf", "maf2019", "-o", out)
    assert result.code == 0, result.err
    config = read_artifact(out, "trace").provenance["config"]
    assert config["subset"] == "100 functions, minutes 480–959 of invocations.csv"
    loaded = load_trace(str(out))
    assert loaded.label == "t.parquet (subset: 100 functions, minutes 480–959 of invocations.csv)"
    assert load_trace("maf2019").label.startswith("maf2019 (subset: 100 functions")
    stats = cli("traces", "stats", out, "--cv", "--group-size", "1", "-o", tmp_path / "cv.parquet")
    assert stats.code == 0, stats.err
    assert "subset" in stats.out and "not the full trace" in stats.out
    assert read_artifact(tmp_path / "cv.parquet", "predictability").provenance["config"]["subset"] == config["subset"]
    assert registry.maf2019_subset() == config["subset"]


def test_full_day_files_are_not_a_subset(tmp_path):
    write_maf2019(tmp_path / maf2019.DAY_FILE.format(day=1), np.ones((2, 1440), int))
    assert maf2019.subset_of(tmp_path) is None
    assert load_trace("maf2019", path=tmp_path, duration_min=1).label == "maf2019"


@needs_sample
def test_per_minute_stats_default_to_the_minutes_a_file_holds(tmp_path, cli):
    out = tmp_path / "cv.parquet"
    result = cli("traces", "stats", "maf2019", "--cv", "--per-minute", "--path", SAMPLE / "100" / "invocations.csv",
                 "--group-size", "1", "-o", out)
    assert result.code == 0, result.err
    config = read_artifact(out, "predictability").provenance["config"]
    assert config["duration_min"] == 480 and config["subset"].startswith("100 functions")
    assert pl.read_parquet(out)["windows"].max() == 480


def test_traces_list_labels_come_from_the_registry(cli, monkeypatch):
    # issue 44: the packaged maf2019-sample is real data, not "built in (synthetic)"
    from shepherd.cli import common
    from shepherd.traces import registry

    monkeypatch.setattr(common.console, "width", 300)  # one line per row

    listed = cli("traces", "list")
    assert listed.code == 0, listed.err
    named = listed.out.split("datasets (cache")[0]  # the first table; the datasets' table follows it
    rows = {line.split("│")[1].strip(): line for line in named.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    for name, entry in registry.TRACES.items():
        kind = rows[name].split("│")[2].strip()
        assert kind == ("synthetic" if entry.synthetic else "real"), (name, rows[name])
    assert registry.TRACES["maf2019-sample"].kind == "real"
    assert "synthetic" not in rows["maf2019-sample"].lower() and "no download" in rows["maf2019-sample"]
    assert registry.TRACES["maf-synthetic"].kind == "synthetic" and "synthetic" in rows["maf-synthetic"]
