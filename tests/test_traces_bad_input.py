"""Bad input to every ``traces`` subcommand: exit 2, one ``error:`` line on stderr, no file left behind.

One row per case (issue 11's catalogue plus the same gaps in the other numeric
options). Each case runs the CLI in-process in an empty working directory with
an empty data cache, and the directory must hold exactly what it held before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from conftest import assert_user_error
from maf_helpers import write_maf2019, write_maf2021

NOT_UTF8 = b"ResNet50,\xff\xfe".decode("utf-8", "surrogateescape")  # how Python hands over such argv bytes


def _cut_csv(tmp: Path) -> Path:
    """A MAF 2019 file whose download stopped mid-row (the last row lacks most of its minutes)."""
    path = write_maf2019(tmp / "data" / "cut.csv", np.arange(30).reshape(3, 10) % 7)
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 30])  # keep 29 bytes of the last row
    return path


def _cut_2021(tmp: Path) -> Path:
    """A MAF 2021 file whose last row lost its duration field."""
    rows = [("app1", "f1", 10.0 + i, 0.5) for i in range(5)]
    path = write_maf2021(tmp / "data" / "inv.txt", rows)
    path.write_text(path.read_text().rstrip("\n").rsplit(",", 1)[0] + "\n")
    return path


def _sample(tmp: Path) -> Path:
    return write_maf2019(tmp / "data" / "invocations.csv", np.ones((4, 10), int), minutes=range(480, 490))


def _day3(tmp: Path) -> Path:
    return write_maf2019(tmp / "data" / "invocations_per_function_md.anon.d03.csv", np.ones((2, 1440), int))


def _dir(tmp: Path) -> Path:
    (tmp / "existing").mkdir()
    return tmp / "existing"


Args = Callable[[Path], list]
G = ["traces", "generate"]
M = ["traces", "maf", "maf-synthetic"]
S = ["traces", "stats", "maf-synthetic"]

CASES: list[tuple[str, Args, str]] = [
    # --window-ms: NaN, infinite, zero, negative, below one microsecond
    ("window-nan", lambda t: [*S, "--window-ms", "nan"], "--window-ms"),
    ("window-inf", lambda t: [*S, "--window-ms", "inf"], "--window-ms"),
    ("window-zero", lambda t: [*S, "--window-ms", "0"], "--window-ms"),
    ("window-negative", lambda t: [*S, "--window-ms", "-10"], "--window-ms"),
    ("window-sub-us", lambda t: [*S, "--window-ms", "1e-9"], "--window-ms"),
    ("window-cv-nan", lambda t: [*S, "--cv", "--window-ms", "nan", "-o", t / "cv.parquet"], "--window-ms"),
    # other stats options
    ("stats-top-zero", lambda t: [*S, "--top", "0"], "--top"),
    ("stats-group-zero", lambda t: [*S, "--cv", "--group-size", "0"], "--group-size"),
    ("stats-tau-min-zero", lambda t: [*S, "--cv", "--per-minute", "--tau-min", "0"], "--tau-min"),
    ("stats-duration-huge", lambda t: [*S, "--cv", "--per-minute", "--duration-min", "100000000"], "20,160"),
    ("stats-seed-negative", lambda t: [*S, "--seed", "-1"], "--seed"),
    ("stats-out-dir", lambda t: [*S, "--cv", "-o", _dir(t)], "directory"),
    # fetch / import
    ("fetch-not-a-url", lambda t: ["traces", "fetch", "maf2019", "--url", "not a url"], "--url"),
    ("fetch-no-scheme", lambda t: ["traces", "fetch", "maf2019", "--url", "example.org/x.tar.xz"], "--url"),
    ("fetch-bad-sha", lambda t: ["traces", "fetch", "maf2019", "--sha256", "abc"], "--sha256"),
    ("import-nothing", lambda t: ["traces", "import", (t / "data").mkdir() or t / "data"], "--as"),
    # generate: the catalogue
    ("gen-models-not-utf8", lambda t: [*G, "--models", NOT_UTF8, "-o", t / "t.parquet"], "UTF-8"),
    ("gen-rate-huge", lambda t: [*G, "--rate", "1e12", "-o", t / "t.parquet"], "300,000,000"),
    ("gen-streams-huge", lambda t: [*G, "--streams", "1000000000", "-o", t / "t.parquet"], "1,000,000"),
    ("gen-streams-float", lambda t: [*G, "--streams", "1e9", "-o", t / "t.parquet"], "--streams"),
    ("gen-duration-huge", lambda t: [*G, "--duration-s", "1e15", "-o", t / "t.parquet"], "1,209,600"),
    ("gen-out-dir", lambda t: [*G, "-o", _dir(t)], "directory"),
    ("gen-seed-negative", lambda t: [*G, "--seed", "-1", "-o", t / "t.parquet"], "--seed"),
    # generate: the same gaps in its other numeric options
    ("gen-rate-nan", lambda t: [*G, "--rate", "nan", "-o", t / "t.parquet"], "--rate"),
    ("gen-rate-inf", lambda t: [*G, "--rate", "inf", "-o", t / "t.parquet"], "--rate"),
    ("gen-duration-zero", lambda t: [*G, "--duration-s", "0", "-o", t / "t.parquet"], "--duration-s"),
    ("gen-duration-nan", lambda t: [*G, "--duration-s", "nan", "-o", t / "t.parquet"], "--duration-s"),
    ("gen-two-stream-huge", lambda t: [*G, "--process", "two-stream", "--duration-s", "1e6", "-o", t / "t.parquet"],
     "300,000,000"),
    ("gen-zipf-nan", lambda t: [*G, "--zipf", "nan", "-o", t / "t.parquet"], "--zipf"),
    ("gen-zipf-negative", lambda t: [*G, "--zipf", "-1", "-o", t / "t.parquet"], "--zipf"),
    ("gen-slo-inf", lambda t: [*G, "--slo-ms", "inf", "-o", t / "t.parquet"], "--slo-ms"),
    ("gen-slo-nan", lambda t: [*G, "--slo-ms", "nan", "-o", t / "t.parquet"], "--slo-ms"),
    ("gen-cv-inf", lambda t: [*G, "--process", "gamma", "--cv", "inf", "-o", t / "t.parquet"], "--cv"),
    ("gen-cv-unused-inf", lambda t: [*G, "--cv", "inf", "-o", t / "t.parquet"], "--cv"),
    ("gen-cv-huge", lambda t: [*G, "--process", "gamma", "--cv", "1e9", "-o", t / "t.parquet"], "--cv"),
    ("gen-ratio-inf", lambda t: [*G, "--process", "mmpp", "--mmpp-ratio", "inf", "-o", t / "t.parquet"],
     "--mmpp-ratio"),
    ("gen-dwell-tiny", lambda t: [*G, "--process", "mmpp", "--mmpp-dwell-low", "1e-12", "-o", t / "t.parquet"],
     "--mmpp-dwell-low"),
    ("gen-dwell-nan", lambda t: [*G, "--process", "mmpp", "--mmpp-dwell-high", "nan", "-o", t / "t.parquet"],
     "--mmpp-dwell-high"),
    ("gen-out-under-file", lambda t: [*G, "-o", _sample(t) / "t.parquet"], "is a file"),
    # maf: named traces
    ("maf-seed-negative", lambda t: [*M, "--seed", "-1", "-o", t / "t.parquet"], "--seed"),
    ("maf-models-not-utf8", lambda t: [*M, "--models", NOT_UTF8, "-o", t / "t.parquet"], "UTF-8"),
    ("maf-out-dir", lambda t: [*M, "-o", _dir(t)], "directory"),
    ("maf-load-huge", lambda t: [*M, "--rate", "1e12", "-o", t / "t.parquet"], "300,000,000"),
    ("maf-load-nan", lambda t: [*M, "--rate", "nan", "-o", t / "t.parquet"], "--rate"),
    ("maf-load-inf", lambda t: [*M, "--rate", "inf", "-o", t / "t.parquet"], "--rate"),
    ("maf-duration-huge", lambda t: [*M, "--duration-min", "100000000", "-o", t / "t.parquet"], "--duration-min"),
    ("maf-duration-zero", lambda t: [*M, "--duration-min", "0", "-o", t / "t.parquet"], "--duration-min"),
    ("maf-functions-huge", lambda t: [*M, "--functions", "1000000000", "-o", t / "t.parquet"], "--functions"),
    ("maf-cells-huge", lambda t: [*M, "--functions", "500000", "--duration-min", "1440", "-o", t / "t.parquet"],
     "100,000,000"),
    ("maf-synthetic-rate-inf", lambda t: [*M, "--synthetic-rate", "inf", "-o", t / "t.parquet"], "--synthetic-rate"),
    ("maf-slo-nan", lambda t: [*M, "--slo-ms", "nan", "-o", t / "t.parquet"], "--slo-ms"),
    ("maf-ratio-nan", lambda t: [*M, "--mmpp-ratio", "nan", "-o", t / "t.parquet"], "--mmpp-ratio"),
    ("maf-dwell-zero", lambda t: [*M, "--mmpp-dwell-high", "0", "-o", t / "t.parquet"], "--mmpp-dwell-high"),
    ("maf-day-zero", lambda t: [*M, "--day", "0", "-o", t / "t.parquet"], "--day"),
    ("maf-day-15", lambda t: [*M, "--day", "15", "-o", t / "t.parquet"], "--day"),
    ("maf-start-minute", lambda t: [*M, "--start-minute", "1441", "-o", t / "t.parquet"], "--start-minute"),
    ("maf-streams-zero", lambda t: [*M, "--streams", "0", "-o", t / "t.parquet"], "--streams"),
    ("maf-sample-negative", lambda t: [*M, "--sample", "-3", "-o", t / "t.parquet"], "--sample"),
    # maf: MAF 2019 files
    ("maf-csv-cut-mid-row", lambda t: ["traces", "maf", "maf2019", "--path", _cut_csv(t), "--duration-min", "10",
                                       "-o", t / "t.parquet"], "cut mid-row"),
    ("maf2021-cut-mid-row", lambda t: ["traces", "maf", "maf2021", "--path", _cut_2021(t), "-o", t / "t.parquet"],
     "cut mid-row"),
    ("maf-file-day", lambda t: ["traces", "maf", "maf2019", "--path", _sample(t), "--day", "3",
                                "-o", t / "t.parquet"], "--day 3"),
    ("maf-file-other-day", lambda t: ["traces", "maf", "maf2019", "--path", _day3(t), "--day", "2",
                                      "-o", t / "t.parquet"], "holds day 3"),
    ("maf-window-past-end", lambda t: ["traces", "maf", "maf2019", "--path", _sample(t), "--start-minute", "485",
                                       "--duration-min", "10", "-o", t / "t.parquet"], "runs past the file"),
    ("maf-window-before-start", lambda t: ["traces", "maf", "maf2019", "--path", _sample(t), "--start-minute", "478",
                                           "--duration-min", "5", "-o", t / "t.parquet"], "480–489"),
]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize("make_args, needle", [pytest.param(a, n, id=i) for i, a, n in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(cli, tmp_path, monkeypatch, make_args, needle):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))
    args = make_args(work)
    before = _files(tmp_path)
    result = cli(*args)
    assert_user_error(result, needle)
    assert "internal error" not in result.err
    assert _files(tmp_path) == before, sorted(map(str, _files(tmp_path) - before))


def test_cut_csv_helper_really_cuts_a_row(tmp_path):
    """The cut-file case must be a real truncation: every row but the last is whole."""
    lines = _cut_csv(tmp_path).read_text().splitlines()
    assert len(lines) == 4 and lines[-1].count(",") < lines[0].count(",") == lines[1].count(",")


# --------------------------------------------------------------------------- issue 33 item 9 (weak cases)

def test_an_empty_trace_is_refused(cli, tmp_path):
    """``--rate 0`` or a duration too short for one request wrote an empty trace with exit 0."""
    from conftest import assert_user_error

    for args in (["--rate", "0"], ["--duration-s", "0.000001"]):
        out = tmp_path / "t.parquet"
        assert_user_error(cli("traces", "generate", *args, "-o", out), "no requests")
        assert not out.exists()


def test_two_stream_refuses_the_options_it_ignores(cli, tmp_path):
    from conftest import assert_user_error

    out = tmp_path / "t.parquet"
    assert_user_error(cli("traces", "generate", "--process", "two-stream", "--rate", "5", "--models", "ResNet50",
                          "-o", out), "--rate, --models", "does not apply")
    assert not out.exists()
    assert cli("traces", "generate", "--process", "two-stream", "--duration-s", "1", "-o", out).code == 0


def test_a_trace_with_an_all_null_model_column_is_refused(cli, tmp_path):
    import polars as pl

    from conftest import assert_user_error

    bad = tmp_path / "bad.parquet"
    pl.DataFrame({"arrival_us": [0, 5], "stream": [0, 0], "model": pl.Series([None, None], dtype=pl.String),
                  "slo_us": [10, 10], "deadline_us": [10, 15]}).write_parquet(bad)
    assert_user_error(cli("simulate", "--trace", bad, "--gpus", "1", "-o", tmp_path / "o"), "model", "empty cells")


def test_a_one_batch_size_profile_fit_is_refused(cli, tmp_path):
    """One batch size cannot give α; the fit used to report R² = 1 on one point."""
    from conftest import assert_user_error

    csv = tmp_path / "one.csv"
    csv.write_text("model,hardware,batch,latency_ms\nResNet50,V100,1,5\nResNet50,V100,1,5.2\n")
    out = tmp_path / "p.parquet"
    assert_user_error(cli("profile", "--from", csv, "-o", out), "one batch size")
    assert not out.exists()
