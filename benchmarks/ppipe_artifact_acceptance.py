"""PPipe at load factor 1.0 under both rule sets: per-DNN SLO attainment on each group's own plan.

For each rule set (paper, artifact), each Table 1 large cluster (HC1-L …
HC4-L) and each of the authors' six DNN groups: plan the group with the PPipe
MILP under that rule set (planner settings and bandwidth), then serve a
Poisson trace at load factor 1.0 of that plan's throughput (shares
0.30/0.33/0.37) for ``--seconds`` with the PPipe data plane under the same
rule set, ``--seeds`` seeds; prints and writes (``--out``, CSV) the
attainment per DNN averaged over the seeds. Not a test: never fails.

Usage: python benchmarks/ppipe_artifact_acceptance.py [--rules paper,artifact] [--seconds 30] [--seeds 3]
       [--clusters HC1-L,...] [--groups 0,1,2,3,4,5] [--out results/ppipe_acceptance.csv]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from shepherd.core.engine import EngineConfig, simulate
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.experiments.ppipe import common as c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", default="paper,artifact")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--clusters", default=",".join(c.CLUSTERS))
    parser.add_argument("--groups", default="0,1,2,3,4,5")
    parser.add_argument("--load", type=float, default=1.0)
    parser.add_argument("--out", default="results/ppipe_acceptance.csv")
    args = parser.parse_args()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    profs = c.profiles()
    engine = EngineConfig(reserved="record")
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["rules", "cluster", "group", "dnn", "attainment", "min_seed", "plan_s", "sim_s"])
        for rules in args.rules.split(","):
            for name in args.clusters.split(","):
                for gi in (int(g) for g in args.groups.split(",")):
                    group = c.groups()[gi]
                    t0 = time.perf_counter()
                    plan = c.plan("ppipe", make_cluster(name), group, "poisson", rules=rules)
                    t_plan = time.perf_counter() - t0
                    w = c.weights_for(group, "poisson")
                    slo = {m: profs[m].slo_us() for m in group} | plan.slo_us
                    atts: dict[str, list[float]] = {m: [] for m in group}
                    t0 = time.perf_counter()
                    for seed in range(args.seeds):
                        rates = {m: args.load * plan.normalized_xput * w[m] for m in group}
                        trace = c.make_trace(rates, slo, args.seconds, seed, "poisson")
                        res = simulate(trace, profs, "ppipe", c.dataplane("ppipe", rules), plan=plan, seed=seed,
                                       engine=engine)
                        for m, a in c.attainment(res, list(group)).items():
                            atts[m].append(a)
                    t_sim = time.perf_counter() - t0
                    for m in group:
                        mean = sum(atts[m]) / len(atts[m])
                        writer.writerow([rules, name, f"G{gi}", m, f"{mean:.4f}", f"{min(atts[m]):.4f}",
                                         f"{t_plan:.1f}", f"{t_sim:.1f}"])
                        print(f"{rules:8} {name:6} G{gi} {m[:40]:40} {100 * mean:6.2f} %  "
                              f"(plan {t_plan:.1f} s, sim {t_sim:.1f} s)", flush=True)
                    fh.flush()


if __name__ == "__main__":
    main()
