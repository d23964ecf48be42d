"""Per-model deadline-ordered request queues with incremental state.

Shepherd Algorithm 1 line 3: "Q_m ← priority queue of m's requests sorted by
deadlines". Each queue is two parallel Python lists (deadlines, request ids)
sorted by deadline, plus a head offset: arrivals whose deadline is not earlier
than the tail append in O(1) (the common case — one SLO per stream); others
(re-entered preempted requests, mixed SLOs) insert by bisection after equal
deadlines (FIFO among ties). Expired heads are skipped lazily by moving the
head offset; the dead prefix is compacted now and then, so every operation is
O(log n) plus C-speed memmoves.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from shepherd.core.rules.flex import largest_feasible

COMPACT_AT = 4096


class DeadlineQueues:
    """``n`` deadline-sorted queues (see module docstring)."""

    __slots__ = ("d", "r", "h")

    def __init__(self, n: int) -> None:
        self.d: list[list[int]] = [[] for _ in range(n)]
        self.r: list[list[int]] = [[] for _ in range(n)]
        self.h: list[int] = [0] * n

    def push(self, m: int, deadline: int, rid: int) -> None:
        qd = self.d[m]
        if not qd or deadline >= qd[-1]:
            qd.append(deadline)
            self.r[m].append(rid)
        else:
            i = bisect_right(qd, deadline, self.h[m])
            qd.insert(i, deadline)
            self.r[m].insert(i, rid)

    def length(self, m: int) -> int:
        return len(self.d[m]) - self.h[m]

    def head_deadline(self, m: int) -> int | None:
        h = self.h[m]
        qd = self.d[m]
        return qd[h] if h < len(qd) else None

    def expire(self, m: int, cutoff: int) -> list[int]:
        """Remove and return the requests with deadline < ``cutoff`` (they cannot be served)."""
        qd = self.d[m]
        h = self.h[m]
        if h >= len(qd) or qd[h] >= cutoff:
            return []
        j = bisect_left(qd, cutoff, h)
        dead = self.r[m][h:j]
        self.h[m] = j
        self._compact(m)
        return dead

    def largest_feasible(self, m: int, now: int, lat: list[int], max_batch: int,
                         mono: bool = True) -> tuple[int, int]:
        """Largest b ≤ max_batch such that b queued requests all have deadline ≥ now + ℓ(b), and the list
        index ``i0`` of the first (the batch is the b earliest-deadline requests from there); b = 0 if none.
        The rule is :func:`shepherd.core.rules.flex.largest_feasible`, which Flex's kernel compiles."""
        qd = self.d[m]
        return largest_feasible(qd, self.h[m], len(qd), now, lat, max_batch, mono)

    def take(self, m: int, i0: int, b: int) -> list[int]:
        """Dequeue the ``b`` requests starting at list index ``i0``."""
        qr = self.r[m]
        out = qr[i0:i0 + b]
        if i0 == self.h[m]:
            self.h[m] = i0 + b
            self._compact(m)
        else:
            del qr[i0:i0 + b]
            del self.d[m][i0:i0 + b]
        return out

    def drain(self, m: int) -> list[int]:
        out = self.r[m][self.h[m]:]
        self.d[m].clear()
        self.r[m].clear()
        self.h[m] = 0
        return out

    def _compact(self, m: int) -> None:
        h = self.h[m]
        if h == len(self.d[m]):
            self.d[m].clear()
            self.r[m].clear()
            self.h[m] = 0
        elif h >= COMPACT_AT and 2 * h >= len(self.d[m]):
            del self.d[m][:h]
            del self.r[m][:h]
            self.h[m] = 0
