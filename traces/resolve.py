"""Resolve a ``--trace`` argument to a trace frame.

Every command that takes ``--trace`` goes through :func:`load_trace`, so named
traces (``maf2019``, ``maf-synthetic``, …) and files behave the same
everywhere. A value naming an existing file is read as a trace artifact;
otherwise it is looked up in :mod:`shepherd.traces.registry` (names, options
and their defaults are documented there). Options are keyword-only and all
default: for a file only ``load`` (thinning / superposition, see
:mod:`shepherd.traces.expand`) and ``seed`` apply; other options are ignored.
``seed`` is an explicit keyword (default 0) so callers pass their ``--seed``
through to named traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from shepherd.core.artifacts import read_artifact, read_trace_compact
from shepherd.core.errors import UserError
from shepherd.traces import checks

# registry (every named trace's builder and its downloads), expand and redraw are imported where a run needs
# them: a trace file read as it is uses none (≈ 8 ms of every simulate, issue 43)


@dataclass
class LoadedTrace:
    """A trace frame plus where it came from (for provenance and labels)."""

    frame: pl.DataFrame
    name: str
    inputs: list[Path] = field(default_factory=list)
    synthetic: bool = False
    config: dict = field(default_factory=dict)

    @property
    def subset(self) -> str | None:
        """How the data falls short of the full real trace (e.g. ``"100 functions, minutes 480–959
        of invocations.csv"``), or None; see :func:`shepherd.traces.maf2019.subset_of`."""
        return self.config.get("subset") or None

    @property
    def label(self) -> str:
        """The name to print: synthetic traces and subsets of a real one say so."""
        if self.synthetic:
            return f"{self.name} (synthetic)"
        return f"{self.name} (subset: {self.subset})" if self.subset else self.name

    @property
    def span_us(self) -> int | None:
        """The trace's declared length in µs (``span_us``, ``duration_s`` or ``duration_min`` of its
        config), or None when it does not say (then the statistics fall back as documented in
        :func:`shepherd.traces.predictability.whole_windows`)."""
        return declared_span_us(self.config)


def declared_span_us(config: dict) -> int | None:
    """Length a trace's config declares: ``span_us``, else ``duration_s``, else ``duration_min``."""
    for key, scale in (("span_us", 1), ("duration_s", 1_000_000), ("duration_min", 60_000_000)):
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(round(value * scale))
    return None


def load_trace(spec: str, *, seed: int = 0, compact: bool = False, slo_from: str | None = None,
               **options: Any) -> LoadedTrace:
    """Load ``spec``: a path to a trace artifact, or a named trace built with ``options``.

    ``slo_from``: a profile table (built-in name or profiles file) whose per-model SLOs replace every
    request's SLO and deadline (:mod:`shepherd.traces.slos`); recorded in the config as ``slo_from``.
    """
    loaded = _load(spec, seed=seed, compact=compact, **options)
    if slo_from is not None:
        from shepherd.traces.slos import apply_slos

        loaded.frame = apply_slos(loaded.frame, str(slo_from))
        loaded.config = {**loaded.config, "slo_from": str(slo_from)}
    return loaded


def _load(spec: str, *, seed: int = 0, compact: bool = False, **options: Any) -> LoadedTrace:
    """:func:`load_trace` without ``slo_from``.

    ``compact``: a trace file in the plain layout is read batch by batch with its model column as an Enum
    (:func:`shepherd.core.artifacts.read_trace_compact`: same frame values, about half the memory).

    ``seed`` seeds every random draw: a named trace's generator (``maf-synthetic``
    counts, Poisson/MMPP expansion, ``--sample``, ``--load`` thinning) and the
    rescaling of a file with ``load``; the same seed gives the same frame.
    """
    checks.seed(seed)
    path = Path(spec)
    redraw_s = options.pop("redraw_window_s", None)
    if path.exists():
        art = (read_trace_compact(path) if compact and options.get("load") is None else None) or read_artifact(
            path, "trace")
        config = dict(art.provenance.get("config", {}))
        synthetic = bool(config.get("synthetic", False))
        frame = art.frame
        if redraw_s is not None:
            from shepherd.traces.redraw import redraw

            checks.positive("redraw_window_s", redraw_s, what="s")
            window_us = max(1, int(round(float(redraw_s) * 1e6)))
            frame = redraw(frame, seed, window_us, declared_span_us(config))
            config.update(redraw_window_s=float(redraw_s), redraw_seed=seed)
        load = options.get("load")
        if load is not None:
            from shepherd.traces import expand

            checks.positive("--rate", load, what="requests/s")
            span = declared_span_us(config) or (int(frame["arrival_us"].max()) + 1 if frame.height else 0)
            factor = expand.load_factor(frame.height, span / 1e6, float(load))
            checks.requests(frame.height * factor, f"{path.name} at --rate {float(load):g}", "lower --rate")
            rng = np.random.default_rng(seed)
            frame = expand.rescale_arrivals(frame, factor, rng, span_us=span)
            config.update(load=float(load), load_factor=factor)
        return LoadedTrace(frame, path.name, [path], synthetic, config)
    from shepherd.traces import registry

    entry = registry.lookup(spec)
    if redraw_s is not None and entry is not None:
        raise UserError(f"redraw_window_s re-draws a trace FILE per seed; '{spec}' is a named trace, "
                        "already drawn afresh from each seed")
    if entry is None:
        raise UserError(f"trace '{spec}' is neither a file nor a known trace name "
                        f"(known: {', '.join(registry.TRACES)})")
    built = registry.build(spec, seed=seed, **options)
    return LoadedTrace(built.frame, spec, built.inputs, built.synthetic, built.config)
