"""Per-model SLOs from a profile table, for any trace (``--slo-from TABLE``, a sweep's ``trace.slo_from``).

Symphony's model zoos give each model its own SLO (Tables 5 and 6: the built-in tables ``symphony-1080ti``
and ``symphony-a100``, column ``slo_ms``), and Symphony's experiments serve each model's requests under it
(``experiments/symphony/common.py``). ``slo_from`` does the same to any trace, a named one or a file: every
request's ``slo_us`` becomes its model's SLO in the table and its ``deadline_us`` = arrival + SLO. A table
without an ``slo_ms`` column (Shepherd's Table 4 gives none: Shepherd's §7 runs one SLO for all, ``--slo-ms``)
or a trace model the table does not list is refused in one line. The source is a built-in table's name or a
``profiles`` artifact that carries ``slo_ms``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from shepherd.core.errors import UserError


def tables_with_slos() -> list[str]:
    """The built-in profile tables that give per-model SLOs."""
    from shepherd.core import profiles as prof

    return [t for t in prof.table_names() if "slo_ms" in prof.read_builtin_raw(t).columns]


def table_slos(source: str) -> dict[str, float]:
    """Model → SLO (ms) of a built-in table or a profiles artifact; a one-line error if it has none."""
    from shepherd.core import profiles as prof
    from shepherd.core.artifacts import read_artifact

    if source in prof.table_names():
        frame = prof.read_builtin_raw(source)
    elif Path(source).is_file():
        frame = read_artifact(Path(source), "profiles").frame
    else:
        raise UserError(f"SLOs from {source}: neither a built-in profile table nor a profiles file "
                        f"(tables with per-model SLOs: {', '.join(tables_with_slos())})")
    if "slo_ms" not in frame.columns or frame["slo_ms"].drop_nulls().len() == 0:
        raise UserError(f"SLOs from {source}: the table gives no per-model SLOs (no slo_ms column); "
                        f"tables that do: {', '.join(tables_with_slos())}")
    pairs = frame.select("model", "slo_ms").drop_nulls().unique()
    slos: dict[str, float] = {}
    for model, slo in pairs.iter_rows():
        if model in slos and slos[model] != slo:
            raise UserError(f"SLOs from {source}: model '{model}' has two SLOs ({slos[model]:g} and {slo:g} ms)")
        if not slo > 0:
            raise UserError(f"SLOs from {source}: model '{model}' has SLO {slo} ms; an SLO must be > 0")
        slos[str(model)] = float(slo)
    return slos


def apply_slos(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """``frame`` with every request's SLO (and deadline) set to its model's SLO in ``source``."""
    slos = table_slos(source)
    models = frame["model"].cast(pl.String).unique().sort().to_list()
    missing = [m for m in models if m not in slos]
    if missing:
        raise UserError(f"SLOs from {source}: no SLO for model '{missing[0]}' ({len(missing)} of the trace's "
                        f"{len(models)} models are not in the table; it lists {_some(sorted(slos))}): give "
                        "the trace the table's models (traces maf --models, sweep trace.models)")
    slo_us = {m: int(round(slos[m] * 1000)) for m in models}
    out = frame.with_columns(
        slo_us=pl.col("model").cast(pl.String).replace_strict(slo_us, return_dtype=pl.Int64)
        .cast(frame.schema["slo_us"]))
    if "deadline_us" in frame.columns:
        out = out.with_columns(deadline_us=(pl.col("arrival_us") + pl.col("slo_us")).cast(frame.schema["deadline_us"]))
    return out


def _some(names: list[str], shown: int = 8) -> str:
    return ", ".join(names[:shown]) + (f", … ({len(names)} models)" if len(names) > shown else "")
