"""The processes of a live run: one sender and one worker per serving worker, each pinned to a core.

Processes are started with the ``spawn`` method (a fresh interpreter: no
forked PyTorch state) and torn down in :meth:`Pool.close`, which every run
calls (``stop`` message, then ``terminate``/``kill`` after a grace period), so
nothing outlives a run, a failed one included. Cores: the sender and the
engine share the first core of ``cores``; the workers take the next ones in
turn (with fewer cores than workers + 1, cores are shared and the run says so).

Failures are the user's to read, in one line: a child that cannot start
raises :class:`~shepherd.core.errors.UserError` naming the worker and why (its
own one-line reason, or how it died); one that dies mid-run is a ``"dead"``
event of :meth:`Pool.poll` (the engine ends the run, :func:`~shepherd.core.engine.live.run_live`
refuses it). Children are started with SIGINT ignored (:func:`sigint_ignored`) and keep ignoring it,
so Ctrl-C reaches the engine alone, which stops them; they die with this process
(:func:`.worker.child_init`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any, Iterator

import numpy as np

from shepherd.core.engine.live.sender import sender_main
from shepherd.core.engine.live.worker import pin, worker_main
from shepherd.core.bounds import check_bound
from shepherd.core.errors import UserError

LEAD_NS = 200_000_000  #: the run's origin is this far after the last worker is ready (the sender's head start)


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT in this process while a child is spawned: the child inherits the ignored disposition
    (Python leaves an ignored SIGINT alone at start-up), so a Ctrl-C — which a terminal sends to every
    process of the foreground group — cannot interrupt its start-up with a traceback before
    :func:`.worker.child_init` runs. The window is the spawn alone (milliseconds): a Ctrl-C inside it is
    lost, the next one is not. Outside the main thread (where signal handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def how_it_ended(exitcode: int | None) -> str:
    """A child's exit code in words: "killed by SIGKILL (out of memory?)", "exit code 1"."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"killed by {name}" + (" (out of memory, or killed by hand?)" if name == "SIGKILL" else "")
    return f"exit code {exitcode}"


def available_cores() -> list[int]:
    """The cores this process may run on, in order."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class Pool:
    """Sender + worker processes and the pipes to them (module docstring)."""

    def __init__(self, n_workers: int, models: list[str], max_batch: int, cores: list[int] | None = None,
                 ready_timeout_s: float = 300.0) -> None:
        check_bound("live_workers", n_workers, "live workers")
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
        self.sender_done = False  #: the sender exited (cleanly, after the trace; or not: a "dead" event)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the workers and wait until each has built and warmed its models (one-line errors otherwise)."""
        me = os.getpid()
        for i, core in enumerate(self.worker_cores):
            parent, child = self.ctx.Pipe(duplex=True)
            cancel = self.ctx.Value("q", -1, lock=False)
            p = self.ctx.Process(target=worker_main, args=(i, core, self.models, self.max_batch, child, cancel, me),
                                 daemon=True, name=f"shepherd-live-worker-{i}")
            self.conns.append(parent)
            self.procs.append(p)
            self.cancels.append(cancel)
            with sigint_ignored():
                p.start()
            child.close()
        parent, child = self.ctx.Pipe(duplex=True)
        self.sender_conn = parent
        self.sender = self.ctx.Process(target=sender_main, args=(child, self.engine_core, me), daemon=True,
                                       name="shepherd-live-sender")
        with sigint_ignored():
            self.sender.start()
        child.close()
        self._await_ready()

    def _await_ready(self) -> None:
        limit = time.monotonic() + self.ready_timeout_s
        if not self.sender_conn.poll(self.ready_timeout_s):
            raise UserError(f"the live sender did not start within {self.ready_timeout_s:g} s "
                            f"({how_it_ended(self.sender.exitcode)})")
        try:
            said = self.sender_conn.recv()
        except (EOFError, OSError):
            said = None
        if said != "ready":
            self.sender.join(1.0)
            raise UserError(f"the live sender died while starting ({how_it_ended(self.sender.exitcode)})")
        waiting = set(range(len(self.procs)))
        while waiting:
            left = limit - time.monotonic()
            if left <= 0:
                raise UserError(f"live workers {sorted(waiting)} not ready after {self.ready_timeout_s:g} s "
                                "(building and warming their models): the machine may be too loaded or short of "
                                "memory for this many workers")
            wait([self.conns[i] for i in waiting] + [self.procs[i].sentinel for i in waiting], min(left, 1.0))
            for i in sorted(waiting):
                try:
                    msg = self.conns[i].recv() if self.conns[i].poll() else ("",)
                except (EOFError, OSError):
                    msg = ("gone",)
                if msg[0] == "ready":
                    waiting.discard(i)
                elif msg[0] == "failed":
                    raise UserError(f"live worker {i} could not start: {msg[2]}")
                elif msg[0] == "gone" or not self.procs[i].is_alive():
                    self.procs[i].join(1.0)
                    raise UserError(f"live worker {i} died while starting ({how_it_ended(self.procs[i].exitcode)})")

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
        if self.sender_conn is not None:  # the sender ends at its next send (or at once, if still waiting)
            self.sender_conn.close()
        procs = [p for p in self.procs + ([self.sender] if self.sender is not None else []) if p.pid is not None]
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
        for c in self.conns:
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
        except (BrokenPipeError, OSError):  # it died: its sentinel makes the next poll report it ("dead")
            pass

    def cancel(self, worker: int, bid: int) -> None:
        self.cancels[worker].value = bid

    def kill(self, worker: int, sig: int | None = None) -> None:
        """Kill a worker, or the sender for ``worker`` < 0, or send it ``sig`` (tests: a process lost or stopped
        mid-run)."""
        proc = self.sender if worker < 0 else self.procs[worker]
        if sig is None:
            proc.kill()
        else:
            os.kill(proc.pid, sig)

    def poll(self, timeout: float) -> list[tuple[str, int, Any]]:
        """Messages ready within ``timeout`` s: ("arrivals", -1, ids or None), ("done", worker, msg),
        ("dead", worker, reason) — a worker that died or failed (its one-line reason), or the sender (-1)
        gone before the end of the trace."""
        live = [i for i in range(len(self.conns)) if i not in self.dead]
        handles: list[Any] = [self.conns[i] for i in live] + [self.procs[i].sentinel for i in live]
        if self.sender_conn is not None:
            handles.append(self.sender_conn)
        if self.sender is not None and not self.sender_done:
            handles.append(self.sender.sentinel)
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
            if self.sender is not None and h == self.sender.sentinel:
                self.sender.join(1.0)
                self.sender_done = True
                if self.sender.exitcode != 0:
                    out.append(("dead", -1, f"the sender died ({how_it_ended(self.sender.exitcode)})"))
                continue
            for i in live:
                if i in self.dead:
                    continue
                if h is self.conns[i]:
                    try:
                        while self.conns[i].poll():
                            msg = self.conns[i].recv()
                            if msg[0] == "failed":
                                self.dead.add(i)
                                out.append(("dead", i, f"worker {i} failed: {msg[2]}"))
                                break
                            out.append(("done", i, msg))
                    except (EOFError, OSError):
                        pass
                elif h == self.procs[i].sentinel and not self.procs[i].is_alive():
                    self.dead.add(i)
                    out.append(("dead", i, f"worker {i} died ({how_it_ended(self.procs[i].exitcode)})"))
        return out
