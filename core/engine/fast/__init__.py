"""Compiled fast paths (DESIGN.md "Two fidelities, one interface"): the reference engine's tables, exactly,
from a numba kernel over arrays, for the policies that declare one beside their class
(:class:`shepherd.core.engine.fastpath.FastPath`). This package names no policy and imports none: the
declaration names the kernel module and how it is fed — ``"chunked"`` (:mod:`.stream`), ``"whole"``
(:mod:`.whole`) or ``"engine"`` (the kernel writes the recorder itself); docs/ENGINE.md "The fast wing".
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from shepherd.core.jit_load import import_numba

import_numba()  # before any module of the wing imports numba: without PyYAML where numba would not read it


def run(engine: Any, fast_path: Any, params: Any, runtime: Any, max_batch: int,
        make_policy: Callable[[int], Any] | None = None) -> list[dict] | None:
    """Run ``fast_path`` (a :class:`~shepherd.core.engine.fastpath.FastPath`) on every serving group and write
    the tables into ``engine``'s recorder; ``params``: what its kernel reads of the policy (the declaration's
    ``params``). Returns the policy's counters per group where its kernel keeps them, else None.
    ``make_policy(g)``: group ``g``'s policy object as the reference engine would build it, with the run's
    generator in the state the reference's constructor finds it (a kernel that plans with it)."""
    if not len(engine.arrival):  # nothing to run: the counters are zero, as the reference reports them
        return [dict.fromkeys(fast_path.counters, 0) for _ in engine.feeds]
    from shepherd.core.engine.fast import jitcache

    with jitcache.kernel_run(fast_path.module):  # a first compile: announced once, and its duration
        return _run(engine, fast_path, params, runtime, max_batch, make_policy)


def _run(engine: Any, fast_path: Any, params: Any, runtime: Any, max_batch: int,
         make_policy: Callable[[int], Any] | None) -> list[dict] | None:
    if fast_path.mode == "engine":
        return [importlib.import_module(fast_path.module).run_group(engine, params, runtime)]
    if fast_path.mode == "whole":
        from shepherd.core.engine.fast import whole

        return whole.run(engine, fast_path.module, params, runtime, max_batch, make_policy)
    from shepherd.core.engine.fast import stream

    stream.run(engine, fast_path.module, params, runtime, max_batch)
    return None
