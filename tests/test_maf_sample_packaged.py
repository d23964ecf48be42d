"""The packaged real MAF 2019 sample (issue 16): loads as a real, labelled subset; its
attribution and licence travel with it as package data."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from shepherd.core.errors import UserError
from shepherd.traces import registry
from shepherd.traces.resolve import load_trace

ROOT = Path(registry.__file__).resolve().parents[1]


def test_sample_is_real_and_labelled_a_subset():
    t = load_trace("maf2019-sample", duration_min=2, seed=0, slo_ms=250)
    assert not t.synthetic and t.frame.height > 1000
    built = registry.build("maf2019-sample-bursty", duration_min=1, seed=0)
    assert built.config["real"] and "500 functions" in built.config["subset"]
    with pytest.raises(UserError, match="480…959"):
        registry.build("maf2019-sample", start_minute=900, duration_min=120)


def test_sample_files_are_package_data():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["shepherd.traces"]
    files = [p.relative_to(ROOT / "traces").as_posix() for p in registry.SAMPLE_DIR.iterdir()]
    assert {"data/maf2019_sample/LICENSE", "data/maf2019_sample/README.md"} <= set(files)
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f
    assert registry.SAMPLE_FILE.stat().st_size < 1_000_000
