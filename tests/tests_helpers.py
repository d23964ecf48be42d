"""Helpers for tests (not collected: no ``test_`` prefix)."""

from __future__ import annotations

import typer


def command_paths(app: typer.Typer) -> list[tuple[str, ...]]:
    """Every command path of the Typer app, e.g. ("traces", "generate")."""
    root = typer.main.get_command(app)
    paths: list[tuple[str, ...]] = []

    def walk(cmd, prefix: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if prefix:
            paths.append(prefix)
        for name, sub in sorted((subs or {}).items()):
            walk(sub, prefix + (name,))

    walk(root, ())
    return paths
