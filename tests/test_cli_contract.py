"""The CLI's promises (issue 11): --version, completion, choices in --help, log-line
progress off a terminal, and bad input → one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

import io
import re
import sys

import pytest
import typer
from rich.console import Console

from shepherd import __version__
from shepherd.cli.app import app
from shepherd.cli.common import LogProgress

from conftest import assert_user_error


@pytest.fixture
def trace_file(cli, tmp_path):
    path = tmp_path / "t.parquet"
    res = cli("traces", "generate", "--process", "poisson", "--rate", "50", "--duration-s", "5",
              "--streams", "3", "-o", path)
    assert res.code == 0, res.err
    return path


def test_version_prints_and_exits_zero(cli):
    res = cli("--version")
    assert res.code == 0, res.err
    assert res.out.strip() == f"shepherd {__version__}"


def test_shell_completion_is_offered(cli, monkeypatch):
    # The environment protocol the installed script uses (no shell detection involved).
    monkeypatch.setenv("_SHEPHERD_COMPLETE", "source_bash")
    res = cli()
    assert res.code == 0, res.err
    assert "_SHEPHERD_COMPLETE=complete_bash" in res.out
    monkeypatch.setenv("_SHEPHERD_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "shepherd sim")
    monkeypatch.setenv("COMP_CWORD", "1")
    res = cli()
    assert res.code == 0, res.err
    assert res.out.split() == ["simulate"]


def _option(command: str, name: str):
    group = typer.main.get_command(app)
    cmd = group.commands[command]  # type: ignore[attr-defined]
    return next(p for p in cmd.params if name in p.opts)


@pytest.mark.parametrize("command, option, values", [
    ("simulate", "--policy", ["flex", "flex-np", "clockwork", "nexus", "ppipe", "reactive"]),
    ("simulate", "--record", ["summary", "batches", "requests"]),
    ("plan", "--planner", ["herd", "nexus", "ppipe", "np", "dart-r"]),
    ("plan", "--solver", ["highs", "cbc", "gurobi"]),
])
def test_choices_are_listed_in_help(command, option, values):
    metavar = _option(command, option).metavar
    listed = re.fullmatch(r"\[(.*)\]", metavar).group(1).split("|")
    assert set(values) <= set(listed)


def test_log_progress_is_quiet_for_short_work_and_logs_long_work():
    lines: list[str] = []
    clock = iter([0.0, 0.5, 1.0, 3.0, 3.5, 20.0, 21.0])
    log = LogProgress(lines.append, every_s=10.0, quiet_s=2.0, clock=lambda: next(clock))
    task = log.add_task("cells", total=10)      # t=0
    log.advance(task)                            # t=0.5: quiet period
    log.advance(task)                            # t=1.0: quiet period
    assert lines == []
    log.advance(task)                            # t=3.0: first line
    log.advance(task)                            # t=3.5: a new tenth of the total
    log.update(task, completed=5)                # t=20
    log.update(task, completed=10)               # t=21: done
    assert len(lines) == 4, lines
    assert "3/10 (30 %)" in lines[0] and "4/10" in lines[1] and "5/10" in lines[2]
    assert "cells: done 10/10 (100 %), 21.0 s" in lines[3]


def test_log_progress_logs_nothing_for_a_task_done_within_the_quiet_period():
    lines: list[str] = []
    clock = iter([0.0, 0.1, 0.2])
    log = LogProgress(lines.append, quiet_s=2.0, clock=lambda: next(clock))
    log.update(log.add_task("plan", total=None), completed=1)
    log.finish()
    assert lines == []


def test_progress_off_terminal_writes_timestamped_log_lines(monkeypatch):
    from shepherd.cli import common

    monkeypatch.setattr(common, "LOG_QUIET_S", 0.0)
    stderr = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=stderr, force_terminal=False))
    monkeypatch.setattr(sys, "stderr", stderr)
    with common.progress() as bar:
        task = bar.add_task("simulating", total=4)
        bar.advance(task, 2)
        bar.update(task, completed=4)
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ simulating: 2/4 \(50 %\)", lines[0]), lines[0]
    assert "simulating: done 4/4 (100 %)" in lines[1]


BAD_INPUT = [
    # (args after the trace, needle in the error line)
    (["plan", "--gpus", "4", "--seed", "-1"], "--seed"),
    (["plan", "--gpus", "4", "--planner", "nexus", "--epoch-s", "inf"], "--epoch-s"),
    (["plan", "--gpus", "4", "--epoch-s", "nan"], "--epoch-s"),
    (["plan", "--gpus", "4", "--slo-scale", "inf"], "--slo-scale"),
    (["plan", "--gpus", "4", "--slo-margin", "1.5"], "--slo-margin"),
    (["plan", "--gpus", "0"], "--gpus"),
    (["plan", "--gpus", "1000000000"], "--gpus"),
    (["plan", "--gpus", "4", "--affinity-k", "0"], "--affinity-k"),
    (["plan", "--gpus", "4", "--gpu-memory-mb", "nan"], "--gpu-memory-mb"),
    (["plan", "--gpus", "4", "--solver", "glpk"], "glpk"),
    (["simulate", "--gpus", "2", "--seed", "-1"], "--seed"),
    (["simulate", "--gpus", "2", "--max-batch", "1000000000000"], "--max-batch"),
    (["simulate", "--gpus", "1000000000"], "--gpus"),
    (["simulate", "--gpus", "2", "--load", "inf"], "--load"),
    (["simulate", "--gpus", "2", "--load", "1e300"], "--load"),
    (["simulate", "--gpus", "2", "--slo-ms", "nan"], "--slo-ms"),
    (["simulate", "--gpus", "2", "--policy", "flexx"], "flexx"),
]


@pytest.mark.parametrize("args, needle", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, trace_file, tmp_path, args, needle):
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "out"
    res = cli(args[0], "--trace", trace_file, *args[1:], "-o", out)
    assert_user_error(res, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("args, needle", [
    (["profile", "--table", "shepherd-v100", "--max-batch", "1000000000000"], "--max-batch"),
    (["profile", "--table", "shepherd-v100", "--seed", "-1"], "--seed"),
])
def test_profile_bad_input(cli, tmp_path, args, needle):
    res = cli(*args, "-o", tmp_path / "p.parquet")
    assert_user_error(res, needle)
    assert list(tmp_path.iterdir()) == []


def test_seed_reaches_a_named_trace_in_simulate(cli, tmp_path):
    import polars as pl

    def goodput(seed):
        out = tmp_path / f"s{seed}"
        res = cli("simulate", "--trace", "maf-synthetic", "--gpus", "4", "--seed", seed, "--record", "requests",
                  "-o", out)
        assert res.code == 0, res.err
        return pl.read_parquet(out / "requests.parquet")["arrival_us"]

    a0, a0_again, a1 = goodput(0), goodput(0), goodput(1)
    assert a0.equals(a0_again)
    assert not a0.equals(a1)
