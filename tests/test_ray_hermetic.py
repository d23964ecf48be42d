"""``--executor ray`` joins only the cluster it is told to, and keeps Ray's logging in the run's log (issue 44).

Without ``--ray-address`` (and without ``$RAY_ADDRESS``, Ray's convention) a run starts a private local Ray
(``address="local"``), never the cluster Ray last recorded in ``$RAY_TMPDIR/ray/ray_current_cluster`` — a
crashed one's record made every ``--executor ray`` fail with "num_cpus and num_gpus must not be provided".
Ray's driver logging (its ``ray`` logger, and whatever its C++ core worker writes on file descriptor 2, such as
``[state-dump]`` lines after a node dies) goes to the sweep's log file, not to the sweep's output.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import polars as pl
import pytest

from conftest import assert_user_error
from shepherd.core import workers

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is part of the test extra")

SWEEP = ('name = "{name}"\npolicies = ["flex"]\n[trace]\nname = "maf-synthetic"\nduration_min = 1\n'
         'synthetic_rate = 40.0\nfunctions = 10\n[cluster]\ngpus = 2\n[grid]\nseed = [0, 1]\n')


@pytest.fixture
def stale_ray_tmpdir(monkeypatch):
    """A ``RAY_TMPDIR`` whose cluster record names a cluster that is gone (short: Ray's socket paths are
    limited to ~107 characters, too few under pytest's tmp_path)."""
    root = Path(tempfile.mkdtemp(prefix="ray44-"))
    (root / "ray").mkdir()
    (root / "ray" / "ray_current_cluster").write_text("127.0.0.1:9")
    monkeypatch.setenv("RAY_TMPDIR", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_the_target_follows_rays_convention(monkeypatch):
    assert workers.ray_target(None) == "local"
    assert workers.ray_target("10.0.0.1:6379") == "10.0.0.1:6379"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    assert workers.ray_target(None) == "10.0.0.2:6379"
    assert workers.ray_target("10.0.0.1:6379") == "10.0.0.1:6379"  # the option wins over the environment


@needs_ray
def test_a_stale_cluster_record_is_not_joined_and_ray_logs_to_the_sweeps_log(cli, tmp_path, stale_ray_tmpdir,
                                                                             monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # Ray's default: token authentication, and a warning
    (tmp_path / "s.toml").write_text(SWEEP.format(name="r"))
    assert cli("sweep", tmp_path / "s.toml", "-o", tmp_path / "local", "-j", "1").code == 0
    r = cli("sweep", tmp_path / "s.toml", "-o", tmp_path / "ray", "-j", "2", "--executor", "ray")
    assert r.code == 0, r.err
    a = pl.read_parquet(tmp_path / "local" / "results.parquet").sort("cell")
    b = pl.read_parquet(tmp_path / "ray" / "results.parquet").sort("cell")
    assert a.height == 2 and a.equals(b)
    log = next((tmp_path / "ray").glob("*.log")).read_text()
    assert "Started a local Ray instance" in log  # Ray's driver said it into the sweep's log ...
    assert "Ray instance" not in r.err and "worker.py" not in r.err and "INFO" not in r.err  # ... not on stderr
    assert "Token authentication" not in r.err and "Token authentication" not in log  # chosen, not defaulted
    assert "RAY_AUTH_MODE" not in os.environ  # the mode given to the private Ray ended with it
    import ray

    assert not ray.is_initialized()


def test_ray_address_in_the_environment_is_the_cluster(cli, tmp_path, monkeypatch):
    (tmp_path / "s.toml").write_text(SWEEP.format(name="r"))
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")
    assert_user_error(cli("sweep", tmp_path / "s.toml", "-o", tmp_path / "o", "--executor", "ray"),
                      "127.0.0.1:9", "unreachable")
    assert not (tmp_path / "o").exists()


def test_descriptor_2_goes_to_the_log_while_python_stderr_stays(tmp_path, capfd):
    log = tmp_path / "run.log"
    with workers._stderr_into(log) as stream:
        os.write(2, b"[state-dump] written by C++ on fd 2\n")
        stream.write("a ray logger line\n")
    os.write(2, b"after the session\n")
    text = log.read_text()
    assert "[state-dump] written by C++ on fd 2" in text and "a ray logger line" in text
    assert "after the session" not in text
    assert "after the session" in capfd.readouterr().err  # fd 2 is back where it was


def test_in_a_real_process_python_stderr_keeps_the_terminal(tmp_path):
    import subprocess
    import sys

    code = ("import os, sys; from pathlib import Path; from shepherd.core.workers import _stderr_into\n"
            "with _stderr_into(Path(sys.argv[1])):\n"
            "    sys.stderr.write('our progress line\\n'); os.write(2, b'ray core worker line\\n')\n"
            "sys.stderr.write('after\\n')\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run.log")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["our progress line", "after"]
    assert (tmp_path / "run.log").read_text() == "ray core worker line\n"


def _negate(x: int) -> int:
    return -x


@needs_ray
def test_ray_starts_again_in_one_process_after_the_auth_mode_changed(monkeypatch, capfd):
    """CI's failure: one pytest process started Ray under ``RAY_AUTH_MODE=disabled`` (a test's setenv), then,
    the variable back at ``token``, the next local Ray's GCS asked for a token the driver — its config still
    read from the first start — never sent: "Failed to start GCS", exit 2. Each start now re-reads the mode."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert workers.map_ray(_negate, [1, 2], 1) == [-1, -2]
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert workers.map_ray(_negate, [3], 1) == [-3]
    err = capfd.readouterr().err
    assert "Token authentication" not in err and "Ray instance" not in err, err  # nothing of Ray's on stderr


@needs_ray
def test_a_private_cluster_takes_rays_default_auth_explicitly_and_a_named_one_the_users(monkeypatch):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    workers._settle_ray_auth(local=False)
    assert "RAY_AUTH_MODE" not in os.environ  # a named cluster: the user's environment decides
    workers._settle_ray_auth(local=True)
    assert os.environ["RAY_AUTH_MODE"] == "token"  # what Ray picks for a new local cluster, without its warning
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    workers._settle_ray_auth(local=True)
    assert os.environ["RAY_AUTH_MODE"] == "disabled"  # Ray's opt-out is respected


def test_why_ray_did_not_start_fits_one_line_and_says_what_went_wrong():
    text = ("Failed to start GCS.  Last 0 lines of error files:\n\n.Please check /tmp/ray/session_x/logs/"
            "gcs_server.out for details. Last connection error: Traceback (most recent call last):\n"
            '  File "ray/_private/node.py", line 996, in _init_gcs_client\n    client = GcsClient(\n'
            "             ^^^^^^^^^^\n"
            "ray.exceptions.AuthenticationError: RPC error: InvalidAuthToken: Authentication token is missing "
            "or incorrect.\n")
    line = workers.ray_failure(RuntimeError(text))
    assert "\n" not in line
    assert line.startswith("Failed to start GCS;") and "InvalidAuthToken" in line
    assert "Ray's log: /tmp/ray/session_x/logs/gcs_server.out" in line
    assert workers.ray_failure(ConnectionError("")) == "ConnectionError"
    assert workers.ray_failure(RuntimeError("just this")) == "just this"
