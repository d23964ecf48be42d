"""HERD's ILP in the paper's direct form, linearised with big-M — Shepherd §4, Table 2.

Used to verify :mod:`shepherd.solvers.herd` on small instances; it does not
scale (measured in issue 5: no solution in 60 s at 1000 model-streams × 100
groups). Variables follow Table 2 with model-streams in place of streams
(so x_ij doubles as z_kj):

* x[i,j] ∈ {0,1} model-stream i in group j; y[a,j] ∈ {0,1} affinity set a in group j;
  size[j] ∈ {0…Ḡ}; t free.
* max-min: n_i·t ≤ Σ_j w[i,j], where w[i,j] = size_j·x_ij is linearised
  (standard product of a binary and a bounded integer):
  w ≤ Ḡ·x,  w ≤ size_j,  w ≥ size_j − Ḡ·(1 − x),  w ≥ 0.
* (a) Σ_j size_j ≤ N; (b) size_j ≤ Ḡ; (c) Σ_i mem_i·x_ij ≤ cap;
  (d) Σ_j x_ij = 1; (e) x_ij ≤ y[a(i),j], Σ_a y[a,j] ≤ 1.
* Symmetry breaking: size_j ≥ size_{j+1}.
"""

from __future__ import annotations

import mip

from shepherd.solvers.backend import SolverConfig, new_model, solve
from shepherd.solvers.herd import Group, HerdConfig, HerdInstance, HerdPlan, _t_upper, min_burst_tolerance


def solve_herd_direct(inst: HerdInstance, cfg: HerdConfig, solver: SolverConfig) -> HerdPlan:
    """Solve the direct big-M form; groups J = min(N, number of model-streams)."""
    cfg.validate()
    m_count = len(inst.models)
    groups = range(min(cfg.gpus, m_count))
    sets = sorted(set(int(a) for a in inst.affinity_set))
    g_bar = cfg.group_limit
    model = new_model(solver, mip.MAXIMIZE, "herd-direct")
    t = model.add_var("t", lb=0.0, ub=_t_upper(inst, cfg))
    x = {(i, j): model.add_var(f"x_{i}_{j}", var_type=mip.BINARY) for i in range(m_count) for j in groups}
    w = {(i, j): model.add_var(f"w_{i}_{j}", lb=0.0, ub=g_bar) for i in range(m_count) for j in groups}
    y = {(a, j): model.add_var(f"y_{a}_{j}", var_type=mip.BINARY) for a in sets for j in groups}
    size = {j: model.add_var(f"size_{j}", var_type=mip.INTEGER, lb=0, ub=g_bar) for j in groups}
    for i in range(m_count):
        model += mip.xsum(x[i, j] for j in groups) == 1
        if inst.demand[i] > 0:
            model += float(inst.demand[i]) * t <= mip.xsum(w[i, j] for j in groups)
        for j in groups:
            model += w[i, j] <= g_bar * x[i, j]
            model += w[i, j] <= size[j]
            model += w[i, j] >= size[j] - g_bar * (1 - x[i, j])
            model += x[i, j] <= y[int(inst.affinity_set[i]), j]
    model += mip.xsum(size.values()) <= cfg.gpus
    for j in groups:
        model += mip.xsum(float(inst.memory_mb[i]) * x[i, j] for i in range(m_count)) <= cfg.capacity_mb
        model += mip.xsum(y[a, j] for a in sets) <= 1
        if j + 1 in size:
            model += size[j] >= size[j + 1]
    model.objective = mip.maximize(t)
    res = solve(model, solver)
    if not res.has_solution:
        return HerdPlan([], 0.0, res)
    out: list[Group] = []
    for j in groups:
        members = [i for i in range(m_count) if res.values.get(x[i, j].name, 0.0) > 0.5]
        if members:
            out.append(Group(members, int(round(res.values[size[j].name])), int(inst.affinity_set[members[0]])))
    return HerdPlan(out, min_burst_tolerance(inst, out), res)
