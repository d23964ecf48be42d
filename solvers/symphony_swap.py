"""Pairwise-swap improvement of a partition's Eq. (4) value — the MIP start of Symphony's Appendix A MILP.

Symphony (Appendix A.1, "Practical Implementation") takes CPLEX's best answer
after 10 s; CPLEX's own primal heuristics improve its incumbent. HiGHS does
not at A.2's scale: on 800 models × 20 sub-clusters it spends the 10 s (and
60 s, measured) in root-node cut separation and returns the start it was
given unchanged. This module is ours, not the paper's: a deterministic local
search that the MILP's start goes through first, so the partition the MILP
returns is a local optimum of the paper's objective rather than a greedy one.

One round: with R_j, S_j the per-part rate and static memory, take the 4 parts
with the largest |R_j − R̄| + w·|S_j − S̄| (ties: lower index); for each of
them (a) and every other part (b), score every swap of a model of a with a model
of b and every move of one model from a to b by Eq. (4) evaluated over all
parts, keeping only candidates that satisfy the rate cap (5) and the memory
cap (6) (static + largest dynamic memory) in both parts; apply the best
candidate if it lowers Eq. (4), else stop. Ties go to the first candidate in
this fixed order, and there is no clock in the loop, so the result depends on
the inputs only. ``max_rounds`` bounds the work (on 800 × 20 the search stops
at a local optimum after under 100 rounds, 1–2 s on a loaded 2-core machine).
"""

from __future__ import annotations

import numpy as np

SOURCES = 4  # parts per round whose deviation is tried first
IMPROVE = 1e-12  # relative improvement a step must make


def _max_without(dyn: np.ndarray) -> np.ndarray:
    """For each member of a part, the largest dynamic memory of the others (0 when alone)."""
    if len(dyn) == 1:
        return np.zeros(1)
    order = np.argsort(-dyn, kind="stable")
    out = np.full(len(dyn), dyn[order[0]])
    out[order[0]] = dyn[order[1]]
    return out


def _max_excluding(dev: np.ndarray, pa: int) -> np.ndarray:
    """For each part b, max of dev over the parts other than pa and b (0 when none is left)."""
    top = [j for j in np.argsort(-dev, kind="stable")[:3] if j != pa][:2]
    out = np.zeros(len(dev))
    if top:
        out[:] = dev[top[0]]
        out[top[0]] = dev[top[1]] if len(top) > 1 else 0.0
    return out


def improve(assignment: np.ndarray, rate: np.ndarray, static_mb: np.ndarray, dynamic_mb: np.ndarray,
            parts: int, w: float, rate_cap: float, memory_cap_mb: float, max_rounds: int = 200) -> np.ndarray:
    """Swap/move models between parts while Eq. (4) falls and Eqs. (5), (6) hold; a new assignment."""
    a = np.asarray(assignment, dtype=np.int64).copy()
    if parts < 2:
        return a
    r, s, d = (np.asarray(v, dtype=float) for v in (rate, static_mb, dynamic_mb))
    m = len(a)
    rbar, sbar = float(r.sum()) / parts, float(s.sum()) / parts
    for _ in range(max_rounds):
        R, S = np.bincount(a, r, parts), np.bincount(a, s, parts)
        dev_r, dev_s = np.abs(R - rbar), np.abs(S - sbar)
        cur = float(dev_r.max() + w * dev_s.max())
        spread = float((dev_r**2).sum() + w**2 * (dev_s**2).sum())
        # (Eq. 4, spread) must fall lexicographically: spread lets a step that helps two parts but not
        # the worst one through, which the max in Eq. (4) alone would refuse; no cycle is possible
        best_key, best_step = (cur, spread * (1 - IMPROVE)), None
        rest = np.zeros(m)  # largest dynamic memory of a model's part without it
        top = np.zeros(parts)  # largest dynamic memory of each part
        for j in range(parts):
            idx = np.flatnonzero(a == j)
            if len(idx):
                rest[idx] = _max_without(d[idx])
                top[j] = d[idx].max()
        for pa in (int(j) for j in np.argsort(-(dev_r + w * dev_s), kind="stable")[:SOURCES]):
            ia, ob = np.flatnonzero(a == pa), np.flatnonzero(a != pa)
            if len(ia) == 0:
                continue
            targets = np.array([j for j in range(parts) if j != pa], dtype=np.int64)
            # columns: a swap with each model outside pa, then a move to each other part
            col_part = np.concatenate([a[ob], targets])
            col_r = np.concatenate([r[ob], np.zeros(len(targets))])
            col_s = np.concatenate([s[ob], np.zeros(len(targets))])
            col_d = np.concatenate([d[ob], np.zeros(len(targets))])
            col_rest = np.concatenate([rest[ob], top[targets]])
            dr, ds = r[ia][:, None] - col_r[None, :], s[ia][:, None] - col_s[None, :]
            ra, rb = R[pa] - dr, R[col_part][None, :] + dr
            sa, sb = S[pa] - ds, S[col_part][None, :] + ds
            dyn_a = np.maximum(rest[ia][:, None], col_d[None, :])
            dyn_b = np.maximum(col_rest[None, :], d[ia][:, None])
            ok = ((ra <= rate_cap) & (rb <= rate_cap)
                  & (sa + dyn_a <= memory_cap_mb) & (sb + dyn_b <= memory_cap_mb))
            o_r, o_s = _max_excluding(dev_r, pa)[col_part], _max_excluding(dev_s, pa)[col_part]
            ea, eb, fa, fb = np.abs(ra - rbar), np.abs(rb - rbar), np.abs(sa - sbar), np.abs(sb - sbar)
            val = np.maximum(np.maximum(ea, eb), o_r[None, :]) + w * np.maximum(np.maximum(fa, fb), o_s[None, :])
            val = np.where(ok, val, np.inf)
            old2 = dev_r[pa] ** 2 + w**2 * dev_s[pa] ** 2 + (dev_r**2 + w**2 * dev_s**2)[col_part][None, :]
            spr = spread - old2 + ea**2 + eb**2 + w**2 * (fa**2 + fb**2)
            k = int(np.argmin(val))
            if val.flat[k] < cur * (1 - IMPROVE):
                key = (float(val.flat[k]), float(spr.flat[k]))
            else:  # no step lowers Eq. (4) here: the least spread among steps that keep it
                spr = np.where(val <= cur, spr, np.inf)
                k = int(np.argmin(spr))
                key = (cur, float(spr.flat[k]))
            if key < best_key:
                x, y = divmod(k, val.shape[1])
                best_key = key
                best_step = (int(ia[x]), pa, int(col_part[y]), int(ob[y]) if y < len(ob) else None)
        if best_step is None:
            break
        i, pa, pb, k2 = best_step
        a[i] = pb
        if k2 is not None:
            a[k2] = pa
    return a
