"""A large trace's columns memory-mapped from the user's cache (core/trace_columns.py, issue 43): the same frame
as the Parquet read, an entry only for a trace that passed its checks, a new entry when the file changes, a
damaged entry removed, the folder kept under its cap, the cache off on request."""

from __future__ import annotations

import os

import numpy as np
import polars as pl
import pytest

from shepherd.core import trace_columns
from shepherd.core.artifacts import make_provenance, read_artifact, read_trace_compact, write_artifact
from shepherd.core.errors import UserError
from shepherd.traces.synthetic import assemble


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of its own, and traces of 1,000 requests counted as large."""
    where = tmp_path / "cache"
    monkeypatch.setenv("SHEPHERD_TRACE_CACHE", str(where))
    monkeypatch.setattr(trace_columns, "MIN_ROWS", 1000)
    return where


def _trace(n: int = 1500, models=("ResNet50", "AlexNet", "VGG16"), shift: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(n + shift)
    times = [np.sort(rng.integers(0, 10_000_000, n // len(models))) + shift for _ in models]
    return assemble(times, list(models), [50_000 + 10_000 * i for i in range(len(models))])


def _entries(where):
    return sorted(where.glob("*.arrow")) if where.exists() else []


def test_a_second_read_maps_the_same_frame(cache, tmp_path):
    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    first = read_trace_compact(path)
    assert len(_entries(cache)) == 1  # written by the first read
    second = read_trace_compact(path)
    assert first is not None and second is not None
    assert second.frame.schema == first.frame.schema and second.frame.equals(first.frame)
    assert second.provenance == first.provenance == read_artifact(path, "trace").provenance
    whole = read_artifact(path, "trace").frame
    assert second.frame.with_columns(pl.col("model").cast(pl.String)).equals(whole)
    # the mapped columns are read-only memory: a numpy view of them cannot be written
    view = second.frame["arrival_us"].to_numpy()
    assert not view.flags.writeable


def test_short_traces_and_the_cache_off_write_nothing(cache, tmp_path, monkeypatch):
    path = tmp_path / "short.parquet"
    write_artifact(_trace(600), path, "trace", make_provenance())  # 600 < MIN_ROWS
    assert read_trace_compact(path) is not None
    assert _entries(cache) == []
    big = tmp_path / "big.parquet"
    write_artifact(_trace(), big, "trace", make_provenance())
    monkeypatch.setenv("SHEPHERD_TRACE_CACHE", "off")
    assert read_trace_compact(big) is not None
    assert _entries(cache) == []


def test_a_rewritten_trace_is_read_afresh(cache, tmp_path):
    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    read_trace_compact(path)
    write_artifact(_trace(shift=7), path, "trace", make_provenance())  # other values, same name
    os.utime(path, ns=(1, 1))  # even with an old time stamp: size, inode and time name the entry together
    got = read_trace_compact(path)
    want = read_artifact(path, "trace").frame
    assert got is not None and got.frame.with_columns(pl.col("model").cast(pl.String)).equals(want)
    assert len(_entries(cache)) == 2


def test_a_trace_that_fails_its_checks_gets_no_entry(cache, tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(_trace().with_columns(deadline_us=pl.col("deadline_us") + 1).to_arrow(), path)
    for _ in range(2):  # refused every time, never from an entry
        with pytest.raises(UserError, match="must equal"):
            read_trace_compact(path)
    assert _entries(cache) == []


def test_a_damaged_entry_is_removed_and_the_trace_read(cache, tmp_path):
    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    want = read_trace_compact(path).frame
    (entry,) = _entries(cache)
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    got = read_trace_compact(path)
    assert got is not None and got.frame.equals(want)
    assert _entries(cache) == [entry] and entry.stat().st_size > 0  # removed, then written again whole


def test_an_entry_of_other_columns_is_not_trusted(cache, tmp_path):
    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    want = read_trace_compact(path).frame
    (entry,) = _entries(cache)
    want.head(10).write_ipc(entry)  # the right columns, the wrong row count
    assert trace_columns.load(path, want.height, dict(want.schema)) is None
    assert not entry.exists()


def test_the_folder_keeps_the_newest_entries_under_its_cap(cache, tmp_path, monkeypatch):
    paths = []
    for i in range(3):
        p = tmp_path / f"t{i}.parquet"
        write_artifact(_trace(shift=i), p, "trace", make_provenance())
        paths.append(p)
        read_trace_compact(p)
        os.utime(_entries(cache)[0].parent, None)
    sizes = [e.stat().st_size for e in _entries(cache)]
    assert len(sizes) == 3
    trace_columns.evict(cache, cap=max(sizes) * 2)
    left = _entries(cache)
    assert len(left) == 2
    newest = trace_columns.entry_path(trace_columns.identity(paths[-1]))
    assert newest in left


def test_simulate_outputs_are_the_same_with_and_without_an_entry(cache, tmp_path, cli):
    path = tmp_path / "t.parquet"
    write_artifact(_trace(3000, ("ResNet50", "ResNet18", "DenseNet121")), path, "trace", make_provenance())
    outs = []
    for i in range(2):  # the first run writes the entry, the second maps it
        out = tmp_path / f"o{i}"
        r = cli("simulate", "--policy", "flex", "--gpus", "2", "--record", "summary", "--trace", str(path),
                "-o", str(out))
        assert r.code == 0, r.err
        outs.append(out)
        assert len(_entries(cache)) == 1
    for name in ("summary.parquet", "workers.parquet"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()


def test_the_verified_source_memo_is_keyed_by_the_bytes(tmp_path, monkeypatch):
    """core/engine/fastpath.py remembers each file's normalised digest across processes by the SHA-256 of its
    bytes (issue 43): an edit that keeps the size and the time stamp still gets its own digest."""
    from shepherd.core.engine import fastpath

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(fastpath, "_MEMO", [])
    src = tmp_path / "m.py"
    src.write_text("def f(x):\n    return x < 1\n")
    before = fastpath.normalised(src)
    assert (tmp_path / "xdg" / "shepherd" / fastpath.MEMO).is_file()
    st = src.stat()
    src.write_text("def f(x):\n    return x > 1\n")  # same size
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))  # same time stamp
    fastpath._parsed.cache_clear()
    monkeypatch.setattr(fastpath, "_MEMO", [])  # as a fresh process: the memo read from disk
    after = fastpath.normalised(src)
    assert after != before
    src.write_text("def f(x):\n    # a comment\n    return x < 1\n")
    fastpath._parsed.cache_clear()
    assert fastpath.normalised(src) == before  # the first code again: its remembered digest


def test_the_file_s_digest_is_kept_with_its_entry_and_read_instead_of_the_file(cache, tmp_path, monkeypatch):
    """The provenance's digest of a mapped trace comes from beside its entry (no second read of the file,
    issue 43) and is the file's SHA-256; a rewritten trace is a new entry with its own digest."""
    import hashlib

    from shepherd.core import hashing

    path = tmp_path / "t.parquet"
    write_artifact(_trace(), path, "trace", make_provenance())
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    read_trace_compact(path)  # the entry, and the digest beside it
    assert [p.read_text().strip() for p in cache.glob("*.sha256")] == [want]
    monkeypatch.setattr(hashing, "_KNOWN", {})  # as in a new process
    assert read_trace_compact(path) is not None  # mapped
    with monkeypatch.context() as m:
        m.setattr(hashing.hashlib, "file_digest", lambda *a, **k: pytest.fail("the trace file was read again"))
        assert make_provenance(inputs=[path])["inputs"] == {"t.parquet": want}
    write_artifact(_trace(shift=7), path, "trace", make_provenance())
    read_trace_compact(path)
    again = hashlib.sha256(path.read_bytes()).hexdigest()
    assert again != want and make_provenance(inputs=[path])["inputs"] == {"t.parquet": again}
    for entry in _entries(cache):  # an entry removed takes its digest along
        trace_columns._remove(entry)
    assert list(cache.glob("*.sha256")) == []
