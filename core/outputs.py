"""Writing outputs safely: unique temps, whole folders, locks, normal permissions.

The mechanics behind every artifact write (``core/artifacts.py`` re-exports
the public helpers):

* :func:`atomic_path` — a unique temp file beside the destination (its name
  carries host and PID), fsynced and renamed into place on success, removed on
  failure. Leftover temps are removed only when their writer is dead (same
  host) or they are older than a day, so two processes writing into one
  folder never delete each other's live temp file.
* :func:`artifact_dir` — a whole output folder: written into a temp folder
  beside it and swapped into place on success, so it never mixes two runs.
* :func:`check_output_file` / :func:`check_output_dir` — validate an ``-o``
  path before any long work.
* :func:`file_lock` — an advisory ``flock`` on a lock file (released by the
  kernel when its holder dies).
* Written files and folders get normal permissions (``0666 & ~umask``, folders
  ``0777 & ~umask``), not the ``0600`` of ``mkstemp``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from shepherd.core.errors import UserError, environment_error

STALE_AGE_S = 24 * 3600.0  # a temp of another host is stale after a day


# --------------------------------------------------------------------------- permissions

def current_umask() -> int:
    """The process umask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def normal_mode(directory: bool = False) -> int:
    """``0666 & ~umask`` for a file, ``0777 & ~umask`` for a folder."""
    return (0o777 if directory else 0o666) & ~current_umask()


# --------------------------------------------------------------------------- temp names

# os.uname's node name is socket.gethostname() on POSIX, and os.urandom(4).hex() is secrets.token_hex(4): the
# same names without importing socket and secrets (≈ 6 ms of every command, issue 43)
_HOST = os.uname().nodename.replace(".", "-") or "host"


def temp_name(dest: Path) -> Path:
    """``.NAME.HOST.PID.RANDOM.tmp`` beside ``dest``: unique per writer, owner readable from the name."""
    return dest.with_name(f".{dest.name}.{_HOST}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


def _is_stale(tmp: Path, prefix: str) -> bool:
    """A temp left by a dead writer: same host and PID gone, or older than a day."""
    parts = tmp.name[len(prefix):].split(".")
    try:
        age = time.time() - tmp.lstat().st_mtime
    except OSError:
        return False
    if len(parts) == 4 and parts[0] == _HOST and parts[1].isdigit():
        pid = int(parts[1])
        return pid != os.getpid() and not _pid_alive(pid)
    return age > STALE_AGE_S


def remove_stale_temps(dest: Path) -> None:
    """Delete the temps that killed earlier writes of ``dest`` left (never a live writer's)."""
    parent = dest.parent if str(dest.parent) else Path(".")
    prefix = f".{dest.name}."
    try:
        candidates = list(parent.glob(f"{_glob_escape(prefix)}*.tmp"))
    except OSError:
        return
    for stale in candidates:
        if _is_stale(stale, prefix):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)


def _glob_escape(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


# --------------------------------------------------------------------------- output checks

def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_parent(path: Path, what: str) -> None:
    parent = path.absolute().parent
    anchor = _nearest_existing(parent)
    if not anchor.is_dir():
        raise UserError(f"{what} {path}: {anchor} is a file, not a directory")
    if not os.access(anchor, os.W_OK | os.X_OK):
        raise UserError(f"{what} {path}: directory {anchor} is not writable")


def check_output_file(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Fail fast (UserError) unless a single-file artifact can be written at ``path``."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{what} {p} is a directory; name a file inside it (e.g. {p / 'out.parquet'})")
    if p.exists() and not p.is_file():
        raise UserError(f"{what} {p} exists and is not a regular file")
    _check_parent(p, what)
    return p


def check_output_dir(path: str | os.PathLike[str], what: str = "output folder",
                     replaceable: Callable[[Path], bool] | None = None) -> Path:
    """Fail fast (UserError) unless an output folder can be written (or replaced) at ``path``.

    ``replaceable(entry)`` says whether an entry of an existing folder may be
    replaced by a new run (default: shepherd artifacts and their records);
    a folder holding anything else is refused rather than deleted.
    """
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{what} {p} is a file, not a directory")
    cwd = Path.cwd().resolve()
    if p.resolve() == cwd or p.resolve() in cwd.parents:  # it is replaced whole: never the folder we stand in
        raise UserError(f"{what} {p} is the current directory or holds it; name a folder inside it")
    _check_parent(p, what)
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise UserError(f"{what} {p} is not writable")
        ok = replaceable or is_replaceable_output
        for entry in sorted(p.iterdir()):
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                continue
            if not ok(entry):
                raise UserError(f"{what} {p} holds {entry.name}, which is not an output of this command; "
                                "choose an empty or new folder")
    return p


def is_replaceable_output(entry: Path) -> bool:
    """An entry a new run may replace: a shepherd Parquet artifact or a run record."""
    if entry.is_symlink() or not entry.is_file():
        return False
    if entry.name.endswith(".run.json"):
        return True
    if entry.suffix != ".parquet":
        return False
    from shepherd.core.artifacts import artifact_kind  # local: artifacts imports this module

    try:
        return artifact_kind(entry) is not None
    except UserError:
        return False


# --------------------------------------------------------------------------- atomic writes

@contextmanager
def atomic_path(dest: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a unique temp path beside ``dest``; on success fsync, chmod and rename it to ``dest``.

    On any failure the temp is removed and ``dest`` is left as it was.
    """
    dest = Path(dest)
    parent = dest.parent if str(dest.parent) else Path(".")
    if dest.is_dir():
        raise UserError(f"output {dest} is a directory; name a file inside it (e.g. {dest / 'out.parquet'})")
    if parent.exists() and not parent.is_dir():
        raise UserError(f"cannot write to {parent}: it is a file, not a directory")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create directory {parent}: {exc.strerror}") from None
    remove_stale_temps(dest)
    tmp = temp_name(dest)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, normal_mode())
        os.replace(tmp, dest)
    except PermissionError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write to {parent}: {exc.strerror}") from None
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        refused = environment_error(exc) if isinstance(exc, Exception) else None
        if refused is not None:  # a full disk or a file-size limit, named with the file meant
            raise UserError(str(refused).replace("an output file", str(dest), 1)) from exc
        raise


def write_bytes_atomic(dest: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``dest`` through :func:`atomic_path`."""
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data)
    return Path(dest)


@contextmanager
def artifact_dir(out: str | os.PathLike[str],
                 replaceable: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Yield a fresh temp folder beside ``out``; on success it replaces ``out`` whole.

    The outputs of one run land together or not at all: an earlier run's files
    never survive beside the new ones, and a failure (or a kill) leaves ``out``
    as it was plus, at worst, a hidden ``.NAME….tmp`` folder that the next
    write removes. Between the two renames of the swap ``out`` is briefly
    absent, never mixed.
    """
    out = Path(os.path.abspath(out))
    if out.is_symlink():
        out = out.resolve()  # replace the folder it points to, not the link
    check_output_dir(out, replaceable=replaceable)
    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    tmp = temp_name(out)
    try:
        tmp.mkdir(mode=0o700)
    except OSError as exc:
        raise UserError(f"cannot create a folder beside {out}: {exc.strerror}") from None
    try:
        yield tmp
        os.chmod(tmp, normal_mode(directory=True))
        old = None
        with file_lock(out.parent / f".{out.name}.lock"):  # two swaps of one folder never interleave
            if out.exists():
                check_output_dir(out, replaceable=replaceable)  # still only outputs (nothing added since)
                old = temp_name(out)
                os.replace(out, old)
            os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --------------------------------------------------------------------------- locks

@contextmanager
def file_lock(path: str | os.PathLike[str], blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing); yields whether it was taken.

    With ``blocking=False`` it yields ``False`` at once when another process
    holds the lock. The kernel releases the lock when the holder exits or dies.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, normal_mode())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            taken = True
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            taken = False
        try:
            yield taken
        finally:
            if taken:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
