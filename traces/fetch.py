"""Download, verify, extract and register the public MAF archives (a local cache).

Cache directory: ``$SHEPHERD_DATA`` if set, else the user's cache folder
(``$XDG_CACHE_HOME/shepherd``, else ``~/.cache/shepherd`` on Linux). Layout::

    <cache>/downloads/<archive>.part   a partial download (resumable; never used as data)
    <cache>/downloads/<archive>        the complete, checksum-checked archive
    <cache>/<name>/                    the extracted dataset (renamed into place when complete)
    <cache>/registry.json              where each dataset lives, how it got there, its SHA-256

``--trace maf2019`` and ``--trace maf2021`` resolve through this registry
(:func:`dataset_path`); a missing dataset is a one-line error saying how to
fetch or import it — never a silent fallback to synthetic data.

Download: through :func:`shepherd.core.download.retrieve` (pooch: cached,
SHA-256-checked, renamed into place only when the digest matches; resumed
with an HTTP ``Range`` request after an interruption, the partial bytes kept
in ``downloads/<archive>.part``). On a checksum mismatch nothing is kept and
the error says how to retry or import a manually downloaded copy. Extraction
goes to a temporary directory renamed into place only when complete.

Checksums — honestly: this toolkit was written without network access, so
no checksum here was verified by us. For MAF 2019 the expected SHA-256 is
the value a third-party provenance record reports for the release asset
(142,968,140 bytes); if upstream republishes the archive, pass the new
digest with ``--sha256``. For MAF 2021 no digest is known: the first
download's SHA-256 is *recorded* in the registry (and shown as "recorded,
not verified"); later downloads must match it, and ``--sha256`` pins one.

URLs (official, from github.com/Azure/AzurePublicDataset; not reachable from
the sandbox this was written in, so untested here): see :data:`DATASETS`.
The MAF 2021 archive is a RAR file; Python cannot unpack RAR, so an external
``unrar``, ``unar``, ``7z`` or ``bsdtar`` is used when present — otherwise
extract it yourself and ``shepherd traces import`` the ``.txt``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from shepherd.core.download import Progress, cache_root, check_url, retrieve  # noqa: F401 - check_url: the CLI's
from shepherd.core.errors import UserError
from shepherd.core.hashing import is_sha256, sha256_file
from shepherd.core.outputs import normal_mode, write_bytes_atomic


@dataclass(frozen=True)
class Dataset:
    """A public dataset the toolkit knows how to fetch."""

    name: str
    title: str
    url: str
    archive: str
    marker: str  # glob that identifies the extracted data
    sha256: str | None = None
    sha256_origin: str = ""


DATASETS: dict[str, Dataset] = {
    "maf2019": Dataset(
        name="maf2019",
        title="Azure Functions trace 2019 (Shahrad et al., ATC '20), CC-BY 4.0",
        url=("https://github.com/Azure/AzurePublicDataset/releases/download/dataset-functions-2019/"
             "azurefunctions_dataset2019_azurefunctions-dataset2019.tar.xz"),
        archive="azurefunctions_dataset2019_azurefunctions-dataset2019.tar.xz",
        marker="invocations_per_function_md.anon.d*.csv",
        sha256="aff8b3ca7240a41a109e4ee598e0a96e45fcb92e7b8395ac19cb3748cd260d89",
        sha256_origin="reported by a third-party provenance record; not verified by this project",
    ),
    "maf2021": Dataset(
        name="maf2021",
        title="Azure Functions invocation trace 2021 (Zhang et al., SOSP '21), CC-BY 4.0",
        url=("https://github.com/Azure/AzurePublicDataset/raw/master/data/"
             "AzureFunctionsInvocationTraceForTwoWeeksJan2021.rar"),
        archive="AzureFunctionsInvocationTraceForTwoWeeksJan2021.rar",
        marker="AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt",
    ),
}


def data_root() -> Path:
    """The cache directory: ``$SHEPHERD_DATA``, else the user's cache folder (``~/.cache/shepherd`` on Linux)."""
    return cache_root()


def dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise UserError(f"unknown dataset '{name}' (known: {', '.join(DATASETS)})") from None


# --------------------------------------------------------------------------- registry

def _registry_file(root: Path) -> Path:
    return root / "registry.json"


def read_registry(root: Path | None = None) -> dict:
    path = _registry_file(root or data_root())
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the data registry {path}: {exc}") from None


def _write_registry(root: Path, registry: dict) -> None:
    root.mkdir(parents=True, exist_ok=True)
    # unique temp + rename, with the umask's permissions (a shared cache stays readable to the group)
    write_bytes_atomic(_registry_file(root), json.dumps(registry, indent=2, sort_keys=True).encode())


def register(name: str, path: Path, how: str, **info: object) -> dict:
    """Record where dataset ``name`` lives (``how``: fetched | imported)."""
    root = data_root()
    registry = read_registry(root)
    entry = {"path": str(Path(path).resolve()), "how": how,
             "when": datetime.now(timezone.utc).isoformat(timespec="seconds"), **info}
    registry[name] = entry
    _write_registry(root, registry)
    return entry


def dataset_path(name: str) -> Path:
    """Where ``name`` lives locally, or a one-line error on how to get it."""
    ds = dataset(name)
    entry = read_registry().get(name)
    if entry and Path(entry["path"]).exists():
        return Path(entry["path"])
    where = data_root()
    raise UserError(f"{ds.name} data not found in {where}: run `shepherd traces fetch {ds.name}` "
                    f"(downloads {ds.archive}) or `shepherd traces import PATH` for a local copy "
                    "(or use --trace maf-synthetic for the synthetic stand-in)")


# --------------------------------------------------------------------------- extract

def _extract(archive: Path, into: Path) -> None:
    name = archive.name.lower()
    if tarfile.is_tarfile(archive):
        with tarfile.open(archive) as tar:
            tar.extractall(into, filter="data")
    elif zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    elif name.endswith(".rar"):
        _extract_rar(archive, into)
    else:
        shutil.copy2(archive, into / archive.name)


def _extract_rar(archive: Path, into: Path) -> None:
    tools = [("unrar", ["unrar", "x", "-o+", str(archive), str(into) + os.sep]),
             ("unar", ["unar", "-f", "-o", str(into), str(archive)]),
             ("7z", ["7z", "x", "-y", f"-o{into}", str(archive)]),
             ("bsdtar", ["bsdtar", "-xf", str(archive), "-C", str(into)])]
    for tool, cmd in tools:
        if shutil.which(tool):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode == 0:
                return
            raise UserError(f"{tool} could not extract {archive}: {done.stderr.strip()[:200]}")
    raise UserError(f"{archive} is a RAR archive and no extractor (unrar, unar, 7z, bsdtar) is installed: "
                    f"extract it yourself and run `shepherd traces import <the .txt file>`")


def validate(name: str, where: Path) -> None:
    """Check the header of every data file of ``name`` at ``where`` (a file or directory)."""
    from shepherd.traces import maf2019, maf2021  # local: keep this module light

    if name == "maf2019":
        files = [where] if where.is_file() else _find_marker(where, DATASETS["maf2019"].marker)
        for f in files:
            maf2019.read_header(f)
    else:
        maf2021.check_header(where if where.is_file() else where / maf2021.FILE)


def _find_marker(root: Path, pattern: str) -> list[Path]:
    return sorted(p for p in root.rglob(pattern) if p.is_file())


def install_archive(ds: Dataset, archive: Path) -> Path:
    """Extract ``archive`` into ``<cache>/<name>`` atomically; return the data directory."""
    root = data_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{ds.name}.", suffix=".tmp", dir=root))
    try:
        _extract(archive, tmp)
        found = _find_marker(tmp, ds.marker)
        if not found:
            raise UserError(f"{archive.name} holds no {ds.marker}: not a {ds.name} archive")
        validate(ds.name, found[0].parent)
        final = root / ds.name
        if final.exists():
            shutil.rmtree(final)
        os.chmod(tmp, normal_mode(directory=True))  # mkdtemp makes it 0700
        tmp.replace(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final / found[0].parent.relative_to(tmp)


@dataclass
class FetchResult:
    name: str
    path: Path
    sha256: str
    checksum: str  # verified | recorded (not verified) | already present
    bytes: int


def fetch(name: str, url: str | None = None, sha256: str | None = None,
          on_progress: Progress | None = None, force: bool = False) -> FetchResult:
    """Download (resuming), verify, extract and register dataset ``name``."""
    ds = dataset(name)
    if url is not None:
        url = check_url(url)
    if sha256 is not None and not is_sha256(sha256):
        raise UserError(f"--sha256 must be 64 hexadecimal digits, got '{sha256}'")
    registry = read_registry()
    entry = registry.get(name)
    if entry and not force and Path(entry["path"]).exists():
        return FetchResult(name, Path(entry["path"]), entry.get("sha256", ""), "already present", 0)
    source = url or ds.url
    expected = (sha256 or ds.sha256 or (entry or {}).get("sha256") or "").lower() or None
    archive = retrieve(source, data_root() / "downloads" / ds.archive, expected, on_progress,
                       hint=f" (or download {source} yourself and run `shepherd traces import FILE`"
                            f"{'' if sha256 else ', or pin another digest with --sha256'})")
    digest = expected or sha256_file(archive)
    how = "verified" if expected else "recorded (not verified)"
    path = install_archive(ds, archive)
    register(name, path, "fetched", url=source, sha256=digest, checksum=how, archive=str(archive))
    return FetchResult(name, path, digest, how, archive.stat().st_size)


def _is_maf2019_file(path: Path) -> bool:
    """Whether ``path`` has the header of a MAF 2019 invocation file (any name)."""
    from shepherd.traces import maf2019  # local: keep this module light

    try:
        maf2019.read_header(path)
    except UserError:
        return False
    return True


def _register_maf2019_file(path: Path) -> tuple[str, Path]:
    """Register one MAF 2019 invocation file (a sample's ``invocations.csv``, one day file)."""
    from shepherd.traces import maf2019  # local: keep this module light

    validate("maf2019", path)
    subset = maf2019.subset_of(path)
    register("maf2019", path, "imported", **({"subset": subset} if subset else {}))
    return "maf2019", path


def import_path(path: Path, name: str | None = None, sha256: str | None = None) -> tuple[str, Path]:
    """Register a local copy: a data directory, one data file, or an archive (extracted into the cache).

    Besides the official layouts, a directory in the layout of the vHive samples
    (``invocations.csv`` beside ``durations.csv`` and ``memory.csv``) or any
    single CSV with the MAF 2019 invocation header is accepted as MAF 2019 (one
    file, found by its header, not its name). Such data is registered with its
    ``subset`` note (:func:`shepherd.traces.maf2019.subset_of`), and every trace
    built from it is labelled a subset.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise UserError(f"nothing to import: {path} does not exist")
    if sha256 is not None and not is_sha256(sha256):
        raise UserError(f"--sha256 must be 64 hexadecimal digits, got '{sha256}'")
    candidates = [dataset(name)] if name else list(DATASETS.values())
    if path.is_dir():
        for ds in candidates:
            if _find_marker(path, ds.marker):
                target = _find_marker(path, ds.marker)[0].parent
                validate(ds.name, target)
                register(ds.name, target, "imported")
                return ds.name, target
        if name in (None, "maf2019"):
            found = [p for p in sorted(path.glob("*.csv")) if p.is_file() and _is_maf2019_file(p)]
            if len(found) == 1:
                return _register_maf2019_file(found[0])
            if len(found) > 1:
                names = ", ".join(p.name for p in found[:4])
                raise UserError(f"{path} holds {len(found)} MAF 2019 invocation files ({names}): import one of "
                                f"them, e.g. `shepherd traces import {found[0]} --as maf2019`, or rename them "
                                f"invocations_per_function_md.anon.dNN.csv (NN = the day)")
        raise UserError(f"{path} holds no MAF data files ({' or '.join(d.marker for d in candidates)}, "
                        f"or a CSV with the MAF 2019 header HashOwner,HashApp,HashFunction,Trigger,1…1440): "
                        f"import the data file itself with `shepherd traces import FILE --as maf2019|maf2021`")
    for ds in candidates:
        if path.match(ds.marker):
            validate(ds.name, path.parent)
            register(ds.name, path.parent, "imported")
            return ds.name, path.parent
    if name in (None, "maf2019") and path.suffix.lower() == ".csv" and _is_maf2019_file(path):
        return _register_maf2019_file(path)
    if tarfile.is_tarfile(path) or zipfile.is_zipfile(path) or path.suffix.lower() == ".rar":
        digest = sha256_file(path)
        if sha256 and digest != sha256.lower():
            raise UserError(f"checksum mismatch for {path.name}: expected {sha256}, got {digest}")
        ds = candidates[0] if name else _guess_from_archive_name(path)
        target = install_archive(ds, path)
        register(ds.name, target, "imported", sha256=digest, archive=str(path.resolve()))
        return ds.name, target
    if name:  # a single data file under another name, e.g. a subset of one day
        validate(name, path)
        register(name, path, "imported")
        return name, path
    raise UserError(f"cannot tell which dataset {path.name} is: give --as maf2019|maf2021")


def _guess_from_archive_name(path: Path) -> Dataset:
    low = path.name.lower()
    if "2021" in low:
        return DATASETS["maf2021"]
    if "2019" in low:
        return DATASETS["maf2019"]
    raise UserError(f"cannot tell which dataset {path.name} holds: give --as maf2019|maf2021")
