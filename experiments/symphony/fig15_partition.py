"""Symphony Fig. 15 (Appendix A.2): imbalance CDF of the partitioning MILP vs random search.

Each cell is one A.2 configuration (:func:`shepherd.solvers.symphony_baselines.zoo_instance`:
m variants of the Table 1 models, rates i.i.d. exponential) split into l
sub-clusters, solved twice under the same time limit: by the MILP of Eqs. (4)–(10)
(HiGHS with threads = 1 and the greedy + swap start of
:func:`shepherd.solvers.symphony_partition.start_partition`, and CBC from
scratch: HiGHS alone finds no solution in 10 s at 800 × 20) and by A.2's random solver. The figure is the CDF over configurations
of the imbalance factor (max − min)/avg of load (request rate) and of static
memory, for both methods.

Panels: ``fig15`` — 800 models × 20 partitions, 10 s (A.2); ``a1`` — 400 models
× 4 sub-clusters, 10 s (A.1 "Practical Implementation": "an approximate solution
is significantly better than any randomly generated assignments"). ``--quick``:
120 × 6 and 200 × 4 at 0.5 s.

The paper prints no numbers for Fig. 15 (the CDF is an image), so REPORT.md
states the setup numbers it does print (800, 20, 10 s) beside ours, and the
claims with explicit tolerances: the MILP beats random search on both
imbalance factors in ≥ 90 % of configurations (the issue's acceptance bar),
and the MILP answers within the 10 s window (CPU seconds of the solve ≤ 1.1 × limit + 0.5 s; judged
on CPU time, never wall-clock: issue 41).

Measured (``shepherd reproduce symphony-fig15 -j 1``, 800 × 20 at 10 s, seeds
0–19, a 2-core machine at load average ~12): MILP (HiGHS, threads = 1, greedy
+ swap start) beats random search on both imbalance factors in 20/20; median
imbalance load 9.1e-5 / memory 8.4e-4 vs random 0.41 / 0.41 (~2·10^5
partitions drawn). Solver time median 10.8 s, worst 11.8 s (the start's 1–2 s
included; HiGHS stops up to 1.8 s past its own limit under that load, so the
window claim fails there); wall with the model build median 12.9 s. Relative
gap median 0.86 (0.75–0.94): the bound is the floor of
:mod:`shepherd.solvers.symphony_bounds` (median 7·10^-5·R̄) and HiGHS never
raises it nor improves the start (0/20); absolute gap (objective − bound) median
4.3·10^-4·R̄, worst 9.7·10^-4·R̄. Before the floors and the swap start the
same runs read gap 100 % (bound 0) and objective ≈ 1.3·10^-2·R̄ (the greedy).
400 × 4: 10/10 wins, relative gap median 0.69, absolute 5.2·10^-5·R̄.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from shepherd.experiments.base import Claim, Experiment, Headline, Section
from shepherd.experiments.judge import Rule, judge_claim
from shepherd.experiments.registry import register
from shepherd.solvers import symphony_baselines as sb
from shepherd.solvers import symphony_partition as sp
from shepherd.solvers.backend import SolverConfig

WIN_BAR = 0.9  # the acceptance: MILP beats random in ≥ 90 % of instances
LIMIT_SLACK, LIMIT_ABS_S = 1.10, 0.5  # "within the 10 s window": solver time ≤ 1.1 × limit + 0.5 s (HiGHS overshoots)
PANELS = {  # panel: (models, partitions, full-scale configurations)
    "fig15": (800, 20, 20),
    "a1": (400, 4, 10),
}
QUICK = {"fig15": (120, 6, 8), "a1": (200, 4, 4)}
METHODS = ["MILP", "MILP-CBC-nostart", "random"]


class Fig15(Experiment):
    name = "symphony-fig15"
    paper = "symphony"
    title = "Symphony Fig. 15: partitioning MILP vs random search (imbalance CDF)"

    def cells(self, scale):
        table = QUICK if scale.quick else PANELS
        limit = 0.5 if scale.quick else sp.PAPER_TIME_LIMIT_S
        return [self.cell(panel=panel, models=m, partitions=l, seed=seed, time_limit=limit)
                for panel, (m, l, n) in table.items() for seed in range(n)]

    def run_cell(self, p):
        inst = sb.zoo_instance(int(p["models"]), int(p["partitions"]), int(p["seed"]))
        limit = float(p["time_limit"])
        runs = []
        for method, solver, use_start in (("MILP", "highs", True), ("MILP-CBC-nostart", "cbc", False)):
            start, cpu = time.perf_counter(), time.process_time()
            part = sp.solve_partition(inst, SolverConfig(solver, limit, 1e-4, threads=1), start=use_start)
            runs.append((method, part, time.perf_counter() - start, time.process_time() - cpu))
        cpu = time.process_time()
        rand = sb.random_search(inst, limit, seed=int(p["seed"]))
        runs.append(("random", rand, rand.result.solve_s, time.process_time() - cpu))
        greedy = sp.greedy(inst)
        greedy_obj = sp.objective(inst, greedy) if greedy is not None else None
        handed, _ = sp.start_partition(inst)  # what the HiGHS row starts from (deterministic)
        start_obj = sp.objective(inst, handed) if handed is not None else None
        rows = []
        for method, part, wall, cpu_s in runs:
            s = sp.summary(inst, part.assignment) if part.assignment is not None else None
            rows.append(dict(
                panel=p["panel"], models=int(p["models"]), partitions=int(p["partitions"]), seed=int(p["seed"]),
                time_limit=limit, method=method, greedy_objective=greedy_obj, start_objective=start_obj,
                status=part.result.status, objective=s["objective"] if s else None,
                bound=part.result.bound, mean_rate=inst.mean_rate,
                abs_gap=(s["objective"] - part.result.bound) if s and part.result.bound is not None else None,
                imbalance_rate=s["imbalance_rate"] if s else None,
                imbalance_memory=s["imbalance_memory"] if s else None,
                solve_s=float(part.result.solve_s), wall_s=float(wall), cpu_s=float(cpu_s), start_s=float(part.extra.get("start_s", 0.0)),
                gap=float(part.result.gap) if part.result.gap is not None else None,
                samples=int(part.samples), feasible_samples=int(part.feasible_samples)))
        return pl.DataFrame(rows, schema_overrides={"objective": pl.Float64, "imbalance_rate": pl.Float64,
                                                    "start_objective": pl.Float64, "greedy_objective": pl.Float64,
                                                    "bound": pl.Float64, "abs_gap": pl.Float64,
                                                    "imbalance_memory": pl.Float64, "gap": pl.Float64})

    def report(self, results: pl.DataFrame, figures_dir: Path) -> Section:
        import seaborn as sns

        from shepherd.experiments import plotting
        from shepherd.experiments.report import save_figure

        panels = [p for p in PANELS if p in set(results["panel"].to_list())]
        fig, axes = plotting.figure(ncols=2, nrows=max(len(panels), 1), width=4)
        for row, panel in enumerate(panels):
            sub = results.filter(pl.col("panel") == panel)
            m, l = int(sub["models"][0]), int(sub["partitions"][0])
            for col, (metric, label) in enumerate((("imbalance_rate", "load"), ("imbalance_memory", "memory"))):
                ax = axes[row][col]
                sns.ecdfplot(data=sub.drop_nulls(metric).to_pandas(), x=metric, hue="method",
                             hue_order=METHODS, ax=ax)
                ax.set_xlabel(f"{label} imbalance factor (max − min)/avg")
                ax.set_ylabel("CDF")
                ax.set_title(f"{m} models × {l} partitions, {sub['time_limit'][0]:g} s", fontsize=8)
        figures = save_figure(fig, figures_dir, "symphony-fig15")

        headlines: list[Headline] = []
        claims: list[Claim] = []
        notes_extra: list[str] = []
        for panel in panels:
            sub = results.filter(pl.col("panel") == panel)
            m, l, limit = int(sub["models"][0]), int(sub["partitions"][0]), float(sub["time_limit"][0])
            rand = sub.filter(pl.col("method") == "random").sort("seed")
            tag = f"{m}×{l}, {limit:g} s"
            if panel == "fig15":
                headlines += [Headline("models partitioned (A.2)", 800, m), Headline("partitions (A.2)", 20, l),
                              Headline("time limit per method (A.2)", 10, limit, unit=" s")]
            else:
                headlines += [Headline("A.1 check: models", 400, m), Headline("A.1 check: sub-clusters", 4, l)]
            for method in METHODS:
                frame = sub.filter(pl.col("method") == method)
                for metric, label in (("imbalance_rate", "load"), ("imbalance_memory", "memory")):
                    vals = frame[metric].drop_nulls()
                    if vals.len():
                        headlines.append(Headline(f"{tag}: {method} median {label} imbalance", None,
                                                  float(vals.median())))
            for method in METHODS[:2]:
                milp = sub.filter(pl.col("method") == method).sort("seed")
                if not milp.height:
                    continue
                headlines.append(Headline(f"{tag}: {method} median solver time (wall incl. model build "
                                          f"{float(milp['wall_s'].median()):.1f} s)", limit,
                                          float(milp["solve_s"].median()), unit=" s"))
                gaps = milp["gap"].drop_nulls()
                headlines.append(Headline(f"{tag}: {method} median relative gap (objective − bound)/objective",
                                          None, float(gaps.median()) if gaps.len() else float("nan")))
                if "abs_gap" in milp.columns:  # rows from before the bounds lack it
                    rel = milp.drop_nulls("abs_gap").select(pl.col("abs_gap") / pl.col("mean_rate"))["abs_gap"]
                    headlines.append(Headline(f"{tag}: {method} median absolute gap (objective − bound)/R̄", None,
                                              float(rel.median()) if rel.len() else float("nan")))
                pair = milp.join(rand, on="seed", suffix="_r")
                wins = pair.select(
                    (pl.col("imbalance_rate").is_not_null()
                     & (pl.col("imbalance_rate_r").is_null()
                        | ((pl.col("imbalance_rate") < pl.col("imbalance_rate_r"))
                           & (pl.col("imbalance_memory") < pl.col("imbalance_memory_r"))))).alias("w"))["w"]
                frac = float(wins.mean()) if pair.height else 0.0
                claims.append(judge_claim(
                    f"{tag}: A.2 \"We observe that our MILP-based algorithm provides load-balanced partitions\" — "
                    f"{method} beats random search on both imbalance factors in ≥ {WIN_BAR:.0%} of configurations "
                    "(per configuration: 1 if it does, else 0; the interval of their mean)", Rule.at_least(WIN_BAR),
                    [float(w) for w in wins], f"{int(wins.sum())}/{pair.height} = {frac:.0%}", bounds=(0.0, 1.0)))
                claims.append(window_claim(tag, method, limit, milp))
                if method == "MILP" and "greedy_objective" in milp.columns:
                    better = milp.select((pl.col("objective") < pl.col("start_objective") * (1 - 1e-9)).sum()).item()
                    notes_extra.append(f"{tag}: HiGHS improved on the start it was handed in {better}/{milp.height} "
                                       "configurations (the rest return the start); the start's Eq. (4) median "
                                       f"{float(milp['start_objective'].median()):.4g}, the greedy one's before "
                                       f"the swaps {float(milp['greedy_objective'].median()):.4g}.")
        return Section(self.title, figures, headlines, claims, [
            "Fig. 15 prints no numbers (a CDF image); medians are ours. Paper: CPLEX; ours: HiGHS (python-mip) "
            "with a greedy + swap MIP start (ours), threads = 1.",
            "Instances: variants of the 6 Symphony Table 1 models (the only ones with memory printed), rates "
            "Exp(1); caps R_max = 1.5·R̄, S_max = 1.5·S̄ + max d (our choice; A.2 prints none).",
            "Gap: the LP relaxation of Eqs. (4)–(10) is 0 on every instance (x = 1/l balances exactly); the bound "
            "is lifted only by valid floors on ΔR, ΔS (solvers/symphony_bounds: pigeonhole, integer MB sizes), "
            "which at 800 × 20 come to w·ΔS ≥ w·0.5 MB or so. The optimum itself is near 0 there, so the "
            "relative gap stays near 100 % while the absolute gap (objective − bound), shown over R̄ (the "
            "objective's scale: Eq. (4) / R̄ = ΔR/R̄ + ΔS/S̄), is a fraction of a percent.",
            "MILP-CBC-nostart: the same MILP on CBC without a start (HiGHS alone finds no solution in 10 s at "
            "800 × 20), to show what the solver achieves by itself in the window.",
        ] + notes_extra)


def window_claim(tag: str, method: str, limit: float, milp: pl.DataFrame) -> Claim:
    """A.2's "answers within the window", judged on the solve's CPU seconds (with the start's; threads = 1), never
    on wall-clock (issue 41): a loaded machine stretches wall time, not the solver's work. Cells from before the
    CPU column leave it not judged."""
    from shepherd.experiments.judge import NOT_JUDGED, judge_value

    text = (f"{tag}: A.2 \"within our time window of 10 seconds\" — {method} answers within the {limit:g} s window (CPU seconds of the solve ≤ "
            f"{LIMIT_SLACK:.2f}× limit + {LIMIT_ABS_S:g} s) with a partition every time")
    if "cpu_s" not in milp.columns or milp["cpu_s"].null_count():
        return Claim(text, False, "not judged: these cells predate the CPU-time column; re-run "
                     "`shepherd reproduce symphony-fig15` (wall-clock does not decide a claim)", state=NOT_JUDGED)
    worst, wall = float(milp["cpu_s"].max()), float(milp["solve_s"].max())
    start_max = float(milp["start_s"].max()) if "start_s" in milp.columns else float("nan")
    bound = LIMIT_SLACK * limit + LIMIT_ABS_S
    # every configuration must answer: the worst one's CPU seconds over the bound decides; a configuration
    # without a partition did not answer at all (∞: the judge calls the row inconclusive and says so)
    over = [cpu - bound if rate is not None else float("inf")
            for cpu, rate in zip(milp["cpu_s"].to_list(), milp["imbalance_rate"].to_list())]
    return judge_value(text + f" (the worst configuration's CPU seconds − {bound:g} s: ≤ 0)",
                       Rule.at_most(0.0, unit="CPU-s"), max(over) if over else float("nan"),
                       f"the worst of {len(over)} configurations (∞: one returned no partition)",
                       f"worst {worst:.2f} CPU-s (solver wall time worst {wall:.2f} s, {wall - limit:+.2f} s against "
                       f"the limit it was given, the window less the start's ≤ {start_max:.2f} s; not judged); "
                       f"statuses {sorted(set(milp['status'].to_list()))}", deterministic=False)


EXPERIMENT = register(Fig15())
