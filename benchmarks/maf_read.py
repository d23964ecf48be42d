"""Benchmark: read one real-size MAF 2019 day (46k functions × 1440 minute columns).

Writes a synthetic day file in the exact MAF 2019 format into a temporary
directory (heavy-tailed counts, most cells 0, like the real files), then reads
it with :func:`shepherd.traces.maf2019.read_day` in a fresh child process and
prints wall seconds and the child's peak RSS. Also times a top-1000 selection
and the expansion of 5 minutes of that selection into MAF-stable arrivals.
Target (issue 4): under 30 s and under 4 GB. Prints figures; never fails on time.

    python benchmarks/maf_read.py [--functions 46000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

CHILD = r"""
import json, resource, sys, time
import numpy as np
from pathlib import Path
from shepherd.traces import maf2019, expand
t0 = time.perf_counter()
data = maf2019.read_day(Path(sys.argv[1]))
t1 = time.perf_counter()
top = maf2019.select_functions(data, top=1000)
window = top.take(np.arange(top.functions))
counts, minutes = window.counts[:, 600:605], window.minutes[600:605]
arrival, stream = expand.expand_stable(counts, minutes, np.random.default_rng(0))
t2 = time.perf_counter()
print(json.dumps({"read_s": t1 - t0, "select_expand_s": t2 - t1, "shape": list(data.counts.shape),
                  "requests_5min": int(arrival.size), "total": int(data.counts.sum())}))
"""


def write_day(path: Path, functions: int, rng: np.random.Generator) -> None:
    """A day file in the MAF 2019 format: key columns then 1…1440, heavy-tailed sparse counts."""
    daily = 10 ** np.clip(rng.normal(1.6, 1.77, functions), 0, 8.5)
    rate = daily / 1440.0
    cols: dict[str, object] = {
        "HashOwner": [f"{i:064x}" for i in range(functions)],
        "HashApp": [f"{i * 7:064x}" for i in range(functions)],
        "HashFunction": [f"{i * 13:064x}" for i in range(functions)],
        "Trigger": rng.choice(["http", "timer", "queue", "event"], functions).tolist(),
    }
    block = 120
    for start in range(0, 1440, block):
        counts = rng.poisson(rate[:, None], size=(functions, block)).astype(np.int64)
        for j in range(block):
            cols[str(start + j + 1)] = counts[:, j]
    pl.DataFrame(cols).write_csv(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=46_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "invocations_per_function_md.anon.d01.csv"
        t0 = time.perf_counter()
        write_day(path, args.functions, np.random.default_rng(0))
        print(f"wrote {path.name}: {args.functions:,} functions × 1440 minutes, "
              f"{path.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t0:.1f} s")
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, check=True)
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"read_day: {res['read_s']:.2f} s (target < 30 s); shape {res['shape']}; "
              f"{res['total']:,} invocations")
        print(f"top-1000 selection + 5-minute MAF-stable expansion: {res['select_expand_s']:.2f} s "
              f"({res['requests_5min']:,} requests)")
        print(f"peak RSS of the reading process: {max(peak_kb, before) / 1024 / 1024:.2f} GB (target < 4 GB)")


if __name__ == "__main__":
    main()
