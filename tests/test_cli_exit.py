"""The ``shepherd`` process ends without the interpreter's teardown once its outputs are written (issue 43:
numba's LLVM teardown cost a third of a small run): ``cli/app.py`` ``exit_now``. Same exit code, the
``atexit`` handlers run, stdout complete; a normal exit where that is unsafe (a non-daemon thread running) or
asked for (``SHEPHERD_FULL_EXIT=1``). Each case is a fresh process: under pytest ``exit_now`` exits normally."""

from __future__ import annotations

import os
import subprocess
import sys

# a __del__ of a module global runs at the interpreter's teardown, not in atexit: it shows whether one happened
PRELUDE = ("import atexit, sys, threading, time\n"
           "atexit.register(lambda: print('atexit ran', flush=True))\n"
           "class Teardown:\n"
           "    def __del__(self):\n"
           "        print('teardown ran', flush=True)\n"
           "held = Teardown()\n")
ENTRY = PRELUDE + "from shepherd.cli.app import main\nmain()\n"


def _run(*args: str, code: str = ENTRY, env: dict | None = None, stdout=subprocess.PIPE):
    return subprocess.run([sys.executable, "-c", code, *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "SHEPHERD_FULL_EXIT"}
                          | (env or {}))


def test_success_exits_0_with_atexit_run_and_no_teardown():
    run = _run("--version")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [run.stdout.splitlines()[0], "atexit ran"]
    assert run.stdout.startswith("shepherd ")


def test_a_user_error_keeps_exit_code_2_and_its_one_line():
    run = _run("simulate", "--policy", "no-such-policy", "--gpus", "1", "--trace", "x")
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and len(run.stderr.strip().splitlines()) == 1
    assert "teardown ran" not in run.stdout and "atexit ran" in run.stdout


def test_stdout_redirected_to_a_file_is_complete(tmp_path):
    out = tmp_path / "help.txt"
    with open(out, "w") as fh:
        run = _run("simulate", "--help", stdout=fh)
    assert run.returncode == 0, run.stderr
    text = out.read_text()
    assert "--record" in text and text.rstrip().endswith("atexit ran")
    assert "teardown ran" not in text


def test_a_full_exit_when_asked_or_when_a_thread_still_runs():
    asked = _run("--version", env={"SHEPHERD_FULL_EXIT": "1"})
    assert asked.returncode == 0 and "teardown ran" in asked.stdout
    # the thread is still running when exit_now decides (it waits for ``go``, set only once exit_now chose a
    # normal exit by raising SystemExit): no sleep decides the outcome
    threaded = PRELUDE + ("go = threading.Event()\n"
                          "threading.Thread(target=lambda: (go.wait(), print('thread done', flush=True))).start()\n"
                          "import shepherd.cli.app as app\n"
                          "real = app.exit_now\n"
                          "def exit_now(code):\n"
                          "    try:\n"
                          "        real(code)\n"
                          "    finally:\n"
                          "        go.set()\n"
                          "app.exit_now = exit_now\n"
                          "app.main()\n")
    run = _run("--version", code=threaded)
    assert run.returncode == 0
    assert "thread done" in run.stdout and "teardown ran" in run.stdout  # waited for it, as Python does
