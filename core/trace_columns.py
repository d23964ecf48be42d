"""A large trace file's columns kept uncompressed in the user's cache and memory-mapped on later reads
(issue 43: the whole process of a 10 M-request ``simulate --record summary``).

Reading a trace from Parquet decompresses and decodes every column into fresh memory: at 10 M requests
≈ 0.6 CPU-s in a new process (the decode, and a page fault per fresh 4 KiB page), half of what Flex's kernel
spends serving them. The first compact read of a trace of at least :data:`MIN_ROWS` requests (after its
checks passed) writes the frame it read — the trace's columns, the model column as the Enum of its sorted
models — as one uncompressed Arrow IPC file; a later read of the same file maps it (no decode, no copy: the
pages come from the OS's file cache as the run touches them) and skips the checks, which that frame passed.

**Which file.** An entry is named by a digest of the trace's resolved path, size, modification time (ns),
inode and device and :data:`FORMAT`: a trace rewritten, replaced or touched is a new entry; an entry is
trusted only when its columns, types and row count are what the trace's footer declares, else it is removed
and the trace read from Parquet. Entries are written through :func:`shepherd.core.outputs.atomic_path`
(fsynced, renamed into place), so a reader sees a whole entry or none, and a mapped entry stays valid if
another process replaces or evicts it.

**Where, how much.** ``$SHEPHERD_TRACE_CACHE`` (a folder; ``off`` or ``0``: never), else
``$XDG_CACHE_HOME/shepherd/trace-columns`` (``~/.cache/…``). At most :data:`CAP_BYTES` in all: after a
write, the entries used longest ago are removed (a read marks its entry used). 32 bytes a request (about
320 MB at 10 M requests).

**The file's digest.** Every output's provenance records the trace file's SHA-256 (reading the whole file:
≈ 0.06 CPU-s at 10 M requests). The entry keeps it beside itself (``<entry>.sha256``), computed when the entry
is written (or first mapped without one), and a read that maps the entry hands it to
:func:`shepherd.core.hashing.remember`: trusted as the columns are, by the file's identity.

Values, hence every output, are the same whether or not an entry was used (``tests/test_trace_columns.py``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import polars as pl

from shepherd.core.hashing import file_identity, is_sha256, remember, sha256_file

#: traces shorter than this are read from Parquet every time (a few tens of ms: no entry worth its disk)
MIN_ROWS = 1_000_000
#: the most bytes the folder holds after a write (least recently used entries removed first)
CAP_BYTES = 4 << 30
#: bumped when what an entry holds changes (old entries then never match)
FORMAT = 1
SUFFIX = ".arrow"
DIGEST_SUFFIX = ".sha256"  #: beside an entry: the trace file's SHA-256 (:func:`_digest`)
OFF = ("0", "off", "no", "false")


def folder() -> Path | None:
    """The cache folder, or None when ``$SHEPHERD_TRACE_CACHE`` turns the cache off."""
    env = os.environ.get("SHEPHERD_TRACE_CACHE", "").strip()
    if env.lower() in OFF:
        return None
    if env:
        return Path(env).expanduser()
    from shepherd.core.cachedir import cache_home

    return cache_home() / "trace-columns"


#: what names ``path``'s entry (resolved path, size, mtime in ns, inode, device), or None if unreadable
identity = file_identity


def entry_path(ident: tuple) -> Path | None:
    where = folder()
    if where is None:
        return None
    key = hashlib.sha256(repr((FORMAT, *ident)).encode()).hexdigest()[:32]
    return where / f"{key}{SUFFIX}"


def load(path: Path, rows: int, columns: dict[str, Any]) -> pl.DataFrame | None:
    """``path``'s frame from its entry (memory-mapped), or None: no entry, the cache off, a trace shorter than
    :data:`MIN_ROWS`, or an entry that is not ``rows`` rows of ``columns`` (name → polars type; the model
    column any Enum) — then it is removed."""
    if rows < MIN_ROWS:
        return None
    ident = identity(path)
    entry = entry_path(ident) if ident is not None else None
    if entry is None or not entry.is_file():
        return None
    import pyarrow as pa

    try:
        source = pa.memory_map(str(entry), "r")
        table = pa.ipc.open_file(source).read_all()  # zero-copy: the buffers point into the mapping
        frame = pl.from_arrow(table, rechunk=False)
    except Exception:  # noqa: BLE001 - a damaged or foreign entry: read the trace instead
        _remove(entry)
        return None
    if not isinstance(frame, pl.DataFrame) or frame.height != rows or not _matches(frame.schema, columns):
        _remove(entry)
        return None
    try:
        os.utime(entry)  # used now: the last to be evicted
    except OSError:
        pass
    _digest(path, ident, entry)
    return frame


def store(path: Path, ident: tuple | None, frame: pl.DataFrame) -> None:
    """Keep ``frame`` (read from ``path`` while it had ``ident``, checks passed) as ``path``'s entry, unless it is
    short, the cache is off, or ``path`` changed meanwhile. Failures (a full disk, a read-only folder) are
    silent: the cache only saves time."""
    if frame.height < MIN_ROWS or ident is None or identity(path) != ident:
        return
    entry = entry_path(ident)
    if entry is None or entry.is_file():
        return
    from shepherd.core.outputs import atomic_path

    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(entry) as tmp:
            frame.write_ipc(tmp, compression="uncompressed")
    except Exception:  # noqa: BLE001 - the cache only saves time
        return
    _digest(path, ident, entry)
    evict(entry.parent, keep=entry)


def _digest(path: Path, ident: tuple, entry: Path) -> None:
    """The trace file's SHA-256 (what every output's provenance records) kept beside its entry
    (``<entry>.sha256``) and remembered for this process (:func:`shepherd.core.hashing.remember`): a later run
    reads it instead of the file (≈ 0.06 CPU-s at 10 M requests). The entry's identity is the file's, so the
    digest is trusted as its columns are; none kept (the file read again) where it cannot be written or the
    file changed while it was read."""
    from shepherd.core.outputs import write_bytes_atomic

    side = entry.with_suffix(DIGEST_SUFFIX)
    try:
        digest = side.read_text().strip()
    except OSError:
        digest = ""
    if not is_sha256(digest):
        try:
            digest = sha256_file(path)
        except OSError:
            return
        if identity(path) != ident:
            return
        try:
            write_bytes_atomic(side, (digest + "\n").encode())
        except Exception:  # noqa: BLE001 - the cache only saves time
            pass
    remember(ident, digest)


def evict(where: Path, keep: Path | None = None, cap: int | None = None) -> None:
    """Remove the least recently used entries of ``where`` until they hold at most ``cap`` bytes (``keep`` last)."""
    cap = CAP_BYTES if cap is None else cap
    entries = []
    for p in where.glob(f"*{SUFFIX}"):
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((p == keep, st.st_mtime_ns, st.st_size, p))
    total = sum(e[2] for e in entries)
    for _, _, size, p in sorted(entries):
        if total <= cap:
            break
        _remove(p)
        total -= size


def _matches(schema: Any, columns: dict[str, Any]) -> bool:
    got = dict(schema)
    if list(got) != list(columns):
        return False
    return all(got[c] == t or (t == pl.Enum and isinstance(got[c], pl.Enum)) for c, t in columns.items())


def _remove(p: Path) -> None:
    for f in (p, p.with_suffix(DIGEST_SUFFIX)):
        try:
            f.unlink()
        except OSError:
            pass
