"""Bad input to the MAF commands: exit 2, one line on stderr, nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_user_error
from maf_helpers import write_maf2019


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))


def _maf(cli, tmp_path, *args):
    out = tmp_path / "out" / "t.parquet"
    result = cli("traces", "maf", *args, "-o", out)
    return result, out


def test_wrong_header(cli, tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("HashOwner,HashApp,Function,Trigger,1,2\na,b,c,http,1,2\n")
    result, out = _maf(cli, tmp_path, "maf2019", "--path", src)
    assert_user_error(result, "wrong header", "d.csv")
    assert not out.exists() and not out.parent.exists()


def test_non_numeric_counts(cli, tmp_path):
    src = tmp_path / "d.csv"
    src.write_text("HashOwner,HashApp,HashFunction,Trigger,1,2\na,b,c,http,1,two\n")
    result, out = _maf(cli, tmp_path, "maf2019", "--path", src, "--duration-min", "2")
    assert_user_error(result, "non-numeric")
    assert not out.exists()


def test_missing_day_file(cli, tmp_path):
    root = tmp_path / "maf"
    write_maf2019(root / "invocations_per_function_md.anon.d01.csv", np.ones((2, 1440), int))
    result, out = _maf(cli, tmp_path, "maf2019", "--path", root, "--day", "4")
    assert_user_error(result, "not found", "d04")
    assert not out.exists()


def test_unknown_trace_name(cli, tmp_path):
    result, out = _maf(cli, tmp_path, "maf2020")
    assert_user_error(result, "unknown trace 'maf2020'")
    assert not out.exists()
    assert_user_error(cli("traces", "stats", "maf2020"), "maf2020", "neither a file nor a known trace name")


def test_data_missing_is_an_error_not_a_fallback(cli, tmp_path):
    result, out = _maf(cli, tmp_path, "maf2019-bursty")
    assert_user_error(result, "shepherd traces fetch maf2019", "shepherd traces import")
    assert not out.exists()


def test_negative_load(cli, tmp_path):
    result, out = _maf(cli, tmp_path, "maf-synthetic", "--rate", "-100")
    assert_user_error(result, "--rate", "-100")
    assert not out.exists()


def test_unknown_process(cli, tmp_path):
    result, out = _maf(cli, tmp_path, "maf-synthetic", "--process", "spiky")
    assert_user_error(result, "unknown arrival process 'spiky'")
    assert not out.exists()


def test_window_outside_file_minutes(cli, tmp_path):
    src = write_maf2019(tmp_path / "d.csv", np.ones((2, 5), int), minutes=range(480, 485))
    result, out = _maf(cli, tmp_path, "maf2019", "--path", src, "--start-minute", "10")
    assert_user_error(result, "not in the file", "480–484")
    assert not out.exists()


def test_out_without_cv(cli, tmp_path):
    assert_user_error(cli("traces", "stats", "maf-synthetic", "-o", tmp_path / "cv.parquet"), "--cv")
    assert not (tmp_path / "cv.parquet").exists()


def test_fetch_unknown_dataset(cli, tmp_path):
    assert_user_error(cli("traces", "fetch", "maf1999"), "unknown dataset 'maf1999'")
    assert not (tmp_path / "cache").exists()


def test_maf_success_summary(cli, tmp_path):
    src = write_maf2019(tmp_path / "d.csv", np.full((4, 3), 10), minutes=[480, 481, 482])
    result, out = _maf(cli, tmp_path, "maf2019-stable", "--path", src, "--duration-min", "3", "--streams", "2")
    assert result.code == 0, result.err
    assert out.exists() and "traces maf" in result.out
    assert "synthetic" not in result.out
