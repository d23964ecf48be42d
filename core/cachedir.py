"""The user's cache folder for what the toolkit keeps between runs to save time, found without importing
anything heavy (:func:`shepherd.core.download.user_cache` asks pooch, which imports ``requests``: 0.1 s a
command): ``$XDG_CACHE_HOME/shepherd`` (``~/.cache/shepherd``) on Linux — the folder pooch names there —,
pooch's platform folder elsewhere. Nothing kept here changes a result; each user says what it keeps."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/shepherd``, else ``~/.cache/shepherd`` (Linux); pooch's user cache elsewhere."""
    if sys.platform.startswith("linux"):
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        return (Path(base) if base else Path.home() / ".cache") / "shepherd"
    from shepherd.core.download import user_cache

    return user_cache()
