"""Smooth weighted round-robin: spread a stream's requests over its allocations by weight
(:func:`shepherd.core.rules.nexus.swrr_pick`, which Nexus's kernel compiles).

The nginx rule a Nexus frontend applies to a session's backends (Nexus, SOSP '19
§6.2: requests are routed to the session's GPUs in proportion to their
planned shares): each pick adds every entry's weight to its current value,
takes the entry with the largest current value (the first on ties) and
subtracts the total weight from it. From the start, no entry is ever a whole
request ahead of its share (and none N − 1 behind, for N entries), and
equal-weight entries alternate.

A session served by hundreds of dedicated GPUs (Shepherd Fig. 10 at N = 400)
has hundreds of entries: there the scan runs over numpy arrays (the same
float operations in the same order per entry, and ``argmax`` keeps the first
maximum, so the picks are the same as the scalar scan's).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from shepherd.core.rules.nexus import swrr_pick

#: entries above this are scanned with numpy (below, a Python scan is faster)
VECTOR_MIN_ENTRIES = 16


class SmoothWeightedRoundRobin:
    """Picks among ``len(weights)`` entries; ``current`` is the initial state (default zeros)."""

    __slots__ = ("weights", "current", "total", "n")

    def __init__(self, weights: Sequence[float], current: Sequence[float] | None = None) -> None:
        self.n = len(weights)
        total = 0.0
        for w in weights:  # summed in entry order, once (the scan's running total)
            total += w
        self.total = total
        cur = list(current) if current is not None else [0.0] * self.n
        if self.n > VECTOR_MIN_ENTRIES:
            self.weights: list[float] | np.ndarray = np.asarray(weights, dtype=np.float64)
            self.current: list[float] | np.ndarray = np.asarray(cur, dtype=np.float64)
        else:
            self.weights, self.current = list(weights), cur

    def pick(self) -> int:
        """The index of the next entry."""
        n = self.n
        if n == 1:
            return 0
        cur = self.current
        if n <= VECTOR_MIN_ENTRIES:
            return swrr_pick(cur, self.weights, 0, n, self.total)
        cur += self.weights
        best = int(cur.argmax())
        cur[best] -= self.total
        return best
