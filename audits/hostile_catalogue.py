"""Hostile and careless input, command by command (issue 33): run every case, classify, print the counts.

Each case runs ``shepherd ARGS`` in a fresh working folder (with the files the case writes first) under
a memory and time cap, and is classified:

* **ok** — exit 2 with exactly one ``error:`` line, nothing written outside the folder, no partial
  artifact (a ``*.parquet`` that was not there before and is not the case's intended output);
* **weak** — exit 0 where the input deserved a refusal or a notice (the case names what it expects);
* **bad** — exit 1 (an internal error), a traceback, a kill by the caps, or a write outside the folder.

"Outside" is checked over a snapshot of the *parent* folders: the working folder sits ``DEPTH`` folders deep
in the case's own folder, inside one folder the audit owns, and everything below that folder is listed (path,
size, mtime) before and after, so a write to ``../x``, ``../../x``, … up to ``DEPTH + 1`` levels up is seen;
an absolute path the case names (in its arguments or files) is checked too. The path cases run for real, not
with ``--dry-run``, so a refusal that only a dry run makes would not pass.

Usage::

    python audits/hostile_catalogue.py            # all cases, a table and the counts
    python audits/hostile_catalogue.py -k sweep   # the cases whose id contains "sweep"

This is an audit, not a test: its counts go in the closing note of the issue that asked for it; the
cases it found are pinned down by the tests of each command group (``tests/test_*bad_input*.py``,
``tests/test_sweep_schema.py``, ``tests/test_bounds.py``, ``tests/test_io_errors.py``, …).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SWEEP = ('name = "{name}"\npolicies = ["flex"]\n[trace]\nname = "maf-synthetic"\nduration_min = 1\n'
         'synthetic_rate = 40.0\nfunctions = 10\n[cluster]\ngpus = 2\n')
DEPTH = 3  #: folders between the case's folder and its working folder (see the module doc)
MEMORY_CAP = 3 << 30  # a case that wants more is 'bad': the caps must refuse it first
TIME_CAP_S = 120


@dataclass
class Case:
    id: str
    args: list[str]
    files: dict[str, str | bytes] = field(default_factory=dict)
    expect: str = "error"  #: "error" (exit 2) or "notice" (exit 0 with a notice on stderr)
    fsize: int | None = None  #: RLIMIT_FSIZE for the I/O cases


def _plan_json(**over) -> str:
    """A one-DNN plan in the PPipe artifact's JSON format (as tests/test_plan_import.py writes it), with the
    first partition's fields replaced by ``over``."""
    def part(layers, gpu, mps, lat):
        return {"dnn": "repvgg-b3", "layers": layers, "gpu": gpu, "mps": mps, "bs": 1, "num_gpu_per_server": 1,
                "num_gpu": 2.0, "lat_infer": lat, "lat_trans": 0.0, "xput": 300.0}
    first = part([0, 5], "L4", 1, 9000.0)
    first.update(over)
    return json.dumps([{"xput": 300.0, "sla": 47539.9, "config": {
        "dnn_name": "repvgg-b3", "gpu_name_arr": ["L4", "P4"], "sla": 47539.9, "num_mps_levels": [4, 4],
        "max_num_parts": 2, "bs_same": True, "est_xput": 250.0, "batch_build_factor": 1.3, "hist_adjustment": 19016,
        "num_gpu_per_server_arr": [1, 1], "bw_gbps": 6},
        "pipelines": [{"xput": 300.0, "partitions": [first, part([5, 10], "P4", 0, 14000.0)]}]}])


CASES = [
    # 1. names that become paths
    Case("sweep name traversal", ["sweep", "s.toml", "-j", "1"], {"s.toml": SWEEP.format(name="../../escaped")}),
    Case("sweep name absolute", ["sweep", "s.toml", "-j", "1"], {"s.toml": SWEEP.format(name="/tmp/abs-x")}),
    Case("sweep --set name traversal", ["sweep", "s.toml", "--set", "name=../up", "-j", "1"],
         {"s.toml": SWEEP.format(name="ok")}),
    Case("sweep trace /etc/hostname", ["sweep", "s.toml", "--set", 'trace={path = "/etc/hostname"}', "-j", "1"],
         {"s.toml": SWEEP.format(name="ok")}),
    Case("capacity -o into a file", ["capacity", "--policy", "flex", "--trace", "maf-synthetic", "--gpus", "2",
                                     "-o", "f.txt"], {"f.txt": "x"}),
    # 2. sizes
    Case("capacity --max-batch 1e8", ["capacity", "--policy", "flex", "--trace", "maf-synthetic", "--gpus", "2",
                                      "--max-batch", "100000000"]),
    Case("capacity --gpus 1e8", ["capacity", "--policy", "flex", "--trace", "maf-synthetic", "--gpus", "100000000"]),
    Case("simulate nexus frontends 1e8", ["simulate", "--policy", "nexus", "--trace", "maf-synthetic", "--gpus", "2",
                                          "--set", "frontends=100000000"]),
    Case("sweep 1000x1000 grid", ["sweep", "s.toml", "--set", "grid.load=[" + ",".join(f"{i}.0" for i in range(1, 1001))
                                  + "]", "--set", "grid.seed=[" + ",".join(map(str, range(1000))) + "]", "--dry-run"],
         {"s.toml": SWEEP.format(name="big")}),
    Case("sweep grid.max_batch 1e8", ["sweep", "s.toml", "--set", "grid.max_batch=[100000000]", "--dry-run"],
         {"s.toml": SWEEP.format(name="mb")}),
    Case("sweep grid.gpus 1e9", ["sweep", "s.toml", "--set", "grid.gpus=[1000000000]", "--dry-run"],
         {"s.toml": SWEEP.format(name="g")}),
    Case("plan-import mps 999999999", ["plan-import", "p.json", "-o", "pp.parquet"], {"p.json": _plan_json(mps=999999999)}),
    Case("plan-import bs 1e12", ["plan-import", "p.json", "-o", "pp.parquet"], {"p.json": _plan_json(bs=10**12)}),
    Case("plan-import nested 200k", ["plan-import", "p.json", "-o", "pp.parquet"],
         {"p.json": "[" * 200_000 + "]" * 200_000}),
    Case("profile --measure batch 100000", ["profile", "--measure", "ResNet50", "--batch", "100000", "-o", "p.parquet"]),
    # 3. I/O refusals (a file-size limit stands in for a full disk: both fail the write)
    Case("profile -o past a file-size limit", ["profile", "--table", "shepherd-v100", "-o", "p.parquet"], fsize=2048),
    Case("traces generate past a file-size limit", ["traces", "generate", "--rate", "20000", "--duration-s", "5",
                                                    "-o", "t.parquet"], fsize=2048),
    Case("sweep past a file-size limit", ["sweep", "s.toml", "-o", "out", "-j", "1"],
         {"s.toml": SWEEP.format(name="io")}, fsize=2048),
    # 4. hostile files
    Case("sweep non-UTF-8 toml", ["sweep", "s.toml", "--dry-run"], {"s.toml": b'name = "ok\xff"\npolicies = ["flex"]\n'}),
    Case("report corrupt sweep.json", ["report", "r"], {"r/sweep.json": "{not json"}),
    Case("runs show corrupt capacity.json", ["runs", "show", "r"], {"r/capacity.json": "[1, 2]"}),
    # 5. late config checks
    *[Case(f"sweep --set {s}", ["sweep", "s.toml", "--set", s, "-o", "out"], {"s.toml": SWEEP.format(name="late")})
      for s in ("run.load=-1", "run.load=nan", "run.load=inf", "cluster.gpus=0", "cluster.gpus=-4",
                'run.overhead="nope"', 'policies=[{name = "flex", options = {lam = -3.0}}]',
                'policies=["ppipe"]', "grid.seed=[0, 0]", 'trace.models="A,B"')],
    Case("sweep a folder", ["sweep", "adir", "--dry-run"], {"adir/x": ""}),
    Case("sweep --seeds 0,0", ["sweep", "s.toml", "--seeds", "0,0", "--dry-run"], {"s.toml": SWEEP.format(name="d")}),
    Case("capacity --seeds 0,0", ["capacity", "--policy", "flex", "--trace", "maf-synthetic", "--gpus", "2",
                                  "--seeds", "0,0"]),
    # 8. options that do not apply, tiny values
    Case("symphony autoscale_epoch_s 1e-9", ["simulate", "--policy", "symphony", "--trace", "maf-synthetic",
                                             "--gpus", "2", "--set", "autoscale_epoch_s=1e-9"]),
    Case("simulate --executor ray on one group", ["simulate", "--policy", "flex", "--trace", "maf-synthetic",
                                                  "--gpus", "2", "--executor", "ray", "-o", "out"], expect="notice"),
    # 9. weak inputs
    Case("traces generate --rate 0", ["traces", "generate", "--rate", "0", "-o", "t.parquet"]),
    Case("traces two-stream --rate", ["traces", "generate", "--process", "two-stream", "--rate", "50", "-o", "t.parquet"]),
    Case("plan --hardware nope", ["plan", "--trace", "maf-synthetic", "--hardware", "nope", "-o", "p.parquet"]),
    Case("plan --milp-formulation on herd", ["plan", "--trace", "maf-synthetic", "--planner", "herd",
                                             "--milp-formulation", "paper", "-o", "p.parquet"]),
]


ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:[\w.-]+/)*[\w.-]+")


def _snapshot(folder: Path) -> dict[Path, tuple[int, int]]:
    """Every path below ``folder``: (size, mtime in ns) — a write, a new file or folder, or a change shows."""
    out = {}
    for path in folder.rglob("*"):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        out[path] = (st.st_size, st.st_mtime_ns) if path.is_file() else (0, 0)
    return out


def _named_absolute(case: Case) -> list[Path]:
    """Absolute paths a case names (its arguments, its files' text): each is checked for a write too."""
    texts = list(case.args) + [t if isinstance(t, str) else t.decode(errors="replace") for t in case.files.values()]
    return sorted({Path(m) for t in texts for m in ABSOLUTE.findall(t) if not m.startswith(("/dev/", "/proc/"))})


def working_folder(root: Path) -> Path:
    """The folder a case runs in: ``DEPTH`` folders below its own folder ``root``."""
    return root.joinpath(*[f"up{i}" for i in range(DEPTH, 0, -1)], "work")


def _run(case: Case, root: Path) -> tuple[str, str]:
    """Run ``case`` in a working folder below ``root``, a fresh folder inside a folder the audit owns
    (``root.parent``: its snapshot is the outside-write check, so nothing else may write there)."""
    work = working_folder(root)
    work.mkdir(parents=True)
    for name, text in case.files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    scope = root.parent
    before = _snapshot(scope)
    named = {p: p.exists() for p in _named_absolute(case) if scope not in p.parents}

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
        if case.fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (case.fsize, case.fsize))

    code = "import sys; from shepherd.cli.app import main; sys.exit(main(sys.argv[1:]))"
    try:
        r = subprocess.run([sys.executable, "-c", code, *case.args], cwd=work, capture_output=True, text=True,
                           preexec_fn=limits, timeout=TIME_CAP_S)
    except subprocess.TimeoutExpired:
        return "bad", f"timed out after {TIME_CAP_S} s"
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    after = _snapshot(scope)
    outside = sorted(p for p, sig in after.items()
                     if before.get(p) != sig and p != work and work not in p.parents and p not in work.parents)
    outside += sorted(p for p, existed in named.items() if not existed and p.exists())
    new_parquet = [p for p in work.rglob("*.parquet") if p not in before]
    first = (errors or r.stderr.strip().splitlines() or [""])[-1][:110]
    if outside:
        return "bad", f"wrote outside: {outside[0]}"
    if r.returncode == 2 and len(errors) == 1 and "internal error" not in errors[0] and not new_parquet:
        return ("ok" if case.expect == "error" else "weak"), first
    if r.returncode == 0:
        notice = r.stderr.strip()
        return ("ok" if case.expect == "notice" and notice else "weak"), "exit 0" + (f": {first}" if notice else "")
    return "bad", f"exit {r.returncode}: {first}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="only the cases whose id contains this")
    args = parser.parse_args(argv)
    counts = {"ok": 0, "weak": 0, "bad": 0}
    for case in [c for c in CASES if args.k in c.id]:
        with tempfile.TemporaryDirectory(prefix="hostile-") as owned:  # the audit's own: nothing else writes here
            start = time.perf_counter()
            verdict, why = _run(case, Path(owned) / "case")
        counts[verdict] += 1
        print(f"{verdict:5} {time.perf_counter() - start:6.1f}s  {case.id:38}  {why}", flush=True)
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    return 1 if counts["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
