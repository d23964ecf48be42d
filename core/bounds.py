"""Size caps shared by every way a number reaches the engine: CLI options, sweep configs, ``capacity``,
``plan-import`` and policies' ``--set`` options (issue 33: one bounds table).

Each cap is far above any paper's setting and far below what would exhaust a machine before the run
could say so: a value past it is a user error (one ``error:`` line, exit 2) checked before anything is
allocated, never a 6 GB allocation that dies later.
"""

from __future__ import annotations

from shepherd.core.errors import UserError

#: largest batch size: latency tables are dense up to it (Shepherd §5.2 uses 128)
MAX_BATCH = 4096
#: largest batch ``profile --measure`` runs: real tensors of this many inputs (the papers profile ≤ 128;
#: ResNet50 at batch 100,000 would need ≈ 60 GB)
MAX_MEASURE_BATCH = 256
#: workers (GPUs) of one cluster (Shepherd Fig. 10: 1,000 GPUs)
MAX_WORKERS = 100_000
#: Nexus's independent frontends (Symphony §3.3 uses up to 64); per-frontend state is allocated up front
MAX_FRONTENDS = 10_000
#: cells of one sweep or capacity grid (policies × axis values): each cell is a simulation, and the grid is
#: expanded, listed and cached cell by cell — a 10,000 × 10,000 grid would take gigabytes to list at all
MAX_GRID_CELLS = 100_000
#: worker processes of one live run (``shepherd validate --workers``): each is a real process holding its own
#: PyTorch and models (≈ 0.2–0.5 GB) pinned to one core, so the cap is a large machine's core count, not a
#: cluster's GPU count — without it, 10⁶ workers meant starting processes until memory ran out
MAX_LIVE_WORKERS = 256
#: MPS level of a PPipe plan (zero-based: a 1/(mps+1) share of a GPU; the artifact uses 0–3)
MAX_MPS_LEVEL = 15

#: name → (low, high) of every capped quantity, for tables, schemas and help texts
BOUNDS: dict[str, tuple[int, int]] = {
    "max_batch": (1, MAX_BATCH),
    "measure_batch": (1, MAX_MEASURE_BATCH),
    "gpus": (1, MAX_WORKERS),
    "live_workers": (1, MAX_LIVE_WORKERS),
    "frontends": (1, MAX_FRONTENDS),
    "mps": (0, MAX_MPS_LEVEL),
    "grid_cells": (1, MAX_GRID_CELLS),
}


def check_bound(name: str, value: float, what: str | None = None) -> None:
    """Raise a one-line :class:`UserError` when ``value`` lies outside ``BOUNDS[name]``."""
    low, high = BOUNDS[name]
    if not low <= value <= high:
        shown = f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"
        raise UserError(f"{what or name} must be in [{low:,}, {high:,}], got {shown}")
