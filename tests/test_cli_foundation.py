"""CLI conventions: help with examples, one-line errors with exit code 2, no partial artifacts."""

from __future__ import annotations

import polars as pl
import pytest

from shepherd.cli.app import app
from tests_helpers import command_paths
from conftest import assert_user_error


def test_root_help_lists_the_commands(cli):
    result = cli("--help")
    assert result.code == 0
    for name in ("profile", "traces"):
        assert name in result.out


@pytest.mark.parametrize("path", command_paths(app))
def test_every_command_has_help_with_an_example(cli, path):
    result = cli(*path, "--help")
    assert result.code == 0, result.err
    assert "Example" in result.out, f"`shepherd {' '.join(path)} --help` shows no example"


def test_missing_measurement_file(cli, tmp_path):
    out = tmp_path / "p.parquet"
    assert_user_error(cli("profile", "--from", tmp_path / "nope.csv", "-o", out), "file not found", "nope.csv")
    assert not out.exists()


def test_csv_with_a_missing_column(cli, tmp_path):
    csv = tmp_path / "m.csv"
    pl.DataFrame({"model": ["a"], "hardware": ["g"], "batch": [1]}).write_csv(csv)
    out = tmp_path / "p.parquet"
    assert_user_error(cli("profile", "--from", csv, "-o", out), "missing column 'latency_ms'")
    assert not out.exists()


def test_csv_with_non_numeric_latency(cli, tmp_path):
    csv = tmp_path / "m.csv"
    csv.write_text("model,hardware,batch,latency_ms\na,g,1,fast\n")
    assert_user_error(cli("profile", "--from", csv, "-o", tmp_path / "p.parquet"), "numeric")


def test_negative_rate(cli, tmp_path):
    out = tmp_path / "t.parquet"
    assert_user_error(cli("traces", "generate", "--rate", "-5", "-o", out), "rate", "-5")
    assert not out.exists()


def test_non_numeric_option_value(cli, tmp_path):
    assert_user_error(cli("traces", "generate", "--rate", "lots", "-o", tmp_path / "t.parquet"), "--rate")


def test_unknown_table_name(cli, tmp_path):
    out = tmp_path / "p.parquet"
    assert_user_error(cli("profile", "--table", "tpu-v9", "-o", out), "unknown profile table 'tpu-v9'")
    assert not out.exists()


def test_unknown_process(cli, tmp_path):
    assert_user_error(cli("traces", "generate", "--process", "fractal", "-o", tmp_path / "t.parquet"),
                      "unknown arrival process 'fractal'")


def test_unreadable_parquet(cli, tmp_path):
    bad = tmp_path / "trace.parquet"
    bad.write_bytes(b"\x00garbage")
    assert_user_error(cli("traces", "stats", bad), "cannot read Parquet file", "trace.parquet")


def test_missing_trace_file(cli, tmp_path):
    assert_user_error(cli("traces", "stats", tmp_path / "absent.parquet"), "absent.parquet")


def test_verbose_shows_the_traceback(cli, tmp_path):
    result = cli("--verbose", "profile", "--table", "tpu-v9", "-o", tmp_path / "p.parquet")
    assert result.code == 2
    assert "Traceback" in result.err and "error: unknown profile table" in result.err
