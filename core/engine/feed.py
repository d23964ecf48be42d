"""Arrival feeds: one serving group's requests streamed to its policy in chunks of Python lists.

The engine converts each chunk of the trace's numpy columns to Python lists
once (list indexing is what a policy's tight ``on_arrivals`` loop does
fastest), so no per-request Python object outlives its chunk. ``charged``
counts the chunk's arrivals already charged to the group's scheduler-overhead
clock (:mod:`.overhead`, charged lazily); with admission control
(:mod:`.admission`) the policy is handed arrivals up to ``lim`` only.
"""

from __future__ import annotations

import numpy as np


class Feed:
    """The arrivals of one serving group, streamed in chunks of ``chunk`` requests."""

    __slots__ = ("ids", "arrival", "deadline", "model", "stream", "next", "n", "chunk",
                 "t", "tn", "d", "m", "s", "r", "pos", "hi", "charged", "lim")

    def __init__(self, ids: np.ndarray | None, arrival: np.ndarray, deadline: np.ndarray,
                 model: np.ndarray, stream: np.ndarray, chunk: int) -> None:
        self.ids = ids  # global request ids of this group, or None for "all requests"
        self.arrival, self.deadline, self.model, self.stream = arrival, deadline, model, stream
        self.n = len(arrival) if ids is None else len(ids)
        self.chunk = chunk
        self.next = 0
        self.t: list[int] = []
        self.d: list[int] = []
        self.m: list[int] = []
        self.s: list[int] = []
        self.r: list[int] = []
        self.tn = np.empty(0, np.int64)
        self.pos = self.hi = self.charged = self.lim = 0

    def refill(self) -> bool:
        """Load the next chunk; False when the group has no arrivals left."""
        a = self.next
        if a >= self.n:
            return False
        b = min(a + self.chunk, self.n)
        if self.ids is None:
            sl = slice(a, b)
            self.r = list(range(a, b))
        else:
            sl = self.ids[a:b]
            self.r = sl.tolist()
        self.tn = self.arrival[sl]
        self.t = self.tn.tolist()
        self.d = self.deadline[sl].tolist()
        self.m = self.model[sl].tolist()
        self.s = self.stream[sl].tolist()
        self.pos, self.hi, self.next, self.charged, self.lim = 0, b - a, b, 0, 0
        return True
