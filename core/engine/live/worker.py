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
"""

from __future__ import annotations

import os
import time
from typing import Any


def pin(core: int | None) -> None:
    """Pin the calling process to ``core`` where the OS allows it (Linux); elsewhere run unpinned."""
    if core is None or not hasattr(os, "sched_setaffinity"):
        return
    try:
        os.sched_setaffinity(0, {core})
    except OSError:  # a core this process may not use (a container's cpuset): stay unpinned
        pass


def worker_main(index: int, core: int | None, models: list[str], max_batch: int, conn: Any, cancel: Any) -> None:
    """The worker's loop (module docstring); ``models`` are zoo names (:func:`~shepherd.core.measure.zoo.build`)."""
    pin(core)
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
            try:
                msg = conn.recv()
            except (EOFError, OSError):  # the engine is gone
                return
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
