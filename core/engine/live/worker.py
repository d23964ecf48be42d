"""A live worker process: one CPU core, one PyTorch thread, the real model on a real input tensor.

Protocol over its duplex pipe (:mod:`multiprocessing` connection):

* engine → worker: ``("run", batch_id, model, size, not_before_ns)`` — run
  ``model`` on a ``size``×input tensor, not before ``not_before_ns``
  (``time.monotonic_ns``, the clock every process of the machine shares);
  ``("stop",)`` — exit.
* worker → engine: ``("ready", worker)`` once its models are built and warm;
  ``("done", batch_id, start_ns, end_ns, cancelled, cpu_ns)`` after each batch —
  ``cpu_ns`` is the worker thread's CPU time over the batch (``time.thread_time_ns``),
  so wall time − CPU time is the time the worker waited for its core.

Preemption (Shepherd §5.2, exit points): the model is an ``nn.Sequential``
of layers (:mod:`shepherd.core.measure.zoo`); between layers the worker reads
a shared ``cancel`` value and stops if it names the running batch, so a
preempted batch frees the worker at its next layer boundary. The input
tensors are allocated once per (model, batch size) and reused.

A worker that cannot start (a model it cannot build, a missing package) or
fails while serving says why — ``("failed", worker, one line)`` — and exits
without a traceback; the engine turns that into the run's one-line error.
Every live child process (:func:`child_init`) ignores Ctrl-C (the terminal
sends SIGINT to the whole process group; the engine alone answers it and
stops its children) and ends when the process that started it dies
(:func:`shepherd.core.workers.die_with_parent`, as the sweep pool's workers do).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from shepherd.core.errors import UserError
from shepherd.core.workers import die_with_parent


def pin(core: int | None) -> None:
    """Pin the calling process to ``core`` where the OS allows it (Linux); elsewhere run unpinned."""
    if core is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {core})
    except OSError:  # a core this process may not use (a container's cpuset): stay unpinned
        pass


def child_init(parent_pid: int, name: str, core: int | None) -> None:
    """First thing in every live child process: die with the parent, ignore Ctrl-C, a visible name, the core.

    The parent spawns children with SIGINT ignored (:func:`.pool.sigint_ignored`), which covers the start-up
    before this runs; this keeps it so wherever the child was started from. The process name (``ps -o comm``,
    ``/proc/PID/comm``, Linux) says which child is which.
    """
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
        except (OSError, AttributeError):
            pass
    pin(core)


def one_line(exc: BaseException) -> str:
    """An exception as one line: a user error's message, else its type and message."""
    text = " ".join(str(exc).split())
    if isinstance(exc, UserError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def worker_main(index: int, core: int | None, models: list[str], max_batch: int, conn: Any, cancel: Any,
                parent_pid: int | None = None) -> None:
    """The worker's process (module docstring); ``models`` are zoo names (:func:`~shepherd.core.measure.zoo.build`)."""
    child_init(parent_pid if parent_pid is not None else os.getppid(), f"shepherd-w{index}", core)
    try:
        _serve(index, models, max_batch, conn, cancel)
    except (EOFError, OSError, BrokenPipeError):  # the engine is gone
        return
    except Exception as exc:  # noqa: BLE001 - said in one line, never a traceback
        try:
            conn.send(("failed", index, one_line(exc)))
        except (EOFError, OSError):
            pass
        os._exit(1)


def _serve(index: int, models: list[str], max_batch: int, conn: Any, cancel: Any) -> None:
    """Build and warm the models, say ready, then run batches until ``stop`` (module docstring)."""
    import torch

    from shepherd.core.measure import zoo

    torch.set_num_threads(1)
    built = {m: zoo.build(m) for m in models}
    layers = {m: [layer for _, layer in zoo.layers(net)] for m, (net, _) in built.items()}
    inputs: dict[tuple[str, int], Any] = {}

    def tensor(m: str, size: int):
        x = inputs.get((m, size))
        if x is None:
            x = inputs[(m, size)] = torch.randn((size, *built[m][1]))
        return x

    with torch.inference_mode():
        for m in models:  # warm-up: first calls allocate and pick kernels
            for b in sorted({1, max_batch}):
                built[m][0](tensor(m, b))
        conn.send(("ready", index))
        while True:
            msg = conn.recv()
            if msg[0] == "stop":
                return
            _, bid, m, size, not_before = msg
            wait = not_before - time.monotonic_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            start, cpu = time.monotonic_ns(), time.thread_time_ns()
            y, cancelled = tensor(m, size), False
            for layer in layers[m]:
                if cancel.value == bid:
                    cancelled = True
                    break
                y = layer(y)
            end, cpu = time.monotonic_ns(), time.thread_time_ns() - cpu
            conn.send(("done", bid, start, end, cancelled, cpu))
