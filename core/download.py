"""Downloading public data: pooch for caching and checksums, a resumable transfer beneath it.

:func:`retrieve` is the one way the toolkit downloads anything (``traces
fetch``, ``data fetch``). `pooch <https://www.fatiando.org/pooch>`_ does the
caching and the SHA-256 check: a file already in the cache with the expected
digest is not downloaded again; a new download lands in a temporary file in
the cache folder and is renamed to its final name only when its digest
matches, so a mismatch keeps nothing. Pooch's own downloaders restart an
interrupted transfer from zero, so :class:`ResumableDownload` (pooch's
downloader interface) keeps a ``NAME.part`` beside the destination and asks
only for the missing tail with an HTTP ``Range`` request on the next call (a
server that ignores Range restarts it from zero). ``file:`` URLs work too (a
local mirror).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from shepherd.core.errors import UserError
from shepherd.core.hashing import is_sha256

Progress = Callable[[int, int | None], None]

URL_SCHEMES = ("http", "https", "ftp", "file")


def user_cache() -> Path:
    """The user's cache folder for this toolkit (``~/.cache/shepherd`` on Linux; platformdirs via pooch)."""
    import pooch  # local: pooch imports requests, slow for commands that never download

    return Path(pooch.os_cache("shepherd"))


def cache_root() -> Path:
    """Where downloaded data goes: ``$SHEPHERD_DATA``, else :func:`user_cache`."""
    env = os.environ.get("SHEPHERD_DATA")
    return Path(env).expanduser() if env else user_cache()


def check_url(url: str, option: str = "--url") -> str:
    """``url`` if it can be fetched: an http(s)/ftp URL with a host, or a ``file:`` URL."""
    text = str(url).strip()
    try:
        text.encode("utf-8")
        parts = urllib.parse.urlsplit(text)
    except (UnicodeEncodeError, ValueError):
        parts = None
    if (parts is None or parts.scheme.lower() not in URL_SCHEMES or " " in text
            or (parts.scheme.lower() != "file" and not parts.netloc)):
        shown = text.encode("utf-8", "backslashreplace").decode("utf-8")
        raise UserError(f"{option} must be an http(s), ftp or file URL such as https://host/path/archive.tar.xz, "
                        f"got '{shown}'")
    return text


class ResumableDownload:
    """A pooch downloader that resumes: ``downloader(url, output_file, pooch)``.

    Bytes go to ``part`` (kept across failed calls); when the transfer is
    complete the part file becomes ``output_file`` (pooch's temporary file, which
    pooch then checks and renames). An interruption raises :class:`UserError`
    saying to run the command again.
    """

    def __init__(self, part: Path, on_progress: Progress | None = None, timeout: float = 60.0,
                 hint: str = "") -> None:
        self.part, self.on_progress, self.timeout, self.hint = Path(part), on_progress, timeout, hint

    def __call__(self, url: str, output_file: str, pooch: object) -> None:  # noqa: ARG002 - pooch's interface
        # local: urllib.request pulls in http, email and ssl (≈ 5 ms), which only a download needs (issue 43)
        import urllib.error
        import urllib.request
        from http.client import HTTPException

        part = self.part
        have = part.stat().st_size if part.exists() else 0
        request = urllib.request.Request(url, headers={"User-Agent": "shepherd"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        total: int | None = None
        try:
            try:
                response = urllib.request.urlopen(request, timeout=self.timeout)  # noqa: S310 - user-chosen URL
            except urllib.error.HTTPError as exc:
                if exc.code == 416 and have:  # nothing left to fetch: the part is whole
                    os.replace(part, output_file)
                    return
                raise
            with response:
                length = response.headers.get("Content-Length")
                if getattr(response, "status", 200) == 206:
                    mode, total = "ab", (have + int(length) if length else None)
                else:
                    mode, have, total = "wb", 0, (int(length) if length else None)
                with open(part, mode) as fh:
                    while block := response.read(1 << 16):
                        fh.write(block)
                        have += len(block)
                        if self.on_progress:
                            self.on_progress(have, total)
        except (urllib.error.URLError, HTTPException, OSError, TimeoutError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise UserError(f"download of {url} interrupted after {have:,} bytes ({reason}); run the "
                            f"same command again to resume{self.hint}") from None
        if total is not None and have < total:
            raise UserError(f"download of {url} interrupted after {have:,} of {total:,} bytes; run the "
                            f"same command again to resume{self.hint}")
        os.replace(part, output_file)


@contextmanager
def _quiet_pooch() -> Iterator[None]:
    """Pooch logs each download at INFO on stderr; the CLI draws its own progress bar."""
    import pooch

    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


class ChecksumMismatch(UserError):
    """The downloaded file's SHA-256 is not the expected one (the file was not kept)."""


def retrieve(url: str, dest: Path, sha256: str | None = None, on_progress: Progress | None = None,
             hint: str = "") -> Path:
    """``dest``, downloaded from ``url`` unless already there with digest ``sha256``.

    ``sha256`` None accepts any file already at ``dest`` (a digest learnt
    later is the caller's to check). A mismatch raises :class:`ChecksumMismatch`
    with nothing kept; an interrupted download keeps ``dest.part`` for the next call.
    ``hint`` is appended to the error messages (what else the user can do).
    """
    import pooch

    url = check_url(url)
    if sha256 is not None and not is_sha256(sha256):
        raise UserError(f"--sha256 must be 64 hexadecimal digits, got '{sha256}'")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    downloader = ResumableDownload(dest.with_name(dest.name + ".part"), on_progress, hint=hint)
    try:
        with _quiet_pooch():
            return Path(pooch.retrieve(url, known_hash=sha256.lower() if sha256 else None, fname=dest.name,
                                       path=dest.parent, downloader=downloader))
    except ValueError as exc:  # pooch: "SHA256 hash of downloaded file (…) does not match the known hash"
        if "hash" not in str(exc).lower():
            raise
        words = [w.strip("().,") for w in str(exc).split()]
        got = next((w for w in reversed(words) if is_sha256(w)), "another digest")  # "expected X but got Y"
        raise ChecksumMismatch(f"checksum mismatch for {dest.name}: expected SHA-256 {sha256}, got {got}; "
                               f"the download was deleted (nothing kept){hint}") from None
