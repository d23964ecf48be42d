"""Resolve a ``--trace`` argument to a trace frame.

Every command that takes ``--trace`` goes through :func:`load_trace`, so named
traces (``maf2019``, ``maf-synthetic``, …) and files behave the same
everywhere. A value naming an existing file is read as a trace artifact;
otherwise it is looked up in :mod:`shepherd.traces.registry` (names, options
and their defaults are documented there). Options are keyword-only and all
default: for a file only ``load`` (thinning / superposition, see
:mod:`shepherd.traces.expand`) and ``seed`` apply; other options are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.artifacts import read_artifact
from shepherd.core.errors import UserError
from shepherd.traces import expand, registry


@dataclass
class LoadedTrace:
    """A trace frame plus where it came from (for provenance and labels)."""

    frame: pl.DataFrame
    name: str
    inputs: list[Path] = field(default_factory=list)
    synthetic: bool = False
    config: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The name to print: synthetic traces say so."""
        return f"{self.name} (synthetic)" if self.synthetic else self.name


def load_trace(spec: str, **options: Any) -> LoadedTrace:
    """Load ``spec``: a path to a trace artifact, or a named trace built with ``options``."""
    path = Path(spec)
    if path.exists():
        art = read_artifact(path, "trace")
        config = dict(art.provenance.get("config", {}))
        synthetic = bool(config.get("synthetic", False))
        frame = art.frame
        load = options.get("load")
        if load is not None:
            span = int(frame["arrival_us"].max()) + 1 if frame.height else 0
            factor = expand.load_factor(frame.height, span / 1e6, float(load))
            rng = np.random.default_rng(int(options.get("seed") or 0))
            frame = expand.rescale_arrivals(frame, factor, rng, span_us=span)
            config.update(load=float(load), load_factor=factor)
        return LoadedTrace(frame, path.name, [path], synthetic, config)
    entry = registry.lookup(spec)
    if entry is None:
        raise UserError(f"trace '{spec}' is neither a file nor a known trace name "
                        f"(known: {', '.join(registry.TRACES)})")
    built = registry.build(spec, **options)
    return LoadedTrace(built.frame, spec, built.inputs, built.synthetic, built.config)
