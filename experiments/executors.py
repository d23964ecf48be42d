"""Where cells are computed: this process, local worker processes, or a Ray cluster.

Workers only *compute* a cell's frame (and its wall time, for the log) and
send it back; the driver (:mod:`shepherd.experiments.runner`) claims each cell
before it is submitted (``take``) and writes it on return (``finish``), so
every executor gives byte-identical artifacts and a remote Ray cluster needs
no shared filesystem.
"""

from __future__ import annotations

import importlib
import time
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from shepherd.core.errors import UserError
from shepherd.core.workers import check_reachable, process_pool, ray_session, ray_target
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


def compute_recorded(module: str, experiment: str, params: Mapping[str, Any]) -> tuple[pl.DataFrame, list]:
    """:func:`compute_cell` and which engines its simulations took, and why (distinct, sorted: the cell's
    provenance, :func:`shepherd.core.engine.fastpath.collect`)."""
    from shepherd.core.engine import fastpath

    with fastpath.collect() as ran:
        frame = compute_cell(module, experiment, params)
    return frame, fastpath.distinct(ran)


def module_of(experiment: str) -> str:
    return type(registry.get(experiment)).__module__


def compute_timed(module: str, experiment: str, params: Mapping[str, Any]) -> tuple[pl.DataFrame, float, list]:
    """:func:`compute_recorded` and its wall time in seconds (the time goes to the log, never into the cell)."""
    start = time.perf_counter()
    frame, engines = compute_recorded(module, experiment, params)
    return frame, time.perf_counter() - start, engines


def check_executor(executor: str, address: str | None = None) -> None:
    """Fail fast on an unknown executor or an unreachable Ray address."""
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    if executor == "ray" and ray_target(address) != "local":  # --ray-address, or $RAY_ADDRESS
        check_reachable(ray_target(address))


Finish = Callable[[Cell, pl.DataFrame, float, list], None]
Take = Callable[[Cell], bool]


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


def run_ray(todo: Sequence[Cell], take: Take, finish: Finish, jobs: int, address: str | None,
            log_file: Path | None = None) -> None:
    """Cells as Ray tasks on :func:`~shepherd.core.workers.ray_target`'s cluster; Ray's driver logging goes to
    ``log_file`` (the run's log), not the run's output (:func:`~shepherd.core.workers.ray_session`)."""
    with ray_session(jobs, address, log_file) as ray:
        remote = ray.remote(compute_timed)
        queue = list(todo)
        refs: dict = {}
        window = 2 * jobs if ray_target(address) == "local" else max(2 * jobs, 64)
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
