"""Results you can trust (issue 11): concurrent writers, checked cells, byte-identical plans,
whole output folders, early output checks, normal permissions, plain progress lines."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import experiment_fixtures
import trust_fixtures
from conftest import assert_user_error
from shepherd.core import outputs
from shepherd.core.artifacts import (
    artifact_dir,
    file_lock,
    make_provenance,
    read_artifact,
    run_record_path,
    write_artifact,
)
from shepherd.core.errors import UserError
from shepherd.experiments import runner
from shepherd.experiments.base import Scale
from shepherd.traces.synthetic import assemble

EXP = experiment_fixtures.EXPERIMENT
SLOW = trust_fixtures.EXPERIMENT


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    """Relative path → SHA-256 of every visible file under ``root`` (hidden lock files left out, and the
    run records ``*.run.json``: timings and paths live there, outside the hashed content)."""
    return {str(p.relative_to(root)): _digest(p) for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and not p.name.endswith(".run.json")}


# --------------------------------------------------------------------------- two writers

def test_two_reproduce_runs_on_one_folder_at_once(tmp_path):
    shared, alone = tmp_path / "shared", tmp_path / "alone"
    args = ("reproduce", SLOW.name, "--replicas", "2", "--results")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    procs = [subprocess.Popen(trust_fixtures.cli_command(*args, shared, "--jobs", jobs), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for jobs in ("1", "2")]
    outs = [p.communicate(timeout=240) for p in procs]
    for proc, (_out, err) in zip(procs, outs):
        assert proc.returncode == 0, err.decode()
        assert b"Traceback" not in err
    solo = subprocess.run(trust_fixtures.cli_command(*args, alone, "--jobs", "1"), env=env, capture_output=True)
    assert solo.returncode == 0, solo.stderr.decode()

    cells = SLOW.cells(Scale(seeds=2))
    assert all(runner.cell_problem(c, shared) is None for c in cells)  # every cell readable and its own
    # The same bytes as a run alone: cells, the results artifact, figures, REPORT.md.
    together, by_itself = _tree(shared), _tree(alone)
    together.pop("reproduce.log"), by_itself.pop("reproduce.log")
    assert together == by_itself
    assert "trust_slow_rate.png" in {Path(k).name for k in together}
    assert not [p for p in shared.rglob(".*.tmp")]  # no temp left behind
    # The two runs shared the work: every cell was computed exactly once between them.
    log = (shared / "reproduce.log").read_text()
    assert log.count(" done in ") == len(cells), log


WRITER = """
import sys
from pathlib import Path
import polars as pl
from shepherd.core.artifacts import write_artifact
from shepherd.experiments.report import write_report
dest = Path(sys.argv[1])
frame = pl.DataFrame({"group": list(range(2000)), "role": ["worker"] * 2000, "name": ["w"] * 2000})
for _ in range(100):
    write_artifact(frame, dest / "plan.parquet", "plan")
    write_report([], dest)
"""


def test_two_processes_rewriting_one_artifact_both_finish(tmp_path):
    """The race behind the crash: each write used to delete the other's live temp file."""
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stderr=subprocess.PIPE)
             for _ in range(2)]
    errs = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert read_artifact(tmp_path / "plan.parquet", "plan").frame.height == 2000
    assert (tmp_path / "REPORT.md").read_text().startswith("# Reproduction report")
    assert not list(tmp_path.glob(".*.tmp"))


def test_stale_temps_of_live_writers_are_kept(tmp_path):
    dest = tmp_path / "x.parquet"
    live = subprocess.Popen(["sleep", "30"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        live_tmp = dest.with_name(f".x.parquet.{outputs._HOST}.{live.pid}.ab12cd34.tmp")
        dead_tmp = dest.with_name(f".x.parquet.{outputs._HOST}.{dead.pid}.ab12cd34.tmp")
        other_host_old = dest.with_name(".x.parquet.elsewhere.1.ab12cd34.tmp")
        for p in (live_tmp, dead_tmp, other_host_old):
            p.write_bytes(b"partial")
        old = time.time() - 2 * outputs.STALE_AGE_S
        os.utime(other_host_old, (old, old))
        write_artifact(pl.DataFrame({"group": [0], "role": ["worker"], "name": ["w0"]}), dest, "plan")
        assert live_tmp.exists()  # another process is still writing it
        assert not dead_tmp.exists() and not other_host_old.exists()
    finally:
        live.kill()
        live.wait()


def test_a_cell_another_run_holds_is_waited_for_and_not_computed_twice(tmp_path):
    cells = EXP.cells(Scale(quick=True, seeds=2))
    held = cells[1]
    ready = threading.Event()

    def other_run():  # holds the cell's lock, as a second reproduce computing it would, then writes it
        with file_lock(runner._lock_path(held, tmp_path)):
            ready.set()
            time.sleep(0.5)
            runner._write_cell(held, runner.compute_cell(EXP.__module__, EXP.name, held.params), tmp_path)

    thread = threading.Thread(target=other_run)
    thread.start()
    ready.wait()
    done: list[tuple[str, float | None]] = []
    stats = runner.run_cells(cells, tmp_path, jobs=1, on_done=lambda c, s: done.append((c.key(), s)))
    thread.join()
    assert (stats.ran, stats.shared) == (len(cells) - 1, 1)
    assert (held.key(), None) in done and len(done) == len(cells)
    assert all(s is not None and s > 0 for k, s in done if k != held.key())
    assert all(runner.cell_problem(c, tmp_path) is None for c in cells)


# --------------------------------------------------------------------------- checked cells

def test_truncated_and_swapped_cells_are_detected_and_recomputed(tmp_path):
    cells = EXP.cells(Scale(quick=True, seeds=2))
    runner.run_cells(cells, tmp_path, jobs=1)
    good = {c.key(): c.path(tmp_path).read_bytes() for c in cells}
    truncated, swapped, donor = cells[0], cells[1], cells[2]
    path = truncated.path(tmp_path)
    path.write_bytes(good[truncated.key()][: len(good[truncated.key()]) // 2])
    shutil.copyfile(donor.path(tmp_path), swapped.path(tmp_path))  # a valid file of another cell

    assert runner.cell_problem(truncated, tmp_path).startswith("unreadable")
    assert "another cell" in runner.cell_problem(swapped, tmp_path)
    assert runner.cell_problem(donor, tmp_path) is None
    logged: list[str] = []
    stats = runner.run_cells(cells, tmp_path, jobs=1, log=logged.append)
    assert (stats.ran, stats.recomputed, stats.skipped) == (2, 2, len(cells) - 2)
    assert len(logged) == 2 and all("recomputing" in line for line in logged)
    assert {c.key(): c.path(tmp_path).read_bytes() for c in cells} == good
    frame = runner.collect(cells, tmp_path)
    assert sorted(frame["cell"].to_list()) == sorted(c.key() for c in cells)


def test_reproduce_recomputes_a_swapped_cell_through_the_cli(cli, tmp_path):
    res = tmp_path / "results"
    assert cli("reproduce", EXP.name, "--quick", "--jobs", "1", "--results", res, "--no-report").code == 0
    cells = EXP.cells(Scale(quick=True, seeds=1))
    before = _digest(runner.results_path(res, EXP.name))
    shutil.copyfile(cells[1].path(res), cells[0].path(res))
    r = cli("reproduce", EXP.name, "--quick", "--jobs", "1", "--results", res, "--no-report")
    assert r.code == 0, r.err
    assert "holds another cell's result" in r.err and "recomputing" in r.err
    assert _digest(runner.results_path(res, EXP.name)) == before  # the numbers are right again


# --------------------------------------------------------------------------- byte-identical artifacts

@pytest.fixture
def plan_inputs(tmp_path):
    """The same trace in two folders."""
    rng = np.random.default_rng(5)
    models = ["ResNet18", "ResNet50", "DenseNet121", "GoogLeNet"]
    n = 300
    arr = np.sort(rng.integers(0, 2_000_000, n)).astype(np.int64)
    stream = rng.integers(0, 8, n).astype(np.int32)
    frame = pl.DataFrame({"arrival_us": arr, "stream": stream, "model": [models[s % 4] for s in stream],
                          "slo_us": np.full(n, 100_000, np.int64)}).with_columns(
        deadline_us=pl.col("arrival_us") + pl.col("slo_us"))
    paths = []
    for where in ("site-a", "site-b/deeper"):
        path = tmp_path / where / "trace.parquet"
        write_artifact(frame, path, "trace", make_provenance({}, 0))
        paths.append(path)
    return paths


def test_same_plan_twice_and_in_two_folders_is_byte_identical(cli, plan_inputs, tmp_path, monkeypatch):
    def shepherd(*args):  # the real command line, as a shell would give it
        monkeypatch.setattr(sys, "argv", ["/usr/local/bin/shepherd", *map(str, args)])
        return cli(*args)

    outs = []
    for i, trace in enumerate([plan_inputs[0], plan_inputs[0], plan_inputs[1]]):
        out = trace.parent / f"run{i}" / "plan.parquet"
        r = shepherd("plan", "--trace", trace.resolve(), "--gpus", "6", "--group-limit", "3", "-o", out.resolve())
        assert r.code == 0, r.err
        assert "solve time" in r.out  # the summary still says how long it took
        outs.append(out)
    assert _digest(outs[0]) == _digest(outs[1]) == _digest(outs[2])
    art = read_artifact(outs[2], "plan")
    assert "solve_s" not in art.extra and art.extra["status"] == "optimal"
    assert all("solve_s" not in phase for phase in art.extra.get("phases", []))
    assert art.run["timing"]["solve_s"] >= 0  # the timing lives in plan.run.json
    assert str(plan_inputs[1].resolve()) in art.run["command"]  # … with the full command line
    assert str(tmp_path) not in str(art.provenance)
    assert art.provenance["command"][:3] == ["shepherd", "plan", "--trace"]
    assert art.provenance["command"][3] == "trace.parquet"  # by name; its hash is in inputs

    # simulate --plan records the plan's hash: identical plans give identical outputs.
    sims = []
    for trace, plan in ((plan_inputs[0], outs[0]), (plan_inputs[1], outs[2])):
        out = plan.parent / "sim"
        r = shepherd("simulate", "--trace", trace.resolve(), "--plan", plan.resolve(), "--record", "summary",
                     "-o", out.resolve())
        assert r.code == 0, r.err
        sims.append(out)
    assert _tree(sims[0]) == _tree(sims[1])


def test_run_record_of_an_overwritten_artifact_is_dropped(tmp_path):
    dest = tmp_path / "plan.parquet"
    frame = pl.DataFrame({"group": [0], "role": ["worker"], "name": ["w0"]})
    write_artifact(frame, dest, "plan", extra={"status": "optimal", "solve_s": 1.5})
    assert read_artifact(dest, "plan").run["timing"] == {"solve_s": 1.5}
    write_artifact(frame, dest, "plan", extra={"status": "optimal"})
    assert not run_record_path(dest).exists()
    # A record that does not describe the file beside it is ignored.
    write_artifact(frame, dest, "plan", extra={"status": "optimal", "solve_s": 2.0})
    write_artifact(frame.with_columns(pl.lit("w1").alias("name")), tmp_path / "other.parquet", "plan")
    shutil.copyfile(tmp_path / "other.parquet", dest)
    assert read_artifact(dest, "plan").run == {}


def test_reproduce_results_do_not_depend_on_the_results_folder(cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "elsewhere" / "b"
    for res in (a, b):
        assert cli("reproduce", EXP.name, "--quick", "--jobs", "1", "--results", res, "--no-report").code == 0
    tree_a, tree_b = _tree(a), _tree(b)
    tree_a.pop("reproduce.log"), tree_b.pop("reproduce.log")
    assert tree_a == tree_b and len(tree_a) == 3  # two cells and the results artifact


# --------------------------------------------------------------------------- whole output folders

@pytest.fixture
def trace_file(tmp_path):
    rng = np.random.default_rng(1)
    a = np.sort(rng.integers(0, 1_000_000, 200)).astype(np.int64)
    path = tmp_path / "trace.parquet"
    write_artifact(assemble([a], ["ResNet18"], [50_000]), path, "trace", make_provenance())
    return path


def test_second_simulate_into_one_folder_leaves_only_its_own_files(cli, trace_file, tmp_path):
    out = tmp_path / "run"
    first = cli("simulate", "--trace", trace_file, "--gpus", "1", "--record", "requests", "-o", out)
    assert first.code == 0, first.err
    tables = {"summary", "workers", "batches", "requests"}  # each with its run record (which engine ran)
    assert {p.name for p in out.iterdir()} == {f"{t}.{x}" for t in tables for x in ("parquet", "run.json")}
    second = cli("simulate", "--trace", trace_file, "--gpus", "2", "--record", "summary", "-o", out)
    assert second.code == 0, second.err
    assert {p.name for p in out.iterdir()} == {f"{t}.{x}" for t in ("summary", "workers") for x in ("parquet", "run.json")}
    assert read_artifact(out / "workers.parquet", "workers").frame.height == 2  # the second run's
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_artifact_dir_failure_keeps_the_earlier_folder(tmp_path):
    out = tmp_path / "run"
    frame = pl.DataFrame({"group": [0], "role": ["worker"], "name": ["w0"]})
    with artifact_dir(out) as tmp:
        write_artifact(frame, tmp / "plan.parquet", "plan")
    before = _tree(out)
    with pytest.raises(RuntimeError):
        with artifact_dir(out) as tmp:
            write_artifact(frame, tmp / "other.parquet", "plan")
            raise RuntimeError("killed mid-write")
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == ["run"]


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
import polars as pl
from shepherd.core.artifacts import artifact_dir, write_artifact
with artifact_dir(Path(sys.argv[1])) as tmp:
    write_artifact(pl.DataFrame({"group": [1], "role": ["worker"], "name": ["new"]}), tmp / "a.parquet", "plan")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_folder_write_leaves_the_earlier_run_and_is_cleaned_up(tmp_path):
    out = tmp_path / "run"
    frame = pl.DataFrame({"group": [0], "role": ["worker"], "name": ["old"]})
    with artifact_dir(out) as tmp:
        write_artifact(frame, tmp / "a.parquet", "plan")
        write_artifact(frame, tmp / "b.parquet", "plan")
    before = _tree(out)
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(out)], capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()
    assert _tree(out) == before  # the earlier run, whole
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1  # the killed write's hidden folder …
    with artifact_dir(out) as tmp:
        write_artifact(frame, tmp / "c.parquet", "plan")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # … removed by the next write
    assert sorted(p.name for p in out.iterdir()) == ["c.parquet"]


def test_output_folder_with_foreign_files_is_refused_before_simulating(cli, trace_file, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    r = cli("simulate", "--trace", trace_file, "--gpus", "1", "-o", out)
    assert_user_error(r, "notes.txt")
    assert (out / "notes.txt").read_text() == "keep me"


# --------------------------------------------------------------------------- early output checks

def test_simulate_output_that_is_a_file_fails_before_the_run(cli, trace_file, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    import shepherd.core.engine as engine  # the command imports it when it runs (lazy imports: fast --help)

    def must_not_run(*_a, **_k):
        raise AssertionError("simulated before checking -o")

    monkeypatch.setattr(engine, "simulate", must_not_run)
    assert_user_error(cli("simulate", "--trace", trace_file, "--gpus", "1", "-o", blocker), "is a file")
    assert_user_error(cli("simulate", "--trace", trace_file, "--gpus", "1", "-o", blocker / "sub"), "is a file")


@pytest.mark.parametrize("command", [
    ("plan", "--trace", "{trace}", "--gpus", "2"),
    ("traces", "generate", "--rate", "5", "--duration-s", "1"),
    ("profile", "--table", "shepherd-v100"),
])
def test_single_file_output_naming_a_directory_is_a_user_error(cli, trace_file, tmp_path, command):
    folder = tmp_path / "adir"
    folder.mkdir()
    args = [a.format(trace=trace_file) for a in command]
    assert_user_error(cli(*args, "-o", folder), "is a directory")
    assert list(folder.iterdir()) == []


def test_plan_output_below_a_file_fails_before_planning(cli, trace_file, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    import shepherd.traces.resolve as resolve  # the command imports it when it runs (lazy imports: fast --help)

    monkeypatch.setattr(resolve, "load_trace", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("ran")))
    assert_user_error(cli("plan", "--trace", trace_file, "-o", blocker / "plan.parquet"), "is a file")


def test_reproduce_checks_every_output_before_the_first_cell(cli, tmp_path):
    res = tmp_path / "results"
    (res / "data").mkdir(parents=True)
    (res / "data" / f"{EXP.name}.parquet").mkdir()  # a folder where the results artifact belongs
    r = cli("reproduce", "test-paper", "--quick", "--jobs", "1", "--results", res)
    assert_user_error(r, "is a directory")
    assert not (res / "cells").exists()  # no cell ran


# --------------------------------------------------------------------------- permissions

@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_artifacts_get_normal_permissions(tmp_path, umask):
    old = os.umask(umask)
    try:
        frame = pl.DataFrame({"group": [0], "role": ["worker"], "name": ["w0"]})
        path = write_artifact(frame, tmp_path / "p.parquet", "plan", extra={"solve_s": 0.1})
        with artifact_dir(tmp_path / "run") as tmp:
            write_artifact(frame, tmp / "p.parquet", "plan")
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o666 & ~umask
    assert (run_record_path(path).stat().st_mode & 0o777) == 0o666 & ~umask
    assert ((tmp_path / "run").stat().st_mode & 0o777) == 0o777 & ~umask
    assert ((tmp_path / "run" / "p.parquet").stat().st_mode & 0o777) == 0o666 & ~umask


# --------------------------------------------------------------------------- report over bad results

def test_report_over_results_with_wrong_columns_names_file_and_columns(cli, tmp_path):
    path = runner.results_path(tmp_path, EXP.name)
    write_artifact(pl.DataFrame({"measured": [1.0], "seed": [0]}), path, "results")
    r = cli("report", EXP.name, "--results", tmp_path)
    assert_user_error(r, str(path), "rate", "cell")
    assert "seed" not in r.err.split("column(s)")[1].split(" of ")[0]


def test_report_over_results_missing_a_measured_column(cli, tmp_path):
    path = runner.results_path(tmp_path, EXP.name)
    write_artifact(pl.DataFrame({"rate": [100], "seed": [0], "cell": ["k"]}), path, "results")
    assert_user_error(cli("report", EXP.name, "--results", tmp_path), str(path), "measured_rate")


# --------------------------------------------------------------------------- plain progress lines

def test_reproduce_logs_plain_lines_when_not_on_a_terminal(cli, tmp_path):
    res = tmp_path / "results"
    r = cli("reproduce", EXP.name, "--quick", "--jobs", "1", "--results", res, "--no-report")
    assert r.code == 0, r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    cell_lines = [ln for ln in lines if "] cell " in ln]
    assert len(cell_lines) == 2
    assert "[1/2] cell test-measured-rate rate=100 seed=0 done in " in cell_lines[0]
    assert cell_lines[1].split(" ", 1)[1].startswith("[2/2] cell test-measured-rate rate=200 seed=0 done in ")
    assert not any(ch in r.err for ch in "━⠋\r")  # no bar drawn into a file
    logged = (res / "reproduce.log").read_text().splitlines()
    tag = f" [pid {os.getpid()}] "
    assert [ln.replace(tag, " ") for ln in logged if "] cell " in ln] == cell_lines
    again = cli("reproduce", EXP.name, "--quick", "--jobs", "1", "--results", res, "--no-report")
    assert "[2/2] test-measured-rate: 2 of 2 cells already done" in again.err
    assert len((res / "reproduce.log").read_text().splitlines()) > len(logged)  # appended, not replaced


def test_check_output_helpers(tmp_path, monkeypatch):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(UserError, match="is a directory"):
        outputs.check_output_file(tmp_path)
    with pytest.raises(UserError, match="is a file"):
        outputs.check_output_file(f / "a" / "b.parquet")
    with pytest.raises(UserError, match="is a file"):
        outputs.check_output_dir(f)
    assert outputs.check_output_file(tmp_path / "new" / "x.parquet") == tmp_path / "new" / "x.parquet"
    assert outputs.check_output_dir(tmp_path / "new" / "dir") == tmp_path / "new" / "dir"
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    for folder in (".", "..", str(tmp_path / "here")):  # replaced whole: never the folder we stand in
        with pytest.raises(UserError, match="current directory"):
            outputs.check_output_dir(folder)
