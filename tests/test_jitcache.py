"""The fast kernels' on-disk JIT cache follows the helpers they inline (core/engine/fast/jitcache.py).

numba keys a cached function by its own file only; a kernel that inlines a helper from another module would
keep the old machine code after that helper changes. The control kernel below (no refresh) shows the stale
cache is real; the refreshed one recompiles.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    for name in ("common", "clockwork", "flex", "symphony", "nexus"):
        assert "jitcache.refresh(__name__" in (fast / f"{name}.py").read_text(), name
