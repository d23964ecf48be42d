"""Where a whole ``shepherd simulate`` process spends its time (issue 43): CPU and wall per phase, cold and warm
JIT cache, at several trace sizes, for one or two checkouts (A/B in one run).

The command timed is what a user types, ``shepherd simulate --policy flex --gpus 12 --record summary
--trace T -o O``, on the served workload of ``benchmarks/engine_speed.py`` (13 Table-4 models, Poisson at
1.2× the 12 workers' batch-1 capacity ≈ 556 req/s, SLO 250 ms; 10 M requests ≈ 5 h), written once per size as
a trace artifact. Each run is a fresh process started as ``python -c "…main()"`` with ``PYTHONPATH`` naming
the checkout's parent (so ``import shepherd`` is that checkout), pinned to one core, polars on one thread.

Phases, from marks the child takes without touching the product (an import hook wraps functions as their
modules load; nothing is imported early):

* ``python start`` — the interpreter up to the first line (``time.process_time`` then);
* ``cli import`` — ``import shepherd.cli.app``;
* ``imports in run`` — every import after that (numba, polars, the engine …; outermost imports only);
* ``parse+checks`` — the rest, from ``main()`` to the trace read;
* ``trace read`` — ``traces.resolve.load_trace``; ``inputs`` — ``read_simulation_inputs``;
* ``JIT`` — time inside numba's ``Dispatcher.compile`` (a cache load when warm, a compile when cold);
* ``kernel`` — the rest of ``core.engine.simulate``;
* ``summary`` — ``SimulationResult.summary_frame``; ``write`` — the rest of ``_write_outputs`` (tables, printing);
* ``exit`` — from the end of ``_write_outputs`` to the process's end as the parent sees it (``wait4``'s
  rusage: user + system CPU of the child), i.e. ``main()``'s return and interpreter teardown.

Bytecode: a user's install has the project's ``.pyc`` files (pip compiles them; an editable checkout writes them
on its first run), so by default both checkouts are compiled first (``python -m compileall``, ``--bytecode
compiled``). A machine that sets ``PYTHONDONTWRITEBYTECODE`` and never compiled them recompiles every project
module from source on every run (≈ 0.15 CPU-s of a small run, 2026-12-07): ``--bytecode none`` measures that
(each checkout's own ``__pycache__`` folders deleted first, the children started with
``PYTHONDONTWRITEBYTECODE=1``).

``cold``: ``NUMBA_CACHE_DIR`` and ``SHEPHERD_TRACE_CACHE`` fresh empty folders per run (every kernel the run
needs compiles; a trace of ≥ 1 M requests is read from Parquet and its columns kept, ``core/trace_columns.py``);
``warm``: folders filled by one untimed run first (the kernels load from disk, a large trace is mapped). Sides alternate order per round. Prints per size, mode and side the
median CPU s per phase and the whole process's req/CPU-s, the sides' ratio, and whether the outputs
(``summary.parquet``, ``workers.parquet``) are byte-identical between sides. Not a test.

Usage: python benchmarks/phase_timer.py [--sizes 100000,1000000,10000000] [--rounds 5] [--cold-rounds 1]
       [--base OLD_PARENT] [--work DIR] [--bytecode compiled|none]   (OLD_PARENT: a folder whose ``shepherd`` entry is the other checkout)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r'''
import time
P0, W0 = time.process_time(), time.time()
import importlib.abc, json, os, sys
marks = [("python start", P0, W0)]
stack = ["top"]  # the open spans: an import or a compile is charged to the innermost
imp, jit = {}, {}
depth = [0]  # one depth for both: an import inside a compile is the compile's, a compile inside an import the import's
counting = [False]


def mark(name):
    marks.append((name, time.process_time(), time.time()))
    if name == "write>":
        save()  # an os._exit after the outputs skips atexit: save here


def timed(fn, into):
    # fn wrapped: its outermost calls' CPU and wall added to into[the innermost open span]
    def wrapper(*a, **k):
        if depth[0] or not counting[0]:
            return fn(*a, **k)
        depth[0] += 1
        c, w = time.process_time(), time.time()
        try:
            return fn(*a, **k)
        finally:
            got = into.setdefault(stack[-1], [0.0, 0.0])
            got[0] += time.process_time() - c
            got[1] += time.time() - w
            depth[0] -= 1
    return wrapper


def around(fn, name):
    def wrapper(*a, **k):
        mark("<" + name)
        stack.append(name)
        try:
            return fn(*a, **k)
        finally:
            stack.pop()
            mark(name + ">")
    return wrapper


PATCH = {
    "shepherd.traces.resolve": lambda m: setattr(m, "load_trace", around(m.load_trace, "trace")),
    "shepherd.core.sim_inputs": lambda m: setattr(m, "read_simulation_inputs",
                                                  around(m.read_simulation_inputs, "inputs")),
    "shepherd.core.engine": lambda m: setattr(m, "simulate", around(m.simulate, "run")),
    "shepherd.cli.simulate": lambda m: setattr(m, "_write_outputs", around(m._write_outputs, "write")),
    "shepherd.core.engine.result": lambda m: setattr(m.SimulationResult, "summary_frame", around(
        m.SimulationResult.summary_frame, "summary")),
    "numba.core.dispatcher": lambda m: setattr(m.Dispatcher, "compile", timed(m.Dispatcher.compile, jit)),
}


class Hook(importlib.abc.MetaPathFinder):
    # wraps each module's loader: its outermost imports timed, PATCH applied once the module ran
    def find_spec(self, name, path, target=None):
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module, run=run, name=name):
            timed(run, imp)(module)
            if name in PATCH:
                PATCH[name](module)
        try:
            loader.exec_module = exec_module
        except (AttributeError, TypeError):
            pass
        return spec


def save():
    with open(os.environ["PHASE_TIMER_OUT"], "w") as f:
        json.dump({"marks": marks, "imports": imp, "jit": jit}, f)


sys.meta_path.insert(0, Hook())
import shepherd.cli.app as app
mark("cli import")
counting[0] = True
sys.argv = ["shepherd"] + sys.argv[1:]
app.main()
'''

PHASES = ("python start", "cli import", "imports in run", "parse+checks", "trace read", "inputs", "JIT", "kernel",
          "summary", "write", "exit")


def phases(raw: dict, total_cpu: float, total_wall: float, t_launch: float) -> dict:
    """Per phase (cpu, wall) from the child's marks and the parent's totals (module docstring)."""
    m = {name: (c, w) for name, c, w in raw["marks"]}
    imp, jit = raw["imports"], raw["jit"]

    def span(name: str) -> list[float]:
        a, b = m.get("<" + name), m.get(name + ">")
        return [b[0] - a[0], b[1] - a[1]] if a and b else [0.0, 0.0]

    def own(name: str) -> list[float]:  # a span less the imports and compiles charged to it
        s, i, j = span(name), imp.get(name, [0, 0]), jit.get(name, [0, 0])
        return [s[0] - i[0] - j[0], s[1] - i[1] - j[1]]

    out = {"python start": (m["python start"][0], m["python start"][1] - t_launch)}
    out["cli import"] = tuple(x - y for x, y in zip(m["cli import"], m["python start"]))
    out["imports in run"] = tuple(sum(v[k] for v in imp.values()) for k in (0, 1))
    out["JIT"] = tuple(sum(v[k] for v in jit.values()) for k in (0, 1))
    out["trace read"], out["inputs"], out["kernel"], out["summary"] = (own(x) for x in ("trace", "inputs", "run",
                                                                                        "summary"))
    w, s = own("write"), span("summary")
    out["write"] = (w[0] - s[0], w[1] - s[1])
    end = m["write>"]
    named = [sum(v[k] for v in out.values()) for k in (0, 1)]
    out["parse+checks"] = (end[0] - named[0], end[1] - t_launch - named[1])
    out["exit"] = (total_cpu - end[0], t_launch + total_wall - end[1])
    return out


def make_trace(n: int, path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine_speed import CASES, make_trace as build

    from shepherd.core.artifacts import make_provenance, write_artifact

    load, basis, _, _ = CASES["served"]
    frame, _, rate, _ = build(n, 12, load, 250.0, 0, 0, basis)
    write_artifact(frame, path, "trace", make_provenance())
    print(f"trace: {n:,} requests at {rate:.0f} req/s ({n / rate / 3600:.2f} h) → {path}", flush=True)


def digest(path: Path) -> str:
    """SHA-256 of an output's rows (Arrow IPC of its columns) and its metadata with the provenance's
    ``git_commit`` dropped (it names the checkout, so two checkouts never share it; an archive has none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if "shepherd.provenance" in meta:
        prov = json.loads(meta["shepherd.provenance"])
        prov.pop("git_commit", None)
        meta["shepherd.provenance"] = json.dumps(prov, sort_keys=True)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema.remove_metadata()) as w:
        w.write_table(table.replace_schema_metadata(None))
    h = hashlib.sha256(sink.getvalue().to_pybytes())
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()[:16]


def parent_of(checkout: str, work: Path, side: str) -> str:
    """A folder whose ``shepherd`` entry is ``checkout`` (a symlink in ``work``), for PYTHONPATH."""
    root = Path(checkout).resolve()
    if root.name == "shepherd" or (root / "shepherd" / "__init__.py").exists():
        return str(root.parent if root.name == "shepherd" else root)
    parent = work / f"parent-{side}"
    parent.mkdir(exist_ok=True)
    link = parent / "shepherd"
    if link.is_symlink() and link.resolve() != root:  # the work folder reused with another checkout
        link.unlink()
    if not link.exists():
        link.symlink_to(root)
    return str(parent)


def bytecode(parent: str, mode: str) -> None:
    """Compile the checkout under ``parent`` to ``.pyc`` (``compiled``) or delete its own ``__pycache__`` folders
    (``none``; the virtual environment's are left), as the module docstring says."""
    root = (Path(parent) / "shepherd").resolve()
    skip = ("/.venv/", "/.git/", "/results/")
    if mode == "compiled":
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", "|".join(s.replace(".", r"\.") for s in skip),
                        str(root)], check=True, stdout=subprocess.DEVNULL)
        return
    for cache in root.rglob("__pycache__"):
        if not any(s in str(cache) + "/" for s in skip):
            shutil.rmtree(cache, ignore_errors=True)


def one(parent: str, trace: Path, out: Path, cache: Path, extra: list[str]) -> dict:
    """One timed child process: its phases and output digests (``cache``: its JIT cache; the trace cache is
    the folder ``traces`` in it)."""
    env = dict(os.environ, PYTHONPATH=parent, POLARS_MAX_THREADS="1", NUMBA_CACHE_DIR=str(cache),
               SHEPHERD_TRACE_CACHE=str(cache / "traces"), PHASE_TIMER_OUT=str(out) + ".phases.json")
    cmd = [sys.executable, "-c", CHILD, "simulate", "--policy", "flex", "--gpus", "12", "--record", "summary",
           "--trace", str(trace), "-o", str(out), *extra]
    try:
        core = {sorted(os.sched_getaffinity(0))[0]}
        pre = lambda: os.sched_setaffinity(0, core)  # noqa: E731 - one core, as engine_speed
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        pre = None
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=pre)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    err = proc.stderr.read().decode() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode}):\n{err[-3000:]}")
    raw = json.loads(Path(str(out) + ".phases.json").read_text())
    cpu = ru.ru_utime + ru.ru_stime
    digests = {p.name: digest(p) for p in sorted(out.glob("*.parquet"))}
    return {"cpu": cpu, "wall": wall, "phases": phases(raw, cpu, wall, t0), "digests": digests,
            "notices": [line for line in err.splitlines() if "compil" in line], "engine": engine_of(out)}


def engine_of(out: Path) -> str:
    """Which engine the run says it used (``summary.run.json``; "not recorded" for a checkout that writes no
    provenance): a stale stamp silently times the reference engine otherwise."""
    record = out / "summary.run.json"
    if not record.exists():
        return "not recorded"
    engine = json.loads(record.read_text()).get("engine") or {}
    return f"{engine.get('engine', '?')}: {engine.get('why', '')}".strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000")
    ap.add_argument("--rounds", type=int, default=5, help="warm runs per size and side (median)")
    ap.add_argument("--cold-rounds", type=int, default=1, help="cold runs per size and side (0: none)")
    ap.add_argument("--base", default="", help="the other checkout (A/B; its root, e.g. a git archive of the "
                    "merge-base, or a folder holding it as shepherd/)")
    ap.add_argument("--work", default="", help="folder for traces and outputs (kept: traces are reused)")
    ap.add_argument("--cold-sizes", default="", help="sizes of the cold runs (default: all of --sizes)")
    ap.add_argument("--bytecode", choices=("compiled", "none"), default="compiled",
                    help="compiled: both checkouts' .pyc files made first (what an install has); none: deleted, "
                    "and the runs write none (module docstring)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="phase-timer-"))
    work.mkdir(parents=True, exist_ok=True)
    sides = [("new", parent_of(str(Path(__file__).resolve().parent.parent), work, "new"))]
    sides += [("old", parent_of(args.base, work, "old"))] if args.base else []
    for _, parent in sides:
        bytecode(parent, args.bytecode)
    if args.bytecode == "none":
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sizes = [int(s) for s in args.sizes.split(",")]
    cold_sizes = [int(s) for s in args.cold_sizes.split(",")] if args.cold_sizes else sizes
    print(f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"sides: {', '.join(f'{s}={p}' for s, p in sides)}, bytecode: {args.bytecode}", flush=True)
    results: dict[tuple[int, str, str], list[dict]] = {}
    for n in sizes:
        trace = work / f"served-{n}.parquet"
        if not trace.exists():
            make_trace(n, trace)
        warm_cache = {side: work / f"cache-{side}" for side, _ in sides}
        for side, parent in sides:  # the warm caches: one untimed run each
            one(parent, trace, work / f"out-{side}", warm_cache[side], [])
        plan = [("warm", r) for r in range(args.rounds)]
        plan += [("cold", r) for r in range(args.cold_rounds if n in cold_sizes else 0)]
        for mode, r in plan:
            order = sides if r % 2 == 0 else sides[::-1]
            for side, parent in order:
                cache = warm_cache[side]
                if mode == "cold":
                    cache = Path(tempfile.mkdtemp(prefix="cold-", dir=work))
                res = one(parent, trace, work / f"out-{side}", cache, [])
                if mode == "cold":
                    shutil.rmtree(cache, ignore_errors=True)
                results.setdefault((n, mode, side), []).append(res)
            print(f"  {n:,} {mode} round {r + 1} done (load {os.getloadavg()[0]:.2f})", flush=True)
        report(n, sides, results)
    print(f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def report(n: int, sides: list, results: dict) -> None:
    print(f"\n== {n:,} requests: median CPU s per phase (wall s in brackets), runs per cell in the header")
    cols = [(mode, side) for mode in ("warm", "cold") for side, _ in sides if (n, mode, side) in results]
    print(f"{'phase':16}" + "".join(f"{f'{m} {s} ×{len(results[(n, m, s)])}':>22}" for m, s in cols))
    for ph in PHASES:
        row = f"{ph:16}"
        for mode, side in cols:
            runs = results[(n, mode, side)]
            c = statistics.median(r["phases"][ph][0] for r in runs)
            w = statistics.median(r["phases"][ph][1] for r in runs)
            row += f"{c:13.3f} ({w:6.2f})"
        print(row)
    row = f"{'process total':16}"
    for mode, side in cols:
        runs = results[(n, mode, side)]
        row += f"{statistics.median(r['cpu'] for r in runs):13.3f} ({statistics.median(r['wall'] for r in runs):6.2f})"
    print(row)
    row = f"{'req/CPU-s':16}"
    for mode, side in cols:
        row += f"{n / statistics.median(r['cpu'] for r in results[(n, mode, side)]):22,.0f}"
    print(row)
    for mode in ("warm", "cold"):
        if (n, mode, "old") in results and (n, mode, "new") in results:
            old = statistics.median(r["cpu"] for r in results[(n, mode, "old")])
            new = statistics.median(r["cpu"] for r in results[(n, mode, "new")])
            same = all(r["digests"] == results[(n, mode, "old")][0]["digests"]
                       for side in ("old", "new") for r in results[(n, mode, side)])
            print(f"{mode}: whole process new/old CPU ×{old / new:.2f} faster; outputs byte-identical: {same}")
    for mode, side in cols:
        engines = sorted({r["engine"] for r in results[(n, mode, side)]})
        print(f"{mode} {side} engine: " + " | ".join(engines)
              + ("   <- NOT the fast path: the timings are the reference engine's" if any(
                  e.startswith("reference") for e in engines) else ""))
        notes = results[(n, mode, side)][0]["notices"]
        if notes:
            print(f"{mode} {side} compile notices (first run): " + " | ".join(notes))


if __name__ == "__main__":
    main()
