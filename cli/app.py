"""The ``shepherd`` entry point: the Typer app and its error contract.

User errors (:class:`UserError`, bad option values) print one line
``error: …`` on stderr and exit 2; ``--verbose`` anywhere on the command line
shows the traceback instead.

Start-up stays light: importing this module (what ``--version``, ``--help``
and every TAB of shell completion pay) loads typer and rich only; each command
imports the engine, polars, numba, python-mip or seaborn inside its function
(``tests/test_startup.py``, ``benchmarks/startup_speed.py``).
"""

from __future__ import annotations

import functools
import sys
import traceback
from typing import Annotated, Sequence

import typer

from shepherd import __version__
from shepherd.core.errors import UserError, environment_error

#: every command, in the order ``--help`` lists them: (name, its module in ``shepherd.cli``, the function or
#: sub-app there, the module attribute holding its help text or None). A run imports only its own command's
#: module (:func:`_app_for`); ``--help``, completion and an unknown name build the whole app (:data:`app`).
COMMANDS: tuple[tuple[str, str, str, str | None], ...] = (
    ("profile", "profile", "app", None),
    ("traces", "traces", "app", None),
    ("plan", "plan", "plan", None),
    ("plan-import", "plan", "plan_import", None),  # `plan import` once `plan` is a group (issue 13)
    ("simulate", "simulate", "simulate", None),
    ("reproduce", "reproduce", "reproduce", None),
    ("report", "reproduce", "report_cmd", None),
    ("sweep", "sweep", "sweep", None),
    ("capacity", "capacity", "capacity", None),
    ("runs", "runs", "app", None),
    ("data", "data", "app", None),
    ("warmup", "warmup", "warmup", None),
    ("verify", "verify", "verify", None),
    ("validate", "validate", "validate", "HELP"),  # heavy imports inside the command
    ("calibrate", "calibrate", "calibrate", "HELP"),
)


def _root_app() -> typer.Typer:
    """The ``shepherd`` app with its settings and root options, no command yet."""
    root = typer.Typer(
        name="shepherd",
        help=(
            "Trace-driven experiments on DNN inference serving: Shepherd, PPipe, Symphony and "
            "Accordion on one engine.\n\n"
            "Stages pass Parquet artifacts: profile → traces → plan → simulate → report.\n\n"
            "Example: shepherd profile --table shepherd-v100 -o profiles.parquet"
        ),
        no_args_is_help=True,
        add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
    )
    root.callback()(_root)
    return root


def _add(root: typer.Typer, name: str, module: str, attr: str, help_attr: str | None) -> None:
    """Register command ``name`` (importing its module) on ``root``."""
    import importlib

    mod = importlib.import_module(f"shepherd.cli.{module}")
    target = getattr(mod, attr)
    if isinstance(target, typer.Typer):
        root.add_typer(target, name=name)
    else:
        root.command(name, help=getattr(mod, help_attr) if help_attr else None)(target)


def _print_version(value: bool) -> None:
    # Eager: runs while the options are parsed, before click asks for a command.
    if value:
        typer.echo(f"shepherd {__version__}")
        raise typer.Exit(0)


def _root(
    verbose: Annotated[bool, typer.Option("--verbose", help="Show tracebacks for errors.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Options before the command apply to every command."""


@functools.cache
def _whole_app() -> typer.Typer:
    """The app with every command (built once, on first use)."""
    root = _root_app()
    for entry in COMMANDS:
        _add(root, *entry)
    return root


def __getattr__(name: str) -> typer.Typer:
    # ``from shepherd.cli.app import app``: the whole app, built when first asked for (PEP 562)
    if name == "app":
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns (and exits with) the process exit code."""
    if argv is None:  # the shepherd process itself (not a caller's, e.g. a test's): fewer, larger collections
        _collect_less()
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in args
    args = [a for a in args if a != "--verbose"]
    command = typer.main.get_command(_app_for(args))
    try:
        code = command.main(args=args, prog_name="shepherd", standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C into a silent Exit(130) before the handler below sees it
            sys.stderr.write("error: interrupted\n")
    except UserError as exc:
        if verbose:
            traceback.print_exc()
        sys.stderr.write(f"error: {exc}\n")
        code = exc.exit_code
    except SystemExit as exc:  # typer's --show/--install-completion exit from their callbacks
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        code = 130
    except Exception as exc:  # noqa: BLE001 - last resort: never a bare traceback
        kinds = {cls.__name__ for cls in type(exc).__mro__}
        refused = environment_error(exc)  # a full disk, a file-size limit, a read-only folder: exit 2
        if refused is not None:
            if verbose:
                traceback.print_exc()
            sys.stderr.write(f"error: {refused}\n")
            code = refused.exit_code
        elif "NoArgsIsHelpError" in kinds:
            # A group called bare: show its help (click's convention), exit 2.
            sys.stderr.write(exc.format_message() + "\n")  # type: ignore[attr-defined]
            code = 2
        elif "ClickException" in kinds:
            # Bad option values and usage mistakes (typer vendors click, so match by name).
            if verbose:
                traceback.print_exc()
            sys.stderr.write(f"error: {_one_line(exc.format_message())}\n")  # type: ignore[attr-defined]
            code = 2 if "UsageError" in kinds else int(getattr(exc, "exit_code", 1))
        elif "Abort" in kinds:
            sys.stderr.write("error: aborted\n")
            code = 130
        elif verbose:
            traceback.print_exc()
            code = 1
        else:
            sys.stderr.write(
                f"error: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
                "(re-run with --verbose for the traceback)\n"
            )
            code = 1
    if not isinstance(code, int):
        code = 0
    if argv is None:
        exit_now(code)
    return code


#: the cyclic garbage collector's thresholds in a ``shepherd`` process (Python's: 700, 10, 10)
GC_THRESHOLDS = (50_000, 10, 10)


def _collect_less() -> None:
    """Run the cyclic garbage collector after 50,000 net allocations instead of 700 (:data:`GC_THRESHOLDS`).

    Start-up allocates some 120,000 lasting objects (numba, polars, pyarrow, typer): with Python's thresholds
    the collector scans them again and again as they arrive — 256 young, 23 middle and 2 full collections,
    ≈ 0.12–0.16 CPU-s of a small ``simulate`` run's ≈ 0.8 (issue 43); with these, 23 young and 2 middle
    ones, ≈ 0.05. Garbage with no cycle is freed at once as before; a cycle waits for at most 50,000
    allocations (a few MB), and no output depends on when it is freed."""
    import gc

    gc.set_threshold(*GC_THRESHOLDS)


def _app_for(args: list[str]) -> typer.Typer:
    """The app that runs ``args``: the whole app (:data:`app`), or — when ``args`` start with a command's name
    and ask for no help and no shell completion — an app holding that one command, with only that command's
    module imported. Building the click commands of all sixteen costs ~0.05 CPU-s and importing their modules
    more, a tenth of a small run's fixed cost (issue 43); the one command parses, errs and runs as it does in
    the whole app (same root callback and settings)."""
    import os

    if not args or args[0].startswith("-") or any(a in ("--help", "-h") for a in args) \
            or any(k.startswith("_SHEPHERD_COMPLETE") for k in os.environ):
        return _whole_app()
    entries = [e for e in COMMANDS if e[0] == args[0]]
    if len(entries) != 1:
        return _whole_app()  # an unknown name: the whole app's error, with its suggestions
    one = _root_app()
    _add(one, *entries[0])
    return one


def exit_now(code: int) -> None:
    """End the ``shepherd`` process with ``code``, skipping the interpreter's teardown where that is safe.

    Tearing down a process that loaded numba (LLVM's objects freed one by one), polars and pyarrow costs
    0.2–0.5 CPU-s — a third of a small run (issue 43; ``benchmarks/phase_timer.py``, phase ``exit``). By the
    time a command returns, every output it wrote is closed and fsynced (``core/outputs.py``: each file goes
    through ``atomic_path``, which fsyncs before the rename; logs are closed by their ``with`` blocks), so
    what is left is: the ``atexit`` handlers (run here, as a normal exit runs them: logging, Ray,
    multiprocessing, temporary folders), stdout and stderr (flushed here, and fsynced when redirected to a
    regular file), then ``os._exit(code)`` — the same exit code. A normal ``sys.exit`` instead when a
    non-daemon thread is still running (a normal exit would wait for it), under pytest, when flushing fails
    (its error then shows as Python shows it), or with ``SHEPHERD_FULL_EXIT=1`` (profilers, coverage tools
    that read the heap at teardown). Only the CLI entry calls this: :func:`main` with an ``argv`` (the tests,
    the API) returns the code instead.
    """
    import os

    threading = sys.modules.get("threading")
    busy = threading is not None and any(
        t.is_alive() and not t.daemon and t is not threading.main_thread() for t in threading.enumerate())
    if busy or "pytest" in sys.modules or os.environ.get("SHEPHERD_FULL_EXIT"):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()  # noqa: SLF001 - what a normal exit runs first (they are cleared once run)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is None:
                continue
            stream.flush()
            try:
                if _regular(stream.fileno()):
                    os.fsync(stream.fileno())
            except (OSError, ValueError, AttributeError):
                pass  # a tty, a pipe or a stream without a file descriptor: nothing to sync
    except (OSError, ValueError):
        sys.exit(code)  # e.g. a closed pipe: let Python report it as it would
    os._exit(code & 0xFF)  # what sys.exit(code) gives the shell


def _regular(fd: int) -> bool:
    """Whether ``fd`` is a regular file (stdout redirected to one)."""
    import os
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


if __name__ == "__main__":  # pragma: no cover
    main()
