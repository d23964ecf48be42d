"""The processes of a live run: one sender and one worker per serving worker, each pinned to a core.

Processes are started with the ``spawn`` method (a fresh interpreter: no
forked PyTorch state) and torn down in :meth:`Pool.close`, which every run
calls (``stop`` message, then ``terminate``/``kill`` after a grace period), so
nothing outlives a run, a failed one included. Cores: the sender and the
engine share the first core of ``cores``; the workers take the next ones in
turn (with fewer cores than workers + 1, cores are shared and the run says so).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait
from typing import Any

import numpy as np

from shepherd.core.engine.live.sender import sender_main
from shepherd.core.engine.live.worker import pin, worker_main
from shepherd.core.errors import UserError

LEAD_NS = 200_000_000  #: the run's origin is this far after the last worker is ready (the sender's head start)


def available_cores() -> list[int]:
    """The cores this process may run on, in order."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class Pool:
    """Sender + worker processes and the pipes to them (module docstring)."""

    def __init__(self, n_workers: int, models: list[str], max_batch: int, cores: list[int] | None = None,
                 ready_timeout_s: float = 300.0) -> None:
        if n_workers < 1:
            raise UserError(f"a live run needs ≥ 1 worker, got {n_workers}")
        self.models = models
        cores = cores if cores is not None else available_cores()
        self.engine_core = cores[0] if cores else None
        rest = cores[1:] or cores
        self.worker_cores = [rest[i % len(rest)] if rest else None for i in range(n_workers)]
        self.shared_cores = len(cores) < n_workers + 1
        self.ctx = mp.get_context("spawn")
        self.conns: list[Any] = []
        self.procs: list[Any] = []
        self.cancels: list[Any] = []
        self.sender: Any = None
        self.sender_conn: Any = None
        self.t0_ns = 0
        self.ready_timeout_s = ready_timeout_s
        self.dead: set[int] = set()
        self.max_batch = max_batch
        self.affinity: set[int] | None = None  #: this process's cores before the run (restored by close)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the workers and wait until each has built and warmed its models."""
        for i, core in enumerate(self.worker_cores):
            parent, child = self.ctx.Pipe(duplex=True)
            cancel = self.ctx.Value("q", -1, lock=False)
            p = self.ctx.Process(target=worker_main, args=(i, core, self.models, self.max_batch, child, cancel),
                                 daemon=True, name=f"shepherd-live-worker-{i}")
            p.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(p)
            self.cancels.append(cancel)
        parent, child = self.ctx.Pipe(duplex=True)
        self.sender = self.ctx.Process(target=sender_main, args=(child, self.engine_core), daemon=True,
                                       name="shepherd-live-sender")
        self.sender.start()
        child.close()
        self.sender_conn = parent
        if not parent.poll(self.ready_timeout_s) or parent.recv() != "ready":
            raise RuntimeError(f"the live sender did not start within {self.ready_timeout_s:g} s")
        waiting = set(range(len(self.procs)))
        limit = time.monotonic() + self.ready_timeout_s
        while waiting:
            left = limit - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"live workers {sorted(waiting)} not ready after {self.ready_timeout_s:g} s")
            for i in list(waiting):
                if not self.procs[i].is_alive():
                    raise RuntimeError(f"live worker {i} exited while starting (exit code {self.procs[i].exitcode})")
                try:
                    msg = self.conns[i].recv() if self.conns[i].poll(min(left, 0.2)) else ("",)
                except (EOFError, OSError):
                    raise RuntimeError(f"live worker {i} exited while starting") from None
                if msg[0] == "ready":
                        waiting.discard(i)

    def begin(self, arrival_us: np.ndarray) -> None:
        """Fix the run's origin and start the sender replaying ``arrival_us`` from it."""
        if hasattr(os, "sched_getaffinity"):
            self.affinity = os.sched_getaffinity(0)
        pin(self.engine_core)
        self.t0_ns = time.monotonic_ns() + LEAD_NS
        self.sender_conn.send((arrival_us, self.t0_ns))

    def close(self) -> None:
        """Stop every process (politely, then by force); safe to call twice."""
        for i, c in enumerate(self.conns):
            if i not in self.dead:
                try:
                    c.send(("stop",))
                except (BrokenPipeError, OSError):
                    pass
        procs = self.procs + ([self.sender] if self.sender is not None else [])
        limit = time.monotonic() + 5.0
        for p in procs:
            p.join(max(0.0, limit - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(2.0)
            if p.is_alive():
                p.kill()
                p.join(2.0)
        for c in self.conns + ([self.sender_conn] if self.sender_conn is not None else []):
            c.close()
        self.conns, self.procs, self.sender, self.sender_conn = [], [], None, None
        if self.affinity is not None:
            os.sched_setaffinity(0, self.affinity)
            self.affinity = None

    # ------------------------------------------------------------------ the engine's link

    def now(self) -> int:
        """Wall clock, µs since the run's origin."""
        return (time.monotonic_ns() - self.t0_ns) // 1000

    def send(self, worker: int, bid: int, model: int, size: int, start_us: int) -> None:
        if worker in self.dead:
            return
        try:
            self.conns[worker].send(("run", bid, self.models[model], size, self.t0_ns + start_us * 1000))
        except (BrokenPipeError, OSError):
            self.dead.add(worker)

    def cancel(self, worker: int, bid: int) -> None:
        self.cancels[worker].value = bid

    def kill(self, worker: int) -> None:
        """Kill a worker (tests: a worker lost mid-run)."""
        self.procs[worker].kill()

    def poll(self, timeout: float) -> list[tuple[str, int, Any]]:
        """Messages ready within ``timeout`` s: ("arrivals", -1, ids or None), ("done", worker, msg),
        ("dead", worker, reason)."""
        live = [i for i in range(len(self.conns)) if i not in self.dead]
        handles: list[Any] = [self.conns[i] for i in live] + [self.procs[i].sentinel for i in live]
        if self.sender_conn is not None:
            handles.append(self.sender_conn)
        out: list[tuple[str, int, Any]] = []
        for h in wait(handles, timeout):
            if h is self.sender_conn:
                try:
                    while self.sender_conn.poll():
                        ids = self.sender_conn.recv()
                        out.append(("arrivals", -1, ids))
                        if ids is None:
                            break
                except (EOFError, OSError):
                    self.sender_conn = None
                continue
            for i in live:
                if h is self.conns[i]:
                    try:
                        while self.conns[i].poll():
                            out.append(("done", i, self.conns[i].recv()))
                    except (EOFError, OSError):
                        pass
                elif h == self.procs[i].sentinel and not self.procs[i].is_alive() and i not in self.dead:
                    self.dead.add(i)
                    out.append(("dead", i, f"worker {i} died (exit code {self.procs[i].exitcode})"))
        return out
