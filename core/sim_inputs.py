"""Read the profiles and plan artifacts a simulation needs, by artifact kind (``shepherd simulate``,
``shepherd sweep`` and the Python API share this; the policy's ``requires`` decides what fits)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core import profiles as prof
from shepherd.core.artifacts import artifact_kind, read_artifact
from shepherd.core.errors import UserError


def read_simulation_inputs(profiles: Path | None, plan: Path | None, trace: pl.DataFrame, builtin: bool):
    """The profiles and plan artifacts as ``simulate()`` takes them, by artifact kind (the policy
    says which kinds it requires): profiles frame or block profiles; plan frame or pipeline plan.
    Without ``--profiles`` the built-in tables stand in when the policy requires ``profiles``; a
    ``--profiles`` artifact of another kind is handed over under its kind (``simulate(artifacts=…)``)."""
    models = sorted(trace["model"].unique().to_list())
    extra = {}
    kind = artifact_kind(profiles) if profiles is not None and Path(profiles).is_file() else None
    if kind not in (None, "profiles", "block_profiles"):
        extra[kind] = read_artifact(profiles, kind).frame
        prof_obj = None
    elif kind == "block_profiles":
        from shepherd.core.pipelines import blocks  # here: a model-level run needs no pipeline code

        block_frame = read_artifact(profiles, "block_profiles").frame
        known = set(block_frame["model"].unique().to_list())
        if set(models) - known:
            raise UserError(f"profiles have no model '{sorted(set(models) - known)[0]}'")
        prof_obj = blocks.from_frame(block_frame, models)
    elif profiles is None and not builtin:
        prof_obj = None
    else:
        prof_obj = read_artifact(profiles, "profiles").frame if profiles else prof.load_builtin(prof.DEFAULT_TABLE)
        missing = sorted(set(models) - set(prof_obj["model"].unique().to_list()))
        if missing:
            raise UserError(f"profiles have no model '{missing[0]}' ({len(missing)} model(s) of the trace are "
                            "unprofiled)")
    plan_obj = None
    if plan is not None and artifact_kind(plan) == "pipeline_plan":
        from shepherd.core.pipelines.plan import from_frame

        art = read_artifact(plan, "pipeline_plan")
        plan_obj = from_frame(art.frame, art.extra)
    elif plan is not None:
        plan_obj = read_artifact(plan, "plan").frame
    return prof_obj, plan_obj, extra
