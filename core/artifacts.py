"""Parquet artifacts: declared schemas, validation, atomic writes, provenance.

Every stage of the pipeline (profile → plan → simulate → report) talks to the
next only through the files written here (DESIGN.md "The pipeline"). Each
artifact *kind* has a declared schema: required columns with their dtypes,
optional columns that are type-checked when present, and an optional semantic
check (e.g. a trace must be sorted by arrival). Columns not declared are
allowed and carried along, so later planners can extend a kind without
breaking older readers.

Writes are atomic: the table goes to a uniquely named temporary file in the
destination directory, is flushed to disk, and is renamed over the
destination only when complete — a killed run leaves no half file, and two
writers in one folder never touch each other's temps (``core/outputs.py``).
Provenance travels in the Parquet key-value metadata (``shepherd.provenance``,
JSON): command line (without the output path, input paths shortened to their
names), resolved config, seed, package version, git commit when known, and
SHA-256 content hashes of the input artifacts.

Artifacts are byte-identical for the same inputs wherever they are written:
wall-clock measurements (the keys in :data:`WALL_CLOCK_KEYS`, e.g. a plan's
``solve_s``) are moved out of ``extra`` into a run record beside the artifact,
``NAME.run.json`` (with the full command line and working directory), which
is not part of the artifact's bytes. :func:`read_artifact` returns it as
``Artifact.run`` when it belongs to the file read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from shepherd import __version__
from shepherd.core.errors import UserError
from shepherd.core.hashing import sha256_file  # noqa: F401 - re-exported: the one file-digest helper
from shepherd.core.outputs import (  # noqa: F401 - re-exported: the output helpers live with the artifacts
    artifact_dir,
    atomic_path,
    check_output_dir,
    check_output_file,
    file_lock,
    write_bytes_atomic,
)

KIND_KEY = b"shepherd.kind"
PROVENANCE_KEY = b"shepherd.provenance"
EXTRA_KEY = b"shepherd.extra"

#: Keys of ``extra`` (at any depth) that hold wall-clock measurements: kept out
#: of the artifact's bytes, recorded in ``NAME.run.json`` instead. ``solve_s``: any
#: solver's time; ``knapsack_s``: PPipe's knapsack warm start (solvers/ppipe_milp.py);
#: ``start_s``: Symphony's start partition (solvers/symphony_partition.py).
#: tests/test_plan_bytes.py re-plans with every planner and compares the bytes.
WALL_CLOCK_KEYS = frozenset({"solve_s", "knapsack_s", "start_s"})
RUN_RECORD_SUFFIX = ".run.json"

SemanticCheck = Callable[[pl.DataFrame], "str | None"]


@dataclass(frozen=True)
class Column:
    """One declared column: name, polars dtype, and what it holds."""

    name: str
    dtype: pl.DataType
    doc: str = ""


@dataclass(frozen=True)
class ArtifactSchema:
    """The contract of one artifact kind."""

    kind: str
    doc: str
    required: tuple[Column, ...]
    optional: tuple[Column, ...] = ()
    check: SemanticCheck | None = None

    def columns(self) -> tuple[Column, ...]:
        return self.required + self.optional


SCHEMAS: dict[str, ArtifactSchema] = {}


def register_schema(schema: ArtifactSchema) -> ArtifactSchema:
    """Declare an artifact kind (one registry, one line per kind)."""
    SCHEMAS[schema.kind] = schema
    return schema


#: modules that register artifact kinds of their own, imported on first need: the CLI imports lazily, so a
#: command may read a ``results`` table or a pipeline plan before anything imported its module
SCHEMA_MODULES = ("shepherd.core.pipelines.artifacts", "shepherd.experiments.runner")


def schema_for(kind: str) -> ArtifactSchema:
    if kind not in SCHEMAS:
        import importlib

        for module in SCHEMA_MODULES:
            importlib.import_module(module)
    try:
        return SCHEMAS[kind]
    except KeyError:
        known = ", ".join(sorted(SCHEMAS))
        raise UserError(f"unknown artifact kind '{kind}' (known: {known})") from None


# --------------------------------------------------------------------------- schemas

def _check_trace(df: pl.DataFrame) -> str | None:
    if df.height == 0:
        return None
    for col in ("arrival_us", "stream", "model", "slo_us", "deadline_us"):
        missing = df[col].null_count()
        if missing:
            return f"column '{col}' has {missing:,} empty cells (every request needs one)"
    if df["arrival_us"].min() < 0:
        return "column 'arrival_us' has negative arrival times"
    if not df["arrival_us"].is_sorted():
        return "column 'arrival_us' is not sorted by arrival time"
    if (df["slo_us"] <= 0).any():
        return "column 'slo_us' must be positive"
    if (df["deadline_us"] != df["arrival_us"] + df["slo_us"]).any():
        return "column 'deadline_us' must equal arrival_us + slo_us"
    return None


def _check_profiles(df: pl.DataFrame) -> str | None:
    if df.height == 0:
        return "profiles artifact has no rows"
    if (df["batch"] < 1).any():
        return "column 'batch' must be ≥ 1"
    lat = df["latency_ms"].drop_nulls()
    if lat.len() and (lat <= 0).any():
        return "column 'latency_ms' must be positive"
    return None


register_schema(ArtifactSchema(
    kind="profiles",
    doc="Model latency profiles: one row per model × hardware × batch size, with the fitted ℓ(b)=α·b+β.",
    required=(
        Column("model", pl.String, "model name as printed in the source paper"),
        Column("hardware", pl.String, "accelerator or CPU configuration (V100, A100, cpu-4ep, …)"),
        Column("batch", pl.Int32, "batch size b"),
        Column("latency_ms", pl.Float64, "batch latency ℓ(b) in ms (null for memory-only tables)"),
        Column("alpha_ms", pl.Float64, "α: ms per extra request (Shepherd Eq. 1)"),
        Column("beta_ms", pl.Float64, "β: ms for an empty batch (Shepherd Eq. 1)"),
        Column("r2", pl.Float64, "R² of the linear fit over this model × hardware"),
        Column("source", pl.String, "where the numbers come from (table:<name> or measured:<file>)"),
    ),
    optional=(
        Column("short", pl.String, "abbreviation used in the paper (RN18, …)"),
        Column("exit_points", pl.Int32, "number of preemption exit points (Shepherd Table 4)"),
        Column("slo_ms", pl.Float64, "per-model SLO given by the paper"),
        Column("file_mb", pl.Float64, "model file size, MB (Symphony Table 1)"),
        Column("static_mb", pl.Float64, "static GPU memory, MB (Symphony Table 1)"),
        Column("dynamic_mb", pl.Float64, "dynamic GPU memory, MB (Symphony Table 1)"),
        Column("eps", pl.Int32, "CPU execution places (Accordion Table 1)"),
        Column("speedup", pl.Float64, "speedup over one execution place (Accordion Table 1)"),
        Column("median_ms", pl.Float64, "median measured latency (shepherd calibrate)"),
        Column("cv", pl.Float64, "coefficient of variation of the measured latency (shepherd calibrate)"),
        Column("samples_ms", pl.List(pl.Float64), "measured durations back to back, sorted (shepherd calibrate)"),
        Column("idle_samples_ms", pl.List(pl.Float64), "measured durations after an idle gap (shepherd calibrate)"),
    ),
    check=_check_profiles,
))

def _check_layer_profiles(df: pl.DataFrame) -> str | None:
    from shepherd.core.accordion.layers import check_layer_profiles

    return check_layer_profiles(df)


register_schema(ArtifactSchema(
    kind="layer_profiles",
    doc="Per-layer latencies on one execution place: one row per model × hardware × batch × layer (Accordion).",
    required=(
        Column("model", pl.String, "model name"),
        Column("hardware", pl.String, "CPU configuration the layers ran on (one EP)"),
        Column("layer", pl.Int32, "0-based execution order"),
        Column("name", pl.String, "layer name"),
        Column("batch", pl.Int32, "batch size the layer ran at"),
        Column("latency_ms", pl.Float64, "layer latency at that batch, ms (median of the repeats)"),
    ),
    optional=(
        Column("spread_ms", pl.Float64, "interquartile range of the repeats, ms"),
        Column("source", pl.String, "where the numbers come from"),
    ),
    check=_check_layer_profiles,
))

register_schema(ArtifactSchema(
    kind="trace",
    doc="Request trace: one row per request, sorted by arrival; times in integer µs.",
    required=(
        Column("arrival_us", pl.Int64, "arrival time, µs since trace start"),
        Column("stream", pl.Int32, "request stream (a MAF function, a synthetic source)"),
        Column("model", pl.String, "model the request is for"),
        Column("slo_us", pl.Int64, "latency SLO, µs"),
        Column("deadline_us", pl.Int64, "arrival_us + slo_us"),
    ),
    optional=(
        Column("instances", pl.Int32, "inference instances carried by the query (Accordion)"),
        Column("priority", pl.Int32, "query priority (Accordion)"),
    ),
    check=_check_trace,
))

register_schema(ArtifactSchema(
    kind="plan",
    doc="A placement plan: rows assign streams, models and workers to serving groups.",
    required=(
        Column("group", pl.Int32, "serving group id"),
        Column("role", pl.String, "what the row assigns: stream | model | worker"),
        Column("name", pl.String, "stream id, model name or worker id"),
    ),
    optional=(
        Column("hardware", pl.String, "GPU type of a worker row"),
        Column("batch", pl.Int32, "fixed batch size (per-stream planners such as Nexus)"),
        Column("count", pl.Int32, "number of workers (pooled planners)"),
        Column("epoch", pl.Int32, "planning epoch of the row (per-epoch planners such as Nexus)"),
        Column("share", pl.Float64, "fraction of a stream's requests routed to this group (Nexus)"),
    ),
))

register_schema(ArtifactSchema(
    kind="requests",
    doc="Per-request outcome of a simulation.",
    required=(
        Column("request", pl.Int64, "row index in the trace"),
        Column("stream", pl.Int32, "request stream"),
        Column("model", pl.String, "model"),
        Column("arrival_us", pl.Int64, "arrival time, µs"),
        Column("deadline_us", pl.Int64, "deadline, µs"),
        Column("start_us", pl.Int64, "start of the batch that served it (null if never served)"),
        Column("finish_us", pl.Int64, "completion time (null if never served)"),
        Column("worker", pl.Int32, "worker that served it"),
        Column("batch_id", pl.Int64, "batch that served it"),
        Column("outcome", pl.String, "served | late | dropped"),
        Column("preemptions", pl.Int32, "how many times its batch was preempted"),
    ),
))

register_schema(ArtifactSchema(
    kind="batches",
    doc="Per-batch record of a simulation.",
    required=(
        Column("batch_id", pl.Int64, "batch id"),
        Column("worker", pl.Int32, "worker that ran it"),
        Column("group", pl.Int32, "serving group"),
        Column("model", pl.String, "model"),
        Column("size", pl.Int32, "requests in the batch"),
        Column("start_us", pl.Int64, "start time, µs"),
        Column("end_us", pl.Int64, "completion or preemption time, µs"),
        Column("preempted", pl.Boolean, "whether the batch was preempted"),
    ),
))

register_schema(ArtifactSchema(
    kind="workers",
    doc="Per-worker busy and wasted time of a simulation.",
    required=(
        Column("worker", pl.Int32, "worker id"),
        Column("group", pl.Int32, "serving group"),
        Column("hardware", pl.String, "GPU type"),
        Column("node", pl.Int32, "node (server) id"),
        Column("busy_us", pl.Int64, "time running batches that completed, µs"),
        Column("wasted_us", pl.Int64, "time running batches that were preempted, µs"),
    ),
    optional=(
        Column("name", pl.String, "worker name (a plan's worker id)"),
    ),
))

register_schema(ArtifactSchema(
    kind="summary",
    doc="One-row summary of a simulation.",
    required=(
        Column("policy", pl.String, "online policy"),
        Column("requests", pl.Int64, "requests offered"),
        Column("good", pl.Int64, "requests served by their deadline"),
        Column("goodput_rps", pl.Float64, "good requests per second"),
        Column("slo_attainment", pl.Float64, "good / requests"),
    ),
    optional=(
        Column("late", pl.Int64, "requests finished after their deadline"),
        Column("dropped", pl.Int64, "requests never served"),
        Column("drop_rate", pl.Float64, "dropped / requests"),
        Column("duration_s", pl.Float64, "trace span used for goodput, s"),
        Column("workers", pl.Int64, "workers simulated"),
        Column("groups", pl.Int64, "serving groups"),
        Column("utilization", pl.Float64, "busy time of completed batches / (workers × horizon)"),
        Column("utilization_with_waste", pl.Float64, "busy + preempted time / (workers × horizon)"),
        Column("p50_latency_ms", pl.Float64, "median latency of served requests, ms"),
        Column("p99_latency_ms", pl.Float64, "99th-percentile latency of served requests, ms"),
        Column("mean_queue_ms", pl.Float64, "mean queueing delay of served requests, ms"),
        Column("p99_queue_ms", pl.Float64, "99th-percentile queueing delay, ms"),
        Column("batches", pl.Int64, "completed batches"),
        Column("mean_batch", pl.Float64, "mean size of completed batches"),
        Column("p50_batch", pl.Float64, "median size of completed batches"),
        Column("p99_batch", pl.Float64, "99th-percentile size of completed batches"),
        Column("preemptions", pl.Int64, "preempted batches"),
        Column("preempted_requests", pl.Int64, "requests whose batch was preempted at least once"),
        Column("wasted_ms", pl.Float64, "GPU time of preempted batches, ms"),
        Column("seed", pl.Int64, "seed of the run"),
    ),
))

register_schema(ArtifactSchema(
    kind="predictability",
    doc="CV of per-window request counts vs window size τ, per stream (group_size 1, Shepherd Fig. 2) "
        "and per random group of streams (Fig. 5); see traces/predictability.py.",
    required=(
        Column("tau_us", pl.Int64, "window size τ, µs"),
        Column("group_size", pl.Int32, "streams per group (1 = per stream)"),
        Column("units", pl.Int32, "streams or groups averaged (those with requests)"),
        Column("windows", pl.Int64, "whole windows of size τ in the span"),
        Column("cv_mean", pl.Float64, "mean CV (std/mean of window counts) over streams or groups"),
        Column("cv_median", pl.Float64, "median CV over streams or groups"),
    ),
))


# --------------------------------------------------------------------------- validation

def _dtype_ok(actual: pl.DataType, expected: pl.DataType) -> bool:
    if actual == expected:
        return True
    # Nulls-only columns and integer/float widenings are coerced on cast.
    if actual == pl.Null:
        return True
    if expected.is_integer() and actual.is_integer():
        return True
    if expected.is_float() and (actual.is_float() or actual.is_integer()):
        return True
    if expected == pl.String and actual in (pl.Categorical, pl.Enum):
        return True
    return False


def conform(df: pl.DataFrame, kind: str, source: str = "") -> pl.DataFrame:
    """Validate ``df`` against the schema of ``kind`` and cast declared columns.

    Raises :class:`UserError` naming the first offending column.
    """
    schema = schema_for(kind)
    where = f"{kind} artifact{(' ' + source) if source else ''}"
    casts = []
    for col in schema.required:
        if col.name not in df.columns:
            raise UserError(f"{where}: missing column '{col.name}'")
    for col in schema.columns():
        if col.name not in df.columns:
            continue
        actual = df.schema[col.name]
        if not _dtype_ok(actual, col.dtype):
            raise UserError(f"{where}: column '{col.name}' has type {actual}, expected {col.dtype}")
        if actual != col.dtype:
            casts.append(pl.col(col.name).cast(col.dtype, strict=True))
    if casts:
        try:
            df = df.with_columns(casts)
        except Exception as exc:  # noqa: BLE001 - polars raises several types
            raise UserError(f"{where}: cannot cast columns to their declared types ({exc})") from None
    if schema.check is not None:
        problem = schema.check(df)
        if problem:
            raise UserError(f"{where}: {problem}")
    return df


# --------------------------------------------------------------------------- provenance

def git_commit() -> str | None:
    """The commit of the checkout this package runs from, when it is a git checkout."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


OUTPUT_FLAGS = ("-o", "--out", "--results")


def recorded_command(argv: Sequence[str] | None = None) -> list[str]:
    """The command line to record: argv without the output path, input paths as their names.

    Where an artifact is written is not an input, so it is left out; an input
    file is identified by its name here and its content hash in ``inputs``,
    not by the folder it sits in. The same inputs and seed then give
    byte-identical artifacts wherever they land (the full command line goes
    into the run record).
    """
    args = list(sys.argv if argv is None else argv)
    if args:
        args[0] = Path(args[0]).name
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in OUTPUT_FLAGS:
            skip = True
            continue
        if any(arg.startswith(flag + "=") for flag in OUTPUT_FLAGS if flag.startswith("--")):
            continue
        kept.append(_short_path(arg))
    return kept


def _short_path(arg: str) -> str:
    """An argument naming an existing file or folder → its name (``--x=PATH`` too)."""
    flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
    if os.sep not in value:
        return arg
    try:
        exists = Path(value).exists()
    except (OSError, ValueError):
        return arg
    if not exists:
        return arg
    name = Path(value).name or value
    return f"{flag}{eq}{name}" if eq else name


def make_provenance(
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
    inputs: Sequence[str | os.PathLike[str]] = (),
    argv: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Provenance record stored with every artifact."""
    return {
        "command": recorded_command(argv),
        "config": _jsonable(dict(config or {})),
        "seed": seed,
        "version": __version__,
        "git_commit": git_commit(),
        "inputs": {Path(p).name: sha256_file(p) for p in inputs},
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# --------------------------------------------------------------------------- write / read

def write_artifact(
    df: pl.DataFrame,
    path: str | os.PathLike[str],
    kind: str,
    provenance: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    run: Mapping[str, Any] | None = None,
) -> Path:
    """Validate and atomically write ``df`` as a ``kind`` artifact at ``path``.

    ``extra`` is free-form JSON metadata for the kind (e.g. a plan's solver
    status, objective and gap). Wall-clock keys in it (:data:`WALL_CLOCK_KEYS`)
    go to the run record ``NAME.run.json`` instead, so the artifact's bytes
    depend on its inputs only; so does ``run``: how the artifact was made that
    does not change its content (e.g. which engine ran a simulation and why).
    """
    dest = Path(path)
    if dest.is_dir():
        raise UserError(f"output {dest} is a directory; name a file inside it (e.g. {dest / 'out.parquet'})")
    df = conform(df, kind, dest.name)
    table = df.to_arrow()
    meta = dict(table.schema.metadata or {})
    meta[KIND_KEY] = kind.encode()
    meta[PROVENANCE_KEY] = json.dumps(_jsonable(dict(provenance or {})), sort_keys=True).encode()
    kept, timing = _split_wall_clock(_jsonable(dict(extra or {})))
    if kept:
        meta[EXTRA_KEY] = json.dumps(kept, sort_keys=True).encode()
    table = table.replace_schema_metadata(meta)
    with atomic_path(dest) as tmp:
        pq.write_table(table, tmp, compression="zstd")
        digest = sha256_file(tmp) if timing is not None or run else ""
    _write_run_record(dest, digest, timing, _jsonable(dict(run or {})))
    return dest


def run_record_path(path: str | os.PathLike[str]) -> Path:
    """``plan.parquet`` → ``plan.run.json`` (the non-hashed record of how it was made)."""
    p = Path(path)
    return p.with_name(p.stem + RUN_RECORD_SUFFIX)


def _write_run_record(dest: Path, digest: str, timing: Any, run: dict | None = None) -> None:
    record_path = run_record_path(dest)
    if timing is None and not run:
        record_path.unlink(missing_ok=True)  # a record of an earlier write would describe another file
        return
    record = {**(run or {}), "artifact": dest.name, "artifact_sha256": digest, "command": list(sys.argv),
              "cwd": os.getcwd()}
    if timing is not None:
        record["timing"] = timing
    write_bytes_atomic(record_path, (json.dumps(_jsonable(record), sort_keys=True, indent=1) + "\n").encode())


def _split_wall_clock(value: Any) -> tuple[Any, Any]:
    """(``value`` without wall-clock keys, the wall-clock part or None) — lists keep their shape."""
    if isinstance(value, dict):
        kept, timing = {}, {}
        for key, item in value.items():
            if key in WALL_CLOCK_KEYS:
                timing[key] = item
                continue
            kept[key], sub = _split_wall_clock(item)
            if sub is not None:
                timing[key] = sub
        return kept, (timing or None)
    if isinstance(value, list):
        parts = [_split_wall_clock(v) for v in value]
        timing = [t for _, t in parts]
        return [k for k, _ in parts], (timing if any(t is not None for t in timing) else None)
    return value, None


@dataclass
class Artifact:
    """A validated artifact read back from disk."""

    frame: pl.DataFrame
    kind: str
    provenance: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    run: dict[str, Any] = field(default_factory=dict)  # NAME.run.json (timings, full command) when it is this file's


def read_metadata(path: str | os.PathLike[str]) -> dict[bytes, bytes]:
    p = Path(path)
    if not p.exists():
        raise UserError(f"file not found: {p}")
    try:
        return dict(pq.read_schema(p).metadata or {})
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"cannot read Parquet file {p}: {_first_line(exc)}") from None


def artifact_kind(path: str | os.PathLike[str]) -> str | None:
    """The kind recorded in a Parquet file's metadata (None for a file written elsewhere)."""
    return _kind_of(read_metadata(path))


def _kind_of(meta: dict[bytes, bytes]) -> str | None:
    return meta.get(KIND_KEY, b"").decode() or None


def read_artifact(path: str | os.PathLike[str], kind: str) -> Artifact:
    """Read, type-check and semantically check a ``kind`` artifact."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"file not found: {p}")
    if p.is_dir():
        raise UserError(f"expected a Parquet file, got a directory: {p}")
    meta = read_metadata(p)
    stored_kind = _kind_of(meta)
    if stored_kind and stored_kind != kind:
        raise UserError(f"{p.name} is a {stored_kind} artifact, expected a {kind} artifact")
    try:
        # polars reads straight into its own memory (no intermediate Arrow copy).
        df = pl.read_parquet(p)
    except Exception as exc:  # noqa: BLE001 - polars raises several error types
        raise UserError(f"cannot read Parquet file {p}: {_first_line(exc)}") from None
    df = conform(df, kind, p.name)
    return Artifact(
        frame=df,
        kind=kind,
        provenance=_load_json(meta.get(PROVENANCE_KEY)),
        extra=_load_json(meta.get(EXTRA_KEY)),
        path=p,
        run=read_run_record(p),
    )


def read_trace_compact(path: str | os.PathLike[str]) -> Artifact | None:
    """A trace artifact read by polars' streaming engine (the file in batches, never whole) with its model
    column as an Enum of the sorted model names — 4 bytes a request instead of a string: the values
    :func:`read_artifact` gives, with the same checks and errors, at about half the memory. The columns stay
    in the batches they were read in (no whole-column copy). None when the file is not the plain layout
    (the declared column types, no optional column): then :func:`read_artifact` reads it.

    A trace of a million requests or more is read once from Parquet and then memory-mapped from the user's
    cache (:mod:`shepherd.core.trace_columns`: the same frame, checked when it was first read)."""
    from shepherd.core import trace_columns

    p = Path(path)
    if not p.is_file():
        return None
    ident = trace_columns.identity(p)
    meta = read_metadata(p)
    stored_kind = _kind_of(meta)
    if stored_kind and stored_kind != "trace":
        return None
    schema = schema_for("trace")
    try:
        lazy = pl.scan_parquet(p)
        got = lazy.collect_schema()
    except Exception:  # noqa: BLE001 - read_artifact reports it
        return None
    if dict(got) != {c.name: c.dtype for c in schema.required}:
        return None
    try:
        rows = pq.read_metadata(p).num_rows
    except (pa.ArrowException, OSError):
        return None
    columns = {name: (pl.Enum if name == "model" else dtype) for name, dtype in got.items()}
    mapped = trace_columns.load(p, rows, columns)
    if mapped is not None:
        return Artifact(frame=mapped, kind="trace", provenance=_load_json(meta.get(PROVENANCE_KEY)),
                        extra=_load_json(meta.get(EXTRA_KEY)), path=p, run=read_run_record(p))
    try:
        df = _read_enum_probed(lazy)
        if df is None:  # a model the first rows do not name: every distinct model first, then the read
            models = sorted(lazy.select(pl.col("model").unique()).collect(engine="streaming")["model"].to_list())
            if None in models:
                return None
            df = lazy.with_columns(pl.col("model").cast(pl.Enum(models))).collect(engine="streaming")
    except Exception:  # noqa: BLE001 - read_artifact reports it
        return None
    problem = schema.check(df) if schema.check is not None else None
    if problem:
        raise UserError(f"trace artifact {p.name}: {problem}")
    trace_columns.store(p, ident, df)
    return Artifact(frame=df, kind="trace", provenance=_load_json(meta.get(PROVENANCE_KEY)),
                    extra=_load_json(meta.get(EXTRA_KEY)), path=p, run=read_run_record(p))


#: rows whose models :func:`_read_enum_probed` takes as the trace's (as ``core.engine.inputs.MODEL_PROBE_ROWS``)
MODEL_PROBE_ROWS = 4096


def _read_enum_probed(lazy: pl.LazyFrame) -> pl.DataFrame | None:
    """The trace with its model column as an Enum of the models its first :data:`MODEL_PROBE_ROWS` rows
    name, in one pass: the strict cast fails on any other model, so a frame returned holds exactly those
    (each occurs). None when the cast fails or a model is null (then the caller reads the distinct models
    of the whole column first: a second pass, at 10 M requests ≈ 0.25 CPU-s — issue 43)."""
    probe = lazy.select("model").head(MODEL_PROBE_ROWS).collect()["model"]
    if probe.null_count():
        return None
    models = sorted(probe.unique().to_list())
    try:
        df = lazy.with_columns(pl.col("model").cast(pl.Enum(models))).collect(engine="streaming")
    except pl.exceptions.PolarsError:
        return None
    return df if df["model"].null_count() == 0 else None


def read_run_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The run record beside an artifact, or {} when there is none or it describes other bytes."""
    record_path = run_record_path(path)
    if not record_path.is_file():
        return {}
    try:
        record = json.loads(record_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if not isinstance(record, dict) or record.get("artifact_sha256") != sha256_file(path):
        return {}
    return record


def _load_json(raw: bytes | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        return json.loads(raw.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
