"""A knapsack relaxation of the PPipe MILP: a tight upper bound and a guide for its solve (PPipe §3, App. A.2).

The MILP's LP relaxation lets every stage use fractional vGPUs, so on the
100-GPU clusters its bound sits ~2 % above the optimum and branch-and-bound
spends minutes closing it. This module solves a different relaxation
*exactly*, by dynamic programming:

* per DNN, a pooled pipeline of template ``l`` is one of its configurations
  with one efficient vGPU vector (:func:`.ppipe_configs.efficient_points`:
  an exact reformulation of the integer counts ``g``, Eqs. 21–22, 25, 28),
  and each template holds at most one pipeline (Eqs. 16–20);
* GPUs are counted as Eq. 23 writes them, ``Σ g/v ≤ N_k`` per GPU type —
  looser than the MILP's per-MPS-level physical GPUs (``v·h_{k,v} ≥ Σ g``),
  so this is a relaxation; vGPUs stay whole.

Resources are measured in units of ``1/lcm(levels)`` of a GPU (12 per GPU
with levels 1–4), so costs are integers. ``F_m[a, b]`` — the most throughput
DNN ``m`` gets from at most ``a`` units of the first GPU type and ``b`` of the
second — is a multiple-choice knapsack over templates (groups) and points
(items), computed on the whole grid. The max-min objective (§3
"Objective") then is a bisection on ``t``: ``t`` is reachable iff the
cheapest split of the first type's units among the DNNs, each at the least
second-type units giving ``w_m·t``, fits the second type.

The largest reachable ``t`` bounds every MILP solution's ``t`` (a valid
cut), and the DP's own choice of configurations is usually placeable as is
(:mod:`.ppipe_milp` uses both, ``formulation="knapsack"``).

Three or more GPU types (Fig. 14(b)): a grid per type does not fit
(L4 + T4 + P4 at 100 GPUs would be ~2.6 M cells per table and the split a
2-D min-plus convolution), so the DP keeps two dimensions that are
non-negative integer weightings of the types' units — one type exact, the
others summed at weights proportional to their LP shadow price per unit
(:func:`surrogate_dims`). A selection within every type's GPUs is within
each weighted sum, so this *surrogate* relaxation's ``t`` is again a valid
bound (tests: brute force on random items, exact solves on tiny 3- and
4-type clusters); it is looser than the two-type DP (Fig. 14(b), paper
rules: on 3 types 0.5–1 % above the incumbent HiGHS proves; without it the
gap stayed 1.2–2.1 % after 60–300 s; on 4 types up to ~9 %, looser
than HiGHS's own), and its selection usually overuses one type, so it is
rarely a placeable start (it was on 2 of 6 artifact-rules 3-type cells).
Two weightings are tried (the types with the largest priced share kept
exact), then on three types a bounded search over the summed row's
weights (:func:`_refined`); the tightest is kept. On four types the three
*pair splits* are tried too (each row two types' units at price weights,
:func:`pair_dims`): there no type kept exact leaves the other three summed,
and on Fig. 14(b)'s V100 + L4 + T4 + P4 (paper rules) a pair split was the
tightest on four of six groups (G2: 5,057 against 5,447 with one type
exact; HiGHS's own bound stalled at ~5,083 above a ≥ 5,015 optimum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shepherd.core.pipelines.cluster import ClusterSpec
from shepherd.solvers.ppipe_configs import Config, efficient_points

#: bisection stops when the bracket on ``t`` is this narrow (relative)
BISECT_TOL = 1e-9
#: the largest DP grid ``(A + 1)·(B + 1)`` solved (≈ 16 MB per table): Table 1's 100-GPU clusters need
#: ≤ 0.3 M cells; HC1-L scaled to 1,000 GPUs would need 27 M per table and every template keeps one, so
#: past this the relaxation is skipped and the MILP solves alone (Fig. 14's large clusters)
MAX_GRID_CELLS = 2_000_000
#: three or more GPU types: the dearest aggregated type's weight per unit in :func:`surrogate_dims`
SURROGATE_RESOLUTION = 4
#: three or more GPU types: how many types, by priced share of the cluster, are tried as the exact dimension
SURROGATE_TRIES = 2
#: three or more GPU types: the search over the summed row's weights (:func:`_refined`): at most this many
#: DPs, first step factor, resolution
SURROGATE_STEPS = 8
SURROGATE_STEP = 1.25
SURROGATE_FINE = 16
#: the search's grids stay within this many cells (the resolution drops below SURROGATE_FINE to fit)
SURROGATE_SEARCH_CELLS = 600_000
#: the search runs on at most this many GPU types: on four, one fine DP takes 10–30 s (Fig. 14(b):
#: 174 s CPU for 4004 instead of 4006), on three ~1 s (4744 → 4720 on the authors' G3)
SURROGATE_SEARCH_TYPES = 3


@dataclass(frozen=True)
class Item:
    """One pooled pipeline a template may hold: a configuration at one efficient vGPU vector."""

    config: Config
    vgpus: tuple[int, ...]
    xput: float
    cost: tuple[int, int]  # the DP's two resource dimensions, in units (two types: each type's units)


@dataclass(frozen=True)
class KnapsackBound:
    """The relaxation's optimum ``t`` (an upper bound on the MILP's ``t``) and the pipelines reaching it."""

    t_upper: float
    t_lower: float
    selection: dict[str, tuple[Item, ...]]
    units: tuple[int, ...]  # per GPU type in use (``hardware``), units per GPU
    #: the same selection, with the units it leaves unused given to the DNN that gains most (tie-break objective)
    fuller: dict[str, tuple[Item, ...]]
    hardware: tuple[str, ...] = ()
    #: the DP's two dimensions as integer weights on each type's units (two types: the identity, exact DP;
    #: three or more: the surrogate aggregation whose bound was tightest)
    dims: tuple[tuple[int, ...], tuple[int, ...]] = ((1, 0), (0, 1))


def resource_units(configs: dict[str, list[Config]], hardware: tuple[str, ...]) -> tuple[int, ...]:
    """Units per GPU of each type: the lcm of the MPS levels its partitions use (a ``1/v`` vGPU is whole)."""
    out = []
    for h in hardware:
        levels = {k for cfgs in configs.values() for c in cfgs for hh, k in zip(c.template, c.levels) if hh == h}
        out.append(math.lcm(*levels) if levels else 1)
    return tuple(out)


def template_items(cfgs: list[Config], counts: dict[str, int], hardware: tuple[str, ...],
                   units: tuple[int, ...], dims: tuple[tuple[int, ...], tuple[int, ...]] | None = None
                   ) -> list[list[Item]]:
    """Items per template (in first-seen order), without items another of the template weakly dominates.

    An item's cost is its units of each type in ``hardware`` combined by
    ``dims`` (two rows of non-negative integer weights; default, two types:
    the identity).
    """
    return _folded(typed_points(cfgs, counts, hardware, units), ((1, 0), (0, 1)) if dims is None else dims)


def _folded(points: list[list[tuple]], dims: tuple[tuple[int, ...], tuple[int, ...]]) -> list[list[Item]]:
    """:func:`typed_points` as items costed by the two weighted rows ``dims``, dominated items dropped."""
    return [_pareto([Item(c, g, x, (sum(w * u for w, u in zip(dims[0], per_type)),
                                    sum(w * u for w, u in zip(dims[1], per_type))))
                     for c, g, x, per_type in group])
            for group in points]


def typed_points(cfgs: list[Config], counts: dict[str, int], hardware: tuple[str, ...],
                 units: tuple[int, ...]) -> list[list[tuple[Config, tuple[int, ...], float, tuple[int, ...]]]]:
    """Per template (first-seen order): ``(config, vGPUs, xput, units per type)`` of every efficient point.

    What :func:`template_items` folds by a weighting; computed once per DNN when several weightings are
    tried (:func:`knapsack_bound`).
    """
    groups: dict[tuple[str, ...], list] = {}
    for c in cfgs:
        for x, g in efficient_points(c, counts):
            per_type = [0] * len(hardware)
            for h, k, n in zip(c.template, c.levels, g):
                i = hardware.index(h)
                per_type[i] += n * units[i] // k
            groups.setdefault(c.template, []).append((c, g, x, tuple(per_type)))
    return list(groups.values())


def _pareto(items: list[Item]) -> list[Item]:
    """Items no other item beats on both costs and throughput (first of equals kept)."""
    order = sorted(range(len(items)), key=lambda i: (-items[i].xput, items[i].cost, i))
    kept: list[Item] = []
    ka = np.empty(0, dtype=np.int64)
    kb = np.empty(0, dtype=np.int64)
    for i in order:
        it = items[i]
        if np.any((ka <= it.cost[0]) & (kb <= it.cost[1])):
            continue
        kept.append(it)
        ka = np.append(ka, it.cost[0])
        kb = np.append(kb, it.cost[1])
    return kept


def knapsack_table(groups: list[list[Item]], size: tuple[int, int], keep: bool = True) -> list[np.ndarray]:
    """``F`` after each group: ``F[a, b]`` = the most throughput within ``a``, ``b`` units (index 0: all zero).

    ``keep=False``: only the last table (the others are dropped as it goes).
    """
    A, B = size
    tables = [np.zeros((A + 1, B + 1))]
    for items in groups:
        prev = tables[-1]
        new = prev.copy()
        for it in items:
            a, b = it.cost
            if a > A or b > B:
                continue
            np.maximum(new[a:, b:], prev[: A + 1 - a, : B + 1 - b] + it.xput, out=new[a:, b:])
        if keep:
            tables.append(new)
        else:
            tables = [new]
    return tables


def _least_b(F: np.ndarray, need: float, B: int) -> np.ndarray:
    """Per ``a``: the fewest second-type units with ``F[a, b] ≥ need`` (``B + 1``: none)."""
    ok = F >= need
    return np.where(ok.any(axis=1), ok.argmax(axis=1), B + 1).astype(np.int64)


def _min_plus(f: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(f ⊕ g)(a) = min_{a1 ≤ a} f(a1) + g(a − a1)`` and the first minimising ``a1``."""
    n = len(f)
    out = np.full(n, np.iinfo(np.int64).max // 4, dtype=np.int64)
    arg = np.zeros(n, dtype=np.int64)
    for a1 in range(n):
        cand = f[a1] + g[: n - a1]
        better = cand < out[a1:]
        out[a1:] = np.where(better, cand, out[a1:])
        arg[a1:] = np.where(better, a1, arg[a1:])
    return out, arg


def _split(finals: list[np.ndarray], needs: list[float], B: int) -> list[tuple[int, int]] | None:
    """Units ``(a_m, b_m)`` per DNN reaching every ``need`` within the cluster, or ``None``."""
    total = None
    args = []
    for F, need in zip(finals, needs):
        g = _least_b(F, need, B)
        if total is None:
            total = g
            continue
        total, arg = _min_plus(total, g)
        args.append(arg)
    assert total is not None
    a = int(np.argmin(total))
    if total[a] > B:
        return None
    shares = []
    for arg in reversed(args):  # peel the DNNs off the convolution, last first
        a1 = int(arg[a])
        shares.append(a - a1)
        a = a1
    shares.append(a)
    shares.reverse()
    return [(am, int(_least_b(F, need, B)[am])) for F, need, am in zip(finals, needs, shares)]


def _backtrack(tables: list[np.ndarray], groups: list[list[Item]], a: int, b: int) -> tuple[Item, ...]:
    """The items the DP chose for ``F[a, b]`` (last group first)."""
    chosen = []
    for gi in range(len(groups), 0, -1):
        now, prev = tables[gi][a, b], tables[gi - 1]
        if now == prev[a, b]:
            continue
        for it in groups[gi - 1]:
            ca, cb = it.cost
            if ca <= a and cb <= b and prev[a - ca, b - cb] + it.xput == now:
                chosen.append(it)
                a, b = a - ca, b - cb
                break
        else:  # pragma: no cover - the table was built from these items
            raise AssertionError("knapsack backtrack found no item")
    return tuple(reversed(chosen))


def max_min(finals: tuple[np.ndarray, ...], weights: tuple[float, ...],
            B: int) -> tuple[float, float, list[tuple[int, int]]]:
    """Largest ``t`` with ``F_m[a_m, b_m] ≥ w_m·t`` for all DNNs and ``Σ a_m ≤ A``, ``Σ b_m ≤ B``.

    ``A`` is the tables' first size − 1. Returns ``(lo, hi, split)``: ``lo``
    is reached by ``split`` (units per DNN), no ``t ≥ hi`` is reachable
    (``hi − lo ≤ BISECT_TOL·hi``, or ``lo == hi`` at the tables' own maximum).
    """
    lo, hi = 0.0, min(float(F[-1, -1]) / w for F, w in zip(finals, weights))
    best = _split(list(finals), [w * hi for w in weights], B)
    if best is not None:
        return hi, hi, best
    best = _split(list(finals), [0.0] * len(weights), B)
    while hi - lo > BISECT_TOL * max(hi, 1e-12):
        mid = (lo + hi) / 2
        found = _split(list(finals), [w * mid for w in weights], B)
        if found is None:
            hi = mid
        else:
            lo, best = mid, found
    assert best is not None
    return lo, hi, best


def knapsack_bound(configs: dict[str, list[Config]], weights: dict[str, float],
                   cluster: ClusterSpec, prices: dict[str, float] | None = None) -> KnapsackBound | None:
    """Max-min ``t`` of the relaxation (module docstring) and a selection reaching it.

    Two GPU types in use: the exact DP. Three or more: the tightest of the
    surrogate relaxations of :func:`surrogate_dims` (``prices``: the LP's
    shadow price per GPU of each type, which only steer the choice of
    weights; every choice is a valid bound). ``None`` when fewer than two
    GPU types are in use, no DNN has a positive share, or every grid
    exceeds :data:`MAX_GRID_CELLS` (the caller then solves the MILP alone).
    """
    hardware = tuple(h for h in cluster.hardware if cluster.count(h) > 0)
    models = [m for m in configs if weights.get(m, 0.0) > 0]
    if len(hardware) < 2 or not models:
        return None
    counts = {h: cluster.count(h) for h in hardware}
    units = resource_units({m: configs[m] for m in models}, hardware)
    points = _Points(lambda m: typed_points(configs[m], counts, hardware, units))
    if len(hardware) == 2:
        solved = _solve_on(points, weights, models, hardware, counts, units, ((1, 0), (0, 1)), keep=True)
    else:
        solved = None
        for dims in surrogate_dims(hardware, counts, units, prices) + pair_dims(hardware, counts, units, prices):
            found = _solve_on(points, weights, models, hardware, counts, units, dims)
            if found is not None and (solved is None or found[1] < solved[1]):
                solved = found
        if solved is not None and len(hardware) <= SURROGATE_SEARCH_TYPES:
            solved = _refined(points, weights, models, hardware, counts, units, solved)
    return None if solved is None else _selected(weights, models, *solved)


class _Points(dict):
    """Each DNN's :func:`typed_points`, computed when a DP first asks for it: a grid past
    :data:`MAX_GRID_CELLS` never does (``_solve_on`` checks the size first), so a 100,000-GPU cluster's
    efficient points — millions of GPU counts per configuration — are never enumerated."""

    def __init__(self, make) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, model: str):
        got = self[model] = self._make(model)
        return got


def _extent(row: tuple[int, ...], hardware: tuple[str, ...], counts: dict[str, int], units: tuple[int, ...]) -> int:
    """The cluster's size along one DP dimension: every GPU's units, weighted by ``row`` per type."""
    return sum(w * counts[h] * u for w, h, u in zip(row, hardware, units))


def _refined(points: dict[str, list[list[tuple]]], weights: dict[str, float], models: list[str],
             hardware: tuple[str, ...], counts: dict[str, int], units: tuple[int, ...], solved: tuple) -> tuple:
    """A search over the summed row's weights (the surrogate multipliers): the tightest bound seen.

    Coordinate steps: one summed type's weight times ``f`` or ``1/f`` (``f``
    from :data:`SURROGATE_STEP`, its square root once no step improves), at
    :data:`SURROGATE_FINE` resolution, at most :data:`SURROGATE_STEPS` DPs
    (last tables only). Every weighting's bound is valid; the least is kept.
    """
    best = solved
    first, row = solved[0]
    lam = [float(x) for x in row]
    tried = {solved[0]}
    evals, step = 0, SURROGATE_STEP
    while evals < SURROGATE_STEPS and step > 1.01:
        improved = False
        for i in (i for i, x in enumerate(lam) if x > 0):
            for f in (step, 1 / step):
                cand = list(lam)
                cand[i] *= f
                dims = _rounded(first, cand, hardware, counts, units)
                if dims is None or dims in tried or evals >= SURROGATE_STEPS:
                    continue
                tried.add(dims)
                evals += 1
                found = _solve_on(points, weights, models, hardware, counts, units, dims)
                if found is not None and found[1] < best[1]:
                    best, lam, improved = found, cand, True
                    break
            if improved:
                break
        if not improved:
            step = math.sqrt(step)
    return best


def _rounded(first: tuple[int, ...], lam: list[float], hardware: tuple[str, ...], counts: dict[str, int],
             units: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """``lam`` as integer weights, the largest :data:`SURROGATE_FINE` or less whose grid has at most
    :data:`SURROGATE_SEARCH_CELLS` cells (``None`` if none has)."""
    top = max(lam)
    first_size = _extent(first, hardware, counts, units)
    for res in range(SURROGATE_FINE, 0, -1):
        row = tuple(max(1, round(res * x / top)) if x > 0 else 0 for x in lam)
        if (first_size + 1) * (_extent(row, hardware, counts, units) + 1) <= SURROGATE_SEARCH_CELLS:
            return first, row
    return None


def surrogate_dims(hardware: tuple[str, ...], counts: dict[str, int], units: tuple[int, ...],
                   prices: dict[str, float] | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Two-row weightings of three or more GPU types, one per type kept exact.

    The types tried as exact are the :data:`SURROGATE_TRIES` with the largest
    priced share of the cluster, ``prices[h]·counts[h]`` (first listed on a
    tie): aggregating the cheap types loses least (on Fig. 14's instances
    the best bound came from one of these two). Row one is type ``e``'s units alone; row two adds the other types'
    units at integer weights proportional to their price per unit
    (``prices[h] / units[h]``, scaled so the dearest is
    :data:`SURROGATE_RESOLUTION`; at least 1). Any non-negative weights give
    a relaxation: a selection within every type's GPUs is within each
    weighted sum of them (a surrogate relaxation), so each row's bound is valid
    and the tightest is kept. Weightings whose grid exceeds
    :data:`MAX_GRID_CELLS` are left out.
    """
    per_unit = {h: (prices or {}).get(h, 1.0) / u for h, u in zip(hardware, units)}
    value = {h: (prices or {}).get(h, 1.0) * counts[h] for h in hardware}
    exact = sorted(hardware, key=lambda h: (-value[h], hardware.index(h)))[:SURROGATE_TRIES]
    out = []
    for e in exact:
        rest = [h for h in hardware if h != e]
        top = max(per_unit[h] for h in rest)
        first = tuple(int(h == e) for h in hardware)
        second = tuple(0 if h == e else max(1, round(SURROGATE_RESOLUTION * per_unit[h] / top)) for h in hardware)
        size = [_extent(row, hardware, counts, units) for row in (first, second)]
        if (size[0] + 1) * (size[1] + 1) <= MAX_GRID_CELLS:
            out.append((first, second))
    return out


def pair_dims(hardware: tuple[str, ...], counts: dict[str, int], units: tuple[int, ...],
              prices: dict[str, float] | None) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Four GPU types: the three splits into two pairs, each row one pair's units at price weights.

    In each row the type of lowest LP price per unit (``prices[h] / units[h]``)
    weighs 1 and the other its price ratio to it, rounded (at least 1): like
    :func:`surrogate_dims`'s rows, any non-negative weights give a valid
    relaxation. No type is exact here, but neither is any summed with two
    others; which split is tightest varies by instance (Fig. 14(b)), so all
    three are tried. Other numbers of types: none (a split into two pairs
    needs four). Splits whose grid exceeds :data:`MAX_GRID_CELLS` are left out.
    """
    if len(hardware) != 4:
        return []
    per_unit = {h: (prices or {}).get(h, 1.0) / u for h, u in zip(hardware, units)}
    out = []
    for other in hardware[1:]:
        pairs = ((hardware[0], other), tuple(h for h in hardware[1:] if h != other))
        rows = []
        for pair in pairs:
            low = min(per_unit[h] for h in pair)
            rows.append(tuple(max(1, round(per_unit[h] / low)) if h in pair else 0 for h in hardware))
        size = [_extent(row, hardware, counts, units) for row in rows]
        if (size[0] + 1) * (size[1] + 1) <= MAX_GRID_CELLS:
            out.append((rows[0], rows[1]))
    return out


def _solve_on(points: dict[str, list[list[tuple]]], weights: dict[str, float], models: list[str],
              hardware: tuple[str, ...], counts: dict[str, int], units: tuple[int, ...],
              dims: tuple[tuple[int, ...], tuple[int, ...]], keep: bool = False) -> tuple | None:
    """The DP over the two dimensions ``dims`` (weights on each type's units) of each DNN's
    :func:`typed_points`: ``(dims, hi, lo, split, state)``, or ``None`` past the grid cap. Keeps every table
    for the backtrack if ``keep``, else each DNN's last."""
    size = tuple(_extent(row, hardware, counts, units) for row in dims)
    if (size[0] + 1) * (size[1] + 1) > MAX_GRID_CELLS:
        return None
    groups = {m: _folded(points[m], dims) for m in models}
    tables = {m: knapsack_table(groups[m], size, keep=keep) for m in models}
    finals = {m: tables[m][-1] for m in models}
    lo, hi, split = max_min(tuple(finals[m] for m in models), tuple(weights[m] for m in models), size[1])
    left = (size[0] - sum(a for a, _ in split), size[1] - sum(b for _, b in split))
    gains = [(finals[m][a + left[0], b + left[1]] - finals[m][a, b]) / weights[m] for m, (a, b) in zip(models, split)]
    return dims, hi, lo, split, (size, groups, left, gains, tables if keep else None, hardware, units)


def _selected(weights: dict[str, float], models: list[str], dims: tuple[tuple[int, ...], tuple[int, ...]],
              hi: float, lo: float, split: list[tuple[int, int]], state: tuple) -> KnapsackBound:
    """The bound with its selection, backtracked on each DNN's tables (rebuilt one DNN at a time if not kept)."""
    size, groups, left, gains, kept, hardware, units = state
    i = int(np.argmax(gains))
    selection, fuller = {}, {}
    for j, (m, (a, b)) in enumerate(zip(models, split)):
        tables = kept[m] if kept is not None else knapsack_table(groups[m], size)
        selection[m] = _backtrack(tables, groups[m], a, b)
        fuller[m] = (_backtrack(tables, groups[m], a + left[0], b + left[1]) if j == i and gains[i] > 0
                     else selection[m])
    return KnapsackBound(hi, lo, selection, units, fuller, hardware, dims)
