"""``shepherd capacity``: the highest load at which a target holds (thin: parse, call, print)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from shepherd.cli.common import frame_table, progress, summary_table
from shepherd.core.checks import number
from shepherd.core.errors import UserError
from shepherd.core.policies import registry


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.replace(" ", "").split(",") if s]
    except ValueError:
        raise UserError(f"--seeds expects comma-separated integers, got '{text}'") from None
    if not seeds or any(s < 0 for s in seeds):
        raise UserError(f"--seeds expects non-negative integers, got '{text}'")
    return seeds


def capacity(
    trace: Annotated[str, typer.Option("--trace", help="Trace artifact path or a named trace (rebuilt per seed).")],
    target: Annotated[str, typer.Option("--target", help="attainment=X (every model's SLO attainment ≥ X; PPipe's max load factor) | p99-slo (every model's p99 ≤ its SLO; Symphony's goodput) | goodput=Y (good ≥ Y × offered).")] = "attainment=0.99",
    policy: Annotated[str, typer.Option("--policy", metavar="[" + "|".join(registry.names()) + "]", help="Online policy.")] = "flex",
    profiles: Annotated[Optional[Path], typer.Option("--profiles", help="Profiles artifact (default: built-in shepherd-v100).")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, help="Number of identical workers, one serving group.")] = None,
    plan: Annotated[Optional[Path], typer.Option("--plan", help="Plan artifact: serving groups.")] = None,
    seeds: Annotated[str, typer.Option("--seeds", help="Comma-separated seeds, each searched on its own (e.g. 0,1,2).")] = "0",
    slo_ms: Annotated[Optional[float], typer.Option("--slo-ms", help="Override every request's SLO, ms.")] = None,
    options: Annotated[Optional[List[str]], typer.Option("--set", help="Policy option key=value (repeatable).")] = None,
    max_batch: Annotated[Optional[int], typer.Option("--max-batch", min=1, help="Largest batch (default: Shepherd §5.2's 128).")] = None,
    start: Annotated[float, typer.Option("--start", help="First load tried (multiplier of the trace's native rate).")] = 1.0,
    rel_tol: Annotated[float, typer.Option("--rel-tol", help="Stop when the bracket's hi/lo − 1 is below this.")] = 0.02,
    max_load: Annotated[float, typer.Option("--max-load", help="Highest load searched.")] = 1e4,
) -> None:
    """Find the highest load (× the trace's native rate) at which TARGET holds: the bracket per seed, the mean and its 95 % interval.

    Example: shepherd capacity --trace t.parquet --policy clockwork --gpus 4 --target attainment=0.99 --seeds 0,1,2
    """
    from shepherd.api import capacity as search
    from shepherd.cli.simulate import parse_options
    from shepherd.core.capacity import Target

    goal = Target.parse(target)
    seed_list = _seeds(seeds)
    if (gpus is None) == (plan is None):
        raise UserError("give --gpus N or --plan P (one of them)")
    number("--start", start, low=0, low_open=True, high=max_load)
    number("--rel-tol", rel_tol, low=0, low_open=True, high=1)
    number("--max-load", max_load, low=0, low_open=True, high=1e9)
    if slo_ms is not None:
        number("--slo-ms", slo_ms, low=0, low_open=True, high=1e9)
    opts = parse_options(policy, options or [])
    with progress() as bar:
        bar.add_task(f"capacity search ({policy}, {goal.describe()})", total=None)
        cap = search(trace, target=goal, policy=policy, gpus=gpus, plan=plan, profiles=profiles, seeds=seed_list,
                     slo_ms=slo_ms, options=opts, start=start, rel_tol=rel_tol, max_load=max_load,
                     max_batch=max_batch)
    import polars as pl

    rows = [{"seed": s, "capacity (load)": b.lo, "bracket lo": b.lo, "bracket hi": b.hi,
             "simulations": len(b.evaluations)} for s, b in cap.brackets.items()]
    frame_table(f"capacity per seed: {goal.describe()}", pl.DataFrame(rows))
    lo = min(b.lo for b in cap.brackets.values())
    hi = max(b.hi for b in cap.brackets.values())
    summary_table("capacity", {
        "policy": policy, "trace": trace, "cluster": f"{gpus} GPUs" if gpus else f"plan {plan}",
        "target": goal.describe(),
        "capacity (load, mean ± 95 %)": f"{cap.mean:.4g} ± {cap.half_width:.2g} over {len(seed_list)} seed(s)",
        "bracket (all seeds)": f"[{lo:.4g}, {hi:.4g})",
    })
