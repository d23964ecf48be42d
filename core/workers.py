"""Worker processes and Ray tasks: the parallel primitives that cells of an
experiment (:mod:`shepherd.experiments.executors`) and a plan's serving groups
(:mod:`shepherd.core.engine.groups`) are computed on.

Local workers are spawned, not forked (polars' thread pool does not survive a
fork), and die with their driver.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence

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


def ray_target(address: str | None) -> str:
    """The Ray cluster a run uses: ``--ray-address``, else ``$RAY_ADDRESS`` (Ray's own convention), else
    ``"local"`` — a private cluster started for this run. Never ``ray.init()``'s default, which joins whatever
    cluster the machine last recorded (``$RAY_TMPDIR/ray/ray_current_cluster``), a crashed one's included."""
    return address or os.environ.get("RAY_ADDRESS") or "local"


def ray_init(jobs: int, address: str | None) -> bool:
    """Connect to the named cluster (:func:`ray_target`) or start a private local one of ``jobs`` CPUs;
    True when this call started Ray in this process (the caller shuts it down)."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    target = ray_target(address)
    try:
        if target != "local":
            check_reachable(target)
            _settle_ray_auth(local=False)
            ray.init(address=target, log_to_driver=False)
        else:
            _settle_ray_auth(local=True)
            # A local cluster sees exactly the driver's import path, so
            # experiments defined outside the package resolve in workers too.
            path = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
            ray.init(address="local", num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, …
        where = "a private local cluster" if target == "local" else target
        raise UserError(f"cannot connect to Ray at {where}: {ray_failure(exc)}") from None
    return True


#: Ray's environment variable for its authentication mode (``token`` or ``disabled``), read by every Ray process
RAY_AUTH_MODE = "RAY_AUTH_MODE"


def _settle_ray_auth(local: bool) -> None:
    """Make this driver and the Ray processes it starts agree on authentication, however often Ray starts here.

    Every Ray process (the GCS a local ``ray.init`` spawns among them) reads ``$RAY_AUTH_MODE`` when it starts,
    but the driver reads it into its in-process config only at the first ``ray.init`` (or when Ray itself
    switches token mode on). Had the variable changed since — the same process started Ray before under another
    mode — the new GCS asks for a token the driver does not send, and ``ray.init`` retries for 20 s and fails
    with "Failed to start GCS" (Ray 2.60). So before each start the driver's config and token cache are re-read
    from the environment as it is now.

    For a private local cluster an unset mode becomes ``token``: what Ray itself chooses for a new local
    cluster (and then warns about on stderr), chosen here explicitly. ``RAY_AUTH_MODE=disabled`` opts out, as
    in Ray. A named cluster's mode is the user's environment's, untouched. :func:`ray_session` puts the
    variable back as it was when its Ray is shut down.
    """
    if local and not os.environ.get(RAY_AUTH_MODE):
        os.environ[RAY_AUTH_MODE] = "token"
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # a Ray without token authentication (or that moved it): nothing cached to refresh
        return
    Config.initialize("")  # re-reads RAY_* (the auth mode among them) from os.environ
    AuthenticationTokenLoader.instance().reset_cache()


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def ray_failure(exc: BaseException) -> str:
    """One line for why Ray did not start: its message's first sentence, the error at the end of the
    traceback Ray appends (the one that says what went wrong), and the log file Ray names."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    head = lines[0].split(". ")[0].rstrip(".")
    parts = [head]
    last = lines[-1]
    if len(lines) > 1 and last != lines[0] and not last.startswith(("File ", "^")):
        parts.append(last if len(last) <= 240 else last[:237] + "...")
    log = re.search(r"Please check (\S+) for details", text)
    if log:
        parts.append(f"Ray's log: {log.group(1)}")
    return "; ".join(parts)


@contextmanager
def ray_session(jobs: int, address: str | None, log_file: Path | None = None) -> Iterator[Any]:
    """Ray for one run: initialised (:func:`ray_init`), shut down after if started here, and its driver's
    logging kept out of the run's own output.

    With ``log_file`` (a sweep's or reproduce's log) everything Ray's driver says goes there: the ``ray``
    Python logger, and whatever its C++ core worker writes to file descriptor 2 (``[state-dump]`` lines
    after a node dies, among others) — while this process's own ``sys.stderr`` stays on the terminal.
    Without one, Ray's logger prints warnings and errors only.
    """
    ray = ray_module()
    logger = logging.getLogger("ray")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    with _stderr_into(log_file) as stream:
        handler = logging.StreamHandler(stream)
        handler.setLevel(logging.INFO if log_file is not None else logging.WARNING)
        handler.setFormatter(logging.Formatter("%(asctime)s ray %(levelname)s %(name)s: %(message)s"))
        logger.handlers[:] = [handler]
        logger.propagate = False
        started_here = False
        auth_mode = os.environ.get(RAY_AUTH_MODE)
        try:
            started_here = ray_init(jobs, address)
            yield ray
        finally:
            try:
                if started_here:
                    ray.shutdown()
            finally:
                _restore_env(RAY_AUTH_MODE, auth_mode)  # the mode a private Ray was given ends with it
                handler.flush()
                logger.handlers[:], logger.level, logger.propagate = saved


@contextmanager
def _stderr_into(log_file: Path | None) -> Iterator[IO[str]]:
    """Point file descriptor 2 at ``log_file`` (appending) while keeping ``sys.stderr`` where it was;
    yield the stream Ray's logger writes to (the log file, or ``sys.stderr`` without one)."""
    if log_file is None:
        yield sys.stderr
        return
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    stream = os.fdopen(os.dup(log_fd), "a", encoding="utf-8", buffering=1)
    real_stderr = _is_fd2(sys.stderr)
    for s in (sys.stderr, sys.__stderr__):
        if s is not None:
            s.flush()
    kept = os.dup(2)
    old_stderr = sys.stderr
    try:
        if real_stderr:  # Python's own stderr writes keep going to the terminal, through a copy of fd 2
            sys.stderr = os.fdopen(os.dup(kept), "w", encoding=getattr(old_stderr, "encoding", None) or "utf-8",
                                   errors="backslashreplace", buffering=1)
        os.dup2(log_fd, 2)
        yield stream
    finally:
        if real_stderr:
            sys.stderr.flush()
            sys.stderr.close()
            sys.stderr = old_stderr
        os.dup2(kept, 2)
        os.close(kept)
        os.close(log_fd)
        stream.close()


def _is_fd2(stream: Any) -> bool:
    try:
        return stream is not None and stream.fileno() == 2
    except (AttributeError, OSError, ValueError):
        return False


def map_ray(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int, address: str | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` computed as Ray tasks, in order (e.g. a plan's serving groups)."""
    with ray_session(jobs, address) as ray:
        remote = ray.remote(fn)
        return ray.get([remote.remote(x) for x in items])


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
