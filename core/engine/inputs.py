"""What a policy is prepared from (:class:`Inputs`) and what its ``prepare`` returns (:class:`Runtime`).

A policy declares the artifact kinds it ``requires`` (``core.artifacts``
kinds: ``profiles``, ``block_profiles``, ``plan``, ``pipeline_plan``, or a
later paper's, e.g. Accordion's configurations) and builds its own dense
tables from them before the run (STYLE.md pattern 6) in
``Policy.prepare(inputs, config) -> Runtime``. :func:`whole_model_runtime`
is the preparation of the policies that serve whole models from α/β
profiles (Shepherd's Flex, Clockwork, Nexus): ``lat[hardware][model][b]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.engine.cluster import Cluster, cluster_from_plan, uniform_cluster
from shepherd.core.engine.config import EngineConfig
from shepherd.core.errors import UserError


@dataclass
class Inputs:
    """Everything ``simulate()`` was given, by artifact kind (module docstring)."""

    trace: pl.DataFrame  #: the prepared trace (load and SLO applied)
    models: list[str]  #: the trace's models, sorted: model index = position
    artifacts: dict[str, Any]  #: kind → object (frames, or a pipeline plan / block profiles by model)
    gpus: int | None = None
    cluster: Cluster | None = None
    hardware: str | None = None
    max_batch: int = 128
    engine: EngineConfig = field(default_factory=EngineConfig)

    def kinds(self) -> set[str]:
        return set(self.artifacts)

    def get(self, kind: str) -> Any:
        return self.artifacts.get(kind)


def classify(profiles: Any, plan: Any) -> dict[str, Any]:
    """The artifact kinds of ``simulate()``'s ``profiles`` and ``plan`` arguments."""
    out: dict[str, Any] = {}
    if profiles is not None:
        if isinstance(profiles, pl.DataFrame):
            out["profiles"] = profiles
        elif isinstance(profiles, dict):
            out["block_profiles"] = profiles
        else:
            raise UserError(f"profiles must be a profiles frame or block profiles by model, "
                            f"got {type(profiles).__name__}")
    if plan is not None:
        if isinstance(plan, pl.DataFrame):
            out["plan"] = plan
        elif hasattr(plan, "pipelines"):
            out["pipeline_plan"] = plan
        else:
            raise UserError(f"plan must be a plan frame or a pipeline plan, got {type(plan).__name__}")
    return out


@dataclass
class Runtime:
    """A policy's prepared tables plus the cluster it runs on."""

    cluster: Cluster
    hardware: list[str]  #: hardware names; a worker's hardware index is its position here
    lat: list[list[list[int]]] = field(default_factory=list)  #: lat[hardware][model][b] µs (may be empty)
    exit_points: list[int] = field(default_factory=list)  #: per model (Shepherd Table 4); 0 where unknown
    tables: dict[str, Any] = field(default_factory=dict)  #: anything else the policy built


def _hardware_for(profiles: pl.DataFrame, models: list[str], hardware: str | None) -> str:
    if hardware is not None:
        return hardware
    kinds = profiles.filter(pl.col("model").is_in(models))["hardware"].unique().sort().to_list()
    if len(kinds) == 1:
        return kinds[0]
    if not kinds:
        return "unknown"
    raise UserError(f"profiles cover several hardware ({', '.join(kinds)}); choose one with --hardware")


def _exit_points(profiles: pl.DataFrame, models: list[str]) -> list[int]:
    if "exit_points" not in profiles.columns:
        return [0] * len(models)
    per = (profiles.filter(pl.col("model").is_in(models)).group_by("model")
           .agg(pl.col("exit_points").max()))
    lut = {m: (int(e) if e is not None else 0) for m, e in per.iter_rows()}
    return [lut.get(m, 0) for m in models]


def whole_model_runtime(inputs: Inputs) -> Runtime:
    """Cluster (``cluster``, else the ``plan`` frame, else ``gpus`` workers) and dense latency tables
    ``lat[hardware][model][b]`` from α/β profiles (``core.profiles.latency_table_us``)."""
    from shepherd.core.profiles import latency_table_us, warn_non_monotone

    profiles = inputs.get("profiles")
    models = inputs.models
    hw_default = _hardware_for(profiles, models, inputs.hardware)
    cluster = inputs.cluster
    if cluster is None:
        if "plan" in inputs.artifacts:
            cluster = cluster_from_plan(inputs.get("plan"), hw_default)
        elif inputs.gpus is not None:
            cluster = uniform_cluster(inputs.gpus, hw_default)
        else:
            raise UserError("give the number of GPUs or a plan")
    hw_names = sorted({w.hardware for w in cluster.workers})
    lat = [[latency_table_us(profiles, m, h, inputs.max_batch).tolist() for m in models] for h in hw_names]
    for h, per_hw in zip(hw_names, lat):
        for m, row in zip(models, per_hw):
            if any(x <= 0 for x in row[1:]):
                raise UserError(f"profile of '{m}' on {h} has non-positive latencies")
            warn_non_monotone(m, h, row)
    return Runtime(cluster, hw_names, lat, _exit_points(profiles, models))


#: rows whose models are read first: their distinct models, when they are every model of the trace, make
#: the whole column's index in one pass (:func:`trace_models`)
MODEL_PROBE_ROWS = 4096


def trace_models(trace: pl.DataFrame) -> tuple[list[str], pl.Series]:
    """The trace's models, sorted, and each request's model as an Enum over them (its physical codes are the
    model indices; no per-row hashing copies).

    One pass over the column where its first :data:`MODEL_PROBE_ROWS` rows name every model (the usual trace:
    each stream starts early): their models, sorted, are the Enum's categories and the strict cast of the
    whole column succeeds only if no other model occurs — every probed model occurs, so they are then
    exactly the trace's models. Otherwise (or with a null model) the distinct models of the whole column
    first, then the cast: two passes, the same answer."""
    col = trace["model"]
    if not trace.height:
        return [], col.cast(pl.Enum([]))
    probe = col.head(MODEL_PROBE_ROWS)
    if probe.null_count() == 0:
        models = sorted(probe.unique().to_list())
        try:
            codes = col.cast(pl.Enum(models))
        except pl.exceptions.InvalidOperationError:  # a model the first rows do not name
            codes = None
        if codes is not None and codes.null_count() == 0:
            return models, codes
    models = sorted(col.unique().to_list())
    return models, col.cast(pl.Enum(models))
