"""`shepherd data fetch ppipe` and the one PPipe data locator, against local archives (never the network)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from conftest import PPIPE_FOUND, PPIPE_MISSING, assert_user_error
from shepherd.core import ppipe_data
from test_fetch import _Server

PREFIX = f"PPipe-{ppipe_data.COMMIT}/data/"
# a tiny tree in the repository's layout: the files the toolkit reads, and some it does not
WANTED = {
    "model_list.txt": b"tiny-net\n",
    "models/block-timing-tf32/tiny-net-L4-1.csv": b"100,180\n200,390\n",
    "models/model-profile-tf32/tiny-net/L4-1/1/tiny-net-L4.engine.timing.json": b'[{"computeMs": 0.3}]',
    "prepartition_mappings/tiny-net/contraction_trans-size_ilpprepart10-0.5-1.5.csv": b"4096\n",
}
UNWANTED = {
    "models/shapes/tiny-net.json": b"{}",
    "models/model-profile-tf32/tiny-net/T4-1/1/tiny-net-T4.engine.timing.json": b"[]",
    "prepartition_mappings/tiny-net/contraction_mapping_ilpprepart10-0.5-1.5.csv": b"Conv_0,0\n",
    "../escape/model_list.txt": b"x",
}


def _manifest_digest(files: dict[str, bytes]) -> str:
    """The pinned-content rule, written out independently: sha256sum lines sorted by path, hashed."""
    text = "".join(f"{hashlib.sha256(files[p]).hexdigest()}  {p}\n" for p in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def _tar(path: Path, files: dict[str, bytes], prefix: str = PREFIX) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo(f"PPipe-{ppipe_data.COMMIT}/README.md"), io.BytesIO(b""))
        for rel, data in files.items():
            info = tarfile.TarInfo(prefix + rel)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No shared folder anywhere, an empty cache; the pinned content is the tiny tree's."""
    for var in ("SHEPHERD_SHARED", "SHEPHERD_PPIPE_DATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))
    monkeypatch.setattr(ppipe_data, "_checkout_shared", lambda: tmp_path / "no-shared" / "data" / "ppipe")
    monkeypatch.setattr(ppipe_data, "CONTENT_SHA256", _manifest_digest(WANTED))
    monkeypatch.setattr(ppipe_data, "FILE_COUNT", len(WANTED))
    return tmp_path / "cache"


def _installed(cache: Path) -> set[str]:
    root = cache / "ppipe"
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def test_from_a_local_archive_installs_only_the_files_read_and_the_locator_finds_them(cli, tmp_path, isolated):
    assert ppipe_data.locate() is None
    archive = _tar(tmp_path / "ppipe.tar.gz", {**WANTED, **UNWANTED})
    r = cli("data", "fetch", "ppipe", "--from", archive)
    assert r.code == 0, r.err
    assert "installed" in r.out and "verified" in r.out
    assert _installed(isolated) == set(WANTED) | {"SOURCE.txt"}
    assert (isolated / "ppipe" / "models/block-timing-tf32/tiny-net-L4-1.csv").read_bytes() == WANTED[
        "models/block-timing-tf32/tiny-net-L4-1.csv"]
    assert "no licence" in (isolated / "ppipe" / "SOURCE.txt").read_text().lower()
    assert not (tmp_path / "escape").exists()
    assert ppipe_data.locate() == isolated / "ppipe"
    assert ppipe_data.content_digest(isolated / "ppipe") == (_manifest_digest(WANTED), len(WANTED))
    again = cli("data", "fetch", "ppipe", "--from", archive)
    assert again.code == 0 and "already present" in again.out


def test_a_zip_of_the_repository_works_too(cli, tmp_path, isolated):
    archive = tmp_path / "ppipe.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for rel, data in {**WANTED, **UNWANTED}.items():
            zf.writestr(PREFIX + rel, data)
    assert cli("data", "fetch", "ppipe", "--from", archive).code == 0
    assert _installed(isolated) == set(WANTED) | {"SOURCE.txt"}


@pytest.mark.parametrize("change", ["byte", "missing"])
def test_a_tampered_archive_is_refused_and_nothing_is_installed(cli, tmp_path, isolated, change):
    files = dict(WANTED)
    if change == "byte":
        files["models/block-timing-tf32/tiny-net-L4-1.csv"] = b"100,180\n200,391\n"
    else:
        del files["prepartition_mappings/tiny-net/contraction_trans-size_ilpprepart10-0.5-1.5.csv"]
    r = cli("data", "fetch", "ppipe", "--from", _tar(tmp_path / "bad.tar.gz", files))
    assert_user_error(r, "does not hold the pinned PPipe data", "nothing installed", ppipe_data.COMMIT[:7])
    assert not isolated.exists() or list(isolated.iterdir()) == []  # no data, no temp folder
    assert ppipe_data.locate() is None


def test_an_archive_of_something_else_is_one_line(cli, tmp_path, isolated):
    not_ppipe = _tar(tmp_path / "other.tar.gz", {"notes.txt": b"x"})
    assert_user_error(cli("data", "fetch", "ppipe", "--from", not_ppipe), "model_list.txt", "not the PPipe")
    (tmp_path / "plain.txt").write_text("x")
    assert_user_error(cli("data", "fetch", "ppipe", "--from", tmp_path / "plain.txt"), "not a tar or zip")
    assert_user_error(cli("data", "fetch", "ppipe", "--from", tmp_path / "nope.tar.gz"), "no such file")
    assert_user_error(cli("data", "fetch", "maf2019"), "unknown dataset", "traces fetch")
    assert_user_error(cli("data", "fetch", "ppipe", "--url", "not a url"), "--url")
    assert _installed(isolated) == set()


def test_download_is_cached_and_a_wrong_download_is_not_kept(cli, tmp_path, isolated):
    blob = _tar(tmp_path / "a.tar.gz", WANTED).read_bytes()
    with _Server(blob) as srv:
        r = cli("data", "fetch", "ppipe", "--url", srv.url)
        assert r.code == 0, r.err
        assert (isolated / "downloads" / ppipe_data.ARCHIVE).read_bytes() == blob
        again = cli("data", "fetch", "ppipe", "--url", srv.url, "--force")  # reinstalls from the cached archive
        assert again.code == 0 and len(srv.requests) == 1
    assert _installed(isolated) == set(WANTED) | {"SOURCE.txt"}
    bad = dict(WANTED, **{"model_list.txt": b"other-net\n"})
    (isolated / "downloads" / ppipe_data.ARCHIVE).unlink()
    with _Server(_tar(tmp_path / "b.tar.gz", bad).read_bytes()) as srv:
        r = cli("data", "fetch", "ppipe", "--url", srv.url, "--force")
    assert_user_error(r, "does not hold the pinned PPipe data")
    assert not (isolated / "downloads" / ppipe_data.ARCHIVE).exists()
    assert (isolated / "ppipe" / "model_list.txt").read_bytes() == WANTED["model_list.txt"]  # the good copy stays


def test_reproduce_ppipe_without_the_data_names_the_fetch_command(cli, tmp_path, isolated):
    r = cli("reproduce", "ppipe-fig2", "--quick", "-o", tmp_path / "results")
    assert_user_error(r, "shepherd data fetch ppipe", "--from ARCHIVE")
    assert not (tmp_path / "results").exists()  # checked before the results folder is created


def test_the_locator_order(tmp_path, monkeypatch, isolated):
    def folder(name: str) -> Path:
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "model_list.txt").write_text("m\n")
        return tmp_path / name

    cache = isolated / "ppipe"
    cache.mkdir(parents=True)
    (cache / "model_list.txt").write_text("m\n")
    assert ppipe_data.locate() == cache
    beside = folder("no-shared/data/ppipe")
    assert ppipe_data.locate() == beside
    monkeypatch.setenv("SHEPHERD_SHARED", str(tmp_path / "team"))
    assert ppipe_data.locate() == beside  # a shared folder without the data is passed over
    team = folder("team/data/ppipe")
    assert ppipe_data.locate() == team
    monkeypatch.setenv("SHEPHERD_PPIPE_DATA", str(folder("mine")))
    assert ppipe_data.locate() == tmp_path / "mine"


def test_an_explicit_folder_without_the_data_is_named(tmp_path, monkeypatch, isolated):
    monkeypatch.setenv("SHEPHERD_PPIPE_DATA", str(tmp_path))
    with pytest.raises(ppipe_data.UserError, match="SHEPHERD_PPIPE_DATA.*model_list.txt"):
        ppipe_data.require()


@pytest.mark.parametrize("rel, ok", [
    ("model_list.txt", True), ("models/block-timing-tf32/x-L4-1.csv", True),
    ("models/block-timing-tf32/sub/x.csv", False), ("models/model-profile-tf32/x/V100-1/1/x-V100.engine.timing.json", False),
    ("models/model-profile-tf32/../L4-1/1/x-L4.engine.timing.json", False), ("models/shapes/x.json", False),
    ("prepartition_mappings/x/contraction_trans-size_a.csv", True), ("prepartition_mappings/x/contraction_mapping_a.csv", False),
])
def test_wanted_files(rel, ok):
    assert ppipe_data.wanted(rel) is ok


@pytest.mark.skipif(PPIPE_FOUND is None, reason=PPIPE_MISSING)
def test_the_pinned_content_is_the_authors_data(cli, tmp_path, monkeypatch):
    """The real pin: the data this machine has (the team's byte-for-byte copy) hashes to CONTENT_SHA256, and an
    archive of it in the repository's layout installs; one changed byte is refused."""
    assert ppipe_data.content_digest(PPIPE_FOUND) == (ppipe_data.CONTENT_SHA256, ppipe_data.FILE_COUNT)
    files = {rel: (PPIPE_FOUND / rel).read_bytes() for rel, _ in ppipe_data.manifest(PPIPE_FOUND)}
    monkeypatch.setenv("SHEPHERD_DATA", str(tmp_path / "cache"))
    r = cli("data", "fetch", "ppipe", "--from", _tar(tmp_path / "real.tar.gz", files))
    assert r.code == 0, r.err
    assert ppipe_data.content_digest(tmp_path / "cache" / "ppipe")[0] == ppipe_data.CONTENT_SHA256
    rel = next(iter(files))
    files[rel] = files[rel] + b" "
    r = cli("data", "fetch", "ppipe", "--force", "--from", _tar(tmp_path / "tampered.tar.gz", files))
    assert_user_error(r, "does not hold the pinned PPipe data")
