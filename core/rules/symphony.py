"""Symphony's rules as numbers (Symphony §4.2 Eqs. 2–3, §4.3; the authors' ``BatchSizeEstimator``, ``RpsMeter``
and ``kBetaLambda``): what :mod:`shepherd.core.policies.symphony_rules` calls and Symphony's kernel compiles."""

from __future__ import annotations

import math
from bisect import bisect_right


def target_batch(lat, budget_us: float, d_data_us: float, rate: float, std: float, max_batch: int,
                 xrps: float, xstd: float) -> int:
    """The target batch of Eqs. 2–3 as the authors' ``BatchSizeEstimator(xrps, xstd)`` solves them (§4.2).

    ``lat[b]`` is ℓ(b) in µs. With r = xrps·rate + xstd·std (req/s): the largest b before the first b whose
    ``ℓ(b)·(1 + 1/max(1, n)) > budget − d_data·b`` with ``n = r·ℓ(b)/b`` GPUs (Eqs. 2 and 3); when that n is
    ≤ 1 (less than a GPU's worth of load), the largest b with ``ℓ(b) + b/r ≤ budget`` instead (Nexus's
    rule for a model below one GPU). At least 1, at most ``max_batch``.
    """
    r = xrps * rate + xstd * std
    if r <= 0:
        return 1
    b, n = max_batch, 0.0
    for bs in range(1, max_batch + 1):
        sec = lat[bs] / 1e6
        n = r * sec / bs
        if sec * (1 + 1 / max(1.0, n)) > (budget_us - d_data_us * bs) / 1e6:
            b = max(1, bs - 1)
            break
    if n > 1:
        return b
    for bs in range(2, max_batch + 1):
        if lat[bs] / 1e6 + bs / r + d_data_us * bs / 1e6 > budget_us / 1e6:
            return bs - 1
    return max_batch


def secant_beta_s(lat, b: int, target: int) -> float:
    """β of the authors' ``kBetaLambda``: the intercept (s) of the line through (b, ℓ(b)) and (x, ℓ(x)),
    x the target batch, or b + 1 when b is the target."""
    x = target if b != target else b + 1
    alpha = (lat[x] - lat[b]) / (x - b)
    return (lat[x] - alpha * x) / 1e6


def early(rule: int, b: int, beta_s: float, lam: float, avg: float, std: float, lat, budget_us: float,
          d_data_us: float, max_batch: int, xrps: float, xstd: float) -> bool:
    """Whether a candidate of ``b`` requests that can still grow may go before its ``sched_at`` under rule
    number ``rule`` of :data:`shepherd.core.policies.symphony_rules.RULES` (§4.3 and the authors' rules, that
    module's docstring): ``text`` — b ≥ β·λ (``beta_s`` the profile's β, ``lam`` §4.3's window λ); ``frontrun``
    — never; ``target-batch`` — b ≥ the target batch (:func:`target_batch` at the meter's ``avg``, ``std``);
    ``beta-lambda-authors`` — b ≥ the secant's β (:func:`secant_beta_s`) · ``avg``."""
    if rule == 0:
        return b >= beta_s * lam
    if rule == 1:
        return False
    target = target_batch(lat, budget_us, d_data_us, avg, std, max_batch, xrps, xstd)
    if rule == 2:
        return b >= target
    return b >= secant_beta_s(lat, b, min(target, max_batch)) * avg


def meter_rates(total: int, sumsq: int, k: int, span_us: int) -> tuple[float, float]:
    """The authors' ``RpsMeter::Get``: over ``k`` buckets of ``span_us`` holding ``total`` arrivals (their
    counts' squares summing to ``sumsq``), the mean and the sample standard deviation of the buckets' rates
    (req/s)."""
    avg = total / k
    var = (sumsq - k * avg * avg) / (k - 1) if k > 1 else 0.0
    per_s = 1e6 / span_us
    return avg * per_s, math.sqrt(max(0.0, var)) * per_s


def meter_get(st, bucket, count, now: int, span: int) -> tuple[float, float]:
    """``RpsMeter::Get`` at ``now`` (:func:`meter_evict`, then :func:`meter_rates` over the buckets since time 0,
    at most the ring's size)."""
    cur = meter_evict(st, bucket, count, now, span)
    k = cur + 1 if cur + 1 < len(bucket) else len(bucket)
    return meter_rates(st[2], st[3], k, span)


def window_lo(arrived, lo: int, end: int, now: int, window_us: int) -> int:
    """§4.3's window: the first of the arrival times ``arrived[lo:end]`` (in order) inside ``(now − window, now]``
    — the earlier ones leave λ's window for good."""
    while lo < end and arrived[lo] <= now - window_us:
        lo += 1
    return lo


def window_rate(n: int, window_us: int, since_first_us: int) -> float:
    """§4.3's λ (req/s): the ``n`` arrivals of the last ``window_us`` over min(window, the time since the model's
    first arrival); 0 before any (``since_first_us`` 0)."""
    span = min(window_us, since_first_us)
    return n * 1e6 / span if span > 0 else 0.0


def fit(lat, ld, d: int, now: int, g: int, top: int, mono) -> int:
    """The largest b ≤ ``top`` whose batch, started at ``max(g, now + delay(b))`` (a GPU free at ``g``), ends
    by the deadline ``d``: ``ℓ(b) ≤ d − g`` and ``ℓ(b) + delay(b) = ld[b] ≤ d − now`` (§4.3, Appendix C
    ``exec_at``); 0 if none. ``mono``: both tables non-decreasing (bisected: the largest b of the first, then,
    if its ``ld`` is over, the second's below it); otherwise the sizes from ``top`` down
    (:mod:`shepherd.core.rules.latency`)."""
    if mono:
        b = bisect_right(lat, d - g, 1, top + 1) - 1
        if b > 0 and ld[b] > d - now:
            b = bisect_right(ld, d - now, 1, b + 1) - 1
        return b
    b = top
    while b > 0 and (lat[b] > d - g or ld[b] > d - now):
        b -= 1
    return b


def cutoff(lat, ld, now: int, g: int, top: int, mono) -> int:
    """The earliest deadline a batch can still meet, a GPU free at ``g`` (§4.3's pruning: a head no batch can
    serve in time is dropped): the least ``max(g + ℓ(b), now + ld[b])`` over b ≤ ``top`` (the sizes the queue
    allows) — b = 1 on monotone tables (``mono``), so a head a batch of two would serve on a dipping table
    (:mod:`shepherd.core.rules.latency`) is kept."""
    best = max(g + lat[1], now + ld[1])
    if not mono:
        for b in range(2, top + 1):
            end = max(g + lat[b], now + ld[b])
            if end < best:
                best = end
    return best


def goes_now(work_conserving: bool, full: bool, now: int, sched_at: int) -> bool:
    """Whether a candidate is schedulable whatever the early rule says (§4.3, Appendix C): work-conserving
    Symphony, a full candidate (it cannot grow), or its ``sched_at`` reached."""
    return work_conserving or full or now >= sched_at


def retry_at(now: int, sched_at: int) -> int:
    """When an idle GPU looks again at a candidate not yet schedulable: at its ``sched_at`` (Appendix C's model
    timer), at least 1 µs ahead."""
    return sched_at if sched_at > now + 1 else now + 1


def earlier_gpu(free_x: int, x: int, free_k: int, k: int) -> bool:
    """Whether GPU ``x`` (free since ``free_x``) is granted before GPU ``k`` (−1: none yet): the one freed
    earliest, then the lower index (Appendix C: the earliest available GPU takes the candidate)."""
    return k < 0 or free_x < free_k or (free_x == free_k and x < k)


def prefers_waiting(best_at: int, wait_at: int, rank_all: bool) -> bool:
    """``rank="all"`` (a labelled deviation, :mod:`shepherd.core.policies.symphony`): the earliest waiting
    candidate (``sched_at`` ``wait_at``) goes instead of the earliest schedulable one (``best_at``) when it is
    earlier."""
    return rank_all and wait_at < best_at


def frontrun(ld, dl: int, b: int, n: int, max_batch: int) -> tuple[int, bool]:
    """A candidate of ``b`` of its model's ``n`` queued requests, ``dl`` the head's deadline (§4.3, Appendix C
    ``Candidate``; b from :func:`fit`): its ``sched_at``, the latest moment it can still grow by one request
    (``dl − ld[b + 1]``; ``dl − ld[b]`` at the max batch), and whether it is full (the max batch, or not every
    queued request in it)."""
    return (dl - ld[b] if b >= max_batch else dl - ld[b + 1]), b >= max_batch or b < n


def window_start(qd, h: int, e: int, lat, ld, now: int, g: int, max_batch: int, mono) -> tuple[int, int]:
    """``prune="window"`` (a deviation from §4.3, written down in :mod:`shepherd.core.policies.symphony`): the
    slot from which the queue ``qd[h:e]`` (sorted deadlines) is kept — ``h``, or the start of the earliest of
    the largest feasible windows of consecutive deadlines (:func:`fit` of its first deadline, at most its
    length) when the head's own batch is below ¾ of that window's. ``f(i) = fit(qd[i])`` is non-decreasing in
    i and ``e − i`` decreasing, so the best window starts at the first i with ``f(i) ≥ e − i``, or just before.
    Returns (that slot, the head's own batch: the candidate's when nothing is cut)."""
    lo, hi = h, e
    while lo < hi:
        mid = (lo + hi) >> 1
        if fit(lat, ld, qd[mid], now, g, max_batch, mono) >= e - mid:
            hi = mid
        else:
            lo = mid + 1
    head_b = fit(lat, ld, qd[h], now, g, min(e - h, max_batch), mono)
    best_i, best_b = h, head_b
    for i in (lo - 1, lo):
        if h <= i < e:
            b = fit(lat, ld, qd[i], now, g, min(e - i, max_batch), mono)
            if b > best_b:
                best_i, best_b = i, b
    # only when the head's own batch is below 3/4 of the best one: a backlog that shrinks batches (overload) is
    # cut, a burst's slightly later deadlines never cost requests for a slot or two
    return (best_i if best_i > h and 4 * head_b < 3 * best_b else h), head_b


def meter_evict(st, bucket, count, now: int, span: int) -> int:
    """The authors' ``RpsMeter`` (§4.2's rate λ as their dispatcher measures it), its expired buckets dropped;
    returns the current bucket's index ``now // span``. The meter is a ring of ``len(bucket)`` buckets
    (index, count) and ``st = [head, n, total, sumsq]``: the ``n`` non-empty ones from ``head`` in order,
    their counts' sum and sum of squares."""
    cur, size = now // span, len(bucket)
    while st[1] > 0 and bucket[st[0]] <= cur - size:
        c = count[st[0]]
        st[2] -= c
        st[3] -= c * c
        st[0] = (st[0] + 1) % size
        st[1] -= 1
    return cur


def meter_hit(st, bucket, count, now: int, span: int) -> None:
    """``RpsMeter::Hit``: one arrival at ``now`` counted in the current bucket (:func:`meter_evict`)."""
    cur, size = meter_evict(st, bucket, count, now, span), len(bucket)
    last = (st[0] + st[1] - 1) % size
    if st[1] == 0 or bucket[last] != cur:  # a new bucket
        last = (last + 1) % size
        bucket[last], count[last] = cur, 0
        st[1] += 1
    st[3] += 2 * count[last] + 1
    count[last] += 1
    st[2] += 1
