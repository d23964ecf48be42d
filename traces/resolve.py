"""Resolve a ``--trace`` argument to a trace frame.

Every command that takes ``--trace`` goes through :func:`load_trace`, so named
traces (``maf2019``, ``maf-synthetic``, …) and files behave the same
everywhere. A value naming an existing file is read as a trace artifact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from shepherd.core.artifacts import read_artifact
from shepherd.core.errors import UserError


@dataclass
class LoadedTrace:
    """A trace frame plus where it came from (for provenance and labels)."""

    frame: pl.DataFrame
    name: str
    inputs: list[Path] = field(default_factory=list)
    synthetic: bool = False


def load_trace(spec: str) -> LoadedTrace:
    """Load ``spec``: a path to a trace artifact."""
    path = Path(spec)
    if path.exists():
        art = read_artifact(path, "trace")
        synthetic = bool(art.provenance.get("config", {}).get("synthetic", False))
        return LoadedTrace(art.frame, path.name, [path], synthetic)
    raise UserError(f"trace '{spec}' is neither a file nor a known trace name")
