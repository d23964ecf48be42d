"""``shepherd warmup``: compile the fast engine's kernels ahead, once per machine (thin: parse, call, print).

A kernel family compiles on first use (about a minute each, announced on stderr) and is cached on disk;
``warmup`` runs a tiny trace (one minute of ``maf-synthetic`` at 100 req/s) through the public
:func:`shepherd.api.simulate` for each policy, once keeping every table and once ``record="summary"``
(what sweeps and capacity searches run), on the compiled engine — so a later sweep's workers load machine
code instead of compiling it. PPipe's kernel needs a pipeline plan (``shepherd plan --planner ppipe``) and compiles on the first
``simulate --plan`` of one.
"""

from __future__ import annotations

import time
from typing import Annotated, List, Optional

import typer

from shepherd.core.errors import UserError

#: the policies with a compiled fast path that a plain ``--gpus`` run reaches (``--engine`` in simulate's help)
WARMABLE = ("clockwork", "flex", "flex-np", "nexus", "symphony", "symphony-wc")
TINY = {"duration_min": 1, "synthetic_rate": 100.0}  # one minute of maf-synthetic, 6,000 requests


def warmup(
    policy: Annotated[Optional[List[str]], typer.Option("--policy", help=f"Only these policies (repeatable or comma-separated; default: all with a compiled fast path: {', '.join(WARMABLE)}).")] = None,
    gpus: Annotated[int, typer.Option("--gpus", min=1, max=64, help="Workers of the tiny runs.")] = 4,
) -> None:
    """Compile the fast engine's kernels now (each family once per machine, ~1 min each), not in the first run.

    Example: shepherd warmup · shepherd warmup --policy flex
    """
    from shepherd import api
    from shepherd.cli.common import summary_table
    from shepherd.core.engine import EngineConfig

    chosen = [p.strip() for item in policy or WARMABLE for p in item.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in WARMABLE]
    if unknown:
        raise UserError(f"--policy {unknown[0]}: no compiled fast path to warm up (those with one: "
                        f"{', '.join(WARMABLE)})")
    trace = api.load_trace("maf-synthetic", seed=0, **TINY)
    rows: dict[str, str] = {}
    for name in dict.fromkeys(chosen):
        start = time.perf_counter()
        for record in ("all", "summary"):
            api.simulate(trace, policy=name, gpus=gpus, engine=EngineConfig(path="fast", record=record))
        rows[name] = f"ready in {time.perf_counter() - start:.1f} s"
    summary_table("warmup (compiled kernels cached on disk)", rows)
