"""PPipe MILP solve time: one 3-DNN group on a 100-GPU, 2-type cluster, default open-source backend.

For each Table 1 large cluster (HC1-L … HC4-L, 25 high + 75 low GPUs) and each
DNN group (the authors' six, G1–G6 = their G0–G5), under a rule set (``--rules``), plans with the PPipe MILP
(Appendix A.2; HiGHS through python-mip, relative gap 1 %) and prints the
MILP solve time (with the default "knapsack" formulation: its DP included),
the total planning time (configuration enumeration + LP pricing + MILP),
status and proven gap; then the medians next to the paper's
3.5 s (its average, Gurobi on a 64-core n1-standard-64). Also prints PPipe's
planned throughput next to NP's and DART-r's. Not a test: never fails on timing.

Usage: python benchmarks/ppipe_milp_speed.py [--groups 6] [--clusters HC1-L,HC2-L,HC3-L,HC4-L]
       [--solver highs] [--gap 0.01] [--time-limit 60] [--formulation knapsack|counts|points|hybrid]
       [--rules paper|artifact]
"""

from __future__ import annotations

import argparse
import statistics
import time

from shepherd.core.pipelines import rules as rule_sets
from shepherd.core.pipelines.cluster import make_cluster
from shepherd.experiments.ppipe import common as c
from shepherd.solvers.backend import SolverConfig
from shepherd.solvers.ppipe_baselines import PIPELINE_PLANNERS
from shepherd.solvers.ppipe_milp import PPipePlanConfig

PAPER_MEAN_S = 3.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=6)
    parser.add_argument("--clusters", default=",".join(c.CLUSTERS))
    parser.add_argument("--solver", default="highs")
    parser.add_argument("--gap", type=float, default=0.01)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--formulation", default=PPipePlanConfig.formulation, help="PPipe MILP formulation")
    parser.add_argument("--rules", default="paper", help="named rule set (core/pipelines/rules.py)")
    args = parser.parse_args()
    fields = rule_sets.planner_fields(args.rules)
    solver = SolverConfig(args.solver, args.time_limit, args.gap)
    profs = c.profiles()
    solve, total, worse = [], [], 0
    print(f"{'cluster':8} {'group':5} {'status':9} {'gap %':>6} {'MILP s':>7} {'total s':>7} "
          f"{'PPipe':>7} {'NP':>7} {'DART-r':>7}")
    for name in args.clusters.split(","):
        cluster = c.rules_cluster(make_cluster(name), args.rules)
        for gi, group in enumerate(c.groups()[: args.groups]):
            ps = [profs[m] for m in group]
            w = c.weights_for(group, "poisson")
            t0 = time.perf_counter()
            plan = PIPELINE_PLANNERS["ppipe"](ps, w, cluster, PPipePlanConfig(formulation=args.formulation, **fields),
                                               solver)
            t1 = time.perf_counter() - t0
            others = {n: PIPELINE_PLANNERS[n](ps, w, cluster, PPipePlanConfig(**fields), solver).normalized_xput
                      for n in ("np", "dart-r")}
            solve.append(plan.meta["solve_s"])
            total.append(t1)
            worse += any(plan.normalized_xput < v for v in others.values())
            gap = plan.meta.get("gap")
            print(f"{name:8} G{gi + 1:<4} {plan.meta['status']:9} {100 * (gap or 0):6.2f} {plan.meta['solve_s']:7.2f} "
                  f"{t1:7.2f} {plan.normalized_xput:7.0f} {others['np']:7.0f} {others['dart-r']:7.0f}")
    print(f"\nmedian MILP solve time: {statistics.median(solve):.2f} s (mean {statistics.mean(solve):.2f} s); "
          f"median total planning time: {statistics.median(total):.2f} s; paper: {PAPER_MEAN_S} s mean (Gurobi, 64 cores)")
    print(f"instances where PPipe's planned throughput < NP's or DART-r's: {worse} of {len(solve)}")


if __name__ == "__main__":
    main()
