"""The package's layers (issue 42 item 6): ``core/`` imports nothing from ``experiments/`` or ``solvers/`` —
not at the top of a module, nor inside a function — and ``experiments/`` imports nothing from ``cli/`` (no
circle such as ``cli/validate.py`` ↔ ``experiments/validate.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(folder: str) -> dict[str, set[str]]:
    """Per file under ``folder``, every module it imports anywhere (``from a import b`` → ``a`` and ``a.b``)."""
    out = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        out[path.relative_to(ROOT).as_posix()] = found
    return out


def _up(folder: str, above: tuple[str, ...]) -> dict[str, list[str]]:
    return {f: sorted(m for m in mods if m.startswith(above)) for f, mods in _imports(folder).items()
            if any(m.startswith(above) for m in mods)}


def test_core_imports_nothing_from_experiments_or_solvers():
    assert _imports("core")  # the walk found the package
    assert _up("core", ("shepherd.experiments", "shepherd.solvers")) == {}


def test_experiments_import_nothing_from_the_cli():
    assert _up("experiments", ("shepherd.cli",)) == {}
