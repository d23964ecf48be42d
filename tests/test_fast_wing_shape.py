"""The fast wing's shape (issue 30's acceptance, held by a test so that it stays held): ``core/engine/fast``
names no policy and imports none, the reference engine runs without it (and without numba), and the wing
stays small — no larger than :data:`LINE_BUDGET` lines, no function over 80 lines or 12 parameters.

The budget is 2,800 lines (issues 30 and 42); plumbing that is no kernel lives outside the wing (the chunked
window's reused memory in ``core/engine/column_room.py``, the cache loader in ``core/jit_load.py``). A kernel still
re-typing a policy's rule is what the budget is there to stop: the rules are written once in ``core/rules/``
and compiled by the kernels (tests/test_rules_written_once.py)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAST = ROOT / "core" / "engine" / "fast"
ENGINE = ROOT / "core" / "engine"


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.py"))


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """The modules ``path`` imports (``from a.b import c`` → ``a.b`` and ``a.b.c``), at its top level or anywhere."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _in_fast_wing(module: str) -> bool:
    return module == "shepherd.core.engine.fast" or module.startswith("shepherd.core.engine.fast.")


def test_the_fast_wing_names_no_policy():
    hits = [f"{p.name}:{n + 1}" for p in _modules(FAST) for n, line in enumerate(p.read_text().splitlines())
            if re.search(r"policy ?(==|in) ", line)]
    assert not hits, f"the fast wing dispatches on a policy's name: {hits}"


def test_the_fast_wing_imports_no_policy():
    bad = {p.name: sorted(m for m in _imports(p, top_level_only=False) if m.startswith("shepherd.core.policies"))
           for p in _modules(FAST)}
    assert not {k: v for k, v in bad.items() if v}


def test_no_reference_engine_module_imports_the_fast_wing_at_import():
    bad = {p.name: sorted(m for m in _imports(p, top_level_only=True) if _in_fast_wing(m)) for p in _modules(ENGINE)}
    assert not {k: v for k, v in bad.items() if v}


def test_a_reference_run_loads_neither_the_fast_wing_nor_numba():
    code = textwrap.dedent("""
        import sys
        import numpy as np
        import polars as pl
        from shepherd.core.engine import EngineConfig, simulate
        from shepherd.core.profiles import load_builtin
        t = np.arange(0, 200_000, 500, dtype=np.int64)
        trace = pl.DataFrame({"arrival_us": t, "stream": np.zeros(len(t), np.int32), "model": ["ResNet50"] * len(t),
                              "slo_us": np.full(len(t), 100_000, np.int64), "deadline_us": t + 100_000})
        res = simulate(trace, load_builtin("shepherd-v100"), "flex", gpus=2, seed=0,
                       engine=EngineConfig(path="reference"))
        assert int(res.summary_frame()["good"][0]) > 0
        fast = "shepherd.core.engine.fast"
        loaded = sorted(m for m in sys.modules if m == "numba" or m == fast or m.startswith(fast + "."))
        print(",".join(loaded))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"a reference run loaded {out.stdout.strip()}"


LINE_BUDGET = 2800


def test_the_fast_wing_is_no_larger_than_its_budget():
    lines = sum(len(p.read_text().splitlines()) for p in _modules(FAST))
    assert lines <= LINE_BUDGET, f"core/engine/fast is {lines} lines (at most {LINE_BUDGET:,}: module docstring)"


def test_no_function_of_the_fast_wing_is_over_80_lines_or_12_parameters():
    big = []
    for p in _modules(FAST):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n_args = len(node.args.args) + len(node.args.kwonlyargs) + len(node.args.posonlyargs)
                length = node.end_lineno - node.lineno + 1
                if length > 80 or n_args > 12:
                    big.append(f"{p.name}:{node.name} ({length} lines, {n_args} parameters)")
    assert not big, big
