"""Edit safety of the fast paths (core/engine/fastpath.py, issue 30 item 3): a policy whose source changed
since its fast path was verified runs on the reference engine under ``--engine auto``, with one line on
stderr saying why, and ``--engine fast`` refuses with the same reason (exit 2).

The edit is made in a temporary copy of the package, run in a fresh interpreter, so the checkout is not
touched; the runs there take the reference engine or stop before any kernel, so nothing compiles."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from shepherd.core.artifacts import make_provenance, write_artifact
from shepherd.core.engine import fastpath
from shepherd.core.policies import registry
from shepherd.traces.arrivals import poisson
from shepherd.traces.synthetic import assemble

ROOT = Path(fastpath.__file__).resolve().parents[2]  # the package (the repository root: flat layout)
CLI = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """The package copied (sources only) under ``<tmp>/shepherd``; returns ``<tmp>``."""
    top = tmp_path_factory.mktemp("pkg")
    shutil.copytree(ROOT, top / "shepherd", ignore=shutil.ignore_patterns(
        ".git", "tests", "docs", "results", "examples", "benchmarks", "__pycache__", "*.parquet", ".venv*"))
    return top


def _run(top: Path, *args: str, code: str = CLI) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(top))
    return subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True,
                          cwd=top, timeout=300)


def _trace(path: Path) -> None:
    rng = np.random.default_rng(5)
    trace = assemble([poisson(rng, 300.0, 200_000) for _ in range(2)], ["ResNet50", "ResNet18"], [40_000, 90_000])
    write_artifact(trace, path, "trace", make_provenance())


def test_the_verified_source_is_the_policy_module_and_what_it_imports():
    src = fastpath.sources(registry.get("flex").cls)
    assert "core/policies/flex.py" in src and "core/policies/queues.py" in src and "core/engine/actions.py" in src
    assert not any(p.startswith("core/engine/fast/") or p.endswith(("registry.py", "fastpath.py")) for p in src)
    assert all(len(h) == 64 for h in src.values())


def test_a_policy_edited_after_verification_runs_on_the_reference_engine(copy, tmp_path):
    probe = ("from shepherd.core.engine import fastpath; from shepherd.core.policies import registry; "
             "import shepherd.core.policies; c = registry.get('flex').cls; ")
    rec = _run(copy, code=probe + "fastpath.record('flex', c); print(fastpath.stale('flex', c))")
    assert rec.returncode == 0 and rec.stdout.strip() == "None", rec.stderr  # verified as it is
    path = copy / "shepherd" / "core" / "policies" / "flex.py"
    path.write_text(path.read_text() + "\n# a contributor's edit\n")
    why = _run(copy, code=probe + "print(fastpath.stale('flex', c))").stdout.strip()
    assert why.startswith("core/policies/flex.py changed since the fast path of 'flex' was verified"), why

    _trace(tmp_path / "t.parquet")
    outs = {}
    for engine in ("auto", "reference"):
        r = _run(copy, "simulate", "--policy", "flex", "--trace", str(tmp_path / "t.parquet"), "--gpus", "2",
                 "--engine", engine, "-o", str(tmp_path / engine))
        assert r.returncode == 0, r.stderr
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        if engine == "auto":  # one line, naming the reason and what runs instead
            assert len(lines) == 1 and lines[0] == f"note: {why}; --engine auto runs the reference engine", lines
        else:
            assert not lines, lines
        outs[engine] = {p.name: pl.read_parquet(p) for p in sorted((tmp_path / engine).glob("*.parquet"))}
    assert outs["auto"].keys() == outs["reference"].keys() and len(outs["auto"]) >= 3
    for name, frame in outs["auto"].items():
        assert frame.equals(outs["reference"][name]), name

    r = _run(copy, "simulate", "--policy", "flex", "--trace", str(tmp_path / "t.parquet"), "--gpus", "2",
             "--engine", "fast", "-o", str(tmp_path / "fast"))
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and lines == [f"error: {why}"], (r.returncode, r.stderr)
    assert not (tmp_path / "fast").exists()


def test_a_policy_never_verified_is_refused_by_fast(copy, tmp_path):
    """A fast path without a record (a new policy's, or a deleted record) is not trusted either."""
    (copy / "shepherd" / "core" / "policies" / "symphony.verified.json").unlink(missing_ok=True)
    code = ("from shepherd.core.engine import fastpath; from shepherd.core.policies import registry; "
            "import shepherd.core.policies; print(fastpath.stale('symphony', registry.get('symphony').cls))")
    why = _run(copy, code=code).stdout.strip()
    assert why.startswith("the fast path of 'symphony' was never verified"), why


THIRD_PARTY = '''
from shepherd.core.engine.fastpath import FastPath, modelled
from shepherd.core.policies.base import Policy


class Mine(Policy):
    """A third party's policy with a fast path of its own."""

    fast_path = FastPath("engine", "mykernels", covers="overhead model|none (mine)",
                         covered=lambda cfg, shape: modelled(shape))
'''


def test_a_third_party_fast_path_is_declared_and_verified_beside_its_policy(tmp_path, monkeypatch):
    """A policy outside the package declares its fast path the same way; its record sits beside its module,
    and the choice follows the declaration: covered or not, verified or not."""
    from shepherd.core.engine import EngineConfig, OverheadConfig
    from shepherd.core.errors import UserError

    (tmp_path / "mypolicy.py").write_text(THIRD_PARTY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import mypolicy

    cls = mypolicy.Mine
    shape = fastpath.Shape(OverheadConfig(), [0, 0], [[0, 1]], EngineConfig())
    with pytest.raises(UserError, match="never verified"):
        fastpath.choose("mine", cls, None, shape, "fast")
    assert fastpath.record("mine", cls) == tmp_path / "mypolicy.verified.json"
    assert set(fastpath.sources(cls)) == {"mypolicy.py", "core/policies/base.py"}  # its own, and shepherd's it uses
    assert fastpath.choose("mine", cls, None, shape, "fast") is cls.fast_path
    emulated = fastpath.Shape(OverheadConfig(mode="emulation"), [0, 0], [[0, 1]], EngineConfig())
    assert fastpath.choose("mine", cls, None, emulated, "auto") is None
    with pytest.raises(UserError, match=r"covers overhead model\|none \(mine\); use --engine reference"):
        fastpath.choose("mine", cls, None, emulated, "fast")
    with pytest.raises(UserError, match="'reactive' has no fast path .*: clockwork, flex, flex-np, nexus, ppipe"):
        fastpath.choose("reactive", registry.get("reactive").cls, None, shape, "fast")
    with pytest.raises(ValueError, match="mode"):
        fastpath.FastPath("sideways", "x", covers="")
