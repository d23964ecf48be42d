"""The PPipe authors' profiling data: where it is found, and ``shepherd data fetch ppipe``.

PPipe (Kong, Xu, Hu; USENIX ATC '25) plans and serves from offline profiles
its authors published in their repository (GitHub ``JonnyKong/PPipe``,
folder ``data/``; format in §5 and Appendix A of the paper, layout in the
folder's README of the team's shared copy). That repository carries **no
licence**, so this project never packages the data: a user downloads it from
the authors.

One locator, :func:`locate`, used by the experiments, the CLI and the tests;
the first folder holding ``model_list.txt`` wins:

1. ``$SHEPHERD_PPIPE_DATA`` (an explicit folder);
2. ``$SHEPHERD_SHARED/data/ppipe`` (a team's shared data folder);
3. ``../shared/data/ppipe`` beside the checkout of this package;
4. ``<cache>/ppipe``, where ``shepherd data fetch ppipe`` installs it
   (``$SHEPHERD_DATA``, else the user's cache folder, ``~/.cache/shepherd`` on Linux).

:func:`fetch` downloads the repository archive at the pinned :data:`COMMIT`
through :func:`shepherd.core.download.retrieve` (pooch: cached, resumable),
or takes a local archive (``--from``), extracts only the files the toolkit
reads (:data:`FILES`: the block timings, the L4 whole-model timings that set
the SLO, the cut sizes, the model list), checks them and installs them
atomically.

The check — honestly: this toolkit was written without network access, and a
GitHub archive's bytes are not guaranteed stable (its compression may
change), so no SHA-256 of the archive is pinned. What is pinned is the
**content**: :data:`CONTENT_SHA256` is the SHA-256 of the ``sha256sum``-style
manifest (``<file sha256>  <path>`` per line, sorted by path) of the
:data:`FILE_COUNT` extracted files, computed on the team's byte-for-byte copy
of ``data/`` at :data:`COMMIT`. An archive whose files differ in any byte, or
lack one, is refused with nothing installed. The commit is the one that copy's
README records (2025-05-16); a public code index of the repository shows the
data files last changed in commits ``aeb0e79`` (timings, mappings) and
``e74802d`` (``model_list.txt``, whose 18 lines match the copy).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from shepherd.core.download import Progress, cache_root, retrieve
from shepherd.core.errors import UserError
from shepherd.core.hashing import sha256_file
from shepherd.core.outputs import normal_mode

#: the authors' repository at the commit the team's copy was taken from (2025-05-16)
REPOSITORY = "JonnyKong/PPipe"
COMMIT = "03cd8df0f226f204c4795a4edbf9986aaa2fa247"
URL = f"https://github.com/{REPOSITORY}/archive/{COMMIT}.tar.gz"
ARCHIVE = f"PPipe-{COMMIT}.tar.gz"
#: the files the toolkit reads, relative to the repository's ``data/`` (``*`` = one path segment)
FILES = ("model_list.txt",
         "models/block-timing-tf32/*.csv",
         "models/model-profile-tf32/*/L4-1/1/*-L4.engine.timing.json",
         "prepartition_mappings/*/contraction_trans-size_*.csv")
#: SHA-256 of the manifest of those files at COMMIT (see the module docstring)
CONTENT_SHA256 = "0e98a3e513bef7258bad8e56e2cf0cbda0b8ec9b2c12a9fcdc38b883b27cd231"
FILE_COUNT = 421
MARKER = "model_list.txt"
ENV = "SHEPHERD_PPIPE_DATA"
FETCH = "shepherd data fetch ppipe"


# --------------------------------------------------------------------------- where it is

def _checkout_shared() -> Path:
    """``../shared/data/ppipe`` beside the checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "ppipe"


def install_dir() -> Path:
    """Where :func:`fetch` installs the data."""
    return cache_root() / "ppipe"


def candidates() -> list[Path]:
    """The folders :func:`locate` tries, in order."""
    out = []
    if os.environ.get(ENV):
        out.append(Path(os.environ[ENV]).expanduser())
    if os.environ.get("SHEPHERD_SHARED"):
        out.append(Path(os.environ["SHEPHERD_SHARED"]).expanduser() / "data" / "ppipe")
    out += [_checkout_shared(), install_dir()]
    return out


def locate() -> Path | None:
    """The first candidate folder that holds the PPipe data, else None."""
    return next((c for c in candidates() if (c / MARKER).is_file()), None)


def require() -> Path:
    """:func:`locate`, or a one-line error saying how to get the data."""
    found = locate()
    if found is not None:
        return found
    env = os.environ.get(ENV)
    if env:
        raise UserError(f"{ENV}={env} holds no PPipe data ({MARKER} missing): point it at the folder, or unset it "
                        f"and run `{FETCH}`")
    raise UserError(f"the PPipe authors' profiling data is not here (looked in $SHEPHERD_SHARED/data/ppipe, "
                    f"../shared/data/ppipe beside the checkout and {install_dir()}): run `{FETCH}` (downloads "
                    f"github.com/{REPOSITORY} at {COMMIT[:7]}) or `{FETCH} --from ARCHIVE` for a downloaded copy")


# --------------------------------------------------------------------------- what it holds

def wanted(rel: str) -> bool:
    """Whether ``rel`` (a path under ``data/``) is one of :data:`FILES`."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return False
    for pattern in FILES:
        pat = pattern.split("/")
        if len(pat) == len(parts) and all(fnmatch.fnmatchcase(a, b) for a, b in zip(parts, pat)):
            return True
    return False


def manifest(root: Path) -> list[tuple[str, str]]:
    """``(path, sha256)`` of every file of :data:`FILES` under ``root``, sorted by path."""
    root = Path(root)
    rels = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return [(rel, sha256_file(root / rel)) for rel in rels if wanted(rel)]


def content_digest(root: Path) -> tuple[str, int]:
    """SHA-256 of the ``sha256sum``-style manifest of ``root``, and its file count."""
    import hashlib

    rows = manifest(root)
    text = "".join(f"{digest}  {rel}\n" for rel, digest in rows)
    return hashlib.sha256(text.encode()).hexdigest(), len(rows)


# --------------------------------------------------------------------------- install

def _open(archive: Path) -> tarfile.TarFile | zipfile.ZipFile:
    if tarfile.is_tarfile(archive):
        return tarfile.open(archive)
    if zipfile.is_zipfile(archive):
        return zipfile.ZipFile(archive)
    raise UserError(f"{archive} is not a tar or zip archive (the PPipe repository archive is a .tar.gz)")


def _extract(archive: Path, into: Path) -> None:
    """Write the archive's files of :data:`FILES` (below the folder holding ``model_list.txt``) into ``into``."""
    with _open(archive) as src:
        if isinstance(src, tarfile.TarFile):
            files = [(m.name, m) for m in src.getmembers() if m.isfile()]
        else:
            files = [(i.filename, i) for i in src.infolist() if not i.is_dir()]
        markers = sorted((n for n, _ in files if n == MARKER or n.endswith("/" + MARKER)), key=len)
        if not markers:
            raise UserError(f"{archive.name} holds no {MARKER}: not the PPipe repository (expected "
                            f"PPipe-<commit>/data/{MARKER})")
        prefix = markers[0][: -len(MARKER)]
        for name, handle in files:
            rel = name[len(prefix):]
            if not (name.startswith(prefix) and wanted(rel)):
                continue
            dest = into / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            fh = src.extractfile(handle) if isinstance(src, tarfile.TarFile) else src.open(handle)
            with fh, open(dest, "wb") as out:
                shutil.copyfileobj(fh, out)


def install(archive: Path, source: str) -> tuple[Path, str, int]:
    """Extract :data:`FILES` from ``archive``, check the pinned content, install into :func:`install_dir`."""
    archive = Path(archive)
    final = install_dir()
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".ppipe.", suffix=".tmp", dir=final.parent))
    try:
        try:
            _extract(archive, tmp)
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
            raise UserError(f"cannot read {archive.name}: {exc}") from None
        digest, count = content_digest(tmp)
        if digest != CONTENT_SHA256:
            raise UserError(f"{archive.name} does not hold the pinned PPipe data ({count} of {FILE_COUNT} files, "
                            f"content SHA-256 {digest[:16]}…, expected {CONTENT_SHA256[:16]}…): nothing installed; "
                            f"use the authors' archive at commit {COMMIT[:7]} ({URL})")
        (tmp / "SOURCE.txt").write_text(
            f"PPipe profiling data (Kong, Xu, Hu; USENIX ATC '25), github.com/{REPOSITORY} data/ at commit {COMMIT}\n"
            f"installed by `{FETCH}` from {source}\n"
            f"content SHA-256 {digest} ({count} files; the manifest rule is in shepherd/core/ppipe_data.py)\n"
            "No licence is stated by the authors: all rights are theirs; cite the paper and do not redistribute.\n")
        for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            os.chmod(d, normal_mode(directory=True))  # mkdtemp makes it 0700
        if final.exists():
            shutil.rmtree(final)
        tmp.replace(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, digest, count


@dataclass
class FetchResult:
    path: Path
    sha256: str
    files: int
    status: str  # installed | already present


def fetch(archive: Path | None = None, url: str | None = None, force: bool = False,
          on_progress: Progress | None = None) -> FetchResult:
    """Install the PPipe data into the cache from ``archive``, else download it (``url`` or :data:`URL`)."""
    final = install_dir()
    if archive is not None:
        archive = Path(archive).expanduser()
        if not archive.is_file():
            raise UserError(f"--from {archive}: no such file")
    if (final / MARKER).is_file() and not force:
        return FetchResult(final, CONTENT_SHA256, FILE_COUNT, "already present")
    if archive is not None:
        return FetchResult(*install(archive, str(archive.resolve())), "installed")
    source = url or URL
    downloaded = retrieve(source, cache_root() / "downloads" / ARCHIVE, None, on_progress,
                          hint=f" (or download {source} yourself and run `{FETCH} --from FILE`)")
    try:
        return FetchResult(*install(downloaded, source), "installed")
    except UserError:
        downloaded.unlink(missing_ok=True)  # a wrong archive is not kept: the next call downloads afresh
        raise
