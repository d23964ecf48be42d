"""Where cells are computed: this process, local worker processes, or a Ray cluster.

Workers only *compute* a cell's frame (and its wall time, for the log) and
send it back; the driver (:mod:`shepherd.experiments.runner`) claims each cell
before it is submitted (``take``) and writes it on return (``finish``), so
every executor gives byte-identical artifacts and a remote Ray cluster needs
no shared filesystem.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from multiprocessing import get_context
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from shepherd.core.errors import UserError
from shepherd.experiments import registry
from shepherd.experiments.base import Cell

EXECUTORS = ("local", "ray")


def compute_cell(module: str, experiment: str, params: Mapping[str, Any]) -> pl.DataFrame:
    """Run one cell (in whatever process this is); pure in ``params``.

    ``module`` is the experiment's defining module, imported first so that the
    experiment is registered in a fresh worker process.
    """
    importlib.import_module(module)
    return registry.get(experiment).run_cell(dict(params))


def module_of(experiment: str) -> str:
    return type(registry.get(experiment)).__module__


def compute_timed(module: str, experiment: str, params: Mapping[str, Any]) -> tuple[pl.DataFrame, float]:
    """:func:`compute_cell` and its wall time in seconds (the time goes to the log, never into the cell)."""
    start = time.perf_counter()
    frame = compute_cell(module, experiment, params)
    return frame, time.perf_counter() - start


def check_executor(executor: str, address: str | None = None) -> None:
    """Fail fast on an unknown executor or an unreachable Ray address."""
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    if executor == "ray" and address:
        check_reachable(address)


Finish = Callable[[Cell, pl.DataFrame, float], None]
Take = Callable[[Cell], bool]


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this worker when the process that started it dies.

    A driver killed with SIGKILL runs no clean-up, and a worker in the middle
    of a long cell would otherwise compute on (and hold its core) until the
    cell ends. On Linux the kernel sends the worker SIGTERM when its parent
    exits (``prctl(PR_SET_PDEATHSIG)``); elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request was made
        os._exit(1)


def process_pool(workers: int) -> ProcessPoolExecutor:
    """Local worker processes: spawned, not forked (polars' thread pool does not
    survive a fork), and ended with their driver (:func:`die_with_parent`)."""
    return ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=die_with_parent,
                               initargs=(os.getpid(),))


def run_processes(todo: Sequence[Cell], take: Take, finish: Finish, jobs: int) -> None:
    queue = list(todo)
    with process_pool(min(jobs, len(todo))) as pool:
        futures: dict = {}

        def top_up() -> None:  # keep every worker busy, claiming cells only as they are submitted
            while queue and len(futures) < jobs:
                c = queue.pop(0)
                if take(c):
                    futures[pool.submit(compute_timed, module_of(c.experiment), c.experiment, dict(c.params))] = c

        top_up()
        while futures:
            done, _ = wait(set(futures), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: futures[f].key()):
                finish(futures.pop(fut), *fut.result())
            top_up()


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install -e '.[ray]'") from None
    return ray


def ray_init(jobs: int, address: str | None) -> bool:
    """Connect to Ray (``address``) or start a local cluster of ``jobs`` CPUs unless one is up;
    True when this call started it (the caller shuts it down)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    try:
        if address:
            check_reachable(address)
            ray.init(address=address, log_to_driver=False)
        else:
            # A local cluster sees exactly the driver's import path, so
            # experiments defined outside the package resolve in workers too.
            path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, …
        where = address or "a local cluster"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot connect to Ray at {where}: {first}") from None
    return True


def map_ray(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int, address: str | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` computed as Ray tasks, in order (e.g. a plan's serving groups)."""
    ray = _ray()
    started_here = ray_init(jobs, address)
    try:
        remote = ray.remote(fn)
        return ray.get([remote.remote(x) for x in items])
    finally:
        if started_here:
            ray.shutdown()


def run_ray(todo: Sequence[Cell], take: Take, finish: Finish, jobs: int, address: str | None) -> None:
    ray = _ray()
    started_here = ray_init(jobs, address)
    try:
        remote = ray.remote(compute_timed)
        queue = list(todo)
        refs: dict = {}
        window = 2 * jobs if address is None else max(2 * jobs, 64)
        while queue or refs:
            while queue and len(refs) < window:
                c = queue.pop(0)
                if take(c):
                    refs[remote.remote(module_of(c.experiment), c.experiment, dict(c.params))] = c
            if not refs:
                break
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                finish(refs.pop(ref), *ray.get(ref))
    finally:
        if started_here:
            ray.shutdown()


def check_reachable(address: str, timeout_s: float = 3.0) -> None:
    """Fail fast on an unreachable cluster (ray.init would retry for minutes)."""
    if address == "auto":
        return
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"Ray address '{address}' is not of the form host:port")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise UserError(f"Ray address {address} is unreachable: {exc.strerror or exc}") from None
