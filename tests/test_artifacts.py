"""Artifacts: round trip, schema rejection, atomic writes, provenance."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from shepherd.core import artifacts
from shepherd.core.artifacts import make_provenance, read_artifact, write_artifact
from shepherd.core.errors import UserError


def _trace(n: int = 5) -> pl.DataFrame:
    arrival = [i * 10 for i in range(n)]
    return pl.DataFrame({
        "arrival_us": arrival,
        "stream": [i % 2 for i in range(n)],
        "model": ["ResNet50"] * n,
        "slo_us": [250_000] * n,
        "deadline_us": [a + 250_000 for a in arrival],
    })


def test_round_trip_keeps_rows_types_and_provenance(tmp_path):
    src = tmp_path / "input.csv"
    src.write_text("x\n1\n")
    prov = make_provenance({"rate": 3.5}, seed=7, inputs=[src], argv=["shepherd", "traces", "-o", "x.parquet"])
    path = write_artifact(_trace(), tmp_path / "t.parquet", "trace", prov, extra={"solver": "highs"})
    art = read_artifact(path, "trace")
    assert art.frame.equals(artifacts.conform(_trace(), "trace"))
    assert art.frame.schema["stream"] == pl.Int32
    assert art.provenance["seed"] == 7
    assert art.provenance["config"] == {"rate": 3.5}
    assert art.provenance["inputs"] == {"input.csv": artifacts.sha256_file(src)}
    assert art.provenance["command"] == ["shepherd", "traces"]  # output path is not an input
    assert art.extra == {"solver": "highs"}


@pytest.mark.parametrize("kind", sorted(k for k, v in artifacts.SCHEMAS.items() if v.required))
def test_every_kind_rejects_a_missing_required_column(tmp_path, kind):
    schema = artifacts.SCHEMAS[kind]
    first = schema.required[0].name
    frame = pl.DataFrame({c.name: pl.Series([], dtype=c.dtype) for c in schema.required[1:]})
    with pytest.raises(UserError, match=f"missing column '{first}'"):
        write_artifact(frame, tmp_path / "x.parquet", kind)
    assert not (tmp_path / "x.parquet").exists()


def test_wrong_dtype_is_named(tmp_path):
    frame = _trace().with_columns(pl.col("arrival_us").cast(pl.String))
    pq.write_table(frame.to_arrow(), tmp_path / "bad.parquet")
    with pytest.raises(UserError, match="column 'arrival_us' has type String"):
        read_artifact(tmp_path / "bad.parquet", "trace")


def test_semantic_check_rejects_unsorted_trace(tmp_path):
    frame = _trace().reverse()
    with pytest.raises(UserError, match="not sorted"):
        write_artifact(frame, tmp_path / "x.parquet", "trace")


def test_kind_mismatch_is_reported(tmp_path):
    path = write_artifact(_trace(), tmp_path / "t.parquet", "trace")
    with pytest.raises(UserError, match="is a trace artifact, expected a profiles artifact"):
        read_artifact(path, "profiles")


def test_unreadable_parquet_is_a_user_error(tmp_path):
    bad = tmp_path / "garbage.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(UserError, match="cannot read Parquet file"):
        read_artifact(bad, "trace")


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    def explode(table, where, **kwargs):
        with open(where, "wb") as fh:  # half a file, then the failure
            fh.write(b"PAR1 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(artifacts.pq, "write_table", explode)
    with pytest.raises(KeyboardInterrupt):
        write_artifact(_trace(), tmp_path / "t.parquet", "trace")
    assert list(tmp_path.iterdir()) == []


def test_killed_process_leaves_no_destination_and_next_write_cleans_up(tmp_path):
    """SIGKILL between writing the temp file and the rename: no artifact appears."""
    dest = tmp_path / "t.parquet"
    script = textwrap.dedent(f"""
        import os, signal
        import polars as pl
        from shepherd.core import artifacts
        real = artifacts.pq.write_table
        def write_then_die(table, where, **kw):
            real(table, where, **kw)
            os.kill(os.getpid(), signal.SIGKILL)
        artifacts.pq.write_table = write_then_die
        frame = pl.DataFrame({{"arrival_us": [0], "stream": [0], "model": ["m"],
                              "slo_us": [5], "deadline_us": [5]}})
        artifacts.write_artifact(frame, {str(dest)!r}, "trace")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    assert not dest.exists()
    leftovers = [p.name for p in tmp_path.iterdir()]
    assert leftovers and all(name.startswith(".t.parquet.") for name in leftovers)
    write_artifact(_trace(), dest, "trace")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_write_below_a_file_is_a_user_error(tmp_path):
    """The destination's directory cannot be made (a file sits where it should be)."""
    blocker = tmp_path / "results"
    blocker.write_text("a file, not a directory")
    with pytest.raises(UserError, match="cannot write to .*results"):
        write_artifact(_trace(), blocker / "t.parquet", "trace")
    assert blocker.read_text() == "a file, not a directory"


def _trace(n: int = 500, seed: int = 0) -> pl.DataFrame:
    from shepherd.traces.synthetic import assemble

    rng = np.random.default_rng(seed)
    arrs = [np.sort(rng.integers(0, 5_000_000, n)).astype(np.int64) for _ in range(3)]
    return assemble(arrs, ["ResNet50", "DenseNet121", "ResNet18"], [50_000, 80_000, 20_000])


def test_compact_trace_read_has_the_same_values(tmp_path):
    from shepherd.core.artifacts import read_trace_compact

    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    whole = read_artifact(path, "trace")
    compact = read_trace_compact(path)
    assert compact is not None and isinstance(compact.frame["model"].dtype, pl.Enum)
    assert list(compact.frame["model"].dtype.categories) == sorted(set(whole.frame["model"]))
    assert compact.frame.with_columns(pl.col("model").cast(pl.String)).equals(whole.frame)
    assert compact.provenance == whole.provenance


def test_compact_trace_read_finds_a_model_its_first_rows_do_not_name(tmp_path):
    """The Enum's categories come from the first rows when they name every model (one pass); a model that
    first occurs later sends the read to the distinct models of the whole column (issue 43)."""
    from shepherd.core.artifacts import MODEL_PROBE_ROWS, read_trace_compact
    from shepherd.traces.synthetic import assemble

    n = MODEL_PROBE_ROWS + 500
    early = np.arange(n, dtype=np.int64) * 10
    late = np.array([n * 10 + 5, n * 10 + 15], np.int64)  # after every early row
    path = tmp_path / "late.parquet"
    write_artifact(assemble([early, late], ["ResNet50", "AlexNet"], [50_000, 50_000]), path, "trace",
                   make_provenance())
    whole = read_artifact(path, "trace")
    compact = read_trace_compact(path)
    assert compact is not None
    assert list(compact.frame["model"].dtype.categories) == ["AlexNet", "ResNet50"]
    assert compact.frame.with_columns(pl.col("model").cast(pl.String)).equals(whole.frame)


@pytest.mark.parametrize("spoil, needle", [
    (lambda f: f.with_columns(arrival_us=pl.col("arrival_us") - 10_000_000,
                              deadline_us=pl.col("deadline_us") - 10_000_000), "negative arrival"),
    (lambda f: f.with_columns(arrival_us=pl.col("arrival_us").reverse(),
                              deadline_us=pl.col("arrival_us").reverse() + pl.col("slo_us")), "not sorted"),
    (lambda f: f.with_columns(slo_us=pl.lit(0, pl.Int64), deadline_us=pl.col("arrival_us")), "must be positive"),
    (lambda f: f.with_columns(deadline_us=pl.col("deadline_us") + 1), "must equal"),
])
def test_compact_trace_read_refuses_what_read_artifact_refuses(tmp_path, spoil, needle):
    from shepherd.core.artifacts import read_trace_compact
    from shepherd.core.errors import UserError

    path = tmp_path / "bad.parquet"
    pq.write_table(spoil(_trace()).to_arrow(), path)
    with pytest.raises(UserError) as a:
        read_artifact(path, "trace")
    with pytest.raises(UserError) as b:
        read_trace_compact(path)
    assert needle in str(a.value) and str(a.value) == str(b.value)


def test_compact_trace_read_leaves_other_layouts_to_read_artifact(tmp_path):
    from shepherd.core.artifacts import read_trace_compact

    path = tmp_path / "t.parquet"
    write_artifact(_trace().with_columns(priority=pl.lit(1, pl.Int32)), path, "trace", make_provenance())
    assert read_trace_compact(path) is None
    pq.write_table(_trace().with_columns(pl.col("stream").cast(pl.Int64)).to_arrow(), path)
    assert read_trace_compact(path) is None


def test_every_kind_is_known_in_a_fresh_process_without_importing_its_module():
    """The CLI imports lazily: `shepherd report FOLDER` read a ``results`` table before anything had imported
    the module registering that kind ('unknown artifact kind'). Kinds registered elsewhere load on first need."""
    import subprocess
    import sys

    code = ("from shepherd.core.artifacts import schema_for\n"
            "for kind in ('results', 'cell', 'pipeline_plan', 'block_profiles', 'trace'):\n"
            "    schema_for(kind)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
