"""The fast kernels' on-disk JIT cache follows the helpers they inline (core/engine/fast/jitcache.py).

numba keys a cached function by its own file only; a kernel that inlines a helper from another module would
keep the old machine code after that helper changes. The control kernel below (no refresh) shows the stale
cache is real; the refreshed one recompiles.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import shepherd

DEP = textwrap.dedent("""
    from numba import njit

    @njit(inline='always')
    def helper(x):
        return x + {inc}
""")

KERNEL = textwrap.dedent("""
    from numba import njit
    from pkgx import dep

    @njit(cache=True)
    def kernel(x):
        return dep.helper(x)
""")


def _run(root: Path, module: str) -> int:
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(Path(shepherd.__file__).parent.parent)])
    out = subprocess.run([sys.executable, "-c", f"import pkgx.{module} as m; print(m.kernel(1))"],
                         cwd=root, env=env, capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def test_a_kernel_recompiles_when_a_helper_it_inlines_changes(tmp_path):
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dep.py").write_text(DEP.format(inc=1))
    (pkg / "stale.py").write_text(KERNEL)
    (pkg / "fresh.py").write_text(KERNEL + "\nfrom shepherd.core.engine.fast import jitcache\n"
                                  "jitcache.refresh(__name__, dep)\n")
    assert _run(tmp_path, "stale") == 2 and _run(tmp_path, "fresh") == 2
    (pkg / "dep.py").write_text(DEP.format(inc=20))
    assert _run(tmp_path, "stale") == 2, "numba's cache did not go stale: the control no longer shows the problem"
    assert _run(tmp_path, "fresh") == 21
    assert _run(tmp_path, "fresh") == 21  # and the new code is what gets cached


def test_every_kernel_module_refreshes_its_cache():
    fast = Path(shepherd.__file__).parent / "core" / "engine" / "fast"
    for name in ("common", "clockwork", "flex", "symphony", "nexus", "ppipe"):
        assert "jitcache.refresh(__name__" in (fast / f"{name}.py").read_text(), name


def test_what_a_kernel_inlines_from_is_read_from_its_code():
    """The modules keying a kernel module's cache are derived from its imports, directly or through them (common
    imports outcomes): none kept by hand, none missed."""
    import importlib

    from shepherd.core.engine.fast import jitcache

    root = Path(shepherd.__file__).parent / "core"

    def deps(name):
        files = jitcache.inlined_from(importlib.import_module(f"shepherd.core.engine.fast.{name}"))
        return {Path(f).relative_to(root).with_suffix("").as_posix() for f in files}

    assert {"engine/fast/common", "engine/outcomes", "rules/flex"} <= deps("flex")
    assert {"engine/fast/common", "engine/fast/timers", "engine/outcomes"} <= deps("nexus")
    assert deps("common") == {"engine/outcomes", "rules/latency"}  # the table search it compiles (overload)
    assert not any("jitcache" in d or "__init__" in d for d in deps("flex") | deps("ppipe"))


ANNOUNCED = textwrap.dedent("""
    import sys, time
    from numba import njit
    from pkgx import dep

    @njit(cache=True)
    def kernel(x):
        return dep.helper(x)

    from shepherd.core.engine.fast import jitcache
    jitcache.refresh(__name__, dep)
""")

CALL = ("import sys, pkgx.family as m; print(m.kernel(1)); "
        "print('misses', sum(m.kernel.stats.cache_misses.values()))")


def _spawn(root: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("SHEPHERD_QUIET_COMPILE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(Path(shepherd.__file__).parent.parent)])
    return subprocess.Popen([sys.executable, "-c", CALL], cwd=root, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_a_first_compile_is_announced_once_and_done_by_one_of_two_processes(tmp_path):
    """Two processes start at once on a cold cache: one compiles (and says so in one line), the other waits for
    the family's file lock and loads the machine code from the cache; a third, later, compiles nothing."""
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dep.py").write_text(DEP.format(inc=1))
    (pkg / "family.py").write_text(ANNOUNCED)
    runs = [_spawn(tmp_path), _spawn(tmp_path)]
    outs = [p.communicate(timeout=300) for p in runs]
    assert all(p.returncode == 0 for p in runs), outs
    misses = sorted(int(out.split("misses")[1]) for out, _ in outs)
    assert misses == [0, 1]  # one compiled, the other loaded what it cached
    said = [err.strip().splitlines() for _, err in outs if err.strip()]
    assert len(said) == 1 and len(said[0]) == 2, said  # one process: a start line and a done line
    start, done = said[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ compiling the family kernel \(once per machine, "
                        r"then cached on disk\) …", start), start
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ compiled the family kernel in \d+\.\d s", done), done
    out, err = _spawn(tmp_path).communicate(timeout=300)
    assert "misses 0" in out and err.strip() == ""


OTHER = textwrap.dedent("""
    from numba import njit

    @njit(cache=True)
    def helper_kernel(x):
        return x * 2

    from shepherd.core.engine.fast import jitcache
    jitcache.refresh(__name__)
""")

IN_RUN = ("import pkgx.family as m, pkgx.other as o\n"
          "from shepherd.core.engine.fast import jitcache\n"
          "with jitcache.kernel_run('pkgx.family'):\n"
          "    print(m.kernel(1) + o.helper_kernel(1))\n"
          "print(sorted(jitcache.COMPILED_S))")


def test_compiles_inside_a_kernel_run_are_announced_once_as_the_run_s_family(tmp_path):
    """What compiles during a kernel's run — its own functions and another module's (common.py's helpers) —
    is one family's compile: one start line, one done line, named after the run's kernel (issue 43)."""
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dep.py").write_text(DEP.format(inc=1))
    (pkg / "family.py").write_text(ANNOUNCED)
    (pkg / "other.py").write_text(OTHER)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "SHEPHERD_QUIET_COMPILE")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path(shepherd.__file__).parent.parent)])
    run = subprocess.run([sys.executable, "-c", IN_RUN], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["4", "['family']"]
    lines = run.stderr.strip().splitlines()
    assert [line.split(" ", 1)[1].split(" in ")[0] for line in lines] == [
        "compiling the family kernel (once per machine, then cached on disk) …", "compiled the family kernel"], lines


def test_a_compiling_run_of_one_chunk_also_compiles_what_longer_runs_call(monkeypatch):
    """``oldest`` runs only between chunks: a first run of one chunk that compiles its family calls it once at
    the end, so a later run of many chunks loads it rather than compiling it (a second 'compiling the flex
    kernel' line in one reproduce, issue 43); a run that compiled nothing does not call it."""
    from shepherd import api
    from shepherd.core.engine import EngineConfig
    from shepherd.core.engine.fast import jitcache, stream
    from shepherd.core.engine.verify import comparing

    calls = []
    real = stream.oldest
    monkeypatch.setattr(stream, "oldest", lambda *a: calls.append(1) or real(*a))
    trace = api.load_trace("maf-synthetic", seed=0, duration_min=1, synthetic_rate=20.0)
    # a replaced name of a verified module sends the run to the reference engine (issue 42's edit safety); the
    # spy changes nothing the kernel computes, so the kernel runs as in a comparison
    with comparing():
        for compiling, want in ((False, 0), (True, 1)):
            calls.clear()
            monkeypatch.setattr(jitcache, "compiling", lambda c=compiling: c)
            api.simulate(trace, policy="flex", gpus=2, engine=EngineConfig(path="fast", record="summary"))
            assert len(calls) == want
        calls.clear()  # several chunks: called between them, as before, whatever was compiled
        api.simulate(trace, policy="flex", gpus=2, engine=EngineConfig(path="fast", record="summary",
                                                                        stream_chunk=200))
        assert len(calls) >= 1


LOADED = ("import sys, numpy as np, pkgx.family as m\n"
          "print(m.kernel(1))\n"
          "print('misses', sum(m.kernel.stats.cache_misses.values()))\n"
          "print('refreshed', 'numba.np.arraymath' in sys.modules or 'numba.cpython.unicode' in sys.modules)\n"
          "from numba import njit\n"
          "@njit\n"
          "def total(a):\n"
          "    return np.sum(a)\n"
          "print(total(np.arange(4)))\n")


def test_a_cache_load_skips_numba_s_context_refresh_and_a_later_compile_still_works(tmp_path):
    """A kernel loaded from the cache links its machine code without numba's refresh of the typing and target
    contexts (the lowering registries, ~0.15 CPU-s of imports; issue 43): after the load none of those modules
    is imported, and a compile afterwards in the same process — here of ``np.sum``, whose lowering only that
    refresh installs — still finds what it needs (numba refreshes at every compile)."""
    pkg = tmp_path / "pkgx"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "dep.py").write_text(DEP.format(inc=1))
    (pkg / "family.py").write_text(ANNOUNCED)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR",)}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(Path(shepherd.__file__).parent.parent)])
    runs = [subprocess.run([sys.executable, "-c", LOADED], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    first, second = (r.stdout.split() for r in runs)
    assert first[:3] == ["2", "misses", "1"] and first[-1] == "6"  # compiled: the refresh ran with the compile
    assert second == ["2", "misses", "0", "refreshed", "False", "6"], second


NUMBA_YAML = ("import sys, shepherd.core.engine.fast.stream\n"
              "from numba.core import config\n"
              "print('yaml' in sys.modules, config._HAVE_YAML, config.BOUNDSCHECK)\n"
              "import yaml\n"
              "print(yaml.safe_load('a: 1'))\n")


@pytest.mark.parametrize("config_file", [False, True])
def test_numba_is_imported_without_yaml_unless_its_config_file_is_there(tmp_path, config_file):
    """The fast wing imports numba without PyYAML (issue 43) only where numba would not use it: with no
    ``.numba_config.yaml`` in the working directory yaml stays unimported (and importable afterwards); with
    one, numba reads it (here ``BOUNDSCHECK: 1``), exactly as without shepherd."""
    if config_file:
        (tmp_path / ".numba_config.yaml").write_text("BOUNDSCHECK: 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    env["PYTHONPATH"] = str(Path(shepherd.__file__).parent.parent)
    run = subprocess.run([sys.executable, "-c", NUMBA_YAML], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    first, second = run.stdout.splitlines()
    assert first == ("True True 1" if config_file else "False False None")
    assert second == "{'a': 1}"
