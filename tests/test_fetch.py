"""`shepherd traces fetch/import` end to end against a local HTTP server on 127.0.0.1 (never the network)."""

from __future__ import annotations

import os
import hashlib
import io
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from conftest import assert_user_error
from maf_helpers import write_maf2019, write_maf2021
from shepherd.traces import fetch
from shepherd.traces.resolve import load_trace

DAY1 = "invocations_per_function_md.anon.d01.csv"


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("SHEPHERD_DATA", str(root))
    return root


def _archive(tmp_path: Path) -> bytes:
    """A small tar.xz in the real archive's layout: one MAF 2019 day file (plus noise to make it long)."""
    rng = np.random.default_rng(0)
    day = write_maf2019(tmp_path / "src" / DAY1, rng.integers(0, 1000, size=(40, 1440)))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        tar.add(day, arcname=DAY1)
    return buf.getvalue()


class _Server:
    """Serves one blob at /a.tar.xz with Range support; can cut the first response short."""

    def __init__(self, blob: bytes, cut_first: bool = False):
        self.blob, self.cut_first, self.requests = blob, cut_first, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):  # noqa: N802 - http.server API
                rng = self.headers.get("Range")
                outer.requests.append(rng)
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                body = outer.blob[start:]
                self.send_response(206 if rng else 200)
                if rng:
                    self.send_header("Content-Range", f"bytes {start}-{len(outer.blob) - 1}/{len(outer.blob)}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if outer.cut_first and len(outer.requests) == 1:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/a.tar.xz"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_fetch_success_verifies_extracts_and_registers(cli, tmp_path, data_dir):
    blob = _archive(tmp_path)
    digest = hashlib.sha256(blob).hexdigest()
    with _Server(blob) as srv:
        result = cli("traces", "fetch", "maf2019", "--url", srv.url, "--sha256", digest)
    assert result.code == 0, result.err
    assert "verified" in result.out
    path = fetch.dataset_path("maf2019")
    assert (path / DAY1).exists()
    assert fetch.read_registry()["maf2019"]["sha256"] == digest
    trace = load_trace("maf2019", duration_min=2, streams=5)
    assert trace.frame.height > 0 and trace.inputs[0].name == DAY1 and not trace.synthetic
    # A second fetch finds it present and downloads nothing.
    again = cli("traces", "fetch", "maf2019", "--url", "http://127.0.0.1:9/unused")
    assert again.code == 0 and "already present" in again.out


def test_pinned_checksum_mismatch_leaves_nothing(cli, tmp_path, data_dir):
    """maf2019 carries a pinned SHA-256: the test archive does not match it → exit 2, nothing kept."""
    with _Server(_archive(tmp_path)) as srv:
        result = cli("traces", "fetch", "maf2019", "--url", srv.url)
    assert_user_error(result, "checksum mismatch", "nothing kept", "traces import")
    assert _files(data_dir) == []
    assert_user_error(cli("traces", "maf", "maf2019", "-o", tmp_path / "t.parquet"),
                      "shepherd traces fetch maf2019", "import")
    assert not (tmp_path / "t.parquet").exists()


def test_explicit_checksum_mismatch(cli, tmp_path, data_dir):
    with _Server(_archive(tmp_path)) as srv:
        result = cli("traces", "fetch", "maf2019", "--url", srv.url, "--sha256", "0" * 64)
    assert_user_error(result, "checksum mismatch")
    assert _files(data_dir) == []


def test_interrupted_download_resumes_with_range(cli, tmp_path, data_dir):
    blob = _archive(tmp_path)
    digest = hashlib.sha256(blob).hexdigest()
    with _Server(blob, cut_first=True) as srv:
        first = cli("traces", "fetch", "maf2019", "--url", srv.url, "--sha256", digest)
        assert_user_error(first, "interrupted", "run the same command again to resume")
        parts = list((data_dir / "downloads").glob("*.part"))
        assert len(parts) == 1 and 0 < parts[0].stat().st_size < len(blob)
        assert "maf2019" not in fetch.read_registry() and not (data_dir / "maf2019").exists()
        second = cli("traces", "fetch", "maf2019", "--url", srv.url, "--sha256", digest)
    assert second.code == 0, second.err
    # The retry asked only for the missing tail.
    assert srv.requests == [None, f"bytes={len(blob) // 2}-"]
    assert (fetch.dataset_path("maf2019") / DAY1).exists()


def test_unpinned_dataset_records_its_first_checksum(tmp_path, data_dir):
    """maf2021 has no known digest: the first download's is recorded (and reported as not verified)."""
    txt = write_maf2021(tmp_path / "src" / "AzureFunctionsInvocationTraceForTwoWeeksJan2021.txt",
                        [("a", "f", 5.0, 1.0), ("a", "f", 7.0, 0.5), ("b", "g", 9.0, 0.25)])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        tar.add(txt, arcname=txt.name)
    with _Server(buf.getvalue()) as srv:
        result = fetch.fetch("maf2021", url=srv.url)
    assert result.checksum == "recorded (not verified)"
    assert fetch.read_registry()["maf2021"]["sha256"] == hashlib.sha256(buf.getvalue()).hexdigest()
    trace = load_trace("maf2021", duration_min=1, models=("M",))
    assert trace.frame["arrival_us"].to_list() == [4_000_000, 6_500_000, 8_750_000]


def test_import_directory_then_resolve(cli, tmp_path, data_dir):
    src = tmp_path / "mine"
    write_maf2019(src / DAY1, np.full((3, 1440), 2))
    result = cli("traces", "import", src)
    assert result.code == 0, result.err
    assert fetch.read_registry()["maf2019"]["how"] == "imported"
    assert load_trace("maf2019", duration_min=1).frame.height == 6
    listing = cli("traces", "list")
    assert listing.code == 0 and "imported" in listing.out


def test_import_bad_header_writes_nothing(cli, tmp_path, data_dir):
    src = tmp_path / "mine"
    src.mkdir()
    (src / DAY1).write_text("Owner,App,Function,Trigger,1\na,b,c,http,1\n")
    assert_user_error(cli("traces", "import", src), "wrong header")
    assert _files(data_dir) == []


def test_import_missing_path(cli, tmp_path, data_dir):
    assert_user_error(cli("traces", "import", tmp_path / "nope"), "does not exist")
    assert _files(data_dir) == []


def test_registry_and_fetched_data_get_the_umasks_permissions(cli, tmp_path, data_dir):
    blob = _archive(tmp_path)
    old = os.umask(0o022)
    try:
        with _Server(blob) as srv:
            result = cli("traces", "fetch", "maf2019", "--url", srv.url, "--sha256", hashlib.sha256(blob).hexdigest())
    finally:
        os.umask(old)
    assert result.code == 0, result.err
    registry = data_dir / "registry.json"
    assert registry.exists()
    assert registry.stat().st_mode & 0o777 == 0o644
    assert (data_dir / "maf2019").stat().st_mode & 0o777 == 0o755
