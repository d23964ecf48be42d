"""The sender process: replays a trace in real time, as a frontend would hand requests to the scheduler.

It starts with the workers and says ``"ready"``; :meth:`.pool.Pool.begin` then
sends it the arrival times and the run's origin ``t0_ns``. It sleeps until each arrival's wall-clock time (``t0_ns + arrival_us``) and
sends the ids of every request due by then in one message (a list of ints);
``None`` ends the trace. Each request carries its arrival, deadline and model
through its id (the engine holds the trace's columns). Like the workers it
ignores Ctrl-C and dies with the process that started it (:func:`.worker.child_init`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from shepherd.core.engine.live.worker import child_init


def sender_main(conn: Any, core: int | None, parent_pid: int | None = None) -> None:
    child_init(parent_pid if parent_pid is not None else os.getppid(), "shepherd-sender", core)
    conn.send("ready")
    try:
        arrival_us, t0_ns = conn.recv()
    except (EOFError, OSError):
        return
    order = np.argsort(arrival_us, kind="stable")
    due = t0_ns + arrival_us[order].astype(np.int64) * 1000
    ids = order.tolist()
    n, i = len(ids), 0
    try:
        while i < n:
            wait = int(due[i]) - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            j = int(np.searchsorted(due, time.monotonic_ns(), side="right"))
            j = max(j, i + 1)
            conn.send(ids[i:j])
            i = j
        conn.send(None)
    except (BrokenPipeError, EOFError, OSError):  # the engine ended the run
        return
