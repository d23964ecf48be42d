"""A live run fails loudly (issue 40, build 5): every way a live run can go wrong is one ``error:`` line, exit 2,
nothing written and no process left behind — never a number read as the simulator's error. Mechanics only: no
timing is asserted beyond "refused before anything starts" (< 5 s), so the tests hold on a shared machine."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from shepherd.core import profiles as prof
from shepherd.core.artifacts import read_artifact, write_artifact, make_provenance
from shepherd.core.bounds import BOUNDS, MAX_LIVE_WORKERS
from shepherd.core.engine import live
from shepherd.core.engine.live import pool as pool_mod
from shepherd.core.errors import UserError
from tests.conftest import assert_user_error

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch (pip install -e '.[test]' installs it)")
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads /proc and relies on PR_SET_PDEATHSIG (Linux only)")
ROOT = Path(__file__).resolve().parents[1]


def tiny_trace(n: int, gap_us: float, model: str = "TinyCNN", slo_us: int = 60_000) -> pl.DataFrame:
    arr = np.cumsum(np.random.default_rng(0).exponential(gap_us, n)).astype(np.int64)
    return pl.DataFrame({"arrival_us": arr, "stream": np.zeros(n, np.int32), "model": [model] * n,
                         "slo_us": np.full(n, slo_us), "deadline_us": arr + slo_us})


def tiny_profile(model: str = "TinyCNN") -> pl.DataFrame:
    meas = pl.DataFrame({"model": [model] * 4, "hardware": ["cpu-1t"] * 4, "batch": [1, 2, 4, 8],
                         "latency_ms": [0.5, 0.7, 1.1, 1.9]})
    return prof.fit_measurements(meas, source="test")


def profile_file(tmp_path: Path, model: str = "TinyCNN") -> Path:
    path = tmp_path / f"{model}.parquet"
    write_artifact(tiny_profile(model), path, "profiles", make_provenance({"test": model}, None, []))
    return path


@pytest.fixture
def no_start(monkeypatch):
    """Records every Pool.start (a spy, not a stand-in: it fails the test if a process would be started)."""
    started: list[int] = []

    def refuse(self):  # noqa: ANN001
        started.append(len(self.worker_cores))
        raise AssertionError("a live process was started")

    monkeypatch.setattr(pool_mod.Pool, "start", refuse)
    return started


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, comm) of ``pid``'s child processes (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                with open(f"/proc/{entry}/comm") as fh:
                    out.append((int(entry), fh.read().strip()))
        except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
            continue
    return out


def _wait_gone(pids: list[int], limit_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if _alive(p)]


# --------------------------------------------------------------------------- refused before anything starts

def test_live_workers_are_in_the_bounds_table():
    assert BOUNDS["live_workers"] == (1, MAX_LIVE_WORKERS)
    with pytest.raises(UserError, match="live workers must be in"):
        pool_mod.Pool(10**6, ["TinyCNN"], 8)


def test_a_million_workers_is_refused_at_once(cli, tmp_path, no_start):
    t = time.monotonic()
    r = cli("validate", "--workers", 10**6, "--model", "TinyCNN", "--profiles", profile_file(tmp_path),
            "-o", tmp_path / "v")
    assert time.monotonic() - t < 5.0
    assert_user_error(r, "--workers", "1,000,000", f"{MAX_LIVE_WORKERS:,}")
    assert_user_error(cli("validate", "--workers", 0, "-o", tmp_path / "v"), "--workers")
    assert not no_start and not (tmp_path / "v").exists()
    with pytest.raises(UserError, match="live workers"):
        live.run_live(tiny_trace(5, 1000), tiny_profile(), "flex", workers=10**6)
    assert not no_start


@pytest.mark.parametrize("policy, needs", [("ppipe", "pipeline_plan"), ("accordion", "layer_profiles"),
                                           ("reactive", "pipeline_plan"), ("bbs", "layer_profiles")])
def test_policies_without_a_live_form_are_refused_before_any_worker(cli, tmp_path, no_start, policy, needs):
    r = cli("validate", "--policy", f"flex,{policy}", "--model", "TinyCNN", "--profiles", profile_file(tmp_path),
            "-o", tmp_path / "v")
    assert_user_error(r, f"'{policy}'", "live mode", needs, "flex")
    with pytest.raises(UserError, match="live mode"):
        live.run_live(tiny_trace(5, 1000), tiny_profile(), policy)
    assert not no_start and not (tmp_path / "v").exists()


def test_the_live_policies_are_the_whole_model_ones():
    runs = live.live_policies()
    assert {"flex", "flex-np", "clockwork", "nexus", "symphony", "symphony-wc"} <= set(runs)
    assert not {"ppipe", "reactive", "accordion", "one-stage", "fastest", "slo-conforming", "bbs"} & set(runs)
    for p in runs:
        live.check_live_policy(p)  # no error


def test_an_empty_trace_is_refused(cli, tmp_path, no_start):
    with pytest.raises(UserError, match="at least one request"):
        live.run_live(tiny_trace(0, 1000), tiny_profile(), "flex")
    if HAS_TORCH:  # the CLI checks torch first; without it the missing-torch test covers the line
        r = cli("validate", "--model", "TinyCNN", "--profiles", profile_file(tmp_path), "--rate", "0.001",
                "--duration-s", "1", "-o", tmp_path / "v")
        assert_user_error(r, "no requests", "--rate")
    assert not no_start and not (tmp_path / "v").exists()


def test_missing_torch_is_one_line_naming_validate(cli, tmp_path, monkeypatch, no_start):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError, as if not installed
    r = cli("validate", "--model", "TinyCNN", "--profiles", profile_file(tmp_path), "-o", tmp_path / "v")
    assert_user_error(r, "shepherd validate", "needs PyTorch", "pip install")
    assert "profile --measure" not in r.err  # the hint names this command, not another one
    assert not no_start and not (tmp_path / "v").exists()
    with pytest.raises(UserError, match="PyTorch"):
        live.run_live(tiny_trace(5, 1000), tiny_profile(), "flex")


# --------------------------------------------------------------------------- failures of real workers

@needs_torch
def test_a_worker_that_cannot_start_says_why_in_one_line(cli, tmp_path):
    r = cli("validate", "--policy", "flex", "--model", "NoSuchNet", "--profiles", profile_file(tmp_path, "NoSuchNet"),
            "--rate", "50", "--duration-s", "1", "-o", tmp_path / "v")
    assert_user_error(r, "live worker 0 could not start", "'NoSuchNet'")  # the worker's own reason
    assert "internal error" not in r.err and not (tmp_path / "v").exists()


@needs_torch
def test_a_worker_killed_while_starting_is_a_user_error():
    pool = pool_mod.Pool(1, ["TinyCNN"], 8)
    caught: list[BaseException] = []

    def start() -> None:
        try:
            pool.start()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            caught.append(exc)

    th = threading.Thread(target=start)
    th.start()
    try:
        deadline = time.monotonic() + 30
        while not (pool.procs and pool.procs[0].pid) and time.monotonic() < deadline:
            time.sleep(0.001)
        pool.procs[0].kill()  # long before it has imported torch and built its model
        th.join(60)
    finally:
        th.join(60)
        pool.close()
    assert len(caught) == 1 and isinstance(caught[0], UserError), caught
    assert "live worker 0 died while starting (killed by SIGKILL" in str(caught[0])


@needs_torch
def test_a_worker_killed_mid_run_fails_validate_and_writes_nothing(cli, tmp_path, monkeypatch):
    # the run's real worker is killed 0.5 s in (run_live's test hook), through the whole validate command
    real = live.run_live
    monkeypatch.setattr(live, "run_live", lambda *a, **kw: real(*a, **{**kw, "kill_at": (0, 0.5)}))
    r = cli("validate", "--policy", "flex", "--model", "TinyCNN", "--profiles", profile_file(tmp_path),
            "--rate", "100", "--duration-s", "4", "-o", tmp_path / "v")
    assert_user_error(r, "the live run failed", "worker 0 died", "SIGKILL", "not compared")
    assert "live vs simulated" not in r.out and "err_pct" not in r.out  # no comparison reported
    assert not (tmp_path / "v").exists()  # no comparison.parquet, no partial folder
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".v")
                and p.name.endswith(".tmp")]


@needs_torch
def test_a_sender_lost_mid_run_fails_the_run():
    trace = tiny_trace(300, 10_000)  # ~3 s of arrivals; the sender dies at 0.5 s
    with pytest.raises(live.LiveRunFailed, match="the sender died") as failed:
        live.run_live(trace, tiny_profile(), "clockwork", drain_s=2.0, kill_at=(-1, 0.5))
    assert "SIGKILL" in str(failed.value) and "\n" not in str(failed.value)
    assert failed.value.result.extra["live"]["ended_by"].startswith("worker failure")


@needs_torch
@linux_only
def test_a_stopped_worker_fails_the_run_at_the_drain_limit():
    """A worker alive but stopped (SIGSTOP 1 s into the run: after start-up, whatever the machine's load) never
    reports its batch: the run must not be compared either."""
    with pytest.raises(live.LiveRunFailed, match="worker 0 has not finished a batch"):
        live.run_live(tiny_trace(100, 20_000), tiny_profile(), "clockwork", drain_s=1.0,
                      kill_at=(0, 1.0, signal.SIGSTOP))
    assert not [c for _, c in _children(os.getpid()) if c.startswith("shepherd-")]  # the stopped one killed too


@needs_torch
@linux_only
def test_workers_and_sender_die_with_their_parent(tmp_path):
    """A driver SIGKILLed mid-run (no clean-up runs) leaves no live process behind, even a sleeping one."""
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent("""
        import time
        import numpy as np
        from shepherd.core.engine.live.pool import Pool

        if __name__ == "__main__":
            pool = Pool(1, ["TinyCNN"], 8)
            pool.start()
            pool.begin(np.array([60_000_000], np.int64))  # the sender sleeps a minute before its one arrival
            pool.send(0, 0, 0, 1, 60_000_000)  # the worker sleeps a minute before its batch
            print(*[p.pid for p in pool.procs], pool.sender.pid, flush=True)
            time.sleep(120)
        """))
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pids: list[int] = []
    try:
        pids = [int(x) for x in driver.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        assert not _wait_gone(pids), "a live process outlived its SIGKILLed parent"
    finally:
        if driver.poll() is None:
            driver.kill()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)


@needs_torch
@linux_only
def test_ctrl_c_prints_one_line_and_leaves_no_process(tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to the whole process group, workers included."""
    path = profile_file(tmp_path)
    cmd = [sys.executable, "-m", "shepherd.cli.app", "validate", "--policy", "flex", "--model", "TinyCNN",
           "--profiles", str(path), "--rate", "100", "--duration-s", "60", "-o", str(tmp_path / "v")]
    # started as a shell in a terminal starts a command: SIGINT at its default (a test run launched in the
    # background, e.g. under nohup, has it ignored, and a child would inherit that and never see the Ctrl-C)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    kids: list[tuple[int, str]] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            kids = _children(proc.pid)
            names = {c for _, c in kids}
            if {"shepherd-w0", "shepherd-sender"} <= names:
                break
            time.sleep(0.05)
        assert {"shepherd-w0", "shepherd-sender"} <= {c for _, c in kids}, (kids, proc.poll())
        time.sleep(2.0)  # into the run (or still warming up: either way the same answer)
        kids = _children(proc.pid) or kids
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130
    assert [ln for ln in err.splitlines() if ln.strip()] == ["error: interrupted"], err
    assert not _wait_gone([p for p, _ in kids]), f"left behind: {kids}"
    assert not (tmp_path / "v").exists()


# --------------------------------------------------------------------------- a run that works says what it measured

def test_core_wait_warning_names_the_share():
    assert live.core_wait_warning(0.01) is None
    assert live.core_wait_warning(float("nan")) is None
    line = live.core_wait_warning(0.123)
    assert line is not None and "12.3%" in line and "\n" not in line
    assert live.core_wait_warning(0.123, limit=0.2) is None


@needs_torch
def test_validate_reports_percent_saves_its_inputs_and_reruns(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(live, "CORE_WAIT_LIMIT", -1.0)  # every run "waited": the warning must show
    src = profile_file(tmp_path)
    out = tmp_path / "v"
    r = cli("validate", "--policy", "clockwork", "--model", "TinyCNN", "--profiles", src, "--rate", "100",
            "--duration-s", "2", "--seed", "3", "-o", out)
    assert r.code == 0, r.err
    warnings = [ln for ln in r.err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "clockwork" in warnings[0] and "waited for their cores" in warnings[0]
    assert "%" in warnings[0]
    # the error in percent, as the docs say: err_pct = 100 (sim − live)/live
    table = pl.read_parquet(out / "comparison.parquet")
    assert "err_pct" in table.columns and "rel_err" not in table.columns
    ok = table.filter(pl.col("err_pct").is_not_null())
    assert ok.height
    np.testing.assert_allclose(ok["err_pct"], 100 * (ok["sim"] - ok["live"]) / ok["live"], rtol=1e-9)
    # the simulated half's inputs beside it, and a re-run of that half from them alone gives its tables
    saved = read_artifact(out / "profiles.parquet", "profiles").frame
    assert saved.equals(read_artifact(src, "profiles").frame)
    trace = read_artifact(out / "trace.parquet", "trace").frame
    assert trace.height == pl.read_parquet(out / "sim" / "clockwork" / "requests.parquet").height
    r2 = cli("simulate", "--trace", out / "trace.parquet", "--profiles", out / "profiles.parquet", "--policy",
             "clockwork", "--gpus", "1", "--max-batch", "8", "--seed", "3", "--overhead", "none", "--engine",
             "reference", "-o", tmp_path / "re")
    assert r2.code == 0, r2.err
    again = pl.read_parquet(tmp_path / "re" / "requests.parquet")
    assert again.equals(pl.read_parquet(out / "sim" / "clockwork" / "requests.parquet"))
    # a new run may replace this folder: everything in it is validate's own output
    from shepherd.cli.validate import _replaceable

    assert all(_replaceable(e) for e in out.iterdir())
    (out / "notes.txt").write_text("mine")
    assert not _replaceable(out / "notes.txt")
