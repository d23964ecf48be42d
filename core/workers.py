"""Worker processes and Ray tasks: the parallel primitives that cells of an
experiment (:mod:`shepherd.experiments.executors`) and a plan's serving groups
(:mod:`shepherd.core.engine.groups`) are computed on.

Local workers are spawned, not forked (polars' thread pool does not survive a
fork), and die with their driver.
"""

from __future__ import annotations

import os
import socket
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Callable, Sequence

from shepherd.core.errors import UserError


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


def ray_module():
    """The ray module, or a one-line error naming the extra to install."""
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install -e '.[ray]'") from None
    return ray


def ray_init(jobs: int, address: str | None) -> bool:
    """Connect to Ray (``address``) or start a local cluster of ``jobs`` CPUs unless one is up;
    True when this call started it (the caller shuts it down)."""
    ray = ray_module()
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
    ray = ray_module()
    started_here = ray_init(jobs, address)
    try:
        remote = ray.remote(fn)
        return ray.get([remote.remote(x) for x in items])
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
