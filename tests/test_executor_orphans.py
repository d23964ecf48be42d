"""Local worker processes end with their driver, even when it is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

DRIVER = textwrap.dedent(
    """
    import sys, time
    from shepherd.core.workers import process_pool

    def worker_pid():
        import os
        return os.getpid()

    if __name__ == "__main__":
        with process_pool(1) as pool:
            print(pool.submit(worker_pid).result(), flush=True)
            pool.submit(time.sleep, 120)   # a long cell in flight
            time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) counts as gone
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_workers_end_when_the_driver_is_killed(tmp_path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    driver = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(driver.stdout.readline())
        assert _alive(worker)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker), "a worker outlived its SIGKILLed driver"
    finally:
        if driver.poll() is None:
            driver.kill()
