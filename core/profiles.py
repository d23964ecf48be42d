"""Model latency profiles: built-in paper tables, measured fits, engine lookups.

Every paper here models a batch's latency as linear in its size — Shepherd
Eq. 1 (§3.1) ``ℓ_m(B) = α_m·|B| + β_m``, Symphony §3.1 ``ℓ(b) = αb + β`` —
so a profile is, per model × hardware, the latency at each batch size plus the
fitted α, β and the R² of that fit. Built-in tables are typed in from the
papers (``core/profile_tables/``, see its CATALOG.md); measured latencies are
fitted by ordinary least squares.

The engine never evaluates α·b+β in its loop: :func:`latency_table_us`
precomputes a dense integer-µs array indexed by batch size (STYLE.md pattern 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl

from shepherd.core.bounds import MAX_BATCH
from shepherd.core.defaults import DEFAULT_MAX_BATCH, DEFAULT_TABLE  # noqa: F401 - re-exported
from shepherd.core.errors import UserError

MAX_BATCH_LIMIT = MAX_BATCH  # largest --max-batch accepted (core/bounds.py): latency tables are dense up to it
MEASURED_COLUMNS = ("model", "hardware", "batch", "latency_ms")


@dataclass(frozen=True)
class BuiltinTable:
    """A profile table typed in from a paper."""

    name: str
    file: str
    citation: str
    description: str
    layout: str  # "linear": α/β per model; "memory": MB per model; "cpu": latency per execution places


BUILTIN_TABLES: dict[str, BuiltinTable] = {
    t.name: t
    for t in (
        BuiltinTable(
            "shepherd-v100", "shepherd-v100.csv",
            "Shepherd (NSDI '23), Table 4",
            "17 models on V100: α, β (ms) and preemption exit points", "linear",
        ),
        BuiltinTable(
            "symphony-1080ti", "symphony-1080ti.csv",
            "Symphony, Appendix B, Table 5",
            "35 models on GTX 1080Ti: α, β (ms) and SLO", "linear",
        ),
        BuiltinTable(
            "symphony-a100", "symphony-a100.csv",
            "Symphony, Appendix B, Table 6",
            "37 models on A100: α, β (ms) and SLO", "linear",
        ),
        BuiltinTable(
            "symphony-memory", "symphony-memory.csv",
            "Symphony §3.2, Table 1",
            "6 models on 1080Ti: file, static and dynamic GPU memory (MB), α, β", "memory",
        ),
        BuiltinTable(
            "accordion-cpu", "accordion-cpu.csv",
            "Accordion (CF '25) §4.1, Table 1",
            "3 models on an Alder Lake CPU: latency at 1/2/4/8 execution places", "cpu",
        ),
    )
}


def table_names() -> list[str]:
    return list(BUILTIN_TABLES)


def _builtin(name: str) -> BuiltinTable:
    try:
        return BUILTIN_TABLES[name]
    except KeyError:
        raise UserError(
            f"unknown profile table '{name}' (known: {', '.join(BUILTIN_TABLES)})"
        ) from None


def read_builtin_raw(name: str) -> pl.DataFrame:
    """The table exactly as typed in from the paper."""
    table = _builtin(name)
    ref = resources.files("shepherd.core").joinpath("profile_tables", table.file)
    with resources.as_file(ref) as path:
        return pl.read_csv(path)


def linear_rows(raw: pl.DataFrame, source: str, max_batch: int) -> pl.DataFrame:
    """Expand α/β rows into one row per batch size 1…max_batch (ℓ(b)=α·b+β, R²=1)."""
    if max_batch < 1:
        raise UserError(f"--max-batch must be ≥ 1, got {max_batch}")
    batches = pl.DataFrame({"batch": np.arange(1, max_batch + 1, dtype=np.int32)})
    return (
        raw.join(batches, how="cross")
        .with_columns(
            latency_ms=pl.col("alpha_ms") * pl.col("batch") + pl.col("beta_ms"),
            r2=pl.lit(1.0),
            source=pl.lit(source),
        )
    )


def load_builtin(name: str, max_batch: int = DEFAULT_MAX_BATCH) -> pl.DataFrame:
    """A built-in table as a profiles frame (see ``core.artifacts`` 'profiles')."""
    table = _builtin(name)
    raw = read_builtin_raw(name).drop("beta_over_alpha", strict=False)
    source = f"table:{name}"
    if table.layout == "linear":
        frame = linear_rows(raw, source, max_batch)
    elif table.layout == "memory":
        # Table 1 gives α/β too; the expanded rows let the memory table double
        # as a latency profile for the six models it covers.
        frame = linear_rows(raw, source, max_batch)
    elif table.layout == "cpu":
        # Accordion Table 1: one query instance on k execution places. Each
        # configuration is a distinct "hardware" so rows stay unique.
        frame = raw.with_columns(
            hardware=pl.format("{}-{}ep", pl.col("hardware"), pl.col("eps")),
            batch=pl.lit(1, dtype=pl.Int32),
            alpha_ms=pl.lit(None, dtype=pl.Float64),
            beta_ms=pl.lit(None, dtype=pl.Float64),
            r2=pl.lit(None, dtype=pl.Float64),
            source=pl.lit(source),
        ).drop("stages", "latency_computed")
    else:  # pragma: no cover - registry is static
        raise AssertionError(table.layout)
    return _order(frame)


def _order(frame: pl.DataFrame) -> pl.DataFrame:
    first = ["model", "hardware", "batch", "latency_ms", "alpha_ms", "beta_ms", "r2", "source"]
    rest = [c for c in frame.columns if c not in first]
    return frame.select(first + rest).sort(["model", "hardware", "batch"], maintain_order=True)


# --------------------------------------------------------------------------- measured

@dataclass(frozen=True)
class LinearFit:
    alpha: float
    beta: float
    r2: float


def fit_linear(batch: np.ndarray, latency: np.ndarray) -> LinearFit:
    """Ordinary least squares of ℓ(b) = α·b + β (Shepherd Eq. 1).

    With a single distinct batch size the slope is unidentifiable: α = 0,
    β = mean latency and R² = 1 if the points agree (documented choice).
    """
    b = np.asarray(batch, dtype=np.float64)
    y = np.asarray(latency, dtype=np.float64)
    if b.size == 0:
        raise ValueError("no points to fit")
    if np.unique(b).size < 2:
        beta = float(y.mean())
        return LinearFit(0.0, beta, 1.0 if np.allclose(y, beta) else 0.0)
    design = np.column_stack([b, np.ones_like(b)])
    (alpha, beta), *_ = np.linalg.lstsq(design, y, rcond=None)
    residual = y - (alpha * b + beta)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 1.0
    return LinearFit(float(alpha), float(beta), r2)


def read_measurements(path: str | Path) -> pl.DataFrame:
    """Measured latencies (model, hardware, batch, latency_ms) from CSV or Parquet."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"file not found: {p}")
    try:
        if p.suffix.lower() == ".parquet":
            raw = pl.read_parquet(p)
        elif p.suffix.lower() in (".csv", ".txt"):
            raw = pl.read_csv(p)
        else:
            raise UserError(f"unsupported measurement file {p.name}: expected .csv or .parquet")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars raises many error types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read {p.name}: {first}") from None
    for col in MEASURED_COLUMNS:
        if col not in raw.columns:
            raise UserError(f"{p.name}: missing column '{col}' (need {', '.join(MEASURED_COLUMNS)})")
    try:
        frame = raw.select(
            pl.col("model").cast(pl.String),
            pl.col("hardware").cast(pl.String),
            pl.col("batch").cast(pl.Int32, strict=True),
            pl.col("latency_ms").cast(pl.Float64, strict=True),
        )
    except Exception:  # noqa: BLE001
        raise UserError(f"{p.name}: columns 'batch' and 'latency_ms' must be numeric") from None
    if frame.null_count().sum_horizontal().item() > 0:
        raise UserError(f"{p.name}: empty cells in {', '.join(MEASURED_COLUMNS)}")
    if (frame["batch"] < 1).any():
        raise UserError(f"{p.name}: column 'batch' must be ≥ 1")
    if (frame["latency_ms"] <= 0).any():
        raise UserError(f"{p.name}: column 'latency_ms' must be positive")
    if frame.height == 0:
        raise UserError(f"{p.name}: no measurements")
    return frame


def fit_measurements(measured: pl.DataFrame, source: str) -> pl.DataFrame:
    """Per model × hardware, fit α, β, R²; keep the mean measured latency per batch.

    A model × hardware measured at one batch size only is refused: its slope α (the per-request cost
    every batching policy reads) cannot be fitted, and a constant "fit" with R² = 1 would pass for one."""
    sizes = measured.group_by(["model", "hardware"], maintain_order=True).agg(pl.col("batch").n_unique())
    one = sizes.filter(pl.col("batch") < 2)
    if one.height:
        model, hardware = one.row(0)[:2]
        raise UserError(f"'{model}' on {hardware} is measured at one batch size only: α cannot be fitted "
                        "(give ≥ 2 batch sizes per model and hardware)")
    per_batch = measured.group_by(["model", "hardware", "batch"], maintain_order=True).agg(
        pl.col("latency_ms").mean()
    )
    fits = []
    for (model, hardware), points in measured.group_by(["model", "hardware"], maintain_order=True):
        fit = fit_linear(points["batch"].to_numpy(), points["latency_ms"].to_numpy())
        fits.append({"model": model, "hardware": hardware,
                     "alpha_ms": fit.alpha, "beta_ms": fit.beta, "r2": fit.r2})
    fitted = pl.DataFrame(fits, schema={"model": pl.String, "hardware": pl.String,
                                        "alpha_ms": pl.Float64, "beta_ms": pl.Float64,
                                        "r2": pl.Float64})
    frame = per_batch.join(fitted, on=["model", "hardware"]).with_columns(source=pl.lit(source))
    return _order(frame)


# --------------------------------------------------------------------------- lookups

def model_params(profiles: pl.DataFrame) -> pl.DataFrame:
    """One row per model × hardware: α, β, R² and any per-model extras."""
    per_row = {"batch", "latency_ms"}
    keep = [c for c in profiles.columns if c not in per_row]
    return profiles.select(keep).unique(subset=["model", "hardware"], keep="first", maintain_order=True)


def non_monotone(lat: "list[float] | np.ndarray") -> list[int]:
    """Batch sizes b ≥ 2 whose latency is below ℓ(b − 1) (``lat[0]`` unused): a table a policy must search
    without assuming it sorted (measured on CPUs: ResNet18 at 64×64 runs a batch of 2 faster than one of 1)."""
    return [b for b in range(2, len(lat)) if lat[b] < lat[b - 1]]


_WARNED: set[tuple[str, str, tuple]] = set()  #: tables already warned about in this process (once each)


def warn_non_monotone(model: str, hardware: str, lat: "list[float] | np.ndarray") -> None:
    """One line on stderr, once per process and table, when ``model``'s latency table falls somewhere
    (:func:`non_monotone`)."""
    falls = non_monotone(lat)
    key = (model, hardware, tuple(lat))
    if falls and key not in _WARNED:
        _WARNED.add(key)
        import sys

        sys.stderr.write(f"warning: the profile of '{model}' on {hardware} is not monotone: ℓ(b) < ℓ(b−1) at b = "
                         f"{', '.join(map(str, falls[:8]))}{' …' if len(falls) > 8 else ''} (policies search it "
                         "without assuming it sorted)\n")


def latency_table_us(
    profiles: pl.DataFrame, model: str, hardware: str | None = None, max_batch: int = DEFAULT_MAX_BATCH
) -> np.ndarray:
    """Dense latency array ``lat[b]`` in integer µs for b = 0…max_batch (lat[0] = 0).

    Measured batch sizes are used as given (table lookup); sizes between or
    beyond them come from the fitted α·b+β. ``hardware=None`` accepts a model
    profiled on exactly one hardware.
    """
    rows = profiles.filter(pl.col("model") == model)
    if hardware is not None:
        rows = rows.filter(pl.col("hardware") == hardware)
    if rows.height == 0:
        where = f" on {hardware}" if hardware else ""
        raise UserError(f"profiles have no model '{model}'{where}")
    kinds = rows["hardware"].unique().to_list()
    if len(kinds) > 1:
        raise UserError(f"model '{model}' is profiled on several hardware ({', '.join(sorted(kinds))}); name one")
    alpha, beta = rows["alpha_ms"][0], rows["beta_ms"][0]
    sizes = np.arange(max_batch + 1, dtype=np.float64)
    if alpha is not None and beta is not None:
        lat_ms = alpha * sizes + beta
    else:
        lat_ms = np.full(max_batch + 1, np.nan)
    known = rows.filter(pl.col("latency_ms").is_not_null() & (pl.col("batch") <= max_batch))
    lat_ms[known["batch"].to_numpy()] = known["latency_ms"].to_numpy()
    lat_ms[0] = 0.0
    if np.isnan(lat_ms).any():
        missing = int(np.flatnonzero(np.isnan(lat_ms))[0])
        raise UserError(f"profile of '{model}' has no latency for batch {missing} and no α/β to fill it")
    return np.rint(lat_ms * 1000.0).astype(np.int64)
