"""Start-up time of the ``shepherd`` command (issue 29 item 6: under 1 s median wall on a quiet 2-core machine).

Times, each in a fresh process, ``shepherd --version``, ``shepherd --help``, ``shepherd simulate --help`` and
one TAB of bash completion (``shepherd sim<TAB>``, what typer runs with ``_SHEPHERD_COMPLETE=complete_bash``),
``--rounds`` times each with the kinds interleaved, and prints the median and the minimum wall time per kind,
plus the heavy libraries ``import shepherd.cli.app`` loaded (none expected: the commands import the engine,
polars, numba, python-mip and seaborn inside their functions). Not a test: timings depend on the machine
(``tests/test_startup.py`` checks the structure — what is imported — instead).

Usage: python benchmarks/startup_speed.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ENTRY = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"
HEAVY = ("numba", "polars", "numpy", "pyarrow", "mip", "seaborn", "matplotlib", "pydantic")
KINDS: dict[str, tuple[list[str], dict[str, str]]] = {
    "shepherd --version": (["--version"], {}),
    "shepherd --help": (["--help"], {}),
    "shepherd simulate --help": (["simulate", "--help"], {}),
    "completion: shepherd sim<TAB>": ([], {"_SHEPHERD_COMPLETE": "complete_bash", "COMP_WORDS": "shepherd sim",
                                          "COMP_CWORD": "1"}),
}


def wall(args: list[str], env: dict[str, str]) -> float:
    """Seconds of one fresh ``shepherd ARGS`` process (output discarded)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", ENTRY, *args], env=os.environ | env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def loaded_heavy() -> list[str]:
    """The heavy libraries a bare ``import shepherd.cli.app`` loads."""
    code = f"import sys, shepherd.cli.app; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    wall(["--version"], {})  # one untimed run: bytecode compiled, files in the page cache
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    for _ in range(args.rounds):
        for kind, (argv, env) in KINDS.items():
            times[kind].append(wall(argv, env))
    print(f"{'command':34s} {'median s':>9s} {'min s':>7s}   ({args.rounds} runs each, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f})")
    for kind, values in times.items():
        print(f"{kind:34s} {statistics.median(values):9.3f} {min(values):7.3f}")
    heavy = loaded_heavy()
    print("heavy libraries loaded by `import shepherd.cli.app`:", ", ".join(heavy) or "none")


if __name__ == "__main__":
    main()
