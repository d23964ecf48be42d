"""``shepherd verify POLICY``: compare a policy's compiled fast path with the reference engine and, every table
identical, stamp it verified (thin: parse, call, print; :mod:`shepherd.core.engine.verify`).

Any policy with a fast path, a third party's included: its kernel trusted again after an edit to the policy or
to an engine part its kernel mirrors (``FastPath(mirrors=…)``), for that source only.
"""

from __future__ import annotations

from typing import Annotated

import typer


def verify(
    policy: Annotated[str, typer.Argument(help="The policy whose fast path to compare (e.g. flex, clockwork, symphony, nexus, or your own).")],
    workloads: Annotated[int, typer.Option("--workloads", "-n", min=1, max=10_000, help="How many workloads both engines run: the fast path's own, or synthetic traces on the built-in profiles (1–4 streams, 1–4 GPUs, three overhead models, max batch 128/8/1, the policy's configs in turn).")] = 12,
) -> None:
    """Compare a policy's fast path with the reference engine (whole tables) and stamp it verified.

    Exit 0: every table of every workload identical, ``<policy module>.verified.json`` written. Exit 1: a
    difference (a bug; nothing stamped). Exit 2: no fast path, or workloads it cannot make.

    Example: shepherd verify flex · shepherd verify mypolicy --workloads 50
    """
    from shepherd.cli.common import progress, summary_table
    from shepherd.core.engine import verify as checker
    from shepherd.core.policies import registry

    registry.get(policy)  # an unknown name: the registry's error
    with progress() as bar:
        task = bar.add_task(f"comparing {policy}'s fast path with the reference (workloads)", total=workloads)
        try:
            rep = checker.verify(policy, workloads, progress=lambda k: bar.update(task, completed=k))
        except checker.Disagreement as exc:
            typer.echo(f"error: {exc}; not stamped", err=True)
            raise typer.Exit(1) from None
    summary_table(f"verify {policy}: kernel and reference identical", {
        "workloads": rep.workloads,
        "requests / batches compared": f"{rep.requests:,} / {rep.batches:,}",
        "tables compared": ", ".join(rep.tables),
        "verified source": f"{len(rep.files)} files: {', '.join(rep.files)}",
        "stamp written": str(rep.record),
    })
