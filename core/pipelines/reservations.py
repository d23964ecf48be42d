"""Algorithm 2 of PPipe (Appendix A.3): ``probe`` and ``reserve`` over the reservation tables (§5.4).

The tables (:class:`~.table.Reservations`: per-resource intervals,
``earliestSlot``, ``markReserved`` and the per-pool index) live in
:mod:`.table`; they are re-exported here.

:func:`probe` is Algorithm 2's ``probe()``: stage by stage, every vGPU of the
pool is a candidate — the feature map must cross the last GPU's uplink and
this GPU's downlink at the same time, then the GPU must be free for the
partition's latency — and the one finishing earliest is kept, ties to the
first in pool order. The answer is the minimum of ``(GPU start, position in
pool order)``; the shortcuts below find it without trying every vGPU and
never change it (``tests/test_ppipe_dataplane.py`` checks the finish time
against a literal Algorithm 2, ``tests/test_ppipe_probe_index.py`` checks
every reservation against the plain scan).

First stage: its vGPUs only ever receive first-stage reservations, each
starting at the earliest free time ≥ the (non-decreasing) scheduler clock, so
their reservations never leave a gap after ``now`` and ``earliestSlot`` on
them is ``max(now, last reservation end)``: the winner is the vGPU whose
reservations end first, or the first in pool order among those already free.
With the pool index that is the smallest key (or, when two or more are free,
one pass over the pool that stops at the first free vGPU).

Later stages: the previous server's uplink alone gives ``tu``, the earliest a
transfer can start, and ``t_free = tu + transfer``. When no vGPU of the pool
has a gap after ``t_free`` (the pool's largest ``busy_from`` ≤ ``t_free``: the
usual case) and the partition takes time, a vGPU ``w`` starts at exactly
``max(transfer end, last_end[w])`` ≥ ``max(t_free, last_end[w])``, so the pool
index is walked in order of ``last_end`` and the walk stops at the first vGPU
whose lower bound cannot beat the best start found — usually after one or two
vGPUs (and none at all when the vGPU free first frees up after ``t_free`` and
its downlink is free at ``tu``: it starts at its ``last_end``, which every
other key exceeds). Otherwise :func:`_scan` tries the vGPUs in pool order (skipping those
busy without a gap beyond the best start so far).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass

from shepherd.core.pipelines.table import PRUNE, Reservations
from shepherd.core.rules.ppipe import stage_score

__all__ = ["PipeRuntime", "Reservations", "probe", "probe_scored", "reserve", "stage_views"]

NEVER = 1 << 62


@dataclass
class PipeRuntime:
    """A pooled pipeline as the data plane sees it: pools of vGPUs and per-batch latencies."""

    model: int
    batch: int  # the MILP's unified batch size bs_i
    workers: list[list[int]]  # vGPU ids per stage
    nodes: list[list[int]]  # server of each vGPU, aligned with ``workers``
    lat: list[list[int]]  # lat[stage][b], µs (index 0 unused)
    transfer_in: list[list[int]]  # transfer into stage j at batch b (stage 0: zeros)
    max_batch: int  # largest batch profiled at every stage

    def __post_init__(self) -> None:
        #: :func:`stage_views` of the table probed last: a one-entry cache in front of
        #: ``Reservations.views`` (a plain attribute, not a field: ``asdict`` must not copy a table)
        self._view: tuple | None = None
        #: :func:`probe_scored`'s candidates, keyed by the table they were made for
        self._cands: tuple | None = None


def stage_views(res: Reservations, pipe: PipeRuntime) -> tuple:
    """``(res, first, later, pipe)``: per-stage constants for :func:`probe` on ``res`` (cached in ``res.views``).

    Candidates are ``(vGPU, its server's downlink, its server's uplink)`` in
    pool order; ``first`` is ``(lat, candidates, keys, shift, mask)`` and each
    later stage ``(lat, transfer_in, candidates, keys, pool id, shift, mask)``,
    with ``keys`` the pool's index (``key >> shift``: last_end, ``key & mask``: position) (:meth:`~.table.Reservations.index_pool`) or
    ``None`` for the plain scan.
    """
    stages = []
    for j, (pool, nodes) in enumerate(zip(pipe.workers, pipe.nodes)):
        cands = [(w, res.downlink(node), res.uplink(node)) for w, node in zip(pool, nodes)]
        keys, pid, shift = res.index_pool(list(pool)) or (None, -1, 0)
        stages.append((pipe.lat[j], pipe.transfer_in[j], cands, keys, pid, shift, (1 << shift) - 1))
    lat, _, cands, keys, _, shift, mask = stages[0]
    got = res.views[id(pipe)] = (res, (lat, cands, keys, shift, mask), tuple(stages[1:]), pipe)
    return got


def probe(res: Reservations, pipe: PipeRuntime, bs: int, now: int,
          bound: int = NEVER) -> tuple[int, int, list[tuple[int, int, int]]] | None:
    """Algorithm 2 ``probe(pipeline, bs)`` → (finish time, wait time, reservations [(res, start, dur)]).

    ``None`` when the wait time is certainly ``≥ bound`` (Algorithm 1 step 1
    only wants a pipeline that waits strictly less than the best so far): the
    wait accumulated by the stages probed so far never decreases.

    The reservations list holds the first stage's vGPU, then per later stage
    (uplink, downlink, vGPU): the GPU slots are ``resv[::3]``.
    """
    view = pipe._view  # the last table probed (usually the only one), else the table's cache
    if view is None or view[0] is not res:
        view = res.views.get(id(pipe))
        if view is None or view[3] is not pipe:  # (an id is reused only once its object is gone)
            view = stage_views(res, pipe)
        pipe._view = view
    _, (lat, cands, keys, shift, mask), later, _ = view
    last_end, pool_bf = res.last_end, res.pool_bf
    li = lat[bs]
    busy = li
    if keys is not None and (t := keys[0] >> shift) > now:  # all busy: the vGPU whose reservations end first
        w, _, up = cands[keys[0] & mask]
    elif keys is not None and (len(keys) == 1 or keys[1] >> shift > now):  # exactly one free
        t = now
        w, _, up = cands[keys[0] & mask]
    else:  # the first free in pool order, else the earliest end (a plain loop beats min(key=) here)
        t = NEVER
        for w0, _, up0 in cands:
            lw = last_end[w0]
            if lw <= now:
                w, t, up = w0, now, up0
                break
            if lw < t:
                w, t, up = w0, lw, up0
    if t - now >= bound:
        return None
    out: list[tuple[int, int, int]] = [(w, t, li)]
    tg = t + li
    for lat, tin, cands, keys, pid, shift, mask in later:
        li = lat[bs]
        ln = tin[bs]
        busy += li + ln
        # the earliest the transfer can start on the previous server's uplink alone
        tu = res.fit(up, tg, ln) if last_end[up] > tg else tg
        t_free = tu + ln
        if bound < NEVER:  # the GPU start to beat: at first the start at which the wait reaches bound
            thr = now + busy + bound - li
            if t_free >= thr:
                return None
            best_key = thr << shift
        else:
            thr = best_key = NEVER  # (NEVER exceeds every key)
        if keys is None or li <= 0 or pool_bf[pid] > t_free:
            got = _scan(res, cands, up, tu, t_free, li, ln, thr)
            if got is None:  # every vGPU makes the wait reach bound
                return None
            best, best_ts, thr = got
        elif (key := keys[0]) < best_key and (lw := key >> shift) >= t_free and (
                ln <= 0 or last_end[cands[key & mask][1]] <= tu):
            # the vGPU free first, free only after t_free, its downlink free from tu: it starts at lw,
            # and every other vGPU starts at or after its own (larger) key — the walk's first step
            best, best_ts, thr = cands[key & mask], tu, lw
        else:  # walk the pool in order of last_end (module docstring)
            best = None
            low = t_free << shift
            for key in keys:
                if key >= best_key:
                    break  # this and every later vGPU start too late
                lw = key >> shift
                i = key & mask
                if lw < t_free:
                    if low | i >= best_key:
                        continue
                    lw = t_free
                c = cands[i]
                down = c[1]
                if last_end[down] > tu and ln > 0:
                    ts = _link_slot(res.fit, up, down, tu, ln)
                    te = ts + ln
                else:
                    ts, te = tu, t_free
                key = ((lw if lw > te else te) << shift) | i
                if key < best_key:
                    best_key, best, best_ts = key, c, ts
            if best is None:
                return None
            thr = best_key >> shift
        w, down, upw = best
        out += ((up, best_ts, ln), (down, best_ts, ln), (w, thr, li))
        tg = thr + li
        up = upw
    return tg, tg - now - busy, out


def _link_slot(fit, up: int, down: int, ts: int, ln: int) -> int:
    """``earliestSlot((uplink, downlink), ts, ln)`` of Algorithm 2 for one transfer: the earliest
    start ≥ ``ts`` at which both links are free for ``ln`` µs (``fit`` is the table's single-resource slot)."""
    while True:
        s = fit(down, ts, ln)
        if s == ts:
            return ts
        ts = fit(up, s, ln)
        if ts == s:
            return ts


def _scan(res: Reservations, cands: list[tuple[int, int, int]], up: int, tu: int, t_free: int,
          li: int, ln: int, thr: int) -> tuple[tuple[int, int, int], int, int] | None:
    """One later stage of Algorithm 2 in pool order: (candidate, transfer start, GPU start) or ``None``.

    Only a GPU start ``< thr`` is accepted. Every candidate starts its
    transfer at ≥ ``tu``, so ``t_free + li`` is a lower bound that ends the
    scan, and a vGPU whose gap-free reserved block covers the best start so
    far is skipped: it could not finish strictly first.
    """
    fit, last_end, busy_from = res.fit, res.last_end, res.busy_from
    lower = t_free + li  # no vGPU of the pool can finish earlier
    # thr > t_free from here on (a better start found is ≥ t_free, and = t_free ends the scan),
    # so "busy from t_free without a gap until lw ≥ thr" needs only two tests: lw ≥ sthr
    # (= thr, or never for a zero-latency stage) and busy_from ≤ t_free
    sthr = thr if li > 0 else NEVER
    best = None
    for w, down, upw in cands:
        lw = last_end[w]
        if lw >= sthr and t_free >= busy_from[w]:
            continue  # its GPU is busy without a gap until lw: cannot finish first
        if last_end[down] > tu and ln > 0:
            ts = _link_slot(fit, up, down, tu, ln)
            t = ts + ln
        else:
            ts, t = tu, t_free
        if lw > t:
            if t >= thr:  # cannot beat the best even if the GPU were free
                continue
            t = lw if t >= busy_from[w] and li > 0 else fit(w, t, li)
        if t < thr:
            thr, best, best_ts = t, (w, down, upw), ts
            if t + li == lower:
                break
            if li > 0:
                sthr = t
    return None if best is None else (best, best_ts, thr)


def reserve(res: Reservations, resv: list[tuple[int, int, int]], now: int) -> None:
    """Algorithm 2 ``reserve(resv)``: :meth:`Reservations.reserve` of each, appends (and their index upkeep) inlined.

    A reservation starting exactly when the resource's last one ends extends
    that interval instead of adding one (the same busy time, so every
    ``earliestSlot`` answer is unchanged; fewer intervals to keep).
    """
    starts, ends, last_end, busy_from = res.starts, res.ends, res.last_end, res.busy_from
    member = res.member
    for r, start, dur in resv:
        last = last_end[r]
        if start < last or dur <= 0:  # an insert or a no-op: the general path
            res.reserve(r, start, dur, now)
            continue
        end = start + dur
        e = ends[r]
        if start == last and e:  # right after the last reservation: extend it
            e[-1] = end
        else:
            s = starts[r]
            if len(e) > PRUNE and e[0] <= now:
                k = bisect_right(e, now)
                del s[:k]
                del e[:k]
            s.append(start)
            e.append(end)
            if start > last:
                busy_from[r] = start
        last_end[r] = end
        m = member[r]
        if m is not None:  # Reservations._appended, inlined
            keys, i, shift, pid = m
            key = (end << shift) | i  # the new key first (it is larger, so the list is never empty)
            if key > keys[-1]:  # usual: it is now the vGPU free last
                keys.append(key)
            else:
                insort(keys, key)
            key = (last << shift) | i
            if keys[0] == key:  # usual: the vGPU free first was chosen
                del keys[0]
            else:
                del keys[bisect_left(keys, key)]
            if start > last and start > res.pool_bf[pid]:
                res.pool_bf[pid] = start


def probe_scored(res: Reservations, pipe: PipeRuntime, bs: int, now: int,
                 uplink_score: bool = True) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Algorithm 2 ``probe`` by a plain scan, with the artifact's GPU score (rule (a), :mod:`.rules`).

    Same layout and answer types as :func:`probe`. Every vGPU of each stage's
    pool is a candidate: its transfer takes the earliest common slot of the
    previous server's uplink and its downlink, then the GPU's earliest slot.
    With ``uplink_score`` a candidate of a non-last stage is scored by the
    later of its finish time and its server uplink's last reservation (the
    next transfer leaves through that uplink), the last stage by its finish
    time; without it the score is the finish time (the paper's Algorithm 2,
    the same choice as :func:`probe`). Ties go to the first in pool order.
    A candidate is skipped, without changing the answer, when a lower bound
    of its score (transfer and GPU free at once; its uplink's last end) does
    not beat the best so far.
    """
    cached = pipe._cands
    if cached is None or cached[0] is not res:
        cached = pipe._cands = (res, [[(w, res.downlink(n), res.uplink(n)) for w, n in zip(pool, nodes)]
                                      for pool, nodes in zip(pipe.workers, pipe.nodes)])
    stages = cached[1]
    fit, last_end = res.fit, res.last_end
    last_j = len(stages) - 1
    out: list[tuple[int, int, int]] = []
    tg = now
    up = -1
    busy = 0
    for j, cands in enumerate(stages):
        li = pipe.lat[j][bs]
        ln = pipe.transfer_in[j][bs] if j else 0
        busy += li + ln
        score_up = uplink_score and j < last_j
        floor = tg + ln + li  # no candidate finishes earlier
        best = NEVER
        pick = None
        for c in cands:
            w, down, upw = c
            if score_up:
                lu = last_end[upw]
                if (lu if lu > floor else floor) >= best:
                    continue
            elif floor >= best:
                break  # (scores only grow from here: none can beat the best)
            if j and ln > 0 and (last_end[up] > tg or last_end[down] > tg):
                ts = _link_slot(fit, up, down, fit(up, tg, ln), ln)  # (_link_slot starts from a free uplink)
            else:
                ts = tg
            start = fit(w, ts + ln, li)
            score = stage_score(start, li, score_up, last_end[upw])
            if score < best:
                best, pick = score, (c, ts, start)
        (w, down, upw), ts, start = pick
        if j:
            out += ((up, ts, ln), (down, ts, ln), (w, start, li))
        else:
            out.append((w, start, li))
        tg = start + li
        up = upw
    return tg, tg - now - busy, out
